import Concord
import Foundation

/// The workloads, by their fixed names. Each returns one result row, its floor measured in the
/// same run where it has one.
struct Workloads {
  /// Entities per workload.
  let n: Int
  /// Timed samples per workload, after one warm-up.
  let samples: Int
  /// Whether this is the `--quick` run: fewer repetitions for the per-update workloads.
  let quick: Bool

  static let names = [
    "store.insert", "store.replace", "find.hit", "find.miss", "store.batch", "store.aggregate",
    "propagate.fanout1000", "notify.callback", "observe.cancel", "transaction.batch100",
    "concurrent.read90", "scale.find.1M", "memory.perEntity", "store.merge", "retention.churn",
    "store.refetch", "store.page.decoded", "query.maintain", "query.indexed.open",
    "collector.drain",
    "optimistic.apply+rollback", "optimistic.shadowed.write", "persist.write", "persist.page",
    "persist.find.cold", "remove.tombstoned", "query.open.persisted", "read.during.load",
    "persist.save", "persist.restore", "resource.load.fresh", "resource.join", "resource.answer",
    "shared.propagate", "shared.write",
    "paged.loadOlder", "paged.items",
  ]

  func run(_ name: String) -> Result {
    switch name {
    case "store.insert": storeInsert()
    case "store.replace": storeReplace()
    case "find.hit": find(hit: true)
    case "find.miss": find(hit: false)
    case "store.batch": storeBatch()
    case "store.aggregate": storeAggregate()
    case "propagate.fanout1000": fanOut()
    case "notify.callback": notifyCallback()
    case "observe.cancel": observeCancel()
    case "transaction.batch100": transactionBatch()
    case "concurrent.read90": concurrentRead()
    case "scale.find.1M": scaleFind()
    case "memory.perEntity": memoryPerEntity()
    case "store.merge": storeMerge()
    case "retention.churn": retentionChurn()
    case "store.refetch": storeRefetch()
    case "store.page.decoded": storePageDecoded()
    case "query.maintain": queryMaintain()
    case "query.indexed.open": queryIndexedOpen()
    case "collector.drain": collectorDrain()
    case "optimistic.apply+rollback": optimisticApplyRollback()
    case "optimistic.shadowed.write": optimisticShadowedWrite()
    case "persist.write": persistWrite()
    case "persist.page": persistPage()
    case "persist.find.cold": persistFindCold()
    case "remove.tombstoned": removeTombstoned()
    case "query.open.persisted": queryOpenPersisted()
    case "read.during.load": readDuringLoad()
    case "persist.save": persistSave()
    case "persist.restore": persistRestore()
    case "resource.load.fresh": resourceLoadFresh()
    case "resource.join": resourceJoin()
    case "resource.answer": resourceAnswer()
    case "shared.propagate": sharedPropagate()
    case "shared.write": sharedWrite()
    case "paged.loadOlder": pagedLoadOlder()
    case "paged.items": pagedItems()
    default: fatalError("unknown workload \(name)")
    }
  }

  // MARK: Helpers

  /// A map holding `count` models, and the handles that keep them.
  func filledMap(_ count: Int) -> (IdentityMap, [EntityObserver<Model>]) {
    let map = IdentityMap()
    var handles: [EntityObserver<Model>] = []
    handles.reserveCapacity(count)
    for id in 0..<count { handles.append(map.store(Model(id))) }
    return (map, handles)
  }

  func filledFloor(_ count: Int) -> Floor<Model> {
    let floor = Floor<Model>()
    for id in 0..<count { floor.store(Model(id)) }
    return floor
  }

  /// Runs the map's samples and the floor's, interleaved so that drift on a shared machine
  /// touches both alike.
  func compare(_ name: String, map: () -> Double, floor: () -> Double) -> Result {
    _ = map()
    _ = floor()
    var mapSamples: [Double] = []
    var floorSamples: [Double] = []
    for _ in 0..<samples {
      mapSamples.append(map())
      floorSamples.append(floor())
    }
    return Result(name: name, samples: mapSamples.sorted(), baselineNsPerOp: median(floorSamples))
  }

  // MARK: Store and find

