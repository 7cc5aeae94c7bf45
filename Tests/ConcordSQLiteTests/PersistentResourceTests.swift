import Concord
import ConcordSQLite
import ConcordTesting
import Foundation
import TestSupport
import Testing

/// Ages survive restarts: a persisted type's answer (its ids and order, `fetchedAt`,
/// `validator`) is kept with its entities, so that a relaunch answers from the file.
@Suite("Persistence: resources' answers survive restarts")
struct PersistentResourceTests {
  static let inbox = ResourceKey<[Issue]>("repos/apple/swift/issues")
  static let me = ResourceKey<User>("user")
  let clock = ManualClock(now: Date(timeIntervalSince1970: 1_000))

  /// The inbox resource of `map`, whose loader answers `answer` (or throws when `nil`), and
  /// counts its calls in `calls`.
  func inbox(
    _ map: IdentityMap, policy: FetchPolicy = .cacheFirst, calls: Locked<[ResourceRequest]>,
    answer: @escaping @Sendable () -> Fetched<[Issue]>?
  ) -> Resource<[Issue]> {
    map.resource(
      Self.inbox, policy: policy, staleAfter: .seconds(60), retry: .none
    ) { request in
      calls.append(request)
      guard let fetched = answer() else { throw URLError(.notConnectedToInternet) }
      return fetched
    }
  }

  /// A first launch that fetches `issues` with validator `v1` and flushes.
  func firstLaunch(_ directory: TemporaryDirectory, _ issues: [Issue]) async throws {
    let map = try launch(directory.database, clock: clock)
    let inbox = inbox(map, calls: Locked([])) { .value(issues, validator: "\"v1\"") }
    try await inbox.load()
    try map.flush()
  }

  @Test("While fresh, a relaunch answers from the file without a fetch: ids, order, fetchedAt")
  func freshAfterRelaunch() async throws {
    let directory = TemporaryDirectory()
    try await firstLaunch(directory, [Issue.make(3), Issue.make(1), Issue.make(2)])
    clock.advance(by: .seconds(30))
    let map = try launch(directory.database, clock: clock)
    let calls = Locked<[ResourceRequest]>([])
    let inbox = inbox(map, calls: calls) { nil }
    let state = inbox.state
    #expect(state.value?.map(\.id) == [3, 1, 2], "in the state at once")
    #expect(state.fetchedAt == Date(timeIntervalSince1970: 1_000) && !state.isStale)
    #expect(try await inbox.load().map(\.id) == [3, 1, 2])
    #expect(calls.value.isEmpty, "no fetch while fresh")
    #expect(inbox.state.value?.first?.labels.map(\.name) == ["bug", "area 0"], "entities whole")
    // The entities are the map's: a write reaches the answer.
    map.store(Issue.make(1, title: "Renamed", at: 5))
    #expect(inbox.state.value?[1].title == "Renamed")
  }

  @Test("Stale after a relaunch: returned at once, then refreshed, with the stored validator")
  func staleAfterRelaunch() async throws {
    let directory = TemporaryDirectory()
    try await firstLaunch(directory, [Issue.make(1), Issue.make(2)])
    clock.advance(by: .seconds(600))
    let map = try launch(directory.database, clock: clock)
    let calls = Locked<[ResourceRequest]>([])
    let inbox = inbox(map, calls: calls) { .notModified }
    #expect(inbox.state.isStale)
    #expect(try await inbox.load().map(\.id) == [1, 2], "at once")
    await eventually { !inbox.state.isLoading }
    #expect(calls.value.map(\.validator) == ["\"v1\""])
    #expect(inbox.state.fetchedAt == clock.now && !inbox.state.isStale)
  }

