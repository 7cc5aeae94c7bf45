// The article "Persistence and Offline", line for line; `.ci/check-readme` checks that every
// line of its checked blocks is in this target. It uses the `Issue` model of the article
// "Working with Real Payloads" (RealPayloadsArticleTests.swift).

import Concord
import ConcordSQLite
import Foundation
import Testing

@Test func persistenceAndOfflineArticle() throws {
  let directory = NSTemporaryDirectory() + "concord-article-\(UUID().uuidString)"
  try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
  defer { try? FileManager.default.removeItem(atPath: directory) }
  let path = directory + "/cache.sqlite"

  func openMap(at path: String) throws -> IdentityMap {
    let map = IdentityMap(persistence: try SQLiteStore(path: path))
    map.persist(Issue.self)
    map.persist(User.self)
    map.persist(Label.self)
    map.persist(Milestone.self)
    return map
  }

  let map = try openMap(at: path)
  _ = map.store(try Server.decode(Server.page) as [Issue])
  try map.flush()  // say, when the app moves to the background

  // The next launch: the feed is there before the network answers.
  let relaunched = try openMap(at: path)
  let cached = relaunched.find(Issue.self, id: 1)  // read from the file
  #expect(cached?.value.title == "Crash when the ring closes")
  #expect(cached?.value.user.login == "ged")
  #expect(cached?.value.labels.map(\.name) == ["bug"])
  #expect(cached?.value.milestone?.title == "Wave 2")
}
