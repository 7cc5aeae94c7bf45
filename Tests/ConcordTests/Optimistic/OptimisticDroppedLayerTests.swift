import Foundation
import Testing

@testable import Concord

@Suite("Optimistic layers: dropped layers and lifetime")
struct OptimisticDroppedLayerTests {
  @Test("a layer dropped while pending is rolled back")
  func droppedLayer() {
    let map = IdentityMap()
    let counter = map.store(Counter(id: 1, value: 0))
    do {
      _ = map.optimistic { $0.update(Counter.self, id: 1) { $0.value = 99 } }
    }
    #expect(counter.value.value == 0)
    #expect(shadowCount(map) == 0)
    map._core._checkInvariants()
  }

  @Test("a pending layer holds what it wrote; after it ends, nothing more is kept")
  func lifetime() {
    let map = IdentityMap()
    let layer = map.optimistic { $0.store(Counter(id: 1, value: 1)) }
    #expect(map.count == 1, "the layer holds the entity it created")
    layer.commit()
    #expect(map.count == 0, "committed, and nothing else holds it")

    var handle: EntityObserver<Counter>? = map.store(Counter(id: 2, value: 0))
    let shadowing = map.optimistic { $0.update(Counter.self, id: 2) { $0.value = 5 } }
    handle = nil
    #expect(map.count == 1, "the layer holds what it shadows")
    shadowing.rollback()
    #expect(map.count == 0)
    withExtendedLifetime(handle) {}
    map._core._checkInvariants()
  }
}
