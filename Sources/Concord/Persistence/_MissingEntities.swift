/// The persisted entities a value nests, at any depth, that are not in memory: listed as loads
/// for `_MapCore.loadMissing(in:schema:)`, or, with `prefetch`, asked of a prefetch, to be read
/// outside the lock (`_MapCore.writeReading(_:_:)`). Under the map's lock.
@usableFromInline
final class _MissingEntities {
  /// NB: unretained, by rule 7 of `_Lifetime.swift`: the walk runs within a call on the map,
  /// which its caller holds; borrowed at each child without reference counting.
  @usableFromInline let core: Unmanaged<_MapCore>
  /// Where the entities are asked for; `nil` to list loads instead.
  @usableFromInline let prefetch: _Prefetch?
  @usableFromInline var loads: [(_MapCore) -> Void] = []

  @inlinable
  init(_ core: _MapCore, prefetch: _Prefetch? = nil) {
    self.core = .passUnretained(core)
    self.prefetch = prefetch
  }

  /// Visits the entities `value` nests, at any depth.
  @inlinable
  func visitNested<V>(in value: V, schema: _Schema<V>) {
    _NestedVisitor(missing: self).visitNested(in: value, schema: schema)
  }

  /// Visits `child` and the entities it nests, at any depth: a step of `visitor`'s walk.
  @inlinable
  func visit<C: Identifiable & Sendable>(_ child: C, _ visitor: _NestedVisitor) {
    core._withUnsafeGuaranteedRef { core in
      core.withTable(C.self) { table in
        if table.persisted != nil, table.node(child.id) == nil {
          if let prefetch {
            prefetch.want(visited: child.id, of: table.persisted.unsafelyUnwrapped)
          } else {
            let id = child.id
            loads.append { core in core.loadIfMissing(C.self, id: id) }
          }
        }
        if !table.schema.isLeaf { visitor.visitNested(in: child, schema: table.schema) }
      }
    }
  }
}
