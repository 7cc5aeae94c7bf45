import TestSupport
import Testing

@testable import Concord

/// A team nests its members: a parent of each.
struct Team: Aggregate, Equatable {
  var id: Int
  var members: [User]
  static var nestedEntities: [NestedEntity<Team>] { [.init(\.members)] }
}

@Suite("holders(of:id:): what keeps an entity alive")
struct HoldersTests {
  @Test("Nothing is reported for an entity the map does not have")
  func absent() {
    let map = IdentityMap()
    #expect(map.holders(of: User.self, id: 1) == nil)
    let removed = map.store(User(id: 1, name: "a"))
    map.remove(User.self, id: 1)
    #expect(map.holders(of: User.self, id: 1) == nil)
    #expect(removed.isRemoved)
  }

  @Test("Handles count once per handle object, and batch handles count for their elements")
  func handles() {
    let map = IdentityMap()
    let first = map.store(User(id: 1, name: "a"))
    let copy = first
    let second = map.find(User.self, id: 1)
    let batch = map.store([User(id: 1, name: "a"), User(id: 2, name: "b")])
    let holders = map.holders(of: User.self, id: 1)
    #expect(holders?.handles == 3)
    #expect(holders?.subscriptions == 0)
    #expect(map.holders(of: User.self, id: 2)?.handles == 1)
    #expect(holders?.description == "User(1): 3 handles")
    withExtendedLifetime((first, copy, second, batch)) {}
  }

  @Test("A handle dropped inside a write no longer counts, though its hold goes at the end")
  func droppedInsideAWrite() {
    let map = IdentityMap()
    let kept = map.store(User(id: 1, name: "a"))
    map.transaction { transaction in
      var dropped: EntityObserver<User>? = transaction.find(User.self, id: 1)
      #expect(map.holders(of: User.self, id: 1)?.handles == 2)
      dropped = nil
      #expect(map.holders(of: User.self, id: 1)?.handles == 1)
      #expect(map.statistics.handles == 1)
      withExtendedLifetime(dropped) {}
    }
    #expect(map.holders(of: User.self, id: 1)?.handles == 1)
    withExtendedLifetime(kept) {}
  }

  @Test("Subscriptions on the entity and on a batch containing it, until cancelled")
  func subscriptions() {
    let map = IdentityMap()
    let user = map.store(User(id: 1, name: "a"))
    let batch = map.store([User(id: 1, name: "a")])
    let one = user.observe { _ in }
    let two = batch.observe { _ in }
    let stream = user.values
    #expect(map.holders(of: User.self, id: 1)?.subscriptions == 3)
    #expect(map.holders(of: User.self, id: 1)?.handles == 2)
    one.cancel()
    #expect(map.holders(of: User.self, id: 1)?.subscriptions == 2)
    withExtendedLifetime((user, batch, two, stream)) {}
  }

  @Test("Aliases, single and collection, by name")
  func aliases() {
    let map = IdentityMap()
    map.store(User(id: 1, name: "a"), named: .currentUser)
    map.store([User(id: 1, name: "a")], named: .team)
    let holders = map.holders(of: User.self, id: 1)
    #expect(holders?.aliases == ["currentUser", "team"])
    #expect(holders?.handles == 0)
    #expect(holders?.description == #"User(1): alias "currentUser", alias "team""#)
    map.removeAlias(named: AliasKey<User>.currentUser)
    #expect(map.holders(of: User.self, id: 1)?.aliases == ["team"])
  }

