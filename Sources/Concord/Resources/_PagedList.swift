import Foundation

// Where a paged list lives in the map. Each page it holds is a hidden alias slot of its own
// (as a resource's answer is, `_AnswerSlot`), holding the entities that page brought to the
// list, in order: a page lands as one ordinary write of a new slot (`_MapCore.storeAnswer`,
// the whole page, so stamps, tombstones and an id the page repeats follow the rules of one
// write), after which the slot keeps only what the page brings new
// (`_MapCore.keepNewEntities(in:besides:)`): an entity another page of the list holds keeps its
// place there. So the list's items are its pages' slots, concatenated, and appending a page
// writes that page alone, whatever the list's length.
//
// The list's book (its pages in order, cursors, whether older pages follow, when its head was
// fetched) is only touched while holding the map's lock, exclusively to change it: a landing
// reads it and changes it in the write of its page, so that two pages landing at once (a
// refresh and an older page) each see the other's, and a reader sees the pages and their
// entities as of one moment (`snapshot()`).

/// Which page a request asks for, as far as its landing goes.
enum _PageKind: Sendable, Equatable {
  /// The first page: it replaces the list unless it shares an item with it.
  case first
  /// The items newer than the head: they go on top.
  case newer
  /// The page older than the tail: it goes at the end.
  case older
}

/// One page of a paged list: its slot, held.
struct _PageSlot<T: Identifiable & Sendable>: Sendable {
  /// Names the page's slot and its record; never reused in the list.
  let serial: UInt64
  /// A handle on the slot, which holds it.
  let slot: EntityObserver<[T]?>

  /// The slot.
  var node: _AliasNode<[T]> { unsafeDowncast(slot._handle.node, to: _AliasNode<[T]>.self) }
}

/// What a paged list is made of, under the map's lock.
struct _PagedBook<T: Identifiable & Sendable, Cursor: Codable & Sendable> {
  /// Its pages, the newest first.
  var pages: [_PageSlot<T>] = []
  /// The cursor of the items newer than the head, and of the page older than the tail.
  var newer: Cursor?
  var older: Cursor?
  var hasOlder = false
  /// Whether a first page landed (an empty one included).
  var hasAnswer = false
  /// When the head was fetched: the first page, or the last refresh.
  var fetchedAt: Date?
  /// Bumped each time the list is replaced (or emptied by `removeAll()`): an older page asked
  /// for before lands only on the list it extends.
  var generation: UInt64 = 0
  /// The serial of the next page.
  var nextSerial: UInt64 = 0
  /// Bumped by every landing: a snapshot of a later revision is newer, even when the landing
  /// told no subscriber of anything (see `_PagedVersion`).
  var revision: UInt64 = 0
}

/// When a snapshot of a paged list was read: the map's delivery version, and the revision of
/// the list's book. Both only grow, so a read whose pair is greater is newer; a read whose pair
/// is equal saw the same list (every change of a page's entities is delivered to the list's
/// subscription of that page, and every change of its book bumps its revision).
struct _PagedVersion: Comparable, Sendable {
  var delivery: UInt64 = 0
  var book: UInt64 = 0

  static func < (lhs: _PagedVersion, rhs: _PagedVersion) -> Bool {
    (lhs.delivery, lhs.book) < (rhs.delivery, rhs.book)
  }
}

/// The pages of a list and their entities as of one moment, with the map's delivery version
/// then: a snapshot at a higher version is newer.
struct _PagedSnapshot<T: Sendable> {
  /// Each page's serial and its slot's value: `nil` once `removeAll()` emptied it.
  var pages: [(serial: UInt64, items: [T]?)]
  var hasAnswer: Bool
  var hasOlder: Bool
  var fetchedAt: Date?
  var version: _PagedVersion
}

/// What a landing changed: the pages it added, to be followed, and those it dropped, to be
/// let go (after the write: their handles' release takes the map's lock).
struct _PageLanding<T: Identifiable & Sendable>: Sendable {
  var added: [_PageSlot<T>] = []
  var dropped: [_PageSlot<T>] = []
}

