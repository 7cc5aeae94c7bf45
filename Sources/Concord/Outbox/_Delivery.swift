/// Something to tell subscribers once the map's lock is released.
///
/// NB: a closure made where the value's type is known, so that delivering runs code specialized
/// for it; making one costs one allocation, its context.
@usableFromInline
struct _Delivery {
  @usableFromInline let run: (Lock) -> Void

  @inlinable
  init(_ run: @escaping (Lock) -> Void) {
    self.run = run
  }

  /// A committed value, at `version`, for `subscribers` (each a `_Subscriber<Value>`).
  @inlinable
  static func value<Value: Sendable>(
    _ value: Value, version: UInt64, to subscribers: [_AnySubscriber]
  ) -> _Delivery {
    _Delivery { lock in
      for subscriber in subscribers {
        unsafeDowncast(subscriber, to: _Subscriber<Value>.self).deliver(
          value, version: version, lock)
      }
    }
  }

  /// The removal of an entity, with its last value: its streams finish, its removal callbacks
  /// are called.
  @inlinable
  static func removal<Value: Sendable>(lastValue: Value, to subscribers: [_AnySubscriber])
    -> _Delivery
  {
    _Delivery { lock in
      for subscriber in subscribers {
        unsafeDowncast(subscriber, to: _Subscriber<Value>.self).removed(lastValue, lock)
      }
    }
  }
}

/// The deliveries of one write, the first one inline: most writes change one observed node.
@usableFromInline
struct _Deliveries {
  @usableFromInline var first: _Delivery?
  @usableFromInline var more: [_Delivery] = []

  @usableFromInline init() {}

  @inlinable
  var isEmpty: Bool { mutating get { first == nil } }

  @inlinable
  mutating func append(_ delivery: _Delivery) {
    if first == nil { first = delivery } else { more.append(delivery) }
  }

  /// Runs every delivery, in order.
  @usableFromInline
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
  let graveyard: _Graveyard
  let deliveries: _Deliveries

  @usableFromInline
  init(events: [() -> IdentityMapEvent], graveyard: _Graveyard, deliveries: _Deliveries) {
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
