import Dispatch
import Testing

@testable import Concord

/// Runs `body` when it is deinitialized: a value holding one runs code when the map drops it.
final class OnDeinit: @unchecked Sendable {
  // NB: @unchecked: `body` is only read by the deinit.
  let body: () -> Void

  init(_ body: @escaping () -> Void) {
    self.body = body
  }

  deinit { body() }
}

/// An entity holding a class, so that the map dropping its value runs a deinit.
struct Parcel: Identifiable, Sendable {
  var id: Int
  var onDrop: OnDeinit?
}

/// What a test drops from the middle of the map's work: the map itself, a handle, a
/// subscription, a layer.
final class Holders: @unchecked Sendable {
  // NB: @unchecked: each test touches these from one thread at a time (a queued callback
  // only runs once the test thread waits for it).
  var map: IdentityMap?
  var handle: EntityObserver<Author>?
  var subscription: Subscription?
  var layer: OptimisticLayer?
}

/// The last holder of a map may go anywhere: the map then frees itself once its own code is
/// done, and nothing touches it afterwards. These pass as plain tests; CI runs them under
/// AddressSanitizer, where a use of the freed map would stop the run.
@Suite("A map goes with its last holder, wherever that is")
struct MapTeardownTests {
  @Test func theLastHandleDroppedInAQueuedCallback() async {
    let queue = DispatchQueue(label: "Concord.tests.teardown")
    let holders = Holders()
    holders.map = IdentityMap()
    weak let core = holders.map?._core
    holders.handle = holders.map?.store(Author(id: 1, name: "a"))
    await withCheckedContinuation { continuation in
      // NB: the queue waits until the map object is gone: the callback drops the last holder.
      queue.suspend()
      holders.subscription = holders.handle?.observe(on: queue) { _ in
        holders.subscription = nil
        holders.handle = nil
        continuation.resume()
      }
      holders.map?.update(Author.self, id: 1) { $0.name = "b" }
      holders.map = nil
      #expect(core != nil, "the handle and the subscription keep it")
      queue.resume()
    }
    #expect(core == nil)
  }

  @Test func theMapAndItsLastHandleDroppedInACallback() {
    let holders = Holders()
    holders.map = IdentityMap()
    weak let core = holders.map?._core
    holders.handle = holders.map?.store(Author(id: 1, name: "a"))
    holders.subscription = holders.handle?.observe { _ in
      holders.map = nil
      holders.subscription = nil
      holders.handle = nil
    }
    holders.map?.update(Author.self, id: 1) { $0.name = "b" }
    #expect(holders.handle == nil)
    #expect(core == nil)
  }

  @Test func theLastHandleDroppedByTheDeinitOfAValueTheMapDrops() {
    var map: IdentityMap? = IdentityMap()
    weak let core = map?._core
    let holders = Holders()
    holders.handle = map?.store(Author(id: 1, name: "a"))
    // Dropping the parcel's handle purges it; its value goes once the lock is released, and
    // its deinit drops the map's last holder, from inside that write's end.
    var parcel = map?.store(Parcel(id: 1, onDrop: OnDeinit { holders.handle = nil }))
    map = nil
    #expect(core != nil)
    parcel = nil
    #expect(parcel == nil && holders.handle == nil)
    #expect(core == nil)
  }

  @Test func theLastHandleDroppedByTheDeinitOfAValueReplacedMidWrite() {
    let holders = Holders()
    holders.map = IdentityMap()
    weak let core = holders.map?._core
    holders.handle = holders.map?.store(Author(id: 1, name: "a"))
    let parcel = holders.map?.store(
      Parcel(
        id: 1,
        onDrop: OnDeinit {
          holders.handle = nil
          holders.map = nil
        }))
    // The replaced value's deinit runs under the lock: the hold it gives back waits for the
    // write's end, and the map goes once the caller lets go of it.
    holders.map?.store(Parcel(id: 1, onDrop: nil))
    #expect(holders.handle == nil)
    #expect(core != nil, "the parcel's handle still pins it")
    withExtendedLifetime(parcel) {}
  }

  @Test func theMapAndItsLastHandleDroppedInATransactionBody() {
    let holders = Holders()
    holders.map = IdentityMap()
    weak let core = holders.map?._core
    holders.handle = holders.map?.store(Author(id: 1, name: "a"))
    holders.map?.transaction { transaction in
      transaction.update(Author.self, id: 1) { $0.name = "b" }
      holders.map = nil
      holders.handle = nil
    }
    #expect(core == nil)
  }

  @Test func aLayerDroppedInATransactionBodyIsTheMapsLastHolder() {
    // The layer's shadow is what pins the map last: rolling the layer back, when the write
    // ends, frees the map from the middle of the write's end.
    let holders = Holders()
    holders.map = IdentityMap()
    weak let core = holders.map?._core
    holders.handle = holders.map?.store(Author(id: 1, name: "a"))
    holders.layer = holders.map?.optimistic { $0.update(Author.self, id: 1) { $0.name = "b" } }
    holders.map?.transaction { _ in
      holders.map = nil
      holders.handle = nil
      holders.layer = nil
    }
    #expect(core == nil)
  }
}