  @Test("Parents are named, each once, on a nested REST shape")
  func parents() throws {
    let map = IdentityMap()
    let page = try Recorded.decode([GitHubIssue].self, Recorded.issuesPage)
    let held = map.store(page)
    let author = page[0].user
    let holders = try #require(map.holders(of: GitHubUser.self, id: author.id))
    let expected = Set(
      page.filter { $0.user.id == author.id || $0.assignees.contains { $0.id == author.id } }
        .map { EntityReference(GitHubIssue.self, id: $0.id) })
    #expect(Set(holders.parents) == expected)
    #expect(holders.parents.count == expected.count)
    #expect(holders.handles == 0)
    // The page's batch handle holds the issues themselves.
    #expect(map.holders(of: GitHubIssue.self, id: page[0].id)?.handles == 1)
    // An issue nesting the author three times (user and twice an assignee) counts once.
    var twice = page[0]
    twice.assignees = [author, author]
    map.store(twice)
    #expect(map.holders(of: GitHubUser.self, id: author.id)?.parents.count == expected.count)
    withExtendedLifetime(held) {}
  }

  @Test("Queries having it as a member, and optimistic layers over it")
  func queriesAndLayers() {
    let map = IdentityMap()
    let user = map.store(User(id: 1, name: "q1"))
    let everyone = map.query(User.self)
    let qs = map.query(User.self, filter: { $0.name.hasPrefix("q") })
    let byName = map.query(User.self, where: \.name, equals: "q1")
    #expect(map.holders(of: User.self, id: 1)?.queries == 3)
    #expect(map.holders(of: User.self, id: 1)?.handles == 1)
    let layer = map.optimistic { $0.update(User.self, id: 1) { $0.name = "p" } }
    let second = map.optimistic { $0.update(User.self, id: 1) { $0.name = "p2" } }
    let holders = map.holders(of: User.self, id: 1)
    #expect(holders?.optimisticLayers == 2)
    #expect(holders?.queries == 1)
    #expect(holders?.handles == 1)
    #expect(holders?.description == "User(1): 1 handle, 1 query, 2 optimistic layers")
    layer.rollback()
    second.commit()
    #expect(map.holders(of: User.self, id: 1)?.optimisticLayers == 0)
    withExtendedLifetime((user, everyone, qs, byName)) {}
  }

  /// `holders(of:id:)` reads under the shared lock: readers on two threads at once must not
  /// write anything, such as the set of a query's members that no write has needed yet (it
  /// did; ThreadSanitizer, in CI, reports the race this reaches).
  @Test("Readers asking at once, of entities queries hold, change nothing")
  func concurrentReadersOfQueryMembers() async {
    let map = IdentityMap()
    let users = map.store((1...200).map { User(id: $0, name: "q\($0)") })
    let queries = (0..<8).map { index in
      map.query(User.self, filter: { $0.id % 8 == index })
    }
    let counts = await withTaskGroup(of: Int.self) { group in
      for task in 0..<8 {
        group.addTask {
          var total = 0
          for id in stride(from: 1 + task, through: 200, by: 8) {
            total += map.holders(of: User.self, id: id)?.queries ?? -1_000
          }
          return total
        }
      }
      return await group.reduce(0, +)
    }
    #expect(counts == 200, "each user is a member of one query")
    let made = map._core.read {
      queries.filter { unsafeDowncast($0._handle.node, to: _QueryNode<User>.self).memberIDs != nil }
    }
    #expect(made.isEmpty, "no reader made a query's set of members")
    withExtendedLifetime((users, queries)) {}
  }

  @Test("The release buffer, alone")
  func buffer() {
    let map = IdentityMap(retention: .keepReleased(4))
    _ = map.store(User(id: 1, name: "a"))
    let holders = map.holders(of: User.self, id: 1)
    #expect(holders?.isRetainedByBuffer == true)
    #expect(holders?.isUnheld == true)
    #expect(holders?.description == "User(1): the release buffer")
    let held = map.find(User.self, id: 1)
    #expect(map.holders(of: User.self, id: 1)?.isRetainedByBuffer == false)
    withExtendedLifetime(held) {}
  }

