extension _MapCore {
  /// Stores `value` as a root write and calls `body` with its node, borrowed.
  ///
  /// - Parameter held: Whether `body` takes a hold on the node (a handle); if not, a node this
  ///   write creates is checked for release when the write ends.
  /// - Complexity: O(1) for a value without nested entities, plus O(parents touched);
  ///   O(nested occurrences + parents touched) otherwise.
  @inlinable
  func store<T: Identifiable & Sendable, R>(
    _ value: T, stamp: Stamp?, held: Bool, _ body: (_EntityNode<T>) -> R
  ) -> R {
    withTable(T.self) { table in
      guard table.schema.isLeaf else {
        let node = entityNode(for: value, in: table)
        writeTree(into: node, payload: value, stamp: stamp)
        return body(node)
      }
      // A value holding no nested entity: one lookup, no claim.
      return table.withNode(for: value) { node, created in
        if created {
          let direct = publishesDirectly
          didCreate(node, held: held, journaled: !direct)
          record(stamp, on: node)
          outbox.logStored(node, stamp: stamp)
          if direct { publish(node, .inserted) }
        } else {
          writeLeaf(node, value, stamp: stamp, schema: table.schema)
        }
        return body(node)
      }
    }
  }

  /// The node of `value`'s entity, registered fresh if the map has none.
  ///
  /// A fresh node holds nothing yet; unless a parent links it or a handle is made, it is purged
  /// when the write ends.
  @inlinable
  func entityNode<T: Identifiable & Sendable>(for value: T, in table: _Table<T>) -> _EntityNode<T> {
    table.withNode(for: value) { node, created in
      if created { didCreate(node, held: false, journaled: true) }
      return node
    }
  }

  /// Books a node just registered in its table.
  ///
  /// - Parameter journaled: Whether the journal records it; a write that publishes its change
  ///   directly (see `publishesDirectly`) skips it.
  @inlinable
  func didCreate(_ node: _AnyNode, held: Bool, journaled: Bool) {
    registry.liveCount += 1
    if journaled { touchCreated(node) }
    if !held { noteHoldDropped(node) }
  }

  /// Writes `value` into `node`, whose type holds no nested entity.
  @inlinable
  func writeLeaf<T: Sendable>(_ node: _Node<T>, _ value: T, stamp: Stamp?, schema: _Schema<T>) {
    switch verdict(node, value, schema, stamp: stamp) {
    case .stale:
      outbox.logStale(node, incoming: stamp)
      return
    case .unchanged:
      return
    case .accepted:
      break
    }
    if !node.hasParents && publishesDirectly {
      // NB: the outermost write of a lone entity: its change is known now, so it skips the
      // journal and is published at once, which is what a commit would do.
      let differs = schema.differ(node.value, value)
      node.value = value
      record(stamp, on: node)
      outbox.logStored(node, stamp: stamp)
      publish(node, differs ? .updated : .unchanged)
      return
    }
    touch(node)
    node.value = value
    record(stamp, on: node)
    outbox.logStored(node, stamp: stamp)
    if node.hasParents { propagate(from: node) }
  }

  /// Writes `payload` into `root` and every nested entity it holds, as one pass (see
  /// `_Claims.swift`). Returns whether the root itself was written.
  ///
  /// - Complexity: O(nested occurrences + parents touched).
  @usableFromInline @discardableResult
  func writeTree<V: Sendable>(into root: _Node<V>, payload: V, stamp: Stamp?) -> Bool {
    scratch.stamp = stamp
    let verdict = verdict(root, payload, root.schema(self), stamp: stamp)
    offer(root, payload: root.stash(self).append(payload, self), verdict: verdict, stamp: stamp)
    expandClaims()
    settle(from: applyClaims())
    endPass()
    return verdict == .accepted
  }

  /// Stores `entities` behind a new batch list node.
  @inlinable
  func storeList<T: Identifiable & Sendable>(_ entities: [T], stamp: Stamp?) -> _ListNode<T> {
    let list = _ListNode(value: entities)
    adopt(list)
    touchCreated(list)
    writeTree(into: list, payload: entities, stamp: stamp)
    return list
  }

  /// See `IdentityMap.update(_:id:modifiedAt:_:)`.
  @inlinable
  func update<T: Identifiable & Sendable>(
    _: T.Type, id: T.ID, stamp: Stamp?, _ body: (inout T) -> Void
  ) -> Bool {
    withTable(T.self) { table in
      guard let node = table.node(id) else { return false }
      // NB: an equal stamp may still be a quiet no-op, which only the result can tell.
      guard node.admits(stamp) || stamp == node.s.stamp else {
        outbox.logStale(node, incoming: stamp)
        return true
      }
      var value = node.value
      runUserCode { body(&value) }
      // NB: the body may have removed the entity through a nested write; `node` is a strong
      // reference, so it stays valid to ask.
      guard !node.s.flags.contains(.removed) else { return false }
      if value.id != id {
        store(value, stamp: stamp, held: false) { _ in }
      } else if table.schema.isLeaf {
        writeLeaf(node, value, stamp: stamp, schema: table.schema)
      } else {
        writeTree(into: node, payload: value, stamp: stamp)
      }
      return true
    }
  }
}
