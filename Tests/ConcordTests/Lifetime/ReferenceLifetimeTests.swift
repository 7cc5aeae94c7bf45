import Foundation
import TestSupport
import Testing

@testable import Concord

/// A ring of members that only hold one another once their handles go.
private func ring(of size: Int, in map: IdentityMap) -> [EntityObserver<Member>] {
  let members = (0..<size).map { map.store(Member(id: $0, name: "\($0)", friends: [])) }
  for id in 0..<size {
    map.update(Member.self, id: id) { $0.friends = [members[(id + 1) % size].value] }
  }
  return members
}

/// A store that keeps what it is given in memory and streams each group of changes applied.
final class StreamingStore: PersistentStore, @unchecked Sendable {
  // NB: @unchecked: the store only calls its continuation, which is thread-safe, and the
  // coders, made per call.
  let applied: AsyncStream<[PersistentChange]>
  private let continuation: AsyncStream<[PersistentChange]>.Continuation

  init() {
    (applied, continuation) = AsyncStream.makeStream()
  }

  func encode<Value: Encodable>(_ value: Value) throws -> [UInt8] {
    Array(try JSONEncoder().encode(value))
  }

  func decode<Value: Decodable>(_ type: Value.Type, from bytes: [UInt8]) throws -> Value {
    try JSONDecoder().decode(type, from: Data(bytes))
  }

  func record(kind: String, key: [UInt8]) throws -> PersistentRecord? { nil }

  func aliasRecord(named name: String) throws -> PersistentRecord? { nil }

  func apply(_ changes: [PersistentChange]) throws { continuation.yield(changes) }
}

/// A persisted entity.
struct Memo: Identifiable, Codable, Sendable, Equatable {
  var id: Int
  var text: String
}

/// The engine refers to most objects unretained, each time relying on one of the rules listed
/// in `Lifetime/_Lifetime.swift`. Each test here leans on one rule the way a break of it would
/// touch freed memory: they pass as plain tests, and CI runs them under AddressSanitizer,
/// where a use after free stops the run.
@Suite("Unretained references outlive their targets")
struct ReferenceLifetimeTests {
  @Test func rule1TablesServeEveryPurgeAfterTheMapObjectIsGone() {
    // Purges reach each node's table unretained; only the map's holding itself keeps them.
    var map: IdentityMap? = IdentityMap()
    weak let core = map?._core
    var shelf = map?.store(
      Shelf(
        id: 1, owner: Author(id: 1, name: "o"),
        books: [Book(id: "a", title: "A", author: Author(id: 2, name: "b"))], pinned: nil,
        media: .none))
    var books = map?.query(Book.self)
    let collector = map?.collector(Author.self)
    map = nil
    #expect(shelf?.value.books.count == 1)
    shelf = nil
    #expect(books?.value.map(\.id) == ["a"], "the query still holds the book")
    books = nil
    #expect(collector?.drain().isEmpty == true, "releases are not changes")
    #expect(core != nil, "the collector holds the map")
    withExtendedLifetime(collector) {}
  }

  @Test func rule2ATableReleasesWhatOnlyItHeldWhenTheMapGoes() {
    // An alias anchors its entity without pinning the map: dropping the map object frees the
    // map, whose table deinit gives back its retain of the entity, once.
    var map: IdentityMap? = IdentityMap()
    weak let core = map?._core
    map?.store(User(id: 1, name: "me"), named: .currentUser)
    map?.store([User(id: 2, name: "a"), User(id: 3, name: "b")], named: .team)
    map = nil
    #expect(core == nil)
  }

  @Test func rule2RemovalsAndRollbacksMoveNodesInAndOutOfTheirTables() {
    let map = IdentityMap()
    let first = map.store(Author(id: 1, name: "a"))
    try? map.transaction { transaction in
      transaction.remove(Author.self, id: 1)
      var second: EntityObserver<Author>? = transaction.store(Author(id: 1, name: "b"))
      #expect(second?.value.name == "b")
      second = nil
      transaction.remove(Author.self, id: 1)
      throw Unwind()
    }
    #expect(first.value.name == "a" && !first.isRemoved)
    #expect(map.find(Author.self, id: 1)?.value.name == "a")
    map._core._checkInvariants()
  }

  @Test func rule3ANodeTakenOutByTheBodyOfItsOwnUpdateStaysUntilTheWriteEnds() {
    // The author has no handle: only its book holds it. The update borrows its node, which
    // the removal in the body drops into the graveyard.
    let map = IdentityMap()
    let book = map.store(Book(id: "a", title: "A", author: Author(id: 1, name: "a")))
    let found = map.update(Author.self, id: 1) { author in
      map.remove(Author.self, id: 1)
      author.name = "gone"
    }
    #expect(!found)
    #expect(book.isRemoved, "a book cannot exist without its author")
  }

