import ConcordTesting
import Foundation
import TestSupport
import Testing

@testable import Concord

/// A GitHub issue as its list API returns it: it nests its author.
private struct ListedUser: Identifiable, Sendable, Equatable {
  var id: Int
  var login: String
}

private struct ListedIssue: Aggregate, Equatable {
  var id: Int
  var title: String
  var user: ListedUser
  static var nestedEntities: [NestedEntity<ListedIssue>] { [.init(\.user)] }

  static func make(_ number: Int, by user: ListedUser = .octocat) -> ListedIssue {
    ListedIssue(id: number, title: "Issue \(number)", user: user)
  }
}

extension ListedUser {
  static let octocat = ListedUser(id: 1, login: "octocat")
}

/// A GitHub-style server: the open issues, newest first, 2 a page, each page's `Link` header
/// naming the next page's URL; an issue closed leaves it.
private final class IssuesServer: Sendable {
  let open = Locked(Array((1...7).reversed()))

  /// The page at `url` (the first without one): the issues after `after`, and the next URL.
  func page(_ url: URL?) -> Page<ListedIssue, URL> {
    let after = url.flatMap { Int($0.lastPathComponent) }
    let issues = open.value.filter { after == nil || $0 < after! }.prefix(2)
    let next =
      issues.count == 2 && issues.last! > 1
      ? URL(string: "https://api.github.com/issues/after/\(issues.last!)") : nil
    return Page(issues.map { ListedIssue.make($0) }, older: next)
  }
}

/// Items are entities of the map: an edit anywhere shows in the list and tells its observers
/// once; a removal, by any route, takes the item out.
@Suite("Paged lists: items are the map's entities")
struct PagedEntitiesTests {
  let clock = ManualClock()

  /// A list of counters on `pager`, loaded with the pages `pages` (each `older` its last id,
  /// and none after the last page).
  func loaded(_ map: IdentityMap, _ pager: ScriptedPager<Counter, Int>, _ pages: [[Int]])
    async throws -> PagedResource<Counter, Int>
  {
    let list = map.pagedResource(ResourceKey<[Counter]>("counters"), retry: .none, load: pager.load)
    for (index, ids) in pages.enumerated() {
      let task = Task { index == 0 ? try await list.load() : (try await list.loadOlder(), []).1 }
      _ = await pager.nextCall()
      let older = index == pages.count - 1 ? nil : ids.last
      pager.respond(Page(ids.map { Counter(id: $0, value: 0) }, older: older, modifiedAt: 1))
      _ = try await task.value
    }
    return list
  }

