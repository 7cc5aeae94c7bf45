import Concord
import Dispatch

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

// One store, several processes (see "Sharing the store with extensions" in Persistence and
// Offline).
//
// SQLite in WAL mode already lets several processes read and write one file; what it does not
// do is tell the others. A file opened `.shared` has a change log: the table `concord_changes`,
// to which triggers on `entities` and `aliases` append one entry per row written or deleted
// (its kind and key, its new payload and stamp), in the transaction that writes it, so the log
// never holds a change that did not commit, and holds every change that did, whoever made it
// (a process of an older version of this library, or the `sqlite3` shell, included). Each entry
// carries the number of its transaction (`concord_sharing.txn`, which each writer of this
// library bumps when it begins and when it ends), so that a reader applies each commit as one
// write.
//
// Each sharing store reads the entries past its position, skipping its own (it knows which
// sequence numbers its transactions took), and publishes how far it read in the file beside the
// database (`_SharingFile.swift`); a writer trims the log up to the lowest position of the
// stores still open, and never keeps more than `_ChangeLog.limit` entries: a store whose
// position is trimmed past, or whose file was replaced (a restore: `concord_sharing.epoch`
// changes), reports an incomplete read, and its map reloads what it holds instead.
//
// A process learns that another committed without polling: see `_ChangeWatch`. `PRAGMA
// data_version` then says, without reading a page, whether anything was committed since the
// store last looked.
//
// Writers wait for each other: `BEGIN IMMEDIATE` takes the write lock at once, SQLite's busy
// timeout waits up to 5 seconds for it, and a transaction that still finds the lock taken is
// begun again (`_Connection.retryingBusy`), so `SQLITE_BUSY` never reaches the map. No
// connection holds the write lock outside a transaction: an idle process holds none (the rule
// behind iOS's `0xdead10cc` terminations).

extension SQLiteStore {
  /// How a store shares its database file with other processes: an app and its extensions (a
  /// widget, a share extension, a background task) opening one file in an App Group container.
  ///
  /// A file that one process holds ``exclusive`` cannot be opened ``shared`` or ``readOnly``
  /// by another, nor the other way round: the open throws ``Error/Kind/lockedByAnotherProcess``.
  /// Two stores on one file in one process count as two processes.
  public struct Sharing: Hashable, Sendable, CustomStringConvertible {
    private enum Mode: Hashable, Sendable {
      case exclusive, shared, readOnly
    }

    private let mode: Mode

    private init(_ mode: Mode) { self.mode = mode }

    /// One process reads and writes the file; the default, as before 0.4.0.
    public static var exclusive: Sharing { Sharing(.exclusive) }

    /// Several processes read and write the file; each map applies what the others commit
    /// (see `IdentityMap.syncExternalChanges()`). A row is never replaced by one with an older
    /// stamp, and writers wait for each other rather than fail.
    public static var shared: Sharing { Sharing(.shared) }

    /// This process only reads the file (a widget): it never writes it nor takes its write
    /// lock. The map's writes of persisted types stay in its memory, logged as
    /// `IdentityMapEvent.Kind.notPersisted`, and the next `IdentityMap.flush()` throws
    /// ``Error/Kind/readOnly``.
    public static var readOnly: Sharing { Sharing(.readOnly) }

    /// `exclusive`, `shared` or `readOnly`.
    public var description: String {
      switch mode {
      case .exclusive: "exclusive"
      case .shared: "shared"
      case .readOnly: "readOnly"
      }
    }
  }

