import Foundation
import TestSupport
import Testing

@testable import Concord

// What a layer shows, keeps alive and tells where it meets the rest of the map: commits of
// stamped values, writes underneath, outside transactions, removals from outside, and what a
// finished layer leaves. (Each case was once broken: a review of the first layers found them.)

@Suite("Optimistic layers: what a layer shows, keeps alive and tells, at its edges")
struct OptimisticVisibilityTests {
  @Test("commit of a Stamped entity updated without a new stamp keeps the layer's value")
  func stampedCommit() throws {
    let map = IdentityMap()
    let issue = map.store(try Recorded.decode(GitHubIssue.self, Recorded.retitledHook))
    let close = map.optimistic { $0.update(GitHubIssue.self, id: 1001) { $0.state = "closed" } }
    close.commit()
    #expect(issue.value.state == "closed")
    // A newer server stamp underneath still wins over a commit.
    let reopen = map.optimistic { $0.update(GitHubIssue.self, id: 1001) { $0.state = "open" } }
    var fromServer = issue.value
    fromServer.title = "Newer"
    fromServer.state = "closed"
    fromServer.updatedAt = fromServer.updatedAt.addingTimeInterval(60)
    map.store(fromServer)
    reopen.commit()
    #expect(issue.value.state == "closed")
    #expect(issue.value.title == "Newer")
    map._core._checkInvariants()
  }

  @Test("an entity a layer stored unchanged keeps following what happens underneath")
  func unchangedNestedEntities() throws {
    let map = IdentityMap()
    let issue = map.store(try Recorded.decode(GitHubIssue.self, Recorded.retitledHook))
    let rename = map.optimistic { $0.update(GitHubUser.self, id: 7) { $0.login = "sparrowhawk" } }
    let retitle = map.optimistic { $0.update(GitHubIssue.self, id: 1001) { $0.title = "Mine" } }
    rename.rollback()
    #expect(issue.value.user.login == "ged", "the issue's layer did not change the user")
    retitle.commit()
    #expect(issue.value.user.login == "ged")
    #expect(issue.value.title == "Mine")
    map._core._checkInvariants()
  }

  @Test("a server write hidden under a layer tells nobody, even when lowering changed nothing")
  func noFlicker() {
    let map = IdentityMap()
    let layer = map.optimistic { $0.store(Counter(id: 9, value: 1)) }
    let counter = map.find(Counter.self, id: 9)!
    let seen = Locked<[Int]>([])
    let subscription = counter.observe { seen.append($0.value) }
    map.store(Counter(id: 9, value: 5))
    #expect(seen.value.isEmpty)
    #expect(counter.value.value == 1)
    layer.rollback()
    #expect(seen.value == [5])
    subscription.cancel()
    map._core._checkInvariants()
  }

  @Test("an outside transaction that throws keeps nothing underneath")
  func thrownOutsideTransaction() {
    struct Failure: Error {}
    let map = IdentityMap()
    let layer = map.optimistic { $0.store(Counter(id: 9, value: 1)) }
    #expect(throws: Failure.self) {
      try map.transaction { transaction in
        transaction.update(Counter.self, id: 9) { $0.value = 7 }
        throw Failure()
      }
    }
    layer.rollback()
    #expect(map.find(Counter.self, id: 9) == nil, "only the layer created it")
    map._core._checkInvariants()
  }

  @Test("a nested entity removed from outside does not come back through a layered aggregate")
  func nestedRemoval() {
    let map = IdentityMap()
    let board = storeBoardOfTwoJobs(in: map)
    let layer = map.optimistic { transaction in
      transaction.update(JobBoard.self, id: 1) { $0.jobs[1].title = "mine" }
    }
    map.remove(Job.self, id: 1)
    #expect(board.value.jobs.map(\.id) == [2])
    map.store(Counter(id: 1, value: 0))  // any later write
    #expect(map.find(Job.self, id: 1) == nil)
    #expect(board.value.jobs.map(\.id) == [2])
    layer.rollback()
    #expect(map.find(Job.self, id: 1) == nil)
    #expect(board.value.jobs.map(\.title) == ["b"])
    map._core._checkInvariants()
  }

  @Test("a finished layer keeps nothing alive")
  func finishedLayerHoldsNothing() {
    let map = IdentityMap()
    let layer = map.optimistic { $0.store(Counter(id: 1, value: 1)) }
    layer.commit()
    #expect(map._core.read { layer.nodes.isEmpty })
    #expect(map.count == 0)
  }
}
