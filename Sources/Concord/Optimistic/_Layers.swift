// Optimistic layers.
//
// Nodes always hold what everyone sees: the visible value. An entity a pending layer wrote is
// *shadowed*: a `_Shadow` keeps its value underneath (what the server said) and, per layer over
// it, the value that layer wrote. The visible value is the newest layer's.
//
// A write from outside the layers goes underneath. When the outermost write begins, every
// shadowed entity is *lowered* to its value underneath; the write then runs as any write
// (stamps compare with the value underneath, merges merge into it, `update` starts from it),
// and the nodes it stores into are listed (`_Outbox.written`). Before it commits, their new
// values are kept as the values underneath, and every shadowed entity is *raised* back to its
// newest layer's value. The change log compares each node before the write with the node at
// commit, so nobody is told of the lowering and raising, only of visible changes; queries and
// collectors see visible values only.
//
// Lowering and raising show a value in a node without writing the entities it nests
// (`show(_:in:)`: the nested occurrences only link), so that an aggregate shows its layer's or
// its underneath value over its nested entities' own visible values.

/// The map's optimistic layers.
@usableFromInline
struct _Layers {
  /// The shadowed entities, by node, and in the order they were first shadowed.
  @usableFromInline var shadows: [ObjectIdentifier: _AnyShadow] = [:]
  var order: [_AnyShadow] = []
  var lastSerial = 0
  /// How many layers are neither committed nor rolled back.
  var pendingCount = 0
  /// Whether the write under way lowered the shadowed entities.
  @usableFromInline var isLowered = false
  /// Commits and rollbacks asked for inside a write, done when it ends.
  @usableFromInline var deferred: [(layer: _Layer, commit: Bool)] = []

  @usableFromInline init() {}

  /// Whether any entity is shadowed.
  @inlinable
  var isActive: Bool { mutating get { !shadows.isEmpty } }
}

/// One optimistic layer: the entities it wrote, in the order it first wrote them.
@usableFromInline
final class _Layer: @unchecked Sendable {
  // NB: @unchecked because every field is only touched while holding the map's lock.
  let serial: Int
  var nodes: [_AnyNode] = []
  var isPending = true

  init(serial: Int) {
    self.serial = serial
  }
}

/// What one shadowed entity is underneath, and what each layer over it wrote.
@usableFromInline
class _AnyShadow {
  /// The entity; the shadow holds it (one external hold) while it lives.
  @usableFromInline let node: _AnyNode
  /// Whether the entity exists underneath: not when only a layer created it.
  @usableFromInline var baseExists: Bool
  @usableFromInline var baseStamp: Stamp
  /// The layers over the entity, oldest first, with the stamp the entity had after each.
  @usableFromInline var entries: [(serial: Int, stamp: Stamp)] = []

  init(node: _AnyNode, baseExists: Bool, baseStamp: Stamp) {
    self.node = node
    self.baseExists = baseExists
    self.baseStamp = baseStamp
  }

  /// Shows the value underneath, if the entity has one.
  func lower(_: _MapCore) { fatalError("abstract") }
  /// Shows the newest layer's value.
  func raise(_: _MapCore) { fatalError("abstract") }
  /// Keeps the node's value as the value underneath: a write from outside stored into it.
  func keepAsBase() { fatalError("abstract") }
  /// Records the node's value as layer `serial`'s.
  func push(_: Int) { fatalError("abstract") }
  /// Forgets layer `serial`'s value.
  func pop(_: Int) { fatalError("abstract") }
  /// Makes layer `serial`'s value the value underneath, unless a newer stamp is there.
  func commit(_: Int) { fatalError("abstract") }

  /// What is wrong with the shadow between writes, if anything; for `_checkInvariants`.
  func problem() -> String? { fatalError("abstract") }
}

/// The shadow of an entity of type `T`.
///
/// NB: what runs on every write from outside (lowering, raising, keeping a value underneath)
/// runs specialized, through the table's `_EntityOps`; see `_lower` and its siblings.
@usableFromInline
final class _Shadow<T: Identifiable & Sendable>: _AnyShadow {
  @usableFromInline var base: T?
  /// Each layer's value, parallel to `entries`.
  @usableFromInline var values: [T] = []

  init(node: _EntityNode<T>, base: T?, baseStamp: Stamp) {
    self.base = base
    super.init(node: node, baseExists: base != nil, baseStamp: baseStamp)
  }

  @inlinable
  var entity: _EntityNode<T> { unsafeDowncast(node, to: _EntityNode<T>.self) }

  override func lower(_ core: _MapCore) { entity.table.ops.lowerShadow(self, core) }

  override func raise(_ core: _MapCore) { entity.table.ops.raiseShadow(self, core) }

  override func keepAsBase() { entity.table.ops.keepShadowBase(self) }

  @inlinable
  func _lower(_ core: _MapCore) {
    guard let base else { return }
    core.show(base, stamp: baseStamp, in: entity)
  }

  @inlinable
  func _raise(_ core: _MapCore) {
    guard let value = values.last, let entry = entries.last else { return }
    core.show(value, stamp: entry.stamp, in: entity)
  }

  @inlinable
  func _keepAsBase() {
    base = entity.value
    baseStamp = node.s.stamp
    baseExists = true
  }

  override func push(_ serial: Int) {
    entries.append((serial, node.s.stamp))
    values.append(entity.value)
  }

  override func pop(_ serial: Int) {
    guard let index = entries.firstIndex(where: { $0.serial == serial }) else { return }
    entries.remove(at: index)
    values.remove(at: index)
  }

  override func problem() -> String? {
    guard node.isPresent, node.externalHolds > 0 else {
      return "a shadowed \(T.self) is not stored, or not held"
    }
    guard let top = values.last, values.count == entries.count else {
      return "a shadow of \(T.self) has no layer"
    }
    // NB: its own fields: the entities it nests show their own visible values.
    let schema = entity.table.schema
    if schema.isEquatable && !schema.ownFieldsEqual(top, entity.value) {
      return "\(T.self) \(entity.value.id) does not show its newest layer's value"
    }
    return nil
  }

  override func commit(_ serial: Int) {
    guard let index = entries.firstIndex(where: { $0.serial == serial }) else { return }
    let stamp = entries[index].stamp
    // NB: the stamp the entity had after the layer's write: the one that write gave, or, if it
    // gave none, the one it kept. A newer stamp underneath means the server wrote since: it wins.
    if baseExists && !baseStamp.isNaN && !stamp.isNaN && baseStamp > stamp { return }
    let value = values[index]
    if baseExists, let stored = base, let merge = entity.table.schema.merge {
      base = merge(value, stored)
    } else {
      base = value
    }
    if !stamp.isNaN { baseStamp = stamp }
    baseExists = true
  }
}
