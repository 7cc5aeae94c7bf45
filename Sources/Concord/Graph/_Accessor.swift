/// How a parent value of type `Root` holds child entities at one key path: how to list them,
/// how to write a child back, and how to drop one when it is removed.
///
/// The closures are made by `@inlinable` initializers, so they are specialized for the user's
/// types in the user's module.
///
/// NB: closures rather than subclasses keep this type final, hence checkably `Sendable`.
@usableFromInline
final class _Accessor<Root>: Sendable {
  /// Hands each child entity in `root` to the pass's walk (`_Pass.visit`), in order, with
  /// its position: 0 for a single or optional entity, the offset in the collection otherwise.
  @usableFromInline let forEachChild: @Sendable (Root, _Pass) -> Void
  /// Hands each child entity in `root` to `visitor`, in order: a walk of the entities a value
  /// nests that needs neither the pass nor the map's lock (see `_NestedVisitor`).
  @usableFromInline let visit: @Sendable (Root, _NestedVisitor) -> Void
  /// The positions of the persisted entities nested at this key path in `root` that are not
  /// in memory (`_MapCore.isMissing`): once the probe's loads are done, ones that were removed.
  @usableFromInline let missing: @Sendable (Root, _MapCore) -> [Int]
  /// Writes the value of `child` (a `_Node<C>`) into `root` at `position`: its stored value, or
  /// with `materializer`, its value materialized on the current path (see `_Node+Materialize.swift`).
  @usableFromInline let fill: @Sendable (_AnyNode, Int, inout Root, _Materializer?) -> Void
  /// Whether `root` holds the stored value of `child` (a `_Node<C>`) at `position` bit for bit
  /// (see `_identical`), so that `fill` would change nothing there. Reads `root` in place,
  /// without copying it; `inout` only for that.
  @usableFromInline let holds: @Sendable (_AnyNode, Int, inout Root) -> Bool
  /// Removes the children at `positions` (ascending, unique) from `root`.
  /// `nil` for a non-optional single entity: its parent cannot exist without it.
  @usableFromInline let remove: (@Sendable ([Int], inout Root) -> Void)?
  /// Removes every child from `root`; `nil` for a non-optional single entity.
  @usableFromInline let removeAll: (@Sendable (inout Root) -> Void)?
  /// Makes two values agree at this key path, so that comparing them compares their own
  /// fields only: when both hold the same entities there (by id, in order), gives the first
  /// the second's; returns `false` when they hold different ones. See
  /// `_Schema.ownFieldsEqual(_:_:)`.
  @usableFromInline let align: @Sendable (inout Root, inout Root) -> Bool
  /// Whether the removal of a child removes `root` too: always for a non-optional single
  /// entity, and for any key path declared with ``RemovalRule/removeParent``.
  @usableFromInline let requiresChild: Bool

  @usableFromInline
  init(
    forEachChild: @escaping @Sendable (Root, _Pass) -> Void,
    visit: @escaping @Sendable (Root, _NestedVisitor) -> Void,
    missing: @escaping @Sendable (Root, _MapCore) -> [Int],
    fill: @escaping @Sendable (_AnyNode, Int, inout Root, _Materializer?) -> Void,
    holds: @escaping @Sendable (_AnyNode, Int, inout Root) -> Bool,
    remove: (@Sendable ([Int], inout Root) -> Void)?,
    removeAll: (@Sendable (inout Root) -> Void)?,
    align: @escaping @Sendable (inout Root, inout Root) -> Bool,
    removesParent: Bool = false
  ) {
    self.forEachChild = forEachChild
    self.visit = visit
    self.missing = missing
    self.fill = fill
    self.holds = holds
    self.remove = remove
    self.removeAll = removeAll
    self.align = align
    self.requiresChild = remove == nil || removesParent
  }

