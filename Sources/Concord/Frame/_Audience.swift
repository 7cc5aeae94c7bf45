/// Who reads what a write changes, besides the subscribers of each node: the few facts about
/// the whole map that the parts ask while they write.
///
/// The core keeps one, updated where those facts change (a query, collector or persisted type
/// attached or detached, a start queued or run, layers lowered or raised), and hands it to the
/// parts that ask: the journal decides from it which values to save and which patches to
/// record, the commit whom to feed. So a part never reads another part's state to decide, and
/// a feature that reads changes joins by counting itself here.
@usableFromInline
struct _Audience {
  /// Queries, collectors and persisted types attached, all types together, and one more for a
  /// logger of changed values: each reads its type's changes from the journal at the commit.
  /// While there is any, writes of the types that have some go through the journal and save
  /// the values they replace; see `_Witness.hasConsumers`.
  @usableFromInline var consumers = 0
  /// Entity types persisted (each also counts as a consumer). While there is any, a write of
  /// an aggregate first loads the persisted entities it nests that are not in memory.
  @usableFromInline var persistedTypes = 0
  /// Whether the logger wants `changed` events with the values (see
  /// ``IdentityMapLogger/logsChangedValues``). It then counts as one more consumer, of every
  /// type, so that every write goes through the journal and saves the values it replaces.
  @usableFromInline var logsChangedValues = false
  /// Whether queries or collectors opened during the write wait to start at its commit
  /// (`_Registry.pendingStarts`).
  @usableFromInline var startsPending = false
  /// Whether the write under way lowered the optimistic layers' shadowed entities (see
  /// `_Layers`): it is rolled back into them before it commits.
  @usableFromInline var underLayers = false

  @usableFromInline init() {}

  /// A query or collector was attached (+1) or detached (-1).
  @usableFromInline
  mutating func consumersChanged(by delta: Int) {
    consumers += delta
  }

  /// Whether a consumer reads the changes of `node`'s type (so its value before the write is
  /// kept): one of its type's queries or collectors, or a logger of changed values, for an
  /// entity or an alias.
  @inlinable
  func readsChanges(of node: _AnyNode) -> Bool {
    consumers > 0
      && (node.witness.readsOldValues(node)
        || (logsChangedValues && node.s.flags.isDisjoint(with: [.list, .query])))
  }

  /// Whether anything but a node's own subscribers may read a change to any node: a consumer,
  /// one waiting to start, a persisted type, or the layers the write is rolled back into.
  @inlinable
  var hearsEveryChange: Bool {
    consumers > 0 || startsPending || persistedTypes > 0 || underLayers
  }
}
