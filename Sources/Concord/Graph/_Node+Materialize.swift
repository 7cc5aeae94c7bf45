// Materializing: how a node's value shows its nested entities.
//
// A value shows the freshest version of each entity it nests, at every depth: its slots hold
// the children's stored values. That rule alone never ends for a cycle by identity (a member
// among its friends' friends): each write would nest one more copy of the cycle into the value.
// So inside a cycle the rule is sharpened:
//
//   On any path from the root of a value down, an entity appears at most once in full. Where a
//   path would reach again an entity it already went through, that occurrence shows the entity
//   *cut*: its own fields, with its nested entities removed (collections emptied, optionals set
//   to `nil`; a required nested entity is itself shown cut).
//
// With members 1 and 2 friends of each other, member 1 is `1[2[1-cut]]` and member 2 is
// `2[1[2-cut]]`, whatever the order of the writes and however often they repeat: the value is
// a function of the members' own fields, so a write that changes no field changes no value and
// notifies nobody. Nesting depth is bounded by the length of the cycle.
//
// Outside cycles the rule is the plain one, and a node's slots are patched with its children's
// stored values. Nodes on cycles carry a cycle number (`_NodeExtras.cycle`, see `_Pass+Cycles.swift`)
// shared by their strongly connected part of the graph; only a child with the same number can
// lead back to a node on the path, so only those are unfolded, and every other child is written
// with its stored value.
//
// - Complexity: For a node on a cycle, O(the simple paths from it within its cycle). That is
//   O(k²) over all k members of a ring, but grows quickly with dense cycles (everyone friends
//   with everyone): keep such graphs small, or nest ids instead of entities.

/// The state of one materialization: the cycle being unfolded and whether a cut is being made.
@usableFromInline
final class _Materializer {
  /// The cycle number of the node being materialized.
  @usableFromInline let cycle: Int
  /// Whether the value asked for is a cut one (see above).
  @usableFromInline var cutting = false
  /// How deep the current cut goes through required nested entities.
  @usableFromInline var cutDepth = 0

  @usableFromInline
  init(cycle: Int) {
    self.cycle = cycle
  }
}

extension _Node {
  /// The value of `node`, a `_Node<Value>`, to write into a parent's slot: its stored value,
  /// or with `materializer`, its value on the path being materialized.
  @inlinable
  static func _value(of node: _AnyNode, _ materializer: _Materializer?) -> Value {
    let node = unsafeDowncast(node, to: _Node<Value>.self)
    guard let materializer else { return node.value }
    return node._nested(materializer)
  }

  /// Whether the value at `slot` is the stored value of `node` (a `_Node<Value>`) bit for
  /// bit. Compares in place: neither value is copied.
  ///
  /// NB: `slot` may point at the payload of an `Optional<Value>` that is not `nil`, which
  /// begins the optional's storage.
  @inlinable
  static func _holdsValue(of node: _AnyNode, at slot: UnsafePointer<Value>) -> Bool {
    // NB: borrowed (rule 7 of `_Lifetime.swift`): `node` is a child the caller links (rule 4).
    Unmanaged.passUnretained(node)._withUnsafeGuaranteedRef {
      withUnsafePointer(to: &unsafeDowncast($0, to: _Node<Value>.self).value) {
        _identical(at: $0, slot)
      }
    }
  }

  /// ``_holdsValue(of:at:)`` for a slot holding an optional value; `false` when it is `nil`.
  @inlinable
  static func _holdsValue(of node: _AnyNode, at slot: inout Value?) -> Bool {
    guard slot != nil else { return false }
    return withUnsafePointer(to: &slot) {
      _holdsValue(of: node, at: UnsafeRawPointer($0).assumingMemoryBound(to: Value.self))
    }
  }

  /// ``_holdsValue(of:at:)`` for a slot holding a value.
  @inlinable
  static func _holdsValue(of node: _AnyNode, at slot: inout Value) -> Bool {
    withUnsafePointer(to: &slot) { _holdsValue(of: node, at: $0) }
  }

  /// This node's whole value, rebuilt from its children's.
  @usableFromInline
  func _materialized() -> Value {
    guard cycle != 0 else { return withSchema { _rebuiltFromChildren(schema: $0) } }
    return _unfolded(_Materializer(cycle: cycle))
  }

  /// The value of this node as an occurrence on the current path.
  @usableFromInline
  func _nested(_ materializer: _Materializer) -> Value {
    if materializer.cutting || s.bits.contains(.onPath) { return _cut(materializer) }
    guard cycle != 0 && cycle == materializer.cycle else { return value }
    return _unfolded(materializer)
  }

  /// The value with every slot filled on the path extended by this node.
  @usableFromInline
  func _unfolded(_ materializer: _Materializer) -> Value {
    s.bits.insert(.onPath)
    defer { s.bits.remove(.onPath) }
    var copy = value
    let schema = schema.takeUnretainedValue()
    for link in children {
      schema.accessor(link.accessor).fill(link.child, Int(link.position), &copy, materializer)
    }
    return copy
  }

  /// The value cut: own fields only, nested entities removed, required ones cut in turn.
  @usableFromInline
  func _cut(_ materializer: _Materializer) -> Value {
    var copy = value
    let accessors = schema.takeUnretainedValue().accessors
    for index in accessors.indices {
      if let removeAll = accessors[index].removeAll {
        removeAll(&copy)
        continue
      }
      // NB: a cycle made only of required nested entities cannot be built from finite
      // values; the depth guard keeps a value that somehow is one from recursing forever.
      guard materializer.cutDepth < 64,
        let link = children.first(where: { $0.accessor == Int32(index) })
      else { continue }
      let wasCutting = materializer.cutting
      materializer.cutting = true
      materializer.cutDepth += 1
      accessors[index].fill(link.child, 0, &copy, materializer)
      materializer.cutDepth -= 1
      materializer.cutting = wasCutting
    }
    return copy
  }
}
