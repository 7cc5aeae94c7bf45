/// An observation that lasts until it is cancelled or released.
///
/// ```swift
/// var subscriptions = Set<Subscription>()
/// author.observe { print($0.name) }.store(in: &subscriptions)
/// ```
///
/// A subscription holds the observed value alive, like a handle does.
public final class Subscription: Hashable, Sendable {
  private let core: _MapCore
  // NB: nonisolated(unsafe): the node is only touched while holding `core.lock`, the
  // subscriber's delivery state while holding `core.deliveryLock`.
  nonisolated(unsafe) private let node: _AnyNode
  nonisolated(unsafe) private let subscriber: _AnySubscriber

  /// Runs when the subscription is cancelled, before the map forgets the subscriber: see
  /// ``EntityObserver/observe(on:_:)``.
  private let onCancel: (@Sendable () -> Void)?

  init(
    core: _MapCore, node: _AnyNode, subscriber: _AnySubscriber,
    onCancel: (@Sendable () -> Void)? = nil
  ) {
    self.core = core
    self.node = node
    self.subscriber = subscriber
    self.onCancel = onCancel
  }

  deinit {
    cancel()
  }

  /// Stops the observation and releases its hold on the value.
  ///
  /// No callback starts after `cancel()` returns; one already running on another thread
  /// finishes. Calling it again does nothing. It is safe from any thread and from inside the
  /// callback itself.
  public func cancel() {
    onCancel?()
    core.cancel(subscriber, on: node)
  }

  /// Keeps this subscription in `set`, so that it lives as long as the set holds it.
  public func store(in set: inout Set<Subscription>) {
    set.insert(self)
  }

  /// Subscriptions are equal when they are the same object.
  public static func == (lhs: Subscription, rhs: Subscription) -> Bool {
    lhs === rhs
  }

  /// Hashes the subscription's identity.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(ObjectIdentifier(self))
  }
}

extension _MapCore {
  /// Adds `subscriber` to `node`: it holds the node from now on.
  func attach(_ subscriber: _AnySubscriber, to node: _AnyNode) {
    lifetime.unbuffer(node)
    node.extras.subscribers.append(subscriber)
    lifetime.takeExternalHold(on: node, pinning: self)
    lifetime.openSubscriptions += 1
  }

  /// Cancels `subscriber` and gives back its hold on `node`.
  ///
  /// NB: not a `write`: a subscription may be cancelled by a deinit that runs in the middle of
  /// a write, where writing is not allowed; the hold is then given back when that write ends.
  func cancel(_ subscriber: _AnySubscriber, on node: _AnyNode) {
    guard case .some(let dropped) = subscriber.cancel(deliveryLock) else { return }
    lock.lock()
    // NB: the dropped callback goes with the outbox, released after the outermost frame
    // unlocks: its captures' deinits are user code.
    outbox.graveyard.append(dropped as AnyObject)
    guard frame.depth == 0 else {
      lifetime.deferred.append(.cancel(node, subscriber))
      lock.unlock()
      return
    }
    frame.depth = 1
    detach(subscriber, from: node)
    endWrite()
  }

  /// Removes `subscriber` from `node`. Its callback is released only after the lock.
  func detach(_ subscriber: _AnySubscriber, from node: _AnyNode) {
    guard let extras = node.s.extras,
      let index = extras.subscribers.firstIndex(where: { $0 === subscriber })
    else { return }
    outbox.graveyard.append(extras.subscribers.remove(at: index))
    lifetime.openSubscriptions -= 1
    lifetime.dropExternalHold(on: node, graveyard: &outbox.graveyard)
  }
}
