import Foundation
import Testing

@testable import Concord

/// The shadows of `map`, for the lifetime checks.
func shadowCount(_ map: IdentityMap) -> Int {
  map._core.read { map._core.layers.order.count }
}

@Suite("Optimistic layers: applying, stacking, committing, rolling back")
struct OptimisticStackingTests {
  @Test("a layer shows at once; rollback shows what is underneath; commit keeps it")
  func showCommitRollback() {
    let map = IdentityMap()
    let counter = map.store(Counter(id: 1, value: 10))
    let like = map.optimistic { $0.update(Counter.self, id: 1) { $0.value += 1 } }
    #expect(counter.value.value == 11)
    #expect(like.isPending)
    like.rollback()
    #expect(counter.value.value == 10)
    #expect(!like.isPending)

    let again = map.optimistic { $0.update(Counter.self, id: 1) { $0.value += 1 } }
    again.commit()
    #expect(counter.value.value == 11)
    #expect(shadowCount(map) == 0)
    map._core._checkInvariants()
  }

  @Test("layers stack; rolling back one re-applies the later ones")
  func stacking() {
    let map = IdentityMap()
    let job = map.store(Job(id: 1, title: "a", isOpen: true, priority: 0))
    let first = map.optimistic { $0.update(Job.self, id: 1) { $0.title = "first" } }
    let second = map.optimistic { $0.update(Job.self, id: 1) { $0.priority = 5 } }
    #expect(job.value == Job(id: 1, title: "first", isOpen: true, priority: 5))
    first.rollback()
    // The second layer wrote its whole value, made over the first's: it stays on top.
    #expect(job.value == Job(id: 1, title: "first", isOpen: true, priority: 5))
    second.rollback()
    #expect(job.value == Job(id: 1, title: "a", isOpen: true, priority: 0))

    let bottom = map.optimistic { $0.update(Job.self, id: 1) { $0.title = "bottom" } }
    let top = map.optimistic { $0.store(Job(id: 2, title: "new", isOpen: true, priority: 0)) }
    top.rollback()
    #expect(map.find(Job.self, id: 2) == nil, "what only the layer created is removed")
    #expect(job.value.title == "bottom")
    bottom.commit()
    #expect(job.value.title == "bottom")
    #expect(shadowCount(map) == 0)
    map._core._checkInvariants()
  }

  @Test("commit writes underneath: later layers stay on top, and rollback of them reveals it")
  func commitUnderLaterLayers() {
    let map = IdentityMap()
    let job = map.store(Job(id: 1, title: "a", isOpen: true, priority: 0))
    let first = map.optimistic { $0.update(Job.self, id: 1) { $0.title = "confirmed" } }
    let second = map.optimistic { $0.update(Job.self, id: 1) { $0.isOpen = false } }
    first.commit()
    #expect(job.value == Job(id: 1, title: "confirmed", isOpen: false, priority: 0))
    second.rollback()
    #expect(job.value == Job(id: 1, title: "confirmed", isOpen: true, priority: 0))
    map._core._checkInvariants()
  }

  @Test("a body that throws applies nothing and makes no layer")
  func throwingBody() {
    struct Failure: Error {}
    let map = IdentityMap()
    let counter = map.store(Counter(id: 1, value: 0))
    #expect(throws: Failure.self) {
      try map.optimistic { transaction in
        transaction.update(Counter.self, id: 1) { $0.value = 7 }
        throw Failure()
      }
    }
    #expect(counter.value.value == 0)
    #expect(shadowCount(map) == 0)
    map._core._checkInvariants()
  }

  @Test("optimistic inside a transaction body stops the program with a clear message")
  func insideAWriteTraps() async {
    await #expect(processExitsWith: .failure) {
      let map = IdentityMap()
      map.transaction { _ in
        _ = map.optimistic { $0.store(Counter(id: 1, value: 1)) }
      }
    }
  }

  // Counter nests nothing and nothing nests it, so the writes that end the layers lower it by
  // exchanging its value with the one underneath (`_Shadow._lower`), unless the map takes no
  // shortcuts. Ending the newest layer in such a write changes what raising must show.
  @Test(
    "ending the newest of two layers over an entity shows the older one's, over a server write",
    arguments: [false, true])
  func endTheNewestOfTwo(exhaustive: Bool) {
    let map = IdentityMap()
    map._core.pass.isExhaustive = exhaustive
    let counter = map.store(Counter(id: 1, value: 10))
    let first = map.optimistic { $0.update(Counter.self, id: 1) { $0.value = 11 } }
    let second = map.optimistic { $0.update(Counter.self, id: 1) { $0.value = 12 } }
    map.store(Counter(id: 1, value: 20))
    #expect(counter.value.value == 12, "the server's write goes underneath")
    second.rollback()
    #expect(counter.value.value == 11)
    map._core._checkInvariants()
    first.rollback()
    #expect(counter.value.value == 20)
    let third = map.optimistic { $0.update(Counter.self, id: 1) { $0.value = 31 } }
    let fourth = map.optimistic { $0.update(Counter.self, id: 1) { $0.value = 32 } }
    fourth.commit()
    #expect(counter.value.value == 31, "the older layer stays over what the newer committed")
    third.rollback()
    #expect(counter.value.value == 32, "the newer layer was committed underneath")
    #expect(shadowCount(map) == 0)
    map._core._checkInvariants()
  }
}
