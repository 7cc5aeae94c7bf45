import ConcordSQLite
import ConcordTesting
import Foundation
import TestSupport
import Testing

@testable import Concord

// Queries read the store: an entity of a persisted type in the store counts as stored, so a live
// query opened after a restart shows the cached list before the network answers. The seeded
// model-based tests (`PersistenceModelTests`, `PersistenceUnappliedTests`) open queries at every
// step, over entities in memory, in the store only, and in changes not yet written.

@Suite("Persistence: queries read the store")
struct PersistentQueryTests {
  @Test func anOfflineLaunchShowsTheCachedTimeline() throws {
    let directory = TemporaryDirectory()
    var map = try launch(directory.database)
    map.store((1...5).map { Issue.make($0, title: "cached \($0)", at: Double($0)) })
    map.remove(Issue.self, id: 3)
    try map.flush()

    map = try launch(directory.database)
    #expect(map.count == 0, "nothing in memory after a restart")
    let timeline = map.query(Issue.self, sortedBy: { $0.updatedAt > $1.updatedAt })
    #expect(timeline.value.map(\.id) == [5, 4, 2, 1], "the tombstone of 3 is no entity")
    #expect(map.holders(of: Issue.self, id: 5)?.queries == 1, "the query holds its members")
    // Live from then on: the network's answer updates it.
    let told = Locked<[[Int]]>([])
    let subscription = timeline.observe { told.append($0.map(\.id)) }
    map.store(Issue.make(6, title: "new", at: 6))
    map.store(Issue.make(1, title: "edited", at: 7))
    #expect(timeline.value.map(\.id) == [1, 6, 5, 4, 2])
    #expect(told.value.last == [1, 6, 5, 4, 2])
    subscription.cancel()
  }

  @Test func filteredAndIndexedQueriesLoadTheirMatchesOnly() throws {
    let directory = TemporaryDirectory()
    var map = try launch(directory.database)
    map.store((1...6).map { Issue.make($0, at: 1, userID: $0 % 2) })
    try map.flush()
    map = try launch(directory.database)
    let odd = map.query(Issue.self, filter: { $0.user.id == 1 }, sortedBy: { $0.id < $1.id })
    #expect(odd.value.map(\.id) == [1, 3, 5])
    let byTitle = map.query(Issue.self, where: \.title, equals: "Issue 2")
    #expect(byTitle.value.map(\.id) == [2])
    // The rows that matched no query were released once the query opened.
    withExtendedLifetime((odd, byTitle)) {
      #expect(map.statistics.entitiesByType["Issue"] == 4)
    }
  }

  /// The buckets of the index of `Issue`'s nodes that hold entries before it grows.
  private func indexCapacity(_ map: IdentityMap) -> Int {
    map._core.read { map._core.registry.table(for: Issue.self).slots.capacity }
  }

