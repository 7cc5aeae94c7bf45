import Concord

#if canImport(SQLite3)
  import SQLite3
#else
  import CSQLite
#endif

#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// A `PersistentStore` in an SQLite database file, through the system's SQLite.
///
/// ```swift
/// let store = try SQLiteStore(path: cachesDirectory + "/concord.sqlite")
/// let map = IdentityMap(persistence: store)
/// map.persist(Issue.self)
/// ```
///
/// The database runs in WAL mode, so the map's reads (on the calling thread) never wait for
/// its writes (on the map's background writer), each on its own connection. Each group of map
/// commits is one SQLite transaction: a process killed in the middle of one leaves the file
/// with all of it or none of it. With `synchronous = NORMAL`, a commit survives the process
/// crashing; a power loss may take back the last commits, never corrupt the file.
///
/// Entities are kept as JSON (`JSONEncoder`, keys sorted), one row per entity keyed by its kind
/// and its encoded id, with the stamp beside it. An aggregate's row holds its whole value,
/// nested entities included. The schema's version is in `PRAGMA user_version`.
///
/// A store opened with ``init(path:sharing:)`` and ``Sharing/shared`` or ``Sharing/readOnly``
/// shares its file with other processes (an app and its extensions): see "Sharing the store
/// with extensions" in Persistence and Offline.
public final class SQLiteStore: PersistentStore, @unchecked Sendable {
  // NB: @unchecked because each connection and its statements are only used under its lock,
  // and the change log's state under its own.

  /// The schema version this library writes and reads: 2 since 0.4.0, which added the change
  /// log that processes sharing a file read (version 1 files are upgraded when opened).
  public static let schemaVersion: Int32 = 2

  /// Why a store could not be opened or used.
  public struct Error: Swift.Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong, in general. Compare it with `==`, or switch over it with a `default`
    /// case: later versions may add kinds.
    ///
    /// NB: a struct over a name rather than an enum, as `IdentityMapEvent.Kind` is, so that a
    /// new kind of failure does not break an exhaustive `switch`.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
      private let name: String
      private init(_ name: String) { self.name = name }

      /// The path could not be opened: a missing or unwritable directory, say.
      public static let cannotOpen = Kind("cannotOpen")
      /// The file exists but is not an SQLite database.
      public static let notADatabase = Kind("notADatabase")
      /// The database was written by a newer version of this library.
      public static let newerSchema = Kind("newerSchema")
      /// SQLite reported an error while reading or writing.
      public static let sqlite = Kind("sqlite")
      /// A seed or snapshot to read does not exist, or cannot be read.
      public static let missingFile = Kind("missingFile")
      /// A seed or snapshot is an SQLite database, but not one this library wrote.
      public static let notConcord = Kind("notConcord")
      /// A seed or snapshot is damaged: truncated, or its pages do not hold together.
      public static let damaged = Kind("damaged")
      /// A snapshot cannot be written where it was asked: a read-only or missing directory, or
      /// a full disk.
      public static let cannotWrite = Kind("cannotWrite")
      /// Two paths that must differ name one file: a seed and the database it seeds, or a
      /// snapshot and the store's own file.
      public static let sameFile = Kind("sameFile")
      /// The store was opened ``Sharing/readOnly``: it never writes its file. Thrown by the
      /// first `IdentityMap.flush()` after a write of a persisted type, which stayed in memory
      /// only.
      public static let readOnly = Kind("readOnly")
      /// Another process (or another store of this process) holds the file in a mode this one
      /// cannot join: ``Sharing/exclusive`` against ``Sharing/shared`` or ``Sharing/readOnly``.
      public static let lockedByAnotherProcess = Kind("lockedByAnotherProcess")
      /// A process sharing the file runs an older version of this library, whose change log
      /// this one cannot share: update every process that opens the file.
      public static let sharedWithOlderVersion = Kind("sharedWithOlderVersion")

