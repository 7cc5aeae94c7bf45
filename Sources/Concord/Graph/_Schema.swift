/// What the map knows about a value type it stores: where its nested entities are, how to
/// compare two values, and whether values carry their own stamp (``Stamped``) or merge
/// (``Mergeable``). Built once per type and shared by every map.
///
/// NB: each conformance is found with a dynamic cast once per type, never per write, so a type
/// reached through a plain generic `T: Identifiable` still gets its behaviour.
@usableFromInline
final class _Schema<Root>: Sendable {
  /// The nested entities, in the order the type declares them.
  @usableFromInline let accessors: [_Accessor<Root>]
  /// The same, type-erased. NB: the engine's type-erased code reads accessors from here: an
  /// array of a generic class type would make it look up the element type's metadata on every
  /// access.
  @usableFromInline let erasedAccessors: ContiguousArray<any AnyObject & Sendable>
  /// `==` when `Root` is `Equatable`.
  @usableFromInline let equality: (any _Equality<Root>)?
  /// Whether `Root` is `Equatable`.
  @usableFromInline let isEquatable: Bool
  /// The value's own stamp, when `Root` is ``Stamped``.
  @usableFromInline let stamping: (any _Stamping<Root>)?
  /// ``Stamped/acceptsEqualStamps``; `false` for other types.
  @usableFromInline let acceptsEqualStamps: Bool
  /// ``Mergeable/merge(_:into:)``, when `Root` is Mergeable.
  @usableFromInline let merging: (any _Merging<Root>)?

  @usableFromInline
  init(accessors: [_Accessor<Root>]) {
    self.accessors = accessors
    self.erasedAccessors = ContiguousArray(accessors.map { $0 as any AnyObject & Sendable })
    self.equality = _equality(of: Root.self)
    self.isEquatable = equality != nil
    (stamping, acceptsEqualStamps) = _stamping(of: Root.self)
    merging = _merging(of: Root.self)
  }

  /// The schema of an alias's slot, `Root` being `Wrapped?`: the slot records the stamp of the
  /// value written to it; it merges nothing itself (the entities it names merge as they are
  /// written).
  @usableFromInline
  init<Wrapped>(accessors: [_Accessor<Root>], slotOf wrapped: _Schema<Wrapped>)
  where Root == Wrapped? {
    self.accessors = accessors
    self.erasedAccessors = ContiguousArray(accessors.map { $0 as any AnyObject & Sendable })
    self.equality = _equality(of: Root.self)
    self.isEquatable = equality != nil
    stamping = wrapped.stamping.map { _SlotStamping(wrapped: $0) }
    acceptsEqualStamps = wrapped.acceptsEqualStamps
    merging = nil
  }

  /// Whether two values have the same own fields, their nested entities aside (a required
  /// nested entity must be the same entity); `false` unless `Root` is `Equatable`. Two values
  /// of an aggregate with equal stamps are compared so: their nested entities are written on
  /// their own stamps anyway.
  @usableFromInline
  func ownFieldsEqual(_ first: Root, _ second: Root) -> Bool {
    guard let equality else { return false }
    var first = first
    var second = second
    for accessor in accessors where !accessor.align(&first, &second) { return false }
    return equality.equal(first, second)
  }

  /// The stamp a write of `value` carries: the value's own when it is ``Stamped`` and has one,
  /// the call's otherwise.
  @inlinable
  func stamp(of value: Root, call: Stamp?) -> Stamp? {
    // NB: optional chaining borrows the reference, where binding it retained it.
    stamping?.stamp(of: value) ?? call
  }

  /// The stamp of an `update` whose body turned `old` into `value`: the value's own when it is
  /// ``Stamped`` and the body changed it; otherwise the call's (and with none, the write is
  /// unstamped and keeps the stored stamp).
  @inlinable
  func stamp(of value: Root, replacing old: Root, call: Stamp?) -> Stamp? {
    guard let newStamp = stamping?.stamp(of: value) else { return call }
    return newStamp == stamping?.stamp(of: old) ? call : newStamp
  }

