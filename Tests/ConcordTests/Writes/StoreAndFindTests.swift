import Testing

@testable import Concord

@Suite("Store, find, update, remove")
struct StoreAndFindTests {
  @Test func storeReturnsAHandleOnTheStoredValue() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "Ursula"))
    #expect(author.value == Author(id: 1, name: "Ursula"))
    #expect(map.count == 1)
  }

  @Test func findReturnsTheSameEntity() {
    let map = IdentityMap()
    let stored = map.store(Author(id: 1, name: "Ursula"))
    let found = map.find(Author.self, id: 1)
    #expect(found?.value == stored.value)
    #expect(map.find(Author.self, id: 2) == nil)
  }

  @Test func entitiesOfDifferentTypesWithTheSameIDAreDistinct() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "Ursula"))
    let user = map.store(User(id: 1, name: "Ged"))
    #expect(map.count == 2)
    #expect(map.find(Author.self, id: 1)?.value.name == "Ursula")
    #expect(map.find(User.self, id: 1)?.value.name == "Ged")
    withExtendedLifetime((author, user)) {}
  }

  @Test func storingAgainReplacesTheValueForEveryHolder() {
    let map = IdentityMap()
    let first = map.store(Author(id: 1, name: "Ursula"))
    let second = map.store(Author(id: 1, name: "Ursula K. Le Guin"))
    #expect(first.value.name == "Ursula K. Le Guin")
    #expect(second.value.name == "Ursula K. Le Guin")
    #expect(map.count == 1)
  }

  @Test func updateModifiesInPlaceAndReturnsTrue() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "Ursula"))
    let updated = map.update(Author.self, id: 1) { $0.name += " K. Le Guin" }
    #expect(updated)
    #expect(author.value.name == "Ursula K. Le Guin")
  }

  @Test func updatingAnAbsentEntityReturnsFalseAndCreatesNothing() {
    let map = IdentityMap()
    var ran = false
    let updated = map.update(Author.self, id: 1) { _ in ran = true }
    #expect(!updated)
    #expect(!ran)
    #expect(map.count == 0)
    #expect(map.find(Author.self, id: 1) == nil)
  }

  @Test func updateThatChangesTheIDStoresTheNewEntityAndLeavesTheOld() {
    let map = IdentityMap()
    let original = map.store(Author(id: 1, name: "Ursula"))
    map.update(Author.self, id: 1) { $0 = Author(id: 2, name: "Ged") }
    #expect(original.value == Author(id: 1, name: "Ursula"))
    // The new entity is not held by anyone, so it does not outlive the write.
    #expect(map.find(Author.self, id: 2) == nil)
    let held = map.find(Author.self, id: 1)
    #expect(held?.value.name == "Ursula")
  }

  @Test func removeTakesTheEntityOutAndMarksHandles() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "Ursula"))
    map.remove(Author.self, id: 1)
    #expect(map.find(Author.self, id: 1) == nil)
    #expect(map.count == 0)
    #expect(author.isRemoved)
    #expect(author.value.name == "Ursula", "a removed handle keeps the last value")
  }

  @Test func removingAnAbsentEntityDoesNothing() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "Ursula"))
    map.remove(Author.self, id: 2)
    map.remove(User.self, id: 1)
    #expect(map.count == 1)
    #expect(!author.isRemoved)
  }

  @Test func storingARemovedIDCreatesANewEntityTheOldHandleDoesNotFollow() {
    let map = IdentityMap()
    let old = map.store(Author(id: 1, name: "Ursula"))
    map.remove(Author.self, id: 1)
    let new = map.store(Author(id: 1, name: "Ursula again"))
    #expect(old.isRemoved)
    #expect(old.value.name == "Ursula")
    #expect(!new.isRemoved)
    #expect(map.find(Author.self, id: 1)?.value.name == "Ursula again")
  }

  @Test func removeAllRemovesEveryEntityAndAlias() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "Ursula"))
    let team = map.store([User(id: 1, name: "Ged"), User(id: 2, name: "Tenar")], named: .team)
    let me = map.store(User(id: 3, name: "Arha"), named: .currentUser)
    #expect(map.count == 4)
    map.removeAll()
    #expect(map.count == 0)
    #expect(author.isRemoved)
    #expect(team.value == nil)
    #expect(me.value == nil)
    #expect(map.find(User.self, id: 1) == nil)
  }

  @Test func batchStoreReturnsOneHandleFollowingEveryElement() {
    let map = IdentityMap()
    let batch = map.store([Author(id: 1, name: "A"), Author(id: 2, name: "B")])
    #expect(batch.value.map(\.name) == ["A", "B"])
    #expect(map.count == 2)
    map.update(Author.self, id: 2) { $0.name = "B2" }
    #expect(batch.value.map(\.name) == ["A", "B2"])
    map.remove(Author.self, id: 1)
    #expect(batch.value.map(\.name) == ["B2"])
  }

  @Test func duplicateIDsInOneBatchLastOccurrenceWins() {
    let map = IdentityMap()
    let batch = map.store([
      Author(id: 1, name: "first"), Author(id: 2, name: "B"), Author(id: 1, name: "last"),
    ])
    #expect(map.count == 2)
    #expect(map.find(Author.self, id: 1)?.value.name == "last")
    #expect(
      batch.value.map(\.name) == ["last", "B", "last"],
      "every position of the id shows the stored value")
  }

  @Test func emptyBatchIsFine() {
    let map = IdentityMap()
    let batch = map.store([Author]())
    #expect(batch.value.isEmpty)
    #expect(map.count == 0)
  }
}
