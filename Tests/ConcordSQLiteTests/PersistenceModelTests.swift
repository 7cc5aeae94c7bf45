import ConcordSQLite
import ConcordTesting
import Foundation
import TestSupport
import Testing

@testable import Concord

// A seeded model-based test of persistence: random writes (stamped, merged, nested), removals,
// held and dropped handles, flushes, restarts, removeAll and reset, against a model in plain
// Swift written from the contract. Every entity of a persisted type counts as stored whether
// it is in memory or not, so after every step each id's `find` must agree with the model; and
// after a flush and a restart, so must a fresh map on the same file. The engine checks its
// invariants after every write in the CONCORD_INTERNAL_CHECKS run.

@Suite("Persistence: a seeded model-based test with restarts and resets")
struct PersistenceModelTests {
  /// What the contract says the map holds.
  struct Model {
    var users: [Int: User] = [:]
    var labels: [Int: Label] = [:]
    var milestones: [Int: Milestone] = [:]
    /// Issues as written, their nested entities resolved from the tables above when read.
    var issues: [Int: Issue] = [:]
    /// The stamps of removed users and issues (`TombstonePolicy.default`, never reached here),
    /// kept by the store across restarts.
    var userTombstones: [Int: Double] = [:]
    var issueTombstones: [Int: Double] = [:]

    /// The issue as every holder sees it: nesting the current value of each nested entity.
    func issue(_ id: Int) -> Issue? {
      guard var issue = issues[id] else { return nil }
      issue.user = users[issue.user.id] ?? issue.user
      issue.labels = issue.labels.map { labels[$0.id] ?? $0 }
      issue.milestone = issue.milestone.map { milestones[$0.id] ?? $0 }
      return issue
    }

    /// A write of `incoming` user, as `store` makes it: its own stamp, merged. Returns whether
    /// the user is stored after it: not when its tombstone refused it.
    @discardableResult
    mutating func write(_ incoming: User) -> Bool {
      guard let stored = users[incoming.id] else {
        if let tomb = userTombstones[incoming.id], let stamp = incoming.updatedAt, stamp <= tomb {
          return false
        }
        userTombstones[incoming.id] = nil
        users[incoming.id] = incoming
        return true
      }
      if let stamp = incoming.updatedAt, let storedStamp = stored.updatedAt, stamp <= storedStamp {
        return true
      }
      users[incoming.id] = User.merge(incoming, into: stored)
      return true
    }

    /// A write of `incoming` issue: nested entities are written on their own stamps, even
    /// when the issue's stamp is refused.
    mutating func write(_ incoming: Issue) {
      let hasUser = write(incoming.user)
      for label in incoming.labels { labels[label.id] = label }
      if let milestone = incoming.milestone { milestones[milestone.id] = milestone }
      if let stored = issues[incoming.id] {
        if incoming.updatedAt <= stored.updatedAt { return }
      } else if let tomb = issueTombstones[incoming.id], incoming.updatedAt <= tomb {
        return
      }
      issueTombstones[incoming.id] = nil
      issues[incoming.id] = incoming
      // An issue requires its user: it goes with one a tombstone refused.
      if !hasUser { removeIssue(incoming.id) }
    }

    /// A stamp one tick after `clock`: mostly newer than what is stored, sometimes older,
    /// sometimes none.
    static func randomStamp(_ clock: inout Double, using generator: inout SeededGenerator)
      -> Double?
    {
      clock += 1
      switch Int.random(in: 0..<4, using: &generator) {
      case 0: return nil
      case 1: return clock - Double(Int.random(in: 1...20, using: &generator))
      default: return clock
      }
    }

    /// Issue `id` by `userID`, stamped `stamp`, as step `step` writes it: up to two labels,
    /// sometimes a milestone.
    static func randomIssue(
      _ id: Int, userID: Int, step: Int, stamp: Double, using generator: inout SeededGenerator
    ) -> Issue {
      Issue(
        id: id, title: "title\(step)", updatedAt: stamp, user: .stub(userID),
        labels: (0..<Int.random(in: 0...2, using: &generator)).map {
          Label(id: ($0 + id) % 3, name: "label\(step)-\($0)")
        },
        milestone: Bool.random(using: &generator) ? Milestone(id: id % 2, title: "ms\(step)") : nil)
    }

