import Concord
import ConcordSQLite
import ConcordTesting
import Foundation
import TestSupport
import Testing

/// A cursor as a client might keep one: GitHub's `Link` URL with the page it names.
private struct LinkCursor: Codable, Sendable, Equatable {
  var url: URL
  var page: Int
}

/// A GitHub-style server of issues `highest` down to 1, newest first, two a page: an older
/// page's cursor is its index from the top; a newer one's, the newest issue the client has.
private struct IssuePages: Sendable {
  var highest: Int

  func page(_ request: PageRequest<LinkCursor>) -> Page<Issue, LinkCursor> {
    let base = "https://api.github.com/repos/apple/swift/issues"
    if request.isNewer {
      let since = request.cursor!.page
      let ids = since < highest ? Array((since + 1...highest).reversed()) : []
      return Page(
        ids.map { Issue.make($0) }, older: nil,
        newer: LinkCursor(url: URL(string: "\(base)?since=\(highest)")!, page: highest))
    }
    let index = request.cursor?.page ?? 0
    let top = highest - index * 2
    let ids = top >= 1 ? Array((max(top - 1, 1)...top).reversed()) : []
    let older =
      (ids.last ?? 1) > 1
      ? LinkCursor(url: URL(string: "\(base)?page=\(index + 2)")!, page: index + 1) : nil
    return Page(
      ids.map { Issue.make($0) }, older: older,
      newer: LinkCursor(url: URL(string: "\(base)?since=\(top)")!, page: top))
  }
}

/// Paged lists survive restarts: for a persisted type, every page loaded (its ids, in order),
/// the cursors, `hasOlder` and when the head was fetched are kept with the entities.
@Suite("Persistence: paged lists survive restarts")
struct PersistentPagedListTests {
  static let key = ResourceKey<[Issue]>("repos/apple/swift/issues")
  let clock = ManualClock(now: Date(timeIntervalSince1970: 1_000))

  /// The issues list of `map`: its loader records each request, and answers from `answer`
  /// (throws when it gives `nil`).
  fileprivate func issues(
    _ map: IdentityMap, requests: Locked<[String]>,
    answer: @escaping @Sendable (PageRequest<LinkCursor>) -> Page<Issue, LinkCursor>?
  ) -> PagedResource<Issue, LinkCursor> {
    map.pagedResource(Self.key, staleAfter: .seconds(60), retry: .none) { request in
      requests.append(
        request.isOlder ? "older \(request.cursor!.page)" : request.isNewer ? "newer" : "first")
      guard let page = answer(request) else { throw URLError(.notConnectedToInternet) }
      return page
    }
  }

  /// A first launch that loads issues 9…4 (three pages of two) and flushes.
  func firstLaunch(_ directory: TemporaryDirectory) async throws {
    let map = try launch(directory.database, clock: clock)
    let list = issues(map, requests: Locked([])) { IssuePages(highest: 9).page($0) }
    try await list.load()
    try await list.loadOlder()
    try await list.loadOlder()
    #expect(list.state.items.map(\.id) == [9, 8, 7, 6, 5, 4])
    try map.flush()
  }

  @Test("While fresh, a relaunch shows every page, in order, with hasOlder, and fetches nothing")
  func freshAfterRelaunch() async throws {
    let directory = TemporaryDirectory()
    try await firstLaunch(directory)
    clock.advance(by: .seconds(30))
    let map = try launch(directory.database, clock: clock)
    let requests = Locked<[String]>([])
    let list = issues(map, requests: requests) { IssuePages(highest: 9).page($0) }
    let state = list.state
    #expect(state.items.map(\.id) == [9, 8, 7, 6, 5, 4], "in the state at once")
    #expect(state.hasOlder && !state.isStale)
    #expect(state.fetchedAt == Date(timeIntervalSince1970: 1_000))
    #expect(state.items.first?.labels.map(\.name) == ["bug", "area 0"], "entities whole")
    #expect(try await list.load().count == 6 && requests.value.isEmpty, "no fetch while fresh")
    // The stored cursor: the next page is the fourth.
    try await list.loadOlder()
    #expect(requests.value == ["older 3"])
    #expect(list.state.items.map(\.id) == [9, 8, 7, 6, 5, 4, 3, 2])
    // The entities are the map's: a write reaches the list.
    map.store(Issue.make(5, title: "Renamed", at: 5))
    #expect(list.state.items[4].title == "Renamed")
  }

