import Dispatch

/// A handle on one stored value: an entity, the entities of a batch store, or an alias.
///
/// The handle reads the map live and keeps what it observes alive: as long as a copy of it
/// exists, `find` still finds the entity. Copies are cheap and share one hold.
///
/// ```swift
/// let author = map.store(Author(id: 1, name: "Ursula"))
/// author.value.name                      // "Ursula"
///
/// let subscription = author.observe { author in
///   print("renamed to", author.name)
/// }
/// map.update(Author.self, id: 1) { $0.name = "Ursula K. Le Guin" }   // prints, before returning
///
/// for await author in author.values {    // the current value, then every change
///   print(author.name)
/// }
/// ```
public struct EntityObserver<Value: Sendable>: Sendable {
  @usableFromInline let _handle: _Handle<Value>

  @inlinable
  init(_ handle: _Handle<Value>) {
    _handle = handle
  }

  /// The current value, read from the map.
  ///
  /// After the entity is removed, this is its last value.
  @inlinable
  public var value: Value {
    _handle.value
  }

  /// Calls `onChange` with each change committed after this call.
  ///
  /// Delivery is synchronous: on the thread that wrote, after the map's lock is released, before
  /// the write returns. An `Equatable` value that did not change is not delivered, and a
  /// transaction delivers once, its final value. The callback may read and write the map and
  /// cancel its own subscription.
  ///
  /// Values reach one subscriber one at a time and never out of order. If a change arrives while
  /// the callback is still running (a write from inside the callback, or another thread writing
  /// at the same moment), it waits; only the newest waiting change is kept, and it is delivered
  /// as soon as the running callback returns, by the thread that ran it.
  ///
  /// The subscription holds the value alive until it is cancelled or deinitialized.
  ///
  /// - Returns: A subscription. Keep it: releasing it cancels the observation.
  @inlinable
  public func observe(_ onChange: @escaping @Sendable (Value) -> Void) -> Subscription {
    observe(includingCurrentValue: false, onChange)
  }

  /// Calls `onChange` with the current value at once, if asked, then with each change committed
  /// after this call, as ``observe(_:)`` does.
  ///
  /// Prefer this to reading ``value`` and then calling ``observe(_:)``: nothing can slip in
  /// between. A change committed meanwhile by another thread is delivered after the current
  /// value, never before it, and never lost.
  ///
  /// Called inside a write (an `update` or transaction body), it delivers nothing at once:
  /// the subscriber gets the value committed when that write ends, so that a value that never
  /// commits is never delivered.
  ///
  /// ```swift
  /// let subscription = book.observe(includingCurrentValue: true) { book in
  ///   render(book)   // at once, then on every change
  /// }
  /// ```
  @inlinable
  public func observe(
    includingCurrentValue: Bool, _ onChange: @escaping @Sendable (Value) -> Void
  ) -> Subscription {
    subscribe(includingCurrentValue: includingCurrentValue) {
      _Subscriber<Value>(lastVersion: $0, onValue: onChange)
    }
  }

  /// Attaches the subscriber `make` builds from its initial version, lets `prepare` see the
  /// subscription, then delivers the current value through the ordered path if asked.
  ///
  /// Inside a write (a transaction body, say), the current value is not delivered at once: the
  /// subscriber gets the value committed when the write ends, so that nothing uncommitted is
  /// ever delivered.
  ///
  /// NB: inlinable, as `observe(_:)`, `observe(includingCurrentValue:_:)` and
  /// `observeRemoval(_:)` are, so that a subscription made through them is specialized where
  /// the value's type is known: generic, its read's tuple and its subscriber's type each took
  /// a lookup of generic metadata at every subscription.
  @inlinable
  func subscribe(
    includingCurrentValue: Bool, endsOnRemoval: Bool = false,
    _ make: (_ lastVersion: UInt64) -> _Subscriber<Value>,
    prepare: (Subscription) -> Void = { _ in }, onCancel: (@Sendable () -> Void)? = nil
  ) -> Subscription {
    let core = _handle.core
    let node = _handle.node
    let (subscriber, value, version, isRemoved, insideWrite) = core.read {
      core.subscribe(to: node, includingCurrentValue: includingCurrentValue, make)
    }
    let subscription = Subscription(
      core: core, node: node, subscriber: subscriber, onCancel: onCancel)
    prepare(subscription)
    guard !insideWrite else { return subscription }
    let lock = core.deliveryLock
    if includingCurrentValue { subscriber.deliver(value, version: version, lock) }
    if endsOnRemoval && isRemoved { subscriber.removed(value, lock) }
    return subscription
  }

  /// Like ``observe(_:)``, but calls `onChange` on `queue`: in commit order, never with an
  /// older value after a newer one, and, when the queue lags behind the writes, with the newest
  /// value only (the ones in between are skipped).
  ///
  /// ```swift
  /// let subscription = issue.observe(on: .main) { issue in
  ///   titleLabel.text = issue.title  // on the main queue
  /// }
  /// ```
  ///
  /// One call of `onChange` runs at a time, even on a concurrent queue. After
  /// ``Subscription/cancel()`` returns, a value not yet handed to the queue is never delivered;
  /// a call already running finishes. Like every subscription, it holds the entity while it
  /// lives.
  public func observe(
    on queue: DispatchQueue, _ onChange: @escaping @Sendable (Value) -> Void
  ) -> Subscription {
    let newest = _NewestValue<Value>()
    return subscribe(
      includingCurrentValue: false,
      {
        _Subscriber<Value>(
          lastVersion: $0,
          onValue: { value in
            guard newest.offer(value) else { return }
            queue.async { while let value = newest.take() { onChange(value) } }
          })
      },
      onCancel: { newest.cancel() })
  }

