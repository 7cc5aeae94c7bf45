// The README's "In twenty lines" example, line for line; `.ci/check-readme` checks that every
// line of it is in this target. Its own test target, so that its models do not collide with the
// other tests' models.

import Concord
import Testing

struct Author: Identifiable, Sendable, Equatable {
  var id: Int
  var name: String
}

@Test func quickStart() {
  let map = IdentityMap()

  // Store: the handle keeps the entity in the map; every holder sees the one freshest value.
  let author = map.store(Author(id: 1, name: "Ursula"), modifiedAt: 1)
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
  let featured = map.find(named: AliasKey<Author>("featured"))  // featured.value == nil
  #expect(featured.value == nil)
  map.store(Author(id: 2, name: "Octavia"), named: AliasKey("featured"))
  #expect(featured.value?.name == "Octavia")

  // Lifetime: what nobody holds goes away by itself.
  map.store(Author(id: 3, name: "Nobody holds me"))
  let gone = map.find(Author.self, id: 3)  // nil
  #expect(gone == nil)
  subscription.cancel()
}
