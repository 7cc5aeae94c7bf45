import ConcordTesting
import Foundation
import TestSupport
import Testing

@testable import Concord

/// Paged lists: pages merged into one list, older pages at the end, newer ones on top, a gap
/// never hidden, one fetch per end, failures that keep the list, cancellation as resources.
@Suite("Paged lists: merging pages")
struct PagedListTests {
  let clock = ManualClock()
  static let key = ResourceKey<[Counter]>("counters")

  /// Counters `ids`, each valued `value`.
  static func counters(_ ids: [Int], value: Int = 0) -> [Counter] {
    ids.map { Counter(id: $0, value: value) }
  }

  /// A list of `map` on `pager`.
  func list(
    _ map: IdentityMap, _ pager: ScriptedPager<Counter, Int>, staleAfter: Duration = .zero,
    keepFor: Duration = .seconds(300), retry: RetryPolicy = .none
  ) -> PagedResource<Counter, Int> {
    map.pagedResource(
      Self.key, staleAfter: staleAfter, keepFor: keepFor, retry: retry, load: pager.load)
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

  /// A list of `map` loaded with the first page `first` (older cursor `older`).
  func loaded(
    _ map: IdentityMap, _ pager: ScriptedPager<Counter, Int>, _ first: [Int], older: Int?,
    newer: Int? = nil, staleAfter: Duration = .zero
  ) async throws -> PagedResource<Counter, Int> {
    let list = list(map, pager, staleAfter: staleAfter)
    try await answer(pager, Page(Self.counters(first), older: older, newer: newer)) {
      try await list.load()
    }
    return list
  }

  // MARK: Older pages

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

  @Test("An item already listed keeps its place, and takes the later page's value")
  func overlapKeepsPlace() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = try await loaded(map, pager, [9, 8, 7], older: 7)
    // Pages that overlap by one, as Mastodon's max_id pages do when the client asks by the
    // last id it has, and an item that moved up: 9 is listed again further down.
    let page = [Counter(id: 7, value: 1), Counter(id: 6, value: 0), Counter(id: 9, value: 2)]
    try await answer(pager, Page(page, older: 6)) { try await list.loadOlder() }
    #expect(list.state.items.map(\.id) == [9, 8, 7, 6], "no duplicate, no move")
    #expect(list.state.items.map(\.value) == [2, 0, 1, 0], "each as the map has it now")
  }

