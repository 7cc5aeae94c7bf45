/// How a failed try of a loader is retried.
///
/// Before the *n*-th retry the fetch waits min(cap, base × 2^(n−1) × factor) on the map's
/// clock, one `sleep(for:)`, where the factor is a random number in [0.5, 1.5) with `jitter`,
/// and 1 without. The fetch stays in flight meanwhile: callers keep joining it.
///
/// ```swift
/// let feed = map.resource(.feed, retry: .exponential(attempts: 4, retryIf: { error in
///   (error as? HTTPError)?.isTransient ?? true
/// })) { try await api.feed() }
/// ```
public struct RetryPolicy: Sendable {
  /// Tries in all, the first included; at least 1.
  let attempts: Int
  let base: Duration
  let cap: Duration
  let jitter: Bool
  let retryIf: @Sendable (any Error) -> Bool

  /// No retry: the first failure is the fetch's.
  public static var none: RetryPolicy {
    RetryPolicy(attempts: 1, base: .zero, cap: .zero, jitter: false, retryIf: { _ in false })
  }

  /// Retries with exponential back-off.
  ///
  /// - Parameters:
  ///   - attempts: Tries in all, the first included; 1 or less is ``none``.
  ///   - base: The wait before the first retry (before jitter); doubles at each retry.
  ///   - cap: The longest wait.
  ///   - jitter: Whether each wait is multiplied by a random factor in [0.5, 1.5), so that
  ///     clients that failed together do not retry together.
  ///   - retryIf: Which errors are worth another try. `CancellationError` never is, and
  ///     neither is ``ResourceError/notModifiedWithoutAnswer``.
  public static func exponential(
    attempts: Int = 3, base: Duration = .milliseconds(300), cap: Duration = .seconds(20),
    jitter: Bool = true, retryIf: @escaping @Sendable (any Error) -> Bool = { _ in true }
  ) -> RetryPolicy {
    RetryPolicy(
      attempts: max(1, attempts), base: base._clampedToZero, cap: cap._clampedToZero,
      jitter: jitter, retryIf: retryIf)
  }

  /// The wait before the `retry`-th retry (1 for the first), given a factor for the jitter.
  @usableFromInline
  func delay(beforeRetry retry: Int, factor: Double) -> Duration {
    let doubling = Double(1 << min(max(retry - 1, 0), 62))
    let wait = base._seconds * doubling * (jitter ? factor : 1)
    return wait >= cap._seconds ? cap : .nanoseconds(Int64((wait * 1e9).rounded()))
  }

  /// Whether a try that failed with `error` is tried again, as try number `attempt`.
  @usableFromInline
  func retries(_ error: any Error, attempt: Int) -> Bool {
    guard attempt < attempts, !(error is CancellationError),
      (error as? ResourceError) != .notModifiedWithoutAnswer
    else { return false }
    return retryIf(error)
  }
}
