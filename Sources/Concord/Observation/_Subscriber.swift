/// One callback or stream observing a node.
///
/// Delivery to one subscriber is serialized: values reach it one at a time, in commit order,
/// never an older after a newer. A value that arrives while the subscriber is busy (another
/// thread is delivering to it, or its own callback wrote to the map) is parked; only the newest
/// parked value survives, and the busy delivery hands it over right after the callback returns.
/// So no callback re-enters itself and no writer ever blocks on a callback.
///
/// The delivery state is guarded by the map's `deliveryLock`, which is never held while calling
/// out.
class _AnySubscriber {
  /// The version of the newest value accepted for delivery.
  final var lastVersion: UInt64
  /// Whether a thread is inside this subscriber's delivery loop.
  final var isDelivering = false
  final var isCancelled = false
  final var isFinished = false
  /// Whether the stream must finish once the parked values are delivered.
  final var finishIsPending = false
  /// Finishes a stream; `nil` for a callback.
  final let onFinish: (@Sendable () -> Void)?

  init(lastVersion: UInt64, onFinish: (@Sendable () -> Void)?) {
    self.lastVersion = lastVersion
    self.onFinish = onFinish
  }

  /// Drops a parked value. Called under the delivery lock.
  func dropPending() {}

  /// Ends a stream after whatever was already accepted.
  final func finish(_ lock: Lock) {
    lock.lock()
    guard !isFinished, !isCancelled else { return lock.unlock() }
    if isDelivering {
      finishIsPending = true
      return lock.unlock()
    }
    isFinished = true
    lock.unlock()
    onFinish?()
  }

  /// Stops every later delivery. Returns `false` if it was already cancelled.
  final func cancel(_ lock: Lock) -> Bool {
    lock.lock()
    defer { lock.unlock() }
    guard !isCancelled else { return false }
    isCancelled = true
    dropPending()
    return true
  }
}

/// A subscriber receiving values of type `Value`.
final class _Subscriber<Value: Sendable>: _AnySubscriber {
  let onValue: @Sendable (Value) -> Void
  /// The newest value that arrived while a delivery was running.
  private var pending: Value?

  init(
    lastVersion: UInt64, onValue: @escaping @Sendable (Value) -> Void,
    onFinish: (@Sendable () -> Void)? = nil
  ) {
    self.onValue = onValue
    super.init(lastVersion: lastVersion, onFinish: onFinish)
  }

  override func dropPending() {
    pending = nil
  }

  /// Delivers `value`, committed at `version`, unless a newer one was already accepted.
  func deliver(_ value: Value, version: UInt64, _ lock: Lock) {
    lock.lock()
    guard !isCancelled, !isFinished, version > lastVersion else { return lock.unlock() }
    lastVersion = version
    if isDelivering {
      pending = value
      return lock.unlock()
    }
    isDelivering = true
    lock.unlock()
    var next = value
    while true {
      onValue(next)
      lock.lock()
      if let parked = pending {
        pending = nil
        lock.unlock()
        next = parked
        continue
      }
      isDelivering = false
      let finishes = finishIsPending && !isCancelled && !isFinished
      if finishes { isFinished = true }
      lock.unlock()
      if finishes { onFinish?() }
      return
    }
  }
}
