import Concord
import ConcordSQLite
import Foundation

#if canImport(SQLite3)
  import SQLite3
#else
  import CSQLite
#endif

extension Workloads {
  /// A fresh database file in the temporary directory, removed with its WAL when `body` ends.
  func withDatabase<R>(_ body: (String) throws -> R) rethrows -> R {
    let path = NSTemporaryDirectory() + "concord-bench-\(UUID().uuidString).sqlite"
    defer {
      for suffix in ["", "-wal", "-shm", "-concord"] {
        try? FileManager.default.removeItem(atPath: path + suffix)
      }
    }
    return try body(path)
  }

  /// A map persisting `Model`, `Person`, `Title` and `Post` in `path`.
  func persistentMap(_ path: String) -> IdentityMap {
    let map = IdentityMap(persistence: try! SQLiteStore(path: path))
    map.persist(Model.self)
    map.persist(Person.self)
    map.persist(Title.self)
    map.persist(Post.self)
    return map
  }

  /// Single-entity writes with persistence on, as the calling thread pays for them (the
  /// background writer's work is not in the time), against the same writes to a map without
  /// persistence, over `n` held entities. The note says how fast the writer drains them.
  func persistWrite() -> Result {
    let writes = quick ? 10_000 : 50_000
    var drained: [Double] = []
    var round = 0
    var result = withDatabase { path in
      let map = persistentMap(path)
      let handles = (0..<n).map { map.store(Model($0)) }
      try! map.flush()
      let (plain, plainHandles) = filledMap(n)
      let result = compare(
        "persist.write",
        map: {
          round += 1
          let ns = nanoseconds {
            for step in 0..<writes {
              blackHole(map.store(Model((step &* 7_919) % n, round: round)))
            }
          }
          drained.append(nanoseconds { try! map.flush() } / Double(writes))
          return ns / Double(writes)
        },
        floor: {
          round += 1
          return nanoseconds {
            for step in 0..<writes {
              blackHole(plain.store(Model((step &* 7_919) % n, round: round)))
            }
          } / Double(writes)
        })
      precondition(map.count == n, "every entity stayed in memory")
      withExtendedLifetime((handles, plainHandles)) {}
      return result
    }
    let drain = median(drained)
    result.note =
      "floor: the same writes without persistence; the writer then needs \(formatTime(drain)) a write more to reach the disk"
    result.extra = [("writerDrainNsPerWrite", drain)]
    return result
  }

  /// A page of 100 aggregates (1 author + 5 books each) stored with persistence on, against
  /// the same page on a map without it. Each round changes every author.
  ///
  /// NB: both maps, and the last page each stored, live from one sample to the next, so every
  /// timed page writes over entities in memory. Until 0.4.0 the handle went with its sample
  /// and the floor's map too: the first page of each sample then wrote, on the map with
  /// persistence, over its 610 entities (100 posts, 10 authors, 500 books) that only the file
  /// had, and read and decoded them first, about two fifths of the row, while the floor
  /// inserted into an empty map. `persist.find.cold` and `query.open.persisted` measure those
  /// reads.
  func persistPage() -> Result {
    let rounds = quick ? 20 : 100
    var round = 0
    func page(_ round: Int) -> [Post] {
      (0..<100).map { id in
        var post = Post(id)
        post.author.name += "-\(round)"
        return post
      }
    }
    return withDatabase { path in
      let map = persistentMap(path)
      let plain = IdentityMap()
      var held: EntityObserver<[Post]>?
      var plainHeld: EntityObserver<[Post]>?
      var result = compare(
        "persist.page",
        map: {
          round += 1
          let pages = (0..<rounds).map { page(round * rounds + $0) }
          let ns = nanoseconds {
            for page in pages { held = map.store(page) }
          }
          try! map.flush()
          return ns / Double(rounds)
        },
        floor: {
          round += 1
          let pages = (0..<rounds).map { page(round * rounds + $0) }
          let ns = nanoseconds {
            for page in pages { plainHeld = plain.store(page) }
          }
          return ns / Double(rounds)
        })
      precondition(map.count == 610 && plain.count == 610, "every entity stayed in memory")
      blackHole((held, plainHeld))
      result.note = "floor: the same page on a map without persistence"
      return result
    }
  }