  @Test func rule3RecordsOfNodesARolledBackBodyDroppedStayValid() {
    let map = IdentityMap()
    let shelf = map.store(
      Shelf(
        id: 1, owner: Author(id: 1, name: "o"),
        books: [Book(id: "a", title: "A", author: Author(id: 2, name: "b"))], pinned: nil,
        media: .none))
    try? map.transaction { transaction in
      transaction.remove(Author.self, id: 2)
      transaction.store(Book(id: "a", title: "A2", author: Author(id: 2, name: "c")))
      map.removeAll()
      throw Unwind()
    }
    #expect(shelf.value.books.map(\.author.name) == ["b"])
    map._core._checkInvariants()
  }

  @Test func rule4AChildRemovedUnderItsParentsIsUnlinkedFirst() {
    let map = IdentityMap()
    var book: EntityObserver<Book>? = map.store(
      Book(id: "a", title: "A", author: Author(id: 1, name: "a")))
    var batch: EntityObserver<[Book]>? = map.store([book!.value])
    var shelf: EntityObserver<Shelf>? = map.store(
      Shelf(
        id: 1, owner: Author(id: 2, name: "o"), books: [book!.value], pinned: book!.value,
        media: .book(book!.value)))
    map.remove(Author.self, id: 1)
    #expect(book?.isRemoved == true)
    #expect(shelf?.value.books.isEmpty == true && shelf?.value.pinned == nil)
    #expect(batch?.value.isEmpty == true)
    book = nil
    batch = nil
    map.update(Author.self, id: 2) { $0.name = "p" }
    shelf = nil
    #expect(map.count == 0)
  }

  @Test func rule4ADeadCycleUnlinksItselfAsItGoes() {
    let map = IdentityMap()
    var members: [EntityObserver<Member>]? = ring(of: 5, in: map)
    #expect(map.count == 5 && members?.count == 5)
    members = nil
    #expect(map.count == 0, "trial deletion frees the ring")
    var others: [EntityObserver<Member>]? = ring(of: 3, in: map)
    let kept = others?[1]
    others = nil
    #expect(map.count == 3, "one handle keeps the whole ring")
    withExtendedLifetime(kept) {}
  }

  @Test func rule5AParentGoneIsNoLongerReachedFromItsChild() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "a"))
    var books: [EntityObserver<Book>]? = (0..<8).map {
      map.store(Book(id: "\($0)", title: "\($0)", author: author.value))
    }
    let kept = books?[3]
    books = nil
    map.update(Author.self, id: 1) { $0.name = "b" }
    #expect(kept?.value.author.name == "b")
    #expect(map.count == 2)
  }

  @Test func rule6AHandleOnARemovedEntityOutlivesTheMapObject() {
    var map: IdentityMap? = IdentityMap()
    weak let core = map?._core
    var author = map?.store(Author(id: 1, name: "a"))
    map?.remove(Author.self, id: 1)
    map = nil
    #expect(author?.isRemoved == true && author?.value.name == "a")
    #expect(core != nil, "the adopted node pins the map")
    author = nil
    #expect(core == nil)
  }

  @Test func rule8AnIndexOutlivesTheQueriesLeavingItMidWrite() {
    let map = IdentityMap()
    var first: EntityObserver<[Book]>? = map.query(Book.self, where: \.author.id, equals: 1)
    var second: EntityObserver<[Book]>? = map.query(Book.self, where: \.author.id, equals: 2)
    let books = (0..<6).map {
      map.store(Book(id: "\($0)", title: "\($0)", author: Author(id: $0 % 2 + 1, name: "x")))
    }
    #expect(first?.value.count == 3 && second?.value.count == 3)
    map.transaction { transaction in
      first = nil
      second = nil
      transaction.remove(Book.self, id: "0")
      transaction.update(Book.self, id: "1") { $0.author = Author(id: 1, name: "y") }
    }
    var third: EntityObserver<[Book]>? = map.query(Book.self, where: \.author.id, equals: 1)
    #expect(third?.value.map(\.id) == ["1", "2", "4"])
    third = nil
    withExtendedLifetime(books) {}
    map._core._checkInvariants()
  }

  @Test func rule8AnIndexForgetsWhatIsReleased() {
    let map = IdentityMap()
    let query = map.query(Book.self, where: \.author.id, equals: 1)
    var other: EntityObserver<Book>? = map.store(
      Book(id: "b", title: "B", author: Author(id: 2, name: "x")))
    #expect(query.value.isEmpty && other?.value.id == "b")
    other = nil
    // The released book's node is freed: the index must not still file it.
    map.store(Book(id: "c", title: "C", author: Author(id: 2, name: "x")))
    map.update(Author.self, id: 2) { $0.name = "y" }
    #expect(query.value.isEmpty)
    map._core._checkInvariants()
  }

  @Test func rule9PersistedTypesOutliveTheMapForTheWriterStillWriting() async {
    // The writer starts a moment after a commit; the map object, and the map, go first. The
    // persisted type it then encodes refers to its persistence unretained.
    let store = StreamingStore()
    var map: IdentityMap? = IdentityMap(persistence: store)
    weak let core = map?._core
    map?.persist(Memo.self)
    _ = map?.store(Memo(id: 1, text: "a"))
    map = nil
    #expect(core == nil)
    var changes: [PersistentChange] = []
    for await applied in store.applied {
      changes = applied
      break
    }
    #expect(changes.count == 1)
  }
}
