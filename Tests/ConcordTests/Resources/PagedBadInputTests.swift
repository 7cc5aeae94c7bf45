import ConcordTesting
import Foundation
import TestSupport
import Testing

@testable import Concord

/// Bad input from a server never corrupts a paged list, and never makes it loop.
@Suite("Paged lists: bad input")
struct PagedBadInputTests {
  let clock = ManualClock()

  func list<T: Identifiable & Sendable>(_ map: IdentityMap, _ pager: ScriptedPager<T, Int>)
    -> PagedResource<T, Int>
  {
    map.pagedResource(ResourceKey<[T]>("list"), retry: .none, load: pager.load)
  }

  /// Runs `body`, answers the pager's next call with `page`, and waits for `body`.
  func answer<T>(
    _ pager: ScriptedPager<T, Int>, _ page: Page<T, Int>,
    _ body: @escaping @Sendable () async throws -> Void
  ) async throws {
    let task = Task { try await body() }
    _ = await pager.nextCall()
    pager.respond(page)
    try await task.value
  }

  @Test(
    "A page repeating an id lists it once, at its first place, with the last occurrence's value")
  func repeatedID() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = list(map, pager)
    let page = [
      Counter(id: 3, value: 1), Counter(id: 2, value: 1), Counter(id: 3, value: 2),
      Counter(id: 1, value: 1),
    ]
    try await answer(pager, Page(page, older: 1)) { try await list.load() }
    #expect(list.state.items.map(\.id) == [3, 2, 1])
    #expect(list.state.items.first?.value == 2, "the last occurrence, as within one write")
    // The same in an older page, with a repeat of a listed item too.
    let older = [Counter(id: 0, value: 1), Counter(id: 2, value: 5), Counter(id: 0, value: 3)]
    try await answer(pager, Page(older, older: nil)) { try await list.loadOlder() }
    #expect(list.state.items.map(\.id) == [3, 2, 1, 0])
    #expect(list.state.items.map(\.value) == [2, 5, 1, 3])
  }

  @Test("Repeated stamped statuses: the newest stamp wins, at the first place")
  func repeatedStamped() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<MastodonStatus, Int>()
    let list = list(map, pager)
    let page: [MastodonStatus] = [
      .post("1", "edited", at: 1, edited: 9), .post("2", "two", at: 2), .post("1", "first", at: 1),
    ]
    try await answer(pager, Page(page, older: nil)) { try await list.load() }
    #expect(list.state.items.map(\.id) == ["1", "2"])
    #expect(list.state.items.first?.content == "edited", "the newer stamp, not the last")
  }

  @Test("A cursor that repeats ends the list instead of looping")
  func repeatingCursor() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = list(map, pager)
    try await answer(pager, Page([Counter(id: 3, value: 0)], older: 2)) { try await list.load() }
    try await answer(pager, Page([Counter(id: 2, value: 0)], older: 2)) {
      try await list.loadOlder()
    }
    #expect(list.state.hasOlder, "a page like any other, so far")
    // The server answers the same page for the same cursor: nothing new.
    try await answer(pager, Page([Counter(id: 2, value: 0)], older: 2)) {
      try await list.loadOlder()
    }
    #expect(!list.state.hasOlder && list.state.items.map(\.id) == [3, 2])
    try await list.loadOlder()
    #expect(pager.calls == 3, "no further call")
  }

  @Test("A cursor that goes back brings nothing new: hasOlder becomes false")
  func backwardCursor() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = list(map, pager)
    try await answer(pager, Page([5, 4].map { Counter(id: $0, value: 0) }, older: 4)) {
      try await list.load()
    }
    try await answer(pager, Page([5, 4].map { Counter(id: $0, value: 0) }, older: 9)) {
      try await list.loadOlder()
    }
    #expect(!list.state.hasOlder && list.state.items.map(\.id) == [5, 4])
  }

  @Test("An empty first page: an empty list, fetched; a later first page replaces it")
  func emptyFirstPage() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = list(map, pager)
    try await answer(pager, Page<Counter, Int>([], older: nil)) { try await list.load() }
    #expect(list.state.items.isEmpty && !list.state.hasOlder)
    #expect(list.state.fetchedAt == clock.now, "an answer, empty")
    try await list.loadOlder()
    #expect(pager.calls == 1)
    try await answer(pager, Page([Counter(id: 1, value: 0)], older: nil)) {
      try await list.refresh()
    }
    #expect(list.state.items.map(\.id) == [1])
  }

  @Test("A page whose items are all refused as stale lists them as the map has them")
  func allStale() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let held = map.store([Counter(id: 2, value: 9), Counter(id: 1, value: 9)], modifiedAt: 50)
    let list = list(map, pager)
    try await answer(pager, Page([Counter(id: 3, value: 0)], older: 3, modifiedAt: 10)) {
      try await list.load()
    }
    try await answer(
      pager, Page([2, 1].map { Counter(id: $0, value: 0) }, older: nil, modifiedAt: 10)
    ) { try await list.loadOlder() }
    #expect(list.state.items.map(\.id) == [3, 2, 1])
    #expect(list.state.items.map(\.value) == [0, 9, 9], "the map's newer values")
    withExtendedLifetime(held) {}
  }

  @Test("A page whose items are all tombstoned brings nothing: it ends the list")
  func allTombstoned() async throws {
    let map = IdentityMap(clock: clock)
    let pager = ScriptedPager<Counter, Int>()
    let list = list(map, pager)
    try await answer(pager, Page([Counter(id: 3, value: 0)], older: 3, modifiedAt: 10)) {
      try await list.load()
    }
    map.remove(Counter.self, id: 2, tombstone: .infinity)
    map.remove(Counter.self, id: 1, tombstone: .infinity)
    try await answer(
      pager, Page([2, 1].map { Counter(id: $0, value: 0) }, older: 1, modifiedAt: 10)
    ) { try await list.loadOlder() }
    #expect(list.state.items.map(\.id) == [3] && !list.state.hasOlder)
    #expect(map.count == 1, "nothing of it stored")
  }
}