  @Test("Stale after a relaunch: shown at once, then refreshed with the stored newer cursor")
  func staleAfterRelaunch() async throws {
    let directory = TemporaryDirectory()
    try await firstLaunch(directory)
    clock.advance(by: .seconds(600))
    let map = try launch(directory.database, clock: clock)
    let requests = Locked<[String]>([])
    let list = issues(map, requests: requests) { IssuePages(highest: 11).page($0) }
    #expect(list.state.isStale)
    #expect(try await list.load().map(\.id) == [9, 8, 7, 6, 5, 4], "at once")
    await eventually { !list.state.isLoading }
    #expect(requests.value == ["newer"])
    #expect(list.state.items.map(\.id) == [11, 10, 9, 8, 7, 6, 5, 4])
    #expect(list.state.fetchedAt == clock.now && !list.state.isStale)
  }

  @Test("A list loaded to its end relaunches with hasOlder false")
  func endSurvives() async throws {
    let directory = TemporaryDirectory()
    do {
      let map = try launch(directory.database, clock: clock)
      let list = issues(map, requests: Locked([])) { IssuePages(highest: 3).page($0) }
      try await list.load()
      try await list.loadOlder()
      #expect(!list.state.hasOlder && list.state.items.map(\.id) == [3, 2, 1])
      try map.flush()
    }
    let map = try launch(directory.database, clock: clock)
    let requests = Locked<[String]>([])
    let list = issues(map, requests: requests) { _ in nil }
    #expect(list.state.items.map(\.id) == [3, 2, 1] && !list.state.hasOlder)
    try await list.loadOlder()
    #expect(requests.value.isEmpty)
  }

  @Test("An item removed leaves the list for good, even stored anew by someone else")
  func removedItemStaysOut() async throws {
    let directory = TemporaryDirectory()
    try await firstLaunch(directory)
    do {
      let map = try launch(directory.database, clock: clock)
      let list = issues(map, requests: Locked([])) { _ in nil }
      map.remove(Issue.self, id: 7)
      #expect(list.state.items.map(\.id) == [9, 8, 6, 5, 4])
      try map.flush()
    }
    do {
      // Another screen stores 7 again (reopened): the list never listed it again.
      let map = try launch(directory.database, clock: clock)
      map.store(Issue.make(7, title: "Reopened", at: 9))
      try map.flush()
    }
    let map = try launch(directory.database, clock: clock)
    let list = issues(map, requests: Locked([])) { _ in nil }
    #expect(list.state.items.map(\.id) == [9, 8, 6, 5, 4])
  }

  @Test("A list a first page replaced relaunches as the answer alone")
  func replacedListSurvivesReplaced() async throws {
    let directory = TemporaryDirectory()
    // A server without newer cursors: a refresh asks for the first page.
    func list(_ map: IdentityMap, _ pages: [[Int]]) -> PagedResource<Issue, LinkCursor> {
      map.pagedResource(Self.key, staleAfter: .seconds(60), retry: .none) { request in
        let index = request.cursor?.page ?? 0
        let older =
          index + 1 < pages.count
          ? LinkCursor(url: URL(string: "https://example.com/\(index + 1)")!, page: index + 1) : nil
        return Page(pages[index].map { Issue.make($0) }, older: older)
      }
    }
    do {
      let map = try launch(directory.database, clock: clock)
      let issues = list(map, [[9, 8], [7, 6], [5]])
      try await issues.load()
      try await issues.loadOlder()
      try map.flush()
    }
    do {
      let map = try launch(directory.database, clock: clock)
      let issues = list(map, [[50, 49], [48]])
      #expect(issues.state.items.map(\.id) == [9, 8, 7, 6])
      try await issues.refresh()
      #expect(issues.state.items.map(\.id) == [50, 49] && issues.state.hasOlder)
      try map.flush()
    }
    let map = try launch(directory.database, clock: clock)
    let issues = list(map, [[50, 49], [48]])
    #expect(issues.state.items.map(\.id) == [50, 49] && issues.state.hasOlder)
    try await issues.loadOlder()
    #expect(issues.state.items.map(\.id) == [50, 49, 48] && !issues.state.hasOlder)
  }

