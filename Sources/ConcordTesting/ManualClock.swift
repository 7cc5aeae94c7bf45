import Concord
import Foundation

/// A `ResourceClock` that stands still until told: tests drive time with it, and never sleep.
///
/// Give it to the map, then move time forward with ``advance(by:)``: answers age, and every
/// sleep whose deadline has come (a retry's wait, `keepFor`, the moment an observed answer turns
/// stale) resumes. ``sleepers`` and ``waitForSleepers(_:)`` tell a test that a wait began, so it
/// can advance past it without guessing.
///
/// ```swift
/// let clock = ManualClock()
/// let map = IdentityMap(clock: clock)
/// let feed = map.resource(ResourceKey<[Post]>("feed"), retry: .exponential(jitter: false)) {
///   try await server.feed()   // fails once, then answers
/// }
/// async let posts = feed.load()
/// await clock.waitForSleepers(1)           // the retry's wait began
/// clock.advance(by: .milliseconds(300))    // and is over
/// #expect(try await posts.count == 3)
/// ```
public final class ManualClock: ResourceClock, @unchecked Sendable {
  // NB: @unchecked because every mutable field is only touched while holding `lock`.
  private let lock = Lock()
  private var current: Date
  private var pending: [Sleeper] = []
  private var watchers: [Watcher] = []
  private var lastID = 0

  /// A sleep under way.
  private struct Sleeper {
    let id: Int
    let deadline: Date
    let continuation: CheckedContinuation<Void, any Error>
  }

  /// A caller of `waitForSleepers(_:)`.
  private struct Watcher {
    let id: Int
    let count: Int
    let continuation: CheckedContinuation<Void, Never>
  }

  /// A clock whose time is `now`, until advanced.
  public init(now: Date = Date(timeIntervalSince1970: 0)) {
    current = now
  }

  /// The clock's time: where it started, plus every advance.
  public var now: Date {
    lock.withLock { current }
  }

  /// How many sleeps have begun and not yet resumed: for tests that wait for a retry's wait to
  /// begin before they advance past it.
  public var sleepers: Int {
    lock.withLock { pending.count }
  }

  /// Sleeps until the clock is advanced to `now + duration` or past it; returns at once for a
  /// duration of zero or less.
  ///
  /// - Throws: `CancellationError` when the calling task is cancelled, at once or while asleep.
  public func sleep(for duration: Duration) async throws {
    try Task.checkCancellation()
    guard duration > .zero else { return }
    let id = lock.withLock {
      lastID += 1
      return lastID
    }
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation {
        (continuation: CheckedContinuation<Void, any Error>) in
        lock.lock()
        // NB: read under the lock the handler below takes: a cancellation either comes
        // before (and is seen here) or finds the sleeper.
        guard !Task.isCancelled else {
          lock.unlock()
          continuation.resume(throwing: CancellationError())
          return
        }
        let (seconds, attoseconds) = duration.components
        let interval = TimeInterval(seconds) + TimeInterval(attoseconds) * 1e-18
        pending.append(
          Sleeper(
            id: id, deadline: current.addingTimeInterval(interval), continuation: continuation)
        )
        let ready = takeReadyWatchers()
        lock.unlock()
        for watcher in ready { watcher.continuation.resume() }
      }
    } onCancel: {
      let sleeper = lock.withLock { () -> Sleeper? in
        guard let index = pending.firstIndex(where: { $0.id == id }) else { return nil }
        return pending.remove(at: index)
      }
      sleeper?.continuation.resume(throwing: CancellationError())
    }
  }

  /// Moves the clock forward by `duration` (a negative one does nothing), and resumes every
  /// sleeper whose deadline has come, in deadline order (those with one deadline, in the order
  /// they began).
  ///
  /// Resumed sleepers go on in their own tasks, which their executors run in an order of their
  /// own: a test that needs their effects, or their order, awaits them (a value they deliver,
  /// or the next `sleepers` count), one advance per deadline.
  ///
  /// - Complexity: O(*n* log *n*) for *n* sleepers.
  public func advance(by duration: Duration) {
    let (seconds, attoseconds) = duration.components
    let interval = TimeInterval(seconds) + TimeInterval(attoseconds) * 1e-18
    let due = lock.withLock { () -> [Sleeper] in
      if interval > 0 { current = current.addingTimeInterval(interval) }
      let due = pending.filter { $0.deadline <= current }
      pending.removeAll { $0.deadline <= current }
      return due.sorted { ($0.deadline, $0.id) < ($1.deadline, $1.id) }
    }
    for sleeper in due { sleeper.continuation.resume() }
  }

  /// Returns once at least `count` sleeps are under way (see ``sleepers``), or the calling task
  /// is cancelled.
  public func waitForSleepers(_ count: Int = 1) async {
    let id = lock.withLock {
      lastID += 1
      return lastID
    }
    await withTaskCancellationHandler {
      await withCheckedContinuation { continuation in
        lock.lock()
        guard pending.count < count, !Task.isCancelled else {
          lock.unlock()
          continuation.resume()
          return
        }
        watchers.append(Watcher(id: id, count: count, continuation: continuation))
        lock.unlock()
      }
    } onCancel: {
      let watcher = lock.withLock { () -> Watcher? in
        guard let index = watchers.firstIndex(where: { $0.id == id }) else { return nil }
        return watchers.remove(at: index)
      }
      watcher?.continuation.resume()
    }
  }

  /// Takes the watchers whose count of sleepers is reached. Under the lock.
  private func takeReadyWatchers() -> [Watcher] {
    let ready = watchers.filter { $0.count <= pending.count }
    watchers.removeAll { $0.count <= pending.count }
    return ready
  }
}
