import ConcordTesting
import Foundation
import TestSupport
import Testing

@testable import Concord

// What the map keeps for the store until it is applied, and a seeded model-based test of it: the
// changes committed and not yet written, the ones a failing store refused, and values that do
// not encode. The store here is in memory; it fails every write while told to, and refuses to
// encode a user whose login is "unencodable". Handles are dropped often, so that most finds
// read through those unapplied changes rather than memory. After every step each id's `find`
// (and the alias's) must agree with the model, whatever the writer has done meanwhile; after a
// restart on the same store, so must a fresh map. The engine checks its invariants after every
// write in the CONCORD_INTERNAL_CHECKS run.

@Suite("Persistence: changes waiting for the store, under failures, bad values and deletions")
struct PersistenceUnappliedTests {
  static let me = AliasKey<User>("me")

  @Test(
    "Random writes agree with the model while the store fails and values do not encode",
    arguments: [1, 2, 3])
  func randomRun(seed: UInt64) throws {
    let store = MemoryStore()
    var generator = SeededGenerator(seed: seed &* 0x2545_F491)
    var map = launch(store)
    var model = PersistenceModelTests.Model()
    var me: Int?
    var held: [Any] = []
    var clock = 0.0
    func stamp() -> Double? { PersistenceModelTests.Model.randomStamp(&clock, using: &generator) }
    func removeUser(_ id: Int) {
      model.removeUser(id)
      if me == id { me = nil }
    }
    let steps = max(400, randomSteps(share: 50))
    for step in 0..<steps {
      let userID = Int.random(in: 0..<6, using: &generator)
      let issueID = Int.random(in: 0..<8, using: &generator)
      switch Int.random(in: 0..<100, using: &generator) {
      case 0..<22:
        let login = Int.random(in: 0..<5, using: &generator) == 0 ? "unencodable" : "login\(step)"
        let name = Bool.random(using: &generator) ? "name\(step)" : nil
        let user = User(id: userID, login: login, name: name, updatedAt: stamp())
        let handle = map.store(user)
        if Bool.random(using: &generator) { held.append(handle) }
        model.write(user)
      case 22..<40:
        let issueStamp = stamp() ?? clock
        let issue = PersistenceModelTests.Model.randomIssue(
          issueID, userID: userID, step: step, stamp: issueStamp, using: &generator)
        let handle = map.store(issue)
        if Bool.random(using: &generator) { held.append(handle) }
        model.write(issue)
      case 40..<46:
        // Two users in one transaction: they reach the store together.
        let other = (userID + 1) % 6
        map.transaction { _ in
          map.update(User.self, id: userID) { $0.name = "both\(step)" }
          map.update(User.self, id: other) { $0.name = "both\(step)" }
        }
        model.users[userID]?.name = "both\(step)"
        model.users[other]?.name = "both\(step)"
      case 46..<52:
        // NB: unstamped: an alias refuses a value older than the one it names.
        let user = User(id: userID, login: "me\(step)", name: nil, updatedAt: nil)
        map.store(user, named: Self.me)
        model.write(user)
        me = userID
      case 52..<55:
        map.removeAlias(named: Self.me)
        me = nil
      case 55..<60:
        map.remove(User.self, id: userID)
        removeUser(userID)
      case 60..<64:
        map.remove(Issue.self, id: issueID)
        model.removeIssue(issueID)
      case 64..<78:
        // Dropped: from now on, finds read these entities through what is unapplied.
        if Bool.random(using: &generator) {
          held = []
        } else if !held.isEmpty {
          held.remove(at: Int.random(in: 0..<held.count, using: &generator))
        }
      case 78..<85:
        store.isFailing.withValue { $0.toggle() }
      case 85..<90:
        if store.isFailing.value {
          // It throws if anything was left to write, or did not encode.
          _ = try? map.flush()
        } else {
          // It may throw what failed before, once; then nothing is left to fail.
          _ = try? map.flush()
          #expect(throws: Never.self, "step \(step)") { try map.flush() }
          #expect(store.userLogins.allSatisfy { $0 != "unencodable" }, "step \(step)")
        }
      case 90..<92:
        // Then, in the same transaction, a write: it comes after the deletion in the store too.
        let user = User(id: userID, login: "after\(step)", name: nil, updatedAt: stamp())
        let writes = Bool.random(using: &generator)
        map.transaction { _ in
          map.removeAll()
          if writes { map.store(user) }
        }
        model = PersistenceModelTests.Model()
        if writes { model.write(user) }
        me = nil
      case 92..<94:
        if store.isFailing.value {
          // The wipe itself is left to write.
          #expect(throws: (any Error).self, "step \(step)") { try map.reset() }
        } else {
          _ = try? map.reset()
        }
        model = PersistenceModelTests.Model()
        me = nil
      case 94..<97:
        // A restart: every value must be written first, so none may be unencodable.
        store.isFailing.withValue { $0 = false }
        for (id, user) in model.users where user.login == "unencodable" {
          clock += 1
          let fixed = User(id: id, login: "fixed\(step)", name: user.name, updatedAt: clock)
          map.store(fixed)
          model.write(fixed)
        }
        _ = try? map.flush()
        try map.flush()
        held = []
        map = launch(store)
      default:
        // A read inside a transaction, sometimes after the transaction removed the entity.
        let removes = Bool.random(using: &generator)
        let found = map.transaction { _ in
          if removes { map.remove(User.self, id: userID) }
          return map.find(User.self, id: userID)?.value
        }
        if removes { removeUser(userID) }
        #expect(found == model.users[userID], "step \(step): user \(userID) in a transaction")
      }
      model.check(map, "step \(step)")
      #expect(
        map.find(named: Self.me).value == me.flatMap { model.users[$0] }, "step \(step): alias")
    }
  }

  @Test("A write after removeAll in the same transaction does not merge into the deleted row")
  func writeAfterRemoveAllInATransaction() throws {
    let store = MemoryStore()
    let map = launch(store)
    map.store(User(id: 1, login: "ged", name: "Sparrowhawk", updatedAt: 10))
    try map.flush()
    map.transaction { _ in
      map.removeAll()
      map.store(User(id: 1, login: "ged", name: nil, updatedAt: 5))
    }
    // Deleted first: nothing to merge into, and no newer stamp to refuse it.
    let expected = User(id: 1, login: "ged", name: nil, updatedAt: 5)
    #expect(map.find(User.self, id: 1)?.value == expected)
    try map.flush()
    #expect(launch(store).find(User.self, id: 1)?.value == expected)
  }

  @Test("A value that does not encode stays readable, and goes with removeAll")
  func unencodableValueGoesWithRemoveAll() throws {
    let store = MemoryStore()
    let map = launch(store)
    map.store(User(id: 1, login: "unencodable", name: "Ged"))
    #expect(throws: MemoryStore.Unencodable.self) { try map.flush() }
    // Not in memory: read from what the writer could not write.
    #expect(map.find(User.self, id: 1)?.value.name == "Ged")
    map.removeAll()
    try map.flush()
    #expect(map.find(User.self, id: 1) == nil)
    #expect(store.rows.value.isEmpty)
  }

  @Test("A removal inside a transaction counts for what the transaction reads next")
  func removalCountsForLaterReads() throws {
    let store = MemoryStore()
    let map = launch(store)
    map.store(User(id: 1, login: "ged", name: "Sparrowhawk", updatedAt: 10))
    map.store(User(id: 2, login: "tenar", updatedAt: 10))
    try map.flush()
    let found = map.transaction { _ in
      map.remove(User.self, id: 1)
      return map.find(User.self, id: 1)
    }
    #expect(found == nil)
    #expect(map.find(User.self, id: 1) == nil)
    // Stored again after its removal: its tombstone refuses an older write at once, and a
    // newer one has nothing to merge into.
    map.transaction { _ in
      map.remove(User.self, id: 2)
      #expect(map.store(User(id: 2, login: "tenar", name: "T", updatedAt: 5)).isRemoved)
      map.store(User(id: 2, login: "tenar", name: nil, updatedAt: 15))
    }
    #expect(map.find(User.self, id: 2)?.value == User(id: 2, login: "tenar", updatedAt: 15))
    // A rolled-back removal leaves the entity where it was.
    map.store(User(id: 3, login: "ogion", updatedAt: 10))
    try map.flush()
    try? map.transaction { _ in
      map.remove(User.self, id: 3)
      throw MemoryStore.Failure()
    }
    #expect(map.find(User.self, id: 3)?.value.login == "ogion")
    try map.flush()
    let restarted = launch(store)
    #expect(restarted.find(User.self, id: 1) == nil)
    #expect(restarted.find(User.self, id: 2)?.value.updatedAt == 15)
    #expect(restarted.find(User.self, id: 3)?.value.login == "ogion")
  }

  @Test("A value that does not encode is reported once, however often the store then fails")
  func unencodableReportedOnce() throws {
    let store = MemoryStore()
    store.isFailing.withValue { $0 = true }
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger, persistence: store)
    map.persist(User.self)
    map.store(User(id: 1, login: "unencodable"))
    map.store(User(id: 2, login: "tenar"))
    #expect(throws: MemoryStore.Unencodable.self) { try map.flush() }
    // The store's own failure comes next, not the same encoding error again.
    #expect(throws: MemoryStore.Failure.self) { try map.flush() }
    #expect(throws: MemoryStore.Failure.self) { try map.flush() }
    store.isFailing.withValue { $0 = false }
    try map.flush()
    let failures = logger.events.filter { $0.kind == .persistenceFailed }.map { $0.message ?? "" }
    #expect(failures.filter { $0.contains("encoding User(1)") }.count == 1)
    #expect(store.userLogins == ["tenar"])
    #expect(map.find(User.self, id: 1)?.value.login == "unencodable")
  }

  @Test("A failed write waits for the next hand-over or flush: a late wake-up tries nothing")
  func lateWakeUpTriesNothing() throws {
    let store = MemoryStore()
    store.isFailing.withValue { $0 = true }
    let map = IdentityMap(persistence: store)
    map.persist(User.self)
    // The hand-over wakes the writer a moment later; the flush does not wait for the moment.
    map.store(User(id: 1, login: "ged"))
    #expect(throws: MemoryStore.Failure.self) { try map.flush() }
    let attempts = store.attempts.value
    #expect(attempts >= 1)
    // Once the wake-up has come, whenever it came: it tried nothing after the flush.
    let woken = DispatchSemaphore(value: 0)
    map._core.persistence!.afterWakeUps { woken.signal() }
    woken.wait()
    #expect(store.attempts.value == attempts)
    // So the store, working again, takes the write, and the flush has nothing to throw.
    store.isFailing.withValue { $0 = false }
    try map.flush()
    #expect(store.userLogins == ["ged"])
    #expect(store.attempts.value == attempts + 1)
  }

  @Test("flush() inside a transaction body stops the program with a message, not a deadlock")
  func flushInsideAWrite() async {
    let result = await #expect(
      processExitsWith: .failure, observing: [\.standardErrorContent]
    ) {
      let map = IdentityMap(persistence: MemoryStore())
      map.persist(User.self)
      map.store(User(id: 1, login: "ged"))
      map.transaction { _ in
        map.store(User(id: 2, login: "tenar"))
        try? map.flush()
      }
    }
    // NB: optimized builds stop without printing a precondition's message.
    #if DEBUG
      let stderr = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
      #expect(stderr.contains("flush() was called inside a write"))
    #else
      #expect(result != nil)
    #endif
  }

  /// A map persisting the fixtures' types in `store`.
  func launch(_ store: MemoryStore) -> IdentityMap {
    let map = IdentityMap(persistence: store)
    map.persist(Issue.self)
    map.persist(User.self)
    map.persist(Label.self)
    map.persist(Milestone.self)
    return map
  }
}

