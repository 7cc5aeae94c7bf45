import TestSupport
import Testing

@testable import Concord

@Suite("Aggregates: relinking")
struct RelinkingTests {
  @Test func restoringWithDifferentChildrenUnlinksTheOldOnes() {
    let map = IdentityMap()
    let ged = map.store(Author.ged)
    let book = map.store(Book.make("a", by: .ged))
    map.store(Book.make("a", by: .ursula))
    let calls = Locked(0)
    let subscription = book.observe { _ in calls.increment() }
    map.store(Author(id: 2, name: "Sparrowhawk"))
    #expect(book.value.author == .ursula, "the old author's updates no longer reach the book")
    #expect(calls.value == 0)
    #expect(ged.value.name == "Sparrowhawk")
    subscription.cancel()
  }

  @Test func theParentStopsKeepingOldChildrenAlive() {
    let map = IdentityMap()
    let shelf = map.store(Shelf.make(1, books: [.make("a", by: .ged), .make("b", by: .ged)]))
    #expect(map.count == 5)
    map.store(Shelf.make(1, books: [.make("b", by: .ged)]))
    #expect(map.find(Book.self, id: "a") == nil)
    #expect(map.count == 4)
    map.store(Shelf.make(1, books: []))
    #expect(map.count == 2, "the shelf and its owner")
    #expect(map.find(Author.self, id: 2) == nil)
    withExtendedLifetime(shelf) {}
  }

  @Test func updateThatChangesChildrenRelinks() {
    let map = IdentityMap()
    let shelf = map.store(Shelf.make(1, books: [.make("a", by: .ged)]))
    map.update(Shelf.self, id: 1) { $0.books = [.make("b", by: .ursula)] }
    #expect(map.find(Book.self, id: "a") == nil)
    map.store(Author(id: 1, name: "Le Guin"))
    #expect(shelf.value.books[0].author.name == "Le Guin")
    #expect(shelf.value.owner.name == "Le Guin")
  }

  @Test func reorderingAChildCollectionKeepsEachSlotCorrect() {
    let map = IdentityMap()
    let shelf = map.store(Shelf.make(1, books: [.make("a", by: .ged), .make("b", by: .ursula)]))
    map.store(Shelf.make(1, books: [.make("b", by: .ursula), .make("a", by: .ged)]))
    map.update(Book.self, id: "a") { $0.title = "A!" }
    #expect(shelf.value.books.map(\.title) == ["Book b", "A!"])
  }

  @Test func aChildMovedToAnotherParentFollowsOnlyThatParent() {
    let map = IdentityMap()
    let first = map.store(Shelf.make(1, books: [.make("a", by: .ged)]))
    let second = map.store(Shelf.make(2, books: []))
    map.store(Shelf.make(1, books: []))
    map.store(Shelf.make(2, books: [.make("a", by: .ged)]))
    map.update(Book.self, id: "a") { $0.title = "moved" }
    #expect(first.value.books.isEmpty)
    #expect(second.value.books.map(\.title) == ["moved"])
  }

  @Test func restoringTheSameChildrenChangesNoLinks() {
    let map = IdentityMap()
    let shelf = map.store(Shelf.make(1, books: [.make("a", by: .ged)]))
    let before = shelf._handle.node.s.extras?.children.map { ObjectIdentifier($0.child) }
    map.store(Shelf.make(1, books: [.make("a", by: .ged, title: "retitled")]))
    let after = shelf._handle.node.s.extras?.children.map { ObjectIdentifier($0.child) }
    #expect(before == after)
    #expect(shelf.value.books[0].title == "retitled")
  }

  @Test func aChildKeepsItsOtherParentsWhenItsFirstGoes() {
    let map = IdentityMap()
    let book = Book.make("a", by: .ged)
    // NB: the first parent's back-reference is kept inline; dropping it moves the last one in.
    var first: EntityObserver<Shelf>? = map.store(Shelf.make(1, books: [book]))
    let second = map.store(Shelf.make(2, books: [book]))
    let third = map.store(Shelf.make(3, books: [book]))
    first = nil
    #expect(map.find(Shelf.self, id: 1) == nil)
    map.update(Book.self, id: "a") { $0.title = "renamed" }
    #expect(second.value.books[0].title == "renamed")
    #expect(third.value.books[0].title == "renamed")
    #expect(map.holders(of: Book.self, id: "a")?.parents.count == 2)
    withExtendedLifetime(first) {}
  }

  @Test(arguments: [1, 2, 3] as [UInt64])
  func backReferencesBehaveLikeAnArray(seed: UInt64) {
    var random = SeededGenerator(seed: seed)
    let table = _Table<Author>()
    let nodes = (0..<4).map { _ in _AnyNode(witness: table.witness, flags: []) }
    let child = _AnyNode(witness: table.witness, flags: [])
    var model: [(node: ObjectIdentifier, slot: Int32)] = []
    func same() -> Bool {
      child.parentCount == model.count && child.hasParents == !model.isEmpty
        && child.parentReferences.count == model.count
        && model.indices.allSatisfy {
          ObjectIdentifier(child.parent(at: $0).parent) == model[$0].node
            && child.parent(at: $0).slot == model[$0].slot
            && child.parentReferences[$0].slot == model[$0].slot
        }
    }
    for step in 0..<randomSteps(share: 20) {
      let node = nodes[Int.random(in: 0..<nodes.count, using: &random)]
      let slot = Int32(step)
      switch Int.random(in: 0..<3, using: &random) {
      case 0:
        child.appendParent(_ParentRef(parent: node, slot: slot))
        model.append((ObjectIdentifier(node), slot))
      case 1 where !model.isEmpty:
        let removed = child.removeLastParent()
        let expected = model.removeLast()
        #expect(ObjectIdentifier(removed.parent) == expected.node && removed.slot == expected.slot)
      case 2 where !model.isEmpty:
        let index = Int.random(in: 0..<model.count, using: &random)
        child.setParent(_ParentRef(parent: node, slot: slot), at: index)
        model[index] = (ObjectIdentifier(node), slot)
      default:
        continue
      }
      guard same() else {
        Issue.record(
          "seed \(seed), step \(step): \(child.parentCount) back-references, \(model.count) in the model"
        )
        return
      }
    }
    withExtendedLifetime((nodes, table)) {}
  }
}
