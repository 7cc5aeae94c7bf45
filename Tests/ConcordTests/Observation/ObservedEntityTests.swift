import Observation
import TestSupport
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

  /// Waits, on the main actor, until `observed` shows `expected`.
  func catchUp(_ observed: ObservedEntity<Counter>, to expected: Int) async {
    while observed.value.value != expected { await nextChange(of: observed) }
  }

  @Test(
    "Seeded bursts from the main actor and from 4 other tasks: it follows, never goes back",
    arguments: [1, 2, 3])
  func seededModel(seed: UInt64) async {
    var generator = SeededGenerator(seed: seed &* 0xA076_1D64)
    let map = IdentityMap()
    let observed = ObservedEntity(map.store(Counter(id: 1, value: 0)))
    // Every write raises the value, so commit order is value order.
    var model = 0
    var seen = [0]
    var writes = 0
    for _ in 0..<max(60, randomSteps(share: 2_000)) {
      switch Int.random(in: 0..<5, using: &generator) {
      case 0:
        // A burst on the main actor: nothing can be applied until it ends.
        let count = Int.random(in: 1...50, using: &generator)
        for _ in 0..<count { map.update(Counter.self, id: 1) { $0.value += 1 } }
        model += count
        writes += count
        #expect(observed.value.value == seen.last)
      case 1:
        // Four writers elsewhere, while the main actor waits for them.
        let count = Int.random(in: 1...30, using: &generator)
        await withTaskGroup(of: Void.self) { group in
          for _ in 0..<4 {
            group.addTask {
              for _ in 0..<count { map.update(Counter.self, id: 1) { $0.value += 1 } }
            }
          }
        }
        model += 4 * count
        writes += 4 * count
      case 2:
        // A transaction that ends where it started changes nothing; one that ends higher is
        // one change.
        let rise = Int.random(in: 0...3, using: &generator)
        map.transaction { transaction in
          transaction.update(Counter.self, id: 1) { $0.value += 100 }
          transaction.update(Counter.self, id: 1) { $0.value -= 100 - rise }
        }
        model += rise
        writes += rise == 0 ? 0 : 1
      case 3:
        await Task.yield()
      default:
        await catchUp(observed, to: model)
        #expect(observed.value.value == model)
        #expect(map.find(Counter.self, id: 1)?.value.value == model)
      }
      seen.append(observed.value.value)
      #expect(seen[seen.count - 2] <= seen[seen.count - 1], "it went back")
    }
    await catchUp(observed, to: model)
    #expect(observed.value == Counter(id: 1, value: model))
    #expect(observed.updates <= writes)
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