    /// Checks that `map` finds every user and issue as the model has it, and that live queries
    /// list them, whether they are in memory or only in the store.
    func check(_ map: IdentityMap, _ step: String) {
      let listed = map.query(Issue.self, sortedBy: { $0.id < $1.id })
      #expect(listed.value == (0..<8).compactMap(issue), "\(step): the query of issues")
      let even = map.query(User.self, filter: { $0.id % 2 == 0 }, sortedBy: { $0.id < $1.id })
      #expect(even.value == users.values.filter { $0.id % 2 == 0 }.sorted { $0.id < $1.id })
      for id in 0..<6 {
        #expect(map.find(User.self, id: id)?.value == users[id], "\(step): user \(id)")
      }
      for id in 0..<8 {
        #expect(map.find(Issue.self, id: id)?.value == issue(id), "\(step): issue \(id)")
      }
    }

    /// The removal of a user: an issue requires its user, so its issues go too. Each leaves a
    /// tombstone when it has a stamp.
    mutating func removeUser(_ id: Int) {
      guard let user = users.removeValue(forKey: id) else { return }
      if let stamp = user.updatedAt { userTombstones[id] = stamp }
      for issue in issues.values where issue.user.id == id { removeIssue(issue.id) }
    }

    /// The removal of an issue, which leaves a tombstone.
    mutating func removeIssue(_ id: Int) {
      guard let issue = issues.removeValue(forKey: id) else { return }
      issueTombstones[id] = issue.updatedAt
    }
  }

  @Test(
    "Random writes, restarts and resets agree with the model",
    // NB: seeds 1 and 2 also with every write checking for missing entities though its
    // prefetch found them all (`_Persistence.foresees`): the same steps, with and without
    // the shortcut, one model.
    arguments: [(1, false), (2, false), (3, false), (1, true), (2, true)])
  func randomRun(seed: UInt64, recheck: Bool) throws {
    let directory = TemporaryDirectory()
    var generator = SeededGenerator(seed: seed &* 0x9E37_79B9)
    func launched() throws -> IdentityMap {
      let map = try launch(directory.database)
      map._rechecksForeseenEntities = recheck
      return map
    }
    var map = try launched()
    var model = Model()
    var held: [Any] = []
    var clock = 0.0
    func maybeStamp() -> Double? { Model.randomStamp(&clock, using: &generator) }
    let steps = max(300, randomSteps(share: 50))
    for step in 0..<steps {
      let userID = Int.random(in: 0..<6, using: &generator)
      let issueID = Int.random(in: 0..<8, using: &generator)
      switch Int.random(in: 0..<100, using: &generator) {
      case 0..<25:
        let name = Bool.random(using: &generator) ? "name\(step)" : nil
        let user = User(id: userID, login: "login\(step)", name: name, updatedAt: maybeStamp())
        let handle = map.store(user)
        if Bool.random(using: &generator) { held.append(handle) }
        model.write(user)
      case 25..<50:
        let stamp = maybeStamp() ?? clock
        let issue = Model.randomIssue(
          issueID, userID: userID, step: step, stamp: stamp, using: &generator)
        let handle = map.store(issue)
        if Bool.random(using: &generator) { held.append(handle) }
        model.write(issue)
      case 50..<60:
        let text = "renamed\(step)"
        let updated = map.update(User.self, id: userID) { $0.name = text }
        #expect(updated == (model.users[userID] != nil))
        model.users[userID]?.name = text
      case 60..<66:
        map.remove(User.self, id: userID)
        model.removeUser(userID)
      case 66..<72:
        map.remove(Issue.self, id: issueID)
        model.removeIssue(issueID)
      case 72..<80:
        if !held.isEmpty {
          held.remove(at: Int.random(in: 0..<held.count, using: &generator))
        }
      case 80..<86:
        try map.flush()
      case 86..<92:
        // A restart: what was committed must come back from the file.
        try map.flush()
        held = []
        map = try launched()
      case 92..<95:
        map.removeAll()
        model = Model()
      case 95..<97:
        try map.reset()
        model = Model()
      default:
        let found = map.transaction { _ in map.find(Issue.self, id: issueID)?.value }
        #expect(found == model.issue(issueID))
      }
      model.check(map, "step \(step)")
    }
    try map.flush()
    let restarted = try launch(directory.database)
    for id in 0..<8 {
      #expect(restarted.find(Issue.self, id: id)?.value == model.issue(id), "after: issue \(id)")
    }
  }

  /// A map on a store whose reads and writes fail at random while `store.faults` is on.
  static func launchFaulty(_ path: String, seed: UInt64, logger: RecordingLogger) throws
    -> (IdentityMap, FaultyStore)
  {
    let store = try FaultyStore(path: path, seed: seed)
    return (launch(store, logger: logger), store)
  }

