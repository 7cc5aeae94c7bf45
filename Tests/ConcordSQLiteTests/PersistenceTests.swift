import Concord
import ConcordSQLite
import ConcordTesting
import Foundation
import Testing

@Suite("Persistence: restarts, read-through, stamps, merging, removal and reset")
struct PersistenceTests {
  @Test("A page of issues survives a restart, nested users, labels and milestones included")
  func pageSurvivesRestart() throws {
    let directory = TemporaryDirectory()
    let page = (1...20).map { Issue.make($0, at: Double($0)) }
    do {
      let map = try launch(directory.database)
      _ = map.store(page)
      try map.flush()
    }
    let map = try launch(directory.database)
    #expect(map.count == 0)
    let issue = try #require(map.find(Issue.self, id: 4))
    #expect(issue.value == page[3])
    #expect(map.find(User.self, id: 7)?.value == .stub(7))
    #expect(map.find(Milestone.self, id: 5)?.value.title == "Wave 2")
    // The loaded issue is an aggregate like any other: a write to its user reaches it.
    map.store(User(id: 7, login: "ged", name: "Sparrowhawk", updatedAt: 50))
    #expect(issue.value.user.name == "Sparrowhawk")
  }

  @Test("A released entity is read back from the store, even before the writer reaches it")
  func releasedEntityIsReadBack() throws {
    let directory = TemporaryDirectory()
    let map = try launch(directory.database)
    _ = map.store(Note(id: "a", text: "first"))
    #expect(map.count == 0)
    #expect(map.find(Note.self, id: "a")?.value.text == "first")
    try map.flush()
    let store = try SQLiteStore(path: directory.database)
    #expect(try store.rowCount(kind: "Note") == 1)
  }

  @Test("After a restart, an older stamp is refused and a newer one applies")
  func stampsSurviveRestart() throws {
    let directory = TemporaryDirectory()
    do {
      let map = try launch(directory.database)
      _ = map.store(Issue.make(1, title: "New", at: 10))
      try map.flush()
    }
    let logger = RecordingLogger()
    let map = try launch(directory.database, logger: logger)
    _ = map.store(Issue.make(1, title: "Old", at: 5))
    #expect(map.find(Issue.self, id: 1)?.value.title == "New")
    #expect(logger.staleWrites.count == 1)
    _ = map.store(Issue.make(1, title: "Newer", at: 11))
    #expect(map.find(Issue.self, id: 1)?.value.title == "Newer")
  }

  @Test("A stub nested in a page merges into the full profile in the store")
  func stubMergesIntoStoredProfile() throws {
    let directory = TemporaryDirectory()
    do {
      let map = try launch(directory.database)
      _ = map.store(User(id: 7, login: "ged", name: "Sparrowhawk", updatedAt: 3))
      try map.flush()
    }
    let map = try launch(directory.database)
    let issue = map.store(Issue.make(1, at: 10))
    #expect(issue.value.user.name == "Sparrowhawk")
    try map.flush()
    let restarted = try launch(directory.database)
    #expect(restarted.find(User.self, id: 7)?.value.name == "Sparrowhawk")
  }

  @Test("Loading an aggregate keeps the in-memory values of its nested entities")
  func loadKeepsMemoryValues() throws {
    let directory = TemporaryDirectory()
    let map = try launch(directory.database)
    _ = map.store(Issue.make(1, at: 1))
    try map.flush()
    // The user changes in memory, held, while the issue is released.
    let user = map.store(User(id: 7, login: "ged-renamed"))
    let issue = try #require(map.find(Issue.self, id: 1))
    #expect(issue.value.user.login == "ged-renamed")
    #expect(user.value.login == "ged-renamed")
  }

  @Test("update and remove act on an entity that is only in the store")
  func updateAndRemoveReachTheStore() throws {
    let directory = TemporaryDirectory()
    do {
      let map = try launch(directory.database)
      _ = map.store([Note(id: "a", text: "a"), Note(id: "b", text: "b")])
      try map.flush()
    }
    let map = try launch(directory.database)
    #expect(map.update(Note.self, id: "a") { $0.text = "edited" })
    #expect(!map.update(Note.self, id: "zzz") { $0.text = "never" })
    map.remove(Note.self, id: "b")
    try map.flush()
    let restarted = try launch(directory.database)
    #expect(restarted.find(Note.self, id: "a")?.value.text == "edited")
    #expect(restarted.find(Note.self, id: "b") == nil)
  }

