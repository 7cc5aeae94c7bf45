import Concord
import ConcordTesting
import Foundation
import TestSupport
import Testing

@testable import ConcordSQLite

// A seeded model test of two maps sharing one file (two stores in one process, each to the
// other a process): random stamped and unstamped writes, removals with and without tombstones,
// transactions, flushes, syncs, handles and queries kept and dropped, and restarts, on both
// sides. The model is the file: after each checkpoint (both sides flushed, then synced), every
// book each map shows, through `find`, a held handle or a live query, is the file's, and the
// two maps agree. Between checkpoints, a map's own writes, and the other's it has not synced,
// may differ, as they do between processes.

@Suite("Sharing: two maps over one file agree with it after every sync (seeded)")
struct SharingModelTests {
  static let ids = (0..<6).map { "b\($0)" }

  /// The books the file holds, live ones only, by id.
  static func fileBooks(_ store: SQLiteStore) throws -> [String: SharedBook] {
    var books: [String: SharedBook] = [:]
    for (_, record) in try store.records(kind: "Book") where !record.isTombstone {
      let book = try store.decode(SharedBook.self, from: record.payload)
      books[book.id] = book
    }
    return books
  }

  /// One side of the model: a map over the shared file, the handles it keeps and its query.
  final class Party {
    let name: String
    let path: String
    var side: Side
    var handles: [String: EntityObserver<SharedBook>] = [:]
    var query: EntityObserver<[SharedBook]>?
    var alias: EntityObserver<SharedBook?>?

    init(_ name: String, _ path: String) throws {
      self.name = name
      self.path = path
      side = try Side(path)
    }

    func restart() throws {
      try side.map.flush()
      handles = [:]
      query = nil
      alias = nil
      side = try Side(path)
    }
  }

  static let current = AliasKey<SharedBook>("current")

  @Test("Random runs", arguments: 0..<8)
  func randomRun(seed: UInt64) throws {
    var random = SeededGenerator(seed: seed &+ 0x5_4A7E)
    let directory = TemporaryDirectory()
    let parties = [try Party("app", directory.database), try Party("widget", directory.database)]
    let steps = max(200, randomSteps(share: 100))
    var serial = 0
    // NB: an alias naming an entity another process removed is emptied in the maps that hold
    // it, but the store keeps its record: when the entity is made again, the record shows it
    // and those maps do not, until the alias is set again. Checked: the entity was removed.
    var removed: Set<String> = []
    for step in 0..<steps {
      let party = parties[Int.random(in: 0..<2, using: &random)]
      let map = party.side.map
      let id = Self.ids.randomElement(using: &random)!
      serial += 1
      let title = "\(party.name)-\(serial)"
      func version() -> Double? {
        Bool.random(using: &random) ? Double(Int.random(in: 1...30, using: &random)) : nil
      }
      switch Int.random(in: 0..<100, using: &random) {
      case 0..<35: map.store(SharedBook(id, title, version()))
      case 35..<45:
        map.transaction { transaction in
          for other in Self.ids.shuffled(using: &random).prefix(3) {
            transaction.store(SharedBook(other, "\(title)-\(other)", version()))
          }
        }
      case 45..<52:
        map.remove(SharedBook.self, id: id)
        removed.insert(id)
      case 52..<57:
        map.remove(
          SharedBook.self, id: id, tombstone: Double(Int.random(in: 1...30, using: &random)))
        removed.insert(id)
      case 57..<67: try map.flush()
      case 67..<77: try map.syncExternalChanges()
      case 77..<85:
        if party.handles[id] == nil {
          party.handles[id] = map.find(SharedBook.self, id: id)
        } else {
          party.handles[id] = nil
        }
      case 85..<88: party.query = party.query == nil ? map.query(SharedBook.self) : nil
      case 88..<91:
        map.store(SharedBook(id, title, version()), named: Self.current)
        party.alias = map.find(named: Self.current)
      case 91..<92: map.removeAlias(named: Self.current)
      case 92..<94: try party.restart()
      default: try checkpoint(parties, "step \(step), seed \(seed)", removed)
      }
    }
    try checkpoint(parties, "the end, seed \(seed)", removed)
  }

  /// Flushes both sides, syncs both, and checks that every map shows the file.
  func checkpoint(_ parties: [Party], _ step: String, _ removed: Set<String>) throws {
    for party in parties { try party.side.map.flush() }
    for party in parties { try party.side.map.syncExternalChanges() }
    let file = try Self.fileBooks(parties[0].side.store)
    let store = parties[0].side.store
    let named = try store.aliasRecord(named: "current").map {
      try store.decode([String].self, from: $0.payload)
    }
    let current = named?.first.flatMap { file[$0] }
    /// Whether `value` is the alias the file shows.
    func isCurrent(_ value: SharedBook?) -> Bool {
      value == current || (value == nil && named?.first.map(removed.contains) == true)
    }
    for party in parties {
      let map = party.side.map
      for id in Self.ids {
        #expect(
          map.find(SharedBook.self, id: id)?.value == file[id],
          "\(party.name) shows the file's \(id), \(step)")
      }
      for (id, handle) in party.handles where !handle.isRemoved {
        #expect(handle.value == file[id], "\(party.name)'s handle on \(id), \(step)")
      }
      #expect(isCurrent(map.find(named: Self.current).value), "\(party.name)'s alias, \(step)")
      if let alias = party.alias {
        #expect(isCurrent(alias.value), "\(party.name)'s held alias, \(step)")
      }
      if let query = party.query {
        #expect(
          query.value.sorted { $0.id < $1.id } == file.values.sorted { $0.id < $1.id },
          "\(party.name)'s query, \(step)")
      }
    }
  }
}
