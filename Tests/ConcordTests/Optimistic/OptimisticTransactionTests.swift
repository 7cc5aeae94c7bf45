import Foundation
import Testing

@testable import Concord

@Suite("Optimistic layers ended inside a transaction")
struct OptimisticTransactionTests {
  @Test("commit and rollback inside a transaction body take effect when it ends")
  func insideATransaction() {
    struct Failure: Error {}
    let map = IdentityMap()
    let counter = map.store(Counter(id: 1, value: 0))
    let layer = map.optimistic { $0.update(Counter.self, id: 1) { $0.value = 5 } }
    #expect(throws: Failure.self) {
      try map.transaction { transaction in
        transaction.update(Counter.self, id: 1) { $0.value = 1 }  // underneath, rolled back
        layer.rollback()
        #expect(layer.isPending, "not yet: the write is under way")
        throw Failure()
      }
    }
    #expect(!layer.isPending)
    #expect(counter.value.value == 0)
    map._core._checkInvariants()
  }
}
