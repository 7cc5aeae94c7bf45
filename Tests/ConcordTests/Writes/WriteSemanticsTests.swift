import ConcordTesting
import TestSupport
import Testing

@testable import Concord

/// A profile whose `==` compares ids only, as app code often does.
struct Profile: Identifiable, Sendable, Equatable {
  var id: Int
  var name: String
  static func == (lhs: Profile, rhs: Profile) -> Bool { lhs.id == rhs.id }
}

/// An aggregate holding such a profile.
struct Card: Aggregate, Equatable {
  var id: Int
  var profile: Profile
  static var nestedEntities: [NestedEntity<Card>] { [.init(\.profile)] }
}

/// The map a `Meddler`'s `==` reads or writes.
let meddlingMap = Locked<IdentityMap?>(nil)
/// What a `Meddler`'s `==` does with `meddlingMap`: read its count, or write to it.
let meddlingWrites = Locked(false)

/// A value whose `==` uses the map it is stored in: reading works, writing stops the program.
struct Meddler: Identifiable, Sendable, Equatable {
  var id: Int
  var text: String
  static func == (lhs: Meddler, rhs: Meddler) -> Bool {
    if meddlingWrites.value {
      meddlingMap.value?.store(Author(id: 99, name: "meddling"))
    } else {
      _ = meddlingMap.value?.count
    }
    return lhs.id == rhs.id && lhs.text == rhs.text
  }
}

extension Member {
  /// How many members deep the value nests: 1 for a member without friends.
  var nestingDepth: Int { 1 + (friends.map(\.nestingDepth).max() ?? 0) }
}

/// What a write means at its edges: writes that change nothing (cycles, equal stamps, loose
/// `==`), what a transaction tells when it ends where it started or throws, alias stamps after
/// `removeAll`, and code the map calls mid-write that reads or writes the map. (Each test
/// failed on wave 1's engine, which broke its own contract in these seven places.)
@Suite("Write semantics: no-op writes, loose equality, transactions' ends, code called mid-write")
struct WriteSemanticsTests {
  // MARK: 1. Cycles by identity

  @Test func aClosedCycleKeepsItsDepthAndNoOpWritesNotifyNobody() {
    let map = IdentityMap()
    let a = map.store(Member(id: 1, name: "a", friends: []))
    let b = map.store(Member(id: 2, name: "b", friends: [a.value]))
    map.update(Member.self, id: 1) { $0.friends = [b.value] }
    let depth = a.value.nestingDepth
    #expect(depth == 3, "1[2[1-cut]]: the closing write keeps the shape it was given")
    #expect(b.value.nestingDepth == 3)
    #expect(a.value.friends[0].friends[0].friends.isEmpty, "the repeated member is cut")
    let calls = Locked(0)
    let subscriptions = [
      a.observe { _ in calls.increment() }, b.observe { _ in calls.increment() },
    ]
    for _ in 0..<2_000 { map.update(Member.self, id: 1) { _ in } }
    #expect(a.value.nestingDepth == depth)
    #expect(b.value.nestingDepth == depth)
    #expect(calls.value == 0, "a write that changes nothing notifies nobody")
    map.update(Member.self, id: 2) { $0.name = "B" }
    #expect(a.value.friends[0].name == "B")
    #expect(calls.value == 2)
    withExtendedLifetime(subscriptions) {}
  }

  @Test func aRingOfFiftyStaysBoundedUnderNoOpWrites() {
    let map = IdentityMap()
    let ring = (0..<50).map { map.store(Member(id: $0, name: "\($0)", friends: [])) }
    for id in 0..<50 {
      map.update(Member.self, id: id) { $0.friends = [ring[(id + 1) % 50].value] }
    }
    let depths = ring.map(\.value.nestingDepth)
    #expect(depths.allSatisfy { $0 <= 51 }, "each member appears at most once per path")
    let calls = Locked(0)
    let subscription = ring[0].observe { _ in calls.increment() }
    for round in 0..<200 { map.update(Member.self, id: round % 50) { _ in } }
    #expect(ring.map(\.value.nestingDepth) == depths)
    #expect(calls.value == 0)
    map.update(Member.self, id: 25) { $0.name = "renamed" }
    var member = ring[0].value
    while member.id != 25 { member = member.friends[0] }
    #expect(member.name == "renamed", "a change still travels around the ring")
    #expect(calls.value == 1)
    subscription.cancel()
  }