  /// A `find` of an entity that is only in the store (read, decoded, admitted, released
  /// again), against a raw `SELECT` of the same row by primary key on the same file, its key
  /// encoded and its bytes decoded with the store's coders. Until 0.4.0 the floor did neither:
  /// it took keys encoded in advance, and did not decode. A cache of the file must do both, as
  /// the map does.
  func persistFindCold() -> Result {
    let finds = quick ? 5_000 : 20_000
    return withDatabase { path in
      let map = persistentMap(path)
      for start in stride(from: 0, to: n, by: 1_000) {
        _ = map.store((start..<min(n, start + 1_000)).map { Model($0) })
      }
      try! map.flush()
      let store = try! SQLiteStore(path: path)
      var database: OpaquePointer?
      sqlite3_open_v2(path, &database, SQLITE_OPEN_READONLY, nil)
      var statement: OpaquePointer?
      sqlite3_prepare_v2(
        database, "SELECT payload, stamp FROM entities WHERE kind = ?1 AND key = ?2", -1,
        &statement, nil)
      let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
      var offset = 0
      var result = compare(
        "persist.find.cold",
        map: {
          offset += finds
          return nanoseconds {
            for step in 0..<finds {
              let found = map.find(Model.self, id: ((offset + step) &* 7_919) % n)
              precondition(found != nil, "the row is there")
              blackHole(found)
            }
          } / Double(finds)
        },
        floor: {
          offset += finds
          var bytes = 0
          let ns = nanoseconds {
            for step in 0..<finds {
              let key = try! store.encode(((offset + step) &* 7_919) % n)
              sqlite3_bind_text(statement, 1, "Model", -1, transient)
              key.withUnsafeBytes {
                _ = sqlite3_bind_blob(statement, 2, $0.baseAddress, Int32($0.count), transient)
              }
              precondition(sqlite3_step(statement) == SQLITE_ROW, "the row is there")
              let count = Int(sqlite3_column_bytes(statement, 0))
              let payload = Array(
                UnsafeRawBufferPointer(start: sqlite3_column_blob(statement, 0), count: count))
              // NB: decoded with the store's decoder, as any cache of the file must.
              bytes &+= try! store.decode(Model.self, from: payload).id
              sqlite3_reset(statement)
            }
          }
          blackHole(bytes)
          return ns / Double(finds)
        })
      sqlite3_finalize(statement)
      sqlite3_close(database)
      precondition(map.count == 0, "every found entity was released again")
      result.note =
        "floor: a raw SELECT of the row by primary key, its key encoded and its bytes decoded "
        + "with the store's coders"
      return result
    }
  }

  /// Opening a live query over 10,000 persisted entities that are not in memory, per row, after
  /// a restart: the store's rows read in one scan, decoded and admitted, and held by the query.
  /// Against finding the same entities one by one, cold, as `persist.find.cold` does (each
  /// found entity released again): the target is 2× that.
  func queryOpenPersisted() -> Result {
    let rows = 10_000
    return withDatabase { path in
      var map = persistentMap(path)
      for start in stride(from: 0, to: rows, by: 1_000) {
        _ = map.store((start..<start + 1_000).map { Model($0) })
      }
      try! map.flush()
      map = persistentMap(path)
      var result = compare(
        "query.open.persisted",
        map: {
          var opened: EntityObserver<[Model]>?
          let ns = nanoseconds { opened = map.query(Model.self, filter: { $0.score >= 0 }) }
          precondition(opened?.value.count == rows, "every row is in the result")
          opened = nil
          precondition(map.count == 0, "closing the query released every row")
          return ns / Double(rows)
        },
        floor: {
          nanoseconds {
            for id in 0..<rows {
              let found = map.find(Model.self, id: id)
              precondition(found != nil, "the row is there")
              blackHole(found)
            }
          } / Double(rows)
        })
      result.note = "floor: the map's cold finds of the same rows (persist.find.cold), per row"
      return result
    }
  }

