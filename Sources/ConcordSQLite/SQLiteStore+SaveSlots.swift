import Concord

#if canImport(SQLite3)
  import SQLite3
#else
  import CSQLite
#endif

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

// Save slots: seeded databases and atomic snapshots (see "Save slots" in Persistence and
// Offline).
//
// A snapshot is written by SQLite's online backup into a temporary file beside its target, in
// rollback-journal mode so that it is one self-contained file, then fsynced, renamed over the
// target (an atomic step on every POSIX file system) and the directory fsynced. A crash before
// the rename leaves the old target and a stray temporary file, which the next save to the same
// target removes; a crash after it leaves the new one.

extension SQLiteStore {
  /// Opens the database at `path`; when there is no file there, first copies `seed` to it: a
  /// database shipped with the app (made by ``save(to:)``), so that the first launch starts
  /// from it rather than from nothing.
  ///
  /// ```swift
  /// let seed = Bundle.main.path(forResource: "starter", ofType: "sqlite")!
  /// let store = try SQLiteStore(path: cachesDirectory + "/concord.sqlite", seededFrom: seed)
  /// ```
  ///
  /// The seed is opened read-only and never written, so it may sit in a read-only bundle. The
  /// copy is atomic: a crash while seeding leaves no file at `path`, and the next launch seeds
  /// again. Once `path` exists the seed is not read at all.
  ///
  /// - Throws: ``Error`` with kind ``Error/Kind/sameFile`` when `seed` is `path` itself, and
  ///   when `path` does not exist yet, the errors of a bad seed: ``Error/Kind/missingFile``,
  ///   ``Error/Kind/notADatabase``, ``Error/Kind/notConcord``, ``Error/Kind/newerSchema`` or
  ///   ``Error/Kind/damaged``; then those of ``init(path:)``. Nothing is written when it
  ///   throws.
  public convenience init(path: String, seededFrom seed: String) throws {
    try Self.refuseSameFile(seed, path, "the seed", "the database it seeds")
    if !FileManager.default.fileExists(atPath: path) {
      let source = try _Snapshot.open(seed, role: "the seed")
      try _Snapshot.write(from: source, to: path, hook: nil)
    }
    try self.init(path: path)
  }

  /// Writes a consistent snapshot of everything the database holds to `path`, atomically: a
  /// crash at any moment leaves the file that was at `path` before, whole, or the new snapshot,
  /// whole, never a mix.
  ///
  /// ```swift
  /// try map.save(to: slotsDirectory + "/slot-1.sqlite")  // flushes first, then this
  /// ```
  ///
  /// It snapshots what the file holds: changes the map has committed and not yet written are
  /// not in it. `IdentityMap.save(to:)` flushes them first; call that one from an app. The
  /// snapshot is a single file (no `-wal` beside it) that ``init(path:seededFrom:)`` and
  /// `IdentityMap.restore(from:)` read. Saving blocks other reads of the store while it copies,
  /// never the map's writes, which reach the store after it.
  ///
  /// - Throws: ``Error`` with kind ``Error/Kind/sameFile`` when `path` is the store's own file,
  ///   ``Error/Kind/cannotWrite`` when the snapshot cannot be written beside `path` (a read-only
  ///   or missing directory, a full disk), and ``Error/Kind/sqlite`` when reading the database
  ///   fails. The file at `path` is untouched when it throws, but for one case: the directory
  ///   could not be synced after the rename, and the new snapshot is in place, not yet durable
  ///   through a power loss.
  /// - Complexity: O(size of the database).
  public func save(to path: String) throws {
    try save(to: path, hook: nil)
  }

  /// Replaces everything the database holds with the snapshot at `path`, made by
  /// ``save(to:)``, in one transaction: other connections see the old database or the
  /// snapshot, and a crash leaves one or the other.
  ///
  /// `IdentityMap.restore(from:)` calls it, and then makes memory agree; call that one from
  /// an app, since a map over this store would otherwise keep showing what it had in memory.
  ///
  /// Shared (``Sharing/shared``), the other processes' maps reload what they hold from the
  /// restored file at their next sync.
  ///
  /// - Throws: ``Error`` when `path` is not a snapshot this store can read, changing nothing:
  ///   ``Error/Kind/missingFile``, ``Error/Kind/notADatabase``, ``Error/Kind/notConcord``,
  ///   ``Error/Kind/damaged``, ``Error/Kind/newerSchema``, or ``Error/Kind/sameFile`` for the
  ///   store's own file; ``Error/Kind/sqlite`` when SQLite fails to copy it;
  ///   ``Error/Kind/readOnly`` for a read-only store.
  /// - Complexity: O(size of the snapshot).
  public func restore(from path: String) throws {
    if let writeRefusal { throw writeRefusal }
    try Self.refuseSameFile(path, self.path, "the snapshot", "the store's own file")
    let source = try _Snapshot.open(path, role: "the snapshot")
    try writer.withLock {
      try writer.retryingBusy {
        guard let backup = sqlite3_backup_init(writer.handle, "main", source.handle, "main")
        else { throw writer.error(sqlite3_errcode(writer.handle)) }
        // NB: all the pages in one step, which is one transaction of the destination.
        let status = sqlite3_backup_step(backup, -1)
        sqlite3_backup_finish(backup)
        guard status == SQLITE_DONE else { throw writer.error(status) }
      }
      // NB: shared, the log of the file before is gone with it: a new epoch has the other
      // processes reload what they hold (see `SQLiteStore+Sharing.swift`).
      if let log { try log.restart(writer) }
    }
  }

