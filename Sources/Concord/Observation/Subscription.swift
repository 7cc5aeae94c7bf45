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

  @usableFromInline
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