  func storeInsert() -> Result {
    let models = (0..<n).map { Model($0) }
    return compare(
      "store.insert",
      map: {
        let map = IdentityMap()
        var handles: [EntityObserver<Model>] = []
        handles.reserveCapacity(n)
        let ns = nanoseconds {
          for model in models { handles.append(map.store(model)) }
        }
        blackHole(handles.count)
        return ns / Double(n)
      },
      floor: {
        let floor = Floor<Model>()
        let ns = nanoseconds {
          for model in models { floor.store(model) }
        }
        blackHole(floor)
        return ns / Double(n)
      })
  }

  /// Removals of held, stamped entities, each leaving a tombstone (the limit is `n`, so none is
  /// forgotten), against removals from the floor's dictionary. Each sample stores the entities
  /// again first, newer, untimed: that brings them back and drops their tombstones. The note
  /// gives two more figures from the same run: the same removals on a map that keeps no
  /// tombstones, and a floor that also records each stamp in a second dictionary.
  func removeTombstoned() -> Result {
    let models = (0..<n).map { Model($0) }
    var round = 0.0
    /// Removes every model from `map`, stored again first: nanoseconds per removal.
    func removals(_ map: IdentityMap, _ handles: inout [EntityObserver<Model>]) -> Double {
      round += 1
      handles = []
      handles = models.map { map.store($0, modifiedAt: round) }
      return nanoseconds {
        for model in models { map.remove(Model.self, id: model.id) }
      } / Double(n)
    }
    let map = IdentityMap(tombstones: .keepNewest(n))
    let floor = Floor<Model>()
    var handles: [EntityObserver<Model>] = []
    var result = compare(
      "remove.tombstoned",
      map: { removals(map, &handles) },
      floor: {
        for model in models { floor.store(model) }
        return nanoseconds {
          for model in models { floor.remove(model.id) }
        } / Double(n)
      })
    precondition(handles.allSatisfy(\.isRemoved), "every entity was removed")
    precondition(
      map.store(Model(0), modifiedAt: round).isRemoved, "the tombstone refuses a replay")
    let untombed = IdentityMap(tombstones: .none)
    var untombedHandles: [EntityObserver<Model>] = []
    let withoutTombstones = median((0..<3).map { _ in removals(untombed, &untombedHandles) })
    // NB: one lock, as the floor's, around the two dictionaries.
    let lock = Lock(recursive: true)
    var values: [Int: Model] = [:]
    var stamps: [Int: Double] = [:]
    let stampingFloor = median(
      (0..<3).map { _ in
        for model in models { values[model.id] = model }
        stamps.removeAll(keepingCapacity: true)
        return nanoseconds {
          for model in models {
            lock.lock()
            values[model.id] = nil
            stamps[model.id] = round
            lock.unlock()
          }
        } / Double(n)
      })
    result.extra = [
      ("noTombstonesNsPerOp", withoutTombstones), ("stampingFloorNsPerOp", stampingFloor),
    ]
    result.note =
      "floor: the same removals from a dictionary; without tombstones the map takes "
      + "\(formatTime(withoutTombstones)); a floor that also records each stamp in a second "
      + "dictionary takes \(formatTime(stampingFloor))"
    return result
  }

  func storeReplace() -> Result {
    let (map, handles) = filledMap(n)
    let floor = filledFloor(n)
    var round = 0
    let rounds = (1...2).map { round in (0..<n).map { Model($0, round: round) } }
    return compare(
      "store.replace",
      map: {
        round += 1
        let models = rounds[round % 2]
        return nanoseconds {
          for model in models { blackHole(map.store(model)) }
        } / Double(n)
      },
      floor: {
        let models = rounds[round % 2]
        return nanoseconds {
          for model in models { floor.store(model) }
        } / Double(n)
      }
    ).keeping(handles)
  }

  func find(hit: Bool) -> Result {
    let (map, handles) = filledMap(n)
    let floor = filledFloor(n)
    let ids = hit ? 0..<n : n..<(2 * n)
    return compare(
      hit ? "find.hit" : "find.miss",
      map: {
        nanoseconds {
          for id in ids { blackHole(map.find(Model.self, id: id)) }
        } / Double(n)
      },
      floor: {
        nanoseconds {
          for id in ids { blackHole(floor.find(id)) }
        } / Double(n)
      }
    ).keeping(handles)
  }