  /// A load that keeps what it reads makes room for the rest of the kind at its second write,
  /// once; one that keeps little, or finds the entities in memory, makes none.
  @Test func aLoadMakesRoomOnceAndOnlyForWhatItKeeps() throws {
    let directory = TemporaryDirectory()
    var map = try launch(directory.database)
    map.store((1...1_000).map { Issue.make($0, at: 1, userID: $0 % 100) })
    try map.flush()
    map = try launch(directory.database)
    // A filtered query admits all 1,000 rows, 128 to a write, and keeps 10.
    let few = map.query(Issue.self, filter: { $0.user.id == 7 })
    #expect(few.value.count == 10)
    #expect(indexCapacity(map) < 64, "room for 10 issues, with some to spare")
    // A query that keeps them all: the filter, called for each entity as the query opens
    // (the 10 in memory) and as each write admitting rows commits, reads the index's room.
    // The second write made room for the rows left before loading any, and the index never
    // grew again.
    let probe = map
    let rooms = Locked<[Int]>([])
    let all = map.query(
      Issue.self,
      filter: { _ in
        rooms.append(probe._core.registry.table(for: Issue.self).slots.capacity)
        return true
      })
    #expect(all.value.count == 1_000)
    let seen = rooms.value
    #expect(seen.count == 1_000)
    let secondWrite = 10 + _Prefetch.chunk
    #expect(
      seen[secondWrite...].allSatisfy { $0 == seen.last && $0 >= 1_000 },
      "\(Set(seen).sorted())")
    // Everything in memory: another query loads nothing, and makes no room.
    let before = indexCapacity(map)
    let again = map.query(Issue.self, filter: { $0.user.id == 3 })
    #expect(again.value.count == 10)
    #expect(indexCapacity(map) == before)
    map._core._checkInvariants()
    withExtendedLifetime((few, all, again)) {}
  }

  @Test func aCollectorReadsNothing() throws {
    let directory = TemporaryDirectory()
    var map = try launch(directory.database)
    map.store(Issue.make(1))
    try map.flush()
    map = try launch(directory.database)
    let collector = map.collector(Issue.self)
    #expect(map.count == 0)
    #expect(collector.drain().isEmpty)
  }

  @Test func writesNotYetInTheStoreCount() throws {
    let directory = TemporaryDirectory()
    let map = try launch(directory.database)
    map.store((1...3).map { Issue.make($0) })  // released at once, not yet written
    let listed = map.query(Issue.self, sortedBy: { $0.id < $1.id })
    #expect(listed.value.map(\.id) == [1, 2, 3])
  }

  @Test func aTransactionsSnapshotIncludesTheStoresEntities() throws {
    let directory = TemporaryDirectory()
    var map = try launch(directory.database)
    map.store((1...4).map { Issue.make($0, title: "cached \($0)", at: Double($0)) })
    try map.flush()
    map = try launch(directory.database)
    let count = map.transaction { transaction -> Int in
      transaction.store(Issue.make(5, at: 5))
      transaction.remove(Issue.self, id: 2)
      let open = transaction.entities(Issue.self, sortedBy: { $0.id < $1.id })
      #expect(open.map(\.id) == [1, 3, 4, 5], "the store's, less the removal, plus the write")
      return open.count
    }
    #expect(count == 4)
    #expect(map.count == 0, "what the snapshot loaded and nobody holds is released")
  }

  @Test func parentsIncludeAggregatesOnlyInTheStore() throws {
    let directory = TemporaryDirectory()
    var map = try launch(directory.database)
    map.store([Issue.make(1, userID: 7), Issue.make(2, userID: 8), Issue.make(3, userID: 7)])
    try map.flush()
    map = try launch(directory.database)
    let parents = map.parents(of: User.self, id: 7)
    #expect(
      Set(parents) == [EntityReference(Issue.self, id: 1), EntityReference(Issue.self, id: 3)])
    #expect(map.count == 0, "read, then released: nothing holds them")
  }

  /// A store that does not list its records: the query shows memory, and the failure is logged.
  final class PointStore: PersistentStore {
    let inner: SQLiteStore
    init(_ inner: SQLiteStore) { self.inner = inner }
    func encode<Value: Encodable>(_ value: Value) throws -> [UInt8] { try inner.encode(value) }
    func decode<Value: Decodable>(_ type: Value.Type, from bytes: [UInt8]) throws -> Value {
      try inner.decode(type, from: bytes)
    }
    func record(kind: String, key: [UInt8]) throws -> PersistentRecord? {
      try inner.record(kind: kind, key: key)
    }
    func aliasRecord(named name: String) throws -> PersistentRecord? {
      try inner.aliasRecord(named: name)
    }
    func apply(_ changes: [PersistentChange]) throws { try inner.apply(changes) }
  }

  @Test func aStoreThatDoesNotListItsRecordsIsLoggedAndReadPointwise() throws {
    let directory = TemporaryDirectory()
    let logger = RecordingLogger()
    let map = IdentityMap(
      logger: logger, persistence: PointStore(try SQLiteStore(path: directory.database)))
    map.persist(Issue.self)
    map.persist(User.self)
    map.persist(Label.self)
    map.persist(Milestone.self)
    let held = map.store(Issue.make(1))
    map.store(Issue.make(2))
    try map.flush()
    #expect(map.query(Issue.self).value.map(\.id) == [1])
    #expect(map.find(Issue.self, id: 2) != nil, "found one by one, as before")
    let failures = logger.events.filter { $0.kind == .persistenceFailed }
    #expect(failures.count == 1)
    #expect("\(failures)".contains("does not implement records(kind: \"Issue\")"))
    withExtendedLifetime(held) {}
  }
}
