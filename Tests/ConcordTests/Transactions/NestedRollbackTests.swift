import TestSupport
import Testing

@testable import Concord

/// An entity with one counter, for rollback tests.
struct Tick: Identifiable, Sendable, Equatable {
  var id: Int
  var count: Int
}

extension AliasKey where Value == [Tick] {
  static var ticks: Self { .init("counters") }
}

/// An error that rolls a transaction back.
struct Unwind: Error {}

/// The shape 0.2.0 crashed on: a batch stored in a transaction that throws, nested in one that
/// throws too. Returns what the batch handle showed after both rolled back, whether the entity
/// only the inner body created is gone, and what the handle on the older entity shows; the
/// batch handle is dropped last, after the map's state was read.
func rollBackABatchTwoLevelsDeep() -> (batch: [Tick], created: Bool, older: Tick) {
  let map = IdentityMap()
  let older = map.store(Tick(id: 1, count: 0))
  var batch: EntityObserver<[Tick]>?
  try? map.transaction { _ in
    try? map.transaction { transaction in
      batch = transaction.store([Tick(id: 1, count: 1), Tick(id: 2, count: 1)])
      throw Unwind()
    }
    throw Unwind()
  }
  let shown = batch?.value ?? []
  let created = map.find(Tick.self, id: 2) != nil
  batch = nil
  return (shown, created, older.value)
}

@Suite("Nested rollback")
struct NestedRollbackTests {
  @Test func aBatchStoredTwoLevelsDeepShowsTheStateBeforeTheOuterTransaction() {
    let (batch, created, older) = rollBackABatchTwoLevelsDeep()
    #expect(batch == [Tick(id: 1, count: 0)], "only the entity that existed before, as it was")
    #expect(!created, "what the inner body created is gone")
    #expect(older == Tick(id: 1, count: 0))
  }

  @Test func droppingTheBatchHandleAfterTwoRollbacksNeverTouchesFreedMemory() async {
    // NB: in a child process, looped: the use-after-free of 0.2.0 crashed in some runs only.
    await #expect(processExitsWith: .success) {
      for _ in 0..<100 {
        let (batch, created, _) = rollBackABatchTwoLevelsDeep()
        precondition(batch == [Tick(id: 1, count: 0)] && !created)
      }
    }
  }

  @Test(arguments: 0..<8)
  func threeLevelsEachThrowingOrNotLeaveOnlyWhatCommitted(throwing mask: Int) {
    // Bit 0: the outer level throws; bit 1: the middle one; bit 2: the inner one.
    let map = IdentityMap()
    let zero = map.store(Tick(id: 0, count: 0))
    var batches: [EntityObserver<[Tick]>] = []
    var aliases: [EntityObserver<[Tick]?>] = []
    let told = Locked<[[Tick]]>([])
    var subscriptions: [Subscription] = []
    func level(_ depth: Int, _ transaction: IdentityMap.Transaction) throws {
      let batch = transaction.store([Tick(id: 0, count: depth), Tick(id: depth, count: depth)])
      batches.append(batch)
      subscriptions.append(batch.observe { told.append($0) })
      aliases.append(
        transaction.store([Tick(id: 10 + depth, count: depth)], named: .ticks))
      if depth < 3 {
        try? map.transaction { try level(depth + 1, $0) }
      }
      if mask & (1 << (depth - 1)) != 0 { throw Unwind() }
    }
    try? map.transaction { try level(1, $0) }

    // What survives: level d's writes survive when no level from 1 to d threw.
    let survivors = (1...3).filter { depth in (1...depth).allSatisfy { mask & (1 << ($0 - 1)) == 0 }
    }
    let zeroCount = survivors.last ?? 0
    #expect(zero.value == Tick(id: 0, count: zeroCount))
    for depth in 1...3 {
      let expected = survivors.contains(depth) ? Tick(id: depth, count: depth) : nil
      #expect(map.find(Tick.self, id: depth)?.value == expected, "level \(depth)")
    }
    for (index, batch) in batches.enumerated() {
      let depth = index + 1
      var expected = [Tick(id: 0, count: zeroCount)]
      if survivors.contains(depth) { expected.append(Tick(id: depth, count: depth)) }
      #expect(batch.value == expected, "the batch of level \(depth)")
    }
    let alias = survivors.last.map { [Tick(id: 10 + $0, count: $0)] }
    for handle in aliases { #expect(handle.value == alias) }
    // Each batch that shows anything is told of it once, at commit; nothing uncommitted.
    #expect(told.value.count <= batches.count)
    for value in told.value { #expect(value.first == Tick(id: 0, count: zeroCount)) }
    map._core._checkInvariants()
    // Dropped in an order that ends with the oldest: every link they held is still valid.
    subscriptions.removeAll()
    aliases.removeAll()
    batches.removeAll()
    map._core._checkInvariants()
  }

  @Test func aHandleDroppedInsideTheInnerBodyAndABatchKeptOutsideBothAgree() {
    let map = IdentityMap()
    let one = map.store(Tick(id: 1, count: 0))
    var kept: EntityObserver<[Tick]>?
    try? map.transaction { outer in
      kept = outer.store([Tick(id: 1, count: 5), Tick(id: 3, count: 5)])
      try? map.transaction { inner in
        var dropped: EntityObserver<[Tick]>? = inner.store([
          Tick(id: 3, count: 6), Tick(id: 4, count: 6),
        ])
        #expect(dropped?.value.count == 2)
        dropped = nil
        inner.remove(Tick.self, id: 1)
        throw Unwind()
      }
      #expect(kept?.value == [Tick(id: 1, count: 5), Tick(id: 3, count: 5)])
      throw Unwind()
    }
    #expect(kept?.value == [Tick(id: 1, count: 0)])
    #expect(one.value == Tick(id: 1, count: 0) && !one.isRemoved)
    #expect(map.find(Tick.self, id: 3) == nil && map.find(Tick.self, id: 4) == nil)
    kept = nil
    map._core._checkInvariants()
  }

  @Test(arguments: [false, true])
  func aBatchMadeInARolledBackBodyShowsTheEntitiesItWasStoredWithThatStillExist(nested: Bool) {
    // A removal the body made is undone, for the batch it made as for every other holder.
    let map = IdentityMap()
    let one = map.store(Tick(id: 1, count: 0))
    var batch: EntityObserver<[Tick]>?
    try? map.transaction { transaction in
      batch = transaction.store([
        Tick(id: 1, count: 1), Tick(id: 2, count: 1), Tick(id: 1, count: 1),
      ])
      if nested {
        map.transaction { inner in inner.remove(Tick.self, id: 1) }
      } else {
        transaction.remove(Tick.self, id: 1)
      }
      #expect(batch?.value == [Tick(id: 2, count: 1)])
      throw Unwind()
    }
    #expect(batch?.value == [Tick(id: 1, count: 0), Tick(id: 1, count: 0)])
    #expect(!one.isRemoved)
    map.update(Tick.self, id: 1) { $0.count = 9 }
    #expect(batch?.value == [Tick(id: 1, count: 9), Tick(id: 1, count: 9)], "and follows them")
    map._core._checkInvariants()
  }
}
