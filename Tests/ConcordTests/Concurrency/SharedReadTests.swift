import Foundation
import TestSupport
import Testing

@testable import Concord

/// An entity whose `==` finds a `Counter`, as user code the engine calls in the middle of a
/// write may, and records what it saw.
struct Probe: Identifiable, Sendable, Equatable {
  var id: Int
  var value: Int
  let map: IdentityMap
  let seen: Locked<[Int?]>

  static func == (lhs: Probe, rhs: Probe) -> Bool {
    lhs.seen.append(lhs.map.find(Counter.self, id: 1)?.value.value)
    return lhs.id == rhs.id && lhs.value == rhs.value
  }
}

@Suite("Shared reads: finds and values under the lock shared with other readers")
struct SharedReadTests {
  // MARK: A seeded run of tasks over a few shared ids

  static let tasks = 6
  static let ids = 8
  static let keptLimit = 12

  /// What one task still holds when it ends.
  struct Kept: Sendable {
    var handles: [(id: Int, handle: EntityObserver<Counter>)] = []
    var subscriptions: [(id: Int, handle: EntityObserver<Counter>, subscription: Subscription)] =
      []
    var failures: [String] = []
  }

  @Test(
    "Finds, stores, updates, removes, subscriptions and releases from several tasks leave exact counts",
    arguments: [1, 2, 3] as [UInt64])
  func seededRun(seed: UInt64) async {
    let map = IdentityMap()
    let steps = max(200, randomSteps(share: 25))
    // NB: handed over in a box rather than as the tasks' results, which the tasks' storage
    // may keep a little longer, and the last check needs every handle gone.
    let results = Locked<[Kept]>([])
    await withTaskGroup(of: Void.self) { group in
      for task in 0..<Self.tasks {
        group.addTask {
          results.append(Self.run(on: map, steps: steps, seed: seed &* 1_000 &+ UInt64(task)))
        }
      }
    }
    var kept = results.withValue { results in
      defer { results = [] }
      return results
    }
    #expect(kept.flatMap(\.failures) == [])

    // Every handle still held, once per handle object: copies share one.
    var handles: [ObjectIdentifier: (id: Int, handle: EntityObserver<Counter>)] = [:]
    for one in kept {
      for (id, handle) in one.handles { handles[ObjectIdentifier(handle._handle)] = (id, handle) }
      for (id, handle, _) in one.subscriptions {
        handles[ObjectIdentifier(handle._handle)] = (id, handle)
      }
    }
    var subscriptions = kept.flatMap(\.subscriptions)
    let statistics = map.statistics
    #expect(statistics.handles == handles.count)
    #expect(statistics.subscriptions == subscriptions.count)

    // A handle that does not report `isRemoved` is on its id's entity: nothing it holds is
    // purged. So those entities, and only those, are in the map, held by exactly those.
    var present = 0
    for id in 0..<Self.ids {
      let live = handles.values.filter { $0.id == id && !$0.handle.isRemoved }
      let liveSubscriptions = subscriptions.filter { $0.id == id && !$0.handle.isRemoved }
      let holders = map.holders(of: Counter.self, id: id)
      if live.isEmpty {
        #expect(holders == nil, "id \(id)")
        #expect(map.find(Counter.self, id: id) == nil, "id \(id)")
        continue
      }
      present += 1
      #expect(holders?.handles == live.count, "id \(id)")
      #expect(holders?.subscriptions == liveSubscriptions.count, "id \(id)")
      for (_, handle) in live {
        #expect(map.find(Counter.self, id: id)?.value == handle.value, "id \(id)")
      }
    }
    #expect(map.count == present)
    map._core._checkInvariants()

    kept = []
    handles = [:]
    subscriptions = []
    #expect(map.count == 0)
    #expect(map.statistics.handles == 0)
    #expect(map.statistics.subscriptions == 0)
  }

