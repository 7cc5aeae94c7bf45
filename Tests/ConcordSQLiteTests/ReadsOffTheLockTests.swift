import Concord
import ConcordSQLite
import ConcordTesting
import Dispatch
import Foundation
import TestSupport
import Testing

// Readers never wait on the disk: a `find` of a cold entity or of a persisted alias, a query or
// `parents(of:id:)` over persisted rows, a write of an entity only the store has, a resource or
// paged list made over a persisted answer, and a restore read the store and decode with no lock
// of the map held. Each test parks such a load inside the store, on a gate,
// and shows that another thread's `find` of an entity a handle holds, and its writes, complete
// meanwhile; then releases the load, and checks what it admitted against what was written in
// between: a newer write wins, a removal is not undone.

/// An entity of a type the map does not persist, which a screen holds.
private struct Author: Identifiable, Sendable, Equatable {
  var id: Int
  var name: String
}

/// A store whose reads park on a gate while `parks` is set: the first read after it is set
/// signals `parked`, then waits for `release`.
final class GatedStore: PersistentStore {
  let base: SQLiteStore
  let parks = Locked(false)
  let parked = DispatchSemaphore(value: 0)
  let release = DispatchSemaphore(value: 0)

  init(path: String) throws {
    base = try SQLiteStore(path: path)
  }

  /// Parks the calling thread if the gate is set, once.
  private func gate() {
    let parking = parks.withValue { parks -> Bool in
      defer { parks = false }
      return parks
    }
    guard parking else { return }
    parked.signal()
    release.wait()
  }

  func encode<Value: Encodable>(_ value: Value) throws -> [UInt8] { try base.encode(value) }

  func decode<Value: Decodable>(_ type: Value.Type, from bytes: [UInt8]) throws -> Value {
    try base.decode(type, from: bytes)
  }

  func record(kind: String, key: [UInt8]) throws -> PersistentRecord? {
    gate()
    return try base.record(kind: kind, key: key)
  }

  func aliasRecord(named name: String) throws -> PersistentRecord? {
    gate()
    return try base.aliasRecord(named: name)
  }

  func records(kind: String) throws -> [(key: [UInt8], record: PersistentRecord)] {
    gate()
    return try base.records(kind: kind)
  }

  func tombstones(kind: String) throws -> [(key: [UInt8], stamp: Stamp)] {
    try base.tombstones(kind: kind)
  }

  func apply(_ changes: [PersistentChange]) throws { try base.apply(changes) }
  func save(to path: String) throws { try base.save(to: path) }

  func restore(from path: String) throws {
    gate()
    try base.restore(from: path)
  }
}

@Suite("Readers never wait on the disk: loads read outside the map's lock")
struct ReadsOffTheLockTests {
  /// A map on `path` through a gated store, persisting the fixtures' types.
  static func launchGated(_ path: String) throws -> (IdentityMap, GatedStore) {
    let store = try GatedStore(path: path)
    return (launch(store), store)
  }

  /// A file holding notes n0…n`count`, stamped 10, and issues 1…`issues` by user 7.
  static func seed(_ path: String, notes count: Int = 50, issues: Int = 5) throws {
    let map = try launch(path)
    map.store((0..<count).map { Note(id: "n\($0)", text: "stored") }, modifiedAt: 10)
    map.store((1...issues).map { Issue.make($0, at: 10) })
    try map.flush()
  }

  /// Runs `load` on its own thread, waits until it parks in the store, runs `meanwhile`, then
  /// releases the load and waits for it to end. Fails, rather than hangs, if `meanwhile` waits
  /// for the load (the store would never be released). A load that reads nothing from the
  /// store (all it needs is in memory) just runs, then `meanwhile`.
  static func whileParked(
    _ store: GatedStore, _ load: @escaping @Sendable () -> Void,
    meanwhile: @escaping @Sendable () -> Void
  ) {
    let loaded = DispatchSemaphore(value: 0)
    let done = DispatchSemaphore(value: 0)
    store.parks.withValue { $0 = true }
    Thread.detachNewThread {
      load()
      // NB: a load that never parked wakes the test itself, and disarms the gate.
      let neverParked = store.parks.withValue { parks in
        defer { parks = false }
        return parks
      }
      if neverParked { store.parked.signal() }
      loaded.signal()
      if neverParked { store.release.wait() }
    }
    store.parked.wait()
    Thread.detachNewThread {
      meanwhile()
      done.signal()
    }
    // NB: a guard against a hang, not a measure: the thread waits for nothing but the lock.
    let finished = done.wait(timeout: .now() + 60) == .success
    #expect(finished, "the reader waited for the load parked in the store")
    store.release.signal()
    loaded.wait()
    if !finished { done.wait() }
  }

