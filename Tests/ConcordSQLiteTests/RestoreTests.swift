import Concord
import ConcordSQLite
import ConcordTesting
import Foundation
import TestSupport
import Testing

// `IdentityMap.restore(from:)` loads a save slot: one write that makes every persisted entity,
// alias and live query in memory agree with the snapshot, whatever the stamps say, telling each
// handle once; types that are not persisted are untouched; a bad snapshot changes nothing.

/// A type the tests never persist.
private struct Scratch: Identifiable, Sendable, Equatable {
  var id: Int
  var text: String
}

extension AliasKey where Value == Note {
  fileprivate static var pinned: Self { .init("pinned") }
}

@Suite("Save slots: restore(from:) replaces the persisted state in one write")
struct RestoreTests {
  @Test("Entities take the snapshot's values over newer stamps, or go; each handle is told once")
  func entitiesTakeTheSnapshot() throws {
    let directory = TemporaryDirectory()
    let map = try launch(directory.database)
    let slot = directory.path + "/slot.sqlite"
    let kept = map.store(Note(id: "kept", text: "saved"), modifiedAt: 10)
    let removedLater = map.store(Note(id: "removed later", text: "saved"), modifiedAt: 10)
    let scratch = map.store(Scratch(id: 1, text: "scratch"))
    try map.save(to: slot)

    map.store(Note(id: "kept", text: "played"), modifiedAt: 20)
    map.remove(Note.self, id: "removed later")
    let createdLater = map.store(Note(id: "created later", text: "played"))
    map.update(Scratch.self, id: 1) { $0.text = "scratch, played" }
    let told = Locked<[String]>([])
    let subscriptions = [
      kept.observe { told.append("kept: \($0.text)") },
      createdLater.observeRemoval { _ in told.append("created later: removed") },
    ]

    try map.restore(from: slot)
    #expect(kept.value.text == "saved", "the snapshot wins over a newer stamp")
    #expect(map.find(Note.self, id: "removed later")?.value.text == "saved")
    #expect(removedLater.isRemoved, "a handle on a removed entity stays removed")
    #expect(createdLater.isRemoved)
    #expect(map.find(Note.self, id: "created later") == nil)
    #expect(scratch.value.text == "scratch, played", "types not persisted are untouched")
    #expect(told.value.sorted() == ["created later: removed", "kept: saved"])

    // The snapshot's stamps hold: an older replay is refused, a newer write applies.
    map.store(Note(id: "kept", text: "newer"), modifiedAt: 15)
    #expect(kept.value.text == "newer", "15 is newer than the snapshot's 10")
    // The store holds the snapshot too, for the next launch.
    try map.flush()
    let relaunched = try launch(directory.database)
    #expect(relaunched.find(Note.self, id: "created later") == nil)
    #expect(relaunched.find(Note.self, id: "removed later")?.value.text == "saved")
    withExtendedLifetime((subscriptions, removedLater)) {}
  }

  @Test("Live queries and aliases of persisted types show the snapshot after one notification")
  func queriesAndAliasesFollow() throws {
    let directory = TemporaryDirectory()
    let map = try launch(directory.database)
    let slot = directory.path + "/slot.sqlite"
    let saved = map.store((0..<4).map { Note(id: "n\($0)", text: "saved \($0)") })
    map.store(Note(id: "n1", text: "pinned"), named: .pinned)
    try map.save(to: slot)
    withExtendedLifetime(saved) {}

    // After the save: memory holds other notes; n0...n3 are only in the store.
    let later = map.store((4..<6).map { Note(id: "n\($0)", text: "later \($0)") })
    map.store(Note(id: "n5", text: "later 5"), named: .pinned)
    let timeline = map.query(Note.self, sortedBy: { $0.id < $1.id })
    let pinned = map.find(named: .pinned)
    #expect(timeline.value.map(\.id) == ["n0", "n1", "n2", "n3", "n4", "n5"])
    let lists = Locked<[[String]]>([])
    let pins = Locked<[String?]>([])
    let subscriptions = [
      timeline.observe { lists.append($0.map(\.id)) },
      pinned.observe { pins.append($0?.id) },
    ]

    try map.restore(from: slot)
    #expect(timeline.value.map(\.id) == ["n0", "n1", "n2", "n3"])
    #expect(timeline.value.map(\.text) == ["saved 0", "pinned", "saved 2", "saved 3"])
    #expect(lists.value == [["n0", "n1", "n2", "n3"]], "the query is told once")
    #expect(pinned.value?.id == "n1")
    #expect(pins.value == ["n1"], "the alias is told once")
    #expect(map.find(Note.self, id: "n4") == nil && map.find(Note.self, id: "n5") == nil)
    #expect(later.value.isEmpty, "the batch handle lost its removed members")
    withExtendedLifetime(subscriptions) {}
  }

