import Concord
import ConcordTesting
import Foundation
import Testing

@testable import ConcordSQLite

#if canImport(SQLite3)
  import SQLite3
#else
  import CSQLite
#endif

// One store, several processes: two stores on one file in one process are two processes to
// each other, so these tests run most of the sharing rules cheaply and deterministically. Each
// map's automatic sync is turned off (`watching: false`), so that a commit reaches the other map
// exactly when the test calls `syncExternalChanges()`; `SharingProcessTests` runs real
// processes, woken by the file watch.

/// A book, stamped when it has a version: the JSON `ConcordSharingHelper` writes.
struct SharedBook: Identifiable, Codable, Sendable, Equatable, Stamped {
  var id: String
  var title: String
  var version: Double?

  var stamp: Stamp? { version }

  init(_ id: String, _ title: String, _ version: Double? = nil) {
    self.id = id
    self.title = title
    self.version = version
  }
}

/// One side of a shared file: a map, its store and its logger.
struct Side {
  let map: IdentityMap
  let store: SQLiteStore
  let logger: RecordingLogger

  /// Opens `path` as `sharing` says, persisting books (as "Book"), notes and, with `labels`,
  /// labels; `watching: false` stops the automatic sync.
  init(
    _ path: String, _ sharing: SQLiteStore.Sharing = .shared, watching: Bool = false,
    labels: Bool = false, tombstones: TombstonePolicy = .default, hook: ReadHook? = nil
  ) throws {
    let store = try SQLiteStore(path: path, sharing: sharing)
    let persistence: any PersistentStore = hook.map { HookedStore(store, hook: $0) } ?? store
    self.store = store
    logger = RecordingLogger()
    map = IdentityMap(logger: logger, persistence: persistence, tombstones: tombstones)
    map.persist(SharedBook.self, as: "Book")
    map.persist(Note.self)
    if labels { map.persist(Label.self) }
    if !watching { store.observeExternalChanges(nil) }
  }

  func book(_ id: String) -> SharedBook? { map.find(SharedBook.self, id: id)?.value }
}

/// Waits, up to ten seconds, until `object` returns `nil`: a map's background writer may hold
/// its store a moment after the map is gone.
func waitUntilReleased(_ object: () -> AnyObject?) throws {
  let deadline = ContinuousClock.now + .seconds(10)
  while object() != nil {
    guard ContinuousClock.now < deadline else { throw HelperTimeout(waitingFor: "a release") }
    usleep(1_000)
  }
}

/// A wait that timed out: a hang guard.
struct HelperTimeout: Error, CustomStringConvertible {
  let waitingFor: String
  var description: String { "timed out waiting for \(waitingFor)" }
}

/// How many entries the change log of the database at `path` holds.
func changeLogCount(_ path: String) -> Int {
  Int(pragmaQuery("SELECT count(*) FROM concord_changes", at: path) ?? "-1") ?? -1
}

/// The first column of the first row `sql` returns from the database at `path`, read-only.
func pragmaQuery(_ sql: String, at path: String) -> String? {
  var handle: OpaquePointer?
  var statement: OpaquePointer?
  defer {
    sqlite3_finalize(statement)
    sqlite3_close(handle)
  }
  guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READONLY, nil) == SQLITE_OK,
    sqlite3_busy_timeout(handle, 5_000) == SQLITE_OK,
    sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK,
    sqlite3_step(statement) == SQLITE_ROW
  else { return nil }
  return sqlite3_column_text(statement, 0).map { String(cString: $0) }
}

@Suite("Sharing: two stores on one file are two processes to each other")
struct SharingTests {
  @Test("A commit reaches the other map's handles, queries and aliases, after a sync")
  func commitsReachTheOtherMap() throws {
    let directory = TemporaryDirectory()
    let app = try Side(directory.database)
    let widget = try Side(directory.database)
    let first = app.map.store(SharedBook("dune", "Dune", 1))
    try app.map.flush()

    let dune = try #require(widget.map.find(SharedBook.self, id: "dune"))
    let books = widget.map.query(SharedBook.self)
    let current = widget.map.find(named: AliasKey<SharedBook>("current"))
    let duneValues = ObservationRecorder(dune)
    let bookCounts = ObservationRecorder(books)
    let currentValues = ObservationRecorder(current)
    #expect(books.value.map(\.id) == ["dune"])

    app.map.store(SharedBook("dune", "Dune (revised)", 2))
    app.map.store(SharedBook("emma", "Emma", 1))
    app.map.store(SharedBook("emma", "Emma", 1), named: AliasKey("current"))
    try app.map.flush()
    #expect(dune.value.title == "Dune", "nothing reaches the widget before it syncs")

    try widget.map.syncExternalChanges()
    #expect(dune.value == SharedBook("dune", "Dune (revised)", 2))
    #expect(books.value.map(\.id).sorted() == ["dune", "emma"], "a new book reaches the query")
    #expect(current.value?.id == "emma")
    #expect(duneValues.values.map(\.title) == ["Dune (revised)"], "told once")
    // NB: the app's writer may gather its three writes in one transaction, applied as one.
    #expect(bookCounts.values.last?.count == 2 && bookCounts.count <= 2)
    #expect(currentValues.count == 1)
    try widget.map.syncExternalChanges()
    #expect(duneValues.count == 1, "a sync with nothing new tells nothing")
    withExtendedLifetime(first) {}
  }

