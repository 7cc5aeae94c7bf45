import Concord
import ConcordSQLite
import Foundation
import TestSupport
import Testing

#if canImport(SQLite3)
  import SQLite3
#else
  import CSQLite
#endif

// Save slots, as a game's data manager uses them: a database shipped with the app seeds the
// working copy on first launch and is never written; `save(to:)` writes a snapshot atomically
// beside its target and renames it over; bad files and bad paths are clear errors that change
// nothing.

/// The bytes of the file at `path`, or `nil` if there is none.
private func contents(_ path: String) -> Data? {
  FileManager.default.contents(atPath: path)
}

/// Runs `sql` on a new database at `path`.
private func makeDatabase(at path: String, _ sql: String) {
  var handle: OpaquePointer?
  sqlite3_open(path, &handle)
  sqlite3_exec(handle, sql, nil, nil, nil)
  sqlite3_close(handle)
}

/// A seed of three notes and an issue, saved by a map as an app's build step would.
private func makeSeed(at path: String, in directory: TemporaryDirectory) throws {
  let map = try launch(directory.path + "/seed-maker.sqlite")
  withExtendedLifetime(
    (
      map.store((0..<3).map { Note(id: "n\($0)", text: "seeded \($0)") }),
      map.store(Issue.make(1, title: "Seeded issue"))
    )
  ) {}
  try map.save(to: path)
}

@Suite("Save slots: seeded databases and atomic snapshots")
struct SaveSlotTests {
  @Test("A seeded store starts from the seed, which is never written, and seeds only once")
  func seedingCopiesTheSeedAndLeavesItAlone() throws {
    let directory = TemporaryDirectory()
    let seed = directory.path + "/starter.sqlite"
    try makeSeed(at: seed, in: directory)
    let seedBytes = try #require(contents(seed))
    let seedModified = try FileManager.default.attributesOfItem(atPath: seed)[.modificationDate]

    let working = directory.path + "/working.sqlite"
    do {
      let map = IdentityMap(persistence: try SQLiteStore(path: working, seededFrom: seed))
      map.persist(Note.self)
      map.persist(Issue.self)
      map.persist(User.self)
      map.persist(Label.self)
      map.persist(Milestone.self)
      #expect(map.find(Note.self, id: "n1")?.value.text == "seeded 1")
      #expect(map.find(Issue.self, id: 1)?.value.title == "Seeded issue")
      map.update(Note.self, id: "n1") { $0.text = "played" }
      _ = map.store(Note(id: "new", text: "found in play"))
      try map.flush()
    }
    // The seed: same bytes, same date, nothing beside it.
    #expect(contents(seed) == seedBytes)
    #expect(
      try FileManager.default.attributesOfItem(atPath: seed)[.modificationDate] as? Date
        == seedModified as? Date)
    #expect(!FileManager.default.fileExists(atPath: seed + "-wal"))
    #expect(!FileManager.default.fileExists(atPath: seed + "-shm"))
    #expect(!FileManager.default.fileExists(atPath: working + ".concord-saving"))