  func storeBatch() -> Result {
    let chunks = stride(from: 0, to: n, by: 100).map { start in
      (start..<min(start + 100, n)).map { Model($0) }
    }
    return compare(
      "store.batch",
      map: {
        let map = IdentityMap()
        var handles: [EntityObserver<[Model]>] = []
        handles.reserveCapacity(chunks.count)
        let ns = nanoseconds {
          for chunk in chunks { handles.append(map.store(chunk)) }
        }
        blackHole(handles.count)
        return ns / Double(n)
      },
      floor: {
        let floor = Floor<Model>()
        let ns = nanoseconds {
          for chunk in chunks { floor.store(chunk[...]) }
        }
        blackHole(floor)
        return ns / Double(n)
      })
  }

  func storeAggregate() -> Result {
    let posts = (0..<(n / 10)).map { Post($0) }
    return compare(
      "store.aggregate",
      map: {
        let map = IdentityMap()
        var handles: [EntityObserver<Post>] = []
        handles.reserveCapacity(posts.count)
        let ns = nanoseconds {
          for post in posts { handles.append(map.store(post)) }
        }
        blackHole(handles.count)
        return ns / Double(posts.count)
      },
      floor: {
        let floor = AggregateFloor()
        let ns = nanoseconds {
          for post in posts { floor.store(post) }
        }
        blackHole(floor)
        return ns / Double(posts.count)
      })
  }

  // MARK: Propagation and delivery

  func fanOut() -> Result {
    let updates = quick ? 200 : 1_000
    return compare(
      "propagate.fanout1000",
      map: {
        let map = IdentityMap()
        let reviews = (0..<1_000).map {
          map.store(Review(id: $0, text: "review \($0)", author: Person(id: 0, name: "0")))
        }
        let ns = nanoseconds {
          for round in 0..<updates {
            map.update(Person.self, id: 0) { $0.name = "\(round)" }
          }
        }
        precondition(
          reviews.allSatisfy { $0.value.author.name == "\(updates - 1)" },
          "fan-out did not reach every review")
        return ns / Double(updates)
      },
      floor: {
        let floor = DeliveryFloor<Review>()
        for id in 0..<1_000 {
          floor.store(Review(id: id, text: "review \(id)", author: Person(id: 0, name: "0")))
        }
        let ids = Array(0..<1_000)
        let ns = nanoseconds {
          for round in 0..<updates {
            let author = Person(id: 0, name: "\(round)")
            floor.patch(ids) { $0.author = author }
          }
        }
        blackHole(floor)
        return ns / Double(updates)
      }
    ).perParent()
  }

  func notifyCallback() -> Result {
    let rounds = 10
    return compare(
      "notify.callback",
      map: {
        let map = IdentityMap()
        let handles = (0..<1_000).map { map.store(Model($0)) }
        let delivered = Counter()
        let subscriptions = handles.map { $0.observe { _ in delivered.increment() } }
        let ns = nanoseconds {
          for round in 0..<rounds {
            for id in 0..<1_000 { map.update(Model.self, id: id) { $0.score = -Double(round + 1) } }
          }
        }
        precondition(delivered.value == rounds * 1_000, "expected one callback per write")
        blackHole(subscriptions.count)
        return ns / Double(rounds * 1_000)
      },
      floor: {
        let floor = DeliveryFloor<Model>()
        let delivered = Counter()
        for id in 0..<1_000 { floor.store(Model(id)) { _ in delivered.increment() } }
        let ns = nanoseconds {
          for round in 0..<rounds {
            for id in 0..<1_000 { floor.update(id) { $0.score = -Double(round + 1) } }
          }
        }
        precondition(delivered.value == rounds * 1_000, "expected one callback per write")
        return ns / Double(rounds * 1_000)
      })
  }