  // MARK: Readers and loads

  /// How long each call of `read` took, in nanoseconds, on a thread of its own that calls it
  /// over and over while the calling thread runs `load`; and how long `load` took.
  func waits(of read: @escaping @Sendable () -> Void, during load: () -> Void) -> (
    waits: [Double], load: Double
  ) {
    let started = DispatchSemaphore(value: 0)
    let stopped = DispatchSemaphore(value: 0)
    let stop = StopFlag()
    let waits = LockedWaits()
    Thread.detachNewThread {
      var local: [Double] = []
      local.reserveCapacity(1 << 20)
      started.signal()
      while !stop.isSet {
        local.append(nanoseconds(read))
      }
      waits.set(local)
      stopped.signal()
    }
    started.wait()
    let loadTime = nanoseconds(load)
    stop.set()
    stopped.wait()
    return (waits.value, loadTime)
  }

  /// The longest wait of a `find` of an entity a handle holds, on one thread, while another
  /// thread opens a live query over 10,000 persisted rows that only the file has: the rows are
  /// read and decoded outside the map's lock, and admitted under it 128 at a time. Against the
  /// same reader while the other thread reads and decodes the same rows with no map at all:
  /// the scheduling noise of two busy threads, and nothing of the map. Each sample is one
  /// load's longest wait; the note gives the 99.9th percentile of every wait.
  func readDuringLoad() -> Result {
    let rows = 10_000
    return withDatabase { path in
      do {
        let map = persistentMap(path)
        for start in stride(from: 0, to: rows, by: 1_000) {
          _ = map.store((start..<start + 1_000).map { Model($0) })
        }
        try! map.flush()
      }
      var tails: [Double] = []
      var floorTails: [Double] = []
      var loads: [Double] = []
      /// The longest of `waits`, and its 99.9th percentile into `tails`.
      func longest(_ waits: [Double], _ tails: inout [Double]) -> Double {
        let sorted = waits.sorted()
        tails.append(sorted[min(sorted.count - 1, sorted.count * 999 / 1_000)])
        return sorted.last ?? 0
      }
      var result = compare(
        "read.during.load",
        map: {
          let map = persistentMap(path)
          let held = map.store(Person(id: 1, name: "held"))
          var opened: EntityObserver<[Model]>?
          let (waits, load) = waits(of: { blackHole(map.find(Person.self, id: 1)) }) {
            opened = map.query(Model.self)
            precondition(opened?.value.count == rows, "every row is in the result")
          }
          // NB: closed once the reader stopped: the query's release is not the load.
          opened = nil
          loads.append(load)
          withExtendedLifetime(held) {}
          return longest(waits, &tails)
        },
        floor: {
          let map = persistentMap(path)
          let held = map.store(Person(id: 1, name: "held"))
          let store = try! SQLiteStore(path: path)
          let (waits, _) = waits(of: { blackHole(map.find(Person.self, id: 1)) }) {
            let records = try! store.records(kind: "Model")
            let decoder = JSONDecoder()
            var decoded = 0
            for (_, record) in records where !record.payload.isEmpty {
              blackHole(try! decoder.decode(Model.self, from: Data(record.payload)))
              decoded += 1
            }
            precondition(decoded == rows, "every row is decoded")
          }
          withExtendedLifetime(held) {}
          return longest(waits, &floorTails)
        })
      let tail = median(tails)
      let floorTail = median(floorTails)
      result.note =
        "the longest wait of a find while a query loads 10,000 rows (\(formatTime(median(loads))) a load); p99.9 \(formatTime(tail)), floor's \(formatTime(floorTail)); floor: the same reader while the rows are read and decoded with no map"
      result.extra = [
        ("p999NsPerOp", tail), ("baselineP999NsPerOp", floorTail), ("loadNs", median(loads)),
      ]
      return result
    }
  }

