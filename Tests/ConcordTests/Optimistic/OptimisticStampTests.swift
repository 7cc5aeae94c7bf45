import Foundation
import Testing

@testable import Concord

@Suite("Optimistic layers: stamps compared underneath")
struct OptimisticStampTests {
  @Test("stamps underneath are compared with the value underneath, never the layer's")
  func stampsUnderneath() {
    let map = IdentityMap()
    let counter = map.store(Counter(id: 1, value: 1), modifiedAt: 10)
    // The layer's write is stamped 20; the server's 15 is newer than what is underneath (10).
    let layer = map.optimistic { $0.update(Counter.self, id: 1, modifiedAt: 20) { $0.value = 2 } }
    map.store(Counter(id: 1, value: 15), modifiedAt: 15)
    map.store(Counter(id: 1, value: 5), modifiedAt: 5)  // stale underneath: refused
    #expect(counter.value.value == 2)
    layer.rollback()
    #expect(counter.value.value == 15)

    // Committed with its own stamp 20: a newer value underneath would still win.
    let late = map.optimistic { $0.update(Counter.self, id: 1, modifiedAt: 16) { $0.value = 16 } }
    map.store(Counter(id: 1, value: 30), modifiedAt: 30)
    late.commit()
    #expect(counter.value.value == 30, "the layer's stamp 16 is older than the server's 30")
    map._core._checkInvariants()
  }
}
