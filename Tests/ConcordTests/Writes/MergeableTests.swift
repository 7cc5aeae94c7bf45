import ConcordTesting
import TestSupport
import Testing

@testable import Concord

/// A user as the server sends it: list endpoints nest a stub without `name` and `bio`.
struct Member2: Mergeable, Equatable {
  var id: Int
  var login: String
  var name: String?
  var bio: String?

  static func merge(_ incoming: Member2, into stored: Member2) -> Member2 {
    incoming.keepingStoredValues(of: stored, whereNil: \.name, \.bio)
  }

  static func stub(_ id: Int, login: String = "ged") -> Member2 {
    Member2(id: id, login: login, name: nil, bio: nil)
  }

  static func full(_ id: Int, name: String = "Ged", bio: String = "Archmage") -> Member2 {
    Member2(id: id, login: "ged", name: name, bio: bio)
  }
}

/// An aggregate nesting partial users, twice as deep through `Thread`.
struct Post2: Aggregate, Equatable {
  var id: Int
  var author: Member2
  var mentions: [Member2]
  static var nestedEntities: [NestedEntity<Post2>] { [.init(\.author), .init(\.mentions)] }
}

struct Thread2: Aggregate, Equatable {
  var id: Int
  var posts: [Post2]
  static var nestedEntities: [NestedEntity<Thread2>] { [.init(\.posts)] }
}

/// A Mergeable aggregate: a stub repository leaves out its optional owner.
struct Repo2: Aggregate, Mergeable, Equatable {
  var id: Int
  var name: String
  var owner: Member2?
  static var nestedEntities: [NestedEntity<Repo2>] { [.init(\.owner)] }
  static func merge(_ incoming: Repo2, into stored: Repo2) -> Repo2 {
    incoming.keepingStoredValues(of: stored, whereNil: \.owner)
  }
}

/// A user at depth 1 and, through its posts, at depth 2.
struct Digest2: Aggregate, Equatable {
  var id: Int
  var featured: Member2
  var posts: [Post2]
  static var nestedEntities: [NestedEntity<Digest2>] { [.init(\.featured), .init(\.posts)] }
}

extension AliasKey where Value == Member2 {
  static var me: Self { .init("me") }
}

/// A status as a Mastodon timeline sends it: the viewer's `favourited` flag is missing from
/// some endpoints, and so is the account of a status nested in a boost; both merge.
struct Status2: Aggregate, Mergeable, Equatable {
  var id: String
  var text: String
  var favourited: Bool?
  var account: Member2?
  /// The boosted status; an array gives the recursive value its indirection.
  var boosted: [Status2] = []

  var reblog: Status2? {
    get { boosted.first }
    set { boosted = newValue.map { [$0] } ?? [] }
  }

  static var nestedEntities: [NestedEntity<Status2>] { [.init(\.account), .init(\.reblog)] }

  static func merge(_ incoming: Status2, into stored: Status2) -> Status2 {
    incoming.keepingStoredValues(of: stored, whereNil: \.favourited, \.account)
  }
}

@Suite("Mergeable: partial payloads merge into what is stored")
struct MergeableTests {
  @Test func aStubStoredDirectlyKeepsTheStoredFields() {
    let map = IdentityMap()
    let user = map.store(Member2.full(1))
    map.store(Member2(id: 1, login: "sparrowhawk", name: nil, bio: nil))
    #expect(user.value == Member2(id: 1, login: "sparrowhawk", name: "Ged", bio: "Archmage"))
  }

  @Test func aNestedStubKeepsTheStoredFieldsAtAnyDepth() {
    let map = IdentityMap()
    let user = map.store(Member2.full(1))
    let thread = map.store(
      Thread2(id: 1, posts: [Post2(id: 10, author: .stub(1), mentions: [.stub(2)])]))
    #expect(user.value.name == "Ged")
    #expect(thread.value.posts[0].author.name == "Ged", "the aggregate shows the merged user")
    #expect(map.find(Member2.self, id: 2)?.value == .stub(2), "a new stub is stored as it is")
  }

  @Test func everyWritingPathMerges() {
    let map = IdentityMap()
    let user = map.store(Member2.full(1))
    map.store([Member2.stub(1)])
    #expect(user.value.name == "Ged", "a batch merges")
    map.store(Member2.stub(1), named: .me)
    #expect(user.value.name == "Ged", "an alias merges")
    #expect(map.find(named: .me).value?.name == "Ged")
    map.transaction { $0.store(Member2.stub(1)) }
    #expect(user.value.name == "Ged", "a transaction merges")
    map.store(Post2(id: 1, author: .stub(1), mentions: []))
    #expect(user.value.name == "Ged", "a nested occurrence merges")
  }

  @Test func updateDoesNotMergeItsOwnEntity() {
    let map = IdentityMap()
    let user = map.store(Member2.full(1))
    map.update(Member2.self, id: 1) { $0.name = nil }
    #expect(user.value.name == nil, "the body started from the stored value: nil is meant")
    map.store(Member2.full(1, name: "Ged"), named: .me)
    map.update(named: AliasKey<Member2>.me) { $0.bio = nil }
    #expect(user.value.bio == nil, "nor does update(named:)")
  }

  @Test func entitiesNestedInAnUpdatesResultMerge() {
    let map = IdentityMap()
    let user = map.store(Member2.full(1))
    let post = map.store(Post2(id: 1, author: .full(1), mentions: []))
    map.update(Post2.self, id: 1) { $0.mentions = [.stub(1)] }
    #expect(user.value.name == "Ged")
    #expect(post.value.mentions[0].name == "Ged")
  }

