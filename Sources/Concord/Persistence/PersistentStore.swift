/// Where an ``IdentityMap`` keeps the entities it persists, so that they survive release and
/// restarts.
///
/// You do not implement this to use persistence: `ConcordSQLite`'s `SQLiteStore` is the store
/// the library ships. Implement it to keep entities somewhere else, or to fake a store in
/// tests. Give the store to ``IdentityMap/init(logger:retention:persistence:tombstones:clock:)``, then name the
/// types to persist with ``IdentityMap/persist(_:)``.
///
/// The map calls a store from two places, and never from both at once for the same call:
///
/// - ``apply(_:)`` on the map's background writer, one call per group of consecutive commits,
///   in commit order. The calling thread of a write never waits for it.
/// - ``record(kind:key:)``, ``records(kind:)``, ``aliasRecord(named:)`` and
///   ``tombstones(kind:)`` on the thread of a `find`, a query, or a write that needs an entity
///   not in memory, with none of the map's locks held: the map decodes what they return, then
///   takes its lock to admit it. Inside an `update` or transaction body, which runs under the
///   map's lock, the map reads there, so keep ``record(kind:key:)`` short: a primary-key
///   lookup.
///
/// ``encode(_:)`` and ``decode(_:from:)`` run on either. A store must be safe to call from
/// several threads at once.
public protocol PersistentStore: AnyObject, Sendable {
  /// The bytes the store keeps for `value`: an entity, or an entity's id.
  ///
  /// Equal ids must encode to equal bytes: they are the rows' keys.
  func encode<Value: Encodable>(_ value: Value) throws -> [UInt8]

  /// The value that ``encode(_:)`` made `bytes` from.
  func decode<Value: Decodable>(_ type: Value.Type, from bytes: [UInt8]) throws -> Value

  /// The record of the entity of `kind` (see ``IdentityMap/persist(_:as:)``) whose id
  /// encodes to `key`, or `nil` if the store has none.
  func record(kind: String, key: [UInt8]) throws -> PersistentRecord?

  /// The record kept for the alias named `name`, or `nil` if the store has none.
  ///
  /// Resources of persisted types keep their answers as alias records too, under names that
  /// start with a control character (U+0001), whose payload is the map's own encoding of the
  /// answer's ids, age and validator: a store keeps them as it keeps any alias record.
  func aliasRecord(named name: String) throws -> PersistentRecord?

  /// Applies `changes` in order, all of them or none: one store transaction.
  func apply(_ changes: [PersistentChange]) throws

  /// Every record of `kind`, tombstones included, with the keys their ids encode to, in no
  /// particular order.
  ///
  /// A live query of a persisted type reads them when it opens (see
  /// ``IdentityMap/query(_:filter:sortedBy:)``), so that it shows the entities the store has
  /// and memory does not. The default implementation throws ``PersistentStoreUnsupported``:
  /// the failure is logged (``IdentityMapEvent/persistenceFailed(_:)``), and such a query shows
  /// what is in memory only.
  func records(kind: String) throws -> [(key: [UInt8], record: PersistentRecord)]

  /// The keys and stamps of the tombstones of `kind` (records with no payload; see
  /// ``PersistentRecord/isTombstone``), in no particular order.
  ///
  /// ``IdentityMap/persist(_:as:)`` reads them, so that the map keeps at most its
  /// ``TombstonePolicy``'s number across launches. The default implementation filters
  /// ``records(kind:)``, and returns none for a store that does not list its records (whose
  /// tombstones then stay bounded within a launch only); a store that can find them without
  /// reading every payload should implement it.
  func tombstones(kind: String) throws -> [(key: [UInt8], stamp: Stamp)]
  /// Writes a snapshot of everything the store holds to the file at `path`, atomically: a
  /// crash leaves the file that was there, or the whole snapshot.
  ///
  /// ``IdentityMap/save(to:)`` calls it on the map's background writer, once every write
  /// committed before has been applied, and applies nothing meanwhile. The default
  /// implementation throws ``PersistentStoreUnsupported``.
  func save(to path: String) throws
  /// Replaces everything the store holds with the snapshot at `path`, made by ``save(to:)``,
  /// as one transaction; throws, changing nothing, when `path` is not such a snapshot.
  ///
  /// ``IdentityMap/restore(from:)`` calls it on the map's background writer, with the map
  /// locked and every committed write applied, then reads the store again for what memory
  /// holds. The default implementation throws ``PersistentStoreUnsupported``.
  func restore(from path: String) throws
}

