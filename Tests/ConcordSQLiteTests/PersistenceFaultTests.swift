import Concord
import ConcordTesting
import Foundation
import TestSupport
import Testing

@testable import ConcordSQLite

#if canImport(SQLite3)
  import SQLite3
#else
  import CSQLite
#endif

@Suite(
  "Persistence faults: crashes mid-commit, bad files, bad paths, newer schemas, failing stores")
struct PersistenceFaultTests {
  @Test("A process killed in the middle of a large commit leaves all of it or none of it")
  func crashMidCommitIsAllOrNothing() async throws {
    let directory = TemporaryDirectory()
    let path = directory.database
    let result = await #expect(
      processExitsWith: .failure, observing: [\.standardErrorContent]
    ) { [path = path as String] in
      let store = try SQLiteStore(path: path)
      killMidTransaction(afterCommits: 1, on: store)
      let map = IdentityMap(persistence: store)
      map.persist(Note.self)
      _ = map.store((0..<100).map { Note(id: "n\($0)", text: "before") })
      try map.flush()
      // One commit of 1,000 changes; the process dies a few thousand SQLite steps into it.
      _ = map.store((0..<1_000).map { Note(id: "n\($0)", text: "during") })
      try map.flush()
    }
    let stderr = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
    #expect(stderr.contains("killed mid-transaction"))
    let store = try SQLiteStore(path: path)
    #expect(try store.rowCount() == 100)
    let map = IdentityMap(persistence: store)
    map.persist(Note.self)
    for index in 0..<100 {
      #expect(map.find(Note.self, id: "n\(index)")?.value.text == "before")
    }
    #expect(map.find(Note.self, id: "n500") == nil)
  }

  @Test("A file that is not a database is a clear error")
  func notADatabase() throws {
    let directory = TemporaryDirectory()
    try Data("this is a text file, not a database\n".utf8).write(
      to: URL(fileURLWithPath: directory.database))
    let error = #expect(throws: SQLiteStore.Error.self) {
      try SQLiteStore(path: directory.database)
    }
    #expect(error?.kind == .notADatabase)
    #expect(error?.kind.description == "notADatabase")
    #expect(error?.description.contains("not an SQLite database") == true)
    // A kind is matched in a switch with a default case: later versions may add kinds.
    switch error?.kind {
    case .cannotOpen?, .newerSchema?, .sqlite?, nil: Testing.Issue.record("matched the wrong kind")
    case .notADatabase?: break
    default: Testing.Issue.record("matched no kind")
    }
  }

  @Test("A missing directory, or a path under a file, is a clear error")
  func pathsThatCannotBeOpened() throws {
    let directory = TemporaryDirectory()
    let missing = #expect(throws: SQLiteStore.Error.self) {
      try SQLiteStore(path: directory.path + "/no/such/directory/cache.sqlite")
    }
    #expect(missing?.kind == .cannotOpen)
    // NB: a file as the parent directory: unwritable even for root, which CI runs as.
    let file = directory.path + "/plain-file"
    try Data().write(to: URL(fileURLWithPath: file))
    let underFile = #expect(throws: SQLiteStore.Error.self) {
      try SQLiteStore(path: file + "/cache.sqlite")
    }
    #expect(underFile?.kind == .cannotOpen)
  }

  @Test("A database from a newer version of the library is refused, and left as it is")
  func newerSchemaVersion() throws {
    let directory = TemporaryDirectory()
    _ = try SQLiteStore(path: directory.database)
    var handle: OpaquePointer?
    #expect(sqlite3_open(directory.database, &handle) == SQLITE_OK)
    #expect(sqlite3_exec(handle, "PRAGMA user_version = 99", nil, nil, nil) == SQLITE_OK)
    sqlite3_close(handle)
    let error = #expect(throws: SQLiteStore.Error.self) {
      try SQLiteStore(path: directory.database)
    }
    #expect(error?.kind == .newerSchema)
    #expect(error?.description.contains("schema version 99") == true)
  }

  @Test("The schema version is recorded in user_version")
  func schemaVersionIsRecorded() throws {
    let directory = TemporaryDirectory()
    _ = try SQLiteStore(path: directory.database)
    var handle: OpaquePointer?
    var statement: OpaquePointer?
    sqlite3_open(directory.database, &handle)
    sqlite3_prepare_v2(handle, "PRAGMA user_version", -1, &statement, nil)
    #expect(sqlite3_step(statement) == SQLITE_ROW)
    #expect(sqlite3_column_int(statement, 0) == SQLiteStore.schemaVersion)
    sqlite3_finalize(statement)
    sqlite3_prepare_v2(handle, "PRAGMA journal_mode", -1, &statement, nil)
    #expect(sqlite3_step(statement) == SQLITE_ROW)
    #expect(String(cString: sqlite3_column_text(statement, 0)) == "wal")
    sqlite3_finalize(statement)
    sqlite3_close(handle)
  }

  @Test("A failed write loses nothing: it is logged, readable, thrown once per flush, retried")
  func failedWritesAreKept() throws {
    let store = FlakyStore()
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger, persistence: store)
    map.persist(Note.self)
    _ = map.store(Note(id: "a", text: "kept"))
    #expect(throws: FlakyStore.Failure.self) { try map.flush() }
    // Released and unwritten, it is still there.
    #expect(map.find(Note.self, id: "a")?.value.text == "kept")
    let failures = logger.events.filter { $0.kind == .persistenceFailed }
    // One per attempt (the flush's, and the writer's if it came first).
    #expect(!failures.isEmpty)
    // The next flush tries again; with the store back, it succeeds. NB: the background writer
    // may have tried (and failed) once more before the store came back: that failure is new,
    // so this flush throws it, once.
    store.isFailing.withValue { $0 = false }
    do {
      try map.flush()
    } catch is FlakyStore.Failure {
      // Then two attempts failed and were logged: the first flush's, and the writer's after it.
      #expect(logger.events.filter { $0.kind == .persistenceFailed }.count >= 2)
    }
    #expect(store.rows.value.count == 1)
    #expect(throws: Never.self) { try map.flush() }
  }
}

