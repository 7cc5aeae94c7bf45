import ConcordTesting
import Foundation
import TestSupport
import Testing

@testable import Concord

/// Which resource a key names, how long it and its answer live (`keepFor`), and the map-wide
/// `invalidateResources(prefix:)` and `revalidate()`.
@Suite("Resources: keys, lifetime, invalidation and revalidation")
struct ResourceLifetimeTests {
  let clock = ManualClock()
  let ursula = Author(id: 1, name: "Ursula")

  @Test(
    "Later calls with the same key return the resource as it is: the first loader and settings stay"
  )
  func firstCallWins() async throws {
    let map = IdentityMap(clock: clock)
    let first = map.resource(ResourceKey<Author>("me"), staleAfter: .seconds(60)) {
      Author(id: 1, name: "first")
    }
    let second = map.resource(ResourceKey<Author>("me"), policy: .networkOnly) {
      Author(id: 1, name: "second")
    }
    #expect(try await second.load().name == "first")
    #expect(try await second.load().name == "first", "cacheFirst, fresh for 60 s: no fetch")
    #expect(first.state.value?.name == "first")
  }

  @Test("A key reused with another value type is another resource")
  func valueTypeTellsResourcesApart() async throws {
    let map = IdentityMap(clock: clock)
    let one = map.resource(ResourceKey<Author>("x")) { Author(id: 1, name: "one") }
    let list = map.resource(ResourceKey<[Author]>("x")) { [Author(id: 2, name: "two")] }
    let user = map.resource(ResourceKey<User>("x")) { User(id: 3, name: "three") }
    #expect(try await one.load().name == "one")
    #expect(try await list.load().map(\.name) == ["two"])
    #expect(try await user.load().name == "three")
    #expect(one.state.value?.name == "one")
  }

  @Test("With no handle and no observer, the answer is kept for keepFor, then let go")
  func keepFor() async throws {
    let map = IdentityMap(clock: clock)
    let calls = Locked(0)
    func authors() -> Resource<[Author]> {
      map.resource(ResourceKey<[Author]>("authors"), keepFor: .seconds(300)) {
        calls.increment()
        return [Author(id: 1, name: "Ursula")]
      }
    }
    do { _ = try await authors().load() }
    await clock.waitForSleepers(1)
    #expect(map.find(Author.self, id: 1) != nil, "kept")
    clock.advance(by: .seconds(299))
    #expect(authors().state.value?.count == 1, "still live: the same resource, its answer")
    await clock.waitForSleepers(1)  // the handle above went: a new keepFor began
    clock.advance(by: .seconds(300))
    await eventually { map.statistics.aliases == 0 }
    #expect(map.find(Author.self, id: 1) == nil, "let go: its entities released")
    let again = authors()
    #expect(again.state.value == nil, "a new resource: not persisted, nothing cached")
    _ = try await again.load()
    #expect(calls.value == 2)
  }

  @Test("A handle taken during keepFor keeps the resource; the timer is cancelled")
  func handleCancelsTheTimer() async throws {
    let map = IdentityMap(clock: clock)
    do {
      _ = try await map.resource(ResourceKey<Author>("me")) { Author(id: 1, name: "U") }.load()
    }
    await clock.waitForSleepers(1)
    let held = map.resource(ResourceKey<Author>("me")) { Author(id: 1, name: "other") }
    await eventually { clock.sleepers == 0 }
    clock.advance(by: .seconds(3_600))
    #expect(held.state.value?.name == "U")
  }

  @Test("keepFor of zero, or negative, lets go at once")
  func keepForZero() async throws {
    for keepFor in [Duration.zero, .seconds(-1)] {
      let map = IdentityMap(clock: clock)
      do {
        _ = try await map.resource(ResourceKey<Author>("me"), keepFor: keepFor) {
          Author(id: 1, name: "U")
        }.load()
      }
      await eventually { map.find(Author.self, id: 1) == nil }
      #expect(clock.sleepers == 0)
    }
  }

