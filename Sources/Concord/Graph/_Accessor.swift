/// How a parent value of type `Root` holds child entities at one key path: how to list them,
/// how to write a child back, and how to drop one when it is removed.
///
/// The closures are made by `@inlinable` initializers, so they are specialized for the user's
/// types in the user's module.
///
/// NB: closures rather than subclasses keep this type final, hence checkably `Sendable`.
@usableFromInline
final class _Accessor<Root>: Sendable {
  /// Hands each child entity in `root` to the write being claimed (`_MapCore.visit`), in order,
  /// with its position: 0 for a single or optional entity, the offset in the collection
  /// otherwise.
  @usableFromInline let forEachChild: @Sendable (Root, _MapCore) -> Void
  /// Writes the value of `child` (a `_Node<C>`) into `root` at `position`: its stored value, or
  /// with `materializer`, its value materialized on the current path (see `_Materialize.swift`).
  @usableFromInline let fill: @Sendable (_AnyNode, Int, inout Root, _Materializer?) -> Void
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

  @usableFromInline
  init(
    forEachChild: @escaping @Sendable (Root, _MapCore) -> Void,
    fill: @escaping @Sendable (_AnyNode, Int, inout Root, _Materializer?) -> Void,
    remove: (@Sendable ([Int], inout Root) -> Void)?,
    removeAll: (@Sendable (inout Root) -> Void)?,
    align: @escaping @Sendable (inout Root, inout Root) -> Bool
  ) {
    self.forEachChild = forEachChild
    self.fill = fill
    self.remove = remove
    self.removeAll = removeAll
    self.align = align
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
    _Accessor(
      forEachChild: { root, core in core.visit(root[keyPath: keyPath], position: 0) },
      fill: { child, _, root, materializer in
        root[keyPath: keyPath] = _Node<C>._value(of: child, materializer)
      },
      remove: nil,
      removeAll: nil,
      align: { first, second in
        guard first[keyPath: keyPath].id == second[keyPath: keyPath].id else { return false }
        first[keyPath: keyPath] = second[keyPath: keyPath]
        return true
      }
    )
  }

  /// An optional nested entity: removal sets it to `nil`.
  @inlinable
  static func optional<C: Identifiable & Sendable>(_ keyPath: WritableKeyPath<Root, C?> & Sendable)
    -> _Accessor
  {
    _Accessor(
      forEachChild: { root, core in
        if let child = root[keyPath: keyPath] { core.visit(child, position: 0) }
      },
      fill: { child, _, root, materializer in
        root[keyPath: keyPath] = _Node<C>._value(of: child, materializer)
      },
      remove: { _, root in root[keyPath: keyPath] = nil },
      removeAll: { root in root[keyPath: keyPath] = nil },
      align: { first, second in
        guard first[keyPath: keyPath]?.id == second[keyPath: keyPath]?.id else { return false }
        first[keyPath: keyPath] = second[keyPath: keyPath]
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
    _Accessor(
      forEachChild: { root, core in core.visitAll(root[keyPath: keyPath]) },
      fill: { child, position, root, materializer in
        root[keyPath: keyPath]._replace(
          at: position, with: _Node<C.Element>._value(of: child, materializer))
      },
      remove: { positions, root in
        root[keyPath: keyPath]._removeOffsets(positions)
      },
      removeAll: { root in root[keyPath: keyPath].removeAll() },
      align: { first, second in
        guard first[keyPath: keyPath].map(\.id) == second[keyPath: keyPath].map(\.id) else {
          return false
        }
        first[keyPath: keyPath] = second[keyPath: keyPath]
        return true
      }
    )
  }

  /// An optional collection of entities: removal drops elements, never the collection itself.
  @inlinable
  static func optionalCollection<C: MutableCollection & RangeReplaceableCollection & Sendable>(
    _ keyPath: WritableKeyPath<Root, C?> & Sendable
  ) -> _Accessor where C.Element: Identifiable & Sendable {
    _Accessor(
      forEachChild: { root, core in
        if let children = root[keyPath: keyPath] { core.visitAll(children) }
      },
      fill: { child, position, root, materializer in
        root[keyPath: keyPath]!._replace(
          at: position, with: _Node<C.Element>._value(of: child, materializer))
      },
      remove: { positions, root in
        root[keyPath: keyPath]?._removeOffsets(positions)
      },
      removeAll: { root in root[keyPath: keyPath]?.removeAll() },
      align: { first, second in
        guard first[keyPath: keyPath]?.map(\.id) == second[keyPath: keyPath]?.map(\.id) else {
          return false
        }
        first[keyPath: keyPath] = second[keyPath: keyPath]
        return true
      }
    )
  }
}

extension MutableCollection where Self: RangeReplaceableCollection {
  /// Replaces the element at `offset` elements past `startIndex`.
  @inlinable
  mutating func _replace(at offset: Int, with element: Element) {
    self[index(startIndex, offsetBy: offset)] = element
  }

  /// Removes the elements at the given offsets, which are ascending and unique.
  @inlinable
  mutating func _removeOffsets(_ offsets: [Int]) {
    for offset in offsets.reversed() {
      remove(at: index(startIndex, offsetBy: offset))
    }
  }
}