/// How many commits the store's writer makes before `killMidTransaction(afterCommits:on:)`
/// starts counting down to the kill, and how many progress calls it then lets pass. NB:
/// globals, since SQLite's hooks are C functions that capture nothing; they are only set in the
/// child process of an exit test.
nonisolated(unsafe) private var commitsBeforeKill = 0
nonisolated(unsafe) private var progressBeforeKill = 0

/// Makes `store` stop the process in the middle of the transaction that follows its writer's
/// first `commits` commits, a few thousand SQLite instructions into it: the crash tests' kill
/// point, set from outside the store through SQLite's commit and progress hooks, so that the
/// shipping store has no such seam.
func killMidTransaction(afterCommits commits: Int, on store: SQLiteStore) {
  commitsBeforeKill = commits
  progressBeforeKill = 50
  store.writer.withLock {
    _ = sqlite3_commit_hook(
      store.writer.handle,
      { _ in
        commitsBeforeKill -= 1
        return 0
      }, nil)
    sqlite3_progress_handler(
      store.writer.handle, 100,
      { _ in
        guard commitsBeforeKill <= 0 else { return 0 }
        progressBeforeKill -= 1
        if progressBeforeKill == 0 {
          FileHandle.standardError.write(Data("killed mid-transaction\n".utf8))
          abort()
        }
        return 0
      }, nil)
  }
}

/// An in-memory store that fails every write while `isFailing`.
final class FlakyStore: PersistentStore {
  struct Failure: Error {}

  let isFailing = Locked(true)
  let rows = Locked<[String: PersistentRecord]>([:])

  func encode<Value: Encodable>(_ value: Value) throws -> [UInt8] {
    Array(try JSONEncoder().encode(value))
  }

  func decode<Value: Decodable>(_ type: Value.Type, from bytes: [UInt8]) throws -> Value {
    try JSONDecoder().decode(type, from: Data(bytes))
  }

  func record(kind: String, key: [UInt8]) throws -> PersistentRecord? {
    rows.value[kind + String(decoding: key, as: UTF8.self)]
  }

  func aliasRecord(named _: String) throws -> PersistentRecord? { nil }

  func apply(_ changes: [PersistentChange]) throws {
    if isFailing.value { throw Failure() }
    for change in changes {
      if case .save(let kind, let key, let record) = change {
        rows.withValue { $0[kind + String(decoding: key, as: UTF8.self)] = record }
      }
    }
  }
}
