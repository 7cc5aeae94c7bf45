import ConcordTesting
import Observation
import TestSupport
import Testing

@testable import Concord

@Suite("ObservedResource: a resource's state, @Observable, updated on the main actor in order")
@MainActor
struct ObservedResourceTests {
  /// Waits until Observation reports a change of `observed.state`.
  func nextChange<Value>(of observed: ObservedResource<Value>) async {
    await withCheckedContinuation { continuation in
      withObservationTracking {
        _ = observed.state
      } onChange: {
        continuation.resume()
      }
    }
  }

  /// Waits, on the main actor, until `observed` shows a state that `matches`.
  func catchUp<Value>(
    _ observed: ObservedResource<Value>, to matches: (ResourceState<Value>) -> Bool
  ) async {
    while !matches(observed.state) { await nextChange(of: observed) }
  }

  @Test("It starts with the current state and follows a fetch, through Observation")
  func followsAFetch() async throws {
    let map = IdentityMap(clock: ManualClock())
    let loader = ScriptedLoader<Author>()
    let observed = ObservedResource(map.resource(ResourceKey<Author>("me"), load: loader.load))
    #expect(observed.state.value == nil && !observed.state.isLoading)
    let answer = Task.detached { try await observed.resource.load() }
    await catchUp(observed) { $0.isLoading }
    _ = await loader.nextCall()
    loader.respond(.value(Author(id: 1, name: "Ursula")))
    await catchUp(observed) { !$0.isLoading }
    #expect(observed.state.value?.name == "Ursula")
    _ = try await answer.value
  }

  @Test("An entity written anywhere reaches it; a busy main actor skips to the newest state")
  func coalesces() async throws {
    let map = IdentityMap(clock: ManualClock())
    let resource = map.resource(ResourceKey<[Counter]>("counters")) { [Counter(id: 1, value: 0)] }
    try await resource.load()
    let observed = ObservedResource(resource)
    // The writes run on the main actor, so it cannot apply any of them until they are done.
    for value in 1...500 { map.update(Counter.self, id: 1) { $0.value = value } }
    #expect(observed.state.value?.first?.value == 0)
    await catchUp(observed) { $0.value?.first?.value == 500 }
    #expect(observed.updates == 1)
  }

  @Test("It keeps the resource observed: a fetch goes on when its only caller is cancelled")
  func keepsTheResourceObserved() async throws {
    let map = IdentityMap(clock: ManualClock())
    let loader = ScriptedLoader<Author>()
    let observed = ObservedResource(map.resource(ResourceKey<Author>("me"), load: loader.load))
    let caller = Task.detached { try await observed.resource.load() }
    _ = await loader.nextCall()
    caller.cancel()
    _ = try? await caller.value
    loader.respond(.value(Author(id: 1, name: "Ursula")))
    await catchUp(observed) { $0.value != nil }
    #expect(loader.cancellations == 0)
  }
}