    // The next launch finds the working copy and does not read the seed.
    let map = try launch(working)
    #expect(map.find(Note.self, id: "n1")?.value.text == "played")
    #expect(map.find(Note.self, id: "new") != nil)
    let again = try SQLiteStore(path: working, seededFrom: seed)
    #expect(try again.rowCount(kind: "Note") == 4)
    #expect(contents(seed) == seedBytes)
  }

  @Test("A snapshot is one whole file in rollback-journal mode, and a new save replaces it")
  func aSnapshotIsOneWholeFile() throws {
    let directory = TemporaryDirectory()
    let map = try launch(directory.database)
    let slot = directory.path + "/slot-1.sqlite"
    let first = map.store((0..<50).map { Note(id: "n\($0)", text: "first") })
    // No flush: `save(to:)` waits for the writes committed before it.
    try map.save(to: slot)
    #expect(pragma("journal_mode", at: slot) == "delete")
    #expect(pragma("integrity_check", at: slot) == "ok")
    #expect(pragma("user_version", at: slot) == "\(SQLiteStore.schemaVersion)")
    #expect(!FileManager.default.fileExists(atPath: slot + "-wal"))
    let saved = try SQLiteStore(path: directory.path + "/read-1.sqlite", seededFrom: slot)
    #expect(try saved.rowCount(kind: "Note") == 50)

    map.update(Note.self, id: "n0") { $0.text = "second" }
    _ = map.store(Note(id: "later", text: "second"))
    try map.save(to: slot)
    let resaved = try SQLiteStore(path: directory.path + "/read-2.sqlite", seededFrom: slot)
    #expect(try resaved.rowCount(kind: "Note") == 51)
    let note = try #require(try resaved.record(kind: "Note", key: try resaved.encode("n0")))
    #expect(try resaved.decode(Note.self, from: note.payload).text == "second")
    #expect(!FileManager.default.fileExists(atPath: slot + ".concord-saving"))
    withExtendedLifetime(first) {}
  }

  @Test("Bad seeds are clear errors, and nothing is written")
  func badSeedsAreClearErrors() throws {
    let directory = TemporaryDirectory()
    let good = directory.path + "/good.sqlite"
    try makeSeed(at: good, in: directory)
    let goodBytes = try #require(contents(good))

    let text = directory.path + "/text.sqlite"
    try Data("a text file, not a database\n".utf8).write(to: URL(fileURLWithPath: text))
    let empty = directory.path + "/empty.sqlite"
    try Data().write(to: URL(fileURLWithPath: empty))
    let foreign = directory.path + "/foreign.sqlite"
    makeDatabase(at: foreign, "CREATE TABLE players (name TEXT); PRAGMA user_version = 1;")
    let newer = directory.path + "/newer.sqlite"
    try goodBytes.write(to: URL(fileURLWithPath: newer))
    makeDatabase(at: newer, "PRAGMA user_version = 99")
    let truncated = directory.path + "/truncated.sqlite"
    try goodBytes.prefix(goodBytes.count / 2).write(to: URL(fileURLWithPath: truncated))
    let headerOnly = directory.path + "/header-only.sqlite"
    try goodBytes.prefix(40).write(to: URL(fileURLWithPath: headerOnly))

    let cases: [(seed: String, kind: SQLiteStore.Error.Kind, says: String)] = [
      (directory.path + "/missing.sqlite", .missingFile, "does not exist"),
      (text, .notADatabase, "not an SQLite database"),
      (empty, .notConcord, "is empty"),
      (foreign, .notConcord, "not one ConcordSQLite wrote"),
      (newer, .newerSchema, "schema version 99"),
      (truncated, .damaged, "damaged"),
      (headerOnly, .damaged, "damaged"),
    ]
    for (seed, kind, says) in cases {
      let before = contents(seed)
      let working = directory.path + "/working.sqlite"
      let error = #expect(throws: SQLiteStore.Error.self, "\(seed)") {
        try SQLiteStore(path: working, seededFrom: seed)
      }
      #expect(error?.kind == kind, "\(seed): \(error?.description ?? "")")
      #expect(error?.description.contains(says) == true, "\(error?.description ?? "")")
      #expect(error?.description.contains(seed) == true)
      #expect(!FileManager.default.fileExists(atPath: working), "\(seed) wrote the working copy")
      #expect(!FileManager.default.fileExists(atPath: working + ".concord-saving"))
      #expect(contents(seed) == before, "\(seed) was changed")
    }
  }

  @Test("A seed or a snapshot that is the store's own file is refused")
  func theSameFileTwiceIsRefused() throws {
    let directory = TemporaryDirectory()
    let path = directory.database
    let refused = #expect(throws: SQLiteStore.Error.self) {
      try SQLiteStore(path: path, seededFrom: path)
    }
    #expect(refused?.kind == .sameFile)
    #expect(!FileManager.default.fileExists(atPath: path))

    let map = try launch(path)
    let note = map.store(Note(id: "a", text: "kept"))
    try map.flush()
    // Once the file exists, another spelling of its path is the same file too.
    for spelling in [path, directory.path + "/./cache.sqlite"] {
      let seeded = #expect(throws: SQLiteStore.Error.self) {
        try SQLiteStore(path: path, seededFrom: spelling)
      }
      #expect(seeded?.kind == .sameFile)
      let saved = #expect(throws: SQLiteStore.Error.self) { try map.save(to: spelling) }
      #expect(saved?.kind == .sameFile)
      #expect(saved?.description.contains("different paths") == true)
    }
    #expect(try launch(path).find(Note.self, id: "a")?.value.text == "kept")
    withExtendedLifetime(note) {}
  }

  @Test("A snapshot that cannot be written where asked is a clear error; the target is untouched")
  func unwritableTargetsAreClearErrors() throws {
    let directory = TemporaryDirectory()
    let map = try launch(directory.database)
    let note = map.store(Note(id: "a", text: "kept"))

    // A read-only directory: chmod where it holds (not for root, which CI runs as), and
    // /proc, which nobody may create files in, otherwise.
    let readOnly = directory.path + "/read-only"
    try FileManager.default.createDirectory(
      atPath: readOnly, withIntermediateDirectories: false,
      attributes: [.posixPermissions: 0o555])
    defer {
      try? FileManager.default.setAttributes(
        [.posixPermissions: 0o755], ofItemAtPath: readOnly)
    }
    let probe = readOnly + "/probe"
    let chmodHolds = !FileManager.default.createFile(atPath: probe, contents: Data())
    try? FileManager.default.removeItem(atPath: probe)
    let file = directory.path + "/plain-file"
    try Data("not a directory".utf8).write(to: URL(fileURLWithPath: file))
    let targets = [
      (chmodHolds ? readOnly : "/proc") + "/slot.sqlite",
      directory.path + "/no/such/directory/slot.sqlite",
      file + "/slot.sqlite",
    ]
    for target in targets {
      let error = #expect(throws: SQLiteStore.Error.self, "\(target)") {
        try map.save(to: target)
      }
      #expect(error?.kind == .cannotWrite, "\(target): \(error?.description ?? "")")
      #expect(error?.description.contains(target) == true, "\(error?.description ?? "")")
      #expect(!FileManager.default.fileExists(atPath: target))
    }
    // An existing slot stays as it was when a save to it fails: here, a directory in the way.
    let slot = directory.path + "/slot.sqlite"
    try map.save(to: slot)
    let saved = try #require(contents(slot))
    try FileManager.default.createDirectory(
      atPath: slot + ".concord-saving", withIntermediateDirectories: false)
    #expect(FileManager.default.createFile(atPath: slot + ".concord-saving/blocker", contents: nil))
    map.update(Note.self, id: "a") { $0.text = "changed" }
    #expect(throws: SQLiteStore.Error.self) { try map.save(to: slot) }
    #expect(contents(slot) == saved)
    withExtendedLifetime(note) {}
  }

  /// The game's data manager, end to end: what the "Save slots" section of Persistence and
  /// Offline shows.
  @Test("The Zork flow: seed, play, save, play more, restore the save, reset to the seed")
  func theZorkFlow() throws {
    let directory = TemporaryDirectory()
    let bundled = directory.path + "/zork-seed.sqlite"
    try makeSeed(at: bundled, in: directory)
    let working = directory.path + "/zork.sqlite"
    let save = directory.path + "/zork-save.sqlite"

    // First launch: the working copy starts as the bundled database.
    let map = IdentityMap(persistence: try SQLiteStore(path: working, seededFrom: bundled))
    map.persist(Note.self)
    let lamp = try #require(map.find(Note.self, id: "n0"))
    #expect(lamp.value.text == "seeded 0")
    let seen = Locked<[String]>([])
    let subscription = lamp.observe { seen.append($0.text) }

    // Play, then save.
    map.update(Note.self, id: "n0") { $0.text = "lamp: on" }
    _ = map.store(Note(id: "sword", text: "taken"))
    try map.save(to: save)

    // Play more: the lamp runs out, the sword is lost, a troll appears.
    map.update(Note.self, id: "n0") { $0.text = "lamp: dark" }
    map.remove(Note.self, id: "sword")
    let troll = map.store(Note(id: "troll", text: "angry"))

    // Restore the save: the later play is gone.
    try map.restore(from: save)
    #expect(lamp.value.text == "lamp: on")
    #expect(map.find(Note.self, id: "sword")?.value.text == "taken")
    #expect(troll.isRemoved)

    // Reset: back to the bundled database, and no save any more.
    try map.restore(from: bundled)
    try FileManager.default.removeItem(atPath: save)
    #expect(lamp.value.text == "seeded 0")
    #expect(map.find(Note.self, id: "sword") == nil)
    #expect(seen.value == ["lamp: on", "lamp: dark", "lamp: on", "seeded 0"])
    withExtendedLifetime(subscription) {}
  }

  @Test("A map without save slots in its store says so")
  func storesWithoutSaveSlotsThrow() throws {
    let map = IdentityMap(persistence: FlakyStore())
    map.persist(Note.self)
    let error = #expect(throws: PersistentStoreUnsupported.self) {
      try map.save(to: "/tmp/never-written.sqlite")
    }
    #expect(error?.description.contains("save(to:") == true)
    #expect(!FileManager.default.fileExists(atPath: "/tmp/never-written.sqlite"))
  }
}