  @Test("A find of a held entity completes while a query over the store is parked mid-read")
  func aQueryParkedInTheStoreBlocksNoReader() throws {
    let directory = TemporaryDirectory()
    try Self.seed(directory.database)
    let (map, store) = try Self.launchGated(directory.database)
    let held = map.store(Author(id: 1, name: "held"))
    let query = Locked<EntityObserver<[Note]>?>(nil)
    Self.whileParked(
      store, { query.withValue { $0 = map.query(Note.self, sortedBy: { $0.id < $1.id }) } },
      meanwhile: {
        #expect(map.find(Author.self, id: 1)?.value.name == "held")
        // Writes meanwhile, of entities the query is loading: a newer one, a removal.
        map.store(Note(id: "n1", text: "written meanwhile"), modifiedAt: 20)
        map.remove(Note.self, id: "n2", tombstone: 30)
        map.store(Note(id: "n3", text: "older, refused"), modifiedAt: 5)
      })
    let notes = query.value!.value
    #expect(notes.count == 49, "every stored note but the one removed meanwhile")
    #expect(notes.first { $0.id == "n1" }?.text == "written meanwhile")
    #expect(!notes.contains { $0.id == "n2" }, "a removal meanwhile is not undone")
    #expect(notes.first { $0.id == "n3" }?.text == "stored")
    withExtendedLifetime(held) {}
  }

  @Test("A find of a held entity completes while a cold find is parked mid-read")
  func aColdFindParkedInTheStoreBlocksNoReader() throws {
    let directory = TemporaryDirectory()
    try Self.seed(directory.database)
    let (map, store) = try Self.launchGated(directory.database)
    let held = map.store(Author(id: 1, name: "held"))
    let found = Locked<EntityObserver<Issue>?>(nil)
    Self.whileParked(
      store, { found.withValue { $0 = map.find(Issue.self, id: 2) } },
      meanwhile: {
        #expect(map.find(Author.self, id: 1)?.value.name == "held")
        // The same issue, written meanwhile with a newer stamp: it wins over what was read.
        map.store(Issue.make(2, title: "newer, meanwhile", at: 20))
      })
    #expect(found.value?.value.title == "newer, meanwhile")
    withExtendedLifetime(held) {}
  }