  @Test("An observer keeps the resource: no keepFor while it observes")
  func observerKeeps() async throws {
    let map = IdentityMap(clock: clock)
    let subscription = try await {
      let me = map.resource(ResourceKey<Author>("me"), keepFor: .zero) { Author(id: 1, name: "U") }
      try await me.load()
      return me.observe { _ in }
    }()
    #expect(clock.sleepers == 0)
    #expect(map.find(Author.self, id: 1) != nil)
    subscription.cancel()
    await eventually { map.find(Author.self, id: 1) == nil }
  }

  @Test(
    "invalidateResources(prefix:) reaches live resources whose name starts with it, those in keepFor too"
  )
  func invalidateByPrefix() async throws {
    let map = IdentityMap(clock: clock)
    let issues = map.resource(ResourceKey<[Author]>("repos/a/issues"), staleAfter: .seconds(60)) {
      [Author(id: 1, name: "U")]
    }
    let pulls = map.resource(ResourceKey<[Author]>("repos/a/pulls"), staleAfter: .seconds(60)) {
      [Author(id: 2, name: "O")]
    }
    let other = map.resource(ResourceKey<Author>("repos/b"), staleAfter: .seconds(60)) {
      Author(id: 3, name: "B")
    }
    try await issues.load()
    try await pulls.load()
    try await other.load()
    do {
      _ = try await map.resource(ResourceKey<Author>("repos/a/kept"), staleAfter: .seconds(60)) {
        Author(id: 4, name: "K")
      }.load()
    }
    map.invalidateResources(prefix: "repos/a/")
    #expect(issues.state.isStale && pulls.state.isStale && !other.state.isStale)
    let kept = map.resource(ResourceKey<Author>("repos/a/kept")) { Author(id: 4, name: "K") }
    #expect(kept.state.isStale, "in its keepFor window, and reached")
    map.invalidateResources()
    #expect(other.state.isStale)
  }

  @Test("revalidate() refreshes stale observed resources, concurrently; skips the others")
  func revalidate() async throws {
    let map = IdentityMap(clock: clock)
    let calls = Locked<[String]>([])
    func make(_ name: String, _ policy: FetchPolicy = .cacheFirst) -> Resource<Author> {
      map.resource(ResourceKey<Author>(name), policy: policy, staleAfter: .seconds(60)) {
        calls.append(name)
        return Author(id: name.count, name: name)
      }
    }
    let stale = make("stale")
    let fresh = make("fresh")
    let unobserved = make("unobserved")
    let offline = make("offline", .cacheOnly)
    let empty = make("empty")
    try await stale.load()
    try await unobserved.load()
    try await offline.refresh()
    clock.advance(by: .seconds(60))
    try await fresh.load()
    let subscriptions = [stale, fresh, offline, empty].map { $0.observe { _ in } }
    calls.withValue { $0.removeAll() }
    await map.revalidate()
    #expect(Set(calls.value) == ["stale", "empty"])
    #expect(!stale.state.isStale && empty.state.value != nil)
    #expect(unobserved.state.isStale && offline.state.isStale)
    for subscription in subscriptions { subscription.cancel() }
  }

  @Test(
    "revalidate() joins a fetch in flight rather than start another, and returns when it settles")
  func revalidateJoins() async throws {
    let map = IdentityMap(clock: clock)
    let loader = ScriptedLoader<Author>()
    let me = map.resource(ResourceKey<Author>("me"), retry: .none, load: loader.load)
    let subscription = me.observe { _ in }
    let first = Task { try await me.load() }
    _ = await loader.nextCall()
    let revalidated = Task { await map.revalidate() }
    await eventually { me._core.waiters == 2 }
    loader.fail(LoaderError(500))
    await revalidated.value
    _ = try? await first.value
    #expect(loader.calls == 1)
    subscription.cancel()
  }

  @Test("A resource outlives the map's other handles, and the map outlives its resources")
  func mapLifetime() async throws {
    let me: Resource<Author> = try await {
      let map = IdentityMap(clock: clock)
      let me = map.resource(ResourceKey<Author>("me")) { Author(id: 1, name: "U") }
      try await me.load()
      return me
    }()
    #expect(me.state.value?.name == "U")
    #expect(try await me.refresh().name == "U")
  }
}
