/// The operations on a node that depend on the type of its value: the engine's one way to a
/// node's value.
///
/// The engine is type-erased: it walks `_AnyNode`s. Each node refers to a witness, and each
/// operation that reads or writes a value is one call through it: `node.witness.patch(node,
/// slot)`. There is one witness per kind of node and value type in a map, made by the table of
/// the entity type involved, where that type is known, and kept by it (rule 1 of
/// `_Lifetime.swift`):
///
/// | kind | value | made by |
/// |---|---|---|
/// | an entity | `T` | `_Table<T>.witness` |
/// | a batch list | `[T]` | `_Table<T>.listWitness` |
/// | a live query | `[T]` | `_Table<T>.queryWitness` |
/// | an alias of one entity | `T?` | `_Table<T>.aliasWitness` |
/// | an alias of entities | `[T]?` | `_Table<T>.aliasListWitness` |
///
/// NB: closures, made by `@inlinable` factories from code specialized for the type, so that each
/// operation runs specialized: a generic class's overridden methods run unspecialized, looking
/// up metadata as they go. The value operations themselves are in `_Node+Value.swift`; the
/// hooks of queries, collectors and persistence are `_Consumers<T>`' and `_Persisted<T>`'.
@usableFromInline
final class _Witness {
  /// What kind of node the witness serves.
  @usableFromInline
  enum Kind: UInt8 {
    case entity, list, query, alias
  }

  @usableFromInline let kind: Kind
  /// The table of the entity type the value is made of, set once by that table, which owns
  /// this witness: see ``table``.
  /// NB: exclusivity checks are off for it in release builds, as on `_AnyNode.s`: it is only
  /// written once, before any node refers to the witness.
  #if DEBUG
    @usableFromInline unowned(unsafe) var _table: _AnyTable?
  #else
    @exclusivity(unchecked) @usableFromInline unowned(unsafe) var _table: _AnyTable?
  #endif
  /// The map of that table (`_AnyTable.core`), set with it. NB: unmanaged, by rule 1 of
  /// `_Lifetime.swift`, and so that a handle reads it without a retain (see `_AnyNode.core`).
  @exclusivity(unchecked) @usableFromInline var _core: Unmanaged<_MapCore>?
  /// The `_Schema<Value>` of the value type, erased; `_Node.schema` gives it typed.
  @usableFromInline let erasedSchema: AnyObject
  /// The write's `_Stash<Value>`; `_Node.stash` gives it typed.
  @usableFromInline let stash: _AnyStash
  /// The flags a node of this witness starts with.
  @usableFromInline let flags: _NodeFlags

  // MARK: Graph

  /// Writes the current value of the child at a slot into the node's value.
  @usableFromInline let patch: (_AnyNode, Int) -> Void
  /// Rebuilds the node's value from the current values of its children, cutting cycles.
  @usableFromInline let materialize: (_AnyNode) -> Void
  /// Whether the node's value cannot exist without the child at a slot.
  @usableFromInline let requiresChild: (_AnyNode, Int) -> Bool
  /// Removes the children at some slots from the node's value, and returns the links left,
  /// with their new positions.
  @usableFromInline let dropChildren: (_AnyNode, [Int]) -> [_ChildLink]

  // MARK: The pass (see `_Pass.swift`)

  /// Claims the nested entities of a claim's payload, one depth further.
  @usableFromInline let expand: (_AnyNode, Int, _Pass) -> Void
  /// Folds the occurrences of a ``Mergeable`` node into its winning claim.
  @usableFromInline let mergeClaims: (_AnyNode, Int, _Pass, Bool) -> Void
  /// Whether a claim's payload is bit for bit the node's value.
  @usableFromInline let isIdentical: (_AnyNode, Int, _Pass) -> Bool
  /// Makes a claim's payload the node's value.
  @usableFromInline let apply: (_AnyNode, Int, _Pass) -> Void

  // MARK: The journal and the change log

  /// Keeps a copy of the node's value in the write's stash and returns where.
  @usableFromInline let saveValue: (_AnyNode, inout [Unmanaged<_AnyStash>]) -> Int32
  /// Puts back the value saved at an index of the stash.
  @usableFromInline let restoreValue: (_AnyNode, Int32) -> Void
  /// Whether the node's value differs from the one saved at an index (always, unless `==`).
  @usableFromInline let differs: (_AnyNode, Int32) -> Bool
  /// A delivery of the node's value, at a version, to its subscribers; `nil` without any.
  @usableFromInline let delivery: (_AnyNode, UInt64) -> _Delivery?
  /// A delivery of the node's value to one subscriber.
  @usableFromInline let deliveryTo: (_AnyNode, _AnySubscriber, UInt64) -> _Delivery
  /// The delivery of the node's removal, with its last value, to some subscribers.
  @usableFromInline let removalDelivery: (_AnyNode, [_AnySubscriber]) -> _Delivery
  /// The name of the entity in log events; `nil` but for entities.
  @usableFromInline let reference: (_AnyNode) -> EntityReference?
  /// Logs a `changed` event: the value saved at an index (or none) and the value now.
  let logChange: (_AnyNode, _ChangeKind, Int32, inout _Outbox) -> Void

