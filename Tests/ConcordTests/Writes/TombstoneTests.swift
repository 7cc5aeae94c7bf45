import ConcordTesting
import Foundation
import TestSupport
import Testing

@testable import Concord

// Tombstones (`TombstonePolicy`): a removed entity's stamp refuses a replayed write no newer than
// the removal, as Mastodon's user stream replays `update` events after a `delete` on reconnect.
// Examples first, then a seeded run against a model of the bounded, ordered set of tombstones.
// The examples hold what they store, as a screen showing it would: an entity nobody holds is
// released at once, and a removal finds nothing to remove (see `LifetimeTests`). They keep the
// handles alive with `withExtendedLifetime`: an optimized build may release a handle after its
// last use.

@Suite("Tombstones: a removed entity's stamp refuses replayed writes")
struct TombstoneTests {
  typealias Status = MastodonStatus

  @Test func aReplayedUpdateAfterADeleteIsRefusedAndLoggedAsStale() {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    let shown = map.store(Status.post("9", "first", at: 10, edited: 20))
    map.remove(Status.self, id: "9")  // the stream's `delete`
    logger.clear()
    // The reconnect replays the `status.update` that came before the delete.
    let replayed = map.store(Status.post("9", "edited", at: 10, edited: 20))
    #expect(replayed.isRemoved)
    #expect(replayed.value.content == "edited", "a refused write's handle shows what was written")
    #expect(map.find(Status.self, id: "9") == nil)
    let stale = logger.staleWrites
    #expect(stale.count == 1)
    #expect(stale.first?.target.entity == EntityReference(Status.self, id: "9"))
    #expect(stale.first?.stored == 20 && stale.first?.incoming == 20)
    #expect(shown.isRemoved)
    map._core._checkInvariants()
  }

  @Test func aNewerStampOrNoStampBringsTheEntityBack() {
    let map = IdentityMap()
    let first = map.store(Status.post("9", "first", at: 10))
    map.remove(Status.self, id: "9")
    #expect(first.isRemoved)
    #expect(map.store(Status.post("9", "older", at: 5)).isRemoved)
    let edited = map.store(Status.post("9", "edited", at: 10, edited: 11))
    withExtendedLifetime(edited) {
      #expect(!edited.isRemoved)
      map.remove(Status.self, id: "9")
    }
    let author = map.store(Author(id: 1, name: "A"), modifiedAt: 7)
    map.remove(Author.self, id: 1)
    #expect(map.store(Author(id: 1, name: "B"), modifiedAt: 7).isRemoved)
    let back = map.store(Author(id: 1, name: "unstamped"))
    #expect(back.value.name == "unstamped" && author.isRemoved)
    #expect(map.find(Author.self, id: 1)?.value.name == "unstamped")
    // Stored again, it lost its tombstone: the older write is judged against the entity now.
    #expect(map._core.tombstones.count == 1, "status 9's only")
    map._core._checkInvariants()
  }