/// A store in memory that fails every write while `isFailing`, and cannot encode a user whose
/// login is "unencodable".
final class MemoryStore: PersistentStore {
  struct Failure: Error {}
  struct Unencodable: Error {}

  let isFailing = Locked(false)
  /// How many times a write was tried.
  let attempts = Locked(0)
  /// The rows, by kind and key.
  let rows = Locked<[String: PersistentRecord]>([:])
  let aliases = Locked<[String: (kind: String, record: PersistentRecord)]>([:])

  func encode<Value: Encodable>(_ value: Value) throws -> [UInt8] {
    if let user = value as? User, user.login == "unencodable" { throw Unencodable() }
    return Array(try JSONEncoder().encode(value))
  }

  func decode<Value: Decodable>(_ type: Value.Type, from bytes: [UInt8]) throws -> Value {
    try JSONDecoder().decode(type, from: Data(bytes))
  }

  /// The logins of the users the store holds.
  var userLogins: [String] {
    rows.value.filter { $0.key.hasPrefix("User/") }.values.compactMap {
      try? decode(User.self, from: $0.payload).login
    }
  }

  func record(kind: String, key: [UInt8]) throws -> PersistentRecord? {
    rows.value[kind + "/" + String(decoding: key, as: UTF8.self)]
  }

