/// How a parent value of type `Root` holds child entities at one key path: how to list them,
/// how to write a child back, and how to drop one when it is removed.
///
/// NB: closures rather than subclasses keep this type final, hence checkably `Sendable`.
@usableFromInline
final class _Accessor<Root>: Sendable {
  /// Hands each child entity in `root` to the expansion, in order, with its position: 0 for a
  /// single or optional entity, the offset in the collection otherwise.
  let forEachChild: @Sendable (Root, _Expansion) -> Void
  /// Writes the current value of `child` (a `_Node<C>`) into `root` at `position`.
  let write: @Sendable (_AnyNode, Int, inout Root) -> Void
  /// Removes the children at `positions` (ascending, unique) from `root`.
  /// `nil` for a non-optional single entity: its parent cannot exist without it.
  let remove: (@Sendable ([Int], inout Root) -> Void)?

  @usableFromInline
  init(
    forEachChild: @escaping @Sendable (Root, _Expansion) -> Void,
    write: @escaping @Sendable (_AnyNode, Int, inout Root) -> Void,
    remove: (@Sendable ([Int], inout Root) -> Void)?
  ) {
    self.forEachChild = forEachChild
    self.write = write
    self.remove = remove
  }
}

extension _Accessor {
  /// A single, non-optional nested entity.
  @inlinable
  static func single<C: Identifiable & Sendable>(_ keyPath: WritableKeyPath<Root, C> & Sendable)
    -> _Accessor
  {
    _Accessor(
      forEachChild: { root, expansion in expansion.visit(root[keyPath: keyPath], position: 0) },
      write: { child, _, root in root[keyPath: keyPath] = _Node<C>._value(of: child) },
      remove: nil
    )
  }

  /// An optional nested entity: removal sets it to `nil`.
  @inlinable
  static func optional<C: Identifiable & Sendable>(_ keyPath: WritableKeyPath<Root, C?> & Sendable)
    -> _Accessor
  {
    _Accessor(
      forEachChild: { root, expansion in
        if let child = root[keyPath: keyPath] { expansion.visit(child, position: 0) }
      },
      write: { child, _, root in root[keyPath: keyPath] = _Node<C>._value(of: child) },
      remove: { _, root in root[keyPath: keyPath] = nil }
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
      forEachChild: { root, expansion in expansion.visitAll(root[keyPath: keyPath]) },
      write: { child, position, root in
        root[keyPath: keyPath]._replace(at: position, with: _Node<C.Element>._value(of: child))
      },
      remove: { positions, root in
        root[keyPath: keyPath]._removeOffsets(positions)
      }
    )
  }

  /// An optional collection of entities: removal drops elements, never the collection itself.
  @inlinable
  static func optionalCollection<C: MutableCollection & RangeReplaceableCollection & Sendable>(
    _ keyPath: WritableKeyPath<Root, C?> & Sendable
  ) -> _Accessor where C.Element: Identifiable & Sendable {
    _Accessor(
      forEachChild: { root, expansion in
        if let children = root[keyPath: keyPath] { expansion.visitAll(children) }
      },
      write: { child, position, root in
        root[keyPath: keyPath]!._replace(at: position, with: _Node<C.Element>._value(of: child))
      },
      remove: { positions, root in
        root[keyPath: keyPath]?._removeOffsets(positions)
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
