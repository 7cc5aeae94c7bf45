import Observation
import Testing

@testable import Concord

@Suite("ObservedEntity: an @Observable value, updated on the main actor in commit order")
@MainActor
struct ObservedEntityTests {
  /// Waits until Observation reports a change of `observed.value`.
  func nextChange<Value>(of observed: ObservedEntity<Value>) async {
    await withCheckedContinuation { continuation in
      withObservationTracking {
        _ = observed.value
      } onChange: {
        continuation.resume()
      }
    }
  }

  @Test("It starts with the current value and follows each change, through Observation")
  func followsChanges() async {
    let map = IdentityMap()
    let observed = ObservedEntity(map.store(Counter(id: 1, value: 0)))
    #expect(observed.value.value == 0)
    Task.detached { map.update(Counter.self, id: 1) { $0.value = 1 } }
    await nextChange(of: observed)
    await Task.yield()
    #expect(observed.value.value == 1)
  }

  @Test("A busy main actor skips to the newest value: one change for a thousand writes")
  func coalescesWhileTheMainActorIsBusy() async {
    let map = IdentityMap()
    let observed = ObservedEntity(map.store(Counter(id: 1, value: 0)))
    // The writes run on the main actor, so it cannot apply any of them until they are done.
    for value in 1...1_000 { map.update(Counter.self, id: 1) { $0.value = value } }
    #expect(observed.value.value == 0)
    await nextChange(of: observed)
    await Task.yield()
    #expect(observed.value.value == 1_000)
    #expect(observed.updates == 1)
  }

  @Test("With 8 writers on other threads, it never goes back, and ends at the last value")
  func neverGoesBack() async {
    let map = IdentityMap()
    let observed = ObservedEntity(map.store(Counter(id: 1, value: 0)))
    var seen: [Int] = []
    let done = Task.detached {
      await withTaskGroup(of: Void.self) { group in
        for _ in 0..<8 {
          group.addTask {
            for _ in 0..<200 { map.update(Counter.self, id: 1) { $0.value += 1 } }
          }
        }
      }
    }
    while seen.last != 1_600 {
      await nextChange(of: observed)
      await Task.yield()
      seen.append(observed.value.value)
    }
    await done.value
    #expect(zip(seen, seen.dropFirst()).allSatisfy { $0 <= $1 })
    #expect(seen.last == 1_600)
  }

  @Test("It holds its entity while it lives")
  func holdsItsEntity() {
    let map = IdentityMap()
    var observed: ObservedEntity<Counter>? = ObservedEntity(map.store(Counter(id: 1, value: 0)))
    #expect(map.find(Counter.self, id: 1) != nil)
    observed = nil
    #expect(map.find(Counter.self, id: 1) == nil)
    withExtendedLifetime(observed) {}
  }
}
