import ConcordTesting
import Foundation
import TestSupport
import Testing

@testable import Concord

/// Exponential retry with jitter, on the map's clock: one `sleep(for:)` per retry, of
/// min(cap, base × 2^(n−1) × factor).
@Suite("Resources: retries")
struct ResourceRetryTests {
  let clock = RecordingClock()
  let ursula = Author(id: 1, name: "Ursula")

  func resource(_ retry: RetryPolicy) -> (Resource<Author>, ScriptedLoader<Author>) {
    let map = IdentityMap(clock: clock)
    let loader = ScriptedLoader<Author>()
    return (map.resource(ResourceKey<Author>("me"), retry: retry, load: loader.load), loader)
  }

  @Test("Each retry waits base × 2^(n−1) on the map's clock, and the attempt is in the request")
  func exponentialBackOff() async throws {
    let (me, loader) = resource(.exponential(attempts: 4, base: .seconds(1), jitter: false))
    let answer = Task { try await me.load() }
    for (retry, wait) in [Duration.seconds(1), .seconds(2), .seconds(4)].enumerated() {
      #expect(await loader.nextCall().attempt == retry + 1)
      loader.fail(LoaderError(503))
      await clock.manual.waitForSleepers(1)
      #expect(me.state.isLoading && me.state.error == nil, "a retry's wait is part of the fetch")
      clock.manual.advance(by: wait - .milliseconds(1))
      #expect(clock.manual.sleepers == 1 && loader.calls == retry + 1, "not before its time")
      clock.manual.advance(by: .milliseconds(1))
    }
    #expect(await loader.nextCall().attempt == 4)
    loader.respond(.value(ursula))
    #expect(try await answer.value == ursula)
    #expect(clock.sleeps == [.seconds(1), .seconds(2), .seconds(4)])
    #expect(me.state.error == nil)
  }

  @Test("The wait is capped")
  func cap() async throws {
    let (me, loader) = resource(
      .exponential(attempts: 4, base: .seconds(10), cap: .seconds(15), jitter: false))
    let answer = Task { try await me.load() }
    for _ in 0..<3 {
      _ = await loader.nextCall()
      loader.fail(LoaderError(503))
      await clock.manual.waitForSleepers(1)
      clock.manual.advance(by: .seconds(15))
    }
    _ = await loader.nextCall()
    loader.respond(.value(ursula))
    _ = try await answer.value
    #expect(clock.sleeps == [.seconds(10), .seconds(15), .seconds(15)])
  }

  @Test("With jitter, each wait is base × 2^(n−1) × a factor in [0.5, 1.5), capped after")
  func jitter() async throws {
    let (me, loader) = resource(
      .exponential(attempts: 7, base: .seconds(1), cap: .seconds(40), jitter: true))
    let answer = Task { try await me.load() }
    for _ in 0..<6 {
      _ = await loader.nextCall()
      loader.fail(LoaderError(503))
      await clock.manual.waitForSleepers(1)
      clock.manual.advance(by: .seconds(60))
    }
    _ = await loader.nextCall()
    loader.respond(.value(ursula))
    _ = try await answer.value
    let sleeps = clock.sleeps
    #expect(sleeps.count == 6)
    for (index, sleep) in sleeps.enumerated() {
      let plain = Double(1 << index)
      let seconds = Double(sleep.components.seconds) + Double(sleep.components.attoseconds) / 1e18
      #expect(seconds >= min(40, plain * 0.5) - 1e-9 && seconds <= min(40, plain * 1.5))
    }
    #expect(sleeps != [1, 2, 4, 8, 16, 32].map { Duration.seconds($0) }, "the factors vary")
  }

  @Test(
    "After its last try the fetch fails with the last error; the answer stays, and a success clears the error"
  )
  func failureAfterRetries() async throws {
    let (me, loader) = resource(.exponential(attempts: 2, base: .seconds(1), jitter: false))
    let first = Task { try await me.load() }
    _ = await loader.nextCall()
    loader.respond(.value(ursula))
    _ = try await first.value
    let fetchedAt = me.state.fetchedAt
    clock.manual.advance(by: .seconds(5))
    let second = Task { try await me.refresh() }
    _ = await loader.nextCall()
    loader.fail(LoaderError(500))
    await clock.manual.waitForSleepers(1)
    clock.manual.advance(by: .seconds(1))
    _ = await loader.nextCall()
    loader.fail(LoaderError(502))
    await #expect(throws: LoaderError(502)) { try await second.value }
    #expect(loader.calls == 3)
    let failed = me.state
    #expect(failed.error as? LoaderError == LoaderError(502))
    #expect(failed.value == ursula && failed.fetchedAt == fetchedAt && !failed.isLoading)
    let third = Task { try await me.refresh() }
    _ = await loader.nextCall()
    loader.respond(.value(ursula))
    _ = try await third.value
    #expect(me.state.error == nil)
  }

  @Test("retryIf decides which errors are retried")
  func retryIf() async throws {
    let (me, loader) = resource(
      .exponential(attempts: 5, jitter: false, retryIf: { ($0 as? LoaderError)?.code != 404 }))
    let answer = Task { try await me.load() }
    _ = await loader.nextCall()
    loader.fail(LoaderError(404))
    await #expect(throws: LoaderError(404)) { try await answer.value }
    #expect(loader.calls == 1 && clock.sleeps.isEmpty)
  }

  @Test("RetryPolicy.none tries once; attempts of 1 or less is none")
  func none() async throws {
    var kept: [Resource<Author>] = []  // NB: a dropped resource's keepFor would sleep too
    for policy in [RetryPolicy.none, .exponential(attempts: 0), .exponential(attempts: 1)] {
      let (me, loader) = resource(policy)
      kept.append(me)
      let answer = Task { try await me.load() }
      _ = await loader.nextCall()
      loader.fail(LoaderError(500))
      await #expect(throws: LoaderError(500)) { try await answer.value }
      #expect(loader.calls == 1)
    }
    #expect(clock.sleeps.isEmpty)
  }

  @Test("A loader that throws CancellationError when nobody cancelled fails the fetch, not retried")
  func cancellationErrorIsNotRetried() async throws {
    let (me, loader) = resource(.exponential(attempts: 5))
    let answer = Task { try await me.load() }
    _ = await loader.nextCall()
    loader.fail(CancellationError())
    await #expect(throws: CancellationError.self) { try await answer.value }
    #expect(loader.calls == 1 && clock.sleeps.isEmpty)
    #expect(me.state.error is CancellationError, "error is set")
  }

  @Test("Callers arriving during a retry's wait join the fetch")
  func joinDuringTheWait() async throws {
    let (me, loader) = resource(.exponential(attempts: 2, base: .seconds(1), jitter: false))
    let first = Task { try await me.load() }
    _ = await loader.nextCall()
    loader.fail(LoaderError(503))
    await clock.manual.waitForSleepers(1)
    let second = Task { try await me.load() }
    while me._core.waiters < 2 { await Task.yield() }
    clock.manual.advance(by: .seconds(1))
    _ = await loader.nextCall()
    loader.respond(.value(ursula))
    #expect(try await first.value == ursula)
    #expect(try await second.value == ursula)
    #expect(loader.calls == 2)
  }
}