  // MARK: 2. An id-only `==`

  @Test func anIdOnlyEqualityNeverLosesAWrite() {
    let map = IdentityMap()
    let card = map.store(Card(id: 1, profile: Profile(id: 7, name: "old")))
    let calls = Locked(0)
    let subscription = card.observe { _ in calls.increment() }
    map.store(Profile(id: 7, name: "new"))
    #expect(map.find(Profile.self, id: 7)?.value.name == "new")
    #expect(card.value.profile.name == "new", "the aggregate agrees with find")
    map.update(Card.self, id: 1) { _ in }
    #expect(map.find(Profile.self, id: 7)?.value.name == "new", "no older copy is written back")
    #expect(calls.value == 0, "`==` said nothing changed, so nobody was told")
    subscription.cancel()
  }

  // MARK: 3 and 4. Alias stamps

  @Test func removeAllForgetsAnObservedAliasStamp() {
    let map = IdentityMap()
    let me = map.store(User(id: 1, name: "Ged"), named: .currentUser, modifiedAt: 10)
    let subscription = me.observe { _ in }
    map.removeAll()
    map.store(User(id: 2, name: "Tenar"), named: .currentUser, modifiedAt: 5)
    #expect(me.value?.name == "Tenar")
    subscription.cancel()
  }

  @Test(arguments: [false, true])
  func anAliasEmptiedByRemovalForgetsItsStampWhetherObservedOrNot(observed: Bool) {
    let map = IdentityMap()
    let me = map.store(User(id: 1, name: "Ged"), named: .currentUser, modifiedAt: 10)
    let subscription = observed ? me.observe { _ in } : nil
    let handle = observed ? me : nil
    map.remove(User.self, id: 1)
    #expect(map.find(named: AliasKey<User>.currentUser).value == nil)
    map.store(User(id: 2, name: "Tenar"), named: .currentUser, modifiedAt: 5)
    #expect(map.find(named: AliasKey<User>.currentUser).value?.name == "Tenar")
    subscription?.cancel()
    withExtendedLifetime(handle) {}
  }

  // MARK: 5. Writes that end where they started