      /// The kind's name, such as `cannotOpen`.
      public var description: String { name }
    }

    /// What went wrong.
    public let kind: Kind
    /// SQLite's result code, when SQLite reported the error.
    public let code: Int32?
    /// What went wrong, for people.
    public let message: String

    /// The message.
    public var description: String { message }
  }

  /// Where the database is.
  public let path: String
  /// How the store shares its file with other processes.
  public let sharing: Sharing
  /// The connection that writes; for a ``Sharing/readOnly`` store, the reading one.
  let writer: _Connection
  /// The connection that reads, and that snapshots copy from.
  let reader: _Connection
  /// The store's claim on the file beside the database (see `_SharingFile.swift`).
  let claim: _SharingClaim
  /// What a sharing store knows of the change log; `nil` for an exclusive one.
  let log: _ChangeLog?
  /// Shared by every call: configured once, then only read. NB: made once, because making an
  /// encoder for each change was a good part of the writer's time.
  private let encoder: JSONEncoder = {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return encoder
  }()
  private let decoder = JSONDecoder()

  /// Opens the database at `path` for this process alone (``Sharing/exclusive``), creating it
  /// (and its schema) if there is none.
  ///
  /// - Throws: ``Error`` with kind ``Error/Kind/cannotOpen`` when the path cannot be opened or
  ///   created, ``Error/Kind/notADatabase`` when the file is not an SQLite database,
  ///   ``Error/Kind/newerSchema`` when a newer version of this library wrote it, and
  ///   ``Error/Kind/lockedByAnotherProcess`` when another process shares it.
  public convenience init(path: String) throws {
    try self.init(opening: path, sharing: .exclusive)
  }

  /// Opens the database at `path` as `sharing` says; see ``init(path:sharing:)``.
  init(opening path: String, sharing: Sharing) throws {
    self.path = path
    self.sharing = sharing
    if sharing == .readOnly {
      // NB: checked before anything is made beside it: a read-only open creates nothing.
      guard Self.fileExists(path) else {
        throw Error(
          kind: .missingFile, code: nil,
          message: "\(path) does not exist; a read-only store opens a database another process made"
        )
      }
    }
    claim = try _SharingClaim.claim(
      path, mode: sharing == .exclusive ? .exclusive : .sharing, position: 0,
      version: Int64(Self.schemaVersion))
    if sharing == .readOnly {
      reader = try _Connection(path: path, readOnlyWAL: ())
      writer = reader
      try Self.checkReadOnly(reader, path: path)
    } else {
      writer = try _Connection(path: path, create: true)
      try Self.prepareSchema(writer, path: path, sharing: sharing)
      reader = try _Connection(path: path, create: false)
      try reader.execute("PRAGMA query_only = ON")
    }
    log = sharing == .exclusive ? nil : try _ChangeLog(reader: reader, claim: claim, path: path)
  }

  /// The file's schema version (0 for a new file), once it is known to be an SQLite database
  /// of a version this library reads; `advice` ends the error for a newer one.
  static func readableVersion(_ connection: _Connection, path: String, advice: String) throws
    -> Int32
  {
    let version: Int32
    do {
      version = try connection.userVersion()
    } catch let error as Error where error.code == SQLITE_NOTADB {
      throw Error(
        kind: .notADatabase, code: error.code,
        message: "\(path) is not an SQLite database (\(error.message))")
    }
    if version > schemaVersion {
      throw Error(
        kind: .newerSchema, code: nil,
        message:
          "\(path) has schema version \(version); this version of ConcordSQLite reads up to "
          + "\(schemaVersion). \(advice)")
    }
    return version
  }

  /// Checks the file, and creates or checks the schema; then, for `sharing`, installs or
  /// removes what logs the changes (see `SQLiteStore+Sharing.swift`).
  private static func prepareSchema(_ connection: _Connection, path: String, sharing: Sharing)
    throws
  {
    let version = try readableVersion(
      connection, path: path, advice: "Update the library, or delete the file to start afresh.")
    try connection.execute("PRAGMA journal_mode = WAL")
    try connection.execute("PRAGMA synchronous = NORMAL")
    if version < schemaVersion {
      try connection.transaction {
        try connection.execute(
          """
          CREATE TABLE IF NOT EXISTS entities (
            kind TEXT NOT NULL, key BLOB NOT NULL, payload BLOB NOT NULL, stamp REAL,
            PRIMARY KEY (kind, key)) WITHOUT ROWID
          """)
        try connection.execute(
          """
          CREATE TABLE IF NOT EXISTS aliases (
            name TEXT NOT NULL PRIMARY KEY, kind TEXT NOT NULL, payload BLOB NOT NULL,
            stamp REAL) WITHOUT ROWID
          """)
        try _ChangeLog.createTables(connection)
        try connection.execute("PRAGMA user_version = \(schemaVersion)")
      }
    }
    try _ChangeLog.prepare(connection, logging: sharing == .shared)
  }

  // MARK: PersistentStore

  /// JSON, keys sorted, so that equal ids make equal keys.
  public func encode<Value: Encodable>(_ value: Value) throws -> [UInt8] {
    Array(try encoder.encode(value))
  }

  /// Decodes what ``encode(_:)`` made.
  public func decode<Value: Decodable>(_ type: Value.Type, from bytes: [UInt8]) throws -> Value {
    try decoder.decode(type, from: Data(bytes))
  }

  /// Reads one entity's row, on the reading connection.
  public func record(kind: String, key: [UInt8]) throws -> PersistentRecord? {
    try reader.withLock {
      let statement = try reader.statement(
        "SELECT payload, stamp FROM entities WHERE kind = ?1 AND key = ?2")
      defer { statement.finish() }
      try statement.bind(1, kind)
      try statement.bind(2, key)
      return try statement.step() ? statement.record() : nil
    }
  }

  /// Reads every row of `kind`, tombstones included, on the reading connection: what a live
  /// query of a persisted type starts from.
  public func records(kind: String) throws -> [(key: [UInt8], record: PersistentRecord)] {
    try reader.withLock {
      let statement = try reader.statement(
        "SELECT payload, stamp, key FROM entities WHERE kind = ?1")
      defer { statement.finish() }
      try statement.bind(1, kind)
      var records: [(key: [UInt8], record: PersistentRecord)] = []
      while try statement.step() { records.append((statement.blob(2), statement.record())) }
      return records
    }
  }

  /// Reads the keys and stamps of the tombstones of `kind`, on the reading connection, without
  /// reading any entity's payload.
  public func tombstones(kind: String) throws -> [(key: [UInt8], stamp: Stamp)] {
    try reader.withLock {
      let statement = try reader.statement(
        "SELECT payload, stamp, key FROM entities WHERE kind = ?1 AND length(payload) = 0")
      defer { statement.finish() }
      try statement.bind(1, kind)
      var tombstones: [(key: [UInt8], stamp: Stamp)] = []
      while try statement.step() {
        if let stamp = statement.record().stamp { tombstones.append((statement.blob(2), stamp)) }
      }
      return tombstones
    }
  }

  /// Reads one alias's row, on the reading connection.
  public func aliasRecord(named name: String) throws -> PersistentRecord? {
    try reader.withLock {
      let statement = try reader.statement("SELECT payload, stamp FROM aliases WHERE name = ?1")
      defer { statement.finish() }
      try statement.bind(1, name)
      return try statement.step() ? statement.record() : nil
    }
  }

  /// Applies `changes` in one transaction, on the writing connection. A ``Sharing/shared``
  /// store never replaces a row with an older stamp, and waits for other processes' writes
  /// rather than failing (see "Sharing the store with extensions"); a ``Sharing/readOnly`` one
  /// throws ``Error/Kind/readOnly``.
  public func apply(_ changes: [PersistentChange]) throws {
    guard !changes.isEmpty else { return }
    if let log { return try applyShared(changes, log) }
    try writer.withLock {
      try writer.transaction {
        for change in changes { try apply(change, shared: false) }
      }
    }
  }

  /// Applies one change in the transaction under way; `shared`, a save never replaces a row
  /// with a newer stamp (see `_ChangeLog.upsertEntity`), and one refused so is returned.
  @discardableResult
  func apply(_ change: PersistentChange, shared: Bool) throws -> PersistentStaleWrite? {
    switch change {
    case .save(let kind, let key, let record):
      let statement = try writer.statement(
        shared
          ? _ChangeLog.upsertEntity
          : "INSERT OR REPLACE INTO entities (kind, key, payload, stamp) VALUES (?1, ?2, ?3, ?4)")
      try statement.bind(1, kind)
      try statement.bind(2, key)
      try statement.bind(3, record.payload)
      try statement.bind(4, record.stamp)
      try statement.run()
      if shared { return try staleWrite(change) }
    case .delete(let kind, let key):
      let statement = try writer.statement("DELETE FROM entities WHERE kind = ?1 AND key = ?2")
      try statement.bind(1, kind)
      try statement.bind(2, key)
      try statement.run()
    case .deleteKind(let kind):
      let statement = try writer.statement("DELETE FROM entities WHERE kind = ?1")
      try statement.bind(1, kind)
      try statement.run()
    case .saveAlias(let name, let kind, let record):
      // NB: shared too, the last commit wins: see `_ChangeLog.upsertEntity`.
      let statement = try writer.statement(
        "INSERT OR REPLACE INTO aliases (name, kind, payload, stamp) VALUES (?1, ?2, ?3, ?4)")
      try statement.bind(1, name)
      try statement.bind(2, kind)
      try statement.bind(3, record.payload)
      try statement.bind(4, record.stamp)
      try statement.run()
    case .deleteAlias(let name):
      let statement = try writer.statement("DELETE FROM aliases WHERE name = ?1")
      try statement.bind(1, name)
      try statement.run()
    case .deleteAliases(let kind):
      let statement = try writer.statement("DELETE FROM aliases WHERE kind = ?1")
      try statement.bind(1, kind)
      try statement.run()
    case .deleteEverything:
      try writer.execute("DELETE FROM entities")
      try writer.execute("DELETE FROM aliases")
    }
    return nil
  }

  // MARK: Inspection

  /// How many entities the database holds, all kinds together, or of `kind` only. Tombstones
  /// (see ``tombstoneCount(kind:)``) are not entities and do not count.
  ///
  /// For tests and diagnostics: it reads what has been written, so `IdentityMap.flush()`
  /// first.
  public func rowCount(kind: String? = nil) throws -> Int {
    try count(kind: kind, tombstones: false)
  }

  /// How many tombstones of removed entities (see `TombstonePolicy`) the database holds, all
  /// kinds together, or of `kind` only.
  ///
  /// For tests and diagnostics, as ``rowCount(kind:)``.
  public func tombstoneCount(kind: String? = nil) throws -> Int {
    try count(kind: kind, tombstones: true)
  }

  private func count(kind: String?, tombstones: Bool) throws -> Int {
    let payload = tombstones ? "length(payload) = 0" : "length(payload) > 0"
    return try reader.withLock {
      let statement: _Statement
      if let kind {
        statement = try reader.statement(
          "SELECT count(*) FROM entities WHERE kind = ?1 AND \(payload)")
        try statement.bind(1, kind)
      } else {
        statement = try reader.statement("SELECT count(*) FROM entities WHERE \(payload)")
      }
      defer { statement.finish() }
      _ = try statement.step()
      return Int(sqlite3_column_int64(statement.handle, 0))
    }
  }
}