  @Test("Each of another process's commits is one write: a transaction tells a query once")
  func aCommitIsOneWrite() throws {
    let directory = TemporaryDirectory()
    let app = try Side(directory.database)
    let widget = try Side(directory.database)
    let books = widget.map.query(SharedBook.self)
    let counts = ObservationRecorder(books)
    app.map.transaction { transaction in
      for index in 0..<3 { transaction.store(SharedBook("b\(index)", "Book \(index)")) }
    }
    try app.map.flush()
    try widget.map.syncExternalChanges()
    #expect(counts.values.map(\.count) == [3])
  }

  @Test(
    "Every version of a book reaches a watching map, in order, though one transaction wrote them")
  func everyVersionInOrder() throws {
    let directory = TemporaryDirectory()
    let app = try Side(directory.database)
    let widget = try Side(directory.database)
    let handle = app.map.store(SharedBook("dune", "v0", 0))
    try app.map.flush()
    let watched = try #require(widget.map.find(SharedBook.self, id: "dune"))
    let seen = ObservationRecorder(watched)
    for version in 1...50 { app.map.store(SharedBook("dune", "v\(version)", Double(version))) }
    try app.map.flush()
    try widget.map.syncExternalChanges()
    #expect(seen.values.compactMap(\.version) == (1...50).map(Double.init))
    withExtendedLifetime(handle) {}
  }

  @Test("Applying another process's commits never writes them back")
  func appliedCommitsAreNotWrittenBack() throws {
    let directory = TemporaryDirectory()
    let app = try Side(directory.database)
    let widget = try Side(directory.database)
    let held = widget.map.store(SharedBook("dune", "Dune", 1))
    try widget.map.flush()
    try app.map.syncExternalChanges()
    app.map.store(SharedBook("dune", "Dune (revised)", 2))
    app.map.remove(Note.self, id: "none")
    try app.map.flush()
    let entries = changeLogCount(directory.database)
    try widget.map.syncExternalChanges()
    try widget.map.flush()
    #expect(held.value.title == "Dune (revised)")
    #expect(changeLogCount(directory.database) == entries, "the widget wrote nothing")
  }

  @Test("A removal in another process leaves here the tombstone the file has")
  func removalsLeaveTheFilesTombstone() throws {
    let directory = TemporaryDirectory()
    let app = try Side(directory.database)
    let widget = try Side(directory.database)
    app.map.store(SharedBook("dune", "Dune", 3))
    try app.map.flush()
    let held = try #require(widget.map.find(SharedBook.self, id: "dune"))
    app.map.remove(SharedBook.self, id: "dune", tombstone: 10)
    try app.map.flush()
    try widget.map.syncExternalChanges()
    #expect(held.isRemoved)
    #expect(widget.logger.events.contains(.removed(EntityReference(SharedBook.self, id: "dune"))))
    widget.map.store(SharedBook("dune", "Dune (older)", 9))
    #expect(widget.book("dune") == nil, "refused by the tombstone, stamped 10")
    widget.map.store(SharedBook("dune", "Dune (newer)", 11))
    #expect(widget.book("dune")?.title == "Dune (newer)")
  }

