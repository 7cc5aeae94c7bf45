// What each kind of node does beyond its value's own operations (`_WitnessHooks`): entities
// are registered in their table and feed their type's consumers; batch lists rebuild from their
// entities; queries detach from their index; aliases persist with their entity type.
//
// NB: each factory is always inlined into the table's specialized code that makes a witness,
// so that its closures run specialized; see `_Witness.make`.

extension _Table {
  /// An entity node of `T`, downcast. NB: only for nodes of this table's witness.
  @inlinable @inline(__always)
  static func entity(_ node: _AnyNode) -> _EntityNode<T> {
    unsafeDowncast(node, to: _EntityNode<T>.self)
  }

  /// The hooks of the entities of `T`.
  @inlinable @inline(__always)
  static func entityHooks() -> _WitnessHooks {
    var hooks = _WitnessHooks()
    hooks.reference = { node in EntityReference(T.self, id: entity(node).value.id) }
    hooks.logChange = { node, kind, saved, outbox in
      let node = entity(node)
      let reference = EntityReference(T.self, id: node.value.id)
      let before: T? =
        kind == .inserted || saved < 0 ? nil : node.table.stash.values[Int(saved)]
      let after: T? = kind == .removed ? nil : node.value
      outbox.log { .changed(reference, before: before, after: after) }
    }
    hooks.unregister = { node, core in
      let node = entity(node)
      node.withTable { table in
        guard let removed = table.remove(node) else { return }
        core.outbox.bury(removed)
        node.s.flags.remove(.registered)
        core.registry.noteDeparture()
        // NB: a removal reaches the indexes with the change log; a release never does.
        if node.s.flags.contains(.purged) { table.consumers?.forget(node) }
      }
    }
    hooks.reregister = { node, core in
      let node = entity(node)
      let previous = node.table.insert(node)
      // NB: rollback restores in reverse order, so the slot is empty by then: whatever took it
      // after this node left was created later, and was taken out first.
      precondition(
        previous == nil, "Concord: rollback found the slot of \(T.self) \(node.value.id) taken")
      core.registry.liveCount += 1
      node.s.flags.insert(.registered)
      node.s.flags.remove(.removed)
    }
    // NB: the table borrowed (`withTable`) in the hooks a commit calls for every change.
    hooks.hasConsumers = { node in
      entity(node).withTable { $0.consumers != nil || $0.persisted != nil }
    }
    hooks.readsOldValues = { entity($0).withTable { $0.consumers != nil } }
    hooks.feedConsumers = { node, kind, saved, stampBefore, core in
      let node = entity(node)
      node.withTable { table in
        table.persisted?._record(node, kind, stampBefore: stampBefore, core)
        guard let consumers = table.consumers.map(Unmanaged.passUnretained) else { return }
        let old = saved >= 0 ? table.stash.values[Int(saved)] : nil
        // NB: borrowed: the table keeps its consumers.
        consumers._withUnsafeGuaranteedRef { $0._feed(node, kind, old: old, core) }
      }
    }
    hooks.persistRemoval = { node, core in
      let node = entity(node)
      guard let persisted = node.table.persisted else { return }
      core.persistence?.current.append(_RowRemoval(persisted, id: node.value.id))
    }
    hooks.reloadFromStore = { node, core in
      let node = entity(node)
      if let persisted = node.table.persisted { core.reload(node, from: persisted) }
    }
    hooks.entomb = { node, core in
      let node = entity(node)
      node.table.entomb(node.value.id, stamp: node.s.stamp, core)
    }
    let shadowOps = _ShadowOps(of: T.self)
    hooks.makeShadow = { node, saved, stamp in
      let node = entity(node)
      let base: T? =
        switch saved {
        case _JournalEntry.created: nil
        case _JournalEntry.notSaved: node.value
        default: node.table.stash.values[Int(saved)]
        }
      return _Shadow(node: node, base: base, baseStamp: stamp, ops: shadowOps)
    }
    return hooks
  }

