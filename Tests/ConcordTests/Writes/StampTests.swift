import ConcordTesting
import Foundation
import TestSupport
import Testing

@testable import Concord

@Suite("Modification stamps")
struct StampTests {
  @Test func unstampedWritesAlwaysApply() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"), modifiedAt: 10)
    map.store(Author(id: 1, name: "B"))
    #expect(author.value.name == "B")
  }

  @Test func unstampedWriteKeepsTheRecordedStamp() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"), modifiedAt: 10)
    map.store(Author(id: 1, name: "B"))
    map.store(Author(id: 1, name: "stale"), modifiedAt: 5)
    #expect(author.value.name == "B")
  }

  @Test func newerStampApplies() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"), modifiedAt: 10)
    map.store(Author(id: 1, name: "B"), modifiedAt: 11)
    #expect(author.value.name == "B")
  }

  @Test(arguments: [5.0, 10.0])
  func olderOrEqualStampIsDiscardedAndHandleShowsStoredValue(stamp: Stamp) {
    let map = IdentityMap()
    let current = map.store(Author(id: 1, name: "current"), modifiedAt: 10)
    let returned = map.store(Author(id: 1, name: "stale"), modifiedAt: stamp)
    #expect(returned.value.name == "current")
    #expect(current.value.name == "current")
  }

  @Test func discardedWriteNotifiesNobody() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"), modifiedAt: 10)
    let received = Locked<[String]>([])
    let subscription = author.observe { received.append($0.name) }
    map.store(Author(id: 1, name: "stale"), modifiedAt: 9)
    map.update(Author.self, id: 1, modifiedAt: 10) { $0.name = "equal" }
    #expect(received.value.isEmpty)
    subscription.cancel()
  }

  @Test func staleUpdateDoesNotRunItsBodyButReportsPresence() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"), modifiedAt: 10)
    var ran = false
    let found = map.update(Author.self, id: 1, modifiedAt: 3) { _ in ran = true }
    #expect(found)
    #expect(!ran)
    #expect(author.value.name == "A")
  }

  @Test func firstStampOnAnUnstampedEntityApplies() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    map.store(Author(id: 1, name: "B"), modifiedAt: -1_000)
    #expect(author.value.name == "B")
  }

  @Test func nanStampIsRefusedByAnyStampedValue() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"), modifiedAt: -.infinity)
    map.store(Author(id: 1, name: "nan"), modifiedAt: .nan)
    #expect(author.value.name == "A")
  }

  @Test func nanStampAppliesToAnUnstampedValueButIsNeverRecorded() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    map.store(Author(id: 1, name: "nan"), modifiedAt: .nan)
    #expect(author.value.name == "nan")
    // Had NaN been recorded, it would refuse this one (NaN compares false with everything).
    map.store(Author(id: 1, name: "stamped"), modifiedAt: 1)
    #expect(author.value.name == "stamped")
    #expect(author._handle.node.s.stamp == 1)
  }

  @Test func nanStampOnANewEntityCreatesItWithoutAStamp() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"), modifiedAt: .nan)
    #expect(author.value.name == "A")
    #expect(author._handle.node.s.stamp.isNaN)
    map.store(Author(id: 1, name: "B"), modifiedAt: 0)
    #expect(author.value.name == "B")
  }

  @Test func infiniteStamps() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"), modifiedAt: -.infinity)
    map.store(Author(id: 1, name: "finite"), modifiedAt: -1e300)
    #expect(author.value.name == "finite")
    map.store(Author(id: 1, name: "forever"), modifiedAt: .infinity)
    map.store(Author(id: 1, name: "too late"), modifiedAt: .greatestFiniteMagnitude)
    map.store(Author(id: 1, name: "equal"), modifiedAt: .infinity)
    #expect(author.value.name == "forever")
    map.store(Author(id: 1, name: "unstamped"))
    #expect(author.value.name == "unstamped", "nil always applies, even over +infinity")
  }

  @Test func staleWriteIsLoggedWithBothStamps() {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    let author = map.store(Author(id: 1, name: "A"), modifiedAt: 10)
    map.store(Author(id: 1, name: "B"), modifiedAt: 4)
    map.store(Author(id: 1, name: "C"), modifiedAt: .nan)
    let stale = logger.events.compactMap { event -> (Stamp, Stamp)? in
      guard event.target == .entity(EntityReference(Author.self, id: 1)),
        let stored = event.storedStamp, let incoming = event.incomingStamp
      else { return nil }
      return (stored, incoming)
    }
    #expect(stale.count == 2)
    #expect(stale.first?.0 == 10 && stale.first?.1 == 4)
    #expect(stale.last?.0 == 10 && stale.last?.1.isNaN == true)
    withExtendedLifetime(author) {}
  }

  @Test func anEntityNobodyHoldsForgetsItsStampWithIt() {
    let map = IdentityMap()
    map.store(Author(id: 1, name: "released"), modifiedAt: 10)
    let returned = map.store(Author(id: 1, name: "older, but first again"), modifiedAt: 5)
    #expect(returned.value.name == "older, but first again")
  }

  @Test func dateStampIsSecondsSince1970() {
    let date = Date(timeIntervalSince1970: 1_700_000_000.5)
    #expect(date.stamp == 1_700_000_000.5)
  }
}