  @Test("An older stamp never replaces a newer row: the writer takes the newer one at its sync")
  func olderStampsNeverReplaceNewerRows() throws {
    let directory = TemporaryDirectory()
    let app = try Side(directory.database)
    let widget = try Side(directory.database)
    let held = widget.map.store(SharedBook("dune", "Dune", 3))
    try widget.map.flush()
    try app.map.syncExternalChanges()
    app.map.store(SharedBook("dune", "Dune (5)", 5))
    try app.map.flush()
    // The widget has not synced: its write, stamped 4, is newer than what it holds.
    widget.map.store(SharedBook("dune", "Dune (4)", 4))
    try widget.map.flush()
    let stored = try #require(try app.store.record(kind: "Book", key: app.store.encode("dune")))
    #expect(stored.stamp == 5, "the file keeps the newer row")
    try widget.map.syncExternalChanges()
    #expect(held.value.title == "Dune (5)")
    #expect(
      widget.logger.staleWrites.contains {
        $0.target == .entity(EntityReference(SharedBook.self, id: "dune")) && $0.stored == 5
          && $0.incoming == 4
      }, "the refused write is logged as stale")
    try app.map.syncExternalChanges()
    #expect(app.book("dune")?.title == "Dune (5)")
  }

  @Test(
    "A write the file has not taken yet comes after what a sync reads: stamps decide, or it wins")
  func pendingWritesComeLater() throws {
    let directory = TemporaryDirectory()
    let app = try Side(directory.database)
    let hook = ReadHook()
    let widget = try Side(directory.database, hook: hook)
    let held = widget.map.store(SharedBook("dune", "Dune", 3))
    let note = widget.map.store(Note(id: "n", text: "widget's"))
    try widget.map.flush()
    app.map.store(SharedBook("dune", "Dune (7)", 7))
    app.map.store(Note(id: "n", text: "app's"))
    try app.map.flush()
    // The widget writes while its sync reads the file: its writes reach the file after.
    hook.body = {
      widget.map.store(SharedBook("dune", "Dune (5)", 5))
      widget.map.store(Note(id: "n", text: "widget's, later"))
    }
    try widget.map.syncExternalChanges()
    #expect(held.value.title == "Dune (7)", "a newer stamp wins, pending write or not")
    #expect(note.value.text == "widget's, later", "unstamped, the last to reach the file wins")
    try widget.map.flush()
    try app.map.syncExternalChanges()
    #expect(app.book("dune")?.title == "Dune (7)")
    #expect(app.map.find(Note.self, id: "n")?.value.text == "widget's, later")
    try widget.map.syncExternalChanges()
    #expect(held.value.title == "Dune (7)")
    #expect(widget.logger.staleWrites.contains { $0.stored == 7 && $0.incoming == 5 })
  }
}

@Suite("Sharing: read-only stores, locks and bad input")
struct SharingRulesTests {
  @Test("A read-only store never writes: its writes stay in memory, logged, and flush throws once")
  func readOnlyStoresNeverWrite() throws {
    let directory = TemporaryDirectory()
    let app = try Side(directory.database)
    app.map.store(SharedBook("dune", "Dune", 1))
    try app.map.flush()
    let widget = try Side(directory.database, .readOnly)
    let before = try Data(contentsOf: URL(fileURLWithPath: directory.database))
    let wal = FileManager.default.contents(atPath: directory.database + "-wal")
    let entries = changeLogCount(directory.database)

    let local = widget.map.store(SharedBook("emma", "Emma", 1))
    var changed: EntityObserver<SharedBook>? = widget.map.store(
      SharedBook("dune", "Dune (widget)", 2))
    widget.map.store(SharedBook("emma", "Emma", 1), named: AliasKey("current"))
    #expect(local.value.title == "Emma", "kept in memory")
    #expect(changed?.value.title == "Dune (widget)")
    let refused = widget.logger.events.filter { $0.kind == .notPersisted }
    #expect(
      refused.map(\.target) == [
        .entity(EntityReference(SharedBook.self, id: "emma")),
        .entity(EntityReference(SharedBook.self, id: "dune")), .alias("current"),
      ])
    #expect(refused.first?.description.contains("in memory only") == true)
    let error = #expect(throws: SQLiteStore.Error.self) { try widget.map.flush() }
    #expect(error?.kind == .readOnly)
    #expect(throws: Never.self) { try widget.map.flush() }  // once per flush
    widget.map.remove(SharedBook.self, id: "dune")
    #expect(throws: SQLiteStore.Error.self) { try widget.map.flush() }