  /// The hooks of the batch lists of `T`.
  @inlinable @inline(__always)
  static func listHooks() -> _WitnessHooks {
    var hooks = _WitnessHooks()
    hooks.materialize = { node in
      let list = _typed(node, [T].self)
      // NB: a list links each of its elements, in order. Only a rollback that gives a list
      // back the entities it was stored with (`_MapCore.restoreCreated`) leaves it with
      // another number of elements than links: the value is then made from the links.
      guard list.value.count == list.children.count else {
        list.value = list.children.map { _Node<T>._value(of: $0.child) }
        return
      }
      list._materialize()
    }
    return hooks
  }

  /// The hooks of the live queries of `T`.
  @inlinable @inline(__always)
  static func queryHooks() -> _WitnessHooks {
    var hooks = _WitnessHooks()
    hooks.detachConsumer = { node, core in
      unsafeDowncast(node, to: _QueryNode<T>.self)._detach(core)
    }
    hooks.problem = { node, _ in unsafeDowncast(node, to: _QueryNode<T>.self).problem }
    return hooks
  }

  /// The hooks of the aliases whose value is a `Wrapped` made of entities of `T`, which
  /// `entities` lists and `make` makes from entities: one entity, or an array of them.
  @inlinable @inline(__always)
  static func aliasHooks<Wrapped: Sendable>(
    of _: Wrapped.Type, entities: @escaping @Sendable (Wrapped) -> [T],
    make: @escaping @Sendable ([T]) -> Wrapped?
  ) -> _WitnessHooks {
    func alias(_ node: _AnyNode) -> _AliasNode<Wrapped> {
      unsafeDowncast(node, to: _AliasNode<Wrapped>.self)
    }
    var hooks = _WitnessHooks()
    hooks.holdsAliasValue = { alias($0).value != nil }
    hooks.clearAliasValue = { alias($0).value = nil }
    hooks.aliasName = { alias($0).id.name }
    hooks.unregister = { node, core in
      let node = alias(node)
      if core.registry.aliases[node.id] === node {
        // NB: released after the lock, with the outbox, like every node a write drops.
        core.outbox.bury(node)
        core.registry.aliases[node.id] = nil
      }
      node.s.flags.remove(.registered)
    }
    hooks.reregister = { node, core in
      let node = alias(node)
      core.registry.aliases[node.id] = node
      node.s.flags.insert(.registered)
      node.s.flags.remove(.removed)
    }
    hooks.hasConsumers = { alias($0).persists }
    hooks.reloadFromStore = { node, core in
      let node = alias(node)
      guard node.persists,
        let persisted = unsafeDowncast(node.witness.table, to: _Table<T>.self).persisted
      else { return }
      core.reload(node, from: persisted, make: make)
    }
    hooks.applyExternal = { node, change, core in
      let node = alias(node)
      guard node.persists, let change = change as? _ExternalAlias<T> else { return }
      core.applyExternal(change, to: node, make: make)
    }
    hooks.wantAlias = { node, prefetch, persistence in
      let node = alias(node)
      guard node.persists,
        let persisted = unsafeDowncast(node.witness.table, to: _Table<T>.self).persisted
      else { return }
      prefetch.want(alias: node.id.name, of: persisted)
    }
    hooks.feedConsumers = { node, kind, _, stampBefore, core in
      let node = alias(node)
      guard node.persists, let persistence = core.persistence,
        let persisted = unsafeDowncast(node.witness.table, to: _Table<T>.self).persisted,
        kind != .unchanged || !node.s.stamp._isSame(as: stampBefore)
      else { return }
      if persistence.diverts { return persistence.divert(.alias(node.id.name), core) }
      persistence.current.append(
        persisted.aliasChange(
          name: node.id.name, entities: node.value.map(entities),
          stamp: node.s.stamp.isNaN ? nil : node.s.stamp))
    }
    return hooks
  }
}
