import ConcordTesting
import Foundation
import TestSupport
import Testing

@testable import Concord

/// Conditional requests: the validator goes back to the server, and `.notModified` confirms the
/// cached answer without writing anything.
@Suite("Resources: conditional requests")
struct ConditionalRequestTests {
  let clock = ManualClock()
  let ursula = Author(id: 1, name: "Ursula")

  @Test("The answer's validator is sent with the next request; none before the first answer")
  func validatorIsSentBack() async throws {
    let map = IdentityMap(clock: clock)
    let loader = ScriptedLoader<Author>()
    let me = map.resource(ResourceKey<Author>("me"), load: loader.load)
    async let first = me.load()
    #expect(await loader.nextCall().validator == nil)
    loader.respond(.value(ursula, validator: "\"v1\""))
    _ = try await first
    async let second = me.refresh()
    #expect(await loader.nextCall().validator == "\"v1\"")
    loader.respond(.value(ursula))
    _ = try await second
    async let third = me.refresh()
    #expect(await loader.nextCall().validator == nil, "an answer without one forgets it")
    loader.respond(.value(ursula))
    _ = try await third
  }

  @Test(
    ".notModified moves fetchedAt, keeps the validator, writes nothing and tells nobody of a value")
  func notModified() async throws {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger, clock: clock)
    let loader = ScriptedLoader<Author>()
    let me = map.resource(ResourceKey<Author>("me"), staleAfter: .seconds(60), load: loader.load)
    async let first = me.load()
    _ = await loader.nextCall()
    loader.respond(.value(ursula, validator: "\"v1\""))
    _ = try await first
    let author = try #require(map.find(Author.self, id: 1))
    let authorChanges = Locked(0)
    let subscription = author.observe { _ in authorChanges.increment() }
    clock.advance(by: .seconds(90))
    #expect(me.state.isStale)
    let recorder = StateRecorder(me)
    logger.clear()
    async let second = me.load()
    #expect(try await second == ursula, "stale: the cached answer at once")
    #expect(await loader.nextCall().validator == "\"v1\"")
    loader.respond(.notModified)
    let confirmed = await recorder.first { !$0.isLoading }
    #expect(confirmed.fetchedAt == clock.now && !confirmed.isStale && confirmed.value == ursula)
    #expect(recorder.states.count == 2, "the fetch starting, then ending: no value change")
    #expect(authorChanges.value == 0)
    #expect(logger.events.isEmpty, "nothing written")
    async let third = me.refresh()
    #expect(await loader.nextCall().validator == "\"v1\"", "the validator stays")
    loader.respond(.notModified)
    _ = try await third
    subscription.cancel()
  }

  @Test(".notModified with nothing cached fails with notModifiedWithoutAnswer, not retried")
  func notModifiedWithoutAnswer() async throws {
    let map = IdentityMap(clock: clock)
    let loader = ScriptedLoader<Author>()
    let me = map.resource(
      ResourceKey<Author>("me"), retry: .exponential(attempts: 5), load: loader.load)
    let answer = Task { try await me.load() }
    _ = await loader.nextCall()
    loader.respond(.notModified)
    await #expect(throws: ResourceError.notModifiedWithoutAnswer) { try await answer.value }
    #expect(loader.calls == 1 && clock.sleepers == 0)
    #expect(me.state.error as? ResourceError == .notModifiedWithoutAnswer)
  }

  @Test("A removed single answer sends no validator: nothing is cached to confirm")
  func removedAnswerSendsNoValidator() async throws {
    let map = IdentityMap(clock: clock)
    let loader = ScriptedLoader<Author>()
    let me = map.resource(ResourceKey<Author>("me"), load: loader.load)
    async let first = me.load()
    _ = await loader.nextCall()
    loader.respond(.value(ursula, validator: "\"v1\""))
    _ = try await first
    map.remove(Author.self, id: 1)
    #expect(me.state.value == nil)
    async let second = me.load()
    #expect(await loader.nextCall().validator == nil)
    loader.respond(.value(ursula, validator: "\"v2\""))
    #expect(try await second == ursula)
  }
}