  @Test("Offline, cacheOnly answers with what the store has")
  func cacheOnlyOffline() async throws {
    let directory = TemporaryDirectory()
    try await firstLaunch(directory, [Issue.make(1)])
    clock.advance(by: .seconds(86_400))
    let map = try launch(directory.database, clock: clock)
    let calls = Locked<[ResourceRequest]>([])
    let inbox = inbox(map, policy: .cacheOnly, calls: calls) { nil }
    #expect(try await inbox.load().map(\.id) == [1])
    #expect(calls.value.isEmpty)
    await #expect(throws: URLError.self) { try await inbox.refresh() }
    #expect(inbox.state.value?.map(\.id) == [1], "a failed fetch keeps the answer")
  }

  @Test("A .notModified persists the moved fetchedAt")
  func notModifiedPersistsTheAge() async throws {
    let directory = TemporaryDirectory()
    try await firstLaunch(directory, [Issue.make(1)])
    clock.advance(by: .seconds(100))
    do {
      let map = try launch(directory.database, clock: clock)
      let inbox = inbox(map, calls: Locked([])) { .notModified }
      try await inbox.refresh()
      #expect(inbox.state.fetchedAt == Date(timeIntervalSince1970: 1_100))
      try map.flush()
    }
    clock.advance(by: .seconds(30))
    let map = try launch(directory.database, clock: clock)
    let calls = Locked<[ResourceRequest]>([])
    let inbox = inbox(map, calls: calls) { nil }
    #expect(inbox.state.fetchedAt == Date(timeIntervalSince1970: 1_100) && !inbox.state.isStale)
    #expect(try await inbox.load().map(\.id) == [1])
    #expect(calls.value.isEmpty)
  }

  @Test("An entity removed since leaves the answer after a relaunch")
  func removedEntityLeaves() async throws {
    let directory = TemporaryDirectory()
    try await firstLaunch(directory, [Issue.make(1), Issue.make(2), Issue.make(3)])
    do {
      let map = try launch(directory.database, clock: clock)
      map.remove(Issue.self, id: 2)
      try map.flush()
    }
    let map = try launch(directory.database, clock: clock)
    #expect(inbox(map, calls: Locked([])) { nil }.state.value?.map(\.id) == [1, 3])
  }

  @Test("A single answer survives; removed, it comes back nil and stale")
  func singleAnswer() async throws {
    let directory = TemporaryDirectory()
    func me(_ map: IdentityMap) -> Resource<User> {
      map.resource(Self.me, staleAfter: .seconds(60)) {
        User(id: 7, login: "ged", name: "Ged", updatedAt: 1)
      }
    }
    do {
      let map = try launch(directory.database, clock: clock)
      try await me(map).load()
      try map.flush()
    }
    do {
      let map = try launch(directory.database, clock: clock)
      let state = me(map).state
      #expect(state.value?.name == "Ged" && !state.isStale)
      map.remove(User.self, id: 7)
      try map.flush()
    }
    let map = try launch(directory.database, clock: clock)
    let state = me(map).state
    #expect(state.value == nil && state.isStale && state.fetchedAt != nil)
  }

  @Test("A resource let go answers from the store again, before and after the writer applies it")
  func letGoAnswersFromTheStore() async throws {
    let store = MemoryStore()
    let map = IdentityMap(persistence: store, clock: clock)
    map.persist(Issue.self)
    map.persist(User.self)
    map.persist(Label.self)
    map.persist(Milestone.self)
    let calls = Locked<[ResourceRequest]>([])
    func inbox() -> Resource<[Issue]> {
      map.resource(Self.inbox, staleAfter: .seconds(60), keepFor: .zero) { request in
        calls.append(request)
        return .value([Issue.make(4), Issue.make(5)], validator: "\"v9\"")
      }
    }
    store.isFailing.withValue { $0 = true }  // the writer keeps everything, unapplied
    do { _ = try await inbox().load() }
    await eventually { map.statistics.aliases == 0 }
    #expect(map.find(Issue.self, id: 4) != nil, "read back from the changes not yet applied")
    #expect(inbox().state.value?.map(\.id) == [4, 5], "from the changes not yet applied")
    await eventually { map.statistics.aliases == 0 }
    store.isFailing.withValue { $0 = false }
    #expect(throws: MemoryStore.Failure.self) { try map.flush() }  // the failure, once
    try map.flush()
    #expect(store.aliases.value.count == 1, "the answer's record is in the store")
    let again = inbox()
    #expect(again.state.value?.map(\.id) == [4, 5], "from the store")
    #expect(again.state.fetchedAt == Date(timeIntervalSince1970: 1_000))
    #expect(try await again.load().map(\.id) == [4, 5])
    #expect(calls.value.count == 1)
  }