  @Test("A page that changes items of earlier pages is one change for the observers")
  func overlapNotifiesOnce() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = try await loaded(map, pager, [9, 8], older: 8)
    try await answer(pager, Page(Self.counters([7, 6]), older: 6)) { try await list.loadOlder() }
    let recorder = PagedStateRecorder(list)
    // The page edits 9 (first page) and 7 (second page) as it lands.
    let page = [Counter(id: 9, value: 1), Counter(id: 5, value: 0), Counter(id: 7, value: 1)]
    try await answer(pager, Page(page, older: 5)) { try await list.loadOlder() }
    #expect(list.state.items.map(\.id) == [9, 8, 7, 6, 5])
    #expect(recorder.states.map(\.isLoadingOlder) == [true, false], "its start, then its landing")
    #expect(recorder.states.last?.items.map(\.value) == [1, 0, 1, 0, 0])
    recorder.cancel()
  }

  @Test("At the end, hasOlder is false, and loadOlder() is a no-op")
  func endOfList() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = try await loaded(map, pager, [3, 2], older: 2)
    try await answer(pager, Page(Self.counters([1]), older: nil)) { try await list.loadOlder() }
    #expect(!list.state.hasOlder && list.state.items.map(\.id) == [3, 2, 1])
    let recorder = PagedStateRecorder(list)
    try await list.loadOlder()
    #expect(pager.calls == 2, "no call at the end")
    #expect(recorder.states.isEmpty, "and no change")
    #expect(list.state.items.map(\.id) == [3, 2, 1])
  }

  @Test("Before the first page, loadOlder() is a no-op")
  func olderBeforeFirst() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = list(map, pager)
    try await list.loadOlder()
    #expect(pager.calls == 0 && list.state.items.isEmpty)
  }

  @Test("Concurrent loadOlder() calls join one fetch")
  func olderJoins() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = try await loaded(map, pager, [9, 8], older: 8)
    let callers = Task {
      try await withThrowingTaskGroup(of: Void.self) { group in
        for _ in 0..<50 { group.addTask { try await list.loadOlder() } }
        try await group.waitForAll()
      }
    }
    _ = await pager.nextCall()
    await eventually { list._core.waiters == 50 }
    #expect(list.state.isLoadingOlder && !list.state.isLoading)
    pager.respond(Page(Self.counters([7, 6]), older: 6))
    try await callers.value
    #expect(pager.calls == 2, "one first page, one older page")
    #expect(list.state.items.map(\.id) == [9, 8, 7, 6])
  }

  // MARK: Newer items

  @Test("refresh() asks for what is newer than the head's cursor, and puts it on top")
  func refreshNewer() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = try await loaded(map, pager, [9, 8], older: 8, newer: 9)
    clock.advance(by: .seconds(30))
    // 9 was listed already: it keeps its place.
    try await answer(pager, Page(Self.counters([11, 10, 9], value: 1), older: 9, newer: 11)) {
      try await list.refresh()
    }
    #expect(pager.requests.last?.description == "newer than 9")
    #expect(list.state.items.map(\.id) == [11, 10, 9, 8])
    #expect(list.state.items.map(\.value) == [1, 1, 1, 0])
    #expect(list.state.fetchedAt == clock.now && list.state.hasOlder)
    // Nothing newer: the list stays, the head's cursor too, and the list is fresh again.
    clock.advance(by: .seconds(30))
    try await answer(pager, Page([], older: nil, newer: nil)) { try await list.refresh() }
    #expect(list.state.items.map(\.id) == [11, 10, 9, 8] && list.state.fetchedAt == clock.now)
    try await answer(pager, Page([], older: nil)) { try await list.refresh() }
    #expect(pager.requests.map(\.description).suffix(2) == ["newer than 11", "newer than 11"])
    // The older end is as it was.
    try await answer(pager, Page(Self.counters([7]), older: nil)) { try await list.loadOlder() }
    #expect(pager.requests.last?.description == "older than 8")
    #expect(list.state.items.map(\.id) == [11, 10, 9, 8, 7])
  }

  @Test("Without a newer cursor, refresh() asks for the first page; one that overlaps goes on top")
  func refreshFirstOverlapping() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = try await loaded(map, pager, [5, 4, 3], older: 3)
    try await answer(pager, Page(Self.counters([4, 3]), older: 3)) { try await list.loadOlder() }
    #expect(list.state.hasOlder == false, "that page brought nothing new")
    try await answer(pager, Page(Self.counters([7, 6, 5, 4]), older: 4)) {
      try await list.refresh()
    }
    #expect(pager.requests.last?.description == "first")
    #expect(list.state.items.map(\.id) == [7, 6, 5, 4, 3], "on top, the older end untouched")
    #expect(!list.state.hasOlder, "and its hasOlder too")
  }

  @Test("A first page that shares no item replaces the list: no gap is hidden")
  func refreshAfterGapReplaces() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = try await loaded(map, pager, [30, 29, 28], older: 28)
    try await answer(pager, Page(Self.counters([27, 26]), older: 26)) { try await list.loadOlder() }
    #expect(map.count == 5)
    // A long sleep: the newest page now starts 300 items higher.
    try await answer(pager, Page(Self.counters([330, 329, 328]), older: 328)) {
      try await list.refresh()
    }
    #expect(list.state.items.map(\.id) == [330, 329, 328], "the answer alone")
    #expect(map.count == 3, "the older pages' items are no longer held")
    #expect(list.state.hasOlder)
    try await answer(pager, Page(Self.counters([327]), older: nil)) { try await list.loadOlder() }
    #expect(pager.requests.last?.description == "older than 328", "the answer's cursor")
    #expect(list.state.items.map(\.id) == [330, 329, 328, 327] && !list.state.hasOlder)
  }

  @Test("load(), refresh() and revalidate() join the first page")
  func headJoins() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = list(map, pager)
    let observer = list.observe { _ in }
    let loads = Task { try await list.load() }
    let refresh = Task { try await list.refresh() }
    async let revalidated: Void = map.revalidate()
    _ = await pager.nextCall()
    await eventually { list._core.waiters == 3 }
    pager.respond(Page(Self.counters([1]), older: nil))
    #expect(try await loads.value.map(\.id) == [1])
    try await refresh.value
    await revalidated
    #expect(pager.calls == 1)
    observer.cancel()
  }

  // MARK: Both ends at once

  @Test(
    "A refresh and a loadOlder in flight together both land, in either order, losing and duplicating nothing",
    arguments: [true, false])
  func refreshAndOlderTogether(refreshFirst: Bool) async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = try await loaded(map, pager, [10, 9, 8], older: 8, newer: 10)
    let older = Task { try await list.loadOlder() }
    let refresh = Task { try await list.refresh() }
    _ = await pager.nextCall()
    _ = await pager.nextCall()
    #expect(list.state.isLoading && list.state.isLoadingOlder)
    // The newer page repeats the head; the older one repeats the tail.
    let newer = Page(Self.counters([12, 11, 10]), older: 10, newer: 12)
    let olderPage = Page(Self.counters([8, 7, 6]), older: 6)
    if refreshFirst {
      pager.respond(newer) { $0.isNewer }
      try await refresh.value
      pager.respond(olderPage) { $0.isOlder }
      try await older.value
    } else {
      pager.respond(olderPage) { $0.isOlder }
      try await older.value
      pager.respond(newer) { $0.isNewer }
      try await refresh.value
    }
    #expect(list.state.items.map(\.id) == [12, 11, 10, 9, 8, 7, 6])
    #expect(!list.state.isLoading && !list.state.isLoadingOlder && list.state.hasOlder)
    #expect(map.count == 7)
  }

  @Test("An older page asked for before a refresh replaced the list is dropped, not appended")
  func olderAfterReplaceIsDropped() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = try await loaded(map, pager, [10, 9], older: 9)
    let older = Task { try await list.loadOlder() }
    let refresh = Task { try await list.refresh() }
    _ = await pager.nextCall()
    _ = await pager.nextCall()
    pager.respond(Page(Self.counters([50, 49]), older: 49)) { !$0.isOlder }
    try await refresh.value
    pager.respond(Page(Self.counters([8, 7]), older: 7)) { $0.isOlder }
    try await older.value
    #expect(list.state.items.map(\.id) == [50, 49], "the old tail would hide a gap")
    #expect(map.find(Counter.self, id: 8) == nil, "and nothing of it was written")
    try await answer(pager, Page(Self.counters([48]), older: nil)) { try await list.loadOlder() }
    #expect(pager.requests.last?.description == "older than 49")
  }

  // MARK: Failures

  @Test("A failing older page keeps the list and sets error; it retries on the map's clock")
  func olderFailsThenRetries() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = list(
      map, pager, retry: .exponential(attempts: 2, base: .seconds(2), jitter: false))
    try await answer(pager, Page(Self.counters([3, 2]), older: 2)) { try await list.load() }
    let older = Task { try await list.loadOlder() }
    #expect(await pager.nextCall().attempt == 1)
    pager.fail(LoaderError(503))
    await clock.waitForSleepers(1)
    #expect(list.state.isLoadingOlder && list.state.error == nil, "waiting to retry")
    clock.advance(by: .seconds(2))
    let retry = await pager.nextCall()
    #expect(retry.attempt == 2 && retry.description == "older than 2 (try 2)")
    pager.fail(LoaderError(503))
    await #expect(throws: LoaderError(503)) { try await older.value }
    #expect(list.state.error as? LoaderError == LoaderError(503))
    #expect(list.state.items.map(\.id) == [3, 2] && list.state.hasOlder, "the list stays")
    try await answer(pager, Page(Self.counters([1]), older: nil)) { try await list.loadOlder() }
    #expect(list.state.error == nil && list.state.items.map(\.id) == [3, 2, 1])
  }

  @Test("A failing refresh keeps the list, its age and its cursors")
  func refreshFails() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = try await loaded(map, pager, [3, 2], older: 2, newer: 3)
    let fetchedAt = list.state.fetchedAt
    clock.advance(by: .seconds(10))
    let refresh = Task { try await list.refresh() }
    _ = await pager.nextCall()
    pager.fail(LoaderError(500))
    await #expect(throws: LoaderError(500)) { try await refresh.value }
    #expect(list.state.items.map(\.id) == [3, 2] && list.state.fetchedAt == fetchedAt)
    #expect(list.state.error as? LoaderError == LoaderError(500))
    try await answer(pager, Page(Self.counters([4]), older: 3, newer: 4)) {
      try await list.refresh()
    }
    #expect(pager.requests.last?.description == "newer than 3")
    #expect(list.state.items.map(\.id) == [4, 3, 2] && list.state.error == nil)
  }

  // MARK: Cancellation

  @Test(
    "The only caller of loadOlder() cancelled: the loader's task is cancelled, nothing is written")
  func olderCancelled() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = try await loaded(map, pager, [3], older: 3)
    let older = Task { try await list.loadOlder() }
    _ = await pager.nextCall()
    older.cancel()
    await #expect(throws: CancellationError.self) { try await older.value }
    await eventually { list._core.runningFetches == 0 }
    #expect(pager.cancellations == 1)
    #expect(!list.state.isLoadingOlder && list.state.error == nil)
    #expect(list.state.items.map(\.id) == [3] && list.state.hasOlder)
  }

  @Test(
    "A caller of loadOlder() cancelled while the fetch it started runs, before it waits: the fetch is cancelled",
    arguments: [true, false])
  func olderCancelledBeforeItWaits(inline: Bool) async throws {
    let map = IdentityMap(clock: clock)
    map._resources.startsWaitedFetchesInline = inline
    let caller = Locked<Task<Void, any Error>?>(nil)
    let started = Gate()
    let gate = Gate()
    let sawCancellation = Locked(false)
    let list = map.pagedResource(Self.key, retry: .none) {
      (request: PageRequest<Int>) async throws -> Page<Counter, Int> in
      guard request.isOlder else { return Page(Self.counters([3]), older: 3) }
      // NB: inline, this runs on the caller's thread between its demand and its wait: the
      // caller is listed, reserved, with no continuation yet.
      caller.value?.cancel()
      await gate.wait()
      sawCancellation.withValue { $0 = Task.isCancelled }
      return Page(Self.counters([2]), older: nil)
    }
    _ = try await list.load()
    let task = Task {
      await started.wait()
      return try await list.loadOlder()
    }
    caller.withValue { $0 = task }
    started.open()
    await #expect(throws: CancellationError.self) { try await task.value }
    #expect(list._core.waiters == 0 && list._core.parkedOutcomes == 0)
    await eventually { gate.waiting == 1 }
    gate.open()
    await eventually { list._core.runningFetches == 0 }
    #expect(sawCancellation.value, "the loader's task was cancelled")
    #expect(list.state.items.map(\.id) == [3] && list.state.hasOlder)
    #expect(!list.state.isLoadingOlder && list.state.error == nil)
  }

  @Test("An observer keeps a loadOlder() going when its caller is cancelled")
  func observedOlderGoesOn() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = try await loaded(map, pager, [3], older: 3)
    let recorder = PagedStateRecorder(list)
    let older = Task { try await list.loadOlder() }
    _ = await pager.nextCall()
    older.cancel()
    await #expect(throws: CancellationError.self) { try await older.value }
    #expect(pager.cancellations == 0 && list.state.isLoadingOlder)
    pager.respond(Page(Self.counters([2]), older: nil))
    let landed = await recorder.first { !$0.isLoadingOlder }
    #expect(landed.items.map(\.id) == [3, 2])
    recorder.cancel()
  }

  // MARK: Age and observation

  @Test("load() by cacheFirst: fresh, no fetch; stale, at once and refreshed behind")
  func cacheFirst() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = try await loaded(map, pager, [2, 1], older: nil, staleAfter: .seconds(60))
    #expect(!list.state.isStale)
    #expect(try await list.load().map(\.id) == [2, 1] && pager.calls == 1, "fresh")
    clock.advance(by: .seconds(60))
    #expect(list.state.isStale)
    #expect(try await list.load().map(\.id) == [2, 1], "stale: at once")
    #expect(await pager.nextCall().description == "first", "and refreshed behind")
    pager.respond(Page(Self.counters([3, 2, 1]), older: nil))
    await eventually { !list.state.isLoading }
    #expect(list.state.items.map(\.id) == [3, 2, 1] && !list.state.isStale)
    list.invalidate()
    #expect(list.state.isStale, "invalidated")
  }

  @Test("An observed list is told when it turns stale with time")
  func observedTurnsStale() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = try await loaded(map, pager, [2], older: 2, staleAfter: .seconds(60))
    let recorder = PagedStateRecorder(list)
    await clock.waitForSleepers(1)
    clock.advance(by: .seconds(59))
    #expect(recorder.states.isEmpty)
    clock.advance(by: .seconds(1))
    let stale = await recorder.first { $0.isStale }
    #expect(stale.items.map(\.id) == [2] && recorder.states.count == 1)
    recorder.cancel()
  }

  @Test("An older page does not make the list fresh: its age is its head's")
  func olderKeepsAge() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = try await loaded(map, pager, [2], older: 2, staleAfter: .seconds(60))
    let fetchedAt = list.state.fetchedAt
    clock.advance(by: .seconds(61))
    try await answer(pager, Page(Self.counters([1]), older: nil)) { try await list.loadOlder() }
    #expect(list.state.fetchedAt == fetchedAt && list.state.isStale)
  }

  @Test("Observers are told once per page, and the states stream starts with the current state")
  func observersOncePerPage() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = try await loaded(map, pager, [3], older: 3)
    let recorder = PagedStateRecorder(list)
    var states = list.states.makeAsyncIterator()
    #expect(await states.next()?.items.map(\.id) == [3])
    try await answer(pager, Page(Self.counters([2]), older: 2)) { try await list.loadOlder() }
    #expect(recorder.states.map(\.isLoadingOlder) == [true, false], "start, then the landing")
    #expect(recorder.states.last?.items.map(\.id) == [3, 2])
    recorder.cancel()
  }

  @Test("A list nobody uses is let go after keepFor: its items are released")
  func keepFor() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    do {
      let list = list(map, pager, keepFor: .seconds(10))
      try await answer(pager, Page(Self.counters([2, 1]), older: nil)) { try await list.load() }
    }
    await clock.waitForSleepers(1)
    #expect(map.count == 2, "kept for keepFor")
    clock.advance(by: .seconds(10))
    await eventually { map.count == 0 && map.statistics.aliases == 0 }
    let again = self.list(map, pager)
    #expect(again.state.items.isEmpty, "a new list")
  }

  @Test("resource and pagedResource with one key name are two resources")
  func apartFromResource() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = try await loaded(map, pager, [1], older: nil)
    let resource = map.resource(Self.key) { Self.counters([7]) }
    #expect(try await resource.load().map(\.id) == [7])
    #expect(list.state.items.map(\.id) == [1])
  }
}
