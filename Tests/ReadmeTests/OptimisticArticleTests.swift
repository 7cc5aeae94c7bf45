// The article "Optimistic Updates", line for line; `.ci/check-readme` checks that every line of
// its checked blocks is in this target. It uses the `Issue` model of the article "Working with
// Real Payloads" (RealPayloadsArticleTests.swift).

import Concord
import Foundation
import Testing

@Test func optimisticUpdatesArticle() throws {
  let hook: Issue = try Server.decode(Server.hook)

  let map = IdentityMap()
  let issue = map.store(try Server.decode(Server.page) as [Issue])
  let close = map.optimistic { transaction in
    transaction.update(Issue.self, id: 1) { $0.state = "closed" }
  }
  // issue.value[0].state == "closed", on every screen, at once
  #expect(issue.value[0].state == "closed")

  map.store(hook)  // a webhook arrives meanwhile: kept underneath, the issue still shows closed
  #expect(issue.value[0].state == "closed")
  #expect(issue.value[0].title == "Crash when the ring closes")

  close.rollback()  // the request failed: the issue shows the webhook's title, and is open
  #expect(issue.value[0].state == "open")
  #expect(issue.value[0].title == "Crash when a cycle closes")

  // Confirm with the server's answer: the issue closed, with the title a maintainer gave it
  // meanwhile, and the same updated_at.
  var answer = hook
  answer.state = "closed"
  answer.title = "Crash when a ring of members closes"
  let closeAgain = map.optimistic { transaction in
    transaction.update(Issue.self, id: 1) { $0.state = "closed" }
  }
  closeAgain.commit(confirmedBy: answer)  // the server's issue, same updated_at: it shows that
  #expect(issue.value[0].state == "closed")
  #expect(issue.value[0].title == "Crash when a ring of members closes")
}
