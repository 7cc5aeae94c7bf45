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
// refresh and an older page) each see the other's. The write hands the change to the list's
// machine before it ends (`_PagedChange`, under the machine's own lock, a leaf), so that the
// machine's items follow the book in the order the map wrote it, page by page; and it follows
// the new page's slot from within, so that no change of its entities goes untold.

/// Writes a page's entities into its slot, in a write of the map: `_MapCore.storeAnswer`,
/// specialized for `T` where `T` is known (see `IdentityMap.pagedResource`).
@usableFromInline
typealias _PageWriter<T: Identifiable & Sendable> =
  @Sendable (_MapCore, [T], _AliasNode<[T]>, Stamp?) -> Void

/// Makes (or finds) the slot of a list or one of its pages: made in the caller's module, as
/// `_PageWriter` is, so that the first slot builds its type's collection alias witness, whose
/// schema every page's write walks, specialized for `T`.
@usableFromInline
typealias _PageSlotMaker<T: Identifiable & Sendable> =
  @Sendable (_MapCore, _AliasID) -> _AliasNode<[T]>

/// Which page a request asks for, as far as its landing goes.
@usableFromInline
enum _PageKind: Sendable, Equatable {
  /// The first page: it replaces the list unless it shares an item with it.
  case first
  /// The items newer than the head: they go on top.
  case newer
  /// The page older than the tail: it goes at the end.
  case older
}

/// One page of a paged list: its slot, held.
@usableFromInline
struct _PageSlot<T: Identifiable & Sendable>: Sendable {
  /// Names the page's slot and its record; never reused in the list.
  @usableFromInline let serial: UInt64
  /// A handle on the slot, which holds it.
  @usableFromInline let slot: EntityObserver<[T]?>

  /// The slot.
  @inlinable
  var node: _AliasNode<[T]> { unsafeDowncast(slot._handle.node, to: _AliasNode<[T]>.self) }

  @inlinable
  init(serial: UInt64, slot: EntityObserver<[T]?>) {
    self.serial = serial
    self.slot = slot
  }
}

/// What a paged list is made of, under the map's lock.
@usableFromInline
struct _PagedBook<T: Identifiable & Sendable, Cursor: Codable & Sendable> {
  /// Its pages, the newest first, and their slots' identities (to tell a slot of the list).
  @usableFromInline var pages: [_PageSlot<T>] = []
  @usableFromInline var slots: Set<ObjectIdentifier> = []
  /// The cursors: of the items newer than the head, and of the page older than the tail;
  /// whether older pages follow.
  @usableFromInline var cursors = _PageCursors<Cursor>()
  /// Whether a first page landed (an empty one included).
  @usableFromInline var hasAnswer = false
  /// When the head was fetched: the first page, or the last refresh.
  @usableFromInline var fetchedAt: Date?
  /// Bumped each time the list is replaced (or emptied by `removeAll()`): an older page asked
  /// for before lands only on the list it extends.
  @usableFromInline var generation: UInt64 = 0
  /// The serial of the next page.
  @usableFromInline var nextSerial: UInt64 = 0
  /// Bumped by every change of the book: see `_PagedVersion`.
  @usableFromInline var revision: UInt64 = 0
}

/// A paged list's cursors.
@usableFromInline
struct _PageCursors<Cursor: Codable & Sendable>: Sendable {
  @usableFromInline var newer: Cursor?
  @usableFromInline var older: Cursor?
  @usableFromInline var hasOlder = false

  @inlinable
  init(newer: Cursor? = nil, older: Cursor? = nil, hasOlder: Bool = false) {
    self.newer = newer
    self.older = older
    self.hasOlder = hasOlder
  }
}

/// When a paged list was read: the map's delivery version, and the revision of the list's
/// book. Both only grow, so a later read has both at least as high; a read one of whose two is
/// lower is older (see `_PagedAnswer`).
@usableFromInline
struct _PagedVersion: Sendable, Equatable {
  @usableFromInline var delivery: UInt64 = 0
  @usableFromInline var book: UInt64 = 0

  /// Whether a list read at `self` is newer than one read at `other`.
  @inlinable
  func isNewer(than other: _PagedVersion) -> Bool {
    delivery >= other.delivery && book >= other.book && self != other
  }

