/// The persisted entities a value nests, at any depth, that are not in memory: listed as loads
/// for `_MapCore.loadMissing(in:schema:)`, or, with `prefetch`, asked of a prefetch, to be read
/// outside the lock (`_MapCore.writeReading(_:_:)`). Under the map's lock.
@usableFromInline
final class _MissingEntities: _NestedVisitor {
  /// NB: unowned(unsafe), by rule 7 of `_Lifetime.swift`: the walk runs within a call on the
  /// map, which its caller holds.
  @usableFromInline unowned(unsafe) let core: _MapCore
  /// Where the entities are asked for; `nil` to list loads instead.
  @usableFromInline let prefetch: _Prefetch?
  @usableFromInline var loads: [(_MapCore) -> Void] = []

  @inlinable
  init(_ core: _MapCore, prefetch: _Prefetch? = nil) {
    self.core = core
    self.prefetch = prefetch
  }

  @usableFromInline
  override func visit<C: Identifiable & Sendable>(_ child: C) {
    core.withTable(C.self) { table in
      if let persisted = table.persisted, table.node(child.id) == nil {
        if let prefetch, let persistence = core.persistence {
          prefetch.want(child.id, of: persisted, in: table, persistence)
        } else {
          let id = child.id
          loads.append { core in core.loadIfMissing(C.self, id: id) }
        }
      }
      visitNested(in: child, schema: table.schema)
    }
  }
}
