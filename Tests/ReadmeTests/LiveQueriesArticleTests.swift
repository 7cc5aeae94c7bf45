// The article "Live Queries and Collectors", line for line; `.ci/check-readme` checks that every
// line of its checked blocks is in this target. It uses the `Issue` model of the article "Working
// with Real Payloads" (RealPayloadsArticleTests.swift).

import Concord
import Foundation
import Testing

@Test func liveQueriesArticle() throws {
  let page: [Issue] = try Server.decode(Server.page)
  let hook: Issue = try Server.decode(Server.hook)
  var newIssue = hook
  newIssue.id = 3
  newIssue.title = "Queries"
  let shown = Seen()

  // Open a query.
  let map = IdentityMap()
  let openIssues = map.query(
    Issue.self, filter: { $0.state == "open" }, sortedBy: { $0.updatedAt > $1.updatedAt })
  let redraw = openIssues.observe { issues in print("open:", issues.map(\.title)) }
  let recorder = openIssues.observe { issues in
    shown.append(issues.map(\.title).joined(separator: ", "))
  }

  map.store(page)  // both issues are open: the newest first
  map.update(Issue.self, id: 2) { $0.state = "closed" }  // issue 2 leaves the list
  map.store(hook)  // issue 1 is retitled in place
  #expect(
    shown.values == [
      "Stubs wipe fields, Crash when the ring closes",
      "Crash when the ring closes",
      "Crash when a cycle closes",
    ])
  #expect(map.find(Issue.self, id: 2) == nil, "closed, and nothing else held it: released")

  // Look up by a field.
  let ged = map.query(Issue.self, where: \.user.id, equals: 7)
  let tenar = map.query(Issue.self, where: \.user.id, equals: 8)  // shares ged's index
  #expect(ged.value.map(\.id) == [1])
  #expect(tenar.value.isEmpty)

  // Collect changes.
  let audit = map.collector(Issue.self)
  let changes = map.collector(Issue.self)
  map.update(Issue.self, id: 1) { $0.state = "closed" }
  map.store(newIssue)
  map.remove(Issue.self, id: 1)
  for change in changes.drain() {
    switch change {
    case .inserted(let issue), .updated(let issue): print("save", issue.id)
    case .removed(let issue): print("delete", issue.id)
    }
  }
  // Issue 1: updated, then removed; issue 3: inserted (the open list holds it).
  let audited = audit.drain().map { change in
    switch change {
    case .inserted(let issue): "inserted \(issue.id)"
    case .updated(let issue): "updated \(issue.id)"
    case .removed(let issue): "removed \(issue.id)"
    }
  }
  #expect(audited == ["removed 1", "inserted 3"])
  #expect(changes.drain().isEmpty)
  #expect(openIssues.value.map(\.id) == [3])
  withExtendedLifetime((redraw, recorder, ged, tenar)) {}
}
