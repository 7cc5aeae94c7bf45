import Concord
import ConcordSQLite
import Dispatch
import Foundation

// One store, several processes: `shared.propagate` times a commit in a child process (this
// benchmark, started again with `--shared-writer`) until the callback in this one;
// `shared.write` times a shared store's writes against an exclusive one's.

/// What the child process commits: when, by the system's monotonic clock, which both processes
/// read alike.
struct Ping: Identifiable, Sendable, Equatable, Codable {
  var id: Int
  var round: Int
  var sentAt: UInt64
}

/// The child of `shared.propagate`: opens the shared database at `path`, says `ready`, then
/// stores one `Ping` per line `ping ROUND` read on standard input, until it ends.
func runSharedWriter(path: String) -> Never {
  let map = IdentityMap(persistence: try! SQLiteStore(path: path, sharing: .shared))
  map.persist(Ping.self)
  map.store(Ping(id: 1, round: 0, sentAt: DispatchTime.now().uptimeNanoseconds))
  try! map.flush()
  FileHandle.standardOutput.write(Data("ready\n".utf8))
  while let line = readLine(), line.hasPrefix("ping ") {
    let round = Int(line.dropFirst(5))!
    map.store(Ping(id: 1, round: round, sentAt: DispatchTime.now().uptimeNanoseconds))
  }
  try? map.flush()
  exit(0)
}

/// Counts the pings this process was told of, and when.
final class PingLatencies: @unchecked Sendable {
  // NB: @unchecked because `condition` guards everything.
  private let condition = NSCondition()
  private var latencies: [Double] = []
  private var lastRound = 0

  func record(_ ping: Ping) {
    let now = DispatchTime.now().uptimeNanoseconds
    condition.withLock {
      guard ping.round > lastRound else { return }
      lastRound = ping.round
      latencies.append(Double(now &- ping.sentAt))
      condition.broadcast()
    }
  }

  /// Waits until round `round` was told, up to ten seconds (a hang guard).
  func wait(for round: Int) -> Bool {
    let deadline = Date(timeIntervalSinceNow: 10)
    return condition.withLock {
      while lastRound < round {
        guard condition.wait(until: deadline) else { return false }
      }
      return true
    }
  }

  var values: [Double] { condition.withLock { latencies } }
}

extension Workloads {
  /// A commit in another process until the callback in this one: the child stores a `Ping`
  /// stamped with the monotonic clock, this process's map is woken by the file watch, applies
  /// the commit, and calls the handle's callback, which reads the clock. One commit at a time:
  /// the next is sent when the callback has run. Median and p95 over 1,000 commits (200 with
  /// --quick). No floor: nothing else crosses processes.
  func sharedPropagate() -> Result {
    let commits = quick ? 200 : 1_000
    return withDatabase { path in
      let map = IdentityMap(persistence: try! SQLiteStore(path: path, sharing: .shared))
      map.persist(Ping.self)
      let child = Process()
      child.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
      child.arguments = ["--shared-writer", path]
      let input = Pipe()
      let output = Pipe()
      child.standardInput = input
      child.standardOutput = output
      try! child.run()
      defer {
        try? input.fileHandleForWriting.close()
        child.waitUntilExit()
      }
      // NB: the child's first line says it committed round 0.
      var ready = Data()
      while !ready.contains(UInt8(ascii: "\n")) {
        let data = output.fileHandleForReading.availableData
        precondition(!data.isEmpty, "the child ended before it was ready")
        ready.append(data)
      }
      try! map.syncExternalChanges()
      let ping = map.find(Ping.self, id: 1)!
      let latencies = PingLatencies()
      let subscription = ping.observe { latencies.record($0) }
      for round in 1...commits {
        input.fileHandleForWriting.write(Data("ping \(round)\n".utf8))
        precondition(latencies.wait(for: round), "round \(round) never reached this process")
      }
      subscription.cancel()
      let values = latencies.values.sorted()
      let p95 = values[min(values.count - 1, values.count * 95 / 100)]
      var result = Result(name: "shared.propagate", samples: values)
      result.note =
        "commit in another process to the callback here, per commit, one at a time: median "
        + "\(formatTime(median(values))), p95 \(formatTime(p95)) over \(values.count) commits"
      result.extra = [("p95Ns", p95)]
      return result
    }
  }

  /// Single-entity writes and the flush that brings them to the file, with the store opened
  /// `.shared` (its change log, its stamp rule, its numbered transactions), against the same
  /// work on a store opened `.exclusive`, per write.
  func sharedWrite() -> Result {
    let writes = quick ? 10_000 : 50_000
    var round = 0
    return withDatabase { sharedPath in
      withDatabase { exclusivePath in
        let shared = IdentityMap(
          persistence: try! SQLiteStore(path: sharedPath, sharing: .shared))
        let exclusive = IdentityMap(persistence: try! SQLiteStore(path: exclusivePath))
        var handles: [EntityObserver<Model>] = []
        for map in [shared, exclusive] {
          map.persist(Model.self)
          handles += (0..<n).map { map.store(Model($0)) }
          try! map.flush()
        }
        func work(_ map: IdentityMap) -> Double {
          round += 1
          return nanoseconds {
            for step in 0..<writes {
              blackHole(map.store(Model((step &* 7_919) % n, round: round)))
            }
            try! map.flush()
          } / Double(writes)
        }
        var result = compare("shared.write", map: { work(shared) }, floor: { work(exclusive) })
        result.note = "per write, flushed; floor: the same writes to a store opened .exclusive"
        withExtendedLifetime(handles) {}
        return result
      }
    }
  }
}