  @Test func anEntityRemovedWithoutAStampLeavesNoTombstone() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    map.remove(Author.self, id: 1)
    #expect(map.store(Author(id: 1, name: "B"), modifiedAt: 1).value.name == "B")
    #expect(author.isRemoved)
    #expect(map._core.tombstones.count == 0)
  }

  @Test(arguments: [TombstonePolicy.none, .keepNewest(0), .keepNewest(-3)])
  func aPolicyThatKeepsNoneBringsTheEntityBack(policy: TombstonePolicy) {
    let map = IdentityMap(tombstones: policy)
    let author = map.store(Author(id: 1, name: "A"), modifiedAt: 7)
    map.remove(Author.self, id: 1)
    #expect(author.isRemoved)
    #expect(map.store(Author(id: 1, name: "replayed"), modifiedAt: 7).value.name == "replayed")
    #expect(map._core.tombstones.count == 0)
    map._core._checkInvariants()
  }

  @Test func theOldestTombstoneIsForgottenFirst() {
    let map = IdentityMap(tombstones: .keepNewest(2))
    let held = (1...3).map { map.store(Author(id: $0, name: "\($0)"), modifiedAt: 5) }
    map.remove(Author.self, id: 1)
    let book = map.store(Book(id: "b", title: "T", author: Author(id: 9, name: "N")), modifiedAt: 5)
    map.remove(Book.self, id: "b")
    map.remove(Author.self, id: 2)  // the third: author 1's goes
    #expect(map._core.tombstones.count == 2 && book.isRemoved)
    withExtendedLifetime(held) {}
    #expect(!map.store(Author(id: 1, name: "back"), modifiedAt: 5).isRemoved)
    #expect(
      map.store(Book(id: "b", title: "T", author: Author(id: 9, name: "N")), modifiedAt: 5)
        .isRemoved)
    #expect(map.store(Author(id: 2, name: "replayed"), modifiedAt: 5).isRemoved)
    map._core._checkInvariants()
  }

  @Test func removeAllAndResetForgetEveryTombstone() throws {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"), modifiedAt: 7)
    withExtendedLifetime(author) { map.remove(Author.self, id: 1) }
    #expect(map._core.tombstones.count == 1)
    map.removeAll()
    let replayed = map.store(Author(id: 1, name: "replayed"), modifiedAt: 7)
    withExtendedLifetime(replayed) {
      #expect(!replayed.isRemoved)
      map.remove(Author.self, id: 1)
    }
    #expect(map._core.tombstones.count == 1)
    try map.reset()
    #expect(map.store(Author(id: 1, name: "again"), modifiedAt: 7).value.name == "again")
    #expect(map._core.tombstones.count == 0)
    map._core._checkInvariants()
  }

  @Test func aTransactionSeesItsOwnRemovalsAndARollbackPutsTombstonesBack() throws {
    let map = IdentityMap(tombstones: .keepNewest(1))
    let held = [1, 2, 3].map { map.store(Author(id: $0, name: "\($0)"), modifiedAt: 7) }
    map.remove(Author.self, id: 1)
    struct Thrown: Error {}
    // A burst of replayed events handled in one transaction: the delete refuses what follows it.
    map.transaction { transaction in
      transaction.remove(Author.self, id: 2)
      #expect(transaction.store(Author(id: 2, name: "replayed"), modifiedAt: 7).isRemoved)
    }
    #expect(map.find(Author.self, id: 2) == nil)
    // Author 2's tombstone pushed author 1's out; a rollback of a body that brings author 2
    // back, removes others and clears everything puts it back as it was.
    try? map.transaction { transaction in
      transaction.store(Author(id: 2, name: "newer"), modifiedAt: 8)
      transaction.remove(Author.self, id: 3)
      try? map.transaction { _ in
        map.removeAll()
        throw Thrown()
      }
      throw Thrown()
    }
    #expect(map._core.tombstones.count == 1)
    #expect(map.store(Author(id: 2, name: "replayed"), modifiedAt: 7).isRemoved)
    #expect(map.store(Author(id: 1, name: "forgotten"), modifiedAt: 7).value.name == "forgotten")
    #expect(held[2].value.name == "3" && !held[2].isRemoved)
    withExtendedLifetime(held) {}
    map._core._checkInvariants()
  }

  @Test func aNestedEntityRefusedByItsTombstoneLeavesItsParentsAsARemovalWould() {
    let map = IdentityMap()
    let status = Status.post("9", "original", at: 10)
    let shown = map.store(status)
    map.remove(Status.self, id: "9")
    #expect(shown.isRemoved)
    // A replayed timeline page: a boost of the deleted status, and a notification about it.
    let boost = map.store(Status.boost("b1", of: status, at: 30))
    #expect(boost.value.reblog == nil, "a boost of nothing, as if the status were removed")
    let notification = map.store(
      MastodonNotification(id: "n1", type: "favourite", status: status))
    #expect(notification.value.status == nil)
    // A book requires its author: refused, the author takes the book with it.
    let author = map.store(Author(id: 1, name: "A"), modifiedAt: 7)
    map.remove(Author.self, id: 1)
    #expect(author.isRemoved)
    let book = map.store(Book(id: "b", title: "T", author: Author(id: 1, name: "A")), modifiedAt: 7)
    #expect(book.isRemoved)
    #expect(map.find(Book.self, id: "b") == nil)
    map._core._checkInvariants()
  }

  @Test func aNewerNestedCopyInTheSameWriteBringsItBack() {
    let map = IdentityMap()
    let shown = map.store(Status.post("9", "original", at: 10))
    map.remove(Status.self, id: "9")
    #expect(shown.isRemoved)
    // The replayed original and, in a boost on the same page, the edit that came after.
    let page = map.store([
      Status.post("9", "replayed", at: 10),
      Status.boost("b1", of: Status.post("9", "edited", at: 10, edited: 40), at: 41),
    ])
    #expect(page.value.map(\.id) == ["9", "b1"])
    #expect(map.find(Status.self, id: "9")?.value.content == "edited")
    #expect(map._core.tombstones.count == 0)
    map._core._checkInvariants()
  }
}

