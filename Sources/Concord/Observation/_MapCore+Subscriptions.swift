// Subscriptions: a subscriber attached to a node is an external hold on it, and is told of each
// change the node's commit publishes (see `_Outbox`).

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
