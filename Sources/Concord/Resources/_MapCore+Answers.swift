import Foundation

// Resources' answers in the engine: an answer is written into its slot by one ordinary pass
// (as an alias's value is), and, for a persisted entity type, kept in the store as one record of
// its own, beside the entities: the ids in order, when it was fetched, and its validator. The
// record is an alias record (`PersistentChange.saveAlias`) under a name no alias can have
// (`_AnswerRecord.storeName`), so every `PersistentStore` keeps it without knowing about
// resources, and `removeAll()` and `reset()` delete it with the aliases of its type.

extension _MapCore {
  /// Writes `value` into the slot of a resource's answer: one pass, the slot unstamped (every
  /// fetch replaces the answer before it), each entity judged by `stamp`, or its own.
  func storeAnswer<Value: Sendable>(_ value: Value, into node: _AliasNode<Value>, stamp: Stamp?) {
    lifetime.noteHoldDropped(node)
    let schema = node.schema.takeUnretainedValue()
    if audience.persistedTypes > 0 { loadMissing(in: Optional(value), schema: schema) }
    pass.run(into: node, payload: value, stamp: nil, call: stamp)
  }

  /// Empties the slot of an answer let go. It never persists, so the store keeps its record.
  func releaseAnswer(_ node: _AnyNode) {
    guard node.witness.holdsAliasValue(node) else { return }
    emptyAlias(node)
  }

  /// Fills the empty slot `node` with the answer the store keeps for the resource `name`, if
  /// `T` is persisted and there is one: its entities are loaded, and the slot takes them as a
  /// load, which tells nobody. Returns when that answer was fetched, and its validator.
  func loadStoredAnswer<T: Identifiable & Sendable, Value: Sendable>(
    _: T.Type, into node: _AliasNode<Value>, name: String, list: Bool, make: ([T]) -> Value?
  ) -> _StoredAnswerInfo? {
    guard let persistence, let persisted = registry.table(for: T.self).persisted else {
      return nil
    }
    let storeName = _AnswerRecord.storeName(of: name, kind: persisted.kind, list: list)
    guard let stored = readAnswerRecord(T.self, named: storeName, persistence, persisted) else {
      return nil
    }
    for id in stored.ids { loadIfMissing(T.self, id: id) }
    let table = registry.table(for: T.self)
    if let value = make(stored.ids.compactMap { table.node($0)?.value }) {
      // NB: as `prepare(_:_:make:)` loads an alias: a load is not a change.
      lifetime.noteHoldDropped(node)
      let events = outbox.events.count
      journal.noteLoaded(node)
      pass.run(into: node, payload: value, stamp: nil, call: nil, nesting: .load)
      journal.recordLoaded()
      if outbox.events.count > events { outbox.events.removeSubrange(events...) }
    }
    return stored.info
  }

  /// The answer record `name` of `T`, from the changes not yet applied, else from the store;
  /// `nil` when there is none, or it cannot be read (logged).
  private func readAnswerRecord<T: Identifiable & Sendable>(
    _: T.Type, named name: String, _ persistence: _Persistence, _ persisted: _Persisted<T>
  ) -> (ids: [T.ID], info: _StoredAnswerInfo)? {
    switch persistence.unappliedAlias(name, kind: persisted.kind) {
    case .saved(let values, _):
      guard let unapplied = values as? _UnappliedAnswer, let ids = unapplied.ids as? [T.ID] else {
        return nil
      }
      return (ids, unapplied.info)
    case .deleted, .tombstone:
      return nil
    case .unknown:
      break
    }
    do {
      guard let record = try persistence.store.aliasRecord(named: name) else { return nil }
      return try _AnswerRecord.decode(T.self, record.payload, persistence.store)
    } catch {
      outbox.log { .persistenceFailed("reading the answer of \(name): \(error)") }
      return nil
    }
  }

