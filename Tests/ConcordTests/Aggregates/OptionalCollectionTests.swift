import Testing

@testable import Concord

@Suite("Aggregates: optional and non-array collections")
struct OptionalCollectionTests {
  static let library = Library(
    id: 1, archive: [.ursula], staff: [User(id: 1, name: "Ged")],
    guests: [User(id: 2, name: "Tenar")])

  @Test func optionalAndContiguousCollectionsAreDecomposed() {
    let map = IdentityMap()
    let library = map.store(Self.library)
    #expect(map.count == 4)
    map.store(Author(id: 1, name: "Le Guin"))
    map.update(User.self, id: 1) { $0.name = "Sparrowhawk" }
    map.update(User.self, id: 2) { $0.name = "Arha" }
    #expect(library.value.archive?.first?.name == "Le Guin")
    #expect(library.value.staff.first?.name == "Sparrowhawk")
    #expect(library.value.guests?.first?.name == "Arha")
  }

  @Test func aNilCollectionHoldsNothing() {
    let map = IdentityMap()
    let library = map.store(Library(id: 1, archive: nil, staff: [], guests: nil))
    #expect(map.count == 1)
    map.update(Library.self, id: 1) { $0.guests = [User(id: 2, name: "Tenar")] }
    #expect(map.count == 2)
    map.update(Library.self, id: 1) { $0.guests = nil }
    #expect(map.count == 1)
    withExtendedLifetime(library) {}
  }

  @Test func removingAnElementDropsItButKeepsTheCollection() {
    let map = IdentityMap()
    let library = map.store(Self.library)
    map.remove(Author.self, id: 1)
    map.remove(User.self, id: 1)
    map.remove(User.self, id: 2)
    #expect(library.value.archive == [])
    #expect(library.value.staff.isEmpty)
    #expect(library.value.guests == [])
    #expect(!library.isRemoved)
  }
}