  /// Opens the database at `path`, shared with other processes as `sharing` says.
  ///
  /// ```swift
  /// let group = FileManager.default.containerURL(
  ///   forSecurityApplicationGroupIdentifier: "group.com.example.reader")!
  /// let path = group.appendingPathComponent("concord.sqlite").path
  /// let store = try SQLiteStore(path: path, sharing: .shared)    // the app
  /// let store = try SQLiteStore(path: path, sharing: .readOnly)  // its widget
  /// ```
  ///
  /// ``Sharing/exclusive`` is ``init(path:)``. ``Sharing/shared`` creates the file if there is
  /// none, as ``init(path:)`` does. ``Sharing/readOnly`` opens a file another process made, and
  /// creates nothing (it keeps its read position in the file `<path>-concord`, beside the
  /// database, never in the database).
  ///
  /// - Throws: ``Error`` with kind ``Error/Kind/lockedByAnotherProcess`` when another process
  ///   (or store) holds the file in the other mode (exclusive against shared or read-only),
  ///   ``Error/Kind/sharedWithOlderVersion`` when a process of an older version of this
  ///   library shares it, ``Error/Kind/missingFile`` for a read-only open of a file that does
  ///   not exist, and the errors of ``init(path:)``. The file is left as it was.
  public convenience init(path: String, sharing: Sharing) throws {
    try self.init(opening: path, sharing: sharing)
  }

  // MARK: Sharing (PersistentStore)

  /// Whether other processes commit to the file too: opened ``Sharing/shared`` or
  /// ``Sharing/readOnly``.
  public var isShared: Bool { log != nil }

  /// ``Error/Kind/readOnly`` for a ``Sharing/readOnly`` store, whose writes the map keeps in
  /// memory only; `nil` otherwise.
  public var writeRefusal: (any Swift.Error)? {
    guard sharing == .readOnly else { return nil }
    return Error(
      kind: .readOnly, code: nil,
      message:
        "\(path) is open read-only: writes of persisted types stay in this process's memory "
        + "and are not written to the file")
  }

  /// What other processes committed since the last call, from the change log: each commit
  /// with its changes in order, without this store's own; or, for a store whose position was
  /// trimmed past, or whose file was replaced since (a restore), an incomplete answer. Empty,
  /// without reading a page, when nothing was committed since (`PRAGMA data_version`).
  ///
  /// - Throws: ``Error/Kind/missingFile`` when the database was deleted or moved while open,
  ///   and ``Error/Kind/sqlite`` when reading fails.
  public func externalChanges() throws -> PersistentExternalChanges {
    guard let log else { return PersistentExternalChanges() }
    return try reader.withLock { try log.read(reader) }
  }

  /// Calls `wake` on a queue of the store's whenever another process may have committed to the
  /// file (`nil` stops it). On Linux, an inotify watch of the database's directory reports
  /// each write to its `-wal` file; on Apple platforms, each committing store posts a Darwin
  /// notification named after the file (see `_ChangeWatch`). A store that is not shared never
  /// calls it.
  public func observeExternalChanges(_ wake: (@Sendable () -> Void)?) {
    guard let log else { return }
    log.observe(wake, store: self)
  }

  // MARK: Writing

  /// `apply(_:)` for a shared store: one transaction, numbered, whose entries the store will
  /// not read back as another process's.
  func applyShared(_ changes: [PersistentChange], _ log: _ChangeLog) throws {
    guard sharing == .shared else { throw writeRefusal! }
    let (range, stale) = try writer.withLock {
      try writer.retryingBusy {
        var range: (before: Int64, after: Int64) = (0, 0)
        var stale: [PersistentStaleWrite] = []
        try writer.transaction {
          try writer.checkInPlace(path)
          try writer.statement(_ChangeLog.nextTransaction).run()
          let before = try _ChangeLog.sequence(writer)
          for change in changes {
            if let refused = try apply(change, shared: true) { stale.append(refused) }
          }
          // NB: numbered again, so that a writer that numbers nothing (an older library)
          // never files its entries under this transaction.
          try writer.statement(_ChangeLog.nextTransaction).run()
          let after = try _ChangeLog.sequence(writer)
          try log.trimIfDue(writer, through: after)
          range = (before, after)
        }
        return (range, stale)
      }
    }
    log.committed(after: range.before, through: range.after, stale: stale)
    _ChangeWatch.post(path, claim)
  }