  @Test("Tombstones become the snapshot's")
  func tombstonesAreTheSnapshots() throws {
    let directory = TemporaryDirectory()
    let map = try launch(directory.database)
    let slot = directory.path + "/slot.sqlite"
    let deleted = map.store(Note(id: "deleted", text: "v1"), modifiedAt: 5)
    map.remove(Note.self, id: "deleted")
    try map.save(to: slot)
    // Stored again, newer: its tombstone goes, in memory and in the store.
    let back = map.store(Note(id: "deleted", text: "v2"), modifiedAt: 8)
    #expect(!back.isRemoved)
    try map.restore(from: slot)
    #expect(back.isRemoved, "the snapshot has it removed")
    #expect(map.store(Note(id: "deleted", text: "replay"), modifiedAt: 5).isRemoved)
    #expect(!map.store(Note(id: "deleted", text: "newer"), modifiedAt: 6).isRemoved)
    withExtendedLifetime(deleted) {}
  }

  @Test("A bad snapshot is a clear error and changes nothing")
  func badSnapshotsChangeNothing() throws {
    let directory = TemporaryDirectory()
    let map = try launch(directory.database)
    let note = map.store(Note(id: "a", text: "in memory"))
    try map.flush()
    let text = directory.path + "/text.sqlite"
    try Data("a text file\n".utf8).write(to: URL(fileURLWithPath: text))
    let good = directory.path + "/good.sqlite"
    try map.save(to: good)
    let goodBytes = try #require(FileManager.default.contents(atPath: good))
    let truncated = directory.path + "/truncated.sqlite"
    try goodBytes.prefix(goodBytes.count / 2).write(to: URL(fileURLWithPath: truncated))
    let newer = directory.path + "/newer.sqlite"
    try goodBytes.write(to: URL(fileURLWithPath: newer))
    #expect(pragma("user_version = 99", at: newer, writable: true) != "error")
    let foreign = directory.path + "/foreign.sqlite"
    #expect(pragma("user_version = 1", at: foreign, writable: true) != "error")
    map.update(Note.self, id: "a") { $0.text = "changed after the save" }

    let cases: [(String, SQLiteStore.Error.Kind)] = [
      (directory.path + "/missing.sqlite", .missingFile), (text, .notADatabase),
      (truncated, .damaged), (directory.database, .sameFile), (newer, .newerSchema),
      (foreign, .notConcord),
    ]
    for (path, kind) in cases {
      let error = #expect(throws: SQLiteStore.Error.self, "\(path)") {
        try map.restore(from: path)
      }
      #expect(error?.kind == kind, "\(path): \(error?.description ?? "")")
      #expect(note.value.text == "changed after the save", "\(path) changed memory")
    }
    try map.flush()
    #expect(
      try launch(directory.database).find(Note.self, id: "a")?.value.text
        == "changed after the save")
  }

  @Test("Writes committed just before the restore reach the store first, then are replaced")
  func pendingWritesAreReplaced() throws {
    let directory = TemporaryDirectory()
    let map = try launch(directory.database)
    let slot = directory.path + "/slot.sqlite"
    let notes = map.store((0..<100).map { Note(id: "n\($0)", text: "saved") })
    try map.save(to: slot)
    // No flush: these are still on their way to the store when the restore starts.
    let more = map.store((100..<200).map { Note(id: "n\($0)", text: "pending") })
    for id in 0..<100 { map.update(Note.self, id: "n\(id)") { $0.text = "pending" } }
    try map.restore(from: slot)
    #expect(notes.value.count == 100 && notes.value.allSatisfy { $0.text == "saved" })
    #expect(more.value.isEmpty)
    #expect(map.find(Note.self, id: "n150") == nil)
    try map.flush()
    let store = try SQLiteStore(path: directory.path + "/check.sqlite", seededFrom: slot)
    #expect(try store.rowCount(kind: "Note") == 100)
    #expect(try launch(directory.database).find(Note.self, id: "n150") == nil)
  }

  @Test(
    "save(to:) and restore(from:) inside a write stop the program with a message",
    arguments: ["save", "restore"])
  func savingOrRestoringInsideAWriteStops(call: String) async {
    let result = await #expect(
      processExitsWith: .failure, observing: [\.standardErrorContent]
    ) { [call = call as String] in
      let directory = TemporaryDirectory()
      let map = try launch(directory.database)
      let slot = directory.path + "/slot.sqlite"
      try map.save(to: slot)
      map.transaction { _ in
        map.store(Note(id: "a", text: "in the body"))
        if call == "save" { try? map.save(to: slot) } else { try? map.restore(from: slot) }
      }
    }
    // NB: optimized builds stop without printing a precondition's message.
    #if DEBUG
      let stderr = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
      #expect(
        stderr.contains(
          "\(call == "save" ? "save(to:)" : "restore(from:)") was called inside a write"))
    #else
      #expect(result != nil)
    #endif
  }
}
