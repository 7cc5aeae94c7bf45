import Concord
import ConcordSQLite
import Foundation
import Testing

@Suite("Persistence: aliases of persisted types survive restarts")
struct PersistentAliasTests {
  static let me = AliasKey<User>("me")
  static let inbox = AliasKey<[Issue]>("inbox")

  @Test("The signed-in user survives a restart, with its stamp")
  func signedInUserSurvives() throws {
    let directory = TemporaryDirectory()
    do {
      let map = try launch(directory.database)
      map.store(User(id: 7, login: "ged", name: "Sparrowhawk", updatedAt: 20), named: Self.me)
      try map.flush()
    }
    let map = try launch(directory.database)
    let me = map.find(named: Self.me)
    #expect(me.value?.name == "Sparrowhawk")
    // The alias names the entity: a write to the user reaches it.
    map.store(User(id: 7, login: "ged", name: "Ged", updatedAt: 30))
    #expect(me.value?.name == "Ged")
    // Its stamp came back too: an older write to the alias is refused.
    map.store(User(id: 8, login: "tenar", updatedAt: 10), named: Self.me, modifiedAt: 10)
    #expect(me.value?.id == 7)
  }

  @Test("A collection alias of aggregates comes back in order, nested entities included")
  func inboxSurvives() throws {
    let directory = TemporaryDirectory()
    do {
      let map = try launch(directory.database)
      map.store([Issue.make(3), Issue.make(1), Issue.make(2)], named: Self.inbox)
      try map.flush()
    }
    let map = try launch(directory.database)
    let inbox = map.find(named: Self.inbox)
    #expect(inbox.value?.map(\.id) == [3, 1, 2])
    #expect(inbox.value?.first?.labels.map(\.name) == ["bug", "area 0"])
    // An issue removed since is dropped from the alias when it comes back.
    map.remove(Issue.self, id: 1)
    try map.flush()
    let restarted = try launch(directory.database)
    #expect(restarted.find(named: Self.inbox).value?.map(\.id) == [3, 2])
  }

  @Test("removeAlias, removeAll and reset reach the store, in memory or not")
  func aliasRemovalReachesTheStore() throws {
    let directory = TemporaryDirectory()
    do {
      let map = try launch(directory.database)
      map.store(User.stub(1), named: Self.me)
      try map.flush()
    }
    do {
      let map = try launch(directory.database)
      map.removeAlias(named: Self.me)
      try map.flush()
    }
    #expect(try launch(directory.database).find(named: Self.me).value == nil)
    do {
      let map = try launch(directory.database)
      map.store(User.stub(2), named: Self.me)
      try map.flush()
    }
    do {
      let map = try launch(directory.database)
      map.removeAll()
      try map.flush()
    }
    #expect(try launch(directory.database).find(named: Self.me).value == nil)
  }

  @Test("update(named:) acts on an alias that is only in the store")
  func updateNamedLoads() throws {
    let directory = TemporaryDirectory()
    do {
      let map = try launch(directory.database)
      map.store(User.stub(1), named: Self.me)
      try map.flush()
    }
    let map = try launch(directory.database)
    #expect(map.update(named: Self.me) { $0.name = "Renamed" })
    try map.flush()
    #expect(try launch(directory.database).find(named: Self.me).value?.name == "Renamed")
  }
}
