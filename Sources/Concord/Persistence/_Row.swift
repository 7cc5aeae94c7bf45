// The changes a persisted type's entities and aliases hand over for the store, and the typed
// operations that encode and decode them.

/// One unapplied change of an entity: its value and stamp, or its deletion.
@usableFromInline
struct _Row<T: Identifiable> {
  @usableFromInline let id: T.ID
  /// The value saved, or `nil` for a deletion.
  @usableFromInline let value: T?
  @usableFromInline let stamp: Stamp?

  @inlinable
  init(id: T.ID, value: T?, stamp: Stamp?) {
    self.id = id
    self.value = value
    self.stamp = stamp
  }
}

/// The deletion of an entity found by a load (see `admitLoaded`), which, unlike the rows a
/// commit records, a rollback must be able to drop; with `tombstone`, the record of the
/// tombstone it leaves.
@usableFromInline
final class _RowRemoval<T: Identifiable & Sendable>: _PersistOp, @unchecked Sendable {
  let persisted: _Persisted<T>
  let id: T.ID
  let tombstone: Stamp?

  @usableFromInline
  init(_ persisted: _Persisted<T>, id: T.ID, tombstone: Stamp? = nil) {
    self.persisted = persisted
    self.id = id
    self.tombstone = tombstone
  }

  override func handOver(to _: _Persistence) {
    persisted.open.append(_Row(id: id, value: nil, stamp: tombstone))
    persisted.touch(id)
  }
}

/// The persistence operations on `T` that need it to be `Codable`, as closures.
///
/// NB: made by an `@inlinable` initializer, called where ``IdentityMap/persist(_:as:)`` is, in
/// code specialized for `T`: run from the engine's type-erased code, generic methods would
/// look up `T`'s metadata (and its tuples' and dictionaries') on every commit.
@usableFromInline
struct _PersistedOps<T: Identifiable & Sendable> {
  /// `_Persisted._encode`, specialized.
  @usableFromInline let encode:
    (_Persisted<T>, [_Row<T>], any PersistentStore, inout [PersistentChange], inout [Int]) -> Void
  /// The op saving an alias naming entities of `T`, given their values.
  @usableFromInline let saveAlias: (String, String, [T], Stamp?) -> _AliasOp
  @usableFromInline let decode: ([UInt8]) throws -> T
  @usableFromInline let decodeIDs: ([UInt8]) throws -> [T.ID]
  @usableFromInline let decodeID: ([UInt8]) throws -> T.ID
  @usableFromInline let encodeID: (T.ID) throws -> [UInt8]

  @inlinable
  init(store: any PersistentStore) where T: Codable, T.ID: Codable {
    encode = { persisted, rows, store, changes, skipped in
      persisted._encode(rows, store, into: &changes, skipped: &skipped)
    }
    saveAlias = { name, kind, values, stamp in
      _AliasSave(name: name, kind: kind, values: values, stamp: stamp)
    }
    decode = { try store.decode(T.self, from: $0) }
    decodeIDs = { try store.decode([T.ID].self, from: $0) }
    decodeID = { try store.decode(T.ID.self, from: $0) }
    encodeID = { try store.encode($0) }
  }
}

/// The save of an alias naming entities of `T`.
@usableFromInline
final class _AliasSave<T: Identifiable & Codable & Sendable>: _AliasOp, @unchecked Sendable
where T.ID: Codable {
  let entities: [T]

  @usableFromInline
  init(name: String, kind: String, values: [T], stamp: Stamp?) {
    entities = values
    super.init(name: name, kind: kind, values: values, stamp: stamp)
  }

  override func change(_ store: any PersistentStore) throws -> PersistentChange {
    .saveAlias(
      name: name, kind: kind ?? "",
      record: PersistentRecord(payload: try store.encode(entities.map { $0.id }), stamp: stamp))
  }
}

/// An entity of a persisted type, by kind and id: what a load is loading.
@usableFromInline
struct _RowKey: Hashable, @unchecked Sendable {
  // NB: @unchecked for `AnyHashable`, which holds an entity id.
  @usableFromInline let kind: String
  @usableFromInline let id: AnyHashable

  @inlinable
  init(kind: String, id: AnyHashable) {
    self.kind = kind
    self.id = id
  }
}
