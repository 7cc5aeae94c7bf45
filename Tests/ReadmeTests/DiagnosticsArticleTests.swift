// The article "Debugging and Diagnostics", line for line; `.ci/check-readme` checks that every
// line of its checked blocks is in this target. It uses the `Issue` model of the article
// "Working with Real Payloads" (RealPayloadsArticleTests.swift). The article's output comments
// are the lines this test expects.

import Concord
import Foundation
import Testing

@Test func diagnosticsArticle() throws {
  // The article prints; here both DiffLogger's lines and `print` are kept to be checked.
  let printed = Seen()
  // swift-format-ignore: AlwaysUseLowerCamelCase
  func DiffLogger() -> Concord.DiffLogger { Concord.DiffLogger(output: printed.append) }
  func print(_ value: Any) { printed.append("\(value)") }

  let map = IdentityMap(logger: DiffLogger())
  let feed = map.store(try Server.decode(Server.page) as [Issue])
  #expect(printed.values.count == 5)  // one `inserted` line per entity of the page
  #expect(printed.values.contains(#"Label(1) inserted: Label(id: 1, name: "bug")"#))
  printed.clear()
  map.store(try Server.decode(Server.hook) as Issue)
  // Issue(1).title: "Crash when the ring closes" → "Crash when a cycle closes"
  // Issue(1).updatedAt: 2026-11-20 10:00:00 +0000 → 2026-11-22 07:00:00 +0000
  // Issue(1).assignees[id: 7] removed: User(id: 7, login: "ged", name: nil, bio: nil, updatedAt: nil)
  // Issue(1).milestone: Milestone(id: 5, title: "Wave 2") → nil
  #expect(
    printed.values == [
      #"Issue(1).title: "Crash when the ring closes" → "Crash when a cycle closes""#,
      "Issue(1).updatedAt: 2026-11-20 10:00:00 +0000 → 2026-11-22 07:00:00 +0000",
      #"Issue(1).assignees[id: 7] removed: User(id: 7, login: "ged", name: nil, bio: nil, updatedAt: nil)"#,
      #"Issue(1).milestone: Milestone(id: 5, title: "Wave 2") → nil"#,
    ])
  printed.clear()

  print(map.holders(of: User.self, id: 7)!)
  // User(7): parent Issue(1), parent Issue(2)
  #expect(printed.values == ["User(7): parent Issue(1), parent Issue(2)"])
  printed.clear()

  print(map.statistics)
  // 4 entities (0 buffered), 1 handle, 0 subscriptions, 0 aliases, 0 queries, 0 collectors, 0 pending layers
  //   Issue: 2
  //   Label: 1
  //   User: 1
  #expect(
    printed.values == [
      """
      4 entities (0 buffered), 1 handle, 0 subscriptions, 0 aliases, 0 queries, 0 collectors, \
      0 pending layers
        Issue: 2
        Label: 1
        User: 1
      """
    ])
  withExtendedLifetime(feed) {}
}
