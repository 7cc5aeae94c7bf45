import Dispatch

/// Carries a subscriber's values to a dispatch queue for ``EntityObserver/observe(on:_:)``.
///
/// The map offers values one at a time, in commit order. The relay keeps the newest one not yet
/// delivered, and has at most one drain on the queue, which delivers until nothing is left: a
/// lagging queue gets the newest value, never an older one after it, and calls never overlap.
final class _QueueRelay<Value: Sendable>: @unchecked Sendable {
  // NB: @unchecked because the mutable fields are only touched while holding `lock`.
  private let lock = Lock()
  private let queue: DispatchQueue
  private let onChange: @Sendable (Value) -> Void
  private var newest: Value?
  private var isDraining = false
  private var isCancelled = false

  init(queue: DispatchQueue, onChange: @escaping @Sendable (Value) -> Void) {
    self.queue = queue
    self.onChange = onChange
  }

  /// Keeps `value` as the newest, and starts a drain on the queue if none is on its way.
  func offer(_ value: Value) {
    lock.lock()
    guard !isCancelled else { return lock.unlock() }
    newest = value
    let start = !isDraining
    isDraining = true
    lock.unlock()
    if start { queue.async { self.drain() } }
  }

  /// Delivers the newest value until there is none. On the queue.
  private func drain() {
    while true {
      lock.lock()
      guard !isCancelled, let value = newest else {
        isDraining = false
        return lock.unlock()
      }
      newest = nil
      lock.unlock()
      onChange(value)
    }
  }

  /// Drops what is not delivered yet, and everything offered from now on.
  func cancel() {
    lock.lock()
    isCancelled = true
    let dropped = newest
    newest = nil
    lock.unlock()
    withExtendedLifetime(dropped) {}
  }
}