  /// Subscribing a callback to a held entity and cancelling it, per pair, against a registry
  /// of callbacks by entity and token under a lock (the dropped callback released after it).
  func observeCancel() -> Result {
    let rounds = quick ? 20 : 100
    return compare(
      "observe.cancel",
      map: {
        let map = IdentityMap()
        let handles = (0..<1_000).map { map.store(Model($0)) }
        var subscriptions: [Subscription] = []
        subscriptions.reserveCapacity(handles.count)
        let ns = nanoseconds {
          for _ in 0..<rounds {
            for handle in handles { subscriptions.append(handle.observe { _ in }) }
            for subscription in subscriptions { subscription.cancel() }
            subscriptions.removeAll(keepingCapacity: true)
          }
        }
        precondition(handles.allSatisfy { !$0.isRemoved }, "the handles hold their entities")
        return ns / Double(rounds * handles.count)
      },
      floor: {
        let floor = DeliveryFloor<Model>()
        for id in 0..<1_000 { floor.store(Model(id)) }
        var tokens: [(id: Int, token: Int)] = []
        tokens.reserveCapacity(1_000)
        let ns = nanoseconds {
          for _ in 0..<rounds {
            for id in 0..<1_000 { tokens.append((id, floor.observe(id) { _ in })) }
            for (id, token) in tokens { floor.cancel(id, token: token) }
            tokens.removeAll(keepingCapacity: true)
          }
        }
        blackHole(tokens.count)
        return ns / Double(rounds * 1_000)
      })
  }

  func transactionBatch() -> Result {
    let transactions = quick ? 100 : 500
    return compare(
      "transaction.batch100",
      map: {
        let map = IdentityMap()
        let handles = (0..<100).map { map.store(Model($0)) }
        let delivered = Counter()
        let subscriptions = handles.map { $0.observe { _ in delivered.increment() } }
        let ns = nanoseconds {
          for round in 0..<transactions {
            map.transaction { transaction in
              for id in 0..<100 {
                transaction.update(Model.self, id: id) { $0.score = -Double(round + 1) }
              }
            }
          }
        }
        precondition(
          delivered.value == 100 * transactions, "each subscriber is told once per transaction")
        blackHole(subscriptions.count)
        return ns / Double(transactions)
      },
      floor: {
        let floor = DeliveryFloor<Model>()
        let delivered = Counter()
        for id in 0..<100 { floor.store(Model(id)) { _ in delivered.increment() } }
        let ns = nanoseconds {
          for round in 0..<transactions {
            floor.update(0..<100) { $0.score = -Double(round + 1) }
          }
        }
        precondition(delivered.value == 100 * transactions, "one callback per value")
        return ns / Double(transactions)
      })
  }

  /// A page of 100 aggregates stored again, unchanged: a pull to refresh.
  func storeRefetch() -> Result {
    let page = (0..<100).map { Post($0) }
    let rounds = quick ? 200 : 1_000
    return compare(
      "store.refetch",
      map: {
        let map = IdentityMap()
        let handle = map.store(page)
        let ns = nanoseconds {
          for _ in 0..<rounds { blackHole(map.store(page)) }
        }
        blackHole(handle)
        return ns / Double(rounds)
      },
      floor: {
        let floor = RefetchFloor()
        floor.store(page)
        var changed = 0
        let ns = nanoseconds {
          for _ in 0..<rounds { changed += floor.compare(page) }
        }
        precondition(changed == 0, "the page changed")
        return ns / Double(rounds)
      })
  }

  /// JSONDecoder decoding a page of 100 issues with nested users and labels, then the map
  /// storing it; the floor is the decoding alone, so the ratio says what the map adds.
  func storePageDecoded() -> Result {
    let json = Issue.page(100)
    let rounds = quick ? 20 : 100
    var result = compare(
      "store.page.decoded",
      map: {
        // A screen refreshing its page: each store replaces the screen's handle.
        let map = IdentityMap()
        var handle: EntityObserver<[Issue]>?
        let ns = nanoseconds {
          for _ in 0..<rounds {
            handle = map.store(try! JSONDecoder().decode([Issue].self, from: json))
          }
        }
        blackHole(handle?.value.count ?? 0)
        return ns / Double(rounds)
      },
      floor: {
        var decoded: [[Issue]] = []
        let ns = nanoseconds {
          for _ in 0..<rounds {
            decoded.append(try! JSONDecoder().decode([Issue].self, from: json))
          }
        }
        blackHole(decoded.count)
        return ns / Double(rounds)
      })
    let share = 1 - result.baselineNsPerOp! / result.nsPerOp!
    result.note = String(format: "the map's share of decode + store: %.0f%%", share * 100)
    result.extra = [("mapShare", share)]
    return result
  }

  // MARK: Concurrency and scale