  /// This accessor under `rule`: for ``RemovalRule/removeParent``, one whose children's removal
  /// removes the parent.
  @inlinable
  func ruled(by rule: RemovalRule) -> _Accessor {
    guard rule.removesParent, !requiresChild else { return self }
    return _Accessor(
      forEachChild: forEachChild, visit: visit, missing: missing, fill: fill, holds: holds,
      remove: remove, removeAll: removeAll, align: align, removesParent: true)
  }

  /// Writes the stored value of `child` into `root` at `position`.
  @inlinable
  func write(_ child: _AnyNode, _ position: Int, _ root: inout Root) {
    fill(child, position, &root, nil)
  }
}

extension _Accessor {
  /// A single, non-optional nested entity.
  @inlinable
  static func single<C: Identifiable & Sendable>(_ keyPath: WritableKeyPath<Root, C> & Sendable)
    -> _Accessor
  {
    let field = _Field(keyPath)
    return _Accessor(
      forEachChild: { root, pass in pass.visit(field.get(root), position: 0) },
      visit: { root, visitor in visitor.visit(field.get(root)) },
      missing: { root, core in core.isMissing(field.get(root)) ? [0] : [] },
      fill: { child, _, root, materializer in
        field.assign(&root, _Node<C>._value(of: child, materializer))
      },
      holds: { child, _, root in
        field.inspect(&root) { _Node<C>._holdsValue(of: child, at: &$0) }
      },
      remove: nil,
      removeAll: nil,
      align: { first, second in
        guard field.get(first).id == field.get(second).id else { return false }
        field.set(&first, field.get(second))
        return true
      }
    )
  }

  /// An optional nested entity: removal sets it to `nil`.
  @inlinable
  static func optional<C: Identifiable & Sendable>(_ keyPath: WritableKeyPath<Root, C?> & Sendable)
    -> _Accessor
  {
    let field = _Field(keyPath)
    return _Accessor(
      forEachChild: { root, pass in
        if let child = field.get(root) { pass.visit(child, position: 0) }
      },
      visit: { root, visitor in
        if let child = field.get(root) { visitor.visit(child) }
      },
      missing: { root, core in
        guard let child = field.get(root), core.isMissing(child) else { return [] }
        return [0]
      },
      fill: { child, _, root, materializer in
        field.assign(&root, _Node<C>._value(of: child, materializer))
      },
      holds: { child, _, root in
        field.inspect(&root) { _Node<C>._holdsValue(of: child, at: &$0) }
      },
      remove: { _, root in field.set(&root, nil) },
      removeAll: { root in field.set(&root, nil) },
      align: { first, second in
        guard field.get(first)?.id == field.get(second)?.id else { return false }
        field.set(&first, field.get(second))
        return true
      }
    )
  }

  /// Any mutable, range-replaceable collection of entities.
  ///
  /// - Complexity: writing back one child is O(*n*) unless `C` is random-access.
  @inlinable
  static func collection<C: MutableCollection & RangeReplaceableCollection & Sendable>(
    _ keyPath: WritableKeyPath<Root, C> & Sendable
  ) -> _Accessor where C.Element: Identifiable & Sendable {
    let field = _Field(keyPath)
    return _Accessor(
      forEachChild: { root, pass in pass.visitAll(field.get(root)) },
      visit: { root, visitor in visitor.visitAll(field.get(root)) },
      missing: { root, core in
        field.get(root).enumerated().compactMap { core.isMissing($1) ? $0 : nil }
      },
      fill: { child, position, root, materializer in
        let element = _Node<C.Element>._value(of: child, materializer)
        field.modify(&root) { $0._replace(at: position, with: element) }
      },
      holds: { child, position, root in
        field.inspect(&root) { $0._holdsValue(of: child, at: position) }
      },
      remove: { positions, root in
        field.modify(&root) { $0._removeOffsets(positions) }
      },
      removeAll: { root in field.modify(&root) { $0.removeAll() } },
      align: { first, second in
        let theirs = field.get(second)
        guard field.get(first).map({ $0.id }) == theirs.map({ $0.id }) else { return false }
        field.set(&first, theirs)
        return true
      }
    )
  }

