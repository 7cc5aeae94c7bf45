import ConcordTesting
import Testing

@testable import Concord

/// An entity stamped by the server, like an issue's `updated_at`.
struct Ticket: Aggregate, Stamped, Equatable {
  var id: Int
  var title: String
  var updatedAt: Stamp?
  var reporter: Reporter
  var stamp: Stamp? { updatedAt }
  static var nestedEntities: [NestedEntity<Ticket>] { [.init(\.reporter)] }
}

/// A user stamped by the server when the payload says so (a full profile), not in stubs.
struct Reporter: Stamped, Identifiable, Sendable, Equatable {
  var id: Int
  var name: String
  var updatedAt: Stamp?
  var stamp: Stamp? { updatedAt }
}

/// Not stamped: takes the call's `modifiedAt`.
struct Tag: Identifiable, Sendable, Equatable {
  var id: String
  var color: String
}

struct Board: Aggregate, Stamped, Equatable {
  var id: Int
  var updatedAt: Stamp?
  var tags: [Tag]
  var stamp: Stamp? { updatedAt }
  static var nestedEntities: [NestedEntity<Board>] { [.init(\.tags)] }
}

/// A server whose timestamps have one-second resolution: the later arrival wins.
struct Coarse: Stamped, Identifiable, Sendable, Equatable {
  var id: Int
  var text: String
  var stamp: Stamp?
  static var acceptsEqualStamps: Bool { true }
}

extension AliasKey where Value == Reporter {
  static var reporter: Self { .init("reporter") }
}

@Suite("Stamped: entities carry their own stamps")
struct StampedTests {
  static func ticket(_ id: Int, _ title: String, at stamp: Stamp?, reporter: Reporter) -> Ticket {
    Ticket(id: id, title: title, updatedAt: stamp, reporter: reporter)
  }

  @Test func aValuesOwnStampIsComparedAndRecorded() {
    let map = IdentityMap()
    let reporter = map.store(Reporter(id: 1, name: "A", updatedAt: 10))
    map.store(Reporter(id: 1, name: "older", updatedAt: 9))
    #expect(reporter.value.name == "A")
    map.store(Reporter(id: 1, name: "newer", updatedAt: 11), modifiedAt: 1)
    #expect(reporter.value.name == "newer", "the call's stamp does not apply to a stamped value")
    #expect(reporter._handle.node.s.stamp == 11)
  }

  @Test func aNilOwnStampFallsBackToTheCallsStamp() {
    let map = IdentityMap()
    let reporter = map.store(Reporter(id: 1, name: "A", updatedAt: nil), modifiedAt: 5)
    map.store(Reporter(id: 1, name: "older call", updatedAt: nil), modifiedAt: 4)
    #expect(reporter.value.name == "A")
    map.store(Reporter(id: 1, name: "own stamp", updatedAt: 6), modifiedAt: 1)
    #expect(reporter.value.name == "own stamp")
  }

  @Test func aPageStoresEachEntityWithItsOwnStampInOneCall() {
    let map = IdentityMap()
    let stored = map.store(
      (0..<100).map {
        Self.ticket($0, "v1", at: 100, reporter: Reporter(id: 1, name: "R", updatedAt: nil))
      })
    // The refetched page: even tickets are newer, odd ones older than what is stored.
    map.store(
      (0..<100).map {
        Self.ticket(
          $0, "v2", at: $0 % 2 == 0 ? 101 : 99, reporter: Reporter(id: 1, name: "R", updatedAt: nil)
        )
      })
    #expect(stored.value.map(\.title) == (0..<100).map { $0 % 2 == 0 ? "v2" : "v1" })
  }

  @Test func aNestedStampedEntityIsComparedOnItsOwnStampNotItsParents() {
    let map = IdentityMap()
    // The full profile was updated at 50; the ticket (updated at 200) nests an older copy.
    let reporter = map.store(Reporter(id: 1, name: "Full name", updatedAt: 50))
    let ticket = map.store(
      Self.ticket(1, "T", at: 200, reporter: Reporter(id: 1, name: "Old name", updatedAt: 40)))
    #expect(reporter.value.name == "Full name")
    #expect(ticket.value.reporter.name == "Full name")
  }