  @Test func aTransactionThatEndsWhereItStartedNotifiesNoEquatableSubscriber() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    let shelf = map.store(Shelf.make(1, owner: Author(id: 1, name: "A")))
    let calls = Locked(0)
    let subscriptions = [
      author.observe { _ in calls.increment() }, shelf.observe { _ in calls.increment() },
    ]
    map.transaction { transaction in
      transaction.update(Author.self, id: 1) { $0.name = "B" }
      transaction.update(Author.self, id: 1) { $0.name = "A" }
    }
    #expect(calls.value == 0)
    withExtendedLifetime(subscriptions) {}
  }

  @Test func anUpdateThatUndoesItsBodysNestedUpdateNotifiesNobody() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    let calls = Locked(0)
    let subscription = author.observe { _ in calls.increment() }
    map.update(Author.self, id: 1) { author in
      map.update(Author.self, id: 1) { $0.name = "nested" }
      author.name = "A"
    }
    #expect(author.value.name == "A")
    #expect(calls.value == 0)
    subscription.cancel()
  }

  // MARK: 6 and 7. Subscriptions opened inside a transaction body

  @Test func theCurrentValueAskedForInsideABodyThatThrowsIsTheCommittedOne() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    let received = Locked<[String]>([])
    let subscription = Locked<Subscription?>(nil)
    try? map.transaction { transaction in
      transaction.update(Author.self, id: 1) { $0.name = "uncommitted" }
      subscription.withValue {
        $0 = author.observe(includingCurrentValue: true) { received.append($0.name) }
      }
      #expect(received.value.isEmpty, "nothing is delivered with the lock held")
      throw Rejected()
    }
    #expect(received.value == ["A"], "the value delivered is the one committed")
    subscription.value?.cancel()
  }

  @Test func theCurrentValueAskedForInsideABodyIsDeliveredOnceAtCommit() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    let received = Locked<[String]>([])
    let subscription = map.transaction { transaction in
      let subscription = author.observe(includingCurrentValue: true) { received.append($0.name) }
      transaction.update(Author.self, id: 1) { $0.name = "B" }
      return subscription
    }
    #expect(received.value == ["B"])
    subscription.cancel()
  }

  @Test func aSubscriptionOpenedAfterAWriteInTheBodyHearsOfItAtCommit() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    let received = Locked<[String]>([])
    let subscription = map.transaction { transaction in
      transaction.update(Author.self, id: 1) { $0.name = "B" }
      return author.observe { received.append($0.name) }
    }
    #expect(received.value == ["B"])
    subscription.cancel()
  }

  // MARK: Also seen

  @Test func aBatchHandleFromARolledBackTransactionShowsOnlyWhatExists() {
    let map = IdentityMap()
    let kept = map.store(Author(id: 1, name: "A"))
    let escaped = Locked<EntityObserver<[Author]>?>(nil)
    try? map.transaction { transaction in
      escaped.withValue {
        $0 = transaction.store([Author(id: 1, name: "A2"), Author(id: 2, name: "new")])
      }
      throw Rejected()
    }
    #expect(map.find(Author.self, id: 2) == nil)
    #expect(escaped.value?.value.map(\.name) == ["A"], "the batch agrees with find")
    map.update(Author.self, id: 1) { $0.name = "A3" }
    #expect(escaped.value?.value.map(\.name) == ["A3"], "and keeps following what is left")
    withExtendedLifetime(kept) {}
  }

  @Test func aChangeThenARemovalInOneTransactionNeverShowsTheIntermediateValue() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    let received = Locked<[String]>([])
    let subscription = author.observe { received.append($0.name) }
    map.transaction { transaction in
      transaction.update(Author.self, id: 1) { $0.name = "intermediate" }
      transaction.remove(Author.self, id: 1)
    }
    #expect(received.value.isEmpty)
    #expect(author.isRemoved)
    subscription.cancel()
  }

  @Test func anEqualStampWithAnEqualValueIsAQuietNoOp() {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    let author = map.store(Author(id: 1, name: "A"), modifiedAt: 5)
    logger.clear()
    map.store(Author(id: 1, name: "A"), modifiedAt: 5)
    #expect(logger.events.isEmpty, "not refused as stale, not logged")
    map.store(Author(id: 1, name: "B"), modifiedAt: 5)
    #expect(author.value.name == "A")
    #expect(logger.events.count == 1, "a different value with an equal stamp is stale")
  }

  @Test func codeTheMapCallsMidWriteMayReadTheMap() {
    let map = IdentityMap()
    meddlingMap.withValue { $0 = map }
    defer { meddlingMap.withValue { $0 = nil } }
    let meddler = map.store(Meddler(id: 1, text: "a"))
    map.store(Meddler(id: 1, text: "b"))
    #expect(meddler.value.text == "b")
  }

  @Test func codeTheMapCallsMidWriteThatWritesStopsTheProgram() async {
    await #expect(processExitsWith: .failure) {
      let map = IdentityMap()
      meddlingMap.withValue { $0 = map }
      meddlingWrites.withValue { $0 = true }
      let meddler = map.store(Meddler(id: 1, text: "a"))
      map.store(Meddler(id: 1, text: "b"))
      withExtendedLifetime(meddler) {}
    }
  }

  @Test func aMapDroppedWhileAHandleLivesStaysSafe() async {
    var map: IdentityMap? = IdentityMap()
    let author = map!.store(Author(id: 1, name: "A"))
    let received = Locked<[String]>([])
    let subscription = author.observe(includingCurrentValue: true) { received.append($0.name) }
    map = nil
    #expect(author.value.name == "A")
    #expect(!author.isRemoved)
    var names: [String] = []
    for await value in author.values {
      names.append(value.name)
      break
    }
    #expect(names == ["A"])
    #expect(received.value == ["A"])
    subscription.cancel()
  }
}