  // MARK: Save slots

  /// A database of `n` models, written by a map, and a snapshot of it: what the save-slot rows
  /// start from. `body` gets the database's path and the snapshot's.
  func withSavedDatabase<R>(_ body: (String, String) -> R) -> R {
    withDatabase { path in
      withDatabase { slot in
        do {
          let map = persistentMap(path)
          for start in stride(from: 0, to: n, by: 1_000) {
            _ = map.store((start..<min(n, start + 1_000)).map { Model($0) })
          }
          try! map.save(to: slot)
        }
        return body(path, slot)
      }
    }
  }

  /// Copies the database at `source` into the one at `destination` with SQLite's online backup,
  /// all pages in one step: the save-slot rows' floor.
  func rawBackup(from source: String, to destination: String) {
    var from: OpaquePointer?
    var to: OpaquePointer?
    sqlite3_open_v2(source, &from, SQLITE_OPEN_READONLY, nil)
    sqlite3_open_v2(destination, &to, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil)
    let backup = sqlite3_backup_init(to, "main", from, "main")
    precondition(sqlite3_backup_step(backup, -1) == SQLITE_DONE, "the backup copies every page")
    sqlite3_backup_finish(backup)
    sqlite3_close(to)
    sqlite3_close(from)
  }

  /// `map.save(to:)` of `n` persisted models, per model: the flush, the backup into a
  /// temporary file beside the slot, its switch to one self-contained file, the fsyncs and the
  /// rename. Against a raw `sqlite3_backup` of the same file into a new file.
  func persistSave() -> Result {
    withSavedDatabase { path, slot in
      let map = persistentMap(path)
      let copy = slot + ".floor"
      defer { try? FileManager.default.removeItem(atPath: copy) }
      var result = compare(
        "persist.save",
        map: { nanoseconds { try! map.save(to: slot) } / Double(n) },
        floor: {
          try? FileManager.default.removeItem(atPath: copy)
          return nanoseconds { rawBackup(from: path, to: copy) } / Double(n)
        })
      result.note = "per model; floor: a raw sqlite3_backup of the same file into a new file"
      return result
    }
  }

  /// `map.restore(from:)` of a snapshot of `n` models into a map that holds none of them in
  /// memory (loading a slot at launch), per model: the snapshot's checks, the flush, the backup
  /// into the store's database, and the reload of what memory holds. Against a raw
  /// `sqlite3_backup` of the same snapshot into a database in WAL mode, as the store's is.
  func persistRestore() -> Result {
    withSavedDatabase { path, slot in
      let map = persistentMap(path)
      return withDatabase { copy in
        _ = try! SQLiteStore(path: copy)
        var result = compare(
          "persist.restore",
          map: {
            let ns = nanoseconds { try! map.restore(from: slot) }
            precondition(map.count == 0, "nothing was in memory, nothing is")
            return ns / Double(n)
          },
          floor: { nanoseconds { rawBackup(from: slot, to: copy) } / Double(n) })
        precondition(
          try! SQLiteStore(path: copy).rowCount(kind: "Model") == n, "the floor copied every row")
        result.note =
          "per model, nothing in memory; floor: a raw sqlite3_backup of the snapshot into a WAL "
          + "database"
        return result
      }
    }
  }
}

/// A flag one thread sets and another polls, for `waits(of:during:)`.
final class StopFlag: @unchecked Sendable {
  // NB: @unchecked because `lock` guards `flag`.
  private let lock = NSLock()
  private var flag = false

  var isSet: Bool { lock.withLock { flag } }
  func set() { lock.withLock { flag = true } }
}

/// The waits the reader of `waits(of:during:)` measured, handed to the thread that asked.
final class LockedWaits: @unchecked Sendable {
  // NB: @unchecked because `lock` guards `waits`.
  private let lock = NSLock()
  private var waits: [Double] = []

  var value: [Double] { lock.withLock { waits } }
  func set(_ waits: [Double]) { lock.withLock { self.waits = waits } }
}