  /// The row's floor is the dictionary behind one mutex. Its note adds the ratios to the same
  /// dictionary behind the map's lock type and behind a `pthread_rwlock_t`, finds taking them
  /// shared (`SharedFloor`, `PthreadRWLockFloor`).
  func concurrentRead() -> Result {
    let (map, handles) = filledMap(n)
    let floor = filledFloor(n)
    let sharedFloor = SharedFloor<Model>()
    let rwlockFloor = PthreadRWLockFloor<Model>()
    for id in 0..<n {
      sharedFloor.store(Model(id))
      rwlockFloor.store(Model(id))
    }
    var sharedFloorSamples: [Double] = []
    var rwlockFloorSamples: [Double] = []
    let replacements = (0..<n).map { Model($0, round: 1) }
    /// Each of two threads does `n` operations: every tenth a store, the others a find, over
    /// ids scattered across the `n` entities.
    func run(_ operation: @escaping @Sendable (Int, Bool) -> Void) -> Double {
      nanoseconds {
        DispatchQueue.concurrentPerform(iterations: 2) { thread in
          for index in 0..<n {
            let id = (index &* 2_654_435_761 &+ thread &* 7_919) % n
            operation(id, index % 10 == 0)
          }
        }
      } / Double(2 * n)
    }
    /// The same operations on one of the floors.
    func run<F: LockedDictionary>(on floor: F) -> Double where F.Value == Model {
      run { id, isStore in
        if isStore { floor.store(replacements[id]) } else { blackHole(floor.find(id)) }
      }
    }
    var result = compare(
      "concurrent.read90",
      map: {
        run { id, isStore in
          if isStore {
            blackHole(map.store(replacements[id]))
          } else {
            blackHole(map.find(Model.self, id: id))
          }
        }
      },
      floor: {
        let ns = run(on: floor)
        // NB: a sample of each other floor after each of the floor's, outside its timing, so
        // that drift touches them all alike.
        sharedFloorSamples.append(run(on: sharedFloor))
        rwlockFloorSamples.append(run(on: rwlockFloor))
        return ns
      }
    ).keeping(handles)
    // NB: the first samples are the warm-up's.
    let sharedFloorNs = median(Array(sharedFloorSamples.dropFirst()))
    let rwlockFloorNs = median(Array(rwlockFloorSamples.dropFirst()))
    result.note = String(
      format: "%.2f× a dictionary behind the map's lock type, finds shared (%@); "
        + "%.2f× one behind a pthread_rwlock_t, finds shared (%@)",
      result.nsPerOp! / sharedFloorNs, formatTime(sharedFloorNs),
      result.nsPerOp! / rwlockFloorNs, formatTime(rwlockFloorNs))
    result.extra = [
      ("sharedFloorNsPerOp", sharedFloorNs), ("pthreadRWLockFloorNsPerOp", rwlockFloorNs),
    ]
    return result
  }

  /// `find.hit` with 10⁶ live entities. The row also reports its ratio to `find.hit` at
  /// N = 100,000, measured in this run by the `find.hit` workload's own code.
  func scaleFind() -> Result {
    let large = 1_000_000
    let reference = Workloads(n: 100_000, samples: samples, quick: quick).find(hit: true)
    let (map, handles) = filledMap(large)
    let floor = filledFloor(large)
    var result = compare(
      "scale.find.1M",
      map: {
        nanoseconds {
          for id in 0..<large { blackHole(map.find(Model.self, id: id)) }
        } / Double(large)
      },
      floor: {
        nanoseconds {
          for id in 0..<large { blackHole(floor.find(id)) }
        } / Double(large)
      }
    ).keeping(handles)
    let referenceNs = reference.nsPerOp!
    let vsReference = result.nsPerOp! / referenceNs
    // The floor's own growth between the two sizes: what the memory hierarchy alone costs.
    let floorGrowth = result.baselineNsPerOp! / reference.baselineNsPerOp!
    result.note = String(
      format:
        "%.2f× find.hit at N = 100,000 (%@ in this run); the floor's own growth: %.2f× (%@ → %@)",
      vsReference, formatTime(referenceNs), floorGrowth, formatTime(reference.baselineNsPerOp!),
      formatTime(result.baselineNsPerOp!))
    result.extra = [
      ("findHit100kNsPerOp", referenceNs), ("ratioToFindHit100k", vsReference),
      ("floorFindHit100kNsPerOp", reference.baselineNsPerOp!), ("floorGrowth", floorGrowth),
    ]
    return result
  }

