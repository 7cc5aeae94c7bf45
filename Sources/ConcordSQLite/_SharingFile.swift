import Concord

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

// The side file of a database, `<database>-concord`: who has the database open, in which mode,
// and how far each sharing process has read the change log. Processes meet there through POSIX
// record locks (`fcntl`), which the system drops when a process dies, so a crash never leaves
// a stale claim behind. Nothing here writes the database itself: a `.readOnly` process writes
// its read position here, never there.
//
// The bytes locked (never the bytes read or written: record locks are advisory, and a range
// of the file means nothing but its lock):
//
// - byte 0, read-locked by every process holding the database `.exclusive`;
// - byte 1, read-locked by every process sharing it (`.shared` or `.readOnly`);
// - byte 2, write-locked for a moment by a process opening the database or claiming a slot:
//   the mutex that makes "check the other mode, then announce mine" one step across processes;
// - bytes 64..<64 + slotCount, one per slot: read-locked by the sharing process that holds the
//   slot, for as long as it does.
//
// And the bytes read and written: bytes 8..<16 count commits, written after each commit so that
// the other processes' file watches wake (see `_ChangeWatch`); slot `i` at 4096 + 16 i holds the
// read position of the process in it (8 bytes) and the schema version of its library (8 bytes).
//
// NB: POSIX record locks belong to a process, not to a descriptor: a second descriptor of the
// file, closed, would drop every lock the process holds on it, and two stores of one process
// never conflict through them. So each process keeps one descriptor per lock file
// (`_LockFiles`), and the stores of one process count their modes and slots there: two stores
// on one file in one process conflict as two processes would. `flock` would not need that,
// but has no byte ranges, and OFD locks, which have both, do not exist on Darwin.
//
// NB: every lock held while idle is a read lock on this side file, which is what an idle
// SQLite connection in WAL mode already holds on the `-shm` file; the database's own write lock
// is only held inside a transaction (see `SQLiteStore+Sharing.swift`).

/// A store's claim on its database's side file: its mode, and, sharing, its slot.
final class _SharingClaim: @unchecked Sendable {
  // NB: @unchecked because `file` is only touched under `_LockFiles.lock`, and `slot` and
  // `descriptor` are constants once made.

  /// How a store holds its database.
  enum Mode {
    case exclusive
    /// `.shared` or `.readOnly`.
    case sharing
  }

  /// How many processes (or stores) can share a database with a slot each. A store that finds
  /// none free shares without one: it is not waited for when the log is trimmed, and may fall
  /// behind (see `SQLiteStore.externalChanges()`).
  static let slotCount = 64

  let mode: Mode
  /// The slot this store reads the log from, if any.
  let slot: Int?
  private let file: _LockFile
  /// The side file's descriptor, for reading and writing slots.
  private let descriptor: Int32

  private init(mode: Mode, slot: Int?, file: _LockFile) {
    self.mode = mode
    self.slot = slot
    self.file = file
    descriptor = file.descriptor
  }

  deinit {
    _LockFiles.lock.withLock { _LockFiles.release(file, mode: mode, slot: slot) }
  }

  /// The side file of `database`.
  static func path(of database: String) -> String { database + "-concord" }

  /// Whether a store of this process still claims `database`'s side file. For tests: a weak
  /// reference to a store reads `nil` once its deinit begins, before the claim is released, on
  /// whichever thread (a map's background writer) released the store last.
  static func isClaimed(_ database: String) -> Bool {
    _LockFiles.lock.withLock {
      guard let file = _LockFiles.opened(path(of: database)) else { return false }
      return file.exclusive > 0 || file.sharing > 0 || !file.slots.isEmpty
    }
  }

