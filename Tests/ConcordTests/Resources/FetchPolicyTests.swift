import ConcordTesting
import Foundation
import TestSupport
import Testing

@testable import Concord

/// The four fetch policies, `refresh()`, and when an answer is stale.
@Suite("Resources: fetch policies and staleness")
struct FetchPolicyTests {
  let clock = ManualClock(now: Date(timeIntervalSince1970: 1_000))
  let ursula = Author(id: 1, name: "Ursula")

  /// A resource on a fresh map, with its scripted loader.
  func resource(
    _ policy: FetchPolicy, staleAfter: Duration = .seconds(60)
  ) -> (IdentityMap, Resource<Author>, ScriptedLoader<Author>) {
    let map = IdentityMap(clock: clock)
    let loader = ScriptedLoader<Author>()
    let resource = map.resource(
      ResourceKey<Author>("author/1"), policy: policy, staleAfter: staleAfter, retry: .none,
      load: loader.load)
    return (map, resource, loader)
  }

  /// Fetches `value` through `refresh()`.
  func fetch(_ resource: Resource<Author>, _ loader: ScriptedLoader<Author>, _ value: Author)
    async throws
  {
    async let answer = resource.refresh()
    _ = await loader.nextCall()
    loader.respond(.value(value))
    #expect(try await answer == value)
  }

  @Test("With no answer, every policy but cacheOnly waits for a fetch, which stores it")
  func noAnswerWaits() async throws {
    for policy in [FetchPolicy.cacheFirst, .cacheThenNetwork, .networkOnly] {
      let (map, resource, loader) = resource(policy)
      #expect(resource.state.value == nil && resource.state.isStale && !resource.state.isLoading)
      async let answer = resource.load()
      _ = await loader.nextCall()
      #expect(resource.state.isLoading)
      loader.respond(.value(ursula))
      #expect(try await answer == ursula, "\(policy)")
      let state = resource.state
      #expect(state.value == ursula && state.fetchedAt == clock.now)
      #expect(!state.isStale && !state.isLoading && state.error == nil)
      #expect(map.find(Author.self, id: 1)?.value == ursula, "the answer is stored in the map")
    }
  }

  @Test("cacheFirst: a fresh answer is returned without a fetch")
  func cacheFirstFresh() async throws {
    let (_, resource, loader) = resource(.cacheFirst)
    try await fetch(resource, loader, ursula)
    clock.advance(by: .seconds(59))
    #expect(try await resource.load() == ursula)
    #expect(loader.calls == 1)
    #expect(!resource.state.isLoading)
  }

  @Test("cacheFirst: a stale answer is returned at once, and a fetch refreshes it behind")
  func cacheFirstStaleWhileRevalidate() async throws {
    let (_, resource, loader) = resource(.cacheFirst)
    try await fetch(resource, loader, ursula)
    clock.advance(by: .seconds(60))
    #expect(resource.state.isStale, "stale once its age is staleAfter")
    #expect(try await resource.load() == ursula, "the stale answer, at once")
    #expect(resource.state.isLoading)
    _ = await loader.nextCall()
    let renamed = Author(id: 1, name: "Ursula K. Le Guin")
    let recorder = StateRecorder(resource)
    loader.respond(.value(renamed))
    let landed = await recorder.first { !$0.isLoading }
    #expect(landed.value == renamed && !landed.isStale && landed.fetchedAt == clock.now)
    #expect(recorder.states.count == 1, "one change: the fetch ended with the new answer")
  }

  @Test("staleAfter .zero: stale at once, so cacheFirst answers from the cache and refreshes")
  func staleAtOnce() async throws {
    let (_, resource, loader) = resource(.cacheFirst, staleAfter: .zero)
    try await fetch(resource, loader, ursula)
    #expect(resource.state.isStale)
    #expect(try await resource.load() == ursula)
    _ = await loader.nextCall()
    #expect(loader.calls == 2)
    loader.respond(.value(ursula))
  }

  @Test("A negative staleAfter counts as zero")
  func negativeStaleAfter() async throws {
    let (_, resource, loader) = resource(.cacheFirst, staleAfter: .seconds(-5))
    try await fetch(resource, loader, ursula)
    #expect(resource.state.isStale)
  }

  @Test("cacheThenNetwork: any answer at once, and always a fetch behind it")
  func cacheThenNetwork() async throws {
    let (_, resource, loader) = resource(.cacheThenNetwork)
    try await fetch(resource, loader, ursula)
    #expect(!resource.state.isStale)
    #expect(try await resource.load() == ursula)
    #expect(resource.state.isLoading, "a fresh answer is refreshed too")
    _ = await loader.nextCall()
    #expect(loader.calls == 2)
    loader.respond(.value(ursula))
  }

  @Test("networkOnly: load always waits for a fetch")
  func networkOnly() async throws {
    let (_, resource, loader) = resource(.networkOnly)
    try await fetch(resource, loader, ursula)
    let renamed = Author(id: 1, name: "Le Guin")
    async let answer = resource.load()
    _ = await loader.nextCall()
    loader.respond(.value(renamed))
    #expect(try await answer == renamed)
    #expect(loader.calls == 2)
  }

  @Test("cacheOnly: never fetches; notCached with no answer, the answer fresh or stale otherwise")
  func cacheOnly() async throws {
    let (_, resource, loader) = resource(.cacheOnly)
    await #expect(throws: ResourceError.notCached) { try await resource.load() }
    #expect(loader.calls == 0)
    try await fetch(resource, loader, ursula)  // refresh() fetches whatever the policy
    #expect(try await resource.load() == ursula)
    clock.advance(by: .seconds(3_600))
    #expect(resource.state.isStale)
    #expect(try await resource.load() == ursula)
    #expect(loader.calls == 1)
  }

  @Test("refresh() fetches whatever the answer's age, under every policy")
  func refreshAlwaysFetches() async throws {
    for policy in [FetchPolicy.cacheFirst, .cacheThenNetwork, .networkOnly, .cacheOnly] {
      let (_, resource, loader) = resource(policy, staleAfter: .seconds(3_600))
      try await fetch(resource, loader, ursula)
      try await fetch(resource, loader, Author(id: 1, name: "Again"))
      #expect(loader.calls == 2, "\(policy)")
    }
  }

  @Test("An answer is fresh just before staleAfter and stale at it")
  func stalenessEdge() async throws {
    let (_, resource, loader) = resource(.cacheFirst, staleAfter: .seconds(10))
    try await fetch(resource, loader, ursula)
    clock.advance(by: .milliseconds(9_999))
    #expect(!resource.state.isStale)
    clock.advance(by: .milliseconds(1))
    #expect(resource.state.isStale)
  }

  @Test(
    "invalidate() makes a fresh answer stale; the next load fetches, and nothing is fetched now")
  func invalidate() async throws {
    let (_, resource, loader) = resource(.cacheFirst, staleAfter: .seconds(3_600))
    try await fetch(resource, loader, ursula)
    resource.invalidate()
    #expect(resource.state.isStale)
    #expect(loader.calls == 1, "nothing fetched by invalidate()")
    #expect(try await resource.load() == ursula, "the stale answer at once")
    _ = await loader.nextCall()
    loader.respond(.value(ursula))
    #expect(loader.calls == 2)
  }
}
