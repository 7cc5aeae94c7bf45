import ConcordTesting
import TestSupport
import Testing

@testable import Concord

// Removal rules per key path: `.removeParent` on an optional or a collection removes the
// aggregate with the nested entity, in the same write, told like any removal; cascades end on
// cycles with each entity removed once. Examples on Mastodon's shapes, then a seeded run over
// random graphs against a model of the cascade, which also checks `parents(of:id:)`.

/// A member whose friends it cannot exist without: removing one removes the member.
struct Dependent: Aggregate, Equatable {
  var id: Int
  var needs: [Dependent]
  var optional: [Dependent]
  static var nestedEntities: [NestedEntity<Dependent>] {
    [.init(\.needs, onRemoval: .removeParent), .init(\.optional, onRemoval: .default)]
  }
}

@Suite("Removal rules")
struct RemovalRuleTests {
  typealias Status = MastodonStatus
  typealias Boosting = MastodonBoostingStatus

  @Test func aBoostOfADeletedStatusGoesWithItInTheSameWrite() {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    let original = Status.post("9", "original", at: 10)
    let boost = map.store(Boosting(id: "b1", content: "", createdAt: 11, boosted: [original]))
    let removals = Locked<[String]>([])
    let subscription = boost.observeRemoval { removals.append($0.id) }
    logger.clear()
    map.remove(Status.self, id: "9")
    #expect(boost.isRemoved)
    #expect(removals.value == ["b1"])
    #expect(
      Set(logger.events.filter { $0.kind == .removed }.compactMap(\.entity))
        == [EntityReference(Status.self, id: "9"), EntityReference(Boosting.self, id: "b1")])
    subscription.cancel()
    map._core._checkInvariants()
  }

  @Test func theDefaultRuleKeepsABoostOfNothing() {
    let map = IdentityMap()
    let boost = map.store(Status.boost("b1", of: Status.post("9", "original", at: 10), at: 11))
    map.remove(Status.self, id: "9")
    #expect(!boost.isRemoved)
    #expect(boost.value.reblog == nil)
  }

  @Test func aRuleOnACollectionRemovesTheParentForAnyElement() {
    let map = IdentityMap()
    let parent = map.store(
      Dependent(
        id: 1, needs: [Dependent(id: 2, needs: [], optional: [])],
        optional: [Dependent(id: 3, needs: [], optional: [])]))
    map.remove(Dependent.self, id: 3)
    #expect(!parent.isRemoved && parent.value.optional.isEmpty)
    map.remove(Dependent.self, id: 2)
    #expect(parent.isRemoved)
  }

  @Test func aCascadeAroundACycleRemovesEachEntityOnce() {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    // 1 needs 2, 2 needs 3, 3 needs 1.
    var three = Dependent(id: 3, needs: [], optional: [])
    three.needs = [
      Dependent(id: 1, needs: [Dependent(id: 2, needs: [], optional: [])], optional: [])
    ]
    let handle = map.store(three)
    // Closed with the stored value of 3, whose nested copy of 2 loses to the root.
    let stored = handle.value
    _ = map.update(Dependent.self, id: 2) { $0.needs = [stored] }
    #expect(map.find(Dependent.self, id: 2)?.value.needs.map(\.id) == [3])
    logger.clear()
    map.remove(Dependent.self, id: 2)
    #expect(handle.isRemoved)
    #expect(logger.events.filter { $0.kind == .removed }.count == 3)
    #expect(map.count == 0)
    map._core._checkInvariants()
  }

  @Test func parentsAreTheAggregatesNestingTheEntityNotListsOrAliases() {
    let map = IdentityMap()
    let original = Status.post("9", "original", at: 10)
    let boost = map.store(Status.boost("b1", of: original, at: 11))
    let notification = map.store(
      MastodonNotification(id: "n1", type: "favourite", status: original))
    let page = map.store([original])
    map.store(original, named: AliasKey<Status>("pinned"))
    #expect(
      Set(map.parents(of: Status.self, id: "9"))
        == [
          EntityReference(Status.self, id: "b1"),
          EntityReference(MastodonNotification.self, id: "n1"),
        ])
    #expect(map.parents(of: Status.self, id: "absent").isEmpty)
    #expect(map.parents(of: Status.self, id: "b1").isEmpty)
    withExtendedLifetime((boost, notification, page)) {}
  }

  @Test func aRuleOnANonOptionalEntityIsTheDefaultAlready() {
    // NB: compiles and behaves as `.init(\.author)`.
    let rule = NestedEntity<Book>(\.author, onRemoval: .default)
    #expect(rule._accessor.requiresChild)
    #expect(NestedEntity<Shelf>(\.pinned, onRemoval: .removeParent)._accessor.requiresChild)
    #expect(!NestedEntity<Shelf>(\.pinned, onRemoval: .default)._accessor.requiresChild)
  }
}

@Suite("Removal rules: a seeded run against a model of the cascade")
struct RemovalRuleModelTests {
  @Test(arguments: 0..<4)
  func randomGraphsCascadeAsTheModelSays(run: Int) {
    var random = SeededGenerator(seed: 0x2E30_0000 &+ UInt64(run))
    for _ in 0..<max(20, randomSteps(share: 500)) {
      let map = IdentityMap()
      let count = Int.random(in: 2...8, using: &random)
      // Each entity needs some of the later ones and optionally holds others: a random DAG,
      // sharing entities between parents (cycles: `aCascadeAroundACycleRemovesEachEntityOnce`).
      var needs: [Int: [Int]] = [:]
      var optional: [Int: [Int]] = [:]
      for id in 0..<count {
        needs[id] = (id + 1..<count).filter { _ in Int.random(in: 0..<3, using: &random) == 0 }
        optional[id] = (id + 1..<count).filter { _ in Int.random(in: 0..<3, using: &random) == 0 }
      }
      func value(_ id: Int) -> Dependent {
        Dependent(id: id, needs: needs[id]!.map(value), optional: optional[id]!.map(value))
      }
      let handles = (0..<count).reversed().map { map.store(value($0)) }.reversed() as [_]
      // Who holds each entity, as `parents(of:id:)` answers.
      for id in 0..<count {
        let expected = (0..<count).filter { needs[$0]!.contains(id) || optional[$0]!.contains(id) }
        let parents = map.parents(of: Dependent.self, id: id)
        #expect(parents.count == expected.count, "each parent once")
        #expect(Set(parents) == Set(expected.map { EntityReference(Dependent.self, id: $0) }))
      }
      let victim = Int.random(in: 0..<count, using: &random)
      // The model: whatever needs a removed entity is removed, transitively.
      var removed: Set<Int> = [victim]
      var changed = true
      while changed {
        changed = false
        for id in 0..<count
        where !removed.contains(id) && needs[id]!.contains(where: removed.contains) {
          removed.insert(id)
          changed = true
        }
      }
      map.remove(Dependent.self, id: victim)
      for id in 0..<count {
        #expect(handles[id].isRemoved == removed.contains(id), "\(needs) \(optional) − \(victim)")
        if !removed.contains(id) {
          let value = handles[id].value
          #expect(value.needs.map(\.id) == needs[id]!)
          #expect(value.optional.map(\.id) == optional[id]!.filter { !removed.contains($0) })
        }
      }
      map._core._checkInvariants()
    }
  }
}