  @Test("The answers of a type that is not persisted are not")
  func notPersistedType() async throws {
    struct Draft: Identifiable, Codable, Sendable { var id: Int }
    let directory = TemporaryDirectory()
    do {
      let map = try launch(directory.database, clock: clock)
      try await map.resource(ResourceKey<[Draft]>("drafts")) { [Draft(id: 1)] }.load()
      try map.flush()
    }
    let map = try launch(directory.database, clock: clock)
    #expect(map.resource(ResourceKey<[Draft]>("drafts")) { [] }.state.value == nil)
  }

  @Test("Keys with one name and two value types keep two records")
  func twoValueTypes() async throws {
    let directory = TemporaryDirectory()
    do {
      let map = try launch(directory.database, clock: clock)
      try await map.resource(ResourceKey<Issue>("x")) { Issue.make(1) }.load()
      try await map.resource(ResourceKey<[Issue]>("x")) { [Issue.make(2), Issue.make(3)] }.load()
      try map.flush()
    }
    let map = try launch(directory.database, clock: clock)
    #expect(map.resource(ResourceKey<Issue>("x")) { Issue.make(0) }.state.value?.id == 1)
    #expect(
      map.resource(ResourceKey<[Issue]>("x")) { [] }.state.value?.map(\.id) == [2, 3])
  }

  @Test("removeAll() and reset() delete the answers' records")
  func removeAllDeletesAnswers() async throws {
    for reset in [false, true] {
      let directory = TemporaryDirectory()
      try await firstLaunch(directory, [Issue.make(1)])
      do {
        let map = try launch(directory.database, clock: clock)
        if reset { try map.reset() } else { map.removeAll() }
        try map.flush()
      }
      let map = try launch(directory.database, clock: clock)
      #expect(inbox(map, calls: Locked([])) { nil }.state.value == nil)
    }
  }

  @Test("A restore invalidates every resource: its next load fetches it again")
  func restoreInvalidates() async throws {
    let directory = TemporaryDirectory()
    let map = try launch(directory.database, clock: clock)
    let calls = Locked<[ResourceRequest]>([])
    let inbox = inbox(map, calls: calls) { .value([Issue.make(1), Issue.make(2)]) }
    try await inbox.load()
    let slot = directory.path + "/slot.sqlite"
    try map.save(to: slot)
    map.store(Issue.make(1, title: "played", at: 5))
    try map.restore(from: slot)
    #expect(inbox.state.isStale, "invalidated")
    #expect(inbox.state.value?.first?.title == Issue.make(1).title, "the snapshot's entity")
    // NB: stale-while-revalidate: the load answers at once and fetches in the background.
    try await inbox.load()
    await eventually { calls.value.count == 2 && !inbox.state.isStale }
    #expect(calls.value.count == 2, "fetched again")
  }

  @Test("A failed fetch changes nothing in the store")
  func failedFetchKeepsTheRecord() async throws {
    let directory = TemporaryDirectory()
    try await firstLaunch(directory, [Issue.make(1)])
    clock.advance(by: .seconds(600))
    do {
      let map = try launch(directory.database, clock: clock)
      await #expect(throws: URLError.self) {
        try await inbox(map, calls: Locked([])) { nil }.refresh()
      }
      try map.flush()
    }
    let map = try launch(directory.database, clock: clock)
    let state = inbox(map, calls: Locked([])) { nil }.state
    #expect(state.value?.map(\.id) == [1] && state.fetchedAt == Date(timeIntervalSince1970: 1_000))
  }
}