  /// An optional collection of entities: removal drops elements, never the collection itself.
  @inlinable
  static func optionalCollection<C: MutableCollection & RangeReplaceableCollection & Sendable>(
    _ keyPath: WritableKeyPath<Root, C?> & Sendable
  ) -> _Accessor where C.Element: Identifiable & Sendable {
    let field = _Field(keyPath)
    return _Accessor(
      forEachChild: { root, pass in
        if let children = field.get(root) { pass.visitAll(children) }
      },
      visit: { root, visitor in
        if let children = field.get(root) { visitor.visitAll(children) }
      },
      missing: { root, core in
        (field.get(root) ?? C()).enumerated().compactMap { core.isMissing($1) ? $0 : nil }
      },
      fill: { child, position, root, materializer in
        let element = _Node<C.Element>._value(of: child, materializer)
        field.modify(&root) { $0!._replace(at: position, with: element) }
      },
      holds: { child, position, root in
        field.inspect(&root) { $0?._holdsValue(of: child, at: position) ?? false }
      },
      remove: { positions, root in
        field.modify(&root) { $0?._removeOffsets(positions) }
      },
      removeAll: { root in field.modify(&root) { $0?.removeAll() } },
      align: { first, second in
        let theirs = field.get(second)
        guard field.get(first)?.map({ $0.id }) == theirs?.map({ $0.id }) else { return false }
        field.set(&first, theirs)
        return true
      }
    )
  }
}

/// A writable key path into a value, read and written straight at its offset when it names a
/// stored property (most nested entities do), and through the key path otherwise (a computed
/// property, such as an enum payload's).
///
/// NB: applying a key path is a runtime call that costs several times a direct store, and a
/// propagation writes one per parent.
@usableFromInline
struct _Field<Root, Value>: Sendable {
  @usableFromInline let keyPath: WritableKeyPath<Root, Value> & Sendable
  /// The byte offset of the property in `Root`, when it is stored inline.
  @usableFromInline let offset: Int?

  @inlinable
  init(_ keyPath: WritableKeyPath<Root, Value> & Sendable) {
    self.keyPath = keyPath
    offset = MemoryLayout<Root>.offset(of: keyPath)
  }

  @inlinable
  func get(_ root: Root) -> Value {
    guard let offset else { return root[keyPath: keyPath] }
    return withUnsafeBytes(of: root) { bytes in
      bytes.baseAddress.unsafelyUnwrapped.advanced(by: offset)
        .assumingMemoryBound(to: Value.self).pointee
    }
  }

  @inlinable
  func modify<R>(_ root: inout Root, _ body: (inout Value) -> R) -> R {
    guard let offset else { return body(&root[keyPath: keyPath]) }
    return withUnsafeMutableBytes(of: &root) { bytes in
      body(
        &bytes.baseAddress.unsafelyUnwrapped.advanced(by: offset)
          .assumingMemoryBound(to: Value.self).pointee)
    }
  }

  /// Calls `body` with the field, to read it: in place when it is stored inline, on a copy
  /// otherwise. Nothing `body` writes reaches `root`; `inout` only spares a copy.
  @inlinable
  func inspect<R>(_ root: inout Root, _ body: (inout Value) -> R) -> R {
    guard offset != nil else {
      var copy = root[keyPath: keyPath]
      return body(&copy)
    }
    return modify(&root, body)
  }

  @inlinable
  func set(_ root: inout Root, _ value: Value) {
    modify(&root) { $0 = value }
  }

  /// Writes `value` unless the field already holds it bit for bit (see `_identical`).
  ///
  /// NB: rewriting a collection element with itself would still copy a shared buffer, and
  /// the value would no longer be identical to the one it came from: a refetch of unchanged
  /// aggregates could then never take the identical fast path.
  @inlinable
  func assign(_ root: inout Root, _ value: Value) {
    modify(&root) { if !_identical($0, value) { $0 = value } }
  }
}

