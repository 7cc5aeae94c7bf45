import ConcordTesting
import Testing

@testable import Concord

@Suite("Aggregates: freshness of nested entities")
struct FreshnessTests {
  @Test func anAggregateStampsEachChildWithItsStamp() {
    let map = IdentityMap()
    let book = map.store(Book.make("a", by: .ged), modifiedAt: 5)
    map.store(Author(id: 2, name: "older"), modifiedAt: 4)
    #expect(book.value.author == .ged, "the author was stored with stamp 5")
    map.store(Author(id: 2, name: "newer"), modifiedAt: 6)
    #expect(book.value.author.name == "newer")
  }

  @Test func aChildWithANewerStoredStampKeepsItsValueAndTheAggregateShowsIt() {
    let map = IdentityMap()
    let author = map.store(Author(id: 2, name: "fresh"), modifiedAt: 10)
    let book = map.store(Book.make("a", by: Author(id: 2, name: "stale copy")), modifiedAt: 5)
    #expect(author.value.name == "fresh")
    #expect(book.value.author.name == "fresh")
    #expect(book.value.title == "Book a", "the book itself is newer than anything stored")
  }

  @Test func aStaleAggregateIsRefusedButItsNewerChildrenApply() {
    let map = IdentityMap()
    let book = map.store(Book.make("a", by: .ged, title: "current"), modifiedAt: 10)
    let other = map.store(Author(id: 3, name: "Tenar"), modifiedAt: 1)
    map.store(
      Book(id: "a", title: "stale", author: Author(id: 3, name: "Tenar, newer")), modifiedAt: 5)
    #expect(book.value.title == "current")
    #expect(book.value.author == .ged, "the refused book keeps its links")
    #expect(other.value.name == "Tenar, newer", "stamps are compared per entity")
  }

  @Test func staleNestedWritesAreLogged() {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    let author = map.store(Author(id: 2, name: "fresh"), modifiedAt: 10)
    let book = map.store(Book.make("a", by: .ged), modifiedAt: 5)
    #expect(
      logger.events.contains(
        .discardedStale(
          .entity(EntityReference(Author.self, id: 2)), storedStamp: 10, incomingStamp: 5)))
    withExtendedLifetime((author, book)) {}
  }

  @Test func aTransactionOfAggregatesShowsTheFreshestChild() {
    let map = IdentityMap()
    let shelf = map.transaction { transaction in
      transaction.store(Author(id: 2, name: "fresh"), modifiedAt: 10)
      return transaction.store(Shelf.make(1, books: [.make("a", by: .ged)]), modifiedAt: 3)
    }
    #expect(shelf.value.books[0].author.name == "fresh")
  }
}