extension TombstoneTests {
  // MARK: An update's nested entities are written as by `store`

  /// A shelf whose pinned book is optional, so that refusing the book leaves the shelf.
  static func shelf(pinning book: Book?) -> Shelf {
    Shelf(id: 1, owner: Author(id: 7, name: "Owner"), books: [], pinned: book, media: .none)
  }

  @Test func anUpdateNestingATombstonedEntityDoesNotBringItBack() {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    let shelf = map.store(Self.shelf(pinning: nil), modifiedAt: 1)
    let book = Book(id: "b", title: "Deleted", author: Author(id: 2, name: "A"))
    let shown = map.store(book, modifiedAt: 5)
    map.remove(Book.self, id: "b")
    #expect(shown.isRemoved)
    logger.clear()
    // The update's result nests the deleted book, stamped no newer than its tombstone.
    #expect(map.update(Shelf.self, id: 1, modifiedAt: 5) { $0.pinned = book })
    #expect(map.find(Book.self, id: "b") == nil, "store would refuse the same value")
    #expect(shelf.value.pinned == nil, "the shelf is left as the book's removal would leave it")
    #expect(logger.staleWrites.map(\.target.entity) == [EntityReference(Book.self, id: "b")])
    #expect(map._core.tombstones.count == 1, "the tombstone stands")
    // Removing the entity afterwards finds nothing: it was never brought back.
    map.remove(Book.self, id: "b")
    map._core._checkInvariants()
    // A newer stamp brings it back, through an update as through a store.
    #expect(map.update(Shelf.self, id: 1, modifiedAt: 6) { $0.pinned = book })
    #expect(map.find(Book.self, id: "b")?.value == book)
    #expect(shelf.value.pinned == book)
    #expect(map._core.tombstones.count == 0)
    map._core._checkInvariants()
  }

  @Test func anAliasUpdateNestingATombstonedEntityDoesNotBringItBack() {
    let map = IdentityMap()
    let featured = map.store(
      [Book(id: "a", title: "A", author: Author(id: 1, name: "A"))],
      named: .featured, modifiedAt: 1)
    let deleted = Book(id: "b", title: "Deleted", author: Author(id: 2, name: "B"))
    let shown = map.store(deleted, modifiedAt: 5)
    map.remove(Book.self, id: "b")
    #expect(shown.isRemoved)
    #expect(map.update(named: AliasKey<[Book]>.featured, modifiedAt: 4) { $0.append(deleted) })
    #expect(map.find(Book.self, id: "b") == nil)
    #expect(featured.value?.map(\.id) == ["a"])
    map._core._checkInvariants()
    map.remove(Book.self, id: "b")
    map._core._checkInvariants()
  }

  // MARK: Removing with a tombstone

  @Test func aDeleteOfAnEntityTheMapNeverHadLeavesATombstone() {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    // The stream deletes a status the client never saw; the page in flight arrives after.
    map.remove(Status.self, id: "9", tombstone: 20)
    #expect(map._core.tombstones.count == 1)
    let page = map.store([Status.post("9", "stale page", at: 10), Status.post("10", "new", at: 30)])
    #expect(page.value.map(\.id) == ["10"], "the deleted status stays deleted")
    #expect(map.find(Status.self, id: "9") == nil)
    #expect(logger.staleWrites.map(\.stored) == [20])
    // A newer edit brings it back, as after any removal.
    let edited = map.store(Status.post("9", "edited", at: 10, edited: 21))
    #expect(!edited.isRemoved)
    withExtendedLifetime(page) {}
    map._core._checkInvariants()
  }

