import TestSupport
import Testing

@testable import Concord

@Suite("Aggregates: thread safety")
struct AggregateConcurrencyTests {
  static let tasks = 8
  static let rounds = 300

  @Test func concurrentWritesThroughSharedChildrenStayConsistent() async {
    let map = IdentityMap()
    let authors = (0..<4).map { map.store(Author(id: $0, name: "0")) }
    let shelves = map.store(
      (0..<20).map { shelf in
        Shelf.make(
          shelf, owner: Author(id: shelf % 4, name: "0"),
          books: (0..<3).map { .make("\(shelf)-\($0)", by: Author(id: $0 % 4, name: "0")) })
      })
    let deliveries = Locked(0)
    let subscription = shelves.observe { _ in deliveries.increment() }

    await withTaskGroup(of: Void.self) { group in
      for task in 0..<Self.tasks {
        group.addTask {
          var random = SeededGenerator(seed: UInt64(task) + 99)
          for round in 0..<Self.rounds {
            let shelf = Int.random(in: 0..<20, using: &random)
            switch Int.random(in: 0..<6, using: &random) {
            case 0:
              map.update(Author.self, id: Int.random(in: 0..<4, using: &random)) {
                $0.name = "\(round)"
              }
            case 1:
              map.update(Shelf.self, id: shelf) { $0.books.shuffle(using: &random) }
            case 2:
              let book = map.find(Book.self, id: "\(shelf)-0")
              _ = book?.value
            case 3:
              let observed = map.find(Shelf.self, id: shelf)?.observe { _ in }
              observed?.cancel()
            case 4:
              map.transaction { transaction in
                transaction.update(Book.self, id: "\(shelf)-1") { $0.title = "t\(round)" }
                transaction.update(Author.self, id: shelf % 4) { $0.name = "x\(round)" }
              }
            default:
              map.store(
                Book.make(
                  "\(shelf)-2",
                  by: Author(id: Int.random(in: 0..<4, using: &random), name: "y\(round)")))
            }
          }
        }
      }
    }

    // Every aggregate shows exactly the stored value of each entity it holds.
    for shelf in shelves.value {
      #expect(shelf.owner == authors[shelf.owner.id].value)
      for book in shelf.books {
        let stored = map.find(Book.self, id: book.id)?.value
        #expect(book == stored)
        #expect(book.author == map.find(Author.self, id: book.author.id)?.value)
      }
    }
    #expect(map.count == 4 + 20 + 60)
    #expect(deliveries.value > 0)
    subscription.cancel()
  }
}