  // MARK: Registration

  /// Takes the node out of its table or of the alias slots.
  @usableFromInline let unregister: (_AnyNode, _MapCore) -> Void
  /// Puts a node a rollback brings back into its table or alias slot.
  let reregister: (_AnyNode, _MapCore) -> Void

  // MARK: Aliases

  /// Whether the alias slot holds a value; `false` for other kinds.
  @usableFromInline let holdsAliasValue: (_AnyNode) -> Bool
  /// Empties the alias slot; nothing for other kinds.
  let clearAliasValue: (_AnyNode) -> Void
  /// The alias's name; `nil` for other kinds.
  let aliasName: (_AnyNode) -> String?

  // MARK: Consumers (queries, collectors, persistence, layers)

  /// Whether queries, collectors or persistence read the node's changes.
  @usableFromInline let hasConsumers: (_AnyNode) -> Bool
  /// Whether those consumers compare a change with the value before the write: an entity whose
  /// type has live queries or collectors.
  @usableFromInline let readsOldValues: (_AnyNode) -> Bool
  /// Tells the consumers what the committed write did to the node: the change, where the
  /// journal saved its value before the write (or a negative index), and its stamp then.
  @usableFromInline let feedConsumers: (_AnyNode, _ChangeKind, Int32, Stamp, _MapCore) -> Void
  /// Tells persistence, mid-write, that the node's entity was removed; see
  /// `_Persisted.noteRemoval`.
  let persistRemoval: (_AnyNode, _MapCore) -> Void
  /// For an entity the write under way removed: records its tombstone; see
  /// `_Tombstones.swift`.
  @usableFromInline let entomb: (_AnyNode, _MapCore) -> Void
  /// For an entity of a persisted type, or an alias that persists: takes the value the store
  /// has now, whatever the stamps say, or goes if it has none; see `_MapCore+Restore.swift`.
  let reloadFromStore: (_AnyNode, _MapCore) -> Void
  /// For an alias that persists: asks `prefetch` for its record and the entities it names
  /// (see `_Prefetch.swift`).
  let wantAlias: (_AnyNode, _Prefetch, _Persistence) -> Void
  /// For an alias that persists: applies another process's commit of its record, an
  /// `_ExternalAlias` of its entity type (see `_ExternalChanges.swift`).
  let applyExternal: (_AnyNode, _ExternalChange, _MapCore) -> Void
  /// For a query node nobody holds any more: stops maintaining it, gives back its holds.
  let detachConsumer: (_AnyNode, _MapCore) -> Void
  /// For an entity: a shadow for optimistic layers over the value saved at an index (or the
  /// one now, or none); see `_Layers.swift`.
  let makeShadow: (_AnyNode, Int32, Stamp) -> _AnyShadow?

  // MARK: Checks (see `_MapCore+Invariants.swift`)

  /// Whether every child slot holds its child's stored value, and the flags say what the
  /// schema says; then for a query, what is wrong with it, if anything.
  let problem: (_AnyNode, _MapCore) -> String?