// MARK: - Connections

/// One SQLite connection, its cached statements and its lock.
final class _Connection {
  let lock = Lock()
  private(set) var handle: OpaquePointer?
  private var statements: [String: _Statement] = [:]

  init(path: String, create: Bool) throws {
    let flags =
      SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0)
    try open(path, as: path, flags: flags)
    sqlite3_busy_timeout(handle, 5_000)
  }

  /// Opens the database at `path` for reading only, as a file other processes change: SQLite
  /// never takes its write lock, and reads it through its `-wal` and `-shm` files.
  init(path: String, readOnlyWAL _: Void) throws {
    try open(path, as: path, flags: SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX)
    sqlite3_busy_timeout(handle, 5_000)
  }

  /// Opens the database at `path` read-only, as a file nobody changes: SQLite takes no lock
  /// and writes nothing beside it (`immutable=1`).
  init(readOnly path: String) throws {
    // NB: a URI, whose `%`, `?` and `#` must be escaped in the path.
    var escaped = ""
    for character in path.unicodeScalars {
      switch character {
      case "%": escaped += "%25"
      case "?": escaped += "%3F"
      case "#": escaped += "%23"
      default: escaped.unicodeScalars.append(character)
      }
    }
    try open(
      path, as: "file:\(escaped)?immutable=1",
      flags: SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI)
  }

  /// Opens `filename` (`path`, or a URI naming it) with `flags`; throws ``SQLiteStore/Error``
  /// with kind `cannotOpen`, naming `path`, when SQLite cannot.
  private func open(_ path: String, as filename: String, flags: Int32) throws {
    let status = sqlite3_open_v2(filename, &handle, flags, nil)
    guard status == SQLITE_OK else {
      let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
      sqlite3_close_v2(handle)
      handle = nil
      throw SQLiteStore.Error(
        kind: .cannotOpen, code: status, message: "cannot open \(path): \(message)")
    }
    sqlite3_extended_result_codes(handle, 0)
  }

  deinit {
    statements.removeAll()
    sqlite3_close_v2(handle)
  }

  func withLock<R>(_ body: () throws -> R) rethrows -> R {
    lock.lock()
    defer { lock.unlock() }
    return try body()
  }

  /// The error SQLite reports for `status`.
  func error(_ status: Int32) -> SQLiteStore.Error {
    let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "SQLite error"
    return SQLiteStore.Error(kind: .sqlite, code: status, message: message)
  }

  func check(_ status: Int32) throws {
    guard status == SQLITE_OK else { throw error(status) }
  }

  func execute(_ sql: String) throws {
    try check(sqlite3_exec(handle, sql, nil, nil, nil))
  }

  /// The statement for `sql`, prepared once and reused. NB: reset after each use (`finish`),
  /// not before: a statement left on a row keeps its read transaction open, and in WAL mode
  /// that pins the connection to an old snapshot.
  func statement(_ sql: String) throws -> _Statement {
    if let cached = statements[sql] { return cached }
    var handle: OpaquePointer?
    try check(sqlite3_prepare_v2(self.handle, sql, -1, &handle, nil))
    let statement = _Statement(handle: handle, connection: self)
    statements[sql] = statement
    return statement
  }

  func userVersion() throws -> Int32 {
    let statement = try statement("PRAGMA user_version")
    defer { statement.finish() }
    _ = try statement.step()
    return sqlite3_column_int(statement.handle, 0)
  }

  /// Runs `body` in a transaction, committed if it returns, rolled back if it throws.
  func transaction(_ body: () throws -> Void) throws {
    try execute("BEGIN IMMEDIATE")
    do {
      try body()
      try execute("COMMIT")
    } catch {
      sqlite3_exec(handle, "ROLLBACK", nil, nil, nil)
      throw error
    }
  }
}

