import Foundation
import Testing

@testable import Concord

// Indexed queries on the shapes of api.github.com (see RealPayloadTests): issues nesting user
// stubs, labels, assignees and a milestone, listed by state and by milestone.

private let newestFirst: @Sendable (GitHubIssue, GitHubIssue) -> Bool = {
  $0.updatedAt > $1.updatedAt
}

/// The indexes of `GitHubIssue` in `map`, for the tests that look inside.
private func indexCount(_ map: IdentityMap) -> Int {
  map._core.read { map._core.registry.table(for: GitHubIssue.self).consumers?.indexes.count ?? 0 }
}

@Suite("Indexed queries: find by a field, kept current")
struct IndexedQueryTests {
  @Test("open issues, newest first, from a recorded page and a webhook")
  func openIssuesFromAPage() throws {
    let map = IdentityMap()
    let page = try Recorded.decode([GitHubIssue].self, Recorded.issuesPage)
    map.store(page)  // nothing keeps the page: the queries do
    let open = map.query(GitHubIssue.self, where: \.state, equals: "open", sortedBy: newestFirst)
    let closed = map.query(GitHubIssue.self, where: \.state, equals: "closed")
    // Opened after the page was released: nothing left to find.
    #expect(open.value.isEmpty && closed.value.isEmpty)

    map.store(page)
    #expect(open.value.map(\.number) == [43, 42])
    #expect(closed.value.map(\.number) == [44])

    // The webhook retitles 42 and makes it the newest.
    map.store(try Recorded.decode(GitHubIssue.self, Recorded.retitledHook))
    #expect(open.value.map(\.number) == [42, 43])
    #expect(open.value.first?.title == "Crash when a cycle closes")

    // Closing 43 moves it from one list to the other.
    map.update(GitHubIssue.self, id: 1002) {
      $0.state = "closed"
      $0.updatedAt = $0.updatedAt.addingTimeInterval(3600 * 24)
    }
    #expect(open.value.map(\.number) == [42])
    // Without a comparator: the order first stored, the page's order.
    #expect(closed.value.map(\.number) == [43, 44])
    map._core._checkInvariants()
  }

  @Test("a nested user's profile reaches every indexed list that shows it")
  func nestedWritesReachTheList() throws {
    let map = IdentityMap()
    let open = map.query(GitHubIssue.self, where: \.state, equals: "open", sortedBy: newestFirst)
    map.store(try Recorded.decode([GitHubIssue].self, Recorded.issuesPage))
    map.store(try Recorded.decode(GitHubUser.self, Recorded.gedProfile))
    #expect(open.value.map(\.user.name) == [nil, "Sparrowhawk"])
    #expect(open.value.last?.assignees.first?.name == "Sparrowhawk")
    map._core._checkInvariants()
  }

  @Test("queries on one key path share one index, which goes with the last of them")
  func sharedIndex() throws {
    let map = IdentityMap()
    map.store(try Recorded.decode([GitHubIssue].self, Recorded.issuesPage))
    var open: EntityObserver<[GitHubIssue]>? = map.query(
      GitHubIssue.self, where: \.state, equals: "open")
    var closed: EntityObserver<[GitHubIssue]>? = map.query(
      GitHubIssue.self, where: \.state, equals: "closed")
    var again: EntityObserver<[GitHubIssue]>? = map.query(
      GitHubIssue.self, where: \.state, equals: "open", sortedBy: newestFirst)
    var byNumber: EntityObserver<[GitHubIssue]>? = map.query(
      GitHubIssue.self, where: \.number, equals: 42)
    #expect(indexCount(map) == 2)
    #expect(again?.value.count == open?.value.count)
    open = nil
    closed = nil
    #expect(indexCount(map) == 2)
    again = nil
    #expect(indexCount(map) == 1)
    byNumber = nil
    #expect(indexCount(map) == 0)
    #expect(map.count == 0)
    withExtendedLifetime((open, closed, again, byNumber)) {}
    map._core._checkInvariants()
  }

  @Test("an index opens on what is stored, and follows removal and release")
  func indexFollowsTheMap() throws {
    let map = IdentityMap()
    let page = map.store(try Recorded.decode([GitHubIssue].self, Recorded.issuesPage))
    let milestone = map.query(GitHubIssue.self, where: \.milestone?.id, equals: 5)
    #expect(milestone.value.map(\.number) == [42, 43])
    map.remove(GitHubIssue.self, id: 1001)
    #expect(milestone.value.map(\.number) == [43])
    // Removing the milestone sets it to nil in every issue holding it.
    map.remove(GitHubMilestone.self, id: 5)
    #expect(milestone.value.isEmpty)
    let none = map.query(GitHubIssue.self, where: \.milestone?.id, equals: nil)
    #expect(none.value.map(\.number) == [43, 44])
    withExtendedLifetime(page) {}
    map._core._checkInvariants()
  }

  @Test("an entity released while indexed leaves the index")
  func releasedLeavesTheIndex() {
    let map = IdentityMap()
    let one = map.query(Job.self, where: \.priority, equals: 1)
    var held: EntityObserver<Job>? = map.store(Job(id: 1, title: "a", isOpen: true, priority: 2))
    #expect(one.value.isEmpty)
    held = nil
    #expect(map.count == 0)
    // A new entity with the same id, stored later, is indexed afresh.
    map.store(Job(id: 1, title: "a", isOpen: true, priority: 1))
    #expect(one.value.map(\.id) == [1])
    withExtendedLifetime(held) {}
    map._core._checkInvariants()
  }
}