  @Test("A write of an entity only the store has reads it outside the lock")
  func aWriteParkedInTheStoreBlocksNoReader() throws {
    let directory = TemporaryDirectory()
    try Self.seed(directory.database)
    let (map, store) = try Self.launchGated(directory.database)
    let held = map.store(Author(id: 1, name: "held"))
    Self.whileParked(
      store, { map.store(Note(id: "n4", text: "older, refused after the read"), modifiedAt: 5) },
      meanwhile: { #expect(map.find(Author.self, id: 1)?.value.name == "held") })
    #expect(map.find(Note.self, id: "n4")?.value.text == "stored", "compared with the store")
    withExtendedLifetime(held) {}
  }

  @Test(
    "An entity the write found in memory leaves it while the write reads another: it is still compared with the store"
  )
  func anEntityLeavesWhileTheWriteReads() throws {
    let directory = TemporaryDirectory()
    try Self.seed(directory.database)
    let (map, store) = try Self.launchGated(directory.database)
    let n1 = Locked<EntityObserver<Note>?>(map.find(Note.self, id: "n1"))
    #expect(n1.value?.value.text == "stored")
    Self.whileParked(
      store,
      {
        // NB: n1 is in memory when the write looks, n4 only in the store: the write reads n4
        // with no lock held, and parks there while n1 leaves memory.
        map.store(
          [Note(id: "n1", text: "older, refused"), Note(id: "n4", text: "older, refused")],
          modifiedAt: 5)
      },
      meanwhile: { n1.withValue { $0 = nil } })
    #expect(map.find(Note.self, id: "n1")?.value.text == "stored", "compared with the store")
    #expect(map.find(Note.self, id: "n4")?.value.text == "stored")
  }

  @Test("parents(of:id:) reads the store's aggregates outside the lock")
  func parentsParkedInTheStoreBlockNoReader() throws {
    let directory = TemporaryDirectory()
    try Self.seed(directory.database)
    let (map, store) = try Self.launchGated(directory.database)
    let held = map.store(Author(id: 1, name: "held"))
    let user = map.find(User.self, id: 7)
    let parents = Locked<[EntityReference]>([])
    Self.whileParked(
      store, { parents.withValue { $0 = map.parents(of: User.self, id: 7) } },
      meanwhile: { #expect(map.find(Author.self, id: 1)?.value.name == "held") })
    #expect(Set(parents.value) == Set((1...5).map { EntityReference(Issue.self, id: $0) }))
    withExtendedLifetime((held, user)) {}
  }

  @Test("A find of a persisted alias reads its record, and what it names, outside the lock")
  func anAliasParkedInTheStoreBlocksNoReader() throws {
    let directory = TemporaryDirectory()
    let inbox = AliasKey<[Issue]>("inbox")
    do {
      let map = try launch(directory.database)
      map.store([Issue.make(3, at: 10), Issue.make(1, at: 10)], named: inbox)
      try map.flush()
    }
    let (map, store) = try Self.launchGated(directory.database)
    let held = map.store(Author(id: 1, name: "held"))
    let found = Locked<EntityObserver<[Issue]?>?>(nil)
    // NB: the first read is the alias's record: read under the lock, it would park there.
    Self.whileParked(
      store, { found.withValue { $0 = map.find(named: inbox) } },
      meanwhile: {
        #expect(map.find(Author.self, id: 1)?.value.name == "held")
        // An issue the alias names, written meanwhile with a newer stamp: it wins.
        map.store(Issue.make(1, title: "newer, meanwhile", at: 20))
      })
    let value = try #require(found.value).value
    #expect(value?.map(\.id) == [3, 1], "the stored alias, in its order")
    #expect(value?.last?.title == "newer, meanwhile")
    withExtendedLifetime(held) {}
  }

  @Test("A resource made over a persisted answer reads it, and its entities, outside the lock")
  func aResourceParkedInTheStoreBlocksNoReader() async throws {
    let directory = TemporaryDirectory()
    let key = ResourceKey<[Issue]>("repos/apple/swift/issues")
    let clock = ManualClock(now: Date(timeIntervalSince1970: 1_000))
    do {
      let map = try launch(directory.database, clock: clock)
      let inbox = map.resource(key, staleAfter: .seconds(60)) { [Issue.make(3), Issue.make(1)] }
      try await inbox.load()
      try map.flush()
    }
    let store = try GatedStore(path: directory.database)
    let map = launch(store, clock: clock)
    let held = map.store(Author(id: 1, name: "held"))
    let made = Locked<Resource<[Issue]>?>(nil)
    Self.whileParked(
      store,
      {
        made.withValue {
          $0 = map.resource(key, staleAfter: .seconds(60)) {
            throw URLError(.notConnectedToInternet)
          }
        }
      },
      meanwhile: {
        #expect(map.find(Author.self, id: 1)?.value.name == "held")
        // An issue of the answer, written meanwhile with a newer stamp: it wins over the read.
        map.store(Issue.make(1, title: "newer, meanwhile", at: 20))
      })
    let state = try #require(made.value).state
    #expect(state.value?.map(\.id) == [3, 1], "the stored answer, in its order")
    #expect(state.value?.last?.title == "newer, meanwhile")
    #expect(state.fetchedAt == Date(timeIntervalSince1970: 1_000))
    withExtendedLifetime(held) {}
  }

  @Test("A restore reads the snapshot outside the lock, and is one write")
  func aRestoreParkedInTheStoreBlocksNoReader() throws {
    let directory = TemporaryDirectory()
    try Self.seed(directory.database)
    let (map, store) = try Self.launchGated(directory.database)
    let slot = directory.path + "/slot.sqlite"
    let note = map.find(Note.self, id: "n0")!
    try map.save(to: slot)
    map.store(Note(id: "n0", text: "played"), modifiedAt: 20)
    let told = Locked<[String]>([])
    let subscription = note.observe { told.append($0.text) }
    let held = map.store(Author(id: 1, name: "held"))
    Self.whileParked(
      store, { #expect(throws: Never.self) { try map.restore(from: slot) } },
      meanwhile: { #expect(map.find(Author.self, id: 1)?.value.name == "held") })
    #expect(note.value.text == "stored")
    #expect(told.value == ["stored"], "told once")
    withExtendedLifetime((held, subscription)) {}
  }
}
