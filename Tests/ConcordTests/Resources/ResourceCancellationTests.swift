import ConcordTesting
import Foundation
import TestSupport
import Testing

@testable import Concord

/// Cancellation at every await: a fetch whose every waiting caller was cancelled, on a resource
/// nobody observes, is cancelled and writes nothing; otherwise it goes on.
@Suite("Resources: cancellation")
struct ResourceCancellationTests {
  let clock = ManualClock()
  let ursula = Author(id: 1, name: "Ursula")

  @Test(
    "The only waiting caller cancelled: it gets CancellationError, the loader's task is cancelled, nothing is written"
  )
  func onlyCallerCancelled() async throws {
    let map = IdentityMap(clock: clock)
    let loader = ScriptedLoader<Author>()
    let me = map.resource(ResourceKey<Author>("me"), retry: .exponential(), load: loader.load)
    let caller = Task { try await me.load() }
    _ = await loader.nextCall()
    caller.cancel()
    await #expect(throws: CancellationError.self) { try await caller.value }
    await eventually { me._core.runningFetches == 0 }
    #expect(loader.cancellations == 1, "the loader's task was cancelled")
    #expect(loader.calls == 1, "and not retried")
    let state = me.state
    #expect(state.value == nil && !state.isLoading && state.error == nil)
    #expect(map.count == 0)
  }

  @Test("A loader that ignores cancellation and answers anyway writes nothing")
  func answerAfterCancellationIsDropped() async throws {
    let map = IdentityMap(clock: clock)
    let gate = Gate()
    let me = map.resource(ResourceKey<Author>("me")) { () async throws -> Author in
      await gate.wait()
      return Author(id: 1, name: "Ursula")
    }
    let caller = Task { try await me.load() }
    await eventually { gate.waiting == 1 }
    caller.cancel()
    await #expect(throws: CancellationError.self) { try await caller.value }
    gate.open()
    await eventually { me._core.runningFetches == 0 }
    #expect(me.state.value == nil)
    #expect(map.find(Author.self, id: 1) == nil, "the answer was dropped, not stored")
  }

  @Test("Another waiting caller keeps the fetch going")
  func anotherCallerKeepsIt() async throws {
    let map = IdentityMap(clock: clock)
    let loader = ScriptedLoader<Author>()
    let me = map.resource(ResourceKey<Author>("me"), load: loader.load)
    let cancelled = Task { try await me.load() }
    let kept = Task { try await me.load() }
    _ = await loader.nextCall()
    await eventually { me._core.waiters == 2 }
    cancelled.cancel()
    await #expect(throws: CancellationError.self) { try await cancelled.value }
    #expect(loader.cancellations == 0 && me.state.isLoading)
    loader.respond(.value(ursula))
    #expect(try await kept.value == ursula)
    #expect(me.state.value == ursula)
  }

  @Test("An observer keeps the fetch going; when it goes too, the fetch is cancelled")
  func observerKeepsIt() async throws {
    let map = IdentityMap(clock: clock)
    let loader = ScriptedLoader<Author>()
    let me = map.resource(ResourceKey<Author>("me"), load: loader.load)
    let recorder = StateRecorder(me)
    let caller = Task { try await me.load() }
    _ = await loader.nextCall()
    caller.cancel()
    await #expect(throws: CancellationError.self) { try await caller.value }
    #expect(loader.cancellations == 0 && me.state.isLoading, "observed: it goes on")
    recorder.cancel()
    await eventually { me._core.runningFetches == 0 }
    #expect(loader.cancellations == 1 && !me.state.isLoading)
    #expect(me.state.value == nil)
  }

  @Test("An observed fetch whose caller was cancelled stores its answer for the observer")
  func observedFetchLands() async throws {
    let map = IdentityMap(clock: clock)
    let loader = ScriptedLoader<Author>()
    let me = map.resource(ResourceKey<Author>("me"), load: loader.load)
    let recorder = StateRecorder(me)
    let caller = Task { try await me.load() }
    _ = await loader.nextCall()
    caller.cancel()
    _ = try? await caller.value
    loader.respond(.value(ursula))
    let landed = await recorder.first { !$0.isLoading }
    #expect(landed.value == ursula)
  }