  func memoryPerEntity() -> Result {
    let models = (0..<n).map { Model($0) }
    // NB: the floor first, on a heap the map has not churned, and each kept alive explicitly
    // until both are measured: the optimizer may otherwise release them early.
    let beforeFloor = allocatedBytes()
    let floor = Floor<Model>()
    for model in models { floor.store(model) }
    let floorBytes = Double(allocatedBytes() - beforeFloor) / Double(n)
    var handles: [EntityObserver<Model>] = []
    handles.reserveCapacity(n)
    let beforeMap = allocatedBytes()
    let map = IdentityMap()
    for model in models { handles.append(map.store(model)) }
    let mapBytes = Double(allocatedBytes() - beforeMap) / Double(n)
    withExtendedLifetime((floor, map, handles)) {}
    var result = Result(name: "memory.perEntity")
    result.bytesPerEntity = mapBytes
    result.baselineBytesPerEntity = floorBytes
    return result
  }

  // MARK: Real payloads

  /// Pages of 100 aggregates nesting user stubs, each merged into the user's held profile.
  /// Reported per page; 10 entries share each user.
  func storeMerge() -> Result {
    let users = max(n / 10, 1)
    let pages = stride(from: 0, to: n, by: 100).map { start in
      (start..<min(start + 100, n)).map { Entry($0, users: users) }
    }
    return compare(
      "store.merge",
      map: {
        let map = IdentityMap()
        let profiles = (0..<users).map { map.store(Profile.full($0)) }
        var handles: [EntityObserver<[Entry]>] = []
        handles.reserveCapacity(pages.count)
        let ns = nanoseconds {
          for page in pages { handles.append(map.store(page)) }
        }
        precondition(profiles[0].value.name != nil, "a stub wiped the profile")
        blackHole((handles.count, profiles.count))
        return ns / Double(pages.count)
      },
      floor: {
        let floor = MergeFloor()
        for id in 0..<users { floor.store(Profile.full(id)) }
        let ns = nanoseconds {
          for page in pages { floor.store(page) }
        }
        blackHole(floor)
        return ns / Double(pages.count)
      })
  }

  /// Stores `n` entities nobody holds through a release buffer of `n / 10`, reviving (finding,
  /// then releasing again) one in ten of the last thousand stored. Reported per operation.
  func retentionChurn() -> Result {
    let capacity = max(n / 10, 1)
    let models = (0..<n).map { Model($0) }
    let revivals = (0..<n).map { $0 % 10 == 0 ? max($0 - 1_000, 0) : -1 }
    let operations = Double(n + n / 10)
    return compare(
      "retention.churn",
      map: {
        let map = IdentityMap(retention: .keepReleased(capacity))
        let ns = nanoseconds {
          for index in 0..<n {
            blackHole(map.store(models[index]))
            if revivals[index] >= 0 { blackHole(map.find(Model.self, id: revivals[index])) }
          }
        }
        precondition(map.count == capacity, "the buffer holds \(map.count), not \(capacity)")
        return ns / operations
      },
      floor: {
        let floor = LRUFloor(capacity: capacity)
        let ns = nanoseconds {
          for index in 0..<n {
            floor.store(models[index])
            if revivals[index] >= 0 { blackHole(floor.revive(revivals[index])) }
          }
        }
        blackHole(floor)
        return ns / operations
      })
  }
}

extension Result {
  /// The fan-out row, also per parent.
  func perParent() -> Result {
    var result = self
    result.note = String(format: "%.0f ns per parent", nsPerOp! / 1_000)
    result.extra = [("nsPerParent", nsPerOp! / 1_000)]
    return result
  }

  /// Keeps `objects` alive until the result is made, so that teardown is never timed.
  func keeping<T>(_ objects: T) -> Result {
    blackHole(objects)
    return self
  }
}

/// A counter bumped by callbacks.
final class Counter: @unchecked Sendable {
  // NB: @unchecked because `count` is only touched while holding `lock`.
  private let lock = Lock()
  private var count = 0

  var value: Int { lock.withLock { count } }

  func increment() {
    lock.withLock { count += 1 }
  }
}