  /// Claims `database`'s side file in `mode`; sharing, with a slot starting at `position` and
  /// the library's `version`. Throws `.lockedByAnotherProcess` when another process (or store)
  /// holds it in the other mode, `.sharedWithOlderVersion` when a sharing process runs an
  /// older schema version, and `.cannotOpen` when the side file cannot be opened.
  static func claim(
    _ database: String, mode: Mode, position: Int64, version: Int64
  ) throws -> _SharingClaim {
    try _LockFiles.lock.withLock {
      let file = try _LockFiles.open(path(of: database))
      var claimed = false
      defer { if !claimed { _LockFiles.forget(file) } }
      // NB: across processes, the mutex; within this one, `_LockFiles.lock`, which is held.
      try file.lock(_Byte.mutex, F_WRLCK, wait: true)
      defer { file.unlock(_Byte.mutex) }
      let other: Bool
      switch mode {
      case .exclusive: other = file.sharing > 0 || file.isHeldElsewhere(_Byte.sharing)
      case .sharing: other = file.exclusive > 0 || file.isHeldElsewhere(_Byte.exclusive)
      }
      if other {
        throw SQLiteStore.Error(
          kind: .lockedByAnotherProcess, code: nil,
          message:
            "\(database) is open \(mode == .exclusive ? "shared" : "exclusive") in another "
            + "process (or store); open it \(mode == .exclusive ? ".shared" : ".exclusive") "
            + "there too, or close it there first")
      }
      var slot: Int?
      if mode == .sharing {
        for index in 0..<slotCount where file.isSlotLive(index) {
          let held = file.readSlot(index).version
          if held > 0 && held < version {
            throw SQLiteStore.Error(
              kind: .sharedWithOlderVersion, code: nil,
              message:
                "\(database) is shared by a process of an older version of ConcordSQLite "
                + "(schema \(held); this one writes \(version)); update every process that "
                + "opens it (an app and its extensions ship together), then open it again")
          }
        }
        slot = (0..<slotCount).first { !file.isSlotLive($0) }
      }
      let byte = mode == .exclusive ? _Byte.exclusive : _Byte.sharing
      if (mode == .exclusive ? file.exclusive : file.sharing) == 0 {
        try file.lock(byte, F_RDLCK, wait: false)
      }
      if mode == .exclusive { file.exclusive += 1 } else { file.sharing += 1 }
      if let slot {
        // NB: written before the slot is locked, so that a trimmer never reads a live slot's
        // previous position.
        file.writeSlot(slot, position: position, version: version)
        try? file.lock(_Byte.slot(slot), F_RDLCK, wait: false)
        file.slots.insert(slot)
      }
      claimed = true
      return _SharingClaim(mode: mode, slot: slot, file: file)
    }
  }

  /// Records that this store has read the change log up to `position`.
  func publish(position: Int64) {
    guard let slot else { return }
    _LockFile.writeSlot(descriptor, slot, position: position, version: nil)
  }

  /// Writes the side file after a commit, so that the other processes' file watches wake when
  /// it can be read (see `_ChangeWatch`): the commit's count, at byte 8.
  func announceCommit() {
    var count = _LockFiles.lock.withLock {
      file.commits += 1
      return file.commits
    }
    _ = withUnsafeBytes(of: &count) { pwrite(descriptor, $0.baseAddress, 8, 8) }
  }

  /// The read positions of every slot held, this store's included: how far the change log may
  /// be trimmed.
  func livePositions() -> [Int64] {
    _LockFiles.lock.withLock {
      (0..<Self.slotCount).compactMap { index in
        file.isSlotLive(index) ? file.readSlot(index).position : nil
      }
    }
  }
}

/// The bytes of the side file that are locked; see the top of this file.
private enum _Byte {
  static let exclusive: off_t = 0
  static let sharing: off_t = 1
  static let mutex: off_t = 2
  static func slot(_ index: Int) -> off_t { 64 + off_t(index) }
  /// Where slot `index`'s position and version are.
  static func data(_ index: Int) -> off_t { 4096 + 16 * off_t(index) }
}

/// The side files this process has open, one descriptor each, with what its stores claimed.
private enum _LockFiles {
  /// Guards `files` and every `_LockFile`'s counts. A leaf: nothing else is locked under it
  /// but the side file's own mutex.
  static let lock = Lock()
  /// NB: `nonisolated(unsafe)`: only touched under `lock`.
  nonisolated(unsafe) static var files: [_FileID: _LockFile] = [:]

  /// The side file at `path`, if this process has a descriptor of it. A file of this process
  /// that was deleted since is another file, whose inode number the one at `path` may have
  /// taken. Under `lock`.
  static func opened(_ path: String) -> _LockFile? {
    var status = stat()
    guard stat(path, &status) == 0, let file = files[_FileID(status)], file.isLinked else {
      return nil
    }
    return file
  }

  /// The side file at `path`, opened (and made) if this process has no descriptor of it.
  static func open(_ path: String) throws -> _LockFile {
    // NB: looked up before opening: a second descriptor, once closed, would drop this
    // process's locks on the file (see the top of this file).
    if let file = opened(path) { return file }
    var status = stat()
    let descriptor = _openFile(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
    guard descriptor >= 0, fstat(descriptor, &status) == 0 else {
      let reason = String(cString: strerror(errno))
      if descriptor >= 0 { close(descriptor) }
      throw SQLiteStore.Error(
        kind: .cannotOpen, code: nil, message: "cannot open \(path), beside the database: \(reason)"
      )
    }
    let file = _LockFile(descriptor: descriptor, id: _FileID(status))
    files[file.id] = file
    return file
  }

  /// Closes `file` if no store of this process claims it any more.
  static func forget(_ file: _LockFile) {
    guard file.exclusive == 0, file.sharing == 0, file.slots.isEmpty else { return }
    if files[file.id] === file { files[file.id] = nil }
    close(file.descriptor)
  }

  static func release(_ file: _LockFile, mode: _SharingClaim.Mode, slot: Int?) {
    if let slot {
      file.slots.remove(slot)
      file.unlock(_Byte.slot(slot))
    }
    switch mode {
    case .exclusive:
      file.exclusive -= 1
      if file.exclusive == 0 { file.unlock(_Byte.exclusive) }
    case .sharing:
      file.sharing -= 1
      if file.sharing == 0 { file.unlock(_Byte.sharing) }
    }
    forget(file)
  }
}

/// A file's identity: its device and inode.
private struct _FileID: Hashable {
  let device: UInt64
  let inode: UInt64