  @Test("A background refresh has nobody to cancel it: a caller that joins and leaves does not")
  func backgroundRefreshGoesOn() async throws {
    let map = IdentityMap(clock: clock)
    let loader = ScriptedLoader<Author>()
    let me = map.resource(ResourceKey<Author>("me"), load: loader.load)
    async let first = me.refresh()
    _ = await loader.nextCall()
    loader.respond(.value(ursula))
    _ = try await first
    #expect(try await me.load() == ursula)  // stale at once: answered, refreshed behind
    _ = await loader.nextCall()
    let joined = Task { try await me.refresh() }
    await eventually { me._core.waiters == 1 }
    joined.cancel()
    _ = try? await joined.value
    #expect(loader.cancellations == 0 && me.state.isLoading)
    loader.respond(.value(Author(id: 1, name: "Le Guin")))
    await eventually { !me.state.isLoading }
    #expect(me.state.value?.name == "Le Guin")
  }

  @Test(
    "A caller already cancelled gets CancellationError and starts no fetch; a fresh answer needs no await"
  )
  func alreadyCancelled() async throws {
    let map = IdentityMap(clock: clock)
    let loader = ScriptedLoader<Author>()
    let me = map.resource(ResourceKey<Author>("me"), staleAfter: .seconds(60), load: loader.load)
    let early = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      return try await me.load()
    }
    await #expect(throws: CancellationError.self) { try await early.value }
    #expect(loader.calls == 0 && !me.state.isLoading)
    async let first = me.load()
    _ = await loader.nextCall()
    loader.respond(.value(ursula))
    _ = try await first
    let cached = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      return try await me.load()
    }
    #expect(try await cached.value == ursula, "a fresh answer is returned: nothing to wait for")
  }

  @Test("Cancelled during a retry's wait: the wait is cancelled, no further try, nothing written")
  func cancelledDuringTheRetryWait() async throws {
    let map = IdentityMap(clock: clock)
    let loader = ScriptedLoader<Author>()
    let me = map.resource(
      ResourceKey<Author>("me"), retry: .exponential(attempts: 3, jitter: false),
      load: loader.load)
    let caller = Task { try await me.load() }
    _ = await loader.nextCall()
    loader.fail(LoaderError(503))
    await clock.waitForSleepers(1)
    caller.cancel()
    await #expect(throws: CancellationError.self) { try await caller.value }
    await eventually { me._core.runningFetches == 0 }
    #expect(clock.sleepers == 0, "the wait was cancelled")
    clock.advance(by: .seconds(60))
    #expect(loader.calls == 1)
    #expect(me.state.value == nil && me.state.error == nil && !me.state.isLoading)
  }

  @Test(
    "A caller cancelled while the fetch it started runs, before it waits: CancellationError, and the fetch, abandoned, is cancelled",
    arguments: [true, false])
  func cancelledBeforeItWaits(inline: Bool) async throws {
    let map = IdentityMap(clock: clock)
    map._resources.startsWaitedFetchesInline = inline
    let caller = Locked<Task<Author, any Error>?>(nil)
    let started = Gate()
    let gate = Gate()
    let sawCancellation = Locked(false)
    let me = map.resource(ResourceKey<Author>("me")) { () async throws -> Author in
      // NB: inline, this runs on the caller's thread between its demand and its wait: the
      // caller is listed, reserved, with no continuation yet.
      caller.value?.cancel()
      await gate.wait()
      sawCancellation.withValue { $0 = Task.isCancelled }
      return Author(id: 1, name: "Ursula")
    }
    let task = Task {
      await started.wait()
      return try await me.load()
    }
    caller.withValue { $0 = task }
    started.open()
    await #expect(throws: CancellationError.self) { try await task.value }
    #expect(me._core.waiters == 0 && me._core.parkedOutcomes == 0)
    await eventually { gate.waiting == 1 }
    gate.open()
    await eventually { me._core.runningFetches == 0 }
    #expect(sawCancellation.value, "the loader's task was cancelled")
    #expect(me.state.value == nil && !me.state.isLoading && me.state.error == nil)
    #expect(map.find(Author.self, id: 1) == nil, "its answer was dropped")
  }

  @Test("A cancelled fetch is forgotten: the next demand starts a new one")
  func nextDemandStartsAfresh() async throws {
    let map = IdentityMap(clock: clock)
    let loader = ScriptedLoader<Author>()
    let me = map.resource(ResourceKey<Author>("me"), load: loader.load)
    let caller = Task { try await me.load() }
    _ = await loader.nextCall()
    caller.cancel()
    _ = try? await caller.value
    async let again = me.load()
    _ = await loader.nextCall()
    loader.respond(.value(ursula))
    #expect(try await again == ursula)
    #expect(loader.calls == 2)
  }
}