extension MutableCollection where Self: RangeReplaceableCollection {
  /// Replaces the element at `offset` elements past `startIndex`, unless it already is
  /// `element` bit for bit (see `_Field.assign(_:_:)`).
  @inlinable
  mutating func _replace(at offset: Int, with element: Element) {
    let index = index(startIndex, offsetBy: offset)
    if !_identical(self[index], element) { self[index] = element }
  }

  /// Removes the elements at the given offsets, which are ascending and unique.
  @inlinable
  mutating func _removeOffsets(_ offsets: [Int]) {
    for offset in offsets.reversed() {
      remove(at: index(startIndex, offsetBy: offset))
    }
  }
}

extension Collection where Element: Sendable {
  /// Whether the element at `offset` elements past `startIndex` is the stored value of
  /// `child` bit for bit; `false` when the collection has no contiguous storage to read it in
  /// place.
  @inlinable
  func _holdsValue(of child: _AnyNode, at offset: Int) -> Bool {
    withContiguousStorageIfAvailable { elements in
      offset < elements.count
        && _Node<Element>._holdsValue(
          of: child, at: elements.baseAddress.unsafelyUnwrapped + offset)
    } ?? false
  }
}

/// What walks the entities a value nests, through its schema's accessors (`_Accessor.visit`),
/// without the pass: one of two walks, `_MissingEntities` (under the lock) or `_WantedEntities`
/// (outside it), each of which recurses with `visitNested(in:schema:)`.
///
/// NB: a final class with a generic method, rather than a closure, so that each accessor hands
/// it its child with the child's type, which a closure cannot take; and final, with the walks
/// told apart inside, rather than subclasses overriding it, so that the call is specialized for
/// the child's type where the accessor makes it: an override of a generic method runs
/// unspecialized, looking up the metadata of each generic type it touches at every child.
@usableFromInline
final class _NestedVisitor {
  // NB: both unretained, and borrowed at each child (rule 7 of `_Lifetime.swift`): whoever
  // makes a visitor holds its walk while it visits. With a retain and a release of the walk and
  // of the map at each child, the walk of a page of aggregates took 1.7 times as long.
  /// The walk, when it looks for missing entities.
  @usableFromInline let missing: Unmanaged<_MissingEntities>?
  /// The walk, when it collects every entity met.
  @usableFromInline let wanted: Unmanaged<_WantedEntities>?

  @usableFromInline init(missing: _MissingEntities) {
    self.missing = .passUnretained(missing)
    wanted = nil
  }

  @usableFromInline init(wanted: _WantedEntities) {
    missing = nil
    self.wanted = .passUnretained(wanted)
  }

  /// Called with each child entity met.
  @inlinable
  func visit<C: Identifiable & Sendable>(_ child: C) {
    if let missing {
      missing._withUnsafeGuaranteedRef { $0.visit(child, self) }
    } else {
      wanted.unsafelyUnwrapped._withUnsafeGuaranteedRef { $0.visit(child, self) }
    }
  }

  /// Visits each of `children`, borrowed in place where the collection has contiguous storage
  /// (rather than copied out: a retain and a release of each of their fields).
  @inlinable
  func visitAll<S: Sequence>(_ children: S) where S.Element: Identifiable & Sendable {
    let visited: Void? = children.withContiguousStorageIfAvailable { buffer in
      for index in buffer.indices { visit(buffer[index]) }
    }
    if visited == nil {
      for child in children { visit(child) }
    }
  }

  /// Visits the entities `value` nests (its direct children), through `schema`, its type's.
  @inlinable
  func visitNested<V>(in value: V, schema: _Schema<V>) {
    for accessor in schema.accessors { accessor.visit(value, self) }
  }
}
