// What `IdentityMap.holders(of:id:)`, `IdentityMap.parents(of:id:)` and
// `IdentityMap.statistics` read, under the lock.

extension _MapCore {
  /// The aggregates in memory that nest `node` now, each once; and, through `visit`, the batch
  /// lists and alias slots that hold it.
  func parents(of node: _AnyNode, visit: (_AnyNode) -> Void = { _ in }) -> Set<EntityReference> {
    var parents: Set<EntityReference> = []
    for parent in node.parentReferences {
      let holder = parent.parent
      if holder.s.flags.contains(.list) || holder.s.flags.contains(.alias) {
        visit(holder)
      } else if let reference = holder.witness.reference(holder) {
        parents.insert(reference)
      }
    }
    return parents
  }

  /// See ``IdentityMap/parents(of:id:)``. In a write: the aggregates of persisted types that
  /// are only in the store are loaded first, and released when it ends.
  func parents<T: Identifiable & Sendable>(of _: T.Type, id: T.ID) -> [EntityReference] {
    loadIfMissing(T.self, id: id)
    if audience.persistedTypes > 0 {
      for table in registry.tables { table.queries.loadAggregates(table, self) }
    }
    return withTable(T.self) { table in
      guard let node = table.node(id), node.isPresent else { return [] }
      return Array(parents(of: node))
    }
  }

  func holders<T: Identifiable & Sendable>(of _: T.Type, id: T.ID) -> EntityHolders? {
    withTable(T.self) { table -> EntityHolders? in
      guard let node = table.node(id), node.isPresent else { return nil }
      var handles = 0
      var subscriptions = 0
      var aliases: Set<String> = []
      /// Handles and subscriptions on `holder`, which is the entity or a batch list.
      func countHandles(on holder: _AnyNode, queries: Int, layers: Int) {
        let subscribers = holder.s.extras?.subscribers.count ?? 0
        subscriptions += subscribers
        // NB: a handle dropped inside the write under way gives its hold back when it ends.
        let dropped = lifetime.deferred.reduce(0) { count, work in
          if case .releaseHold(let node) = work, node === holder { count + 1 } else { count }
        }
        handles += Int(holder.externalHolds) - subscribers - queries - layers - dropped
      }
      let queries =
        table.consumers?.queryNodes.filter {
          unsafeDowncast($0, to: _QueryNode<T>.self).hasMember(node)
        }.count ?? 0
      // NB: a shadow holds its entity once, whatever the number of layers over it.
      let shadow = layers.shadow(of: node)
      let layerCount = shadow?.entries.count ?? 0
      countHandles(on: node, queries: queries, layers: shadow == nil ? 0 : 1)
      var lists: Set<ObjectIdentifier> = []
      let parents = parents(of: node) { holder in
        if holder.s.flags.contains(.list) {
          if lists.insert(ObjectIdentifier(holder)).inserted {
            countHandles(on: holder, queries: 0, layers: 0)
          }
        } else if let name = holder.witness.aliasName(holder) {
          aliases.insert(name)
        }
      }
      return EntityHolders(
        entity: EntityReference(T.self, id: id), handles: handles, subscriptions: subscriptions,
        aliases: aliases.sorted(),
        parents: parents.sorted { ($0.typeName, $0.id) < ($1.typeName, $1.id) }, queries: queries,
        optimisticLayers: layerCount, isRetainedByBuffer: node.s.flags.contains(.buffered))
    }
  }

  func statistics() -> IdentityMapStatistics {
    var byType: [String: Int] = [:]
    var queries = 0
    var collectors = 0
    for table in registry.tables {
      if table.count > 0 { byType[table.typeName, default: 0] += table.count }
      queries += table.queries.queryCount(table)
      collectors += table.queries.collectorCount(table)
    }
    return IdentityMapStatistics(
      entities: registry.liveCount, entitiesByType: byType,
      bufferedEntities: lifetime.buffer.count, handles: lifetime.handles + handleStripes.sum,
      subscriptions: lifetime.openSubscriptions,
      aliases: registry.aliases.values.filter { $0.witness.holdsAliasValue($0) }.count,
      queries: queries,
      collectors: collectors, pendingLayers: layers.pendingCount)
  }
}
