import Testing

@testable import Concord

@Suite("Aggregates: enum payloads")
struct EnumPayloadTests {
  @Test func aPayloadIsDecomposedThroughItsComputedProperty() {
    let map = IdentityMap()
    let shelf = map.store(Shelf.make(1, media: .book(.make("m", by: .ged))))
    #expect(map.find(Book.self, id: "m") != nil)
    map.update(Book.self, id: "m") { $0.title = "renamed" }
    #expect(shelf.value.media == .book(.make("m", by: .ged, title: "renamed")))
  }

  @Test func aCaseWithoutPayloadHoldsNothing() {
    let map = IdentityMap()
    let shelf = map.store(Shelf.make(1, media: .none))
    #expect(map.count == 2)
    withExtendedLifetime(shelf) {}
  }

  @Test func switchingTheCaseRelinks() {
    let map = IdentityMap()
    let shelf = map.store(Shelf.make(1, media: .book(.make("m", by: .ged))))
    map.update(Shelf.self, id: 1) { $0.media = .none }
    #expect(map.find(Book.self, id: "m") == nil)
    #expect(shelf.value.media == .none)
  }

  @Test func removingThePayloadGoesThroughTheSetter() {
    let map = IdentityMap()
    let shelf = map.store(Shelf.make(1, media: .book(.make("m", by: .ged))))
    map.remove(Book.self, id: "m")
    #expect(shelf.value.media == .none, "the setter maps nil to .none")
    #expect(!shelf.isRemoved)
  }
}