extension PersistentStore {
  /// The tombstones among ``records(kind:)``.
  public func tombstones(kind: String) throws -> [(key: [UInt8], stamp: Stamp)] {
    let records: [(key: [UInt8], record: PersistentRecord)]
    do {
      records = try self.records(kind: kind)
    } catch is PersistentStoreUnsupported {
      return []
    }
    return records.compactMap { key, record in
      guard record.isTombstone, let stamp = record.stamp else { return nil }
      return (key, stamp)
    }
  }

  /// Throws ``PersistentStoreUnsupported``: a store that has no save slots.
  public func save(to path: String) throws {
    throw PersistentStoreUnsupported(operation: "save(to: \"\(path)\")")
  }

  /// Throws ``PersistentStoreUnsupported``: a store that has no save slots.
  public func restore(from path: String) throws {
    throw PersistentStoreUnsupported(operation: "restore(from: \"\(path)\")")
  }

  /// Throws ``PersistentStoreUnsupported``: a store that does not list its records.
  public func records(kind: String) throws -> [(key: [UInt8], record: PersistentRecord)] {
    throw PersistentStoreUnsupported(operation: "records(kind: \"\(kind)\")")
  }
}

/// The error of a ``PersistentStore`` operation the store does not implement.
public struct PersistentStoreUnsupported: Error, Hashable, Sendable, CustomStringConvertible {
  /// The operation, as called.
  public var operation: String

  /// The error of `operation`.
  public init(operation: String) {
    self.operation = operation
  }

  /// Which operation the store does not implement.
  public var description: String { "the store does not implement \(operation)" }
}

/// What a ``PersistentStore`` keeps for one entity or alias: its encoded value and its stamp.
public struct PersistentRecord: Hashable, Sendable {
  /// The value, as ``PersistentStore/encode(_:)`` made it. For an alias, the encoded ids of
  /// the entities it names, as an array.
  public var payload: [UInt8]
  /// The stamp the map had recorded for it; `nil` when none.
  public var stamp: Stamp?

  /// A record of `payload`, stamped `stamp`.
  public init(payload: [UInt8], stamp: Stamp?) {
    self.payload = payload
    self.stamp = stamp
  }

  /// The record of a removed entity's tombstone (see ``TombstonePolicy``): its stamp, and no
  /// payload.
  ///
  /// A store keeps it as any record, so a store that round-trips payloads and stamps keeps
  /// tombstones with no more work. Entities never encode to no bytes, so nothing else looks
  /// like one.
  public static func tombstone(stamp: Stamp) -> PersistentRecord {
    PersistentRecord(payload: [], stamp: stamp)
  }

  /// Whether this is a tombstone: a record with no payload. The map reads it as a removed
  /// entity and its stamp, not as an entity.
  public var isTombstone: Bool { payload.isEmpty }
}

/// One change a ``PersistentStore`` applies, as part of a group applied all or nothing.
///
/// NB: a closed enum, unlike ``IdentityMapEvent``: a store must apply every change it is
/// given, and a store that skipped a kind of change it did not know would lose data without a
/// word. When a version adds a kind, a store's exhaustive `switch` stops compiling, which is
/// what its author needs to hear.
public enum PersistentChange: Hashable, Sendable {
  /// Inserts or replaces the record of an entity.
  case save(kind: String, key: [UInt8], record: PersistentRecord)
  /// Deletes the record of an entity, if there is one.
  case delete(kind: String, key: [UInt8])
  /// Deletes every entity record of a kind (``IdentityMap/removeAll()``).
  case deleteKind(String)
  /// Inserts or replaces the record of an alias whose value type has `kind`.
  case saveAlias(name: String, kind: String, record: PersistentRecord)
  /// Deletes the record of an alias, if there is one.
  case deleteAlias(name: String)
  /// Deletes every alias record whose value type has `kind`.
  case deleteAliases(kind: String)
  /// Deletes every record (``IdentityMap/reset()``).
  case deleteEverything
}
