import Foundation
import Testing

@testable import Concord

@Suite("Optimistic layers: commit and rollback are idempotent, from anywhere")
struct OptimisticIdempotenceTests {
  @Test("commit and rollback are idempotent; only the first has an effect")
  func idempotence() {
    let map = IdentityMap()
    let counter = map.store(Counter(id: 1, value: 0))
    let layer = map.optimistic { $0.update(Counter.self, id: 1) { $0.value = 1 } }
    layer.commit()
    layer.commit()
    layer.rollback()
    #expect(counter.value.value == 1)
    let other = map.optimistic { $0.update(Counter.self, id: 1) { $0.value = 2 } }
    other.rollback()
    other.rollback()
    other.commit()
    #expect(counter.value.value == 1)
    map._core._checkInvariants()
  }

  @Test("commit and rollback from a callback")
  func fromACallback() {
    let map = IdentityMap()
    let counter = map.store(Counter(id: 1, value: 0))
    let layer = map.optimistic { $0.update(Counter.self, id: 1) { $0.value = 5 } }
    let subscription = counter.observe { value in
      if value.value == 6 { layer.rollback() }
    }
    map.update(Counter.self, id: 1) { $0.value = 6 }  // underneath: nobody told yet
    #expect(counter.value.value == 5)
    layer.commit()
    #expect(counter.value.value == 5, "committed over the server's 6, unstamped: last write wins")
    subscription.cancel()
    map._core._checkInvariants()
  }
}
