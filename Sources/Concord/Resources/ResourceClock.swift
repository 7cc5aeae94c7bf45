import Foundation

/// The time resources use: wall-clock time, so that an answer's age survives a restart, and
/// sleeping, for retry back-off, `keepFor` and the moment an observed answer turns stale.
///
/// Every initializer of ``IdentityMap`` takes one as its trailing `clock:` parameter,
/// ``SystemResourceClock`` by default. Tests give the map a clock they drive instead
/// (`ManualClock`, in `ConcordTesting`), so that they never sleep:
///
/// ```swift
/// let clock = ManualClock()
/// let map = IdentityMap(clock: clock)
/// clock.advance(by: .seconds(61))   // every answer fetched a minute ago is now that old
/// ```
///
/// The map calls a clock outside every lock, from any thread.
public protocol ResourceClock: Sendable {
  /// The current wall-clock time.
  var now: Date { get }

  /// Suspends for `duration`; returns at once for a duration of zero or less.
  ///
  /// - Throws: `CancellationError` when the calling task is cancelled, at once or while asleep.
  func sleep(for duration: Duration) async throws
}

extension ResourceClock where Self == SystemResourceClock {
  /// The system's clock: `Date()` and `Task.sleep(for:)`.
  public static var system: Self { SystemResourceClock() }
}

/// The system's clock: the time is `Date()`, and sleeping is `Task.sleep(for:)`.
public struct SystemResourceClock: ResourceClock {
  /// The system's clock.
  public init() {}

  /// `Date()`.
  public var now: Date { Date() }

  /// `Task.sleep(for:)`, after checking for cancellation.
  public func sleep(for duration: Duration) async throws {
    try Task.checkCancellation()
    guard duration > .zero else { return }
    try await Task.sleep(for: duration)
  }
}

extension Duration {
  /// The duration in seconds, as a `TimeInterval`.
  @usableFromInline var _seconds: TimeInterval {
    let (seconds, attoseconds) = components
    return TimeInterval(seconds) + TimeInterval(attoseconds) * 1e-18
  }

  /// The duration, or zero when it is negative: how the settings of a resource read one.
  @usableFromInline var _clampedToZero: Duration { self < .zero ? .zero : self }
}