  @inlinable
  init(delivery: UInt64 = 0, book: UInt64 = 0) {
    self.delivery = delivery
    self.book = book
  }
}

/// The pages of a list and their entities as of one moment: a read of the whole list.
@usableFromInline
struct _PagedSnapshot<T: Sendable> {
  /// Each page's serial and its slot's value: `nil` once `removeAll()` emptied it.
  @usableFromInline var pages: [(serial: UInt64, items: [T]?)]
  @usableFromInline var hasAnswer: Bool
  @usableFromInline var hasOlder: Bool
  @usableFromInline var fetchedAt: Date?
  @usableFromInline var version: _PagedVersion

  @inlinable
  init(
    pages: [(serial: UInt64, items: [T]?)], hasAnswer: Bool, hasOlder: Bool, fetchedAt: Date? = nil,
    version: _PagedVersion
  ) {
    self.pages = pages
    self.hasAnswer = hasAnswer
    self.hasOlder = hasOlder
    self.fetchedAt = fetchedAt
    self.version = version
  }
}

/// What a landing did to the list, for its machine: the pages it added, at one end, or the
/// pages the list now is.
@usableFromInline
struct _PagedChange<T: Sendable> {
  @usableFromInline
  enum Shape {
    /// A page at the end.
    case appended(serial: UInt64, items: [T])
    /// A page on top.
    case prepended(serial: UInt64, items: [T])
    /// The list is these pages now.
    case replaced([(serial: UInt64, items: [T])])
    /// The same pages.
    case unchanged
  }

  @usableFromInline var shape: Shape
  @usableFromInline var hasAnswer: Bool
  @usableFromInline var hasOlder: Bool
  @usableFromInline var fetchedAt: Date?
  @usableFromInline var version: _PagedVersion

  @inlinable
  init(
    shape: Shape, hasAnswer: Bool, hasOlder: Bool, fetchedAt: Date? = nil, version: _PagedVersion
  ) {
    self.shape = shape
    self.hasAnswer = hasAnswer
    self.hasOlder = hasOlder
    self.fetchedAt = fetchedAt
    self.version = version
  }
}

/// What a landing changed: the page it added, followed by `subscription`, the pages it
/// dropped, and the slot of a page that brought nothing new; the last two to be let go after
/// the write (their handles' release takes the map's lock).
@usableFromInline
struct _PageLanding<T: Identifiable & Sendable>: Sendable {
  @usableFromInline var added: (serial: UInt64, subscription: Subscription)?
  @usableFromInline var dropped: [_PageSlot<T>] = []
  @usableFromInline var discarded: _PageSlot<T>?

  @inlinable init() {}
}