    // Released, a write that stayed in memory is gone; the file's value comes back.
    changed = nil
    #expect(widget.book("dune")?.title == "Dune")
    withExtendedLifetime(local) {}
    // The file is as it was, byte for byte, and the app sees nothing of the widget's writes.
    #expect(try Data(contentsOf: URL(fileURLWithPath: directory.database)) == before)
    #expect(FileManager.default.contents(atPath: directory.database + "-wal") == wal)
    #expect(changeLogCount(directory.database) == entries)
    try app.map.syncExternalChanges()
    #expect(app.book("emma") == nil)
    // It reads what others commit.
    let dune = try #require(widget.map.find(SharedBook.self, id: "dune"))
    app.map.store(SharedBook("dune", "Dune (3)", 3))
    try app.map.flush()
    try widget.map.syncExternalChanges()
    #expect(dune.value.title == "Dune (3)")
  }

  @Test("A read-only open of a missing file throws missingFile, and makes nothing")
  func readOnlyMissingFile() throws {
    let directory = TemporaryDirectory()
    let error = #expect(throws: SQLiteStore.Error.self) {
      try SQLiteStore(path: directory.database, sharing: .readOnly)
    }
    #expect(error?.kind == .missingFile)
    #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
  }

  @Test("Exclusive against shared or read-only, either way round, is lockedByAnotherProcess")
  func exclusiveAgainstShared() throws {
    let directory = TemporaryDirectory()
    let path = directory.database
    do {
      let exclusive = try SQLiteStore(path: path)
      let alsoExclusive = try SQLiteStore(path: path, sharing: .exclusive)
      for sharing in [SQLiteStore.Sharing.shared, .readOnly] {
        let error = #expect(throws: SQLiteStore.Error.self) {
          try SQLiteStore(path: path, sharing: sharing)
        }
        #expect(error?.kind == .lockedByAnotherProcess)
        #expect(error?.message.contains("exclusive") == true)
      }
      withExtendedLifetime((exclusive, alsoExclusive)) {}
    }
    do {
      let shared = try SQLiteStore(path: path, sharing: .shared)
      let reader = try SQLiteStore(path: path, sharing: .readOnly)
      let error = #expect(throws: SQLiteStore.Error.self) { try SQLiteStore(path: path) }
      #expect(error?.kind == .lockedByAnotherProcess)
      withExtendedLifetime((shared, reader)) {}
    }
    // Closed, it opens in any mode again, and the file is whole.
    _ = try SQLiteStore(path: path)
    #expect(pragma("integrity_check", at: path) == "ok")
  }

  @Test("An exclusive open removes the change log's triggers: nothing it writes is logged")
  func exclusiveStoresLogNothing() throws {
    let directory = TemporaryDirectory()
    let triggers =
      "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'concord%'"
    weak var closed: SQLiteStore?
    do {
      let side = try Side(directory.database)
      side.map.store(SharedBook("dune", "Dune", 1))
      try side.map.flush()
      closed = side.store
      #expect(_SharingClaim.isClaimed(directory.database))
    }
    try waitUntilReleased { closed }
    // NB: `closed` reads nil once the store's deinit begins; its claim goes at the deinit's end.
    try waitUntilReleased { _SharingClaim.isClaimed(directory.database) ? directory : nil }
    #expect(pragmaQuery(triggers, at: directory.database) == "6")
    #expect(changeLogCount(directory.database) > 0)
    let map = try launch(directory.database)
    map.persist(SharedBook.self, as: "Book")
    map.store(SharedBook("emma", "Emma", 1))
    try map.flush()
    #expect(pragmaQuery(triggers, at: directory.database) == "0")
    #expect(changeLogCount(directory.database) == 0)
    #expect(pragmaQuery("PRAGMA user_version", at: directory.database) == "2")
  }

  @Test("A commit of a type this process does not persist is skipped")
  func unpersistedTypesAreSkipped() throws {
    let directory = TemporaryDirectory()
    let app = try Side(directory.database, labels: true)
    let widget = try Side(directory.database)
    let books = widget.map.query(SharedBook.self)
    app.map.transaction { transaction in
      transaction.store(Label(id: 1, name: "bug"))
      transaction.store(SharedBook("dune", "Dune", 1))
    }
    app.map.store(Label(id: 2, name: "feature"))
    try app.map.flush()
    try widget.map.syncExternalChanges()
    #expect(books.value.map(\.id) == ["dune"])
    #expect(widget.logger.events.filter { $0.kind == .persistenceFailed }.isEmpty)
  }

  @Test("A process that falls behind the trimmed log reloads what it holds, and says so")
  func fallingBehindReloads() throws {
    let directory = TemporaryDirectory()
    let app = try Side(directory.database)
    app.store.log?.limit = 20
    app.store.log?.trimEvery = 10
    let widget = try Side(directory.database)
    let held = app.map.store(SharedBook("dune", "v0", 0))
    try app.map.flush()
    let dune = try #require(widget.map.find(SharedBook.self, id: "dune"))
    let books = widget.map.query(SharedBook.self)
    let seen = ObservationRecorder(dune)
    for version in 1...100 {
      app.map.store(SharedBook("dune", "v\(version)", Double(version)))
      app.map.store(SharedBook("b\(version)", "Book \(version)"))
      try app.map.flush()
    }
    #expect(changeLogCount(directory.database) <= 40, "trimmed past the widget, which did not read")
    try widget.map.syncExternalChanges()
    #expect(dune.value.title == "v100")
    #expect(seen.values.map(\.title) == ["v100"], "reloaded in one write")
    #expect(books.value.count == 101)
    #expect(
      widget.logger.events.contains {
        $0.kind == .persistenceFailed && $0.message?.contains("could not say everything") == true
      })
    // It follows the log again from there.
    app.map.store(SharedBook("dune", "v101", 101))
    try app.map.flush()
    try widget.map.syncExternalChanges()
    #expect(dune.value.title == "v101")
    withExtendedLifetime(held) {}
  }

  @Test("The log is trimmed behind the slowest reader, and no further")
  func trimmingWaitsForReaders() throws {
    let directory = TemporaryDirectory()
    let app = try Side(directory.database)
    app.store.log?.trimEvery = 10
    let widget = try Side(directory.database)
    let dune = app.map.store(SharedBook("dune", "v0", 0))
    try app.map.flush()
    let watched = try #require(widget.map.find(SharedBook.self, id: "dune"))
    let seen = ObservationRecorder(watched)
    for version in 1...60 {
      app.map.store(SharedBook("dune", "v\(version)", Double(version)))
      try app.map.flush()
    }
    #expect(changeLogCount(directory.database) >= 60, "the widget has read none of them")
    try widget.map.syncExternalChanges()
    #expect(seen.values.count == 60, "none lost")
    app.map.store(SharedBook("dune", "v61", 61))
    try app.map.flush()
    for version in 62...80 {
      app.map.store(SharedBook("dune", "v\(version)", Double(version)))
      try app.map.flush()
    }
    #expect(changeLogCount(directory.database) < 30, "read past, trimmed")
    withExtendedLifetime(dune) {}
  }

  @Test("A restore in one process has the other reload what it holds")
  func restoresReachTheOthers() throws {
    let directory = TemporaryDirectory()
    let slot = directory.path + "/slot.sqlite"
    let app = try Side(directory.database)
    app.map.store(SharedBook("dune", "Dune (saved)", 1))
    try app.map.save(to: slot)
    app.map.store(SharedBook("dune", "Dune (later)", 2))
    try app.map.flush()
    let widget = try Side(directory.database)
    let dune = try #require(widget.map.find(SharedBook.self, id: "dune"))
    #expect(dune.value.title == "Dune (later)")
    try app.map.restore(from: slot)
    try widget.map.syncExternalChanges()
    #expect(dune.value.title == "Dune (saved)")
    // And the log goes on from there.
    app.map.store(SharedBook("dune", "Dune (3)", 3))
    try app.map.flush()
    try widget.map.syncExternalChanges()
    #expect(dune.value.title == "Dune (3)")
  }

  @Test("Aggregates: another process's page updates the entities it nests, once each")
  func aggregatesAcrossProcesses() throws {
    let directory = TemporaryDirectory()
    let app = launch(try SQLiteStore(path: directory.database, sharing: .shared))
    let widgetStore = try SQLiteStore(path: directory.database, sharing: .shared)
    widgetStore.observeExternalChanges(nil)
    let widget = launch(widgetStore)
    app.store([Issue.make(1, at: 1, userID: 7), Issue.make(2, at: 1, userID: 7)])
    try app.flush()
    let issue = try #require(widget.find(Issue.self, id: 1))
    let user = try #require(widget.find(User.self, id: 7))
    let users = ObservationRecorder(user)
    var renamed = Issue.make(1, title: "Renamed", at: 2, userID: 7)
    renamed.user = User(id: 7, login: "user7", name: "Seven", updatedAt: 5)
    app.store(renamed)
    try app.flush()
    try widget.syncExternalChanges()
    #expect(issue.value.title == "Renamed")
    #expect(issue.value.user.name == "Seven")
    #expect(user.value.name == "Seven")
    #expect(users.count == 1)
  }

  @Test("A file deleted under a running process: its writes and syncs fail clearly")
  func deletedFile() throws {
    let directory = TemporaryDirectory()
    let app = try Side(directory.database)
    let handle = app.map.store(SharedBook("dune", "Dune", 1))
    try app.map.flush()
    for suffix in ["", "-wal", "-shm"] { unlink(directory.database + suffix) }
    app.map.store(SharedBook("dune", "Dune (2)", 2))
    let error = #expect(throws: SQLiteStore.Error.self) { try app.map.flush() }
    #expect(error?.kind == .missingFile)
    #expect(handle.value.title == "Dune (2)", "kept in memory")
    let sync = #expect(throws: SQLiteStore.Error.self) { try app.map.syncExternalChanges() }
    #expect(sync?.kind == .missingFile)
    // A process opening the path anew starts a new file.
    let next = try Side(directory.database)
    #expect(next.book("dune") == nil)
  }

  @Test("A read-only store of a file without a change log (schema 1) reloads when it changes")
  func readOnlyOfAnOlderFile() throws {
    let directory = TemporaryDirectory()
    var handle: OpaquePointer?
    sqlite3_open(directory.database, &handle)
    for sql in [
      "PRAGMA journal_mode = WAL",
      "CREATE TABLE entities (kind TEXT NOT NULL, key BLOB NOT NULL, payload BLOB NOT NULL, "
        + "stamp REAL, PRIMARY KEY (kind, key)) WITHOUT ROWID",
      "CREATE TABLE aliases (name TEXT NOT NULL PRIMARY KEY, kind TEXT NOT NULL, "
        + "payload BLOB NOT NULL, stamp REAL) WITHOUT ROWID",
      "PRAGMA user_version = 1",
      #"INSERT INTO entities VALUES ('Book', CAST('"dune"' AS BLOB), "#
        + #"CAST('{"id":"dune","title":"Dune"}' AS BLOB), NULL)"#,
    ] {
      #expect(sqlite3_exec(handle, sql, nil, nil, nil) == SQLITE_OK)
    }
    let widget = try Side(directory.database, .readOnly)
    let dune = try #require(widget.map.find(SharedBook.self, id: "dune"))
    // A process of ConcordSQLite 0.3 writes the row, as it would: no log.
    #expect(
      sqlite3_exec(
        handle,
        #"UPDATE entities SET payload = CAST('{"id":"dune","title":"Dune (0.3)"}' AS BLOB)"#,
        nil, nil, nil) == SQLITE_OK)
    try widget.map.syncExternalChanges()
    #expect(dune.value.title == "Dune (0.3)")
    sqlite3_close(handle)
    #expect(pragmaQuery("PRAGMA user_version", at: directory.database) == "1", "left as it was")
  }
}

