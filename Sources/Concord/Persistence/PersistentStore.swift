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
///
/// A store that other processes write too (``isShared``) is also asked, on the background
/// writer, for ``externalChanges()``, whenever the thread it wakes through
/// ``observeExternalChanges(_:)`` says so, and when the app calls
/// ``IdentityMap/syncExternalChanges()``.
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

  // MARK: Sharing with other processes

  /// Whether other processes commit to the store too (an app and its extensions sharing a
  /// file): the map then applies what they commit, by itself when ``observeExternalChanges(_:)``
  /// wakes it, and when ``IdentityMap/syncExternalChanges()`` is called. The default is
  /// `false`: only this map writes the store.
  var isShared: Bool { get }

  /// The error every write of the store meets, for a store that never writes (one opened
  /// read-only, in an extension that only shows data); `nil`, the default, for a store that
  /// writes.
  ///
  /// The map then never calls ``apply(_:)``: a write of a persisted type stays in memory, as a
  /// write of a type that is not persisted would, is logged as
  /// ``IdentityMapEvent/Kind/notPersisted``, and makes the next ``IdentityMap/flush()`` throw
  /// this error.
  var writeRefusal: (any Error)? { get }

  /// What other processes committed to the store since the last call, in commit order, without
  /// this store's own commits. Only for a store that ``isShared``; the default returns none.
  ///
  /// The map calls it on its background writer, once everything it committed before is
  /// applied, and applies nothing meanwhile: so a commit of this map that is not in the store
  /// yet is newer than everything the answer holds. Each commit of the answer is then applied
  /// as one write of the map, which is never handed back to ``apply(_:)``.
  func externalChanges() throws -> PersistentExternalChanges

  /// Has the store call `wake`, from a thread of its own, whenever another process may have
  /// committed to it; `nil` stops it. The map calls it once, when it persists its first type,
  /// and applies the store's ``externalChanges()`` each time it is woken. The default does
  /// nothing: the map applies other processes' commits only when
  /// ``IdentityMap/syncExternalChanges()`` is called.
  func observeExternalChanges(_ wake: (@Sendable () -> Void)?)
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

  /// `false`: a store only this map writes.
  public var isShared: Bool { false }

  /// `nil`: a store that writes.
  public var writeRefusal: (any Error)? { nil }

  /// None: a store only this map writes.
  public func externalChanges() throws -> PersistentExternalChanges {
    PersistentExternalChanges()
  }

  /// Nothing: a store only this map writes.
  public func observeExternalChanges(_ wake: (@Sendable () -> Void)?) {}
}

/// What other processes committed to a shared store since the map last asked (see
/// ``PersistentStore/externalChanges()``).
public struct PersistentExternalChanges: Sendable {
  /// The commits, oldest first, each with its changes in the order they were made. The map
  /// applies each as one write: handles, queries and aliases are told once per commit.
  public var commits: [[PersistentChange]]
  /// Whether the store could not tell every commit since the last call: it kept too few of them
  /// (the map was not reading, in a suspended process), or its content was replaced. The map
  /// then reloads every entity and alias it holds from the store, as a restore does, and logs
  /// why; `commits` is then empty.
  public var isIncomplete: Bool
  /// This store's own saves, since the last call, that the store refused because its record
  /// had a newer stamp, written by another process: the map logs each as a stale write
  /// (``IdentityMapEvent/Kind/discardedStale``). The newer record reaches the map among the
  /// commits, as any other process's commit does.
  public var staleWrites: [PersistentStaleWrite]

  /// The commits `commits`; `isIncomplete` when they are not all there are; the refused saves
  /// `staleWrites`.
  public init(
    commits: [[PersistentChange]] = [], isIncomplete: Bool = false,
    staleWrites: [PersistentStaleWrite] = []
  ) {
    self.commits = commits
    self.isIncomplete = isIncomplete
    self.staleWrites = staleWrites
  }
}

/// A save the map handed to a shared store that the store refused: its record, written by
/// another process, has a newer stamp (see ``PersistentExternalChanges/staleWrites``).
public struct PersistentStaleWrite: Hashable, Sendable {
  /// The save refused: a ``PersistentChange/save(kind:key:record:)`` or a
  /// ``PersistentChange/saveAlias(name:kind:record:)``, as the map handed it over.
  public var change: PersistentChange
  /// The stamp of the store's record, which refused it.
  public var storedStamp: Stamp

  /// The save `change`, refused by a record stamped `storedStamp`.
  public init(change: PersistentChange, storedStamp: Stamp) {
    self.change = change
    self.storedStamp = storedStamp
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
