import ConcordTesting
import Foundation
import TestSupport
import Testing

@testable import Concord

/// A logger that keeps lines, for `DiffLogger(output:)`.
private func lines() -> (DiffLogger, Locked<[String]>) {
  let printed = Locked<[String]>([])
  return (DiffLogger { printed.append($0) }, printed)
}

/// A recording logger that also asks for `changed` events.
private final class ChangeRecorder: IdentityMapLogger, @unchecked Sendable {
  // NB: @unchecked because `recorded` is only touched through the lock.
  let recorded = Locked<[IdentityMapEvent]>([])
  var logsChangedValues: Bool { true }
  func log(_ event: IdentityMapEvent) { recorded.append(event) }
  var changes: [IdentityMapEvent] { recorded.value.filter { $0.kind == .changed } }
}

struct Account: Identifiable, Sendable, Equatable {
  enum Presence: Sendable, Equatable {
    case offline
    case online(since: Int)
  }
  var id: Int
  var name: String
  var scores: [Int]
  var settings: [String: Bool]
  var nickname: String?
  var presence: Presence
}

@Suite("DiffLogger: what each committed change did, field by field")
struct DiffLoggerTests {
  @Test("An update prints the field that changed, with its old and new values")
  func fieldChange() {
    let (logger, printed) = lines()
    let map = IdentityMap(logger: logger)
    let ursula = map.store(Author(id: 1, name: "Ursula"))
    map.store(Author(id: 1, name: "Ursula K. Le Guin"))
    #expect(
      printed.value == [
        #"Author(1) inserted: Author(id: 1, name: "Ursula")"#,
        #"Author(1).name: "Ursula" → "Ursula K. Le Guin""#,
      ])
    map.remove(Author.self, id: 1)
    #expect(printed.value.last == "Author(1) removed")
    #expect(ursula.isRemoved)
  }

  @Test("A write that changes nothing prints nothing")
  func unchangedWrite() {
    let (logger, printed) = lines()
    let map = IdentityMap(logger: logger)
    let held = map.store(Author(id: 1, name: "Ursula"))
    printed.withValue { $0.removeAll() }
    map.store(Author(id: 1, name: "Ursula"))
    map.update(Author.self, id: 1) { _ in }
    #expect(printed.value.isEmpty)
    withExtendedLifetime(held) {}
  }

  @Test("A nested REST shape: the issue's fields and each nested entity's own lines")
  func nestedPayload() throws {
    let (logger, printed) = lines()
    let map = IdentityMap(logger: logger)
    let page = try Recorded.decode([GitHubIssue].self, Recorded.issuesPage)
    let held = map.store(page)
    printed.withValue { $0.removeAll() }

    var issue = page[0]
    issue.title = "Crash on launch (iOS 18)"
    issue.updatedAt = issue.updatedAt.addingTimeInterval(60)
    issue.milestone?.title = "2.0.1"
    issue.labels[0].name = "crash"
    issue.labels.append(GitHubLabel(id: 99, name: "regression", color: "ff0000"))
    map.store(issue)
    let output = printed.value
    let issueRef = "GitHubIssue(\(issue.id))"
    let label = issue.labels[0]
    let milestone = try #require(issue.milestone)
    #expect(
      output.contains(#"\#(issueRef).title: "\#(page[0].title)" → "Crash on launch (iOS 18)""#))
    #expect(
      output.contains(#"\#(issueRef).milestone.title: "\#(page[0].milestone!.title)" → "2.0.1""#))
    #expect(
      output.contains(
        #"\#(issueRef).labels[id: \#(label.id)].name: "\#(page[0].labels[0].name)" → "crash""#))
    #expect(
      output.contains {
        $0.hasPrefix("\(issueRef).labels[id: 99] added: ") && $0.contains(#"name: "regression""#)
      })
    #expect(
      output.contains(
        #"GitHubMilestone(\#(milestone.id)).title: "\#(page[0].milestone!.title)" → "2.0.1""#))
    #expect(
      output.contains(#"GitHubLabel(\#(label.id)).name: "\#(page[0].labels[0].name)" → "crash""#))
    #expect(output.contains { $0.hasPrefix("GitHubLabel(99) inserted: ") })
    // The user did not change: no line names it, and the unchanged labels print nothing.
    #expect(!output.contains { $0.contains("GitHubUser") || $0.contains(".user") })
    #expect(output.filter { $0.hasPrefix(issueRef) }.count == 5)
    withExtendedLifetime(held) {}
  }

  @Test("Collections print the elements that changed, not the whole collection")
  func collections() {
    let (logger, printed) = lines()
    let map = IdentityMap(logger: logger)
    let before = Account(
      id: 1, name: "a", scores: Array(0..<1_000), settings: ["dark": true, "beta": false],
      nickname: nil, presence: .offline)
    let held = map.store(before)
    // An insertion shows a large collection's first elements and how many more there are.
    #expect(printed.value.count == 1)
    #expect(printed.value[0].contains("scores: [0, 1, 2, "))
    #expect(printed.value[0].contains(", 19, … (980 more)], settings: ["))
    printed.withValue { $0.removeAll() }
    map.update(Account.self, id: 1) {
      $0.scores[500] = -1
      $0.settings["beta"] = true
      $0.settings["dark"] = nil
      $0.settings["sound"] = false
    }
    #expect(
      printed.value == [
        "Account(1).scores[500]: 500 → -1",
        #"Account(1).settings["dark"] removed: true"#,
        #"Account(1).settings["beta"]: false → true"#,
        #"Account(1).settings["sound"] added: false"#,
      ])
    printed.withValue { $0.removeAll() }
    map.update(Account.self, id: 1) { $0.scores.removeLast(2) }
    #expect(
      printed.value == [
        "Account(1).scores[998] removed: 998", "Account(1).scores[999] removed: 999",
      ])
    withExtendedLifetime(held) {}
  }

  @Test("Optionals and enums are compared through their payloads")
  func optionalsAndEnums() {
    let (logger, printed) = lines()
    let map = IdentityMap(logger: logger)
    let held = map.store(
      Account(id: 1, name: "a", scores: [], settings: [:], nickname: nil, presence: .offline))
    printed.withValue { $0.removeAll() }
    map.update(Account.self, id: 1) {
      $0.nickname = "al"
      $0.presence = .online(since: 5)
    }
    map.update(Account.self, id: 1) {
      $0.nickname = "ally"
      $0.presence = .online(since: 9)
    }
    #expect(
      printed.value == [
        #"Account(1).nickname: nil → "al""#,
        "Account(1).presence: offline → online(since: 5)",
        #"Account(1).nickname: "al" → "ally""#,
        "Account(1).presence.since: 5 → 9",
      ])
    withExtendedLifetime(held) {}
  }

  @Test(
    "A transaction prints one diff per entity, from before it to commit; a round trip prints nothing"
  )
  func transactions() {
    let (logger, printed) = lines()
    let map = IdentityMap(logger: logger)
    let held = map.store(Author(id: 1, name: "A"))
    printed.withValue { $0.removeAll() }
    map.transaction { transaction in
      transaction.store(Author(id: 1, name: "B"))
      transaction.store(Author(id: 1, name: "C"))
      transaction.store(Author(id: 2, name: "X"))
      transaction.remove(Author.self, id: 2)
    }
    #expect(printed.value == [#"Author(1).name: "A" → "C""#])
    printed.withValue { $0.removeAll() }
    map.transaction { transaction in
      transaction.store(Author(id: 1, name: "D"))
      transaction.store(Author(id: 1, name: "C"))
    }
    #expect(printed.value.isEmpty)
    withExtendedLifetime(held) {}
  }

  @Test("Without a logger that asks, no changed event is made; with one, each carries both values")
  func changedEvents() {
    let plain = RecordingLogger()
    let quiet = IdentityMap(logger: plain)
    let a = quiet.store(Author(id: 1, name: "A"))
    quiet.store(Author(id: 1, name: "B"))
    #expect(!plain.events.contains { $0.kind == .changed })

    let recorder = ChangeRecorder()
    let map = IdentityMap(logger: recorder)
    let b = map.store(Author(id: 1, name: "A"))
    map.store(Author(id: 1, name: "B"))
    map.remove(Author.self, id: 1)
    let reference = EntityReference(Author.self, id: 1)
    #expect(
      recorder.changes == [
        .changed(reference, before: nil, after: Author(id: 1, name: "A")),
        .changed(reference, before: Author(id: 1, name: "A"), after: Author(id: 1, name: "B")),
        .changed(reference, before: Author(id: 1, name: "B"), after: nil),
      ])
    #expect(recorder.changes[1].valueAfter as? Author == Author(id: 1, name: "B"))
    #expect(
      recorder.changes.map(\.description) == [
        "inserted Author(1)", "changed Author(1)", "removed Author(1)",
      ])
    withExtendedLifetime((a, b)) {}
  }

  @Test(
    "Seeded random writes, transactions and removals: replaying the changed events rebuilds the map",
    arguments: [1, 2, 3])
  func seededReplay(seed: UInt64) {
    var generator = SeededGenerator(seed: seed &* 0x2545_F491)
    let recorder = ChangeRecorder()
    let map = IdentityMap(logger: recorder)
    var model: [Int: Author] = [:]
    var replayed: [Int: Author] = [:]
    var held: [Int: EntityObserver<Author>] = [:]
    for _ in 0..<max(300, randomSteps(share: 300)) {
      let id = Int.random(in: 0..<12, using: &generator)
      let name = String(Int.random(in: 0..<4, using: &generator))
      switch Int.random(in: 0..<10, using: &generator) {
      case 0...3:
        held[id] = map.store(Author(id: id, name: name))
        model[id] = Author(id: id, name: name)
      case 4:
        map.remove(Author.self, id: id)
        model[id] = nil
        held[id] = nil
      case 5, 6:
        map.update(Author.self, id: id) { $0.name += name }
        model[id]?.name += name
      case 7:
        // A transaction with several writes to one entity, sometimes rolled back.
        let rollBack = Bool.random(using: &generator)
        try? map.transaction { transaction in
          held[id] = transaction.store(Author(id: id, name: name + "!"))
          transaction.update(Author.self, id: id) { $0.name = name }
          if rollBack { throw CancellationError() }
        }
        if !rollBack { model[id] = Author(id: id, name: name) }
      default:
        held[id] = nil
        if map.find(Author.self, id: id) == nil { model[id] = nil }
      }
      // Entities nobody holds leave the map without a change: the model forgets them too.
      for id in model.keys where map.find(Author.self, id: id) == nil { model[id] = nil }
      for event in recorder.changes {
        let author = event.valueAfter as? Author
        #expect(event.valueBefore.map { $0 as? Author } ?? nil == replayed[Int(event.entity!.id)!])
        replayed[Int(event.entity!.id)!] = author
        #expect(event.valueBefore != nil || event.valueAfter != nil)
      }
      recorder.recorded.withValue { $0.removeAll() }
      let live = replayed.filter { model[$0.key] != nil }
      #expect(live == model)
      replayed = replayed.filter {
        model[$0.key] != nil || map.find(Author.self, id: $0.key) != nil
      }
    }
  }
}

