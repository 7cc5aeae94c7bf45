import ConcordTesting
import TestSupport
import Testing

@testable import Concord

@Suite("Aliases")
struct AliasTests {
  @Test func aliasHoldsItsEntityWithoutObservers() {
    let map = IdentityMap()
    map.store(User(id: 1, name: "Ged"), named: .currentUser)
    #expect(map.count == 1)
    #expect(map.find(named: .currentUser).value == User(id: 1, name: "Ged"))
    #expect(map.find(User.self, id: 1)?.value.name == "Ged")
  }

  @Test func findBeforeSetIsNilThenNotified() {
    let map = IdentityMap()
    let me = map.find(named: .currentUser)
    #expect(me.value == nil)
    let received = Locked<[User?]>([])
    let subscription = me.observe { received.append($0) }
    map.store(User(id: 1, name: "Ged"), named: .currentUser)
    #expect(me.value?.name == "Ged")
    #expect(received.value == [User(id: 1, name: "Ged")])
    subscription.cancel()
  }

  @Test func aliasFollowsItsEntityWhateverRouteUpdatesIt() {
    let map = IdentityMap()
    let me = map.store(User(id: 1, name: "Ged"), named: .currentUser)
    map.store(User(id: 1, name: "Sparrowhawk"))
    #expect(me.value?.name == "Sparrowhawk")
    map.update(User.self, id: 1) { $0.name = "Archmage" }
    #expect(me.value?.name == "Archmage")
  }

  @Test func updateNamedModifiesTheAliasedEntity() {
    let map = IdentityMap()
    let me = map.store(User(id: 1, name: "Ged"), named: .currentUser)
    let user = map.find(User.self, id: 1)
    #expect(map.update(named: .currentUser) { $0.name = "Sparrowhawk" })
    #expect(me.value?.name == "Sparrowhawk")
    #expect(user?.value.name == "Sparrowhawk")
  }

  @Test func updateNamedOnAnUnsetAliasReturnsFalse() {
    let map = IdentityMap()
    var ran = false
    #expect(!map.update(named: .currentUser) { _ in ran = true })
    #expect(!map.update(named: .team) { _ in ran = true })
    #expect(!ran)
    #expect(map.count == 0)
  }

  @Test func replacingAnAliasReleasesTheOldEntity() {
    let map = IdentityMap()
    map.store(User(id: 1, name: "Ged"), named: .currentUser)
    map.store(User(id: 2, name: "Tenar"), named: .currentUser)
    #expect(map.count == 1)
    #expect(map.find(User.self, id: 1) == nil)
    #expect(map.find(named: .currentUser).value?.name == "Tenar")
  }

  @Test func replacingAnAliasKeepsAnEntityHeldElsewhere() {
    let map = IdentityMap()
    let ged = map.store(User(id: 1, name: "Ged"))
    map.store(ged.value, named: .currentUser)
    map.store(User(id: 2, name: "Tenar"), named: .currentUser)
    #expect(map.count == 2)
    #expect(!ged.isRemoved)
  }

  @Test func removeAliasEmptiesItAndReleasesTheEntity() {
    let map = IdentityMap()
    let me = map.store(User(id: 1, name: "Ged"), named: .currentUser)
    map.removeAlias(named: AliasKey<User>.currentUser)
    #expect(me.value == nil)
    #expect(map.count == 0)
    #expect(map.find(User.self, id: 1) == nil)
  }

  @Test func removingAnAbsentAliasDoesNothing() {
    let map = IdentityMap()
    let logger = RecordingLogger()
    let logged = IdentityMap(logger: logger)
    map.removeAlias(named: AliasKey<User>.currentUser)
    logged.removeAlias(named: AliasKey<[User]>.team)
    #expect(map.count == 0)
    #expect(logger.events.isEmpty)
  }

  @Test func removeAliasForgetsItsStamp() {
    let map = IdentityMap()
    let me = map.store(User(id: 1, name: "Ged"), named: .currentUser, modifiedAt: 10)
    map.removeAlias(named: AliasKey<User>.currentUser)
    map.store(User(id: 2, name: "Tenar"), named: .currentUser, modifiedAt: 1)
    #expect(me.value?.name == "Tenar")
  }

  @Test func staleAliasWriteNeitherMovesTheAliasNorTheEntity() {
    let map = IdentityMap()
    let me = map.store(User(id: 1, name: "Ged"), named: .currentUser, modifiedAt: 10)
    map.store(User(id: 2, name: "Tenar"), named: .currentUser, modifiedAt: 5)
    #expect(me.value?.id == 1)
    #expect(map.count == 1)
  }

  @Test func collectionAliasHoldsExactlyItsEntities() {
    let map = IdentityMap()
    let team = map.store([User(id: 1, name: "Ged"), User(id: 2, name: "Tenar")], named: .team)
    #expect(map.count == 2)
    map.store([User(id: 2, name: "Tenar")], named: .team)
    #expect(team.value?.map(\.id) == [2])
    #expect(map.count == 1, "shrinking the alias releases what it no longer holds")
    #expect(map.find(User.self, id: 1) == nil)
  }

  @Test func updateNamedCollectionAddsAndDropsElements() {
    let map = IdentityMap()
    let team = map.store([User(id: 1, name: "Ged")], named: .team)
    #expect(map.update(named: .team) { $0.append(User(id: 2, name: "Tenar")) })
    #expect(team.value?.map(\.name) == ["Ged", "Tenar"])
    #expect(map.count == 2)
    map.update(named: .team) { $0.removeFirst() }
    #expect(team.value?.map(\.name) == ["Tenar"])
    #expect(map.count == 1)
  }

  @Test func removingAnAliasedEntityEmptiesASingleAliasAndShrinksACollectionAlias() {
    let map = IdentityMap()
    let me = map.store(User(id: 1, name: "Ged"), named: .currentUser)
    let team = map.store([User(id: 1, name: "Ged"), User(id: 2, name: "Tenar")], named: .team)
    map.remove(User.self, id: 1)
    #expect(me.value == nil)
    #expect(team.value?.map(\.id) == [2])
  }

  @Test func keysWithTheSameNameButDifferentTypesAreDifferentAliases() {
    let map = IdentityMap()
    let single = map.store(User(id: 1, name: "Ged"), named: AliasKey<User>("x"))
    let many = map.store([User(id: 2, name: "Tenar")], named: AliasKey<[User]>("x"))
    #expect(single.value?.id == 1)
    #expect(many.value?.map(\.id) == [2])
    map.removeAlias(named: AliasKey<User>("x"))
    #expect(many.value?.map(\.id) == [2])
  }

  @Test func anUnsetAliasNobodyObservesLeavesNoSlot() {
    let map = IdentityMap()
    _ = map.find(named: .currentUser)
    map.store(User(id: 1, name: "Ged"), named: .currentUser)
    map.removeAlias(named: AliasKey<User>.currentUser)
    #expect(map._core.registry.aliases.isEmpty)
  }

  @Test func aliasEventsAreLogged() {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    map.store(User(id: 1, name: "Ged"), named: .currentUser)
    map.removeAlias(named: AliasKey<User>.currentUser)
    #expect(logger.events.contains(.aliasSet("currentUser")))
    #expect(logger.events.contains(.aliasRemoved("currentUser")))
  }
}