  /// ``save(to:)``, calling `hook` at each step; for the crash tests, which kill the process
  /// there.
  func save(to path: String, hook: ((_SaveStep) -> Void)?) throws {
    try Self.refuseSameFile(path, self.path, "the snapshot", "the store's own file")
    try reader.withLock { try _Snapshot.write(from: reader, to: path, hook: hook) }
  }

  /// Throws ``Error/Kind/sameFile`` when `first` and `second` name one file.
  static func refuseSameFile(
    _ first: String, _ second: String, _ firstRole: String, _ secondRole: String
  ) throws {
    guard _Snapshot.sameFile(first, second) else { return }
    throw Error(
      kind: .sameFile, code: nil,
      message: "\(first) is both \(firstRole) and \(secondRole): give them different paths")
  }
}

/// A step of writing a snapshot, where the crash tests stop the process.
enum _SaveStep: Equatable {
  /// Before the backup starts.
  case beforeBackup
  /// After the backup copied `pages` pages of the temporary file.
  case backedUp(pages: Int32)
  /// After the temporary file is complete and synced, before the rename.
  case beforeRename
  /// After the rename, before the directory is synced.
  case afterRename
}

/// Reading and writing snapshots: what save slots share.
enum _Snapshot {
  /// Opens the snapshot or seed at `path` read-only, after checking that it is whole and
  /// Concord's; `role` names it in errors ("the seed", "the snapshot").
  ///
  /// NB: with `immutable=1`, SQLite takes no lock and makes no `-wal` or `-shm` file beside it:
  /// nothing touches the file or its directory, which may be read-only.
  static func open(_ path: String, role: String) throws -> _Connection {
    try checkFile(path, role: role)
    let connection = try _Connection(readOnly: path)
    do {
      let version = try connection.userVersion()
      if version > SQLiteStore.schemaVersion {
        throw SQLiteStore.Error(
          kind: .newerSchema, code: nil,
          message:
            "\(role) \(path) has schema version \(version); this version of ConcordSQLite reads "
            + "up to \(SQLiteStore.schemaVersion)")
      }
      let statement = try connection.statement(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('entities', "
          + "'aliases')")
      defer { statement.finish() }
      _ = try statement.step()
      guard version >= 1, sqlite3_column_int(statement.handle, 0) == 2 else {
        throw SQLiteStore.Error(
          kind: .notConcord, code: nil,
          message: "\(role) \(path) is an SQLite database, but not one ConcordSQLite wrote")
      }
    } catch let error as SQLiteStore.Error where error.kind == .sqlite {
      throw fileError(error, path: path, role: role)
    }
    return connection
  }

  /// Checks what can be seen without SQLite: that the file exists, starts as an SQLite database
  /// does, and is as long as its header says.
  static func checkFile(_ path: String, role: String) throws {
    let descriptor = _openFile(path, O_RDONLY)
    guard descriptor >= 0 else {
      throw SQLiteStore.Error(
        kind: .missingFile, code: nil, message: "\(role) \(path) does not exist or cannot be read")
    }
    defer { close(descriptor) }
    var header = [UInt8](repeating: 0, count: 100)
    var filled = 0
    while filled < 100 {
      let count = header.withUnsafeMutableBytes {
        read(descriptor, $0.baseAddress! + filled, 100 - filled)
      }
      guard count > 0 else { break }
      filled += count
    }
    header.removeLast(100 - filled)
    let magic = Array("SQLite format 3\0".utf8)
    guard header.count == 100 else {
      // NB: the start of an SQLite file, cut short: a damaged database, not another file.
      let isPrefix =
        !header.isEmpty
        && (header.count < magic.count
          ? header.elementsEqual(magic.prefix(header.count)) : header.starts(with: magic))
      throw SQLiteStore.Error(
        kind: isPrefix ? .damaged : header.isEmpty ? .notConcord : .notADatabase, code: nil,
        message: header.isEmpty
          ? "\(role) \(path) is empty, not a database ConcordSQLite wrote"
          : isPrefix
            ? "\(role) \(path) is damaged: it ends inside its header (\(header.count) bytes)"
            : "\(role) \(path) is not an SQLite database")
    }
    guard header.starts(with: magic) else {
      throw SQLiteStore.Error(
        kind: .notADatabase, code: nil, message: "\(role) \(path) is not an SQLite database")
    }
    func bigEndian(_ offset: Int, _ count: Int) -> Int {
      header[offset..<offset + count].reduce(0) { $0 << 8 | Int($1) }
    }
    let pageSize = bigEndian(16, 2) == 1 ? 65_536 : bigEndian(16, 2)
    // NB: the header's page count is valid when its "version valid for" matches its change
    // counter; SQLite has written it so since 3.7.0.
    guard bigEndian(92, 4) == bigEndian(24, 4) else { return }
    let expected = bigEndian(28, 4) * pageSize
    let size = Int(lseek(descriptor, 0, SEEK_END))
    guard size >= expected else {
      throw SQLiteStore.Error(
        kind: .damaged, code: nil,
        message: "\(role) \(path) is damaged: it is \(size) bytes long, its header says \(expected)"
      )
    }
  }

  /// The error for `error`, which SQLite reported while reading the file at `path`.
  static func fileError(_ error: SQLiteStore.Error, path: String, role: String) -> SQLiteStore.Error
  {
    switch error.code {
    case SQLITE_NOTADB:
      SQLiteStore.Error(
        kind: .notADatabase, code: error.code,
        message: "\(role) \(path) is not an SQLite database (\(error.message))")
    case SQLITE_CORRUPT:
      SQLiteStore.Error(
        kind: .damaged, code: error.code, message: "\(role) \(path) is damaged (\(error.message))")
    default: error
    }
  }

  /// Copies the database of `source` to `target`, atomically (see the top of this file),
  /// calling `hook` at each step.
  static func write(from source: _Connection, to target: String, hook: ((_SaveStep) -> Void)?)
    throws
  {
    let temporary = target + ".concord-saving"
    // NB: left by a save that crashed before its rename; its journal too, which SQLite would
    // otherwise play back into the new temporary file.
    unlink(temporary)
    unlink(temporary + "-journal")
    do {
      hook?(.beforeBackup)
      try backup(from: source, to: temporary, hook: hook)
      try sync(temporary)
      hook?(.beforeRename)
      guard rename(temporary, target) == 0 else { throw posixError("cannot rename it to", target) }
      hook?(.afterRename)
      try sync(directory(of: target))
    } catch {
      unlink(temporary)
      unlink(temporary + "-journal")
      throw error
    }
  }

  /// Copies `source` into a new database at `path`, in rollback-journal mode.
  static func backup(from source: _Connection, to path: String, hook: ((_SaveStep) -> Void)?)
    throws
  {
    let destination: _Connection
    do {
      destination = try _Connection(path: path, create: true)
    } catch let error as SQLiteStore.Error {
      throw SQLiteStore.Error(
        kind: .cannotWrite, code: error.code,
        message: "cannot write a snapshot beside \(path): \(error.message)")
    }
    guard let backup = sqlite3_backup_init(destination.handle, "main", source.handle, "main")
    else { throw cannotWrite(destination, path) }
    // NB: all at once, unless a test stops it between pages.
    let pagesPerStep: Int32 = hook == nil ? -1 : 4
    var status = SQLITE_OK
    while status == SQLITE_OK {
      status = sqlite3_backup_step(backup, pagesPerStep)
      if status == SQLITE_OK || status == SQLITE_DONE {
        hook?(.backedUp(pages: sqlite3_backup_pagecount(backup) - sqlite3_backup_remaining(backup)))
      }
    }
    sqlite3_backup_finish(backup)
    guard status == SQLITE_DONE else { throw cannotWrite(destination, path) }
    // NB: the copy's header says WAL, as its source's does; a snapshot is one file.
    try destination.execute("PRAGMA journal_mode = DELETE")
  }

  static func cannotWrite(_ connection: _Connection, _ path: String) -> SQLiteStore.Error {
    let error = connection.error(sqlite3_errcode(connection.handle))
    return SQLiteStore.Error(
      kind: .cannotWrite, code: error.code,
      message: "cannot write a snapshot at \(path): \(error.message)")
  }

  static func posixError(_ doing: String, _ path: String) -> SQLiteStore.Error {
    SQLiteStore.Error(
      kind: .cannotWrite, code: nil,
      message: "\(doing) \(path): \(String(cString: strerror(errno)))")
  }

  /// Flushes the file or directory at `path` to the disk.
  static func sync(_ path: String) throws {
    let descriptor = _openFile(path, O_RDONLY)
    guard descriptor >= 0 else { throw posixError("cannot open", path) }
    defer { close(descriptor) }
    guard fsync(descriptor) == 0 else { throw posixError("cannot sync", path) }
  }

  /// The directory holding `path`.
  static func directory(of path: String) -> String {
    let url = URL(fileURLWithPath: path)
    return url.deletingLastPathComponent().path
  }

  /// Whether `first` and `second` name one file: the same path once resolved, or, when both
  /// exist, the same file on disk.
  static func sameFile(_ first: String, _ second: String) -> Bool {
    func resolved(_ path: String) -> String {
      URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path
    }
    if resolved(first) == resolved(second) { return true }
    var a = stat()
    var b = stat()
    guard stat(first, &a) == 0, stat(second, &b) == 0 else { return false }
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino
  }
}

/// POSIX `open`, which the name of `FileManager`'s and others' methods hide.
func _openFile(_ path: String, _ flags: Int32) -> Int32 {
  #if canImport(Glibc)
    Glibc.open(path, flags)
  #elseif canImport(Musl)
    Musl.open(path, flags)
  #else
    Darwin.open(path, flags)
  #endif
}