  /// The accessor at `index`.
  @inlinable
  func accessor(_ index: Int32) -> _Accessor<Root> {
    unsafeDowncast(erasedAccessors[Int(index)], to: _Accessor<Root>.self)
  }

  /// Whether values of this type hold no nested entity. NB: asks the type-erased list, whose
  /// type does not depend on `Root`: unspecialized code asks no metadata for it.
  @inlinable var isLeaf: Bool { erasedAccessors.isEmpty }

  /// Whether a stored value changed: always, unless `Root` is `Equatable` and the values are equal.
  @inlinable
  func differ(_ old: Root, _ new: Root) -> Bool {
    // NB: optional chaining borrows the reference, where binding it retained it.
    !(equality?.equal(old, new) ?? false)
  }
}

extension _Schema where Root: Identifiable & Sendable {
  /// The schema of an entity type: an ``Aggregate`` exposes its nested entities, any other
  /// entity has none.
  ///
  /// NB: the `Aggregate` check is a dynamic cast, but it runs once per type, not per write, so an
  /// aggregate reached through a generic `T: Identifiable` is still decomposed.
  @usableFromInline
  static var entity: _Schema {
    _SchemaCache.shared.schema(for: Root.self) {
      guard let aggregate = Root.self as? any Aggregate.Type else { return _Schema(accessors: []) }
      return _Schema(accessors: _nestedAccessors(of: aggregate, as: Root.self))
    }
  }
}

extension _Schema {
  /// The schema of a batch handle's value: an array of entities.
  @inlinable
  static func list<T: Identifiable & Sendable>(of _: T.Type) -> _Schema where Root == [T] {
    _SchemaCache.shared.schema(for: Root.self) { _Schema(accessors: [.collection(\[T].self)]) }
  }

  /// The schema of a single alias: an optional entity.
  @inlinable
  static func alias<T: Identifiable & Sendable>(of _: T.Type) -> _Schema where Root == T? {
    _SchemaCache.shared.schema(for: Root.self) {
      _Schema(accessors: [.optional(\T?.self)], slotOf: _Schema<T>.entity)
    }
  }

  /// The schema of a collection alias: an optional array of entities.
  @inlinable
  static func aliasList<T: Identifiable & Sendable>(of _: T.Type) -> _Schema where Root == [T]? {
    _SchemaCache.shared.schema(for: Root.self) {
      _Schema(accessors: [.optionalCollection(\[T]?.self)], slotOf: _Schema<[T]>.list(of: T.self))
    }
  }
}

/// The accessors of an aggregate type, opened from its existential metatype.
private func _nestedAccessors<A: Aggregate, Root>(of _: A.Type, as _: Root.Type) -> [_Accessor<
  Root
>] {
  // NB: A and Root are the same type; the cast runs once per type.
  A.nestedEntities.map { $0._accessor as! _Accessor<Root> }
}

/// `==` for values of type `T`.
///
/// NB: a class-bound protocol, not a closure or a plain existential: calling it through a
/// stored reference borrows the reference, where a closure retained its context, and an
/// existential was copied, at every write that compared values.
@usableFromInline
protocol _Equality<T>: AnyObject, Sendable {
  associatedtype T
  /// `lhs == rhs`.
  func equal(_ lhs: T, _ rhs: T) -> Bool
}

/// `==` of an `Equatable` type.
final class _EquatableEquality<T: Equatable>: _Equality {
  func equal(_ lhs: T, _ rhs: T) -> Bool { lhs == rhs }
}

/// ``Stamped/stamp`` of values of type `T`.
///
/// NB: class-bound, as ``_Equality`` is, and made over the conformance by a checked cast of the
/// object, once per type: a call borrows the value it is given, where a closure that cast each
/// value to the conformance's type (an `unsafeBitCast`) copied and destroyed it through its
/// value witnesses. (A bit cast of the conformance's closure to the schema's type would borrow
/// too, but holds only while the code that casts stays unspecialized: a closure over a concrete
/// type passes its values directly.)
@usableFromInline
protocol _Stamping<T>: AnyObject, Sendable {
  associatedtype T
  /// The value's own stamp, if it has one.
  func stamp(of value: T) -> Stamp?
}

