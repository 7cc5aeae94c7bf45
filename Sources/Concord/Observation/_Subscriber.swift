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
  // NB: exclusivity checks are off in release builds only, as on `_AnyNode.s`: the delivery lock
  // already makes every access exclusive between threads, and the dynamic checks were about a
  // fifth of a write with one callback. Debug builds, where the tests run, keep them.
  #if DEBUG
    /// The version of the newest value accepted for delivery.
    @usableFromInline final var lastVersion: UInt64
    /// Whether a thread is inside this subscriber's delivery loop.
    @usableFromInline final var isDelivering = false
    /// Cancelled or ended: nothing more is delivered.
    @usableFromInline final var isClosed = false
  #else
    /// The version of the newest value accepted for delivery.
    @exclusivity(unchecked) @usableFromInline final var lastVersion: UInt64
    /// Whether a thread is inside this subscriber's delivery loop.
    @exclusivity(unchecked) @usableFromInline final var isDelivering = false
    /// Cancelled or ended: nothing more is delivered.
    @exclusivity(unchecked) @usableFromInline final var isClosed = false
  #endif
  /// Cancelled: the subscription let go of the node, or is about to.
  final var isCancelled = false

  @usableFromInline
  init(lastVersion: UInt64) {
    self.lastVersion = lastVersion
  }

  /// Drops the parked values and the callbacks, and returns an object that holds them (a closed
  /// twin of the subscriber), so that the caller releases them after unlocking: their captures'
  /// deinits are user code. Called under the delivery lock.
  ///
  /// NB: an object, not `Any`: the map buries it with other objects, and `Any as AnyObject`
  /// is a dynamic cast that cost a cancel more than the rest of it.
  @usableFromInline
  func close() -> AnyObject? {
    isClosed = true
    return nil
  }

  /// Stops every later delivery and returns what it dropped, to be released by the caller once
  /// it holds no lock; `nil` if it was already cancelled. A subscriber closed by its entity's
  /// removal is still cancelled once, so that its subscription gives back its hold.
  ///
  /// NB: dropping the callback breaks the cycle of a callback that captures its own
  /// subscription.
  @usableFromInline
  final func cancel(_ lock: Lock) -> AnyObject?? {
    lock.lock()
    defer { lock.unlock() }
    guard !isCancelled else { return nil }
    isCancelled = true
    return .some(isClosed ? nil : close())
  }
}

/// A subscriber receiving values of type `Value`: each change (`onValue`), and the removal of
/// its entity, with the last value (`onRemoval`: a stream finishes, `observeRemoval` is told).
@usableFromInline
final class _Subscriber<Value: Sendable>: _AnySubscriber {
  // NB: see `_AnySubscriber.lastVersion` on exclusivity checks.
  #if DEBUG
    /// The callbacks; `nil` once closed.
    @usableFromInline var onValue: (@Sendable (Value) -> Void)?
    @usableFromInline var onRemoval: (@Sendable (Value) -> Void)?
    /// The newest value that arrived while a delivery was running.
    @usableFromInline var pending: _Parked<Value>?
    /// The last value of the entity, when it was removed while a delivery was running.
    @usableFromInline var pendingRemoval: _Parked<Value>?
  #else
    /// The callbacks; `nil` once closed.
    @exclusivity(unchecked) @usableFromInline var onValue: (@Sendable (Value) -> Void)?
    @exclusivity(unchecked) @usableFromInline var onRemoval: (@Sendable (Value) -> Void)?
    /// The newest value that arrived while a delivery was running.
    @exclusivity(unchecked) @usableFromInline var pending: _Parked<Value>?
    /// The last value of the entity, when it was removed while a delivery was running.
    @exclusivity(unchecked) @usableFromInline var pendingRemoval: _Parked<Value>?
  #endif

  @usableFromInline
  init(
    lastVersion: UInt64, onValue: (@Sendable (Value) -> Void)?,
    onRemoval: (@Sendable (Value) -> Void)? = nil
  ) {
    self.onValue = onValue
    self.onRemoval = onRemoval
    super.init(lastVersion: lastVersion)
  }

  /// NB: what it drops moves into a closed twin, made from this subscriber's own metadata: a
  /// box of another type cost a lookup of generic metadata at every cancel.
  @usableFromInline
  override func close() -> AnyObject? {
    let twin = Self(lastVersion: .max, onValue: onValue, onRemoval: onRemoval)
    twin.isClosed = true
    twin.pending = pending
    twin.pendingRemoval = pendingRemoval
    isClosed = true
    onValue = nil
    onRemoval = nil
    pending = nil
    pendingRemoval = nil
    return twin
  }

  /// Delivers `value`, committed at `version`, unless a newer one was already accepted.
  @inlinable
  func deliver(_ value: Value, version: UInt64, _ lock: Lock) {
    lock.lock()
    guard !isClosed, version > lastVersion else { return lock.unlock() }
    lastVersion = version
    guard let callback = onValue else { return lock.unlock() }
    if isDelivering {
      let replaced = pending
      pending = _Parked(value)
      lock.unlock()
      withExtendedLifetime(replaced) {}
      return
    }
    isDelivering = true
    lock.unlock()
    callback(value)
    drain(lock)
  }

  /// Tells the subscriber its entity was removed, with `lastValue`, after whatever was already
  /// accepted; nothing is delivered after that.
  @inlinable
  func removed(_ lastValue: Value, _ lock: Lock) {
    lock.lock()
    guard !isClosed else { return lock.unlock() }
    if isDelivering {
      pendingRemoval = _Parked(lastValue)
      return lock.unlock()
    }
    let callback = onRemoval
    let dropped = close()
    lock.unlock()
    callback?(lastValue)
    withExtendedLifetime(dropped) {}
  }

  /// Delivers what was parked while a callback ran, then leaves the delivery loop.
  @inlinable
  func drain(_ lock: Lock) {
    while true {
      lock.lock()
      if let parked = pending, let callback = onValue {
        pending = nil
        lock.unlock()
        callback(parked.value)
        continue
      }
      isDelivering = false
      guard let lastValue = pendingRemoval?.value, !isClosed else { return lock.unlock() }
      // NB: only here is there anything to drop: closing on every delivery cost a good share of it.
      let callback = onRemoval
      let dropped = close()
      lock.unlock()
      callback?(lastValue)
      withExtendedLifetime(dropped) {}
      return
    }
  }
}

/// A value parked in a subscriber while a delivery runs, boxed: a field of type `Value?` took
/// a lookup of `Optional<Value>`'s metadata at every subscriber's deinit (unspecialized, in
/// this module), and one parks rarely.
@usableFromInline
final class _Parked<Value> {
  @usableFromInline let value: Value

  @inlinable
  init(_ value: Value) {
    self.value = value
  }
}
