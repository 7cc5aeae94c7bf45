import TestSupport
import Testing

@testable import Concord

@Suite("Aggregates: cycles and repeated occurrences")
struct CycleTests {
  @Test func aCycleByIdentityTerminatesAndEachSideShowsTheOther() {
    let map = IdentityMap()
    let stub = Writer(id: 1, name: "Ursula, inner copy", works: [])
    let writer = map.store(
      Writer(id: 1, name: "Ursula", works: [Work(id: 10, title: "Earthsea", writer: stub)]))
    let work = map.find(Work.self, id: 10)!
    #expect(writer.value.name == "Ursula", "the occurrence closest to the root wins")
    #expect(work.value.writer?.name == "Ursula")
    #expect(writer.value.works[0].writer?.name == "Ursula")
    #expect(map.count == 2)
  }

  @Test func updatesTravelAroundACycleOncePerWrite() {
    let map = IdentityMap()
    let writer = map.store(Writer(id: 1, name: "A", works: [Work(id: 10, title: "W", writer: nil)]))
    // Close the cycle with the writer's current value, so that the nested copy keeps its works.
    map.update(Work.self, id: 10) { $0.writer = writer.value }
    let work = map.find(Work.self, id: 10)!
    #expect(work.value.writer?.works.map(\.id) == [10])
    let writerCalls = Locked(0)
    let workCalls = Locked(0)
    let subscriptions = [
      writer.observe { _ in writerCalls.increment() }, work.observe { _ in workCalls.increment() },
    ]
    map.update(Work.self, id: 10) { $0.title = "W2" }
    #expect(writer.value.works.first?.title == "W2")
    #expect(writerCalls.value == 1)
    #expect(workCalls.value == 1)
    withExtendedLifetime(subscriptions) {}
  }

  @Test func aSelfReferencingTypeWorks() {
    let map = IdentityMap()
    let tenar = Member(id: 2, name: "Tenar", friends: [])
    let ged = map.store(
      Member(id: 1, name: "Ged", friends: [tenar, Member(id: 3, name: "Ogion", friends: [])]))
    map.update(Member.self, id: 2) { $0.name = "Arha" }
    #expect(ged.value.friends.map(\.name) == ["Arha", "Ogion"])
    #expect(map.count == 3)
  }

  @Test func mutualFriendsTerminate() {
    let map = IdentityMap()
    let tenarStub = Member(
      id: 2, name: "Tenar", friends: [Member(id: 1, name: "Ged stub", friends: [])])
    let ged = map.store(Member(id: 1, name: "Ged", friends: [tenarStub]))
    let tenar = map.find(Member.self, id: 2)!
    #expect(ged.value.name == "Ged")
    #expect(tenar.value.friends.first?.name == "Ged")
    map.update(Member.self, id: 1) { $0.name = "Sparrowhawk" }
    #expect(tenar.value.friends.first?.name == "Sparrowhawk")
  }

  @Test func aMemberWhoIsHisOwnFriend() {
    let map = IdentityMap()
    let narcissus = map.store(
      Member(id: 1, name: "N", friends: [Member(id: 1, name: "echo", friends: [])]))
    #expect(narcissus.value.name == "N")
    #expect(narcissus.value.friends.first?.name == "N")
    map.update(Member.self, id: 1) { $0.name = "N2" }
    #expect(narcissus.value.friends.first?.name == "N2")
  }

  /// Members 0 → 1 → 2 → 3 → 4 → 0, each held by `handles`.
  static func makeRing(_ map: IdentityMap) -> [EntityObserver<Member>] {
    let handles = (0..<5).map { map.store(Member(id: $0, name: "\($0)", friends: [])) }
    for id in 0..<5 {
      // The friend's current value, not a stub: a nested copy is the truth for that entity.
      map.update(Member.self, id: id) { $0.friends = [handles[(id + 1) % 5].value] }
    }
    return handles
  }

  @Test func aNestedStubOverwritesTheStoredEntity() {
    let map = IdentityMap()
    let tenar = map.store(
      Member(id: 2, name: "Tenar", friends: [Member(id: 3, name: "Ogion", friends: [])]))
    map.store(Member(id: 1, name: "Ged", friends: [Member(id: 2, name: "Tenar", friends: [])]))
    #expect(tenar.value.friends.isEmpty, "the nested copy said Tenar has no friends")
  }

  @Test func releasingACycleReleasesEveryMember() {
    let map = IdentityMap()
    do {
      let handles = Self.makeRing(map)
      #expect(map.count == 5)
      #expect(handles[4].value.friends[0].name == "0")
      #expect(handles[0].value.friends[0].friends[0].name == "2")
    }
    #expect(map.count == 0, "a ring only its members hold is freed")
    #expect(map._core.registry.table(for: Member.self).isEmpty)
  }

  @Test func aCycleHeldFromOutsideStays() {
    let map = IdentityMap()
    let ged: EntityObserver<Member>
    do {
      let tenarStub = Member(
        id: 2, name: "Tenar", friends: [Member(id: 1, name: "Ged", friends: [])])
      ged = map.store(Member(id: 1, name: "Ged", friends: [tenarStub]))
      let tenar = map.find(Member.self, id: 2)
      #expect(tenar != nil)
    }
    #expect(map.count == 2, "Ged is held, and holds Tenar")
    map.update(Member.self, id: 1) { $0.friends = [] }
    #expect(map.count == 1)
    withExtendedLifetime(ged) {}
  }

  @Test func theOccurrenceClosestToTheRootWins() {
    let map = IdentityMap()
    let shelf = map.store(
      Shelf.make(
        1, owner: Author(id: 2, name: "owner copy"),
        books: [.make("a", by: Author(id: 2, name: "deeper copy"))]))
    #expect(map.find(Author.self, id: 2)?.value.name == "owner copy")
    #expect(shelf.value.books[0].author.name == "owner copy", "every occurrence shows the winner")
  }

  @Test func amongOccurrencesAtTheSameDepthTheLastWins() {
    let map = IdentityMap()
    let shelf = map.store(
      Shelf.make(
        1,
        books: [
          .make("a", by: Author(id: 2, name: "first")), .make("b", by: Author(id: 2, name: "last")),
        ]))
    #expect(map.find(Author.self, id: 2)?.value.name == "last")
    #expect(shelf.value.books.map(\.author.name) == ["last", "last"])
  }

  @Test func aLosingOccurrenceIsNotExpanded() {
    let map = IdentityMap()
    // The shelf's own book "a" (depth 1) wins over the pinned copy's...
    // no: same depth, so the last one, the pinned copy, wins and only its author is stored.
    let shelf = map.store(
      Shelf.make(
        1, owner: .ursula, books: [.make("a", by: Author(id: 3, name: "only in the loser"))],
        pinned: .make("a", by: .ged)))
    #expect(map.find(Author.self, id: 3) == nil, "children of a losing occurrence are not stored")
    #expect(shelf.value.books[0].author == .ged)
  }
}
