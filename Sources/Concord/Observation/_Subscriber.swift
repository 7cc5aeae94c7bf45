/// One callback or stream observing a node.
///
/// Delivery to one subscriber is serialized: values reach it one at a time, in commit order,
/// never an older after a newer. A value that arrives while the subscriber is busy (another
/// thread is delivering to it, or its own callback wrote to the map) is parked; only the newest
/// parked value survives, and the busy delivery hands it over right after the callback returns.
/// So no callback re-enters itself and no writer ever blocks on a callback.
///
/// The delivery state is guarded by the map's `deliveryLock`, which is never held while calling
/// out or releasing a callback.
@usableFromInline
class _AnySubscriber {
  /// The version of the newest value accepted for delivery.
  final var lastVersion: UInt64
  /// Whether a thread is inside this subscriber's delivery loop.
  final var isDelivering = false
  /// Cancelled or finished: nothing more is delivered.
  final var isClosed = false
  /// Cancelled: the subscription let go of the node, or is about to.
  final var isCancelled = false
  /// Whether the stream must finish once the parked values are delivered.
  final var finishIsPending = false
  /// Finishes a stream; `nil` for a callback, and once closed.
  final var onFinish: (@Sendable () -> Void)?

  init(lastVersion: UInt64, onFinish: (@Sendable () -> Void)?) {
    self.lastVersion = lastVersion
    self.onFinish = onFinish
  }

  /// Drops the parked value and the callbacks, and returns them, so that the caller releases
  /// them after unlocking: their captures' deinits are user code. Called under the delivery lock.
  func close() -> Any? {
    isClosed = true
    defer { onFinish = nil }
    return onFinish
  }

  /// Ends a stream after whatever was already accepted.
  final func finish(_ lock: Lock) {
    lock.lock()
    guard !isClosed else { return lock.unlock() }
    if isDelivering {
      finishIsPending = true
      return lock.unlock()
    }
    let finish = onFinish
    let dropped = close()
    lock.unlock()
    finish?()
    withExtendedLifetime(dropped) {}
  }

  /// Stops every later delivery and returns what it dropped, to be released by the caller once
  /// it holds no lock; `nil` if it was already cancelled. A subscriber closed by a finish is
  /// still cancelled once, so that its subscription gives back its hold.
  ///
  /// NB: dropping the callback breaks the cycle of a callback that captures its own
  /// subscription.
  final func cancel(_ lock: Lock) -> Any?? {
    lock.lock()
    defer { lock.unlock() }
    guard !isCancelled else { return nil }
    isCancelled = true
    return .some(isClosed ? nil : close())
  }
}

/// A subscriber receiving values of type `Value`.
final class _Subscriber<Value: Sendable>: _AnySubscriber {
  /// The callback; `nil` once closed.
  private var onValue: (@Sendable (Value) -> Void)?
  /// The newest value that arrived while a delivery was running.
  private var pending: Value?

  init(
    lastVersion: UInt64, onValue: @escaping @Sendable (Value) -> Void,
    onFinish: (@Sendable () -> Void)? = nil
  ) {
    self.onValue = onValue
    super.init(lastVersion: lastVersion, onFinish: onFinish)
  }

  override func close() -> Any? {
    let dropped = (super.close(), onValue, pending)
    onValue = nil
    pending = nil
    return dropped
  }

  /// Delivers `value`, committed at `version`, unless a newer one was already accepted.
  func deliver(_ value: Value, version: UInt64, _ lock: Lock) {
    lock.lock()
    guard !isClosed, version > lastVersion, let callback = onValue else { return lock.unlock() }
    lastVersion = version
    if isDelivering {
      let replaced = pending
      pending = value
      lock.unlock()
      withExtendedLifetime(replaced) {}
      return
    }
    isDelivering = true
    lock.unlock()
    var next = value
    var current = callback
    while true {
      current(next)
      lock.lock()
      if let parked = pending, let callback = onValue {
        pending = nil
        lock.unlock()
        next = parked
        current = callback
        continue
      }
      isDelivering = false
      var finish: (@Sendable () -> Void)?
      var dropped: Any?
      if finishIsPending && !isClosed {
        finish = onFinish
        dropped = close()
      }
      lock.unlock()
      finish?()
      withExtendedLifetime(dropped) {}
      return
    }
  }
}