  /// `change`, an entity's save just run in the transaction under way, when the file's row
  /// refused it (its stamp is newer): with the row's stamp. Under the writer's lock.
  func staleWrite(_ change: PersistentChange) throws -> PersistentStaleWrite? {
    guard sqlite3_changes(writer.handle) == 0, case .save(let kind, let key, _) = change else {
      return nil
    }
    let statement = try writer.statement(
      "SELECT stamp FROM entities WHERE kind = ?1 AND key = ?2")
    defer { statement.finish() }
    try statement.bind(1, kind)
    try statement.bind(2, key)
    guard try statement.step(), sqlite3_column_type(statement.handle, 0) != SQLITE_NULL else {
      return nil
    }
    return PersistentStaleWrite(
      change: change, storedStamp: sqlite3_column_double(statement.handle, 0))
  }

  /// Whether anything exists at `path`.
  static func fileExists(_ path: String) -> Bool {
    var status = stat()
    return stat(path, &status) == 0
  }

  /// Checks the file a read-only store opened: a database this library wrote, and no newer.
  static func checkReadOnly(_ connection: _Connection, path: String) throws {
    let version = try readableVersion(connection, path: path, advice: "Update the library.")
    guard version >= 1 else {
      throw Error(
        kind: .notConcord, code: nil,
        message: "\(path) is not a database ConcordSQLite wrote; a read-only store cannot make one")
    }
  }
}

/// What a sharing store knows of its file's change log (see the top of this file): how far it
/// read, which entries are its own, and who to wake.
final class _ChangeLog: @unchecked Sendable {
  // NB: @unchecked because every variable is only touched under `lock`. Lock order: a
  // connection's lock, then this one; nothing is called out under it.

  private let lock = Lock()
  private let claim: _SharingClaim
  /// The sequence number of the last entry read (or skipped as this store's own).
  private var position: Int64 = 0
  /// The epoch of the log read; `nil` for a file without one (a read-only store's file of
  /// schema version 1).
  private var epoch: String?
  /// The sequence numbers of this store's own transactions not yet read past.
  private var own: [ClosedRange<Int64>] = []
  /// `PRAGMA data_version` when the reading connection last read the log, and when the watch
  /// last found nothing new.
  private var readVersion: Int64 = -1
  private var watchedVersion: Int64 = -1
  /// How far the log is trimmed, as this store last saw.
  private var trimmed: Int64 = 0
  private var wake: (@Sendable () -> Void)?
  private var watch: _ChangeWatch?
  /// This store's saves the file refused since the last read.
  private var stale: [PersistentStaleWrite] = []

  /// How many entries the log keeps at most: a store that reads no further behind than that
  /// never falls behind. NB: a variable for the tests, which fall behind on purpose.
  var limit: Int64 = 10_000
  /// How many entries a writer appends between two trims.
  var trimEvery: Int64 = 256

  init(reader: _Connection, claim: _SharingClaim, path: String) throws {
    self.claim = claim
    try reader.withLock {
      readVersion = try reader.dataVersion()
      if let state = try Self.state(reader) {
        epoch = state.epoch
        position = state.sequence
        trimmed = state.trimmed
      }
    }
    claim.publish(position: position)
  }

  deinit {
    watch?.cancel()
  }

  // MARK: Schema

  /// Creates the log's tables, empty.
  static func createTables(_ connection: _Connection) throws {
    try connection.execute(
      """
      CREATE TABLE IF NOT EXISTS concord_changes (
        seq INTEGER PRIMARY KEY, txn INTEGER NOT NULL, alias INTEGER NOT NULL,
        kind TEXT NOT NULL, key BLOB NOT NULL, payload BLOB, stamp REAL)
      """)
    try connection.execute(
      """
      CREATE TABLE IF NOT EXISTS concord_sharing (
        id INTEGER PRIMARY KEY CHECK (id = 0), txn INTEGER NOT NULL, epoch TEXT NOT NULL,
        trimmed INTEGER NOT NULL)
      """)
    try connection.execute(
      """
      INSERT OR IGNORE INTO concord_sharing (id, txn, epoch, trimmed)
      VALUES (0, 0, lower(hex(randomblob(8))), 0)
      """)
  }