  /// One task's seeded walk.
  static func run(on map: IdentityMap, steps: Int, seed: UInt64) -> Kept {
    var random = SeededGenerator(seed: seed)
    var kept = Kept()
    func fail(_ message: String) { kept.failures.append("seed \(seed): \(message)") }
    for step in 0..<steps {
      let id = Int.random(in: 0..<ids, using: &random)
      switch Int.random(in: 0..<16, using: &random) {
      case 0...4:
        // The common case: a handle found and dropped at once.
        if let found = map.find(Counter.self, id: id), found.value.id != id {
          fail("find(\(id)) found \(found.value.id)")
        }
      case 5:
        if let found = map.find(Counter.self, id: id) { kept.handles.append((id, found)) }
      case 6:
        let stored = map.store(Counter(id: id, value: step))
        if Bool.random(using: &random) { kept.handles.append((id, stored)) }
      case 7:
        map.update(Counter.self, id: id) { $0.value += 1 }
      case 8:
        if Int.random(in: 0..<4, using: &random) == 0 { map.remove(Counter.self, id: id) }
      case 9:
        if let (id, handle) = kept.handles.randomElement(using: &random) {
          let subscription = handle.observe { counter in
            precondition(counter.id == id, "a subscription on \(id) told of \(counter.id)")
          }
          kept.subscriptions.append((id, handle, subscription))
        }
      case 10:
        if !kept.subscriptions.isEmpty {
          let index = Int.random(in: kept.subscriptions.indices, using: &random)
          let (_, _, subscription) = kept.subscriptions.remove(at: index)
          if Bool.random(using: &random) { subscription.cancel() }
        }
      case 11:
        if !kept.handles.isEmpty {
          kept.handles.remove(at: Int.random(in: kept.handles.indices, using: &random))
        }
      case 12:
        if let (id, handle) = kept.handles.randomElement(using: &random),
          handle.value.id != id
        {
          fail("a handle on \(id) reads \(handle.value.id)")
        }
      case 13:
        // Reads inside a write: this thread holds the lock exclusively.
        map.transaction { transaction in
          transaction.store(Counter(id: id, value: -step))
          if map.find(Counter.self, id: id)?.value.value != -step {
            fail("a find inside a transaction missed its write to \(id)")
          }
          if let (_, handle) = kept.handles.randomElement(using: &random) { _ = handle.value }
        }
      case 14:
        _ = map.statistics
        _ = map.holders(of: Counter.self, id: id)
        _ = map.count
      default:
        if let (_, handle) = kept.handles.randomElement(using: &random) { _ = handle.isRemoved }
      }
      if kept.handles.count > keptLimit {
        kept.handles.remove(at: Int.random(in: kept.handles.indices, using: &random))
      }
    }
    return kept
  }

  // MARK: Reads inside writes

  @Test("A find inside an update body or a transaction sees the write under way")
  func findInsideAWrite() {
    let map = IdentityMap()
    let first = map.store(Counter(id: 1, value: 1))
    let second = map.store(Counter(id: 2, value: 2))
    map.update(Counter.self, id: 1) { counter in
      map.store(Counter(id: 2, value: 20))
      let found = map.find(Counter.self, id: 2)
      #expect(found?.value.value == 20)
      #expect(second.value.value == 20)
      #expect(map.find(Counter.self, id: 1)?.value.value == 1, "the body has not written yet")
      #expect(map.count == 2)
      #expect(!first.isRemoved)
      counter.value = 10
    }
    #expect(first.value.value == 10)
    map.transaction { transaction in
      transaction.store(Counter(id: 3, value: 3))
      transaction.update(Counter.self, id: 1) { $0.value = 11 }
      #expect(map.find(Counter.self, id: 3)?.value.value == 3)
      #expect(transaction.find(Counter.self, id: 1)?.value.value == 11)
      #expect(first.value.value == 11)
      #expect(map.count == 3)
    }
    #expect(map.find(Counter.self, id: 3) == nil, "nothing held the new entity")
    #expect(map.statistics.handles == 2)
    withExtendedLifetime((first, second)) {}
  }

  @Test("A find from an `==` the engine calls in the middle of a write sees the write so far")
  func findFromEquality() {
    let map = IdentityMap()
    let seen = Locked<[Int?]>([])
    let counter = map.store(Counter(id: 1, value: 1))
    let probe = map.store(Probe(id: 1, value: 1, map: map, seen: seen))
    // NB: a subscriber, told only of a change: the commit compares the probe before and after
    // (for a node nobody subscribes to, it tells nobody and compares nothing).
    let subscription = probe.observe { _ in }
    map.transaction { transaction in
      transaction.store(Counter(id: 1, value: 5))
      transaction.store(Probe(id: 1, value: 2, map: map, seen: seen))
    }
    withExtendedLifetime(subscription) {}
    #expect(seen.value.contains(5))
    #expect(!seen.value.contains(nil))
    #expect(map.holders(of: Counter.self, id: 1)?.handles == 1, "the `==`'s handles are gone")
    // NB: the probes hold the map: removing them breaks the cycle.
    map.removeAll()
    withExtendedLifetime((counter, probe)) {}
  }

