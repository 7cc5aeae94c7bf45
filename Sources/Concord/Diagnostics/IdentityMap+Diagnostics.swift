/// What keeps one entity alive in an ``IdentityMap``; see ``IdentityMap/holders(of:id:)``.
///
/// An entity stays while anything holds it: a handle (on it, or on a batch containing it), a
/// subscription, an alias, an aggregate nesting it, a live query, a pending optimistic layer,
/// or the release buffer. With none of them, the map lets it go.
public struct EntityHolders: Sendable, Hashable, CustomStringConvertible {
  /// The entity.
  public let entity: EntityReference
  /// Live handles (`EntityObserver`s) on the entity itself or on a batch (`store([T])`)
  /// containing it. Copies of one `EntityObserver` count once; each `store` and `find` made
  /// its own.
  public let handles: Int
  /// Live subscriptions (callbacks, streams, `observe(on:)`, `ObservedEntity`) on the entity
  /// or on those batches.
  public let subscriptions: Int
  /// The names of the aliases, single or collection, holding the entity, sorted.
  public let aliases: [String]
  /// The aggregates holding the entity, each once, sorted.
  public let parents: [EntityReference]
  /// Live queries having the entity as a member.
  public let queries: Int
  /// Pending optimistic layers over the entity. While there is any, the layers hold it.
  public let optimisticLayers: Int
  /// Whether the release buffer (``RetentionPolicy``) keeps the entity, which nothing else
  /// holds.
  public let isRetainedByBuffer: Bool

  /// Whether nothing but the buffer holds the entity, or nothing at all (it is about to go, or
  /// it is kept by something the map does not see, such as a value being written).
  public var isUnheld: Bool {
    handles == 0 && subscriptions == 0 && aliases.isEmpty && parents.isEmpty && queries == 0
      && optimisticLayers == 0
  }

  /// One line, such as `Author(1): 2 handles, 1 subscription, alias "currentUser", parent
  /// Book(b1)`.
  public var description: String {
    var parts: [String] = []
    if handles > 0 { parts.append(_counted(handles, "handle", "handles")) }
    if subscriptions > 0 { parts.append(_counted(subscriptions, "subscription", "subscriptions")) }
    parts += aliases.map { "alias \"\($0)\"" }
    parts += parents.map { "parent \($0)" }
    if queries > 0 { parts.append(_counted(queries, "query", "queries")) }
    if optimisticLayers > 0 {
      parts.append(_counted(optimisticLayers, "optimistic layer", "optimistic layers"))
    }
    if isRetainedByBuffer { parts.append("the release buffer") }
    return "\(entity): " + (parts.isEmpty ? "nothing" : parts.joined(separator: ", "))
  }
}

/// Counts of what an ``IdentityMap`` holds, for a debug overlay; see
/// ``IdentityMap/statistics``.
public struct IdentityMapStatistics: Sendable, Hashable, CustomStringConvertible {
  /// Entities in the map, all types together (as ``IdentityMap/count``).
  public let entities: Int
  /// Entities in the map per type name (`String(describing:)` of the type: two types of one
  /// name in different modules are counted together); types with none are left out.
  public let entitiesByType: [String: Int]
  /// Entities only the release buffer keeps.
  public let bufferedEntities: Int
  /// Live handles (`EntityObserver`s), on entities, batches, aliases and queries.
  public let handles: Int
  /// Open subscriptions: callbacks and streams not cancelled yet.
  public let subscriptions: Int
  /// Aliases that are set.
  public let aliases: Int
  /// Live queries.
  public let queries: Int
  /// Live change collectors.
  public let collectors: Int
  /// Optimistic layers neither committed nor rolled back.
  public let pendingLayers: Int

  /// Several lines: the totals, then the entities per type, most first.
  public var description: String {
    var lines = [
      [
        _counted(entities, "entity", "entities") + " (\(bufferedEntities) buffered)",
        _counted(handles, "handle", "handles"),
        _counted(subscriptions, "subscription", "subscriptions"),
        _counted(aliases, "alias", "aliases"), _counted(queries, "query", "queries"),
        _counted(collectors, "collector", "collectors"),
        _counted(pendingLayers, "pending layer", "pending layers"),
      ].joined(separator: ", ")
    ]
    for (type, count) in entitiesByType.sorted(by: { ($1.value, $0.key) < ($0.value, $1.key) }) {
      lines.append("  \(type): \(count)")
    }
    return lines.joined(separator: "\n")
  }
}

/// `number` and the noun for it: `1 handle`, `2 handles`.
func _counted(_ number: Int, _ singular: String, _ plural: String) -> String {
  "\(number) \(number == 1 ? singular : plural)"
}

extension IdentityMap {
  /// What keeps an entity alive: its handles, subscriptions, aliases, parents (each named),
  /// queries, optimistic layers and the release buffer.
  ///
  /// ```swift
  /// print(map.holders(of: Author.self, id: 1)!)
  /// // Author(1): 1 handle, alias "currentUser", parent Book(b1)
  /// ```
  ///
  /// - Returns: `nil` when the entity is not in the map (persisted entities only on disk
  ///   included: this does not read the store).
  /// - Complexity: O(parents + queries of `T` + subscriptions on it).
  public func holders<T: Identifiable & Sendable>(of type: T.Type, id: T.ID) -> EntityHolders? {
    _core.read { _core.holders(of: T.self, id: id) }
  }

  /// Counts of what the map holds: entities per type, buffered entities, handles, open
  /// subscriptions, aliases, queries, collectors and pending optimistic layers.
  ///
  /// Cheap enough to read on every frame of a debug overlay: it takes the lock once, and counts
  /// without visiting a single entity.
  ///
  /// - Complexity: O(entity types + queries + aliases).
  public var statistics: IdentityMapStatistics {
    _core.read { _core.statistics() }
  }
}