  /// The triggers that fill the log, by name.
  private static let triggers: [(name: String, sql: String)] = {
    func entry(_ row: String, alias: Bool, deleted: Bool) -> String {
      let key = alias ? "CAST(\(row).name AS BLOB)" : "\(row).key"
      let payload = deleted ? "NULL, NULL" : "\(row).payload, \(row).stamp"
      // NB: `coalesce`: a file whose numbering row is gone still takes writes.
      return """
        INSERT INTO concord_changes (txn, alias, kind, key, payload, stamp) VALUES (
          coalesce((SELECT txn FROM concord_sharing WHERE id = 0), 0), \(alias ? 1 : 0),
          \(row).kind, \(key), \(payload));
        """
    }
    var triggers: [(String, String)] = []
    for (table, alias) in [("entities", false), ("aliases", true)] {
      for (event, row) in [("INSERT", "NEW"), ("UPDATE", "NEW"), ("DELETE", "OLD")] {
        let name = "concord_\(table)_\(event.lowercased())"
        triggers.append(
          (
            name,
            "CREATE TRIGGER IF NOT EXISTS \(name) AFTER \(event) ON \(table) BEGIN "
              + entry(row, alias: alias, deleted: event == "DELETE") + " END"
          ))
      }
    }
    return triggers
  }()

  /// Installs the triggers (`logging`: a shared store), or removes them and empties the log
  /// (an exclusive store, which has no reader to log for, and which nothing may slow down);
  /// each only when the file is not so already.
  static func prepare(_ connection: _Connection, logging: Bool) throws {
    let statement = try connection.statement(
      "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'concord\\_%' "
        + "ESCAPE '\\'")
    _ = try statement.step()
    let installed = Int(sqlite3_column_int64(statement.handle, 0))
    statement.finish()
    if logging && installed < triggers.count {
      try connection.retryingBusy {
        try connection.transaction {
          for trigger in triggers { try connection.execute(trigger.sql) }
        }
      }
    } else if !logging && installed > 0 {
      try connection.transaction {
        for trigger in triggers { try connection.execute("DROP TRIGGER IF EXISTS \(trigger.name)") }
        // NB: a new epoch: the entries are gone, and nobody reads them.
        try connection.execute("DELETE FROM concord_changes")
        try connection.execute(
          """
          UPDATE concord_sharing SET epoch = lower(hex(randomblob(8))), trimmed = 0 WHERE id = 0
          """)
      }
    }
  }

  /// Gives the log a new epoch, emptied, and reads from its end: the file's content was
  /// replaced (a restore), and no entry tells what changed. Other stores reading it reload what
  /// they hold; this one's map reloads by itself. Under the writing connection's lock.
  func restart(_ connection: _Connection) throws {
    try connection.retryingBusy {
      try connection.transaction {
        try Self.createTables(connection)
        try connection.execute("DELETE FROM concord_changes")
        try connection.execute(
          """
          UPDATE concord_sharing SET epoch = lower(hex(randomblob(8))), trimmed = 0 WHERE id = 0
          """)
      }
    }
    try Self.prepare(connection, logging: true)
    guard let state = try Self.state(connection) else { return }
    lock.withLock {
      epoch = state.epoch
      position = state.sequence
      trimmed = state.trimmed
      own.removeAll()
    }
    claim.publish(position: state.sequence)
  }

  /// Saves an entity, unless the file's row has a newer stamp: an older stamp never replaces a
  /// row, nor does an equal one a tombstone (a removed entity's stamp refuses a write stamped
  /// no newer, as in memory); an unstamped write replaces any row, as in memory.
  ///
  /// NB: an alias's record is replaced by the last commit, whatever the stamps. Unlike an
  /// entity's, it outlives what a map remembers of its stamp: a map empties an alias whose
  /// entities another process removed, and forgets its stamp (an empty alias has none), while
  /// the record stays, naming them. A stamp rule between the two would leave maps and file
  /// disagreeing; each map's alias stamps still refuse older writes before they reach the file.
  static let upsertEntity = """
    INSERT INTO entities (kind, key, payload, stamp) VALUES (?1, ?2, ?3, ?4)
    ON CONFLICT (kind, key) DO UPDATE SET payload = excluded.payload, stamp = excluded.stamp
    WHERE excluded.stamp IS NULL OR entities.stamp IS NULL OR excluded.stamp > entities.stamp
      OR (excluded.stamp = entities.stamp AND length(entities.payload) > 0)
    """