  @Test("A list let go answers from the store again, before and after the writer applies it")
  func letGoAnswersFromTheStore() async throws {
    let store = MemoryStore()
    let map = IdentityMap(persistence: store, clock: clock)
    map.persist(Issue.self)
    map.persist(User.self)
    map.persist(Label.self)
    map.persist(Milestone.self)
    let requests = Locked<[String]>([])
    func list() -> PagedResource<Issue, LinkCursor> {
      map.pagedResource(Self.key, staleAfter: .seconds(60), keepFor: .zero, retry: .none) {
        request in
        requests.append(request.isOlder ? "older" : "first")
        return IssuePages(highest: 6).page(request)
      }
    }
    store.isFailing.withValue { $0 = true }  // the writer keeps everything, unapplied
    do {
      let list = list()
      try await list.load()
      try await list.loadOlder()
    }
    await eventually { map.statistics.aliases == 0 }
    #expect(list().state.items.map(\.id) == [6, 5, 4, 3], "from the changes not yet applied")
    await eventually { map.statistics.aliases == 0 }
    store.isFailing.withValue { $0 = false }
    #expect(throws: MemoryStore.Failure.self) { try map.flush() }  // the failure, once
    try map.flush()
    let again = list()
    #expect(again.state.items.map(\.id) == [6, 5, 4, 3], "from the store")
    #expect(again.state.hasOlder && again.state.fetchedAt == Date(timeIntervalSince1970: 1_000))
    try await again.loadOlder()
    #expect(again.state.items.map(\.id) == [6, 5, 4, 3, 2, 1])
    #expect(requests.value == ["first", "older", "older"])
  }

  @Test(
    "A page appended saves its record, the one before it and the list's; a replaced list's pages are deleted"
  )
  func recordsPerPage() async throws {
    let store = AliasSavesStore()
    let map = IdentityMap(persistence: store, clock: clock)
    map.persist(Issue.self)
    map.persist(User.self)
    map.persist(Label.self)
    map.persist(Milestone.self)
    let highest = Locked(8)
    let list = map.pagedResource(Self.key, retry: .none) { (request: PageRequest<LinkCursor>) in
      var page = IssuePages(highest: highest.value).page(request)
      page.newer = nil
      return page
    }
    try await list.load()
    try await list.loadOlder()
    try map.flush()
    #expect(store.base.aliases.value.count == 3, "the list's and two pages'")
    let before = store.saves.value.count
    try await list.loadOlder()
    try map.flush()
    #expect(store.saves.value.count - before == 3, "the new page's, the old tail's, the list's")
    #expect(store.base.aliases.value.count == 4)
    // A first page that shares nothing: the list's pages go, with their records.
    highest.withValue { $0 = 100 }
    try await list.refresh()
    try map.flush()
    #expect(list.state.items.map(\.id) == [100, 99])
    #expect(store.base.aliases.value.count == 2, "the list's and the one page's")
  }

  @Test("removeAll() deletes the list's records")
  func removeAllDeletesTheList() async throws {
    let directory = TemporaryDirectory()
    try await firstLaunch(directory)
    do {
      let map = try launch(directory.database, clock: clock)
      map.removeAll()
      try map.flush()
    }
    let map = try launch(directory.database, clock: clock)
    let list = issues(map, requests: Locked([])) { _ in nil }
    #expect(list.state.items.isEmpty && list.state.fetchedAt == nil)
  }

  @Test("A paged list made over a persisted list reads it, its pages and items outside the lock")
  func readOffTheLock() async throws {
    let directory = TemporaryDirectory()
    try await firstLaunch(directory)
    let store = try GatedStore(path: directory.database)
    let map = launch(store, clock: clock)
    let held = map.store(Note(id: "held", text: "held"))
    let made = Locked<PagedResource<Issue, LinkCursor>?>(nil)
    ReadsOffTheLockTests.whileParked(
      store,
      { made.withValue { $0 = issues(map, requests: Locked([])) { _ in nil } } },
      meanwhile: {
        #expect(map.find(Note.self, id: "held")?.value.text == "held")
        // An item of the list, written meanwhile with a newer stamp: it wins over the read.
        map.store(Issue.make(8, title: "newer, meanwhile", at: 20))
      })
    let state = try #require(made.value).state
    #expect(state.items.map(\.id) == [9, 8, 7, 6, 5, 4], "the stored list, in its order")
    #expect(state.items[1].title == "newer, meanwhile")
    #expect(state.hasOlder && state.fetchedAt == Date(timeIntervalSince1970: 1_000))
    withExtendedLifetime(held) {}
  }

