import Dispatch

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

#if canImport(notify)
  import notify
#endif

/// Wakes a sharing store when another process may have committed to its file, without
/// polling: the store then checks `PRAGMA data_version` and the log's last number (cheap), and
/// wakes its map only when another process wrote.
///
/// - On Linux, an inotify watch of the database's directory, for two files. The side file
///   (`<database>-concord`), which each store of this library writes after each commit
///   (`_SharingClaim.announceCommit()`): a wake that comes when the commit can be read. And the
///   `-wal` file, which every commit in WAL mode writes, whichever process (or library version)
///   commits; but its write comes before the commit can be read, so a wake from it that finds
///   nothing new looks again, twice, a moment later (`rechecks`). The directory rather than the
///   files, because SQLite may delete the `-wal` file when the last connection closes and make
///   a new one later; and the deletion of the database itself is reported too. A dispatch
///   source reads the events, so no thread is kept waiting.
/// - On Apple platforms, a Darwin notification (`notify_post`) named after the file, which each
///   store posts after each commit: the way processes of an App Group are meant to tell each
///   other (Core Data's remote change notifications use it). A watch of the `-wal` file would
///   work on macOS as on Linux, but an iOS extension's sandbox and its suspension make the
///   notification the documented path. NB: not run here; no Apple platform on this machine.
/// - Elsewhere, a timer that checks `PRAGMA data_version` every 50 ms.
///
/// NB: the alternative on every platform, a timer on `PRAGMA data_version` in each store,
/// costs a wake-up of every process sharing the file several times a second, forever, to find
/// nothing most of the time: the battery's cost on a phone, and either a slow propagation or a
/// busy one.
final class _ChangeWatch: @unchecked Sendable {
  // NB: @unchecked because its state is set once in `init`, then only cancelled.

  private let queue = DispatchQueue(label: "Concord.sqlite.watch")
  private var source: (any DispatchSourceProtocol)?
  #if canImport(notify)
    private var token: Int32 = 0
  #endif

  /// How long after a wake that found nothing the watch looks again: a commit's write to the
  /// `-wal` file comes a moment before the commit can be read.
  static let rechecks: [DispatchTimeInterval] = [.milliseconds(2), .milliseconds(20)]

  /// Starts calling `wake` on a queue of its own when the file at `database` may have changed.
  /// `wake` returns whether it found something new; when it does not, the watch looks again a
  /// moment later (see `rechecks`).
  init(database: String, wake: @escaping @Sendable () -> Bool) {
    #if canImport(notify)
      let status = notify_register_dispatch(Self.name(of: database), &token, queue) { _ in
        _ = wake()
      }
      if status != 0 { token = 0 }
    #elseif canImport(Glibc)
      let descriptor = inotify_init1(Int32(IN_NONBLOCK) | Int32(IN_CLOEXEC))
      guard descriptor >= 0 else {
        source = Self.timer(queue, wake)
        return
      }
      let directory = String(database[..<(database.lastIndex(of: "/") ?? database.startIndex)])
      let watched = directory.isEmpty ? (database.hasPrefix("/") ? "/" : ".") : directory
      let name = String(
        database[
          (database.lastIndex(of: "/").map(database.index(after:)) ?? database.startIndex)...])
      let mask = UInt32(IN_MODIFY) | UInt32(IN_DELETE) | UInt32(IN_MOVED_FROM)
      guard inotify_add_watch(descriptor, watched, mask) >= 0 else {
        close(descriptor)
        source = Self.timer(queue, wake)
        return
      }
      let source = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue)
      let queue = queue
      source.setEventHandler {
        let names = Self.drain(descriptor, naming: [name, name + "-wal", name + "-concord"])
        guard !names.isEmpty, !wake(), names != [name + "-concord"] else { return }
        for delay in Self.rechecks {
          queue.asyncAfter(deadline: .now() + delay) { _ = wake() }
        }
      }
      source.setCancelHandler { close(descriptor) }
      source.resume()
      self.source = source
    #else
      source = Self.timer(queue, wake)
    #endif
  }

  /// Stops waking. A wake under way finishes.
  func cancel() {
    source?.cancel()
    #if canImport(notify)
      if token != 0 { notify_cancel(token) }
    #endif
  }

  /// Tells the other processes watching `database`, through `claim`, that this one committed.
  static func post(_ database: String, _ claim: _SharingClaim) {
    #if canImport(notify)
      notify_post(name(of: database))
    #else
      claim.announceCommit()
    #endif
  }

  /// The Darwin notification of `database`: the same in every process of an App Group, which
  /// see the container at the same path.
  static func name(of database: String) -> String {
    "concord.sqlite.changed:" + database
  }

  /// A timer checking every 50 ms, where no file watch exists.
  private static func timer(_ queue: DispatchQueue, _ wake: @escaping @Sendable () -> Bool)
    -> any DispatchSourceProtocol
  {
    let timer = DispatchSource.makeTimerSource(queue: queue)
    timer.schedule(deadline: .now() + .milliseconds(50), repeating: .milliseconds(50))
    timer.setEventHandler { _ = wake() }
    timer.resume()
    return timer
  }

  #if canImport(Glibc)
    /// Reads every pending inotify event of `descriptor`; returns those of `names` it was
    /// about.
    private static func drain(_ descriptor: Int32, naming names: [String]) -> Set<String> {
      var relevant: Set<String> = []
      var buffer = [UInt8](repeating: 0, count: 4096)
      while true {
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, 4096) }
        guard count > 0 else { return relevant }
        var offset = 0
        // NB: each event is a 16-byte header (descriptor, mask, cookie, length of the name)
        // and the name, NUL-padded to that length.
        while offset + 16 <= count {
          let length = buffer.withUnsafeBytes {
            Int($0.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
          }
          let bytes = buffer[(offset + 16)..<min(count, offset + 16 + length)]
          let name = String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
          if names.contains(name) { relevant.insert(name) }
          offset += 16 + length
        }
      }
    }
  #endif
}
