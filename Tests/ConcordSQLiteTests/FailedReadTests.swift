import Concord
import ConcordSQLite
import ConcordTesting
import Foundation
import TestSupport
import Testing

// A failed store read is not an absent entity. When the store cannot read an entity that a write
// must compare with, that entity's write is refused and logged (naming the entity and the
// store's error), so is the write of whatever nests it, the record is untouched, and the next
// write reads again. Each test below stores a newer record, relaunches so that it is only in the
// file, makes the store fail to read it, then tries one path with an older value: afterwards,
// the file still holds the newer record.

/// An `SQLiteStore` whose reads of the kinds in `failingKinds`, and of the aliases in
/// `failingAliases`, throw while they are listed.
final class ReadFailingStore: PersistentStore {
  struct ReadFailure: Error, CustomStringConvertible {
    var description: String { "disk I/O error (injected)" }
  }

  let base: SQLiteStore
  let failingKinds = Locked<Set<String>>([])
  let failingAliases = Locked<Set<String>>([])

  init(path: String) throws {
    base = try SQLiteStore(path: path)
  }

  private func check(kind: String) throws {
    if failingKinds.value.contains(kind) { throw ReadFailure() }
  }

  func encode<Value: Encodable>(_ value: Value) throws -> [UInt8] { try base.encode(value) }

  func decode<Value: Decodable>(_ type: Value.Type, from bytes: [UInt8]) throws -> Value {
    try base.decode(type, from: bytes)
  }

  func record(kind: String, key: [UInt8]) throws -> PersistentRecord? {
    try check(kind: kind)
    return try base.record(kind: kind, key: key)
  }

  func aliasRecord(named name: String) throws -> PersistentRecord? {
    if failingAliases.value.contains(name) { throw ReadFailure() }
    return try base.aliasRecord(named: name)
  }

  func records(kind: String) throws -> [(key: [UInt8], record: PersistentRecord)] {
    try check(kind: kind)
    return try base.records(kind: kind)
  }

  func tombstones(kind: String) throws -> [(key: [UInt8], stamp: Stamp)] {
    try base.tombstones(kind: kind)
  }

  func apply(_ changes: [PersistentChange]) throws { try base.apply(changes) }
  func save(to path: String) throws { try base.save(to: path) }
  func restore(from path: String) throws { try base.restore(from: path) }
}

extension AliasKey where Value == User {
  fileprivate static var me: Self { .init("me") }
}

@Suite("A failed read is not an absent entity: nothing newer is lost, on any path")
struct FailedReadTests {
  /// A file whose users 7 and 8 are "newer" (stamp 20), whose issue 1 nests user 7 (stamp 20),
  /// whose alias "me" names user 7 (stamp 20), and whose note "n" is "newer" (stamp 20); then a
  /// map on it with nothing in memory, on a store whose reads fail on demand.
  static func launchOnNewerFile(_ directory: TemporaryDirectory, logger: RecordingLogger)
    throws -> (IdentityMap, ReadFailingStore)
  {
    do {
      let map = try launch(directory.database)
      let user = User(id: 7, login: "ged", name: "newer", updatedAt: 20)
      map.store(user, named: .me, modifiedAt: 20)
      map.store(User(id: 8, login: "ogion", name: "newer", updatedAt: 20))
      map.store(Issue(id: 1, title: "newer", updatedAt: 20, user: user, labels: []))
      map.store(Note(id: "n", text: "newer"), modifiedAt: 20)
      try map.flush()
    }
    let store = try ReadFailingStore(path: directory.database)
    return (launch(store, logger: logger), store)
  }

  /// What a fresh launch on the file finds.
  static func relaunched(_ directory: TemporaryDirectory) throws -> IdentityMap {
    try launch(directory.database)
  }

  /// The older user 7, stamped 10, as a page would nest it.
  static let olderUser = User(id: 7, login: "ged", name: "older", updatedAt: 10)

  /// Whether `logger` saw the failed read of `reference`, naming the store's error.
  static func loggedFailedRead(_ logger: RecordingLogger, _ reference: EntityReference) -> Bool {
    logger.events.contains {
      $0.kind == .persistenceFailed && $0.entity == reference
        && $0.message?.contains("disk I/O error (injected)") == true
    }
  }