  @Test func aNestedUnstampedEntityTakesTheCallsStampNeverItsParents() {
    let map = IdentityMap()
    let board = map.store(Board(id: 1, updatedAt: 500, tags: [Tag(id: "bug", color: "red")]))
    // The tag took the call's stamp (none), not the board's 500: a later unstamped or lower
    // stamped write of the tag applies.
    map.store(Tag(id: "bug", color: "orange"), modifiedAt: 1)
    #expect(board.value.tags[0].color == "orange")
  }

  @Test func aStubWithoutItsOwnStampDoesNotLookAsNewAsItsParent() {
    let map = IdentityMap()
    // The ticket page nests a reporter stub without a stamp; then the profile arrives, with an
    // `updated_at` older than the ticket's. It must apply.
    let page = map.store([
      Self.ticket(1, "T", at: 300, reporter: Reporter(id: 1, name: "stub", updatedAt: nil))
    ])
    map.store(Reporter(id: 1, name: "Profile", updatedAt: 120))
    #expect(page.value[0].reporter.name == "Profile")
  }

  @Test func anAliasRecordsTheStampOfTheValueWrittenToIt() {
    let map = IdentityMap()
    let me = map.store(Reporter(id: 1, name: "A", updatedAt: 10), named: .reporter)
    map.store(Reporter(id: 2, name: "B", updatedAt: 9), named: .reporter)
    #expect(me.value?.id == 1, "9 is older than the 10 the alias recorded")
    map.store(Reporter(id: 2, name: "B", updatedAt: 11), named: .reporter)
    #expect(me.value?.id == 2)
  }

  @Test func updateUsesTheStampOfTheValueItsBodyReturns() {
    let map = IdentityMap()
    let reporter = map.store(Reporter(id: 1, name: "A", updatedAt: 10))
    map.update(Reporter.self, id: 1) {
      $0.name = "older event"
      $0.updatedAt = 9
    }
    #expect(reporter.value.name == "A")
    map.update(Reporter.self, id: 1) {
      $0.name = "newer event"
      $0.updatedAt = 12
    }
    #expect(reporter.value.name == "newer event")
    #expect(reporter._handle.node.s.stamp == 12)
  }

  @Test func anUpdateThatLeavesTheStampAloneWritesWithTheCallsStamp() {
    let map = IdentityMap()
    let reporter = map.store(Reporter(id: 1, name: "A", updatedAt: 10))
    map.update(Reporter.self, id: 1) { $0.name = "local edit" }
    #expect(reporter.value.name == "local edit", "no stamp: it applies")
    #expect(reporter._handle.node.s.stamp == 10, "and the stamp stays")
    map.update(Reporter.self, id: 1, modifiedAt: 3) { $0.name = "late event" }
    #expect(reporter.value.name == "local edit", "3 is older than 10")
    map.update(Reporter.self, id: 1, modifiedAt: 12) { $0.name = "event" }
    #expect(reporter.value.name == "event")
    #expect(reporter._handle.node.s.stamp == 12)
  }

  @Test func equalStampsAreRefusedUnlessTheTypeAcceptsThem() {
    let map = IdentityMap()
    let reporter = map.store(Reporter(id: 1, name: "A", updatedAt: 10))
    map.store(Reporter(id: 1, name: "same second", updatedAt: 10))
    #expect(reporter.value.name == "A")
    let coarse = map.store(Coarse(id: 1, text: "first", stamp: 10))
    map.store(Coarse(id: 1, text: "later arrival", stamp: 10))
    #expect(coarse.value.text == "later arrival")
    map.store(Coarse(id: 1, text: "older", stamp: 9))
    #expect(coarse.value.text == "later arrival")
  }

  @Test func aStaleStampedWriteIsLoggedWithItsOwnStamp() {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    let reporter = map.store(Reporter(id: 1, name: "A", updatedAt: 10))
    map.store(Reporter(id: 1, name: "B", updatedAt: 7), modifiedAt: 99)
    #expect(
      logger.events.contains(
        .discardedStale(
          .entity(EntityReference(Reporter.self, id: 1)), storedStamp: 10, incomingStamp: 7)))
    withExtendedLifetime(reporter) {}
  }

  @Test func aTransactionCarriesEachValuesOwnStamp() {
    let map = IdentityMap()
    let reporter = map.store(Reporter(id: 1, name: "A", updatedAt: 10))
    map.transaction { transaction in
      transaction.store(Reporter(id: 1, name: "stale", updatedAt: 5))
      transaction.store(Reporter(id: 1, name: "fresh", updatedAt: 11))
    }
    #expect(reporter.value.name == "fresh")
  }
}