  @Test(
    "Random writes on a store whose reads and writes fail at random: nothing is lost",
    arguments: [4, 5, 6])
  func randomRunWithFailingReadsAndWrites(seed: UInt64) throws {
    let directory = TemporaryDirectory()
    var generator = SeededGenerator(seed: seed &* 0x9E37_79B9)
    let logger = RecordingLogger()
    var (map, store) = try Self.launchFaulty(directory.database, seed: seed, logger: logger)
    var model = Model()
    var held: [Any] = []
    var clock = 0.0
    func maybeStamp() -> Double? { Model.randomStamp(&clock, using: &generator) }
    let steps = max(300, randomSteps(share: 100))
    for step in 0..<steps {
      let userID = Int.random(in: 0..<6, using: &generator)
      let issueID = Int.random(in: 0..<8, using: &generator)
      logger.clear()
      store.faults.withValue { $0 = true }
      // The entities whose reads failed in this step: each refuses the writes that need it.
      func unreadable() -> Set<String> {
        Set(
          logger.events.compactMap {
            $0.kind == .persistenceFailed ? $0.entity?.description : nil
          })
      }
      switch Int.random(in: 0..<100, using: &generator) {
      case 0..<25:
        let name = Bool.random(using: &generator) ? "name\(step)" : nil
        let user = User(id: userID, login: "login\(step)", name: name, updatedAt: maybeStamp())
        let handle = map.store(user)
        if Bool.random(using: &generator) { held.append(handle) }
        if unreadable().isEmpty { model.write(user) }
      case 25..<55:
        let stamp = maybeStamp() ?? clock
        let issue = Model.randomIssue(
          issueID, userID: userID, step: step, stamp: stamp, using: &generator)
        let handle = map.store(issue)
        if Bool.random(using: &generator) { held.append(handle) }
        let failed = unreadable()
        if failed.isEmpty {
          model.write(issue)
        } else {
          // The issue is refused (it, its stored value or its new one nests what could not be
          // read); each nested entity that could be read is written on its own.
          #expect(handle.isRemoved || map.find(Issue.self, id: issueID) != nil)
          if !failed.contains("User(\(userID))") { model.write(issue.user) }
          for label in issue.labels where !failed.contains("Label(\(label.id))") {
            model.labels[label.id] = label
          }
          if let milestone = issue.milestone, !failed.contains("Milestone(\(milestone.id))") {
            model.milestones[milestone.id] = milestone
          }
        }
      case 55..<63:
        let text = "renamed\(step)"
        let updated = map.update(User.self, id: userID) { $0.name = text }
        if unreadable().isEmpty {
          #expect(updated == (model.users[userID] != nil))
          model.users[userID]?.name = text
        } else {
          #expect(!updated, "an unreadable user is not updated")
        }
      case 63..<69:
        map.remove(User.self, id: userID)
        if unreadable().isEmpty { model.removeUser(userID) }
      case 69..<75:
        map.remove(Issue.self, id: issueID)
        if unreadable().isEmpty { model.removeIssue(issueID) }
      case 75..<83:
        if !held.isEmpty {
          held.remove(at: Int.random(in: 0..<held.count, using: &generator))
        }
      case 83..<90:
        // A failed write is kept and tried again: the flush may throw, nothing is lost.
        try? map.flush()
      default:
        // A restart, once every committed write reached the file. NB: a flush throws, once,
        // the first error since the last flush, though its own retry succeeded.
        store.faults.withValue { $0 = false }
        try? map.flush()
        try map.flush()
        held = []
        (map, store) = try Self.launchFaulty(
          directory.database, seed: seed &+ UInt64(step), logger: logger)
      }
      store.faults.withValue { $0 = false }
      model.check(map, "seed \(seed), step \(step)")
    }
    try? map.flush()
    try map.flush()
    let restarted = try launch(directory.database)
    for id in 0..<8 {
      #expect(restarted.find(Issue.self, id: id)?.value == model.issue(id), "after: issue \(id)")
    }
    for id in 0..<6 {
      #expect(restarted.find(User.self, id: id)?.value == model.users[id], "after: user \(id)")
    }
  }
}

/// What a seeded run with loads parked in the store shares with the thread that writes while
/// a load is parked: touched by one thread at a time, the writer's while the test waits.
private final class ParkedRun: @unchecked Sendable {
  var model = PersistenceModelTests.Model()
  var generator: SeededGenerator
  var clock = 0.0

  init(seed: UInt64) {
    generator = SeededGenerator(seed: seed &* 0x9E37_79B9)
  }
}

