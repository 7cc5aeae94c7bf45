import Foundation
import TestSupport
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

  @Test("a layer dropped inside a write is rolled back when the write ends, under a newer layer")
  func droppedInsideAWrite() {
    let map = IdentityMap()
    let counter = map.store(Counter(id: 1, value: 0))
    let changes = Locked<[Int]>([])
    let subscription = counter.observe { changes.append($0.value) }
    var older: OptimisticLayer? = map.optimistic {
      $0.update(Counter.self, id: 1) { $0.value = 1 }
    }
    let newer = map.optimistic { $0.update(Counter.self, id: 1) { $0.value = 2 } }
    map.transaction { transaction in
      transaction.update(Counter.self, id: 1) { $0.value += 10 }
      // NB: the handle goes inside the write: its rollback waits for the write's end, carried
      // out by a layer that takes over what this one wrote.
      older = nil
      #expect(counter.value.value == 10, "inside the write, the value underneath")
    }
    #expect(older == nil)
    #expect(counter.value.value == 2, "the newer layer's value, over the server's write")
    #expect(shadowCount(map) == 1)
    newer.rollback()
    #expect(counter.value.value == 10, "the server's write, with no layer left")
    #expect(changes.value == [1, 2, 10])
    #expect(shadowCount(map) == 0)
    withExtendedLifetime(subscription) {}
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
