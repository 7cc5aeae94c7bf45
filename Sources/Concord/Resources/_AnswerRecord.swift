import Foundation

// A resource's answer in the store: for a persisted entity type, one record of its own beside
// the entities, holding the ids in order, when it was fetched, and its validator. The record is
// an alias record (`PersistentChange.saveAlias`) under a name no alias can have
// (`_AnswerRecord.storeName`), so every `PersistentStore` keeps it without knowing about
// resources, and `removeAll()` and `reset()` delete it with the aliases of its type.

/// What a prefetch read of a resource's answer record: its ids and the rest, none, or how
/// reading it failed.
enum _FetchedAnswer<ID> {
  case saved([ID], _StoredAnswerInfo)
  case none
  case failed(String)
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
    namePrefix + (list ? "[\(kind)]" : kind) + ":" + name
  }

  /// How every answer record's name starts.
  static let namePrefix = "\u{1}resource:"

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
