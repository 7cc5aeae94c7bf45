import ConcordTesting
import TestSupport
import Testing

@testable import Concord

struct Rejected: Error {}

@Suite("Transactions")
struct TransactionTests {
  @Test func returnsTheBodysResult() {
    let map = IdentityMap()
    let handle = map.transaction { transaction in transaction.store(Author(id: 1, name: "A")) }
    #expect(handle.value.name == "A")
    #expect(map.count == 1)
  }

  @Test func otherThreadsSeeAllOfTheWritesOrNone() async {
    let map = IdentityMap()
    let pair = map.store([Counter(id: 1, value: 0), Counter(id: 2, value: 0)])
    let torn = Locked(0)
    await withTaskGroup(of: Void.self) { group in
      group.addTask {
        for round in 1...2_000 {
          map.transaction { transaction in
            transaction.update(Counter.self, id: 1) { $0.value = round }
            transaction.update(Counter.self, id: 2) { $0.value = round }
          }
        }
      }
      group.addTask {
        for _ in 0..<2_000 {
          let values = pair.value
          if values[0].value != values[1].value { torn.increment() }
        }
      }
    }
    #expect(torn.value == 0)
  }

  @Test func aThrowingBodyRollsEverythingBackAndTellsNobody() {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    let author = map.store(Author(id: 1, name: "A"), modifiedAt: 1)
    let me = map.store(User(id: 1, name: "Ged"), named: .currentUser)
    let batch = map.store([Author(id: 2, name: "B"), Author(id: 3, name: "C")])
    let calls = Locked(0)
    let subscriptions = [
      author.observe { _ in calls.increment() }, me.observe { _ in calls.increment() },
      batch.observe { _ in calls.increment() },
    ]
    logger.clear()
    #expect(throws: Rejected.self) {
      try map.transaction { transaction in
        transaction.store(Author(id: 1, name: "A2"), modifiedAt: 2)
        transaction.update(Author.self, id: 2) { $0.name = "B2" }
        transaction.remove(Author.self, id: 3)
        transaction.store(User(id: 2, name: "Tenar"), named: .currentUser)
        transaction.store(Author(id: 4, name: "new"))
        throw Rejected()
      }
    }
    #expect(author.value == Author(id: 1, name: "A"))
    #expect(batch.value.map(\.name) == ["B", "C"])
    #expect(me.value == User(id: 1, name: "Ged"))
    #expect(map.find(Author.self, id: 3)?.isRemoved == false)
    #expect(map.find(Author.self, id: 4) == nil)
    #expect(map.find(User.self, id: 2) == nil)
    #expect(map.count == 4)
    #expect(calls.value == 0)
    #expect(logger.events.isEmpty, "a rolled-back write logs nothing")
    // The stamp was rolled back too: stamp 2 is newer than the restored stamp 1.
    map.store(Author(id: 1, name: "A3"), modifiedAt: 2)
    #expect(author.value.name == "A3")
    withExtendedLifetime(subscriptions) {}
  }

  @Test func aHandleOnAnEntityTheRollbackTakesOutReportsRemoved() {
    let map = IdentityMap()
    let escaped = Locked<EntityObserver<Author>?>(nil)
    try? map.transaction { transaction in
      escaped.withValue { $0 = transaction.store(Author(id: 1, name: "A")) }
      throw Rejected()
    }
    #expect(escaped.value?.isRemoved == true)
    #expect(map.count == 0)
    #expect(map.find(Author.self, id: 1) == nil)
  }

  @Test func aRemovalAndReinsertionRollBack() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    try? map.transaction { transaction in
      transaction.remove(Author.self, id: 1)
      transaction.store(Author(id: 1, name: "new node"))
      throw Rejected()
    }
    #expect(!author.isRemoved)
    #expect(map.find(Author.self, id: 1)?.value.name == "A")
    #expect(map.count == 1)
  }

  @Test func aNestedTransactionThatThrowsRollsBackOnlyItsOwnWrites() throws {
    let map = IdentityMap()
    let a = map.store(Author(id: 1, name: "A"))
    let b = map.store(Author(id: 2, name: "B"))
    let received = Locked<[String]>([])
    let subscriptions = [
      a.observe { received.append($0.name) }, b.observe { received.append($0.name) },
    ]
    map.transaction { outer in
      outer.update(Author.self, id: 1) { $0.name = "A1" }
      try? map.transaction { inner in
        inner.update(Author.self, id: 1) { $0.name = "A-inner" }
        inner.update(Author.self, id: 2) { $0.name = "B-inner" }
        throw Rejected()
      }
    }
    #expect(a.value.name == "A1")
    #expect(b.value.name == "B")
    #expect(received.value == ["A1"])
    withExtendedLifetime(subscriptions) {}
  }

  @Test func callingTheMapDirectlyInsideTheBodyJoinsTheTransaction() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    try? map.transaction { _ in
      map.update(Author.self, id: 1) { $0.name = "direct" }
      #expect(map.find(Author.self, id: 1)?.value.name == "direct", "reads inside see the writes")
      throw Rejected()
    }
    #expect(author.value.name == "A")
  }

  @Test func transactionFindAndAliasMethods() {
    let map = IdentityMap()
    let team = map.transaction { transaction in
      transaction.store([User(id: 1, name: "Ged")], named: .team)
      transaction.store(User(id: 2, name: "Tenar"), named: .currentUser)
      #expect(transaction.find(User.self, id: 1)?.value.name == "Ged")
      #expect(transaction.find(named: .currentUser).value?.name == "Tenar")
      transaction.update(named: .currentUser) { $0.name = "Arha" }
      transaction.update(named: .team) { $0.append(User(id: 3, name: "Ogion")) }
      transaction.removeAlias(named: AliasKey<User>.currentUser)
      return transaction.find(named: .team)
    }
    #expect(team.value?.map(\.name) == ["Ged", "Ogion"])
    #expect(map.find(named: .currentUser).value == nil)
    #expect(map.count == 2)
  }

  @Test func storesWithoutHandlesInsideATransactionKeepNothing() {
    let map = IdentityMap()
    map.transaction { transaction in
      transaction.store(Author(id: 1, name: "A"))
      transaction.store([Author(id: 2, name: "B")])
      #expect(map.count == 2, "kept until the commit")
    }
    #expect(map.count == 0)
  }

  @Test("a nested transaction that throws restores what an earlier sibling committed")
  func siblingTransactions() {
    let map = IdentityMap()
    let counter = map.store(Counter(id: 1, value: 0))
    let changes = map.collector(Counter.self)
    map.transaction { _ in
      map.transaction { $0.update(Counter.self, id: 1) { $0.value = 1 } }
      #expect(throws: Rejected.self) {
        try map.transaction { transaction in
          transaction.update(Counter.self, id: 1) { $0.value = 9 }
          throw Rejected()
        }
      }
      #expect(counter.value.value == 1)
    }
    #expect(counter.value.value == 1)
    #expect(changes.drain() == [.updated(Counter(id: 1, value: 1))])
    map._core._checkInvariants()
  }
}