  @Test("An edit anywhere shows in the items, and tells the observers once")
  func editShows() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = try await loaded(map, pager, [[3, 2], [1]])
    let recorder = PagedStateRecorder(list)
    map.store(Counter(id: 1, value: 5))
    #expect(list.state.items.map(\.value) == [0, 0, 5])
    #expect(recorder.states.count == 1 && recorder.states[0].items.map(\.value) == [0, 0, 5])
    // One write that edits an item of each page: one change.
    map.transaction { transaction in
      transaction.update(Counter.self, id: 3) { $0.value = 7 }
      transaction.update(Counter.self, id: 1) { $0.value = 8 }
    }
    #expect(recorder.states.count == 2, "told once for the write")
    #expect(recorder.states.last?.items.map(\.value) == [7, 0, 8])
    recorder.cancel()
  }

  @Test("A removal takes the item out of the list; the next page lands after what is left")
  func removalLeaves() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = map.pagedResource(ResourceKey<[Counter]>("counters"), retry: .none, load: pager.load)
    let first = Task { try await list.load() }
    _ = await pager.nextCall()
    pager.respond(Page([3, 2].map { Counter(id: $0, value: 0) }, older: 2))
    _ = try await first.value
    let recorder = PagedStateRecorder(list)
    map.remove(Counter.self, id: 2)
    #expect(list.state.items.map(\.id) == [3] && recorder.states.count == 1)
    let older = Task { try await list.loadOlder() }
    #expect(await pager.nextCall().description == "older than 2", "the cursor stays the page's")
    pager.respond(Page([1].map { Counter(id: $0, value: 0) }, older: nil))
    try await older.value
    #expect(list.state.items.map(\.id) == [3, 1])
    recorder.cancel()
  }

  @Test("A re-creation refused by its tombstone is not listed; a newer one is")
  func tombstoneRefused() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = try await loaded(map, pager, [[4, 3]])
    // The stream said 2 was deleted at 10; a stale page still has it.
    map.remove(Counter.self, id: 2, tombstone: 10)
    let refresh = Task { try await list.refresh() }
    _ = await pager.nextCall()
    pager.respond(Page([5, 4, 2].map { Counter(id: $0, value: 0) }, older: nil, modifiedAt: 5))
    try await refresh.value
    #expect(list.state.items.map(\.id) == [5, 4, 3], "2 refused: not listed")
    #expect(map.find(Counter.self, id: 2) == nil)
    let again = Task { try await list.refresh() }
    _ = await pager.nextCall()
    pager.respond(Page([6, 2, 5].map { Counter(id: $0, value: 1) }, older: nil, modifiedAt: 11))
    try await again.value
    #expect(list.state.items.map(\.id) == [6, 2, 5, 4, 3], "newer than its tombstone: listed")
  }

  @Test("An aggregate removed with a child declared .removeParent leaves the list")
  func removeParentCascade() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<MastodonBoostingStatus, String>()
    let list = map.pagedResource(
      ResourceKey<[MastodonBoostingStatus]>("boosts"), retry: .none, load: pager.load)
    let original = MastodonStatus.post("1", "Hello", at: 1)
    let boosts = [
      MastodonBoostingStatus(id: "b2", content: "", createdAt: 3, boosted: [original]),
      MastodonBoostingStatus(id: "b1", content: "own", createdAt: 2),
    ]
    let first = Task { try await list.load() }
    _ = await pager.nextCall()
    pager.respond(Page(boosts, older: nil))
    _ = try await first.value
    map.remove(MastodonStatus.self, id: "1")
    #expect(list.state.items.map(\.id) == ["b1"], "the boost went with the status it boosted")
  }

  @Test("removeAll() takes the list: it has no answer, and load() fetches the first page again")
  func removeAllTakesTheList() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = try await loaded(map, pager, [[3, 2], [1]])
    map.removeAll()
    #expect(list.state.items.isEmpty && list.state.isStale && !list.state.hasOlder)
    try await list.loadOlder()
    #expect(pager.calls == 2, "no older page of a list that is gone")
    let load = Task { try await list.load() }
    #expect(await pager.nextCall().description == "first")
    pager.respond(Page([9].map { Counter(id: $0, value: 0) }, older: 9))
    #expect(try await load.value.map(\.id) == [9])
  }

  @Test(
    "A Mastodon timeline: pages overlap by one status, boosts nest statuses, a stream edit reaches every copy"
  )
  func mastodonTimeline() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<MastodonStatus, String>()
    let home = map.pagedResource(
      ResourceKey<[MastodonStatus]>("timelines/home"), retry: .none, load: pager.load)
    let hello = MastodonStatus.post("100", "Hello", at: 100)
    let first = Task { try await home.load() }
    _ = await pager.nextCall()
    pager.respond(
      Page(
        [.boost("103", of: hello, at: 103), .post("102", "Two", at: 102), hello],
        older: "100", newer: "103"))
    _ = try await first.value
    // max_id=100 answers from 100 itself here: the pages overlap by one status.
    let older = Task { try await home.loadOlder() }
    #expect(await pager.nextCall().cursor == "100")
    pager.respond(Page([hello, .post("99", "Old", at: 99)], older: nil))
    try await older.value
    #expect(home.state.items.map(\.id) == ["103", "102", "100", "99"])
    #expect(!home.state.hasOlder)
    let recorder = PagedStateRecorder(home)
    // An edit from the streaming API, newer than the page.
    map.store(MastodonStatus.post("100", "Hello, edited", at: 100, edited: 150))
    let items = home.state.items
    #expect(items[2].content == "Hello, edited", "the status itself")
    #expect(items[0].reblog?.content == "Hello, edited", "and the boost that nests it")
    #expect(recorder.states.count == 1, "one change for the observers")
    // A favourite from an old page, stamped older: refused, the edit stays.
    map.store(MastodonStatus.post("100", "Hello", at: 100), modifiedAt: 90)
    #expect(home.state.items[2].content == "Hello, edited")
    recorder.cancel()
  }

  @Test("A GitHub issues list paged by Link headers: an issue closed between two pages leaves it")
  func githubIssues() async throws {
    let map = IdentityMap(clock: clock)
    let server = IssuesServer()
    let issues = map.pagedResource(
      ResourceKey<[ListedIssue]>("repos/apple/swift/issues"), retry: .none
    ) { (request: PageRequest<URL>) in server.page(request.cursor) }
    try await issues.load()
    try await issues.loadOlder()
    #expect(issues.state.items.map(\.id) == [7, 6, 5, 4])
    // Issue 5 is closed: the webhook removes it.
    server.open.withValue { $0.removeAll { $0 == 5 } }
    map.remove(ListedIssue.self, id: 5)
    #expect(issues.state.items.map(\.id) == [7, 6, 4])
    try await issues.loadOlder()
    try await issues.loadOlder()
    #expect(issues.state.items.map(\.id) == [7, 6, 4, 3, 2, 1])
    #expect(!issues.state.hasOlder)
    // The author, renamed in one of them, is renamed in all.
    map.update(ListedUser.self, id: 1) { $0.login = "monalisa" }
    #expect(issues.state.items.allSatisfy { $0.user.login == "monalisa" })
  }

  @Test("A refresh after a long gap replaces the list: the statuses in between are not hidden")
  func longGap() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<MastodonStatus, String>()
    let home = map.pagedResource(
      ResourceKey<[MastodonStatus]>("timelines/home"), staleAfter: .seconds(60), retry: .none,
      load: pager.load)
    let first = Task { try await home.load() }
    _ = await pager.nextCall()
    pager.respond(Page([.post("20", "b", at: 20), .post("19", "a", at: 19)], older: "19"))
    _ = try await first.value
    clock.advance(by: .seconds(8 * 3_600))
    // Overnight, 300 statuses: the first page now shares nothing with the list.
    let refresh = Task { try await home.refresh() }
    _ = await pager.nextCall()
    pager.respond(Page([.post("320", "new", at: 320), .post("319", "new", at: 319)], older: "319"))
    try await refresh.value
    #expect(home.state.items.map(\.id) == ["320", "319"])
    #expect(home.state.hasOlder && !home.state.isStale)
    let older = Task { try await home.loadOlder() }
    #expect(await pager.nextCall().cursor == "319", "the gap is loaded, not skipped")
    pager.respond(Page([.post("318", "gap", at: 318)], older: "318"))
    try await older.value
    #expect(home.state.items.map(\.id) == ["320", "319", "318"])
  }
}
