import Foundation

// A resource's answer in the store: for a persisted entity type, one record of its own beside
// the entities, holding the ids in order, when it was fetched, and its validator. The record is
// an alias record (`PersistentChange.saveAlias`) under a name no alias can have
// (`_AnswerRecord.storeName`), so every `PersistentStore` keeps it without knowing about
// resources, and `removeAll()` and `reset()` delete it with the aliases of its type.
//
// A paged list keeps one record per page it holds (the ids that page brought to the list, in
// order) and one record of the list (when its head was fetched, its cursors, whether older
// pages follow), under names of their own (`pagedName(of:kind:)`, `pageName(of:serial:)`).
// The records are chained: the list's names its first page, and each page's the page after it
// (`_StoredPaging.next`), so that a page appended or put on top rewrites two records, whatever
// the list's length. A page's record is written when the page lands, again when the page after
// it lands, and when an entity of it is removed. A prefetch reading the list's record follows
// the chain, with no lock held.

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
  /// A paged list's pages and cursors, in its list record; absent otherwise.
  var paging: _EncodedPaging?
}

/// What a paged list's records hold besides ids: see `_AnswerRecord.swift`.
@usableFromInline
struct _StoredPaging: Sendable {
  /// The serial number of the next page in the chain: the first page, in the list's record;
  /// the page after it, in a page's. `nil` at the end.
  @usableFromInline var next: UInt64?
  /// In the list's record: whether older pages follow, the cursor of the page older than the
  /// last, and that of the items newer than the first.
  @usableFromInline var hasOlder = false
  @usableFromInline var older: _StoredCursor?
  @usableFromInline var newer: _StoredCursor?

  @inlinable
  init(
    next: UInt64? = nil, hasOlder: Bool = false, older: _StoredCursor? = nil,
    newer: _StoredCursor? = nil
  ) {
    self.next = next
    self.hasOlder = hasOlder
    self.older = older
    self.newer = newer
  }
}

/// A cursor of a paged list, as the store had it (encoded), or as a record not yet applied
/// holds it (the value, and how to encode it).
@usableFromInline
enum _StoredCursor: Sendable {
  case encoded([UInt8])
  case value(any Sendable, encode: @Sendable (any PersistentStore) throws -> [UInt8])

  /// The cursor `value`, to be encoded by the store.
  @usableFromInline
  static func of<Cursor: Codable & Sendable>(_ value: Cursor) -> _StoredCursor {
    .value(value, encode: { store in try store.encode(value) })
  }

  /// The cursor as `store` encodes it.
  func encoded(by store: any PersistentStore) throws -> [UInt8] {
    switch self {
    case .encoded(let bytes): bytes
    case .value(_, let encode): try encode(store)
    }
  }
}

/// `_StoredPaging` as the store keeps it: each cursor encoded by the store.
struct _EncodedPaging: Codable {
  var next: UInt64?
  var hasOlder: Bool
  var older: [UInt8]?
  var newer: [UInt8]?
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

  /// The name of the record of the paged list `name` whose entities have `kind`: apart from
  /// a resource's with the same name.
  static func pagedName(of name: String, kind: String) -> String {
    pagedPrefix + "[\(kind)]:" + name
  }

  /// How every paged list's record's name, and its pages', starts.
  static let pagedPrefix = "\u{1}paged:"

  /// Whether `name` is a resource's or a paged list's record's (or one of its pages'), not an
  /// alias's.
  static func isAnswerRecord(_ name: String) -> Bool {
    name.hasPrefix(namePrefix) || name.hasPrefix(pagedPrefix)
  }

  /// The name of the record of the page `serial` of the paged list whose record is `list`.
  static func pageName(of list: String, serial: UInt64) -> String {
    list + pageMark + "\(serial)"
  }

  /// What separates a paged list's record's name from a page's number in the page's.
  private static let pageMark = "\u{1}page "

  /// The name of the list's record, from the name of the list's or of one of its pages'.
  static func listName(ofRecord name: String) -> Substring {
    name.range(of: pageMark).map { name[..<$0.lowerBound] } ?? name[...]
  }

  override func change(_ store: any PersistentStore) throws -> PersistentChange {
    guard let ids = ids as? any Codable else { throw _AnswerRecordError.idsNotCodable }
    let paging = try info.paging.map { paging in
      _EncodedPaging(
        next: paging.next, hasOlder: paging.hasOlder,
        older: try paging.older?.encoded(by: store), newer: try paging.newer?.encoded(by: store))
    }
    func encode<IDs: Codable>(_ ids: IDs) throws -> [UInt8] {
      try store.encode(
        _StoredAnswer(
          ids: ids, fetchedAt: info.fetchedAt.timeIntervalSince1970, validator: info.validator,
          paging: paging))
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
      let paging = stored.paging.map { paging in
        _StoredPaging(
          next: paging.next, hasOlder: paging.hasOlder,
          older: paging.older.map(_StoredCursor.encoded),
          newer: paging.newer.map(_StoredCursor.encoded))
      }
      return (
        stored.ids,
        _StoredAnswerInfo(
          fetchedAt: Date(timeIntervalSince1970: stored.fetchedAt), validator: stored.validator,
          paging: paging)
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
