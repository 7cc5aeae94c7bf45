/// The newest value a subscriber was given and nobody took yet, with whether a taker is on its
/// way: what lets a lagging consumer (a dispatch queue for ``EntityObserver/observe(on:_:)``,
/// the main actor for `ObservedEntity`) skip to the newest value.
///
/// The map offers values one at a time, in commit order. An offer that finds no taker on its
/// way asks for one; the taker takes values until there is none left, and only then does the
/// next offer ask for another. So there is at most one taker at a time, it never sees an older
/// value after a newer one, and, when it lags, it sees only the newest.
final class _NewestValue<Value: Sendable>: @unchecked Sendable {
  // NB: @unchecked because the mutable fields are only touched while holding `lock`.
  private let lock = Lock()
  private var newest: Value?
  private var isScheduled = false
  private var isCancelled = false

  /// Keeps `value` as the newest; returns whether the caller must schedule a taker.
  func offer(_ value: Value) -> Bool {
    lock.lock()
    defer { lock.unlock() }
    guard !isCancelled else { return false }
    newest = value
    let schedule = !isScheduled
    isScheduled = true
    return schedule
  }

  /// Takes the newest value. `nil` when there is none (or after `cancel()`): the taker is done,
  /// and the next offer schedules another.
  func take() -> Value? {
    lock.lock()
    defer { lock.unlock() }
    guard !isCancelled, let value = newest else {
      isScheduled = false
      return nil
    }
    newest = nil
    return value
  }

  /// Drops what is not taken yet, and everything offered from now on.
  func cancel() {
    lock.lock()
    isCancelled = true
    let dropped = newest
    newest = nil
    lock.unlock()
    // NB: released after the lock: its deinit may run user code.
    withExtendedLifetime(dropped) {}
  }
}