  @usableFromInline
  init(
    kind: Kind, schema: AnyObject, stash: _AnyStash, flags: _NodeFlags,
    patch: @escaping (_AnyNode, Int) -> Void,
    materialize: @escaping (_AnyNode) -> Void,
    requiresChild: @escaping (_AnyNode, Int) -> Bool,
    dropChildren: @escaping (_AnyNode, [Int]) -> [_ChildLink],
    expand: @escaping (_AnyNode, Int, _Pass) -> Void,
    mergeClaims: @escaping (_AnyNode, Int, _Pass, Bool) -> Void,
    isIdentical: @escaping (_AnyNode, Int, _Pass) -> Bool,
    apply: @escaping (_AnyNode, Int, _Pass) -> Void,
    saveValue: @escaping (_AnyNode, inout [Unmanaged<_AnyStash>]) -> Int32,
    restoreValue: @escaping (_AnyNode, Int32) -> Void,
    differs: @escaping (_AnyNode, Int32) -> Bool,
    delivery: @escaping (_AnyNode, UInt64) -> _Delivery?,
    deliveryTo: @escaping (_AnyNode, _AnySubscriber, UInt64) -> _Delivery,
    removalDelivery: @escaping (_AnyNode, [_AnySubscriber]) -> _Delivery,
    reference: @escaping (_AnyNode) -> EntityReference?,
    logChange: @escaping (_AnyNode, _ChangeKind, Int32, inout _Outbox) -> Void,
    unregister: @escaping (_AnyNode, _MapCore) -> Void,
    reregister: @escaping (_AnyNode, _MapCore) -> Void,
    holdsAliasValue: @escaping (_AnyNode) -> Bool,
    clearAliasValue: @escaping (_AnyNode) -> Void,
    aliasName: @escaping (_AnyNode) -> String?,
    hasConsumers: @escaping (_AnyNode) -> Bool,
    readsOldValues: @escaping (_AnyNode) -> Bool,
    feedConsumers: @escaping (_AnyNode, _ChangeKind, Int32, Stamp, _MapCore) -> Void,
    persistRemoval: @escaping (_AnyNode, _MapCore) -> Void,
    entomb: @escaping (_AnyNode, _MapCore) -> Void,
    reloadFromStore: @escaping (_AnyNode, _MapCore) -> Void,
    wantAlias: @escaping (_AnyNode, _Prefetch, _Persistence) -> Void,
    applyExternal: @escaping (_AnyNode, _ExternalChange, _MapCore) -> Void,
    detachConsumer: @escaping (_AnyNode, _MapCore) -> Void,
    makeShadow: @escaping (_AnyNode, Int32, Stamp) -> _AnyShadow?,
    problem: @escaping (_AnyNode, _MapCore) -> String?
  ) {
    self.kind = kind
    self.erasedSchema = schema
    self.stash = stash
    self.flags = flags
    self.patch = patch
    self.materialize = materialize
    self.requiresChild = requiresChild
    self.dropChildren = dropChildren
    self.expand = expand
    self.mergeClaims = mergeClaims
    self.isIdentical = isIdentical
    self.apply = apply
    self.saveValue = saveValue
    self.restoreValue = restoreValue
    self.differs = differs
    self.delivery = delivery
    self.deliveryTo = deliveryTo
    self.removalDelivery = removalDelivery
    self.reference = reference
    self.logChange = logChange
    self.unregister = unregister
    self.reregister = reregister
    self.holdsAliasValue = holdsAliasValue
    self.clearAliasValue = clearAliasValue
    self.aliasName = aliasName
    self.hasConsumers = hasConsumers
    self.readsOldValues = readsOldValues
    self.feedConsumers = feedConsumers
    self.persistRemoval = persistRemoval
    self.entomb = entomb
    self.reloadFromStore = reloadFromStore
    self.wantAlias = wantAlias
    self.applyExternal = applyExternal
    self.detachConsumer = detachConsumer
    self.makeShadow = makeShadow
    self.problem = problem
  }
}

extension _Witness {
  /// The table of the entity type the witness's values are made of. NB: unowned(unsafe), by
  /// rule 1 of `_Lifetime.swift`: the table owns this witness. Set once, by the table, before
  /// any node has the witness, and never changed: read without the lock (see
  /// `_AnyNode.releasesWithoutLock`), it is a constant.
  @inlinable
  var table: _AnyTable { _table.unsafelyUnwrapped }
}

/// A node whose value is `Value`, downcast; NB: only ever called with a node of the witness
/// that knows `Value`.
@inlinable @inline(__always)
func _typed<Value>(_ node: _AnyNode, _: Value.Type) -> _Node<Value> {
  unsafeDowncast(node, to: _Node<Value>.self)
}