  // MARK: Releases while another thread writes

  @Test("The last handle, dropped on another thread during a write, purges its entity after it")
  func lastHandleDroppedDuringAWrite() {
    let map = IdentityMap()
    let box = Locked<EntityObserver<Counter>?>(map.store(Counter(id: 1, value: 0)))
    let start = DispatchSemaphore(value: 0)
    let released = DispatchSemaphore(value: 0)
    Thread {
      start.wait()
      var handle = box.withValue { $0.take() }
      handle = nil
      withExtendedLifetime(handle) {}
      released.signal()
    }.start()
    map.transaction { transaction in
      transaction.update(Counter.self, id: 1) { $0.value = 1 }
      start.signal()
      // NB: the other thread uncounts its handle, then finds that it holds the last hold and
      // waits for this write to give it back: it cannot be done before the write ends.
      while map.statistics.handles > 0 {}
      #expect(map.find(Counter.self, id: 1)?.value.value == 1)
    }
    released.wait()
    #expect(map.find(Counter.self, id: 1) == nil)
    #expect(map.holders(of: Counter.self, id: 1) == nil)
    #expect(map.count == 0)
    #expect(map.statistics.handles == 0)
  }

  @Test("A handle that is not the last is given back without waiting for a write under way")
  func handleDroppedDuringAWriteDoesNotWait() {
    let map = IdentityMap()
    let kept = map.store(Counter(id: 1, value: 0))
    let box = Locked<EntityObserver<Counter>?>(map.find(Counter.self, id: 1))
    map.transaction { transaction in
      transaction.update(Counter.self, id: 1) { $0.value = 1 }
      let released = DispatchSemaphore(value: 0)
      Thread {
        var handle = box.withValue { $0.take() }
        handle = nil
        withExtendedLifetime(handle) {}
        released.signal()
      }.start()
      // NB: this write holds the lock until the body returns: a release that took the lock
      // would never signal.
      released.wait()
      #expect(map.holders(of: Counter.self, id: 1)?.handles == 1)
    }
    #expect(map.count == 1)
    #expect(kept.value.value == 1)
  }

  // MARK: The map's own lifetime

  @Test("A handle found without the exclusive lock keeps the map alive, and lets it go")
  func foundHandleKeepsTheMapAlive() {
    weak var core: _MapCore?
    var found: EntityObserver<Counter>?
    do {
      let map = IdentityMap()
      core = map._core
      let stored = map.store(Counter(id: 1, value: 1))
      found = map.find(Counter.self, id: 1)
      withExtendedLifetime(stored) {}
    }
    #expect(core != nil)
    #expect(found?.value.value == 1)
    found = nil
    #expect(core == nil)
  }

  @Test("A handle on a set alias keeps the map alive; the alias alone does not")
  func aliasHandleKeepsTheMapAlive() {
    weak var core: _MapCore?
    var alias: EntityObserver<User?>?
    do {
      let map = IdentityMap()
      core = map._core
      map.store(User(id: 1, name: "a"), named: .currentUser)
      alias = map.find(named: .currentUser)
    }
    #expect(core != nil)
    #expect(alias?.value?.name == "a")
    alias = nil
    #expect(core == nil)
  }

  // MARK: Layout

  @Test("The external hold count is the node's first stored property, the internal one next")
  func holdCountsLayout() {
    let map = IdentityMap()
    let handle = map.store(Counter(id: 1, value: 1))
    let node = handle._handle.node
    let start = _getUnsafePointerToStoredProperties(node)
    #expect(start.assumingMemoryBound(to: Int32.self) == node.externalHoldsAddress)
    #expect(node.externalHoldsStorage == 1)
    node.addExternalHold()
    #expect(node.externalHoldsStorage == 2 && node.externalHolds == 2)
    #expect(node.internalHolds == 0, "the internal count next to it is untouched")
    node.internalHolds = 7
    #expect((start + 4).load(as: Int32.self) == 7)
    #expect(node.externalHolds == 2)
    node.internalHolds = 0
    node.removeExternalHold()
    #expect(node.externalHoldsStorage == 1)
  }
}
