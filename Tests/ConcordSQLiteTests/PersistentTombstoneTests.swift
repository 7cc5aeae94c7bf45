import Concord
import ConcordSQLite
import Foundation
import Testing

// Tombstones of persisted types live in the store, as records with no payload: a restarted
// app still refuses the replayed `update` of a status deleted before it quit. The seeded
// model-based tests (`PersistenceModelTests`, `PersistenceUnappliedTests`) check the same over
// random writes, restarts, failing stores and resets.

@Suite("Persistence: tombstones survive restarts")
struct PersistentTombstoneTests {
  func launch(_ path: String, tombstones: TombstonePolicy = .default) throws -> IdentityMap {
    let map = IdentityMap(persistence: try SQLiteStore(path: path), tombstones: tombstones)
    map.persist(User.self)
    map.persist(Issue.self)
    return map
  }

  @Test func aTombstoneRefusesTheReplayedWriteAfterARestart() throws {
    let directory = TemporaryDirectory()
    var map = try launch(directory.database)
    map.store(User(id: 1, login: "ged", updatedAt: 5))
    map.remove(User.self, id: 1)
    try map.flush()
    let store = try SQLiteStore(path: directory.database)
    #expect(try store.rowCount(kind: "User") == 0)
    #expect(try store.tombstoneCount(kind: "User") == 1)

    map = try launch(directory.database)
    #expect(map.find(User.self, id: 1) == nil, "a tombstone is no entity")
    #expect(map.store(User(id: 1, login: "replayed", updatedAt: 5)).isRemoved)
    #expect(map.find(User.self, id: 1) == nil)
    // Newer: stored again, and its tombstone is gone from the store too.
    #expect(map.store(User(id: 1, login: "back", updatedAt: 6)).value.login == "back")
    try map.flush()
    #expect(try store.tombstoneCount() == 0)
    #expect(try store.rowCount(kind: "User") == 1)
  }

  @Test func resetAndRemoveAllForgetTheStoredTombstones() throws {
    let directory = TemporaryDirectory()
    let map = try launch(directory.database)
    let store = try SQLiteStore(path: directory.database)
    map.store(User(id: 1, login: "ged", updatedAt: 5))
    map.store(User(id: 2, login: "tenar", updatedAt: 5))
    map.remove(User.self, id: 1)
    try map.flush()
    #expect(try store.tombstoneCount() == 1)
    map.removeAll()
    try map.flush()
    #expect(try store.tombstoneCount() == 0 && store.rowCount() == 0)
    map.store(User(id: 1, login: "ged", updatedAt: 5))
    map.remove(User.self, id: 1)
    try map.reset()
    #expect(try store.tombstoneCount() == 0)
    #expect(map.store(User(id: 1, login: "again", updatedAt: 5)).value.login == "again")
  }

  @Test func theLimitDeletesTheOldestStoredTombstones() throws {
    let directory = TemporaryDirectory()
    var map = try launch(directory.database, tombstones: .keepNewest(2))
    for id in 1...4 {
      map.store(User(id: id, login: "u\(id)", updatedAt: 5))
      map.remove(User.self, id: id)
    }
    try map.flush()
    let store = try SQLiteStore(path: directory.database)
    #expect(try store.tombstoneCount() == 2)
    map = try launch(directory.database, tombstones: .keepNewest(2))
    #expect(!map.store(User(id: 2, login: "forgotten", updatedAt: 5)).isRemoved)
    #expect(map.store(User(id: 4, login: "replayed", updatedAt: 5)).isRemoved)
  }

  @Test func theLimitHoldsAcrossLaunches() throws {
    let directory = TemporaryDirectory()
    var map = try launch(directory.database, tombstones: .keepNewest(3))
    for id in 1...3 {
      map.store(User(id: id, login: "u\(id)", updatedAt: Double(id)))
      map.remove(User.self, id: id)
    }
    try map.flush()
    // The next launch reads the file's tombstones, and the newest three are what stays.
    map = try launch(directory.database, tombstones: .keepNewest(3))
    for id in 4...5 {
      map.store(User(id: id, login: "u\(id)", updatedAt: Double(id)))
      map.remove(User.self, id: id)
    }
    try map.flush()
    #expect(try SQLiteStore(path: directory.database).tombstoneCount() == 3)
    map = try launch(directory.database, tombstones: .keepNewest(3))
    #expect(!map.store(User(id: 2, login: "forgotten", updatedAt: 2)).isRemoved)
    #expect(map.store(User(id: 3, login: "replayed", updatedAt: 3)).isRemoved)
    #expect(map.store(User(id: 5, login: "replayed", updatedAt: 5)).isRemoved)
  }

  @Test func anIssueRemovedWithItsUserWhileNotInMemoryLeavesATombstone() throws {
    let directory = TemporaryDirectory()
    var map = try launch(directory.database)
    map.store(
      Issue(id: 7, title: "T", updatedAt: 10, user: .stub(1), labels: [], milestone: nil))
    try map.flush()
    map = try launch(directory.database)
    // Only the user is in memory: the removal takes the issue when it is next read.
    map.store(User(id: 1, login: "user1", updatedAt: 3))
    map.remove(User.self, id: 1)
    #expect(map.find(Issue.self, id: 7) == nil)
    let replayed = map.store(
      Issue(id: 7, title: "replayed", updatedAt: 10, user: .stub(2), labels: [], milestone: nil))
    #expect(replayed.isRemoved)
    try map.flush()
    #expect(try SQLiteStore(path: directory.database).tombstoneCount(kind: "Issue") == 1)
  }
}
