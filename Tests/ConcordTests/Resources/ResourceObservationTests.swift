import ConcordTesting
import Foundation
import TestSupport
import Testing

@testable import Concord

/// What a resource's observers are told: each change of state once, in order, after the
/// write that caused it commits.
@Suite("Resources: observing states")
struct ResourceObservationTests {
  let clock = ManualClock()
  let ursula = Author(id: 1, name: "Ursula")

  @Test("A fetch is two changes: it starts, then it ends with its answer")
  func fetchStartsAndEnds() async throws {
    let map = IdentityMap(clock: clock)
    let loader = ScriptedLoader<Author>()
    let me = map.resource(ResourceKey<Author>("me"), staleAfter: .seconds(60), load: loader.load)
    let recorder = StateRecorder(me)
    let answer = Task { try await me.load() }
    _ = await loader.nextCall()
    loader.respond(.value(ursula))
    _ = try await answer.value
    let states = recorder.states
    #expect(states.count == 2)
    #expect(states.first?.isLoading == true && states.first?.value == nil)
    #expect(states.last?.isLoading == false && states.last?.value == ursula)
    #expect(states.last?.isStale == false && states.last?.fetchedAt == clock.now)
  }

  @Test("A failed fetch ends with its error, once")
  func failedFetch() async throws {
    let map = IdentityMap(clock: clock)
    let me = map.resource(ResourceKey<Author>("me"), retry: .none) { () async throws -> Author in
      throw LoaderError(500)
    }
    let recorder = StateRecorder(me)
    await #expect(throws: LoaderError(500)) { try await me.load() }
    #expect(recorder.states.count == 2)
    #expect(recorder.states.last?.error as? LoaderError == LoaderError(500))
  }

  @Test("observe(includingCurrentState:) starts with the current state")
  func currentStateFirst() async throws {
    let map = IdentityMap(clock: clock)
    let me = map.resource(ResourceKey<Author>("me")) { Author(id: 1, name: "Ursula") }
    try await me.load()
    let recorder = StateRecorder(me, includingCurrentState: true)
    #expect(recorder.states.count == 1 && recorder.states.first?.value == ursula)
  }

  @Test("states: the current state, then each change; ending the iteration ends the observation")
  func statesStream() async throws {
    let map = IdentityMap(clock: clock)
    let me = map.resource(ResourceKey<Author>("me"), staleAfter: .seconds(60)) {
      Author(id: 1, name: "Ursula")
    }
    try await me.load()
    var names: [String] = []
    for await state in me.states {
      names.append(state.value?.name ?? "-")
      if names.count == 1 { map.update(Author.self, id: 1) { $0.name = "Le Guin" } }
      if names.count == 2 { break }
    }
    #expect(names == ["Ursula", "Le Guin"])
    await eventually { map.statistics.subscriptions == 1 }  // the resource's own, on its slot
  }

  @Test("An observed resource is told when its answer turns stale with time")
  func staleWithTime() async throws {
    let map = IdentityMap(clock: clock)
    let me = map.resource(ResourceKey<Author>("me"), staleAfter: .seconds(60)) {
      Author(id: 1, name: "Ursula")
    }
    try await me.load()
    #expect(clock.sleepers == 0, "unobserved: nobody needs telling")
    let recorder = StateRecorder(me)
    await clock.waitForSleepers(1)
    clock.advance(by: .seconds(59))
    #expect(recorder.states.isEmpty)
    clock.advance(by: .seconds(1))
    let stale = await recorder.first { $0.isStale }
    #expect(stale.value == ursula && !stale.isLoading)
    #expect(recorder.states.count == 1)
    #expect(clock.sleepers == 0, "a stale answer needs no timer")
  }

