// The README's quick start, line for line; `.ci/run` checks that every line of it is here.
// Its own test target, so that its models do not collide with the other tests' models.

import Concord
import Testing

struct Author: Identifiable, Sendable, Equatable {
  var id: Int
  var name: String
}

struct User: Identifiable, Sendable, Equatable {
  var id: Int
  var name: String
}

extension AliasKey where Value == User {
  static var currentUser: Self { .init("currentUser") }
}

@Test func quickStart() {
  let map = IdentityMap()

  // Store: the returned handle keeps the entity in the map.
  let author = map.store(Author(id: 1, name: "Ursula"), modifiedAt: 1)

  // Find: every holder sees the one freshest value.
  let found = map.find(Author.self, id: 1)  // found?.value.name == "Ursula"
  #expect(found?.value.name == "Ursula")

  // Observe: called on the writing thread, after the write commits, before it returns.
  let subscription = author.observe { print("author is now", $0.name) }
  map.update(Author.self, id: 1, modifiedAt: 2) { $0.name = "Ursula K. Le Guin" }
  #expect(found?.value.name == "Ursula K. Le Guin")

  // Stamps: a write no newer than the stored one is refused.
  map.store(Author(id: 1, name: "Stale"), modifiedAt: 1)  // author.value.name is unchanged
  #expect(author.value.name == "Ursula K. Le Guin")

  // Alias: a named slot that holds its entity, observable before it is set.
  let me = map.find(named: .currentUser)  // me.value == nil
  #expect(me.value == nil)
  map.store(User(id: 7, name: "Ged"), named: .currentUser)  // me.value?.name == "Ged"
  #expect(me.value?.name == "Ged")

  // Lifetime: what nobody holds goes away by itself.
  map.store(Author(id: 2, name: "Nobody holds me"))
  let gone = map.find(Author.self, id: 2)  // nil
  #expect(gone == nil)
  subscription.cancel()
}