/// A paged list in the map; see the top of this file.
final class _PagedList<T: Identifiable & Sendable, Cursor: Codable & Sendable>:
  @unchecked Sendable
{
  // NB: @unchecked because `book` is only touched while holding the map's lock (exclusively
  // to change it).

  /// A handle on an empty slot of the list's own: it holds the map (rule 6 of
  /// `_Lifetime.swift`) for as long as the list lives, and the list's observers' subscriptions
  /// hold it.
  let anchor: EntityObserver<[T]?>
  /// The list's name, from its key.
  let name: String
  /// Where the ids of its slots start: unique in the map.
  private let slotName: String
  private var book = _PagedBook<T, Cursor>()

  private init(anchor: EntityObserver<[T]?>, name: String, slotName: String) {
    self.anchor = anchor
    self.name = name
    self.slotName = slotName
  }

  /// The map.
  var map: _MapCore { anchor._handle.core }

  /// The id of the slot `name`.
  private static func slotID(_ name: String) -> _AliasID {
    _AliasID(valueType: ObjectIdentifier(_ResourceSlot<[T]>.self), name: name)
  }

  /// The id of the slot of the page `serial`.
  private func pageID(_ serial: UInt64) -> _AliasID {
    Self.slotID(slotName + " page \(serial)")
  }

  /// Makes the list named `name`, whose slots' ids start with `slotName`, holding the pages
  /// the store keeps for it, if its entity type is persisted and the store has them. One
  /// write of the map, after reading them, and the entities they name, outside the map's
  /// lock; their cursors are decoded after it, outside the lock too.
  static func make(in map: _MapCore, name: String, slotName: String) -> _PagedList {
    typealias Held = Unmanaged<_Node<[T]?>>
    let (anchor, held, stored) = map.writeReading(
      reading: { prefetch in map.want(pagedList: name, of: T.self, in: prefetch) },
      write: { () -> (Held, [(UInt64, Held)], _StoredAnswerInfo?) in
        let anchor = map.holdForHandle(map.collectionAliasSlot(slotID(slotName), of: T.self))
        guard map.persistsTypes else { return (anchor, [], nil) }
        var held: [(UInt64, Held)] = []
        let stored = map.loadStoredPagedList(T.self, name: name) { serial in
          let node = map.collectionAliasSlot(slotID(slotName + " page \(serial)"), of: T.self)
          held.append((serial, map.holdForHandle(node)))
          return node
        }
        return (anchor, held, stored?.info)
      })
    let list = _PagedList(
      anchor: EntityObserver(_Handle(core: map, held: anchor)), name: name, slotName: slotName)
    let pages = held.map {
      _PageSlot<T>(serial: $0.0, slot: EntityObserver(_Handle(core: map, held: $0.1)))
    }
    guard let stored, let paging = stored.paging else { return list }
    let newer = paging.newer.flatMap { list.cursor($0, what: "the newer cursor of \(name)") }
    let older = paging.older.flatMap { list.cursor($0, what: "the older cursor of \(name)") }
    // NB: nobody else sees the list yet; the map's lock publishes the book to its readers.
    map.read {
      list.book.pages = pages
      list.book.newer = newer
      list.book.older = older
      list.book.hasOlder = paging.hasOlder && older != nil
      list.book.hasAnswer = true
      list.book.fetchedAt = stored.fetchedAt
      list.book.nextSerial = (paging.pages.max() ?? 0) + 1
    }
    return list
  }

  /// A stored cursor, decoded by the map's store when it was read from it. Outside the map's
  /// lock.
  private func cursor(_ stored: _StoredCursor, what: String) -> Cursor? {
    switch stored {
    case .value(let value, _): value as? Cursor
    case .encoded(let bytes): map.decodeStored(Cursor.self, from: bytes, what: what)
    }
  }

  // MARK: Reading

  /// The pages and their entities now, with the map's version.
  ///
  /// - Complexity: O(pages): each page's value is read, none of its entities copied.
  func snapshot() -> _PagedSnapshot<T> {
    let map = map
    return map.readOnly {
      _PagedSnapshot(
        pages: book.pages.map { ($0.serial, $0.node.value) }, hasAnswer: book.hasAnswer,
        hasOlder: book.hasOlder, fetchedAt: book.fetchedAt,
        version: _PagedVersion(delivery: map.deliveryVersion, book: book.revision))
    }
  }

  /// The list's pages whose serials are in `serials`.
  func pages(_ serials: Set<UInt64>) -> [_PageSlot<T>] {
    map.readOnly { book.pages.filter { serials.contains($0.serial) } }
  }

  /// What try `attempt` of a fetch of `end` asks, and the list's generation then; `nil` for
  /// an older page when the list has none to ask for.
  func request(_ end: _PagedEnd, attempt: Int) -> (
    request: PageRequest<Cursor>, kind: _PageKind, generation: UInt64
  )? {
    map.readOnly {
      let usable = book.hasAnswer && !isEmptied
      switch end {
      case .tail:
        guard usable, book.hasOlder, let older = book.older else { return nil }
        return (PageRequest(.older(older), attempt: attempt), .older, book.generation)
      case .head:
        guard usable, let newer = book.newer else {
          return (PageRequest(.first, attempt: attempt), .first, book.generation)
        }
        return (PageRequest(.newer(newer), attempt: attempt), .newer, book.generation)
      }
    }
  }

  /// Whether `removeAll()` emptied the list's slots: the list is gone. Under the map's lock.
  private var isEmptied: Bool {
    book.pages.contains { $0.node.value == nil }
  }

  // MARK: Landing

  /// Writes `page`, the answer to a request of `kind` made when the list's generation was
  /// `generation`, in one write of the map, and puts it in the list: on top (`.newer`, or a
  /// `.first` that shares an entity with the list), at the end (`.older`, unless the list was
  /// replaced since), or in place of the list (a `.first` that shares none). For a persisted
  /// entity type, the records of the new page and of the list are saved in the same write.
  ///
  /// - Complexity: O(the page's entities + the list's pages), whatever the list's length;
  ///   O(the list) when it replaces the list, whose entities it lets go.
  func land(
    _ page: Page<T, Cursor>, as kind: _PageKind, generation: UInt64, fetchedAt now: Date
  ) -> _PageLanding<T> {
    let map = map
    return map.write {
      var landing = _PageLanding<T>()
      book.revision += 1
      if isEmptied { reset(&landing) }
      // NB: an older page of a list replaced since would hide the gap between the two.
      if kind == .older && (generation != book.generation || !book.hasAnswer) {
        return landing
      }
      let serial = book.nextSerial
      book.nextSerial += 1
      let node = map.collectionAliasSlot(pageID(serial), of: T.self)
      let slot = _PageSlot<T>(
        serial: serial, slot: EntityObserver(_Handle(core: map, held: map.holdForHandle(node))))
      map.storeAnswer(page.items, into: node, stamp: page.modifiedAt)
      let others = Set(book.pages.map { ObjectIdentifier($0.node) })
      let (kept, shared) = map.keepNewEntities(in: node, besides: others)
      let added = kept > 0
      switch kind {
      case .older:
        // NB: an older page that brings nothing new ends the list: a cursor that goes back
        // or repeats would otherwise have loadOlder() loop forever.
        book.hasOlder = added && page.older != nil
        if added {
          book.pages.append(slot)
          book.older = page.older
        }
      case .first where !shared || !book.hasAnswer, .newer where !book.hasAnswer:
        landing.dropped += book.pages
        book.pages = added ? [slot] : []
        book.newer = page.newer
        book.older = page.older
        book.hasOlder = page.older != nil
        book.hasAnswer = true
        book.generation += 1
      case .first, .newer:
        if added { book.pages.insert(slot, at: 0) }
        if !page.items.isEmpty { book.newer = page.newer }
      }
      if kind != .older { book.fetchedAt = now }
      if added { landing.added.append(slot) } else { landing.dropped.append(slot) }
      // NB: a page whose entities were all removed since is of no use any more.
      let emptied = book.pages.filter { $0.node.value?.isEmpty == true }
      if !emptied.isEmpty {
        book.pages.removeAll { $0.node.value?.isEmpty == true }
        landing.dropped += emptied
      }
      for dropped in landing.dropped { map.releaseAnswer(dropped.node) }
      if map.persistsTypes { saveRecords(landing, now: now) }
      return landing
    }
  }

  /// Forgets the pages and cursors of a list whose slots `removeAll()` emptied. In a write.
  private func reset(_ landing: inout _PageLanding<T>) {
    landing.dropped += book.pages
    book = _PagedBook(
      generation: book.generation + 1, nextSerial: book.nextSerial, revision: book.revision)
  }

  /// Lists the saves of the records of the pages `landing` added and of the list, and the
  /// deletions of the records of the pages it dropped. In a write.
  private func saveRecords(_ landing: _PageLanding<T>, now: Date) {
    let map = map
    for page in landing.dropped { map.deletePagedRecord(T.self, name: name, page: page.serial) }
    for page in landing.added { savePageRecord(page, now: now) }
    let paging = _StoredPaging(
      pages: book.pages.map(\.serial), hasOlder: book.hasOlder,
      older: book.older.map(_StoredCursor.of), newer: book.newer.map(_StoredCursor.of))
    map.savePagedRecord(
      T.self, name: name, page: nil, ids: [],
      _StoredAnswerInfo(fetchedAt: book.fetchedAt ?? now, validator: nil, paging: paging))
  }

  /// Lists the save of the record of `page`: the ids its slot holds. In a write.
  private func savePageRecord(_ page: _PageSlot<T>, now: Date) {
    map.savePagedRecord(
      T.self, name: name, page: page.serial, ids: page.node.value?.map(\.id) ?? [],
      _StoredAnswerInfo(fetchedAt: now, validator: nil))
  }

  /// Saves again the records of the pages `serials` still in the list, when the entity type
  /// is persisted: an entity removed from the map left them, and a relaunch must not list it
  /// again should it be stored anew.
  func saveShrunkPages(_ serials: Set<UInt64>, now: Date) {
    let map = map
    guard map.persistsTypes else { return }
    map.write {
      for page in book.pages where serials.contains(page.serial) {
        savePageRecord(page, now: now)
      }
    }
  }

  // MARK: Letting go

  /// Empties every slot of the list, releasing what only they held, and returns the handles
  /// on them, to be dropped after the write. The store keeps the records of a persisted list.
  func release() -> [_PageSlot<T>] {
    let map = map
    return map.write {
      let pages = book.pages
      book.pages = []
      book.revision += 1
      for page in pages { map.releaseAnswer(page.node) }
      return pages
    }
  }

  /// A subscription that keeps an observer of the list: it holds the list's own slot, and
  /// calls `onCancel` when cancelled (see `_AnswerSlot.subscription(onCancel:)`).
  func subscription(onCancel: @escaping @Sendable () -> Void) -> Subscription {
    let map = map
    let node = anchor._handle.node
    // NB: `.max`: no version is newer, so it is never delivered anything.
    let holder = _Subscriber<[T]?>(lastVersion: .max, onValue: nil)
    map.read { map.attach(holder, to: node) }
    return Subscription(core: map, node: node, subscriber: holder, onCancel: onCancel)
  }
}
