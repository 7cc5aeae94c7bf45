/// Something to tell subscribers once the map's lock is released.
class _Delivery {
  func run(_: Lock) { fatalError("abstract") }
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

/// The end of the streams of a removed entity.
final class _FinishDelivery: _Delivery {
  let subscribers: [_AnySubscriber]

  init(subscribers: [_AnySubscriber]) {
    self.subscribers = subscribers
  }

  override func run(_ lock: Lock) {
    for subscriber in subscribers { subscriber.finish(lock) }
  }
}

/// What one write leaves to do after the lock is released.
struct _Outcome {
  let events: [() -> IdentityMapEvent]
  // NB: what the write dropped and whose release may run user code (a value's deinit, a
  // cancelled callback's captures) is kept here, to be released after the lock.
  let graveyard: [AnyObject]
  let undo: [_Undo]
  /// The deliveries, the first one inline: most writes change one observed node.
  private var first: _Delivery?
  private var more: [_Delivery] = []

  init(events: [() -> IdentityMapEvent], graveyard: [AnyObject], undo: [_Undo]) {
    self.events = events
    self.graveyard = graveyard
    self.undo = undo
  }

  mutating func append(_ delivery: _Delivery) {
    if first == nil { first = delivery } else { more.append(delivery) }
  }

  /// Logs, then delivers, on the calling thread.
  func run(logger: (any IdentityMapLogger)?, deliveryLock: Lock) {
    if !events.isEmpty, let logger {
      for event in events { logger.log(event()) }
    }
    first?.run(deliveryLock)
    for delivery in more { delivery.run(deliveryLock) }
  }
}
