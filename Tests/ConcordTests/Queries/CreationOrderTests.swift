import Testing

@testable import Concord

/// A row of a feed, listed in the order first stored when no comparator is given.
private struct Row: Identifiable, Sendable, Equatable {
  var id: Int
  var rank = 0
}

private struct Rollback: Error {}

/// Moves the creation counter of `Row`'s table to just before the sequence number that makes
/// the table renumber its nodes, as if 2^31 rows had been created before.
private func nearRenumbering(_ map: IdentityMap, before steps: UInt32) {
  map._core.registry.table(for: Row.self).lastSequence =
    _Table<Row>.renumberingSequence - steps
}

private func sequences(_ map: IdentityMap, _ ids: [Int]) -> [UInt32] {
  ids.map { map._core.registry.table(for: Row.self).node($0)?.sequence ?? 0 }
}

@Suite("Creation order: 32-bit sequence numbers, renumbered before they run out")
struct CreationOrderTests {
  @Test("a table renumbers its nodes 1 to n at the commit that reaches the mark, in order")
  func renumbersAtTheMark() {
    let map = IdentityMap()
    let early = map.store([Row(id: 10), Row(id: 20), Row(id: 30)])
    let all = map.query(Row.self)
    nearRenumbering(map, before: 2)
    let late = map.store([Row(id: 5), Row(id: 40)])
    #expect(sequences(map, [10, 20, 30, 5, 40]) == [1, 2, 3, 4, 5])
    #expect(map._core.registry.table(for: Row.self).lastSequence == 5)
    #expect(all.value.map(\.id) == [10, 20, 30, 5, 40], "the query kept creation order")
    let next = map.store(Row(id: 1))
    #expect(sequences(map, [1]) == [6])
    #expect(all.value.map(\.id) == [10, 20, 30, 5, 40, 1])
    map._core._checkInvariants()
    withExtendedLifetime((early, late, next)) {}
  }

  @Test("a sorted query breaks ties by creation order across the renumbering")
  func tiesKeepTheirOrder() {
    let map = IdentityMap()
    let early = map.store([Row(id: 3, rank: 1), Row(id: 2, rank: 0)])
    let sorted = map.query(Row.self, sortedBy: { $0.rank < $1.rank })
    nearRenumbering(map, before: 1)
    let late = map.store([Row(id: 1, rank: 1), Row(id: 0, rank: 0)])
    #expect(sorted.value.map(\.id) == [2, 0, 3, 1])
    // NB: an update moves a member by binary search with the renumbered copies.
    map.store(Row(id: 3, rank: 0))
    #expect(sorted.value.map(\.id) == [3, 2, 0, 1], "row 3 was created first")
    map._core._checkInvariants()
    withExtendedLifetime((early, late)) {}
  }

  @Test("a rolled-back transaction that reached the mark renumbers after its rollback")
  func aRollbackRenumbersAfterwards() {
    let map = IdentityMap()
    let held = map.store([Row(id: 1), Row(id: 2), Row(id: 3)])
    let all = map.query(Row.self)
    nearRenumbering(map, before: 1)
    try? map.transaction { transaction in
      transaction.remove(Row.self, id: 1)
      transaction.store(Row(id: 4))
      throw Rollback()
    }
    #expect(all.value.map(\.id) == [1, 2, 3], "the removed row came back in its place")
    #expect(sequences(map, [1, 2, 3]) == [1, 2, 3], "renumbered once nothing could roll back")
    #expect(map._core.registry.table(for: Row.self).lastSequence == 3)
    let next = map.store(Row(id: 5))
    #expect(all.value.map(\.id) == [1, 2, 3, 5])
    map._core._checkInvariants()
    withExtendedLifetime((held, next)) {}
  }

  @Test("released rows in the release buffer are renumbered with the rest")
  func bufferedNodesAreRenumbered() {
    let map = IdentityMap(retention: .keepReleased(8))
    var released: [EntityObserver<Row>]? = [map.store(Row(id: 7)), map.store(Row(id: 8))]
    released = nil
    #expect(map.statistics.bufferedEntities == 2, "both stay, buffered")
    nearRenumbering(map, before: 1)
    let late = map.store(Row(id: 9))
    #expect(sequences(map, [7, 8, 9]) == [1, 2, 3])
    map._core._checkInvariants()
    let all = map.query(Row.self)
    #expect(all.value.map(\.id) == [7, 8, 9])
    map._core._checkInvariants()
    withExtendedLifetime((released, late)) {}
  }
}