  /// Numbers the next transaction.
  static let nextTransaction = "UPDATE concord_sharing SET txn = txn + 1 WHERE id = 0"

  /// The last sequence number the log handed out: its last entry's, which trimming keeps.
  ///
  /// NB: not `AUTOINCREMENT`, which costs every entry an update of `sqlite_sequence`: the log
  /// keeps its last entry, so that the next one never takes a number again, but when it is
  /// emptied with a new epoch (see `prepare` and `restart`).
  static func sequence(_ connection: _Connection) throws -> Int64 {
    let statement = try connection.statement("SELECT max(seq) FROM concord_changes")
    defer { statement.finish() }
    return try statement.step() ? sqlite3_column_int64(statement.handle, 0) : 0
  }

  /// The log's epoch, how far it is trimmed and its last sequence number; `nil` when the file
  /// has no log (schema version 1).
  private static func state(_ connection: _Connection) throws -> (
    epoch: String, trimmed: Int64, sequence: Int64
  )? {
    let statement: _Statement
    do {
      statement = try connection.statement(
        "SELECT epoch, trimmed FROM concord_sharing WHERE id = 0")
    } catch let error as SQLiteStore.Error where error.code == SQLITE_ERROR {
      return nil
    }
    guard try statement.step() else {
      statement.finish()
      return nil
    }
    let epoch = sqlite3_column_text(statement.handle, 0).map { String(cString: $0) } ?? ""
    let trimmed = sqlite3_column_int64(statement.handle, 1)
    statement.finish()
    return (epoch, trimmed, try sequence(connection))
  }

  // MARK: Writing

  /// Trims the log, in the writing transaction, when `trimEvery` entries were appended since
  /// it last was: up to the lowest position of the stores sharing the file, and at least to
  /// `limit` entries.
  func trimIfDue(_ connection: _Connection, through last: Int64) throws {
    let (due, own) = lock.withLock { (last - trimmed >= trimEvery, position) }
    guard due else { return }
    let statement = try connection.statement(
      "SELECT trimmed FROM concord_sharing WHERE id = 0")
    let current = try statement.step() ? sqlite3_column_int64(statement.handle, 0) : 0
    statement.finish()
    let readers = claim.livePositions()
    let lowest = min(readers.min() ?? own, own, last)
    // NB: never the last entry: see `sequence(_:)`.
    let through = min(max(lowest, last - limit), last - 1)
    if through > current {
      let delete = try connection.statement("DELETE FROM concord_changes WHERE seq <= ?1")
      sqlite3_bind_int64(delete.handle, 1, through)
      try delete.run()
      let update = try connection.statement("UPDATE concord_sharing SET trimmed = ?1 WHERE id = 0")
      sqlite3_bind_int64(update.handle, 1, through)
      try update.run()
    }
    lock.withLock { trimmed = max(current, through) }
  }

  /// Notes this store's transaction, whose entries took the numbers after `before` through
  /// `after`: skipped at once when nothing came between, else when read; and the saves the
  /// file refused in it, for the next read.
  func committed(after before: Int64, through after: Int64, stale: [PersistentStaleWrite]) {
    if !stale.isEmpty { lock.withLock { self.stale += stale } }
    guard after > before else { return }
    let published: Int64? = lock.withLock {
      if position == before {
        position = after
        return after
      }
      own.append(before + 1...after)
      return nil
    }
    if let published { claim.publish(position: published) }
  }

  // MARK: Reading

