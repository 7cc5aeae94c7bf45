// The section "Sharing the store with extensions" of the article "Persistence and Offline",
// line for line; `.ci/check-readme` checks that every line of its checked block is in this
// target. Two stores on one file in one process are two processes to each other.

import Concord
import ConcordSQLite
import Foundation
import Testing

@Test func sharingTheStoreWithExtensions() throws {
  let directory = NSTemporaryDirectory() + "concord-article-\(UUID().uuidString)"
  try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
  defer { try? FileManager.default.removeItem(atPath: directory) }
  let path = directory + "/concord.sqlite"

  func openShared(at path: String, _ sharing: SQLiteStore.Sharing) throws -> IdentityMap {
    let map = IdentityMap(persistence: try SQLiteStore(path: path, sharing: sharing))
    map.persist(Issue.self)
    map.persist(User.self)
    map.persist(Label.self)
    map.persist(Milestone.self)
    return map
  }

  let app = try openShared(at: path, .shared)  // the app, in its process
  let widget = try openShared(at: path, .readOnly)  // its widget, in another
  let feed = widget.query(Issue.self)

  app.store(try Server.decode(Server.page) as [Issue])
  try app.flush()
  try widget.syncExternalChanges()  // the widget's timeline asks; it also wakes by itself
  #expect(feed.value.map(\.title).contains("Crash when the ring closes"))
}
