import TestSupport
import Testing

@testable import Concord

@Suite("Aggregates: fan-out")
struct FanOutTests {
  @Test func oneAuthorSharedByAThousandBooks() {
    let map = IdentityMap()
    let books = (0..<1_000).map { map.store(Book.make("\($0)", by: .ged)) }
    let calls = Locked(0)
    let subscriptions = books.map { $0.observe { _ in calls.increment() } }
    #expect(map.count == 1_001)
    map.update(Author.self, id: 2) { $0.name = "Sparrowhawk" }
    #expect(books.allSatisfy { $0.value.author.name == "Sparrowhawk" })
    #expect(calls.value == 1_000, "each book is told exactly once")
    withExtendedLifetime(subscriptions) {}
  }

  @Test func oneAuthorSharedByAThousandShelvesThroughTheirBooks() {
    let map = IdentityMap()
    let shelves = map.store(
      (0..<1_000).map { Shelf.make($0, owner: .ursula, books: [.make("b\($0)", by: .ged)]) })
    map.store(Author(id: 2, name: "Sparrowhawk"))
    #expect(shelves.value.allSatisfy { $0.books[0].author.name == "Sparrowhawk" })
  }

  /// A parent a fan-out patches, with nobody to tell and no transaction to roll back, gets no
  /// journal record. Seeded steps mix plain updates, transactions that commit or throw, writes
  /// nested in an `update` body that subscribe halfway, and subscriptions opened and cancelled,
  /// over books and shelves sharing three authors. After every step each book and shelf shows
  /// the model's authors, and each subscriber was last told the book's current value, never
  /// twice the same value in a row.
  @Test("Fan-out to unobserved parents skips their journal records", arguments: [1, 2, 3])
  func fanOutWithoutRecords(seed: UInt64) throws {
    struct Rollback: Error {}
    var random = SeededGenerator(seed: seed)
    let map = IdentityMap()
    var names = [1: "a", 2: "b", 3: "c"]
    let books = (0..<30).map { index in
      map.store(Book.make("\(index)", by: Author(id: index % 3 + 1, name: names[index % 3 + 1]!)))
    }
    let shelves = (0..<5).map { index in
      map.store(
        Shelf.make(
          index, owner: Author(id: 1, name: names[1]!),
          books: (0..<6).map { books[index * 6 + $0].value }))
    }
    var told: [Int: (subscription: Subscription, values: Locked<[Book]>)] = [:]
    func subscribe(_ index: Int) {
      let values = Locked<[Book]>([])
      let subscription = books[index].observe(includingCurrentValue: true) { book in
        values.withValue { $0.append(book) }
      }
      told[index] = (subscription, values)
    }
    for step in 0..<max(300, randomSteps(share: 200)) {
      let author = Int.random(in: 1...3, using: &random)
      let name = "n\(step)-\(Int.random(in: 0..<3, using: &random))"
      switch Int.random(in: 0..<5, using: &random) {
      case 0:
        map.update(Author.self, id: author) { $0.name = name }
        names[author] = name
      case 1:
        let other = Int.random(in: 1...3, using: &random)
        let throwing = Bool.random(using: &random)
        do {
          try map.transaction { transaction in
            transaction.update(Author.self, id: author) { $0.name = name }
            transaction.store(Author(id: other, name: name + "+"))
            if throwing { throw Rollback() }
          }
          names[author] = name
          names[other] = name + "+"
        } catch {}
      case 2:
        let other = Int.random(in: 1...3, using: &random)
        let book = Int.random(in: 0..<books.count, using: &random)
        map.update(Author.self, id: author) { stored in
          stored.name = name
          map.store(Author(id: other, name: name + "*"))
          if told[book] == nil { subscribe(book) }
          map.store(Author(id: other, name: name + "**"))
        }
        // NB: the body's own value is written last, over the nested stores.
        names[other] = name + "**"
        names[author] = name
      case 3:
        subscribe(Int.random(in: 0..<books.count, using: &random))
      default:
        if let index = told.keys.randomElement(using: &random) {
          told.removeValue(forKey: index)?.subscription.cancel()
        }
      }
      for book in books {
        try #require(book.value.author.name == names[book.value.author.id], "step \(step)")
      }
      for shelf in shelves {
        for book in shelf.value.books {
          try #require(book.author.name == names[book.author.id], "step \(step)")
        }
      }
      for (index, (_, values)) in told {
        let values = values.value
        try #require(values.last == books[index].value, "step \(step): book \(index)")
        try #require(
          zip(values, values.dropFirst()).allSatisfy { $0 != $1 },
          "step \(step): book \(index) told the same value twice")
      }
    }
  }
}