/// The stamp of a ``Stamped`` type.
final class _StampedStamping<S: Stamped>: _Stamping {
  func stamp(of value: S) -> Stamp? { value.stamp }
}

/// The stamp of an alias's slot: that of the value it names, none when empty.
final class _SlotStamping<Wrapped>: _Stamping {
  let wrapped: any _Stamping<Wrapped>
  init(wrapped: any _Stamping<Wrapped>) { self.wrapped = wrapped }
  func stamp(of value: Wrapped?) -> Stamp? { value.flatMap { wrapped.stamp(of: $0) } }
}

/// ``Mergeable/merge(_:into:)`` for values of type `T`; class-bound as ``_Stamping`` is, and
/// for the same reason.
@usableFromInline
protocol _Merging<T>: AnyObject, Sendable {
  associatedtype T
  /// `incoming` merged into `stored`.
  func merge(_ incoming: T, into stored: T) -> T
}

/// The merge of a ``Mergeable`` type.
final class _MergeableMerging<M: Mergeable>: _Merging {
  func merge(_ incoming: M, into stored: M) -> M { M.merge(incoming, into: stored) }
}

/// `==` for `T`, when `T` is `Equatable`.
private func _equality<T>(of _: T.Type) -> (any _Equality<T>)? {
  guard let equatable = T.self as? any Equatable.Type else { return nil }
  func open<E: Equatable>(_: E.Type) -> any _Equality<T> {
    // NB: E is T; the cast runs once per type.
    _EquatableEquality<E>() as! any _Equality<T>
  }
  return open(equatable)
}

/// `stamp` and `acceptsEqualStamps` of `T`, when `T` is ``Stamped``.
private func _stamping<T>(of _: T.Type) -> ((any _Stamping<T>)?, Bool) {
  guard let stamped = T.self as? any Stamped.Type else { return (nil, false) }
  func open<S: Stamped>(_: S.Type) -> ((any _Stamping<T>)?, Bool) {
    // NB: S is T; the cast runs once per type.
    ((_StampedStamping<S>() as! any _Stamping<T>), S.acceptsEqualStamps)
  }
  return open(stamped)
}

/// `merge(_:into:)` of `T`, when `T` is ``Mergeable``.
private func _merging<T>(of _: T.Type) -> (any _Merging<T>)? {
  guard let mergeable = T.self as? any Mergeable.Type else { return nil }
  func open<M: Mergeable>(_: M.Type) -> any _Merging<T> {
    // NB: M is T; the cast runs once per type.
    _MergeableMerging<M>() as! any _Merging<T>
  }
  return open(mergeable)
}

/// The process-wide cache of schemas, keyed by value type.
@usableFromInline
final class _SchemaCache: @unchecked Sendable {
  // NB: @unchecked because `schemas` is only touched while holding `lock`.
  @usableFromInline static let shared = _SchemaCache()

  private let lock = Lock()
  private var schemas: [ObjectIdentifier: AnyObject] = [:]

  /// The cached schema of `Root`, built by `make` the first time it is asked for.
  @usableFromInline
  func schema<Root>(for _: Root.Type, _ make: () -> _Schema<Root>) -> _Schema<Root> {
    let key = ObjectIdentifier(Root.self)
    if let cached = lock.withLock({ schemas[key] }) {
      return unsafeDowncast(cached, to: _Schema<Root>.self)
    }
    // NB: built outside the cache's lock, because `nestedEntities` is user code. (It does run
    // under the lock of the map that first meets the type, which creates the type's table.)
    // Two threads may build the same schema at once; the first one stored wins.
    let made = make()
    return lock.withLock {
      if let raced = schemas[key] { return unsafeDowncast(raced, to: _Schema<Root>.self) }
      schemas[key] = made
      return made
    }
  }
}