  func aliasRecord(named name: String) throws -> PersistentRecord? {
    aliases.value[name]?.record
  }

  func records(kind: String) throws -> [(key: [UInt8], record: PersistentRecord)] {
    let prefix = kind + "/"
    return rows.value.compactMap { key, record in
      key.hasPrefix(prefix) ? (Array(key.dropFirst(prefix.count).utf8), record) : nil
    }
  }

  func apply(_ changes: [PersistentChange]) throws {
    attempts.withValue { $0 += 1 }
    if isFailing.value { throw Failure() }
    var rows = rows.value
    var aliases = aliases.value
    for change in changes {
      switch change {
      case .save(let kind, let key, let record):
        rows[kind + "/" + String(decoding: key, as: UTF8.self)] = record
      case .delete(let kind, let key):
        rows[kind + "/" + String(decoding: key, as: UTF8.self)] = nil
      case .deleteKind(let kind):
        rows = rows.filter { !$0.key.hasPrefix(kind + "/") }
      case .saveAlias(let name, let kind, let record):
        aliases[name] = (kind, record)
      case .deleteAlias(let name):
        aliases[name] = nil
      case .deleteAliases(let kind):
        aliases = aliases.filter { $0.value.kind != kind }
      case .deleteEverything:
        rows = [:]
        aliases = [:]
      }
    }
    // NB: until this returns, the map reads what it changes from its own unapplied changes:
    // the two tables need not change at once.
    self.rows.withValue { $0 = rows }
    self.aliases.withValue { $0 = aliases }
  }
}
