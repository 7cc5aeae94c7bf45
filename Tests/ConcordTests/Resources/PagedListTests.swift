import ConcordTesting
import Foundation
import TestSupport
import Testing

@testable import Concord

/// Paged lists: pages merged into one list, older pages at the end, newer ones on top, a gap
/// never hidden, one fetch per end, failures that keep the list.
@Suite("Paged lists: merging pages")
struct PagedListTests {
  let clock = ManualClock()
  static let key = ResourceKey<[Counter]>("counters")

  /// Counters `ids`, each valued `value`.
  static func counters(_ ids: [Int], value: Int = 0) -> [Counter] {
    ids.map { Counter(id: $0, value: value) }
  }

  /// A list of `map` on `pager`, not retried.
  func list(_ map: IdentityMap, _ pager: ScriptedPager<Counter, Int>) -> PagedResource<Counter, Int>
  {
    map.pagedResource(Self.key, retry: .none, load: pager.load)
  }

  /// Runs `body` in a task, answers the pager's next call with `page`, and waits for `body`.
  func answer(
    _ pager: ScriptedPager<Counter, Int>, _ page: Page<Counter, Int>,
    _ body: @escaping @Sendable () async throws -> Void
  ) async throws {
    let task = Task { try await body() }
    _ = await pager.nextCall()
    pager.respond(page)
    try await task.value
  }

  @Test(
    "load() waits for the first page; loadOlder() appends the next, asking older than its cursor")
  func loadThenOlder() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = list(map, pager)
    #expect(list.state.items.isEmpty && !list.state.hasOlder && list.state.isStale)
    try await answer(pager, Page(Self.counters([9, 8, 7]), older: 7)) { try await list.load() }
    #expect(list.state.items.map(\.id) == [9, 8, 7] && list.state.hasOlder)
    try await answer(pager, Page(Self.counters([6, 5, 4]), older: 4)) { try await list.loadOlder() }
    #expect(pager.requests.map(\.description) == ["first", "older than 7"])
    #expect(list.state.items.map(\.id) == [9, 8, 7, 6, 5, 4])
    #expect(list.state.fetchedAt == clock.now && !list.state.isLoadingOlder)
    #expect(map.count == 6, "the list holds its items")
  }
}