extension PersistenceModelTests {
  @Test(
    "Loads parked in the store while another thread writes and reads: what they admit agrees",
    arguments: [7, 8, 9])
  func randomRunWithLoadsParkedInTheStore(seed: UInt64) throws {
    let directory = TemporaryDirectory()
    let run = ParkedRun(seed: seed)
    var (map, store) = try ReadsOffTheLockTests.launchGated(directory.database)
    let held = Locked<[Any]>([])
    let steps = max(100, randomSteps(share: 400))
    for step in 0..<steps {
      let issueID = Int.random(in: 0..<8, using: &run.generator)
      let userID = Int.random(in: 0..<6, using: &run.generator)
      // One write of the random run, as the model says it.
      @Sendable func write(_ map: IdentityMap, _ run: ParkedRun, step: Int) {
        let userID = Int.random(in: 0..<6, using: &run.generator)
        let issueID = Int.random(in: 0..<8, using: &run.generator)
        switch Int.random(in: 0..<5, using: &run.generator) {
        case 0:
          let user = User(
            id: userID, login: "login\(step)", name: "name\(step)",
            updatedAt: Model.randomStamp(&run.clock, using: &run.generator))
          map.store(user)
          run.model.write(user)
        case 1, 2:
          let stamp = Model.randomStamp(&run.clock, using: &run.generator) ?? run.clock
          let issue = Model.randomIssue(
            issueID, userID: userID, step: step, stamp: stamp, using: &run.generator)
          map.store(issue)
          run.model.write(issue)
        case 3:
          map.remove(Issue.self, id: issueID)
          run.model.removeIssue(issueID)
        default:
          map.remove(User.self, id: userID)
          run.model.removeUser(userID)
        }
      }
      switch Int.random(in: 0..<10, using: &run.generator) {
      case 0..<4:
        write(map, run, step: step)
      case 4..<8:
        // A load parked in the store, while another thread writes and reads.
        let map = map
        let load: @Sendable () -> Void
        switch Int.random(in: 0..<4, using: &run.generator) {
        case 0:
          load = { held.withValue { $0.append(map.find(Issue.self, id: issueID) as Any) } }
        case 1:
          load = { held.withValue { $0.append(map.query(Issue.self) as Any) } }
        case 2:
          load = { _ = map.parents(of: User.self, id: userID) }
        default:
          load = { held.withValue { $0.append(map.find(User.self, id: userID) as Any) } }
        }
        // NB: one write at most: an issue only in the store whose user is removed goes when
        // it is next read (see `Model.removeUser(_:)`), which the check after each step does;
        // a second write could bring the user back before that.
        let writes = Int.random(in: 0...1, using: &run.generator)
        ReadsOffTheLockTests.whileParked(
          store, load,
          meanwhile: {
            for index in 0..<writes { write(map, run, step: step * 10 + index) }
            _ = map.find(User.self, id: userID)
          })
      case 8:
        try map.flush()
      default:
        // A restart, so that loads find the store again.
        try map.flush()
        held.withValue { $0.removeAll() }
        (map, store) = try ReadsOffTheLockTests.launchGated(directory.database)
      }
      if held.value.count > 6 { held.withValue { $0.removeFirst() } }
      run.model.check(map, "seed \(seed), step \(step)")
    }
  }
}

/// An `SQLiteStore` whose reads of entities and aliases, and whose writes, fail at random, one
/// call in five, while `faults` is on.
final class FaultyStore: PersistentStore {
  struct Fault: Error, CustomStringConvertible {
    var description: String { "injected fault" }
  }

  let base: SQLiteStore
  let faults = Locked(false)
  private let generator: Locked<SeededGenerator>

  init(path: String, seed: UInt64) throws {
    base = try SQLiteStore(path: path)
    generator = Locked(SeededGenerator(seed: seed))
  }

  /// Throws, one call in five, while `faults` is on.
  private func maybeFail() throws {
    guard faults.value else { return }
    if generator.withValue({ Int.random(in: 0..<5, using: &$0) }) == 0 { throw Fault() }
  }

  func encode<Value: Encodable>(_ value: Value) throws -> [UInt8] { try base.encode(value) }

  func decode<Value: Decodable>(_ type: Value.Type, from bytes: [UInt8]) throws -> Value {
    try base.decode(type, from: bytes)
  }

  func record(kind: String, key: [UInt8]) throws -> PersistentRecord? {
    try maybeFail()
    return try base.record(kind: kind, key: key)
  }

  func aliasRecord(named name: String) throws -> PersistentRecord? {
    try maybeFail()
    return try base.aliasRecord(named: name)
  }

  func records(kind: String) throws -> [(key: [UInt8], record: PersistentRecord)] {
    try base.records(kind: kind)
  }

  func tombstones(kind: String) throws -> [(key: [UInt8], stamp: Stamp)] {
    try base.tombstones(kind: kind)
  }

  func apply(_ changes: [PersistentChange]) throws {
    try maybeFail()
    try base.apply(changes)
  }
}