  /// See `SQLiteStore.externalChanges()`. Under the reading connection's lock.
  func read(_ connection: _Connection) throws -> PersistentExternalChanges {
    try connection.checkInPlace(nil)
    let version = try connection.dataVersion()
    let (unchanged, stale) = lock.withLock {
      defer {
        readVersion = version
        self.stale = []
      }
      return (version == readVersion, self.stale)
    }
    if unchanged { return PersistentExternalChanges(staleWrites: stale) }
    try connection.execute("BEGIN")
    defer { _ = try? connection.execute("COMMIT") }
    guard let state = try Self.state(connection) else {
      // NB: a file without a log (schema 1, read-only): something changed, and only the
      // tables can say what.
      return PersistentExternalChanges(isIncomplete: true, staleWrites: stale)
    }
    let (start, restarted) = lock.withLock { () -> (Int64, Bool) in
      let fresh = epoch == nil && position == 0 && state.trimmed == 0
      if (epoch != state.epoch && !fresh) || state.trimmed > position {
        epoch = state.epoch
        position = state.sequence
        trimmed = state.trimmed
        own.removeAll()
        return (position, true)
      }
      epoch = state.epoch
      trimmed = state.trimmed
      return (position, false)
    }
    if restarted {
      claim.publish(position: start)
      return PersistentExternalChanges(isIncomplete: true, staleWrites: stale)
    }
    let statement = try connection.statement(
      "SELECT seq, txn, alias, kind, key, payload, stamp FROM concord_changes WHERE seq > ?1 "
        + "ORDER BY seq")
    defer { statement.finish() }
    sqlite3_bind_int64(statement.handle, 1, start)
    var entries: [_Entry] = []
    while try statement.step() { entries.append(_Entry(statement)) }
    guard let last = entries.last?.sequence else {
      return PersistentExternalChanges(staleWrites: stale)
    }
    let commits = lock.withLock { () -> [[PersistentChange]] in
      let commits = commitsOf(entries)
      position = max(position, last)
      own.removeAll { $0.upperBound <= last }
      return commits
    }
    claim.publish(position: last)
    return PersistentExternalChanges(commits: commits, staleWrites: stale)
  }

  /// Whether the watch should wake the map: something was committed since it last looked, and
  /// not only by this store. Under the reading connection's lock.
  func hasNews(_ connection: _Connection) -> Bool {
    // NB: a file moved or deleted wakes the map, which reports it.
    guard (try? connection.checkInPlace(nil)) != nil,
      let version = try? connection.dataVersion()
    else { return true }
    let (seen, from, refused) = lock.withLock {
      (version == watchedVersion, position, !stale.isEmpty)
    }
    if refused { return true }
    if seen { return false }
    guard let state = try? Self.state(connection) else { return true }
    if state.sequence > from || state.trimmed > from { return true }
    lock.withLock { watchedVersion = version }
    return false
  }

  /// The commits of `entries`, oldest first, without this store's own entries, nor the other
  /// processes' entries of a row that one of this store's later ones wrote again: the file
  /// holds this store's, the last to commit. Under `lock`.
  ///
  /// A commit is a transaction of the other process's store, which gathers several writes of
  /// its map (see `IdentityMap.flush()`); it is split where a row comes again, so that every
  /// version of every row reaches the map, in order.
  private func commitsOf(_ entries: [_Entry]) -> [[PersistentChange]] {
    var ownKeys: Set<_Entry.Row> = []
    var kept: [_Entry] = []
    var next = own.count - 1
    for entry in entries.reversed() {
      while next >= 0 && own[next].lowerBound > entry.sequence { next -= 1 }
      if next >= 0 && own[next].contains(entry.sequence) {
        ownKeys.insert(entry.row)
        continue
      }
      if !ownKeys.isEmpty && ownKeys.contains(entry.row) { continue }
      kept.append(entry)
    }
    var commits: [[PersistentChange]] = []
    var transaction: Int64?
    var rows: Set<_Entry.Row> = []
    for entry in kept.reversed() {
      if entry.transaction != transaction || commits.isEmpty || rows.contains(entry.row) {
        commits.append([])
        transaction = entry.transaction
        rows.removeAll(keepingCapacity: true)
      }
      rows.insert(entry.row)
      commits[commits.count - 1].append(entry.change)
    }
    return commits
  }