  @Test("A new answer moves the stale timer")
  func newAnswerMovesTheTimer() async throws {
    let map = IdentityMap(clock: clock)
    let me = map.resource(ResourceKey<Author>("me"), staleAfter: .seconds(60)) {
      Author(id: 1, name: "Ursula")
    }
    let recorder = StateRecorder(me)
    try await me.load()
    await clock.waitForSleepers(1)
    clock.advance(by: .seconds(30))
    try await me.refresh()
    clock.advance(by: .seconds(30))
    #expect(!me.state.isStale)
    await eventually { clock.sleepers == 1 }
    clock.advance(by: .seconds(30))
    let stale = await recorder.first { $0.isStale && $0.value != nil }
    #expect(stale.fetchedAt == Date(timeIntervalSince1970: 30))
  }

  @Test("invalidate() tells observers once; invalidating a stale answer tells nobody")
  func invalidateTellsOnce() async throws {
    let map = IdentityMap(clock: clock)
    let me = map.resource(ResourceKey<Author>("me"), staleAfter: .seconds(60)) {
      Author(id: 1, name: "Ursula")
    }
    try await me.load()
    let recorder = StateRecorder(me)
    me.invalidate()
    #expect(recorder.states.count == 1 && recorder.states.last?.isStale == true)
    me.invalidate()
    map.invalidateResources()
    #expect(recorder.states.count == 1)
  }

  @Test("A fetch that was in flight when invalidated lands stale")
  func invalidatedWhileFetching() async throws {
    let map = IdentityMap(clock: clock)
    let loader = ScriptedLoader<Author>()
    let me = map.resource(ResourceKey<Author>("me"), staleAfter: .seconds(60), load: loader.load)
    let answer = Task { try await me.load() }
    _ = await loader.nextCall()
    me.invalidate()
    loader.respond(.value(ursula))
    #expect(try await answer.value == ursula)
    #expect(me.state.isStale, "its answer may predate what the invalidation was about")
    let again = Task { try await me.load() }
    _ = await loader.nextCall()
    loader.respond(.value(ursula))
    _ = try await again.value
    await eventually { !me.state.isLoading }
    #expect(!me.state.isStale)
  }

  @Test("Observers never see an older answer after a newer one, with 8 writers")
  func neverGoesBack() async throws {
    let map = IdentityMap(clock: clock)
    let counters = map.resource(ResourceKey<[Counter]>("counters")) {
      [Counter(id: 1, value: 0)]
    }
    try await counters.load()
    let seen = Locked<[Int]>([])
    let subscription = counters.observe { state in
      if let value = state.value?.first?.value { seen.append(value) }
    }
    await withTaskGroup(of: Void.self) { group in
      for _ in 0..<8 {
        group.addTask {
          for _ in 0..<200 { map.update(Counter.self, id: 1) { $0.value += 1 } }
        }
      }
    }
    let values = seen.value
    #expect(values == values.sorted() && Set(values).count == values.count)
    #expect(values.last == 1_600)
    #expect(counters.state.value?.first?.value == 1_600)
    subscription.cancel()
  }

  @Test("A callback may read and write the map and the resource")
  func reentrantCallback() async throws {
    let map = IdentityMap(clock: clock)
    let me = map.resource(ResourceKey<Author>("me")) { Author(id: 1, name: "Ursula") }
    try await me.load()
    let reads = Locked<[String]>([])
    let subscription = me.observe { state in
      reads.append(me.state.value?.name ?? "-")
      reads.append(map.find(Author.self, id: 1)?.value.name ?? "-")
      map.store(User(id: 7, name: "seen \(state.value?.name ?? "-")"))
      me.invalidate()
    }
    map.update(Author.self, id: 1) { $0.name = "Le Guin" }
    #expect(reads.value.prefix(2) == ["Le Guin", "Le Guin"])
    subscription.cancel()
  }

  @Test("A cancelled observation is told nothing more")
  func cancelled() async throws {
    let map = IdentityMap(clock: clock)
    let me = map.resource(ResourceKey<Author>("me")) { Author(id: 1, name: "Ursula") }
    try await me.load()
    let recorder = StateRecorder(me)
    recorder.cancel()
    map.update(Author.self, id: 1) { $0.name = "Le Guin" }
    try await me.refresh()
    #expect(recorder.states.isEmpty)
  }
}
