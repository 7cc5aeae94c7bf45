import Concord
import Foundation
import TestSupport
import Testing

@testable import ConcordSQLite

#if canImport(SQLite3)
  import SQLite3
#else
  import CSQLite
#endif

// A save slot survives a crash at any moment of `save(to:)`: each run kills a child process
// (SIGKILL, as the system kills an app) at a random step of a save over an existing slot:
// before the backup, after some pages of it, between the fsync and the rename, or after the
// rename. The slot must then open, pass `PRAGMA integrity_check`, and hold exactly the old
// snapshot (killed before the rename) or exactly the new one (after it); the next save must
// succeed and leave no temporary file.

/// What the slot holds: the notes' count and the text of two of them.
private func slotContents(_ slot: String, in directory: TemporaryDirectory) throws -> (
  count: Int, first: String, last: String
) {
  let store = try SQLiteStore(path: directory.path + "/read-\(UUID()).sqlite", seededFrom: slot)
  func text(_ id: String) throws -> String {
    guard let record = try store.record(kind: "Note", key: try store.encode(id)) else {
      return "missing"
    }
    return try store.decode(Note.self, from: record.payload).text
  }
  return (try store.rowCount(kind: "Note"), try text("n0"), try text("n599"))
}

@Suite("Save slots: a crash while saving leaves the old slot or the new one, whole")
struct SaveCrashTests {
  /// 200 runs by default; fewer with `CONCORD_RANDOM_STEPS` lowered (CI's sanitizer builds).
  static let runs = Array(0..<max(8, randomSteps(share: 500)))

  @Test("Killed at a random step of save(to:), 200 runs", arguments: runs)
  func aCrashWhileSavingLeavesAWholeSlot(run: Int) async throws {
    var random = SeededGenerator(seed: UInt64(run) &+ 0x5A7E)
    let directory = TemporaryDirectory()
    let working = directory.database
    let slot = directory.path + "/slot.sqlite"
    // The old slot: 600 notes saying "old". The working file then says "new", with 50 more.
    do {
      let map = try launch(working)
      let old = map.store((0..<600).map { Note(id: "n\($0)", text: "old \($0)") })
      try map.save(to: slot)
      let new = map.store((0..<650).map { Note(id: "n\($0)", text: "new \($0)") })
      try map.flush()
      withExtendedLifetime((old, new)) {}
    }
    // 0: before the backup; 1: after some pages; 2: before the rename; 3: after it.
    let step = Int.random(in: 0..<4, using: &random)
    let total = pragma("page_count", at: working, writable: true).flatMap(Int32.init) ?? 0
    #expect(total > 8, "enough pages to stop the backup between them")
    let pages = Int32.random(in: 1...max(1, total), using: &random)

    await #expect(processExitsWith: .signal(SIGKILL)) {
      [
        working = working as String, slot = slot as String, step = step as Int,
        pages = pages as Int32
      ] in
      let store = try SQLiteStore(path: working)
      try store.save(to: slot) { reached in
        let kill =
          switch (step, reached) {
          case (0, .beforeBackup), (2, .beforeRename), (3, .afterRename): true
          case (1, .backedUp(let copied)): copied >= pages
          // NB: a backup shorter than `pages` ends before it: killed before the rename then.
          case (1, .beforeRename): true
          default: false
          }
        if kill { _ = raise(SIGKILL) }
      }
      Testing.Issue.record("the save was not killed")
    }

    // Killed between the start of the backup and the rename, the temporary file is left.
    #expect(
      FileManager.default.fileExists(atPath: slot + ".concord-saving") == (step == 1 || step == 2),
      "run \(run), step \(step)")
    #expect(pragma("integrity_check", at: slot) == "ok", "run \(run), step \(step)")
    let contents = try slotContents(slot, in: directory)
    if step == 3 {
      #expect(contents == (650, "new 0", "new 599"), "run \(run): killed after the rename")
    } else {
      #expect(contents == (600, "old 0", "old 599"), "run \(run): killed at step \(step)")
    }
    // The next save succeeds, and cleans up what the killed one left.
    try SQLiteStore(path: working).save(to: slot)
    #expect(try slotContents(slot, in: directory) == (650, "new 0", "new 599"))
    #expect(!FileManager.default.fileExists(atPath: slot + ".concord-saving"))
    #expect(!FileManager.default.fileExists(atPath: slot + ".concord-saving-journal"))
  }
}