/// A prepared statement of a `_Connection`.
final class _Statement {
  let handle: OpaquePointer?
  unowned let connection: _Connection

  init(handle: OpaquePointer?, connection: _Connection) {
    self.handle = handle
    self.connection = connection
  }

  deinit {
    sqlite3_finalize(handle)
  }

  func bind(_ index: Int32, _ text: String) throws {
    try connection.check(sqlite3_bind_text(handle, index, text, -1, _transient))
  }

  func bind(_ index: Int32, _ bytes: [UInt8]) throws {
    // NB: an empty array may have no address, which would bind NULL: a tombstone's payload
    // is an empty blob.
    guard !bytes.isEmpty else {
      return try connection.check(sqlite3_bind_zeroblob(handle, index, 0))
    }
    let status = bytes.withUnsafeBytes {
      sqlite3_bind_blob(handle, index, $0.baseAddress, Int32($0.count), _transient)
    }
    try connection.check(status)
  }

  func bind(_ index: Int32, _ stamp: Stamp?) throws {
    let status =
      if let stamp, !stamp.isNaN {
        sqlite3_bind_double(handle, index, stamp)
      } else {
        sqlite3_bind_null(handle, index)
      }
    try connection.check(status)
  }

  /// Steps once: `true` with a row, `false` when done.
  func step() throws -> Bool {
    switch sqlite3_step(handle) {
    case SQLITE_ROW: return true
    case SQLITE_DONE: return false
    case let status: throw connection.error(status)
    }
  }

  /// Runs a statement that returns no row.
  func run() throws {
    defer { finish() }
    _ = try step()
  }

  /// Ends the statement's run and clears its bindings, for its next use.
  func finish() {
    sqlite3_reset(handle)
    sqlite3_clear_bindings(handle)
  }

  /// The current row as a record: the payload in column 0, the stamp in column 1.
  func record() -> PersistentRecord {
    let stamp: Stamp? =
      sqlite3_column_type(handle, 1) == SQLITE_NULL ? nil : sqlite3_column_double(handle, 1)
    return PersistentRecord(payload: blob(0), stamp: stamp)
  }

  /// The bytes of the blob in `column` of the current row.
  func blob(_ column: Int32) -> [UInt8] {
    let count = Int(sqlite3_column_bytes(handle, column))
    guard count > 0, let bytes = sqlite3_column_blob(handle, column) else { return [] }
    return Array(UnsafeRawBufferPointer(start: bytes, count: count))
  }
}

/// SQLite's `SQLITE_TRANSIENT`: it copies what is bound.
private let _transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