extension _Witness {
  /// A witness of nodes whose value is `Value`, described by `schema`: the value operations,
  /// and `hooks` for the rest, which depend on the kind.
  ///
  /// NB: always inlined into its caller, specialized for the type: called as a generic function,
  /// its closures would capture `Value`'s metadata and run unspecialized, looking up generic
  /// metadata at every call.
  @inlinable @inline(__always)
  static func make<Value: Sendable>(
    _ kind: Kind, of _: Value.Type, schema: _Schema<Value>,
    stash: _Stash<Value>, flags: _NodeFlags, hooks: _WitnessHooks
  ) -> _Witness {
    _Witness(
      kind: kind, schema: schema, stash: stash, flags: flags,
      patch: { node, slot in _typed(node, Value.self)._patch(slot: slot) },
      materialize: hooks.materialize ?? { node in _typed(node, Value.self)._materialize() },
      requiresChild: { node, slot in _typed(node, Value.self)._requiresChild(atSlot: slot) },
      dropChildren: { node, slots in _typed(node, Value.self)._dropChildren(atSlots: slots) },
      expand: { node, index, pass in _typed(node, Value.self)._expand(claim: index, pass) },
      mergeClaims: { node, index, pass, atExpansion in
        _typed(node, Value.self)._mergeClaims(index, pass, atExpansion: atExpansion)
      },
      isIdentical: { node, index, pass in
        _typed(node, Value.self)._isIdentical(toClaim: index, pass)
      },
      apply: { node, index, pass in _typed(node, Value.self)._apply(claim: index, pass) },
      saveValue: { node, stashes in _typed(node, Value.self)._saveValue(enlistingIn: &stashes) },
      restoreValue: { node, index in _typed(node, Value.self)._restoreValue(index) },
      differs: { node, index in _typed(node, Value.self)._differs(fromSaved: index) },
      delivery: { node, version in _typed(node, Value.self)._makeDelivery(version: version) },
      deliveryTo: { node, subscriber, version in
        _typed(node, Value.self)._makeDelivery(to: subscriber, version: version)
      },
      removalDelivery: { node, subscribers in
        _typed(node, Value.self)._makeRemovalDelivery(to: subscribers)
      },
      reference: hooks.reference, logChange: hooks.logChange, unregister: hooks.unregister,
      reregister: hooks.reregister, holdsAliasValue: hooks.holdsAliasValue,
      clearAliasValue: hooks.clearAliasValue, aliasName: hooks.aliasName,
      hasConsumers: hooks.hasConsumers, readsOldValues: hooks.readsOldValues,
      feedConsumers: hooks.feedConsumers, persistRemoval: hooks.persistRemoval,
      entomb: hooks.entomb, reloadFromStore: hooks.reloadFromStore, wantAlias: hooks.wantAlias,
      applyExternal: hooks.applyExternal, detachConsumer: hooks.detachConsumer,
      makeShadow: hooks.makeShadow,
      problem: { node, core in
        let typed = _typed(node, Value.self)
        if !typed._slotsMatchChildren() { return "a slot differs from its child's value" }
        if !typed._flagsMatchSchema() { return "the mergeable or leaf flag ≠ its schema" }
        return hooks.problem(node, core)
      })
  }
}

/// The operations of a witness that depend on its kind of node rather than on the value's type
/// alone. Each defaults to what a node of no particular kind does: nothing, or `nil`.
@usableFromInline
struct _WitnessHooks {
  /// In place of the value's own `_materialize()`: a batch list's, say.
  @usableFromInline var materialize: ((_AnyNode) -> Void)?
  @usableFromInline var reference: (_AnyNode) -> EntityReference? = { _ in nil }
  @usableFromInline var logChange: (_AnyNode, _ChangeKind, Int32, inout _Outbox) -> Void = {
    _, _, _, _ in
  }
  @usableFromInline var unregister: (_AnyNode, _MapCore) -> Void = { _, _ in }
  @usableFromInline var reregister: (_AnyNode, _MapCore) -> Void = { _, _ in }
  @usableFromInline var holdsAliasValue: (_AnyNode) -> Bool = { _ in false }
  @usableFromInline var clearAliasValue: (_AnyNode) -> Void = { _ in }
  @usableFromInline var aliasName: (_AnyNode) -> String? = { _ in nil }
  @usableFromInline var hasConsumers: (_AnyNode) -> Bool = { _ in false }
  @usableFromInline var readsOldValues: (_AnyNode) -> Bool = { _ in false }
  @usableFromInline var feedConsumers: (_AnyNode, _ChangeKind, Int32, Stamp, _MapCore) -> Void = {
    _, _, _, _, _ in
  }
  @usableFromInline var persistRemoval: (_AnyNode, _MapCore) -> Void = { _, _ in }
  @usableFromInline var entomb: (_AnyNode, _MapCore) -> Void = { _, _ in }
  @usableFromInline var reloadFromStore: (_AnyNode, _MapCore) -> Void = { _, _ in }
  @usableFromInline var wantAlias: (_AnyNode, _Prefetch, _Persistence) -> Void = { _, _, _ in }
  @usableFromInline var applyExternal: (_AnyNode, _ExternalChange, _MapCore) -> Void = {
    _, _, _ in
  }
  @usableFromInline var detachConsumer: (_AnyNode, _MapCore) -> Void = { _, _ in }
  @usableFromInline var makeShadow: (_AnyNode, Int32, Stamp) -> _AnyShadow? = { _, _, _ in nil }
  @usableFromInline var problem: (_AnyNode, _MapCore) -> String? = { _, _ in nil }

  @inlinable init() {}
}
