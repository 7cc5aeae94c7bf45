import Foundation
import TestSupport
import Testing

@testable import Concord

@Suite("Optimistic layers under 8 concurrent tasks")
struct OptimisticConcurrencyTests {
  @Test("layers made, committed, rolled back and dropped beside server writes")
  func concurrentLayers() async {
    let map = IdentityMap()
    let handles = (0..<16).map { map.store(Counter(id: $0, value: 0)) }
    let seen = Locked<Int>(0)
    let subscriptions = handles.map { $0.observe { _ in seen.increment() } }
    await withTaskGroup(of: Void.self) { group in
      for task in 0..<8 {
        group.addTask {
          var random = SeededGenerator(seed: UInt64(task))
          for step in 0..<200 {
            let id = Int.random(in: 0..<16, using: &random)
            switch (task + step) % 4 {
            case 0:
              let layer = map.optimistic { $0.update(Counter.self, id: id) { $0.value += 1_000 } }
              if Bool.random(using: &random) { layer.commit() } else { layer.rollback() }
            case 1:
              // Dropped: rolled back by its deinit, maybe on another thread's write.
              _ = map.optimistic { $0.update(Counter.self, id: id) { $0.value += 1 } }
            case 2:
              map.update(Counter.self, id: id, modifiedAt: Double(step)) { $0.value += 1 }
            default:
              let layer = map.optimistic { $0.store(Counter(id: 100 + task, value: step)) }
              map.store(Counter(id: id, value: step))
              layer.rollback()
            }
          }
        }
      }
    }
    // Every layer ended: nothing shadowed, nothing held by layers, and the map checks out.
    #expect(shadowCount(map) == 0)
    #expect(map.count == 16, "the layers' own entities went with them")
    #expect(seen.value > 0)
    for handle in handles {
      #expect(map.find(Counter.self, id: handle.value.id)?.value == handle.value)
    }
    map._core._checkInvariants()
    withExtendedLifetime(subscriptions) {}
  }
}