  /// The current value, then each committed change.
  ///
  /// The stream keeps only the newest value when its reader lags behind. For a single entity it
  /// finishes when the entity is removed (at once if it already is). Ending the iteration, or
  /// dropping the stream, cancels the underlying subscription.
  ///
  /// The subscription starts when you read this property, not when iteration starts: from then
  /// on, the stream holds the entity, as any subscription does, until it is dropped or its
  /// iteration ends. A stream read but never iterated keeps its entity alive while it lives, so
  /// read `values` where you iterate it (`for await value in handle.values`).
  public var values: AsyncStream<Value> {
    let (stream, continuation) = AsyncStream.makeStream(
      of: Value.self, bufferingPolicy: .bufferingNewest(1))
    _ = subscribe(
      includingCurrentValue: true, endsOnRemoval: true,
      {
        _Subscriber<Value>(
          lastVersion: $0, onValue: { continuation.yield($0) },
          onRemoval: { _ in continuation.finish() })
      },
      prepare: { subscription in continuation.onTermination = { _ in subscription.cancel() } })
    return stream
  }
}

extension EntityObserver where Value: Identifiable {
  /// Calls `onRemove` once, with the last value, when the entity is removed from the map: by
  /// `remove`, a removal cascade, or `removeAll`.
  ///
  /// It is not called when the entity is merely released because nothing holds it any more:
  /// like every subscription, this one holds the entity while it lives. If the entity was
  /// already removed, `onRemove` is called at once. A rolled-back transaction calls nothing.
  ///
  /// ```swift
  /// let subscription = issue.observeRemoval { issue in
  ///   navigator.close(screenFor: issue.id)
  /// }
  /// ```
  ///
  /// - Returns: A subscription. Keep it: releasing it cancels the observation.
  @inlinable
  public func observeRemoval(_ onRemove: @escaping @Sendable (Value) -> Void) -> Subscription {
    subscribe(includingCurrentValue: false, endsOnRemoval: true) {
      _Subscriber<Value>(lastVersion: $0, onValue: nil, onRemoval: onRemove)
    }
  }

  /// Whether the entity was removed from the map.
  ///
  /// A removed entity's handle keeps its last value, its streams are finished, and its
  /// callbacks are never called again. Storing the same id later creates a new entity, which
  /// this handle does not follow.
  public var isRemoved: Bool {
    let node = _handle.node
    return _handle.core.readOnly { node.s.flags.contains(.removed) }
  }
}

/// The object behind one `EntityObserver` and its copies. While it lives it counts as one hold
/// on the node; its deinit gives the hold back.
@usableFromInline
final class _Handle<Value: Sendable>: Sendable {
  /// NB: nonisolated(unsafe): the node is only touched while holding the map's lock, but for
  /// its external hold count, which is atomic (see `_AnyNode+Holds.swift`). And
  /// unmanaged, by rule 6 of `_Lifetime.swift`: while a handle lives, the map holds its node
  /// (in a table, or adopted), and the map keeps itself alive while the node is pinned, which
  /// the handle's hold makes it (see `_Lifetime.pin(_:)`). Both are borrowed, never retained,
  /// on `find` and on release.
  ///
  /// NB: the map is found through the node (`_AnyNode.core`), not kept here: 8 bytes fewer
  /// make a handle a 32-byte allocation rather than a 48-byte one, for every entity held.
  @usableFromInline nonisolated(unsafe) let _node: Unmanaged<_Node<Value>>

  /// A handle on a node whose hold `_MapCore.holdForHandle(_:)` or
  /// `_MapCore.holdForHandleShared(_:id:)` took.
  @inlinable
  init(held node: Unmanaged<_Node<Value>>) {
    _node = node
  }

  /// The map.
  @inlinable
  var _core: Unmanaged<_MapCore> { _node._withUnsafeGuaranteedRef { $0.core } }

  /// The map.
  @inlinable
  var core: _MapCore { _core.takeUnretainedValue() }

  /// The node.
  @inlinable
  var node: _Node<Value> { _node.takeUnretainedValue() }

  /// The node's value, read under the map's lock: shared with other readers, or, inside one
  /// of the map's frames, under the exclusive hold this thread has.
  ///
  /// NB: copying the value only retains what it references: nothing runs that could write.
  @inlinable
  var value: Value {
    _core._withUnsafeGuaranteedRef { core in
      core.readOnly { _node._withUnsafeGuaranteedRef { $0.value } }
    }
  }

  deinit {
    // NB: when this handle was the map's last way in, `releaseHandle` returns with the map
    // freed (see `_MapCore.endWrite()`): nothing here touches either reference after it.
    _core._withUnsafeGuaranteedRef { core in
      _node._withUnsafeGuaranteedRef { core.releaseHandle(of: $0) }
    }
  }
}