  @Test func theTombstoneIsTheLargerOfTheGivenStampAndTheEntitys() {
    let map = IdentityMap()
    let newer = map.store(Author(id: 1, name: "A"), modifiedAt: 50)
    map.remove(Author.self, id: 1, tombstone: 20)
    #expect(newer.isRemoved)
    #expect(map._core.registry.table(for: Author.self).tombstone(of: 1) == 50)
    let older = map.store(Author(id: 2, name: "B"), modifiedAt: 5)
    map.remove(Author.self, id: 2, tombstone: 20)
    #expect(older.isRemoved)
    #expect(map._core.registry.table(for: Author.self).tombstone(of: 2) == 20)
    // An existing tombstone is raised, never lowered.
    map.remove(Author.self, id: 2, tombstone: 10)
    #expect(map._core.registry.table(for: Author.self).tombstone(of: 2) == 20)
    map.remove(Author.self, id: 2, tombstone: 30)
    #expect(map._core.registry.table(for: Author.self).tombstone(of: 2) == 30)
    #expect(map.store(Author(id: 2, name: "replayed"), modifiedAt: 30).isRemoved)
    withExtendedLifetime(map.store(Author(id: 2, name: "back"), modifiedAt: 31)) {
      #expect(map.find(Author.self, id: 2)?.value.name == "back")
    }
    map._core._checkInvariants()
  }

  @Test func anInfiniteTombstoneRefusesEveryStampedWriteButNotAnUnstampedOne() {
    let map = IdentityMap()
    map.remove(Author.self, id: 1, tombstone: .infinity)
    #expect(map.store(Author(id: 1, name: "far future"), modifiedAt: 1e300).isRemoved)
    #expect(map.store(Author(id: 1, name: "infinite"), modifiedAt: .infinity).isRemoved)
    #expect(map.store(Author(id: 1, name: "nan"), modifiedAt: .nan).isRemoved)
    let unstamped = map.store(Author(id: 1, name: "unstamped"))
    #expect(!unstamped.isRemoved && map.find(Author.self, id: 1)?.value.name == "unstamped")
    map._core._checkInvariants()
  }

  @Test func aNaNTombstoneOrAPolicyOfNoneLeavesNone() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    map.remove(Author.self, id: 1, tombstone: .nan)
    #expect(author.isRemoved)
    map.remove(Author.self, id: 2, tombstone: .nan)
    #expect(map._core.tombstones.count == 0)
    let none = IdentityMap(tombstones: .none)
    none.remove(Author.self, id: 1, tombstone: 5)
    #expect(none._core.tombstones.count == 0)
    #expect(none.store(Author(id: 1, name: "replayed"), modifiedAt: 5).value.name == "replayed")
  }

  @Test func inATransactionARollbackTakesTheTombstoneBack() throws {
    struct Thrown: Error {}
    let map = IdentityMap()
    let held = map.store(Author(id: 1, name: "A"), modifiedAt: 5)
    #expect(throws: Thrown.self) {
      try map.transaction { transaction in
        transaction.remove(Author.self, id: 1, tombstone: 9)
        transaction.remove(Author.self, id: 2, tombstone: 9)
        // The transaction sees its own tombstones.
        #expect(transaction.store(Author(id: 2, name: "refused"), modifiedAt: 8).isRemoved)
        throw Thrown()
      }
    }
    #expect(!held.isRemoved && held.value.name == "A")
    #expect(map._core.tombstones.count == 0)
    #expect(map.store(Author(id: 2, name: "kept"), modifiedAt: 8).value.name == "kept")
    map.transaction { $0.remove(Author.self, id: 1, tombstone: 9) }
    #expect(held.isRemoved)
    #expect(map._core.registry.table(for: Author.self).tombstone(of: 1) == 9)
    map._core._checkInvariants()
  }
}

/// A seeded run against a model of the tombstones: the newest `limit` stamps of removed
/// entities, oldest forgotten first, made and dropped at once inside transactions and put back
/// by their rollbacks, nested and thrown at every level.
@Suite("Tombstones: a seeded run against a model")
struct TombstoneModelTests {
  struct Model {
    var values: [Int: (name: String, stamp: Stamp?)] = [:]
    /// Removed entities' stamps, oldest first.
    var tombstones: [(id: Int, stamp: Stamp)] = []
    let limit: Int