  /// The save of the answer record of the resource `name`, naming `ids` of `T`, if `T` is
  /// persisted.
  func answerRecord<T: Identifiable & Sendable>(
    _: T.Type, ids: [T.ID], name: String, list: Bool, _ info: _StoredAnswerInfo
  ) -> _PersistOp? {
    guard let persisted = registry.table(for: T.self).persisted else { return nil }
    return _AnswerRecord(
      name: _AnswerRecord.storeName(of: name, kind: persisted.kind, list: list),
      kind: persisted.kind, ids: ids, info: info)
  }
}

/// An answer record not yet applied, as `_Persistence.unappliedAlias(_:kind:)` hands it back.
struct _UnappliedAnswer: @unchecked Sendable {
  // NB: @unchecked for `ids`, an array of `Sendable` ids.
  /// The ids, as `[T.ID]`.
  let ids: Any
  let info: _StoredAnswerInfo
}

/// What the store keeps for a resource's answer, as `PersistentStore.encode(_:)` encodes it.
struct _StoredAnswer<IDs: Codable>: Codable {
  var ids: IDs
  /// `fetchedAt`, in seconds since 1970.
  var fetchedAt: Double
  var validator: String?
}

/// The save of a resource's answer record: an alias change, so that it is applied, read back
/// before it is applied, and deleted with the aliases of its kind as an alias's record is.
final class _AnswerRecord: _AliasOp, @unchecked Sendable {
  // NB: @unchecked as its superclass: the ids are `Sendable`.
  private let ids: Any
  private let info: _StoredAnswerInfo

  init<ID>(name: String, kind: String, ids: [ID], info: _StoredAnswerInfo) {
    self.ids = ids
    self.info = info
    super.init(
      name: name, kind: kind, values: _UnappliedAnswer(ids: ids, info: info), stamp: nil)
  }

  /// The name of the record of the answer of the resource `name` whose entities have `kind`.
  ///
  /// NB: it starts with a control character, which no alias name written in code has, so it
  /// never meets an alias's record; the kind and the shape keep apart resources whose keys
  /// share a name but not a value type.
  static func storeName(of name: String, kind: String, list: Bool) -> String {
    "\u{1}resource:" + (list ? "[\(kind)]" : kind) + ":" + name
  }

  override func change(_ store: any PersistentStore) throws -> PersistentChange {
    guard let ids = ids as? any Codable else { throw _AnswerRecordError.idsNotCodable }
    func encode<IDs: Codable>(_ ids: IDs) throws -> [UInt8] {
      try store.encode(
        _StoredAnswer(
          ids: ids, fetchedAt: info.fetchedAt.timeIntervalSince1970, validator: info.validator))
    }
    return .saveAlias(
      name: name, kind: kind ?? "", record: PersistentRecord(payload: try encode(ids), stamp: nil))
  }

  /// The ids and the rest of an answer record's `payload`.
  static func decode<T: Identifiable & Sendable>(
    _: T.Type, _ payload: [UInt8], _ store: any PersistentStore
  ) throws -> (ids: [T.ID], info: _StoredAnswerInfo) {
    guard let type = [T.ID].self as? any Codable.Type else {
      throw _AnswerRecordError.idsNotCodable
    }
    func decode<IDs: Codable>(_: IDs.Type) throws -> (Any, _StoredAnswerInfo) {
      let stored = try store.decode(_StoredAnswer<IDs>.self, from: payload)
      return (
        stored.ids,
        _StoredAnswerInfo(
          fetchedAt: Date(timeIntervalSince1970: stored.fetchedAt), validator: stored.validator)
      )
    }
    let (ids, info) = try decode(type)
    guard let ids = ids as? [T.ID] else { throw _AnswerRecordError.idsNotCodable }
    return (ids, info)
  }
}

/// Why an answer record could not be made or read.
enum _AnswerRecordError: Error, CustomStringConvertible {
  case idsNotCodable

  var description: String { "the ids of the answer's entities are not Codable" }
}
