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

// One store, several processes, with real processes: the test process and
// `ConcordSharingHelper`s (see `Support/HelperProcess.swift`) share one file. Nothing here calls
// `syncExternalChanges()` to see another process's commit unless it says so: the file watch
// wakes each map. The tests wait for lines the helpers print, or for values a map delivers,
// with timeouts as hang guards only.

@Suite("Sharing: real processes share one file", .serialized)
struct SharingProcessTests {
  @Test("1,000 stamped updates in one process reach a handle in another in order, none lost")
  func aThousandUpdates() async throws {
    let directory = TemporaryDirectory()
    let here = try Side(directory.database, watching: true)
    let writer = try HelperProcess(directory.database, "shared")
    try writer.expect("ready")
    try writer.run("put dune v0 0")
    try writer.run("flush")
    try here.map.syncExternalChanges()
    let dune = try #require(here.map.find(SharedBook.self, id: "dune"))
    let seen = ObservationRecorder(dune)

    try writer.run("count-up dune 1000")
    let last = try await seen.first(timeout: .seconds(60), where: { $0.version == 1_000 })
    #expect(last.title == "v1000")
    let versions = seen.values.compactMap(\.version)
    #expect(versions == (1...1_000).map(Double.init), "in order, none lost, none twice")
    #expect(try writer.value("dune") == "value dune v1000 1000", "the same final state")
    try writer.quit()
  }

  @Test("Two writers, 500 transactions each, on the same rows: no busy error, one final state")
  func twoWriters() throws {
    let directory = TemporaryDirectory()
    let first = try HelperProcess(directory.database, "shared")
    try first.expect("ready")
    let second = try HelperProcess(directory.database, "shared")
    try second.expect("ready")
    for helper in [first, second] { try helper.run("query") }
    first.send("transactions s 500 5")
    second.send("transactions s 500 5")
    // NB: any error, SQLITE_BUSY among them, would end a command with an `error` line.
    for helper in [first, second] {
      let done = try helper.next(timeout: 120) { $0 == "ok transactions" || $0.hasPrefix("error") }
      #expect(done == "ok transactions")
    }
    for helper in [first, second] { try helper.run("sync") }
    let books = try first.run("books").filter { $0.hasPrefix("book ") }
    #expect(books.count == 5)
    #expect(try second.run("books").filter { $0.hasPrefix("book ") } == books)
    // The file agrees, and says which transaction was the last.
    let store = try SQLiteStore(path: directory.database, sharing: .shared)
    for line in books {
      let words = line.split(separator: " ").map(String.init)
      let record = try #require(try store.record(kind: "Book", key: store.encode(words[1])))
      #expect(try store.decode(SharedBook.self, from: record.payload).title == words[2])
    }
    #expect(pragma("integrity_check", at: directory.database) == "ok")
    for helper in [first, second] {
      #expect(!helper.transcript.contains { $0.hasPrefix("error") || $0.contains("busy") })
      try helper.quit()
    }
  }

  @Test("A writer killed in the middle of a transaction: the file is whole, the others go on")
  func killedMidTransaction() async throws {
    let directory = TemporaryDirectory()
    let here = try Side(directory.database, watching: true)
    let survivor = try HelperProcess(directory.database, "shared")
    try survivor.expect("ready")
    let doomed = try HelperProcess(directory.database, "shared")
    try doomed.expect("ready")
    try doomed.run("put dune Dune 1")
    try doomed.run("flush")
    try here.map.syncExternalChanges()
    let books = here.map.query(SharedBook.self)
    let counts = ObservationRecorder(books)

    doomed.send("kill-mid-transaction 300")
    try doomed.expect("killing")
    doomed.process.waitUntilExit()
    #expect(doomed.process.terminationReason == .uncaughtSignal)
    #expect(doomed.process.terminationStatus == SIGKILL)

    #expect(pragma("integrity_check", at: directory.database) == "ok")
    // The other process writes at once: the dead one's write lock went with it.
    try survivor.run("put emma Emma 1")
    try survivor.run("flush")
    try survivor.run("sync")
    #expect(try survivor.value("k0") == "value k0 nil", "nothing of the transaction")
    _ = try await counts.first(timeout: .seconds(60), where: { $0.count == 2 })
    #expect(books.value.map(\.id).sorted() == ["dune", "emma"])
    #expect(changeLogEntries(directory.database, matching: "k%") == 0, "no entry replays it")
    try survivor.quit()
  }

  @Test("A Concord writer killed while writing: the others see a prefix of its commits, in order")
  func killedWhileWriting() async throws {
    let directory = TemporaryDirectory()
    let here = try Side(directory.database, watching: true)
    let doomed = try HelperProcess(directory.database, "shared")
    try doomed.expect("ready")
    try doomed.run("put dune v0 0")
    try doomed.run("flush")
    try here.map.syncExternalChanges()
    let dune = try #require(here.map.find(SharedBook.self, id: "dune"))
    let seen = ObservationRecorder(dune)
    doomed.send("count-up dune 100000")
    _ = try await seen.first(timeout: .seconds(60), where: { ($0.version ?? 0) >= 50 })
    doomed.process.interrupt()
    kill(doomed.process.processIdentifier, SIGKILL)
    doomed.process.waitUntilExit()
    #expect(pragma("integrity_check", at: directory.database) == "ok")
    try here.map.syncExternalChanges()
    let versions = seen.values.compactMap(\.version)
    #expect(versions == (1...versions.count).map(Double.init), "a prefix, in order")
    let stored = try #require(try here.store.record(kind: "Book", key: here.store.encode("dune")))
    #expect(stored.stamp == versions.last, "the map agrees with the file")
  }