  // MARK: Waking

  func observe(_ wake: (@Sendable () -> Void)?, store: SQLiteStore) {
    let old: _ChangeWatch? = lock.withLock {
      self.wake = wake
      guard wake != nil else {
        defer { watch = nil }
        return watch
      }
      if watch == nil {
        // NB: weak: the store holds the watch, which must not keep it.
        watch = _ChangeWatch(database: store.path) { [weak store, weak self] in
          guard let store, let self, let wake = self.lock.withLock({ self.wake }) else {
            return true
          }
          guard store.reader.withLock({ self.hasNews(store.reader) }) else { return false }
          wake()
          return true
        }
      }
      return nil
    }
    old?.cancel()
  }
}

/// One entry of the change log.
private struct _Entry {
  /// A row of the file: an entity's (kind and key) or an alias's (its name as the key).
  struct Row: Hashable {
    let alias: Bool
    let kind: String
    let key: [UInt8]
  }

  let sequence: Int64
  let transaction: Int64
  let row: Row
  let payload: [UInt8]?
  let stamp: Stamp?

  init(_ statement: _Statement) {
    let handle = statement.handle
    sequence = sqlite3_column_int64(handle, 0)
    transaction = sqlite3_column_int64(handle, 1)
    row = Row(
      alias: sqlite3_column_int(handle, 2) != 0,
      kind: sqlite3_column_text(handle, 3).map { String(cString: $0) } ?? "",
      key: statement.blob(4))
    payload = sqlite3_column_type(handle, 5) == SQLITE_NULL ? nil : statement.blob(5)
    stamp = sqlite3_column_type(handle, 6) == SQLITE_NULL ? nil : sqlite3_column_double(handle, 6)
  }

  /// The change the entry records.
  var change: PersistentChange {
    if row.alias {
      let name = String(decoding: row.key, as: UTF8.self)
      guard let payload else { return .deleteAlias(name: name) }
      return .saveAlias(
        name: name, kind: row.kind, record: PersistentRecord(payload: payload, stamp: stamp))
    }
    guard let payload else { return .delete(kind: row.kind, key: row.key) }
    return .save(
      kind: row.kind, key: row.key, record: PersistentRecord(payload: payload, stamp: stamp))
  }
}

extension _Connection {
  /// `PRAGMA data_version`: a number that changes when another connection commits.
  func dataVersion() throws -> Int64 {
    let statement = try statement("PRAGMA data_version")
    defer { statement.finish() }
    _ = try statement.step()
    return sqlite3_column_int64(statement.handle, 0)
  }

  /// Throws ``SQLiteStore/Error/Kind/missingFile`` when the database was deleted, or moved,
  /// since it was opened: what is written then reaches no other process, and is lost when the
  /// store closes.
  func checkInPlace(_ path: String?) throws {
    var moved: Int32 = 0
    _ = sqlite3_file_control(handle, "main", SQLITE_FCNTL_HAS_MOVED, &moved)
    guard moved != 0 else { return }
    let name = String(cString: sqlite3_db_filename(handle, "main"))
    throw SQLiteStore.Error(
      kind: .missingFile, code: nil,
      message:
        "\(path ?? name) was deleted or moved while open: this process's writes no longer "
        + "reach the file other processes share; open it again")
  }

  /// Runs `body`, beginning it again while SQLite reports the database busy after its busy
  /// timeout: up to 12 times (a minute), then the error.
  func retryingBusy<R>(_ body: () throws -> R) throws -> R {
    var attempts = 0
    while true {
      do {
        return try body()
      } catch let error as SQLiteStore.Error where error.code == SQLITE_BUSY && attempts < 12 {
        attempts += 1
      }
    }
  }
}