  @Test("The lists of a type that is not persisted are not")
  func notPersistedType() async throws {
    struct Draft: Identifiable, Codable, Sendable { var id: Int }
    let directory = TemporaryDirectory()
    let key = ResourceKey<[Draft]>("drafts")
    do {
      let map = try launch(directory.database, clock: clock)
      try await map.pagedResource(key) { (_: PageRequest<Int>) in Page([Draft(id: 1)], older: 1) }
        .load()
      try map.flush()
    }
    let map = try launch(directory.database, clock: clock)
    let list = map.pagedResource(key) { (_: PageRequest<Int>) in Page([Draft](), older: nil) }
    #expect(list.state.items.isEmpty && list.state.fetchedAt == nil)
  }
}

/// A `MemoryStore` that also records the names of the alias records it saves.
private final class AliasSavesStore: PersistentStore {
  let base = MemoryStore()
  let saves = Locked<[String]>([])

  func encode<Value: Encodable>(_ value: Value) throws -> [UInt8] { try base.encode(value) }

  func decode<Value: Decodable>(_ type: Value.Type, from bytes: [UInt8]) throws -> Value {
    try base.decode(type, from: bytes)
  }

  func record(kind: String, key: [UInt8]) throws -> PersistentRecord? {
    try base.record(kind: kind, key: key)
  }

  func aliasRecord(named name: String) throws -> PersistentRecord? {
    try base.aliasRecord(named: name)
  }

  func records(kind: String) throws -> [(key: [UInt8], record: PersistentRecord)] {
    try base.records(kind: kind)
  }

  func apply(_ changes: [PersistentChange]) throws {
    for change in changes {
      if case .saveAlias(let name, _, _) = change { saves.append(name) }
    }
    try base.apply(changes)
  }
}

/// A `SQLiteStore` that, at each read of a paged list's page record, asks another thread to
/// find an entity in `map` and waits a moment for it: a read made while the map's lock is held
/// (exclusively, by a write) keeps that thread waiting.
private final class LockProbingStore: PersistentStore, @unchecked Sendable {
  // NB: @unchecked because `map` is set once, before any probed read.
  let base: SQLiteStore
  weak var map: IdentityMap?
  /// For each page record read, whether the other thread's find returned meanwhile.
  let probes = Locked<[Bool]>([])

  init(path: String) throws {
    base = try SQLiteStore(path: path)
  }

  private func probe() {
    guard let map else { return }
    let found = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
      _ = map.find(Note.self, id: "held")
      found.signal()
    }
    probes.append(found.wait(timeout: .now() + 2) == .success)
  }

  func encode<Value: Encodable>(_ value: Value) throws -> [UInt8] { try base.encode(value) }
  func decode<Value: Decodable>(_ type: Value.Type, from bytes: [UInt8]) throws -> Value {
    try base.decode(type, from: bytes)
  }
  func record(kind: String, key: [UInt8]) throws -> PersistentRecord? {
    try base.record(kind: kind, key: key)
  }
  func aliasRecord(named name: String) throws -> PersistentRecord? {
    if name.contains("page ") { probe() }
    return try base.aliasRecord(named: name)
  }
  func records(kind: String) throws -> [(key: [UInt8], record: PersistentRecord)] {
    try base.records(kind: kind)
  }
  func tombstones(kind: String) throws -> [(key: [UInt8], stamp: Stamp)] {
    try base.tombstones(kind: kind)
  }
  func apply(_ changes: [PersistentChange]) throws { try base.apply(changes) }
}

extension PersistentPagedListTests {
  @Test("Every page record of a stored list is read outside the map's lock, following the chain")
  func pageRecordsOffTheLock() async throws {
    let directory = TemporaryDirectory()
    try await firstLaunch(directory)
    let store = try LockProbingStore(path: directory.database)
    let map = launch(store, clock: clock)
    store.map = map
    let held = map.store(Note(id: "held", text: "held"))
    let list = issues(map, requests: Locked([])) { _ in nil }
    #expect(list.state.items.map(\.id) == [9, 8, 7, 6, 5, 4])
    #expect(store.probes.value == [true, true, true], "three pages, none read under the lock")
    withExtendedLifetime(held) {}
  }
}