  @Test(
    "Seeded random holds and releases: holders and statistics agree with a model",
    arguments: [1, 2, 3])
  func seededModel(seed: UInt64) {
    var generator = SeededGenerator(seed: seed &* 0x9E37_79B9)
    var world = HoldersWorld()
    for _ in 0..<max(300, randomSteps(share: 300)) {
      world.step(using: &generator)
      world.settle()
      world.check()
    }
  }
}

/// A map and a model of who holds what, for the seeded test.
private struct HoldersWorld {
  /// A node of a user: its id and the generation (each removal or release makes a new node).
  struct Node: Hashable {
    var id: Int
    var generation: Int
  }
  struct Held {
    var node: Node
    var handle: EntityObserver<User>?
  }
  struct Batch {
    var members: [Node]
    var handle: EntityObserver<[User]>?
    var subscriptions = 0
  }
  struct Watch {
    var node: Node?
    var batch: Int?
    var subscription: Subscription
  }

  let map = IdentityMap()
  /// The node of each id in the map, and its name.
  var live: [Int: (generation: Int, name: String)] = [:]
  var generations: [Int: Int] = [:]
  var held: [Held] = []
  var batches: [Batch] = []
  var watches: [Watch] = []
  var currentUser: Node?
  var team: [Node]?
  var teams: [(members: [Node], handle: EntityObserver<Team>)] = []
  var query: EntityObserver<[User]>?
  var nextTeam = 0

  mutating func node(_ id: Int) -> Node? {
    live[id].map { Node(id: id, generation: $0.generation) }
  }

  /// Writes `users` as the map would: each absent one becomes a new node.
  mutating func wrote(_ users: [User]) -> [Node] {
    users.map { user in
      if live[user.id] == nil {
        generations[user.id, default: 0] += 1
        live[user.id] = (generations[user.id]!, user.name)
      } else {
        live[user.id]!.name = user.name
      }
      return node(user.id)!
    }
  }

  mutating func step(using generator: inout SeededGenerator) {
    func user() -> User {
      let id = Int.random(in: 0..<8, using: &generator)
      return User(id: id, name: (Bool.random(using: &generator) ? "q" : "p") + String(id))
    }
    switch Int.random(in: 0..<16, using: &generator) {
    case 0, 1:
      let user = user()
      let handle = map.store(user)
      held.append(Held(node: wrote([user])[0], handle: handle))
    case 2:
      let id = Int.random(in: 0..<8, using: &generator)
      if let handle = map.find(User.self, id: id) {
        held.append(Held(node: node(id)!, handle: handle))
      }
    case 3:
      if !held.isEmpty { held.remove(at: Int.random(in: 0..<held.count, using: &generator)) }
    case 4:
      let users = (0..<Int.random(in: 1...3, using: &generator)).map { _ in user() }
      let handle = map.store(users)
      batches.append(Batch(members: wrote(users), handle: handle))
    case 5:
      if !batches.isEmpty {
        batches[Int.random(in: 0..<batches.count, using: &generator)].handle = nil
      }
    case 6:
      if Bool.random(using: &generator), let index = held.indices.randomElement(using: &generator),
        let handle = held[index].handle
      {
        watches.append(Watch(node: held[index].node, subscription: handle.observe { _ in }))
      } else if let index = batches.indices.randomElement(using: &generator),
        let handle = batches[index].handle
      {
        watches.append(Watch(batch: index, subscription: handle.observe { _ in }))
      }
    case 7:
      if let index = watches.indices.randomElement(using: &generator) {
        if Bool.random(using: &generator) {
          watches[index].subscription.cancel()
        }
        watches.remove(at: index)
      }
    case 8:
      let user = user()
      map.store(user, named: .currentUser)
      currentUser = wrote([user])[0]
    case 9:
      if Bool.random(using: &generator) {
        map.removeAlias(named: AliasKey<User>.currentUser)
        currentUser = nil
      } else {
        map.removeAlias(named: AliasKey<[User]>.team)
        team = nil
      }
    case 10:
      let users = (0..<Int.random(in: 0...2, using: &generator)).map { _ in user() }
      map.store(users, named: .team)
      team = wrote(users)
    case 11:
      nextTeam += 1
      let users = (0..<Int.random(in: 1...3, using: &generator)).map { _ in user() }
      let handle = map.store(Team(id: nextTeam, members: users))
      teams.append((wrote(users), handle))
    case 12:
      if !teams.isEmpty { teams.remove(at: Int.random(in: 0..<teams.count, using: &generator)) }
    case 13:
      query = query == nil ? map.query(User.self, filter: { $0.name.hasPrefix("q") }) : nil
    case 14:
      let id = Int.random(in: 0..<8, using: &generator)
      let name = (Bool.random(using: &generator) ? "q" : "p") + String(id)
      map.update(User.self, id: id) { $0.name = name }
      if live[id] != nil { live[id]!.name = name }
    default:
      let id = Int.random(in: 0..<8, using: &generator)
      map.remove(User.self, id: id)
      if let gone = node(id) { forget(gone) }
    }
  }