/// Runs `body`, once, when its store is about to read other processes' commits: on the map's
/// writer, after the map's own writes, before the read.
final class ReadHook: @unchecked Sendable {
  // NB: @unchecked because `body` is set before the sync that runs it, on the test's thread.
  var body: (() -> Void)?
}

/// A shared `SQLiteStore` whose reads of other processes' commits first run a `ReadHook`.
final class HookedStore: PersistentStore, @unchecked Sendable {
  let base: SQLiteStore
  let hook: ReadHook

  init(_ base: SQLiteStore, hook: ReadHook) {
    self.base = base
    self.hook = hook
  }

  func encode<Value: Encodable>(_ value: Value) throws -> [UInt8] { try base.encode(value) }
  func decode<Value: Decodable>(_ type: Value.Type, from bytes: [UInt8]) throws -> Value {
    try base.decode(type, from: bytes)
  }
  func record(kind: String, key: [UInt8]) throws -> PersistentRecord? {
    try base.record(kind: kind, key: key)
  }
  func aliasRecord(named name: String) throws -> PersistentRecord? {
    try base.aliasRecord(named: name)
  }
  func apply(_ changes: [PersistentChange]) throws { try base.apply(changes) }
  func records(kind: String) throws -> [(key: [UInt8], record: PersistentRecord)] {
    try base.records(kind: kind)
  }
  func tombstones(kind: String) throws -> [(key: [UInt8], stamp: Stamp)] {
    try base.tombstones(kind: kind)
  }
  var isShared: Bool { base.isShared }
  var writeRefusal: (any Error)? { base.writeRefusal }
  func externalChanges() throws -> PersistentExternalChanges {
    let body = hook.body
    hook.body = nil
    body?()
    return try base.externalChanges()
  }
  func observeExternalChanges(_ wake: (@Sendable () -> Void)?) {
    base.observeExternalChanges(wake)
  }
}
