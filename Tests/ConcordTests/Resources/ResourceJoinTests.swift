import ConcordTesting
import Foundation
import TestSupport
import Testing

@testable import Concord

/// One fetch per key: however many callers ask while a fetch is in flight, the loader runs once.
@Suite("Resources: one fetch per key")
struct ResourceJoinTests {
  let clock = ManualClock()
  let ursula = Author(id: 1, name: "Ursula")

  @Test("100 concurrent loads of one key make one loader call, and each gets the answer")
  func concurrentLoadsJoin() async throws {
    let map = IdentityMap(clock: clock)
    let loader = ScriptedLoader<[Author]>()
    let authors = map.resource(ResourceKey<[Author]>("authors"), load: loader.load)
    let answers = Task {
      try await withThrowingTaskGroup(of: [Author].self) { group in
        for _ in 0..<100 { group.addTask { try await authors.load() } }
        return try await group.reduce(into: []) { $0.append($1) }
      }
    }
    _ = await loader.nextCall()
    // Every caller has joined once the fetch is the only thing in flight: let them all in.
    while authors._core.waiters < 100 { await Task.yield() }
    loader.respond(.value([ursula]))
    let all = try await answers.value
    #expect(all.count == 100 && all.allSatisfy { $0 == [ursula] })
    #expect(loader.calls == 1)
  }

  @Test("Callers of two handles on one key join too: the key names the resource")
  func handlesShareTheFetch() async throws {
    let map = IdentityMap(clock: clock)
    let loader = ScriptedLoader<Author>()
    let first = map.resource(ResourceKey<Author>("me"), load: loader.load)
    let second = map.resource(ResourceKey<Author>("me"), load: loader.load)
    let a = Task { try await first.load() }
    _ = await loader.nextCall()
    let b = Task { try await second.refresh() }
    while first._core.waiters < 2 { await Task.yield() }
    loader.respond(.value(ursula))
    #expect(try await a.value == ursula)
    #expect(try await b.value == ursula)
    #expect(loader.calls == 1)
  }

  @Test("A failure reaches every caller that joined, and the answer stays")
  func failureReachesEveryCaller() async throws {
    let map = IdentityMap(clock: clock)
    let loader = ScriptedLoader<Author>()
    let me = map.resource(ResourceKey<Author>("me"), retry: .none, load: loader.load)
    let a = Task { try await me.load() }
    let b = Task { try await me.load() }
    _ = await loader.nextCall()
    while me._core.waiters < 2 { await Task.yield() }
    loader.fail(LoaderError(500))
    await #expect(throws: LoaderError(500)) { try await a.value }
    await #expect(throws: LoaderError(500)) { try await b.value }
    #expect(loader.calls == 1)
    #expect(me.state.error as? LoaderError == LoaderError(500))
    #expect(me.state.value == nil && !me.state.isLoading)
  }

  @Test("refresh() and revalidate() join a background fetch rather than start another")
  func refreshAndRevalidateJoin() async throws {
    let map = IdentityMap(clock: clock)
    let loader = ScriptedLoader<Author>()
    let me = map.resource(ResourceKey<Author>("me"), policy: .cacheThenNetwork, load: loader.load)
    let first = Task { try await me.refresh() }
    _ = await loader.nextCall()
    loader.respond(.value(ursula))
    _ = try await first.value
    let subscription = me.observe { _ in }
    #expect(try await me.load() == ursula)  // the cached answer; a background fetch follows
    _ = await loader.nextCall()
    let refreshed = Task { try await me.refresh() }
    async let revalidated: Void = map.revalidate()
    while me._core.waiters < 2 { await Task.yield() }
    let renamed = Author(id: 1, name: "Le Guin")
    loader.respond(.value(renamed))
    #expect(try await refreshed.value == renamed)
    await revalidated
    #expect(loader.calls == 2)
    subscription.cancel()
  }

  @Test("While a fetch is in flight, a cacheFirst load with a stale answer returns it at once")
  func staleLoadDoesNotWait() async throws {
    let map = IdentityMap(clock: clock)
    let loader = ScriptedLoader<Author>()
    let me = map.resource(ResourceKey<Author>("me"), load: loader.load)
    let first = Task { try await me.refresh() }
    _ = await loader.nextCall()
    loader.respond(.value(ursula))
    _ = try await first.value
    let second = Task { try await me.refresh() }
    _ = await loader.nextCall()
    #expect(try await me.load() == ursula, "stale (staleAfter .zero): at once, no new fetch")
    #expect(loader.calls == 2)
    loader.respond(.value(ursula))
    _ = try await second.value
  }

  @Test("A fetch ended, the next demand starts a new one")
  func sequentialFetches() async throws {
    let map = IdentityMap(clock: clock)
    let calls = Locked(0)
    let me = map.resource(ResourceKey<Author>("me"), policy: .networkOnly) {
      Author(id: 1, name: "call \(calls.increment())")
    }
    #expect(try await me.load().name == "call 1")
    #expect(try await me.load().name == "call 2")
    #expect(try await me.refresh().name == "call 3")
  }
}