/// A class hierarchy with a reference back to itself, for the edge cases of `Mirror`.
private class Base: @unchecked Sendable {
  var name: String
  init(name: String) { self.name = name }
}

private final class Node: Base, @unchecked Sendable {
  var parent: Node?
  init(name: String, parent: Node?) {
    self.parent = parent
    super.init(name: name)
  }
}

private struct Tagged: Identifiable, Equatable {
  var id: Int
  var tag: String
}

@Suite("DiffLogger: the edge cases of reading values through Mirror")
struct DiffLoggerEdgeCaseTests {
  let entity = EntityReference(Author.self, id: 1)

  @Test("A change `==` sees but the text hides still prints a line")
  func sameText() {
    let date = Date(timeIntervalSinceReferenceDate: 1_000)
    let lines = DiffLogger.lines(
      for: entity, before: date, after: date.addingTimeInterval(0.001))
    #expect(lines.count == 1)
    #expect(lines.first?.hasPrefix("Author(1): changed, though both show ") == true)
  }

  @Test("Repeated ids fall back to positions")
  func repeatedIDs() {
    let old = [Tagged(id: 1, tag: "a"), Tagged(id: 1, tag: "b"), Tagged(id: 2, tag: "c")]
    let new = [Tagged(id: 1, tag: "a"), Tagged(id: 2, tag: "c")]
    #expect(
      DiffLogger.lines(for: entity, before: old, after: new) == [
        "Author(1)[1].id: 1 → 2", #"Author(1)[1].tag: "b" → "c""#,
        #"Author(1)[2] removed: Tagged(id: 2, tag: "c")"#,
      ])
  }

  @Test("Sets show and diff their elements in a stable order")
  func sets() {
    let before: Set<String> = ["b", "a"]
    let after: Set<String> = ["d", "c", "a"]
    #expect(
      DiffLogger.lines(for: entity, before: before, after: after) == [
        #"Author(1) removed: "b""#, #"Author(1) added: "c""#, #"Author(1) added: "d""#,
      ])
    #expect(
      DiffLogger.lines(for: entity, before: nil, after: after) == [
        #"Author(1) inserted: ["a", "c", "d"]"#
      ])
  }

  @Test("Classes show inherited fields, and a value that holds itself stops at a depth")
  func classes() {
    let old = Node(name: "a", parent: nil)
    let new = Node(name: "b", parent: nil)
    #expect(
      DiffLogger.lines(for: entity, before: old, after: new) == [#"Author(1).name: "a" → "b""#])
    let loop = Node(name: "loop", parent: nil)
    loop.parent = loop
    let inserted = DiffLogger.lines(for: entity, before: nil, after: loop)
    #expect(inserted.first?.contains(#"Node(name: "loop", parent: Node(name: "loop""#) == true)
    #expect(inserted.first?.contains("…") == true)
    let other = Node(name: "other", parent: nil)
    other.parent = other
    #expect(!DiffLogger.lines(for: entity, before: loop, after: other).isEmpty)
    loop.parent = nil
    other.parent = nil
  }

  @Test("An event with neither value describes itself as a change")
  func neitherValue() {
    #expect(
      IdentityMapEvent.changed(entity, before: nil, after: nil).description == "changed Author(1)")
    #expect(
      IdentityMapEvent.changed(entity, before: 1, after: 2)
        != IdentityMapEvent.changed(entity, before: 1.0, after: 2))
  }
}