/// A paged list in the map; see the top of this file.
@usableFromInline
final class _PagedList<T: Identifiable & Sendable, Cursor: Codable & Sendable>:
  @unchecked Sendable
{
  // NB: @unchecked because `book` is only touched while holding the map's lock (exclusively
  // to change it).

  /// A handle on an empty slot of the list's own: it holds the map (rule 6 of
  /// `_Lifetime.swift`) for as long as the list lives, and the list's observers' subscriptions
  /// hold it.
  @usableFromInline let anchor: EntityObserver<[T]?>
  /// The list's name, from its key.
  @usableFromInline let name: String
  /// Where the ids of its slots start: unique in the map.
  @usableFromInline let slotName: String
  /// Writes a page into its slot.
  @usableFromInline let write: _PageWriter<T>
  /// Makes a page's slot.
  @usableFromInline let makeSlot: _PageSlotMaker<T>
  // NB: exclusivity checks off in release builds, as on the core's parts: the map's lock
  // already makes every access exclusive.
  #if DEBUG
    @usableFromInline var book = _PagedBook<T, Cursor>()
  #else
    @exclusivity(unchecked) @usableFromInline var book = _PagedBook<T, Cursor>()
  #endif

  @inlinable
  init(
    anchor: EntityObserver<[T]?>, name: String, slotName: String, write: @escaping _PageWriter<T>,
    makeSlot: @escaping _PageSlotMaker<T>
  ) {
    self.anchor = anchor
    self.name = name
    self.slotName = slotName
    self.write = write
    self.makeSlot = makeSlot
  }

  /// The map.
  @inlinable
  var map: _MapCore { anchor._handle.core }

  /// The id of the slot `name`.
  @inlinable
  static func slotID(_ name: String) -> _AliasID {
    _AliasID(valueType: ObjectIdentifier(_ResourceSlot<[T]>.self), name: name)
  }

  /// The id of the slot of the page `serial` of the list whose slots' ids start with `slotName`.
  @inlinable
  static func pageID(_ slotName: String, _ serial: UInt64) -> _AliasID {
    slotID(slotName + " page " + String(serial))
  }

  /// Makes the list named `name`, whose slots' ids start with `slotName`, holding the pages
  /// the store keeps for it, if its entity type is persisted and the store has them. One
  /// write of the map, after reading them, and the entities they name, outside the map's
  /// lock; their cursors are decoded after it, outside the lock too. `write` writes each page
  /// into its slot, and `makeSlot` makes each slot.
  @inlinable
  static func make(
    in map: _MapCore, name: String, slotName: String, write: @escaping _PageWriter<T>,
    makeSlot: @escaping _PageSlotMaker<T>
  ) -> _PagedList {
    // NB: unretained, as `holdForHandle` returns it: the hold it took keeps the slot until the
    // handle made of it below gives it back (rule 6 of `_Lifetime.swift`).
    typealias Held = Unmanaged<_Node<[T]?>>
    let (anchor, held, stored) = map.writeReading(
      reading: { prefetch in map.want(pagedList: name, of: T.self, in: prefetch) },
      write: { () -> (Held, [(UInt64, Held)], _StoredAnswerInfo?) in
        let anchor = map.holdForHandle(makeSlot(map, slotID(slotName)))
        guard map.persistsTypes else { return (anchor, [], nil) }
        var held: [(UInt64, Held)] = []
        let stored = map.loadStoredPagedList(T.self, name: name) { serial in
          let node = makeSlot(map, pageID(slotName, serial))
          held.append((serial, map.holdForHandle(node)))
          return node
        }
        return (anchor, held, stored?.info)
      })
    let list = _PagedList(
      anchor: EntityObserver(_Handle(held: anchor)), name: name, slotName: slotName,
      write: write, makeSlot: makeSlot)
    let pages = held.map {
      _PageSlot<T>(serial: $0.0, slot: EntityObserver(_Handle(held: $0.1)))
    }
    guard let stored, let paging = stored.paging else { return list }
    let newer = paging.newer.flatMap { list.cursor($0, what: "the newer cursor of \(name)") }
    let older = paging.older.flatMap { list.cursor($0, what: "the older cursor of \(name)") }
    // NB: nobody else sees the list yet; the map's lock publishes the book to its readers.
    map.read {
      list.book.pages = pages
      list.book.slots = Set(pages.map { ObjectIdentifier($0.node) })
      list.book.cursors = _PageCursors(
        newer: newer, older: older, hasOlder: paging.hasOlder && older != nil)
      list.book.hasAnswer = true
      list.book.fetchedAt = stored.fetchedAt
      list.book.nextSerial = (pages.map { $0.serial }.max() ?? 0) + 1
    }
    return list
  }

  /// A stored cursor, decoded by the map's store when it was read from it. Outside the map's
  /// lock.
  @inlinable
  func cursor(_ stored: _StoredCursor, what: String) -> Cursor? {
    switch stored {
    case .value(let value, _): value as? Cursor
    case .encoded(let bytes): map.decodeStored(Cursor.self, from: bytes, what: what)
    }
  }

  // MARK: Reading

  /// The pages and their entities now, with the version of the read.
  ///
  /// - Complexity: O(pages): each page's value is read, none of its entities copied.
  @inlinable
  func snapshot() -> _PagedSnapshot<T> {
    let map = map
    return map.readOnly {
      _PagedSnapshot(
        pages: book.pages.map { ($0.serial, $0.node.value) }, hasAnswer: book.hasAnswer,
        hasOlder: book.cursors.hasOlder, fetchedAt: book.fetchedAt,
        version: _PagedVersion(delivery: map.deliveryVersion, book: book.revision))
    }
  }

  /// The list's pages now, in order.
  @inlinable
  func pages() -> [_PageSlot<T>] {
    map.readOnly { book.pages }
  }

  /// What try `attempt` of a fetch of `end` asks, and the list's generation then; `nil` for
  /// an older page when the list has none to ask for.
  @inlinable
  func request(_ end: _PagedEnd, attempt: Int) -> (
    request: PageRequest<Cursor>, kind: _PageKind, generation: UInt64
  )? {
    map.readOnly {
      let usable = book.hasAnswer && !isEmptied
      switch end {
      case .tail:
        guard usable, book.cursors.hasOlder, let older = book.cursors.older else { return nil }
        return (PageRequest(.older(older), attempt: attempt), .older, book.generation)
      case .head:
        guard usable, let newer = book.cursors.newer else {
          return (PageRequest(.first, attempt: attempt), .first, book.generation)
        }
        return (PageRequest(.newer(newer), attempt: attempt), .newer, book.generation)
      }
    }
  }

  /// Whether `removeAll()` emptied the list's slots (it empties them all at once): the list is
  /// gone. Under the map's lock.
  ///
  /// NB: asked of the slot's witness, which reads the value in specialized code, rather than
  /// by copying `[T]?` out here, in generic code.
  @inlinable
  var isEmptied: Bool {
    guard let first = book.pages.first?.node else { return false }
    return !first.witness.holdsAliasValue(first)
  }

  // MARK: Landing

  /// Writes `page`, the answer to a request of `kind` made when the list's generation was
  /// `generation`, in one write of the map, and puts it in the list: on top (`.newer`, or a
  /// `.first` that shares an entity with the list), at the end (`.older`, unless the list was
  /// replaced since), or in place of the list (a `.first` that shares none).
  ///
  /// Within the write, the page's slot is followed (`follow`) and the change handed to
  /// `apply`. For a persisted entity type, the records of the page, of the page before it in
  /// the chain, and of the list are saved in the same write.
  ///
  /// - Complexity: O(the page's entities), whatever the list's length; O(the list) when it
  ///   replaces the list, whose entities it lets go, or puts a page on top.
  @inlinable
  func land(
    _ page: Page<T, Cursor>, as kind: _PageKind, generation: UInt64, fetchedAt now: Date,
    follow: (_PageSlot<T>) -> Subscription, apply: (_PagedChange<T>) -> Void
  ) -> _PageLanding<T> {
    let map = map
    return map.write {
      var landing = _PageLanding<T>()
      let emptied = isEmptied
      // NB: an older page of a list replaced since would hide the gap between the two.
      if kind == .older && (generation != book.generation || !book.hasAnswer || emptied) {
        return landing
      }
      book.revision += 1
      let serial = book.nextSerial
      book.nextSerial += 1
      let node = makeSlot(map, Self.pageID(slotName, serial))
      let slot = _PageSlot<T>(
        serial: serial, slot: EntityObserver(_Handle(held: map.holdForHandle(node))))
      write(map, page.items, node, page.modifiedAt)
      let (kept, shared) = map.keepNewEntities(in: node, besides: emptied ? [] : book.slots)
      let added = kept > 0
      let tail = book.pages.last
      var shape = _PagedChange<T>.Shape.unchanged
      switch kind {
      case .older:
        // NB: an older page that brings nothing new ends the list: a cursor that goes back
        // or repeats would otherwise have loadOlder() loop forever.
        book.cursors.hasOlder = added && page.older != nil
        if added {
          book.cursors.older = page.older
          book.pages.append(slot)
          shape = .appended(serial: serial, items: node.value ?? [])
        }
      case .first where !shared || !book.hasAnswer || emptied,
        .newer where !book.hasAnswer || emptied:
        landing.dropped = book.pages
        book.pages = added ? [slot] : []
        book.slots = []
        book.cursors = _PageCursors(
          newer: page.newer, older: page.older, hasOlder: page.older != nil)
        book.hasAnswer = true
        book.generation += 1
        shape = .replaced(added ? [(serial, node.value ?? [])] : [])
      case .first, .newer:
        if !page.items.isEmpty { book.cursors.newer = page.newer }
        if added {
          book.pages.insert(slot, at: 0)
          shape = .prepended(serial: serial, items: node.value ?? [])
        }
      }
      if kind != .older { book.fetchedAt = now }
      if added {
        book.slots.insert(ObjectIdentifier(node))
        landing.added = (serial, follow(slot))
      } else {
        landing.discarded = slot
        map.releaseAnswer(node)
      }
      for dropped in landing.dropped { map.releaseAnswer(dropped.node) }
      apply(
        _PagedChange(
          shape: shape, hasAnswer: book.hasAnswer, hasOlder: book.cursors.hasOlder,
          fetchedAt: book.fetchedAt,
          version: _PagedVersion(delivery: map.deliveryVersion, book: book.revision)))
      if map.persistsTypes {
        saveRecords(shape, tail: tail, dropped: landing.dropped, now: now)
      }
      return landing
    }
  }

  /// Lists the saves of the records a landing of `shape` changed (the list's, the new page's
  /// and the one before it in the chain, the old `tail` for a page appended) and the deletions
  /// of those of the pages it dropped. In a write.
  @inlinable
  func saveRecords(
    _ shape: _PagedChange<T>.Shape, tail: _PageSlot<T>?, dropped: [_PageSlot<T>], now: Date
  ) {
    let map = map
    for page in dropped { map.deletePagedRecord(T.self, name: name, page: page.serial) }
    switch shape {
    case .appended:
      if let tail { savePageRecord(tail, next: book.pages.last?.serial, now: now) }
      savePageRecord(book.pages[book.pages.count - 1], next: nil, now: now)
    case .prepended, .replaced:
      if let first = book.pages.first {
        savePageRecord(first, next: book.pages.dropFirst().first?.serial, now: now)
      }
    case .unchanged:
      break
    }
    let paging = _StoredPaging(
      next: book.pages.first?.serial, hasOlder: book.cursors.hasOlder,
      older: book.cursors.older.map(_StoredCursor.of),
      newer: book.cursors.newer.map(_StoredCursor.of))
    map.savePagedRecord(
      T.self, name: name, page: nil, ids: [],
      _StoredAnswerInfo(fetchedAt: book.fetchedAt ?? now, validator: nil, paging: paging))
  }

  /// Lists the save of the record of `page`: the ids its slot holds, and the page after it.
  /// In a write.
  @inlinable
  func savePageRecord(_ page: _PageSlot<T>, next: UInt64?, now: Date) {
    map.savePagedRecord(
      T.self, name: name, page: page.serial, ids: page.node.value?.map { $0.id } ?? [],
      _StoredAnswerInfo(fetchedAt: now, validator: nil, paging: _StoredPaging(next: next)))
  }

  /// Saves again the records of the pages `serials` still in the list, when the entity type
  /// is persisted: an entity removed from the map left them, and a relaunch must not list it
  /// again should it be stored anew.
  ///
  /// - Complexity: O(the list's pages + the entities of those pages).
  @inlinable
  func saveShrunkPages(_ serials: Set<UInt64>, now: Date) {
    let map = map
    guard map.persistsTypes else { return }
    map.write {
      for (index, page) in book.pages.enumerated() where serials.contains(page.serial) {
        let next = index + 1 < book.pages.count ? book.pages[index + 1].serial : nil
        savePageRecord(page, next: next, now: now)
      }
    }
  }

  // MARK: Letting go

  /// Empties every slot of the list, releasing what only they held, and returns the handles
  /// on them, to be dropped after the write. The store keeps the records of a persisted list.
  @inlinable
  func release() -> [_PageSlot<T>] {
    let map = map
    return map.write {
      let pages = book.pages
      book.pages = []
      book.slots = []
      book.revision += 1
      for page in pages { map.releaseAnswer(page.node) }
      return pages
    }
  }

  /// A subscription that keeps an observer of the list: it holds the list's own slot, and
  /// calls `onCancel` when cancelled (see `_AnswerSlot.subscription(onCancel:)`).
  @inlinable
  func subscription(onCancel: @escaping @Sendable () -> Void) -> Subscription {
    let map = map
    let node = anchor._handle.node
    // NB: `.max`: no version is newer, so it is never delivered anything.
    let holder = _Subscriber<[T]?>(lastVersion: .max, onValue: nil)
    map.read { map.attach(holder, to: node) }
    return Subscription(core: map, node: node, subscriber: holder, onCancel: onCancel)
  }
}