  /// The model's side of a removal or release: the node leaves every collection holding it.
  mutating func forget(_ gone: Node) {
    live[gone.id] = nil
    for index in batches.indices { batches[index].members.removeAll { $0 == gone } }
    for index in teams.indices { teams[index].members.removeAll { $0 == gone } }
    team?.removeAll { $0 == gone }
    if currentUser == gone { currentUser = nil }
  }

  /// Subscriptions on batch `index`.
  func watchers(ofBatch index: Int) -> Int { watches.filter { $0.batch == index }.count }

  /// The expected holders of `node`.
  func expected(_ node: Node) -> EntityHolders {
    let batchesHolding = batches.indices.filter {
      batches[$0].members.contains(node) && (batches[$0].handle != nil || watchers(ofBatch: $0) > 0)
    }
    let name = live[node.id]!.name
    return EntityHolders(
      entity: EntityReference(User.self, id: node.id),
      handles: held.filter { $0.node == node }.count
        + batchesHolding.filter { batches[$0].handle != nil }.count,
      subscriptions: watches.filter { $0.node == node }.count
        + batchesHolding.map(watchers(ofBatch:)).reduce(0, +),
      aliases: (currentUser == node ? ["currentUser"] : [])
        + (team?.contains(node) == true ? ["team"] : []),
      parents: teams.filter { $0.members.contains(node) }
        .map { EntityReference(Team.self, id: $0.handle.value.id) }
        .sorted { $0.id < $1.id },
      queries: query != nil && name.hasPrefix("q") ? 1 : 0, optimisticLayers: 0,
      isRetainedByBuffer: false)
  }

  /// Releases, in the model, every node nothing holds any more.
  mutating func settle() {
    for id in Array(live.keys) {
      if let node = node(id), expected(node).isUnheld { forget(node) }
    }
  }

  func check() {
    for id in 0..<8 {
      let actual = map.holders(of: User.self, id: id)
      if let node = live[id].map({ Node(id: id, generation: $0.generation) }) {
        #expect(actual == expected(node), "user \(id)")
      } else {
        #expect(actual == nil, "user \(id) should be gone")
      }
    }
    let statistics = map.statistics
    #expect(statistics.entitiesByType["User"] ?? 0 == live.count)
    #expect(statistics.entitiesByType["Team"] ?? 0 == teams.count)
    #expect(statistics.entities == live.count + teams.count)
    #expect(statistics.subscriptions == watches.count)
    #expect(
      statistics.handles
        == held.count + batches.filter { $0.handle != nil }.count + teams.count
        + (query == nil ? 0 : 1))
    #expect(statistics.aliases == (currentUser == nil ? 0 : 1) + (team == nil ? 0 : 1))
    #expect(statistics.queries == (query == nil ? 0 : 1))
    #expect(statistics.bufferedEntities == 0 && statistics.pendingLayers == 0)
    map._core.read { map._core._checkInvariants() }
  }
}