  init(_ status: stat) {
    device = UInt64(status.st_dev)
    inode = UInt64(status.st_ino)
  }
}

/// One side file this process has open: its descriptor, and what this process's stores hold
/// of it. Under `_LockFiles.lock`.
private final class _LockFile {
  let descriptor: Int32
  let id: _FileID
  /// How many stores of this process hold the database in each mode.
  var exclusive = 0
  var sharing = 0
  /// The slots this process's stores hold.
  var slots: Set<Int> = []
  /// How many commits this process announced (see `_SharingClaim.announceCommit()`).
  var commits: Int64 = 0

  init(descriptor: Int32, id: _FileID) {
    self.descriptor = descriptor
    self.id = id
  }

  /// Whether the file still has a name: it was not deleted since it was opened.
  var isLinked: Bool {
    var status = stat()
    return fstat(descriptor, &status) == 0 && status.st_nlink > 0
  }

  /// Locks `byte` (`F_RDLCK` or `F_WRLCK`), waiting for other processes when `wait`.
  func lock(_ byte: off_t, _ type: Int32, wait: Bool) throws {
    var request = Self.request(byte, type)
    while fcntl(descriptor, wait ? F_SETLKW : F_SETLK, &request) != 0 {
      if errno == EINTR { continue }
      throw SQLiteStore.Error(
        kind: .lockedByAnotherProcess, code: nil,
        message: "cannot lock the file beside the database: \(String(cString: strerror(errno)))")
    }
  }

  func unlock(_ byte: off_t) {
    var request = Self.request(byte, F_UNLCK)
    _ = fcntl(descriptor, F_SETLK, &request)
  }

  /// Whether another process holds a lock on `byte`. NB: this process's own locks never
  /// conflict with its requests, so `F_GETLK` only sees other processes'.
  func isHeldElsewhere(_ byte: off_t) -> Bool {
    var request = Self.request(byte, F_WRLCK)
    guard fcntl(descriptor, F_GETLK, &request) == 0 else { return true }
    return Int32(request.l_type) != F_UNLCK
  }

  /// Whether a store, of this process or another, holds slot `index`.
  func isSlotLive(_ index: Int) -> Bool {
    slots.contains(index) || isHeldElsewhere(_Byte.slot(index))
  }

  func readSlot(_ index: Int) -> (position: Int64, version: Int64) {
    var words: (Int64, Int64) = (0, 0)
    let count = withUnsafeMutableBytes(of: &words) {
      pread(descriptor, $0.baseAddress, 16, _Byte.data(index))
    }
    return count == 16 ? (words.0, words.1) : (0, 0)
  }

  func writeSlot(_ index: Int, position: Int64, version: Int64) {
    Self.writeSlot(descriptor, index, position: position, version: version)
  }

  /// Writes slot `index`'s position, and its version unless `nil`. NB: 8-byte writes at
  /// aligned offsets, which a reader never sees torn on the file systems this runs on; a torn
  /// position would at worst trim the log too early, and the reader would reload.
  static func writeSlot(_ descriptor: Int32, _ index: Int, position: Int64, version: Int64?) {
    var position = position
    _ = withUnsafeBytes(of: &position) { pwrite(descriptor, $0.baseAddress, 8, _Byte.data(index)) }
    guard var version else { return }
    _ = withUnsafeBytes(of: &version) {
      pwrite(descriptor, $0.baseAddress, 8, _Byte.data(index) + 8)
    }
  }

  private static func request(_ byte: off_t, _ type: Int32) -> flock {
    var request = flock()
    request.l_type = Int16(type)
    request.l_whence = Int16(SEEK_SET)
    request.l_start = byte
    request.l_len = 1
    return request
  }
}

/// POSIX `open` with a mode, for a file it may create.
private func _openFile(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 {
  #if canImport(Glibc)
    Glibc.open(path, flags, mode)
  #elseif canImport(Musl)
    Musl.open(path, flags, mode)
  #else
    Darwin.open(path, flags, mode)
  #endif
}