  @Test func everyOccurrenceInOneWriteMergesTheWinnerLast() {
    let map = IdentityMap()
    // Both occurrences at depth 2; the later one wins, and neither wipes the other's fields,
    // though the user is new.
    let post = map.store(
      Post2(
        id: 1, author: Member2(id: 1, login: "a", name: "Ged", bio: nil),
        mentions: [Member2(id: 1, login: "b", name: nil, bio: "Archmage")]))
    let user = map.find(Member2.self, id: 1)!
    #expect(user.value == Member2(id: 1, login: "b", name: "Ged", bio: "Archmage"))
    #expect(post.value.author == user.value)
    #expect(post.value.mentions[0] == user.value)
  }

  @Test func aDeeperLosingOccurrenceIsMergedFirst() {
    let map = IdentityMap()
    // The featured user (depth 1) wins over the post's author (depth 2); the loser is merged
    // first, so its name survives where the winner has none.
    let digest = map.store(
      Digest2(
        id: 1, featured: Member2(id: 1, login: "winner", name: nil, bio: nil),
        posts: [
          Post2(id: 1, author: Member2(id: 1, login: "loser", name: "Ged", bio: nil), mentions: [])
        ]))
    let user = map.find(Member2.self, id: 1)!
    #expect(user.value == Member2(id: 1, login: "winner", name: "Ged", bio: nil))
    #expect(digest.value.posts[0].author == user.value)
  }

  @Test func aStaleOccurrenceIsRefusedBeforeAnyMerge() {
    let map = IdentityMap()
    let user = map.store(Member2.full(1), modifiedAt: 10)
    map.store(Member2(id: 1, login: "stale", name: "Stale", bio: nil), modifiedAt: 5)
    #expect(user.value == .full(1))
  }

  @Test func aMergeThatChangesNothingNotifiesNobody() {
    let map = IdentityMap()
    let user = map.store(Member2.full(1))
    let calls = Locked(0)
    let subscription = user.observe { _ in calls.increment() }
    map.store(Member2.stub(1))
    map.store(Post2(id: 1, author: .stub(1), mentions: [.stub(1)]))
    #expect(calls.value == 0)
    map.store(Member2(id: 1, login: "ged", name: "Sparrowhawk", bio: nil))
    #expect(calls.value == 1)
    #expect(user.value.bio == "Archmage")
    subscription.cancel()
  }

  @Test func aMergeableAggregateIsDecomposedFromTheMergedValue() {
    let map = IdentityMap()
    let repo = map.store(Repo2(id: 1, name: "earthsea", owner: .full(1)))
    map.store(Repo2(id: 1, name: "earthsea-renamed", owner: nil))
    #expect(repo.value.name == "earthsea-renamed")
    #expect(repo.value.owner?.name == "Ged", "the stored owner stays, and stays linked")
    map.update(Member2.self, id: 1) { $0.name = "Sparrowhawk" }
    #expect(repo.value.owner?.name == "Sparrowhawk")
    #expect(map.count == 2)
  }

  @Test func aMergeableAggregatesDeeperLosingOccurrenceIsMerged() {
    let map = IdentityMap()
    // A page holding a status without the viewer's flag, and a boost nesting the same status
    // with it: the status at depth 1 wins, the boost's copy at depth 2 is merged first.
    let page = map.store([
      Status2(id: "9", text: "hello", favourited: nil),
      Status2(id: "b1", text: "", boosted: [Status2(id: "9", text: "hello", favourited: true)]),
    ])
    let status = map.find(Status2.self, id: "9")!
    #expect(status.value.favourited == true, "the flag is not wiped, though the status is new")
    #expect(page.value[0] == status.value)
    #expect(page.value[1].reblog == status.value, "every occurrence shows the merged value")
    map._core._checkInvariants()
  }

  @Test func aMergedAggregateIsDecomposedFromEveryOccurrence() {
    let map = IdentityMap()
    // The winner has no account; the deeper copy does. The merged status nests the account,
    // which is stored on its own and stays linked.
    let page = map.store([
      Status2(id: "9", text: "hello", account: nil),
      Status2(
        id: "b1", text: "", boosted: [Status2(id: "9", text: "stale text", account: .full(1))]),
    ])
    let status = map.find(Status2.self, id: "9")!
    #expect(status.value.text == "hello", "the winner's fields prevail")
    #expect(status.value.account == .full(1))
    #expect(map.find(Member2.self, id: 1)?.value == .full(1))
    map.update(Member2.self, id: 1) { $0.name = "Sparrowhawk" }
    #expect(status.value.account?.name == "Sparrowhawk")
    #expect(page.value[0].account?.name == "Sparrowhawk")
    #expect(page.value[1].reblog?.account?.name == "Sparrowhawk")
    map._core._checkInvariants()
  }

  @Test func aMergedAggregateStoredAgainWithTheSameOccurrencesChangesNothing() {
    let map = IdentityMap()
    let page = [
      Status2(id: "9", text: "hello", favourited: nil),
      Status2(id: "b1", text: "", boosted: [Status2(id: "9", text: "hello", favourited: true)]),
    ]
    let held = map.store(page)
    let told = Locked(0)
    let subscription = held.observe { _ in told.increment() }
    map.store(page)
    #expect(told.value == 0)
    #expect(map.find(Status2.self, id: "9")?.value.favourited == true)
    withExtendedLifetime(subscription) {}
    map._core._checkInvariants()
  }

  @Test func anEqualStampWhoseMergeChangesNothingIsAQuietNoOp() {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    let user = map.store(Member2.full(1), modifiedAt: 3)
    logger.clear()
    map.store(Member2.stub(1), modifiedAt: 3)
    #expect(user.value == .full(1))
    #expect(logger.events.isEmpty, "not refused as stale: merged, it is the stored value")
  }
}