  @Test("Loading is not a write: collectors, subscribers and the log hear nothing")
  func loadingIsNotAWrite() throws {
    let directory = TemporaryDirectory()
    do {
      let map = try launch(directory.database)
      _ = map.store(Issue.make(1, at: 1))
      try map.flush()
    }
    let logger = RecordingLogger()
    let map = try launch(directory.database, logger: logger)
    let users = map.collector(User.self)
    let issues = map.collector(Issue.self)
    let query = map.query(Label.self)
    let issue = try #require(map.find(Issue.self, id: 1))
    #expect(users.drain().isEmpty)
    #expect(issues.drain().isEmpty)
    #expect(logger.events.isEmpty)
    // A live query of a type sees loaded entities: they are in memory.
    #expect(query.value.map(\.id) == [1, 3])
    // A write after the load is an update, not an insert.
    map.update(Issue.self, id: 1) { $0.title = "Renamed" }
    guard case .updated(let renamed)? = issues.drain().first else {
      Testing.Issue.record("expected an update")
      return
    }
    #expect(renamed.title == "Renamed")
    _ = issue
  }

  @Test("A loaded entity stays when the transaction that loaded it rolls back")
  func rollbackKeepsLoadedEntity() throws {
    struct Failure: Error {}
    let directory = TemporaryDirectory()
    do {
      let map = try launch(directory.database)
      _ = map.store(Note(id: "a", text: "stored"))
      try map.flush()
    }
    let map = try launch(directory.database)
    #expect(throws: Failure.self) {
      try map.transaction { transaction in
        transaction.update(Note.self, id: "a") { $0.text = "rolled back" }
        throw Failure()
      }
    }
    #expect(map.find(Note.self, id: "a")?.value.text == "stored")
  }

  @Test("removeAll removes persisted entities from the store, in memory or not")
  func removeAllEmptiesTheStore() throws {
    let directory = TemporaryDirectory()
    let map = try launch(directory.database)
    _ = map.store((1...5).map { Issue.make($0) })
    let held = map.store(Note(id: "held", text: "x"))
    map.removeAll()
    #expect(held.isRemoved)
    #expect(map.find(Issue.self, id: 1) == nil)
    try map.flush()
    #expect(try SQLiteStore(path: directory.database).rowCount() == 0)
  }

  @Test("reset empties memory and the store; open handles report isRemoved")
  func resetEmptiesEverything() throws {
    let directory = TemporaryDirectory()
    let map = try launch(directory.database)
    let issue = map.store(Issue.make(1))
    _ = map.store((2...9).map { Note(id: "\($0)", text: "") })
    try map.reset()
    #expect(issue.isRemoved)
    #expect(map.count == 0)
    #expect(map.find(Note.self, id: "2") == nil)
    #expect(try SQLiteStore(path: directory.database).rowCount() == 0)
    // The map goes on persisting after a reset.
    _ = map.store(Note(id: "after", text: "kept"))
    try map.flush()
    #expect(try launch(directory.database).find(Note.self, id: "after")?.value.text == "kept")
  }

  @Test("A row that no longer decodes is logged and skipped, never a crash")
  func undecodableRowIsSkipped() throws {
    struct NoteV2: Identifiable, Codable, Sendable {
      var id: String
      var text: String
      var priority: Int  // new, required: old rows lack it
    }
    let directory = TemporaryDirectory()
    do {
      let map = try launch(directory.database)
      _ = map.store(Note(id: "a", text: "old shape"))
      try map.flush()
    }
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger, persistence: try SQLiteStore(path: directory.database))
    map.persist(NoteV2.self, as: "Note")
    #expect(map.find(NoteV2.self, id: "a") == nil)
    let skipped = logger.events.contains {
      $0.kind == .undecodableRecord && $0.entity?.id == "a"
    }
    #expect(skipped)
    // Storing the new shape replaces the row.
    let stored = map.store(NoteV2(id: "a", text: "new shape", priority: 1))
    #expect(stored.value.priority == 1)
  }

  @Test("Types that are not persisted stay in memory only")
  func unpersistedTypesStayInMemory() throws {
    struct Draft: Identifiable, Codable, Sendable { var id: Int }
    let directory = TemporaryDirectory()
    let map = try launch(directory.database)
    _ = map.store(Draft(id: 1))
    #expect(map.find(Draft.self, id: 1) == nil)
    try map.flush()
    #expect(try SQLiteStore(path: directory.database).rowCount() == 0)
  }
}
