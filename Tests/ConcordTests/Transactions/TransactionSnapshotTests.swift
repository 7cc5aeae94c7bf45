import ConcordTesting
import TestSupport
import Testing

@testable import Concord

// `Transaction.entities(_:filter:sortedBy:)`: a whole type as the transaction sees it, its own
// writes included, while a live query's value still shows the state before the transaction.
// A Matrix client counts a room's unread messages as the sync it is applying leaves them.

/// A message of a room's timeline.
private struct Message: Identifiable, Sendable, Equatable {
  var id: Int
  var room: String
  var isRead: Bool
  var body: String
}

@Suite("Transaction.entities: a type as the transaction sees it")
struct TransactionSnapshotTests {
  @Test func theSnapshotIncludesTheTransactionsOwnWrites() {
    let map = IdentityMap()
    let held = map.store([
      Message(id: 1, room: "a", isRead: true, body: "old"),
      Message(id: 2, room: "a", isRead: false, body: "old"),
    ])
    let unread = map.query(Message.self, filter: { !$0.isRead })
    let counted = map.transaction { transaction -> [Int] in
      transaction.store(Message(id: 3, room: "a", isRead: false, body: "synced"))
      transaction.update(Message.self, id: 2) { $0.isRead = true }
      transaction.remove(Message.self, id: 1)
      // The live query shows what was committed before; the snapshot, what this write leaves.
      #expect(unread.value.map(\.id) == [2])
      return transaction.entities(Message.self, filter: { !$0.isRead }).map(\.id)
    }
    #expect(counted == [3])
    #expect(unread.value.map(\.id) == [3])
    withExtendedLifetime(held) {}
  }

  @Test func itIsInTheOrderFirstStoredUnlessSorted() {
    let map = IdentityMap()
    let held = map.store(
      (1...4).reversed().map { Message(id: $0, room: "r", isRead: false, body: "\($0)") })
    map.transaction { transaction in
      #expect(transaction.entities(Message.self).map(\.id) == [4, 3, 2, 1])
      #expect(
        transaction.entities(Message.self, sortedBy: { $0.id < $1.id }).map(\.id) == [1, 2, 3, 4])
      // Ties keep the order first stored.
      #expect(
        transaction.entities(Message.self, sortedBy: { $0.room < $1.room }).map(\.id)
          == [4, 3, 2, 1])
    }
    withExtendedLifetime(held) {}
  }

  @Test func itIsASnapshotAndARollbackLeavesNothing() {
    struct Thrown: Error {}
    let map = IdentityMap()
    #expect(throws: Thrown.self) {
      try map.transaction { transaction in
        transaction.store(Message(id: 1, room: "a", isRead: false, body: "x"))
        let snapshot = transaction.entities(Message.self)
        transaction.store(Message(id: 2, room: "a", isRead: false, body: "y"))
        #expect(snapshot.map(\.id) == [1], "later writes do not change it")
        throw Thrown()
      }
    }
    #expect(map.count == 0)
  }

  @Test func entitiesNestedInAggregatesAndBufferedOnesCount() {
    let map = IdentityMap(retention: .keepReleased(10))
    map.store(Author(id: 9, name: "released"))
    let book = map.store(Book(id: "b", title: "T", author: Author(id: 1, name: "nested")))
    map.transaction { transaction in
      #expect(transaction.entities(Author.self).map(\.id) == [9, 1])
    }
    withExtendedLifetime(book) {}
  }

  @Test func aFilterThatWritesStopsTheProgram() async {
    await #expect(processExitsWith: .failure) {
      let map = IdentityMap()
      map.store(Author(id: 1, name: "A"))
      let held = map.store(Author(id: 2, name: "B"))
      map.transaction { transaction in
        _ = transaction.entities(
          Author.self,
          filter: { _ in
            map.store(Author(id: 3, name: "written from a filter"))
            return true
          })
      }
      withExtendedLifetime(held) {}
    }
  }
}
