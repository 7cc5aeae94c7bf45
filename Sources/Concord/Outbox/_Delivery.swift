/// Something to tell subscribers once the map's lock is released.
@usableFromInline
class _Delivery {
  func run(_: Lock) { fatalError("abstract") }

  @usableFromInline init() {}
}

/// A committed value for the subscribers of one node.
final class _ValueDelivery<Value: Sendable>: _Delivery {
  let value: Value
  let version: UInt64
  let subscribers: [_AnySubscriber]

  init(value: Value, version: UInt64, subscribers: [_AnySubscriber]) {
    self.value = value
    self.version = version
    self.subscribers = subscribers
  }

  override func run(_ lock: Lock) {
    for subscriber in subscribers {
      unsafeDowncast(subscriber, to: _Subscriber<Value>.self).deliver(value, version: version, lock)
    }
  }
}

/// The removal of an entity, with its last value: its streams finish, its removal callbacks
/// are called.
final class _RemovalDelivery<Value: Sendable>: _Delivery {
  let lastValue: Value
  let subscribers: [_AnySubscriber]

  init(lastValue: Value, subscribers: [_AnySubscriber]) {
    self.lastValue = lastValue
    self.subscribers = subscribers
  }

  override func run(_ lock: Lock) {
    for subscriber in subscribers {
      unsafeDowncast(subscriber, to: _Subscriber<Value>.self).removed(lastValue, lock)
    }
  }
}

/// The deliveries of one write, the first one inline: most writes change one observed node.
@usableFromInline
struct _Deliveries {
  private var first: _Delivery?
  private var more: [_Delivery] = []

  @usableFromInline init() {}

  @inlinable
  var isEmpty: Bool { _isEmpty }

  @usableFromInline
  var _isEmpty: Bool { first == nil }

  @usableFromInline
  mutating func append(_ delivery: _Delivery) {
    if first == nil { first = delivery } else { more.append(delivery) }
  }

  /// Runs every delivery, in order.
  func run(_ lock: Lock) {
    first?.run(lock)
    for delivery in more { delivery.run(lock) }
  }
}

/// What one write leaves to do after the lock is released.
@usableFromInline
struct _Outcome {
  let events: [() -> IdentityMapEvent]
  // NB: what the write dropped and whose release may run user code (a value's deinit, a
  // cancelled callback's captures) is kept here, to be released after the lock.
  let graveyard: [AnyObject]
  let deliveries: _Deliveries

  @usableFromInline
  init(events: [() -> IdentityMapEvent], graveyard: [AnyObject], deliveries: _Deliveries) {
    self.events = events
    self.graveyard = graveyard
    self.deliveries = deliveries
  }

  /// Logs, then delivers, on the calling thread.
  @usableFromInline
  func run(logger: (any IdentityMapLogger)?, deliveryLock: Lock) {
    if !events.isEmpty, let logger {
      for event in events { logger.log(event()) }
    }
    deliveries.run(deliveryLock)
  }
}