  @Test("store: the older write is refused and logged; the next write reads again")
  func aStoreIsRefused() throws {
    let directory = TemporaryDirectory()
    let logger = RecordingLogger()
    let (map, store) = try Self.launchOnNewerFile(directory, logger: logger)
    store.failingKinds.withValue { $0 = ["Note"] }
    let refused = map.store(Note(id: "n", text: "older"), modifiedAt: 10)
    #expect(refused.isRemoved, "the write was refused")
    #expect(Self.loggedFailedRead(logger, EntityReference(Note.self, id: "n")))
    #expect(map.find(Note.self, id: "n") == nil, "a find whose read fails finds nothing")
    try map.flush()
    #expect(try Self.relaunched(directory).find(Note.self, id: "n")?.value.text == "newer")
    // The store reads again: the next write compares with the record, and is refused as stale.
    store.failingKinds.withValue { $0 = [] }
    logger.clear()
    map.store(Note(id: "n", text: "older"), modifiedAt: 10)
    #expect(logger.staleWrites.map(\.stored) == [20])
    let newest = map.store(Note(id: "n", text: "newest"), modifiedAt: 30)
    #expect(newest.value.text == "newest")
    try map.flush()
    #expect(try Self.relaunched(directory).find(Note.self, id: "n")?.value.text == "newest")
  }

  @Test("A batch: the unreadable entity is refused, the others are written")
  func aBatchKeepsTheOthers() throws {
    let directory = TemporaryDirectory()
    let logger = RecordingLogger()
    let (map, store) = try Self.launchOnNewerFile(directory, logger: logger)
    store.failingKinds.withValue { $0 = ["Note"] }
    // NB: "m" is not in the file, but its read fails too: it is refused as well.
    let page = map.store(
      [Note(id: "n", text: "older"), Note(id: "m", text: "new")], modifiedAt: 10)
    #expect(page.value.isEmpty)
    store.failingKinds.withValue { $0 = [] }
    let second = map.store(
      [Note(id: "n", text: "older"), Note(id: "m", text: "new")], modifiedAt: 10)
    #expect(second.value.map(\.text) == ["newer", "new"], "n's stored record wins by its stamp")
    try map.flush()
    let relaunched = try Self.relaunched(directory)
    #expect(relaunched.find(Note.self, id: "n")?.value.text == "newer")
    #expect(relaunched.find(Note.self, id: "m")?.value.text == "new")
  }

  @Test("An aggregate nesting it is refused too; its other entities are written")
  func anAggregateNestingItIsRefused() throws {
    let directory = TemporaryDirectory()
    let logger = RecordingLogger()
    let (map, store) = try Self.launchOnNewerFile(directory, logger: logger)
    store.failingKinds.withValue { $0 = ["User"] }
    let label = Label(id: 3, name: "bug")
    let issue = map.store(
      Issue(id: 2, title: "new issue", updatedAt: 30, user: Self.olderUser, labels: [label]))
    #expect(issue.isRemoved, "written without its user, the issue would lose it")
    #expect(Self.loggedFailedRead(logger, EntityReference(User.self, id: 7)))
    #expect(map.find(Label.self, id: 3)?.value == label, "the label is written on its own")
    // Loading an aggregate whose nested entity cannot be read fails too: shown without it, it
    // would be written without it.
    #expect(map.find(Issue.self, id: 1) == nil)
    store.failingKinds.withValue { $0 = [] }
    #expect(map.find(Issue.self, id: 1)?.value.user.name == "newer")
    try map.flush()
    let relaunched = try Self.relaunched(directory)
    #expect(relaunched.find(User.self, id: 7)?.value.name == "newer")
    #expect(relaunched.find(Issue.self, id: 2) == nil)
    #expect(relaunched.find(Issue.self, id: 1)?.value.user.name == "newer")
    #expect(relaunched.find(Label.self, id: 3)?.value == label)
  }