  @Test("A read-only process never writes nor takes the write lock, and sees the others' commits")
  func readOnlyProcess() async throws {
    let directory = TemporaryDirectory()
    let here = try Side(directory.database, watching: true)
    here.map.store(SharedBook("dune", "Dune", 1))
    try here.map.flush()
    let widget = try HelperProcess(directory.database, "readOnly")
    try widget.expect("ready")
    // The write lock is taken, and kept, by another connection: the widget never waits for it.
    var handle: OpaquePointer?
    sqlite3_open(directory.database, &handle)
    #expect(sqlite3_exec(handle, "BEGIN IMMEDIATE", nil, nil, nil) == SQLITE_OK)
    let size = fileSize(directory.database)
    let printed = try widget.run("put emma Emma 1", timeout: 30)
    #expect(printed.contains { $0.hasPrefix("log notPersisted") })
    let error = #expect(throws: HelperError.self) { try widget.run("flush", timeout: 30) }
    #expect(error?.description.hasPrefix("error readOnly") == true)
    #expect(try widget.value("dune", timeout: 30) == "value dune Dune 1")
    sqlite3_exec(handle, "ROLLBACK", nil, nil, nil)
    sqlite3_close(handle)
    #expect(fileSize(directory.database) == size)
    // It follows what the app commits, by itself.
    try widget.run("watch dune")
    here.map.store(SharedBook("dune", "Dune (2)", 2))
    try here.map.flush()
    try widget.expect("changed dune Dune (2) 2")
    try here.map.syncExternalChanges()
    #expect(here.book("emma") == nil, "nothing of the widget's write reached the file")
    try widget.quit()
  }

  @Test("Exclusive in one process, shared or read-only in another: a clear error either way")
  func locksAcrossProcesses() throws {
    let directory = TemporaryDirectory()
    do {
      let exclusive = try SQLiteStore(path: directory.database)
      for mode in ["shared", "readOnly"] {
        let helper = try HelperProcess(directory.database, mode)
        try helper.expect("error lockedByAnotherProcess")
        helper.process.waitUntilExit()
      }
      withExtendedLifetime(exclusive) {}
    }
    let shared = try HelperProcess(directory.database, "shared")
    try shared.expect("ready")
    let error = #expect(throws: SQLiteStore.Error.self) {
      try SQLiteStore(path: directory.database)
    }
    #expect(error?.kind == .lockedByAnotherProcess)
    try shared.run("put dune Dune 1")
    try shared.run("flush")
    try shared.quit()
    #expect(pragma("integrity_check", at: directory.database) == "ok")
  }

  @Test("A process of an older schema shares the file: refused clearly, and the older one goes on")
  func olderSchemaInAnotherProcess() throws {
    let directory = TemporaryDirectory()
    let older = try HelperProcess(directory.database, "shared")
    try older.expect("ready")
    try older.run("claim-old-slot 1")
    let error = #expect(throws: SQLiteStore.Error.self) {
      try SQLiteStore(path: directory.database, sharing: .shared)
    }
    #expect(error?.kind == .sharedWithOlderVersion)
    #expect(error?.message.contains("older version") == true)
    try older.run("put dune Dune 1")
    try older.run("flush")
    #expect(try older.value("dune") == "value dune Dune 1")
    try older.quit()
    #expect(pragma("integrity_check", at: directory.database) == "ok")
  }

  @Test("A process of ConcordSQLite 0.3 writes the file: the change log carries its write too")
  func legacyWriter() async throws {
    let directory = TemporaryDirectory()
    let here = try Side(directory.database, watching: true)
    here.map.store(SharedBook("dune", "Dune", nil))
    try here.map.flush()
    let dune = try #require(here.map.find(SharedBook.self, id: "dune"))
    let seen = ObservationRecorder(dune)
    let legacy = try HelperProcess(directory.database, "shared")
    try legacy.expect("ready")
    try legacy.run("legacy-put dune Legacy")
    _ = try await seen.first(timeout: .seconds(60), where: { $0.title == "Legacy" })
    try legacy.quit()
  }

  @Test("The file deleted under a running process: it reports it, and keeps running")
  func fileDeletedUnderAProcess() throws {
    let directory = TemporaryDirectory()
    let helper = try HelperProcess(directory.database, "shared")
    try helper.expect("ready")
    try helper.run("put dune Dune 1")
    try helper.run("flush")
    for suffix in ["", "-wal", "-shm"] { unlink(directory.database + suffix) }
    try helper.run("put dune Dune 2")
    let error = #expect(throws: HelperError.self) { try helper.run("flush") }
    #expect(error?.description.hasPrefix("error missingFile") == true)
    #expect(try helper.value("dune") == "value dune Dune 2")
    try helper.quit()
  }
}

/// The size of the file at `path`, in bytes.
func fileSize(_ path: String) -> Int {
  ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? -1
}

/// How many change log entries of the database at `path` have a key like `pattern`.
func changeLogEntries(_ path: String, matching pattern: String) -> Int {
  let sql = "SELECT count(*) FROM concord_changes WHERE CAST(key AS TEXT) LIKE '\"\(pattern)'"
  return Int(pragmaQuery(sql, at: path) ?? "-1") ?? -1
}