    func tombstone(_ id: Int) -> Stamp? { tombstones.first { $0.id == id }?.stamp }

    mutating func store(_ id: Int, _ name: String, _ stamp: Stamp?) -> Bool {
      if let stored = values[id] {
        if let stamp, let old = stored.stamp, stamp <= old { return true }
        values[id] = (name, stamp ?? stored.stamp)
        return true
      }
      if let tomb = tombstone(id), let stamp, stamp <= tomb { return false }
      tombstones.removeAll { $0.id == id }
      values[id] = (name, stamp)
      return true
    }

    mutating func remove(_ id: Int) {
      guard let stored = values.removeValue(forKey: id), let stamp = stored.stamp else { return }
      tombstones.removeAll { $0.id == id }
      tombstones.append((id, stamp))
      if tombstones.count > limit { tombstones.removeFirst() }
    }
  }

  @Test(arguments: 0..<6)
  func aSeededRunAgreesWithTheModel(run: Int) {
    var random = SeededGenerator(seed: 0x70B5_0000 &+ UInt64(run))
    let limit = 3
    let map = IdentityMap(tombstones: .keepNewest(limit))
    var model = Model(limit: limit)
    // NB: every handle is kept: an entity nobody holds is released, and forgets its stamp.
    var held: [EntityObserver<Author>] = []
    var history: [String] = []
    struct Thrown: Error {}

    func step(_ writer: IdentityMap.Transaction?, depth: Int) {
      let id = Int.random(in: 0..<6, using: &random)
      switch Int.random(in: 0..<10, using: &random) {
      case 0..<4:
        let stamp: Stamp? =
          Int.random(in: 0..<4, using: &random) == 0
          ? nil : Stamp(Int.random(in: 1..<8, using: &random))
        let name = "n\(history.count)"
        history.append("\(depth): store \(id) \(name) \(stamp.map { "\($0)" } ?? "-")")
        let handle =
          writer?.store(Author(id: id, name: name), modifiedAt: stamp)
          ?? map.store(Author(id: id, name: name), modifiedAt: stamp)
        let stored = model.store(id, name, stamp)
        #expect(handle.isRemoved == !stored, "\(history.suffix(10))")
        held.append(handle)
      case 4..<7:
        history.append("\(depth): remove \(id)")
        if let writer {
          writer.remove(Author.self, id: id)
        } else {
          map.remove(Author.self, id: id)
        }
        model.remove(id)
      case 7:
        history.append("\(depth): removeAll")
        map.removeAll()
        model.values = [:]
        model.tombstones = []
      default:
        guard depth < 3 else { return }
        let throwing = Bool.random(using: &random)
        history.append("\(depth): transaction\(throwing ? ", throwing" : "") {")
        let saved = model
        do {
          try map.transaction { transaction in
            for _ in 0..<Int.random(in: 1...4, using: &random) {
              step(transaction, depth: depth + 1)
            }
            if throwing { throw Thrown() }
          }
        } catch {
          model = saved
        }
        history.append("\(depth): }")
      }
    }

    for _ in 0..<max(200, randomSteps(share: 40)) {
      step(nil, depth: 0)
      #expect(map._core.tombstones.count == model.tombstones.count, "\(history.suffix(10))")
      for id in 0..<6 {
        #expect(
          map.find(Author.self, id: id)?.value.name == model.values[id]?.name,
          "author \(id) after \(history.suffix(10))")
      }
      // Each tombstone refuses exactly what the model says, seen through a rolled-back probe.
      for id in 0..<6 where model.values[id] == nil {
        let probe = Stamp(Int.random(in: 1..<8, using: &random))
        try? map.transaction { transaction in
          let refused = transaction.store(Author(id: id, name: "probe"), modifiedAt: probe)
            .isRemoved
          let expected = model.tombstone(id).map { probe <= $0 } ?? false
          #expect(refused == expected, "probe \(id) at \(probe) after \(history.suffix(10))")
          throw Thrown()
        }
      }
      map._core._checkInvariants()
    }
    withExtendedLifetime(held) {}
  }
}