  @Test("update: of an unreadable entity returns false; one whose result nests one is refused")
  func anUpdateIsRefused() throws {
    let directory = TemporaryDirectory()
    let logger = RecordingLogger()
    let (map, store) = try Self.launchOnNewerFile(directory, logger: logger)
    store.failingKinds.withValue { $0 = ["Issue"] }
    let updated = map.update(Issue.self, id: 1, modifiedAt: 30) { $0.title = "updated blind" }
    #expect(!updated, "nothing is known to update")
    store.failingKinds.withValue { $0 = [] }
    let issue = map.find(Issue.self, id: 1)!
    #expect(issue.value.title == "newer")
    // In memory now; its new value nests user 8, whom the store cannot read.
    store.failingKinds.withValue { $0 = ["User"] }
    let older8 = User(id: 8, login: "ogion", name: "older", updatedAt: 10)
    #expect(
      map.update(Issue.self, id: 1, modifiedAt: 40) {
        $0.user = older8
        $0.title = "nesting an unreadable user"
      })
    #expect(issue.value.title == "newer", "the update is refused whole")
    #expect(issue.value.user.id == 7)
    #expect(Self.loggedFailedRead(logger, EntityReference(User.self, id: 8)))
    store.failingKinds.withValue { $0 = [] }
    try map.flush()
    let relaunched = try Self.relaunched(directory)
    #expect(relaunched.find(User.self, id: 8)?.value.name == "newer")
    #expect(relaunched.find(Issue.self, id: 1)?.value.title == "newer")
  }

  @Test("An alias: refused when its record is unreadable, or when it names an unreadable entity")
  func anAliasIsRefused() throws {
    let directory = TemporaryDirectory()
    let logger = RecordingLogger()
    let (map, store) = try Self.launchOnNewerFile(directory, logger: logger)
    store.failingAliases.withValue { $0 = ["me"] }
    let older8 = User(id: 8, login: "ogion", name: "older", updatedAt: 10)
    let me = map.store(older8, named: .me, modifiedAt: 10)
    #expect(me.value == nil, "its record could not be read: the slot is left as it is")
    #expect(
      logger.events.contains {
        $0.kind == .persistenceFailed && $0.message?.contains("alias \"me\"") == true
      })
    #expect(map.find(User.self, id: 8)?.value.name == "newer", "the user is compared on its own")
    store.failingAliases.withValue { $0 = [] }
    store.failingKinds.withValue { $0 = ["User"] }
    logger.clear()
    map.store(User(id: 9, login: "new", name: nil, updatedAt: 30), named: .me, modifiedAt: 30)
    #expect(
      Self.loggedFailedRead(logger, EntityReference(User.self, id: 7)),
      "the alias names user 7, whom the store cannot read: its slot is not read either")
    store.failingKinds.withValue { $0 = [] }
    try map.flush()
    let relaunched = try Self.relaunched(directory)
    #expect(relaunched.find(named: .me).value?.name == "newer")
    #expect(relaunched.find(User.self, id: 7)?.value.name == "newer")
  }

  @Test("In a transaction, and in an optimistic layer's writes, committed")
  func transactionsAndLayersAreRefusedToo() throws {
    let directory = TemporaryDirectory()
    let logger = RecordingLogger()
    let (map, store) = try Self.launchOnNewerFile(directory, logger: logger)
    store.failingKinds.withValue { $0 = ["Note"] }
    map.transaction { transaction in
      #expect(
        transaction.store(Note(id: "n", text: "older, in a transaction"), modifiedAt: 10).isRemoved)
      transaction.store(User(id: 9, login: "kept", name: nil, updatedAt: 10))
    }
    let layer = map.optimistic {
      $0.store(Note(id: "n", text: "older, in a layer"), modifiedAt: 11)
    }
    #expect(map.find(Note.self, id: "n") == nil)
    layer.commit()
    store.failingKinds.withValue { $0 = [] }
    try map.flush()
    let relaunched = try Self.relaunched(directory)
    #expect(relaunched.find(Note.self, id: "n")?.value.text == "newer")
    #expect(relaunched.find(User.self, id: 9)?.value.login == "kept", "the other write is kept")
  }

  @Test("restore: an entity whose snapshot record cannot be read is kept as it is, not removed")
  func aRestoreKeepsWhatItCannotRead() throws {
    let directory = TemporaryDirectory()
    let logger = RecordingLogger()
    let (map, store) = try Self.launchOnNewerFile(directory, logger: logger)
    let slot = directory.path + "/slot.sqlite"
    let note = map.find(Note.self, id: "n")!
    try map.save(to: slot)
    map.store(Note(id: "n", text: "played"), modifiedAt: 30)
    let removals = Locked(0)
    let subscription = note.observeRemoval { _ in removals.increment() }
    store.failingKinds.withValue { $0 = ["Note"] }
    try map.restore(from: slot)
    #expect(!note.isRemoved && removals.value == 0, "the snapshot has it: it is not removed")
    #expect(Self.loggedFailedRead(logger, EntityReference(Note.self, id: "n")))
    store.failingKinds.withValue { $0 = [] }
    try map.flush()
    #expect(try Self.relaunched(directory).find(Note.self, id: "n")?.value.text == "newer")
    withExtendedLifetime(subscription) {}
  }
}
