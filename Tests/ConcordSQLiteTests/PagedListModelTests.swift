import ConcordSQLite
import ConcordTesting
import Foundation
import TestSupport
import Testing

@testable import Concord

// A seeded model-based random test of paged lists over SQLite. A scripted server keeps a
// timeline of issues, newest first, that grows at the head, loses issues and edits them; it
// pages them three at a time by id (Mastodon's max_id and min_id: an older page is the three
// just below a cursor, a newer one the three just above it, adjacent). Random steps start
// callers (`load`, `refresh`, `loadOlder`) that return at once or join the fetch of their end,
// answer either fetch in flight (both may be at once, answered in either order) with the
// server's page or a failure, grow and shrink the server, write and remove issues from outside
// (stamped, so that a page may bring an older copy; removals leave tombstones), advance the
// clock, invalidate, observe, and relaunch the app on the same file. The model keeps the rules
// of the paged list (an item listed keeps its place, a first page that shares nothing replaces
// the list, an older page that brings nothing ends it, an older page asked for before a
// replacement is dropped), every issue the store has with its stamp, and the tombstones. After
// every step, and at once after every relaunch, the list's state must be the model's, each
// loader call must have asked the model's request, each caller must end as the model says, and
// an observer must end at the current state and never be told the same state twice in a row.
// The engine checks its invariants after every write in the CONCORD_INTERNAL_CHECKS run.

/// A paged list's loader that the test answers, one call per end at most.
private final class Pager: Sendable {
  private struct Call {
    let request: PageRequest<Int>
    let continuation: CheckedContinuation<Page<Issue, Int>, any Error>
  }

  private let state = Locked<(requests: [PageRequest<Int>], waiting: [Call])>(([], []))

  var requests: [PageRequest<Int>] { state.value.requests }
  var waiting: [PageRequest<Int>] { state.value.waiting.map(\.request) }

  var load: @Sendable (PageRequest<Int>) async throws -> Page<Issue, Int> {
    { request in
      try await withCheckedThrowingContinuation { continuation in
        self.state.withValue {
          $0.requests.append(request)
          $0.waiting.append(Call(request: request, continuation: continuation))
        }
      }
    }
  }

  /// Answers the call for an older page (`older`) or the other one.
  func respond(older: Bool, with result: Result<Page<Issue, Int>, any Error>) {
    let call = state.withValue { state -> Call? in
      guard let index = state.waiting.firstIndex(where: { $0.request.isOlder == older }) else {
        return nil
      }
      return state.waiting.remove(at: index)
    }
    call?.continuation.resume(with: result)
  }
}

private struct PagedModel {
  struct Entity {
    var title: String
    var stamp: Double
  }

  /// A fetch in flight: what it asked, the list's generation then, who waits for it.
  struct Fetch {
    var request: PageRequest<Int>
    var generation: Int
    var waiters: [Int] = []
    /// Whether the list was invalidated while it was in flight: it lands stale.
    var invalidated = false
  }

  enum Outcome: Equatable {
    case items([Int])
    case done
    case error(String)
  }

  let staleAfter = 60.0
  var now = 1_000.0
  // The list.
  var items: [Int] = []
  var hasAnswer = false
  var older: Int?
  var newer: Int?
  var hasOlder = false
  var fetchedAt: Double?
  var invalidated = false
  var generation = 0
  var error: String?
  var head: Fetch?
  var tail: Fetch?
  // The server and the store.
  var timeline: [Int] = Array((1...30).reversed())
  var server: [Int: Entity] = [:]
  var stored: [Int: Entity] = [:]
  var tombstones: [Int: Double] = [:]
  var outcomes: [Int: Outcome] = [:]
  var calls = 0
  /// How often each mechanism was reached: the test fails if one never is.
  var reached: [String: Int] = [:]

  var isStale: Bool {
    guard hasAnswer, let fetchedAt, !invalidated else { return true }
    return now - fetchedAt >= staleAfter
  }

  var titles: [String] { items.map { stored[$0]!.title } }

  // MARK: Callers

  mutating func load(_ id: Int) {
    guard hasAnswer else { return join(id, older: false) }
    if isStale { ensureHead() }
    outcomes[id] = .items(items)
  }

  mutating func refresh(_ id: Int) { join(id, older: false) }

  mutating func loadOlder(_ id: Int) {
    guard tail != nil || (hasAnswer && hasOlder) else {
      outcomes[id] = .done
      return
    }
    join(id, older: true)
  }

  mutating func join(_ id: Int, older: Bool) {
    if older {
      if tail == nil {
        calls += 1
        tail = Fetch(request: .older(than: self.older!), generation: generation)
      } else {
        reached["join", default: 0] += 1
      }
      tail!.waiters.append(id)
    } else {
      if head != nil { reached["join", default: 0] += 1 }
      ensureHead()
      head!.waiters.append(id)
    }
  }

  mutating func ensureHead() {
    guard head == nil else { return }
    calls += 1
    let request: PageRequest<Int> = hasAnswer && newer != nil ? .newer(than: newer!) : .first
    head = Fetch(request: request, generation: generation)
  }

  // MARK: The server

  /// The server's answer to `request`: three issues by id, newest first. A server that pages
  /// `withoutNewer` gives no newer cursor (a refresh asks for the first page); one that goes
  /// `back` answers an older page with the page above it (a cursor bug).
  func page(_ request: PageRequest<Int>, withoutNewer: Bool = false, back: Bool = false)
    -> Page<Issue, Int>
  {
    if back, let cursor = request.cursor, request.isOlder {
      let above = timeline.filter { $0 >= cursor }.suffix(3)
      let issues = above.map { Issue.make($0, title: server[$0]!.title, at: server[$0]!.stamp) }
      return Page(issues, older: above.last)
    }
    let ids: [Int]
    var olderCursor: Int?
    var newerCursor: Int?
    if let cursor = request.cursor, request.isNewer {
      ids = Array(timeline.filter { $0 > cursor }.suffix(3))
      newerCursor = ids.first
    } else {
      let below = request.cursor.map { cursor in timeline.filter { $0 < cursor } } ?? timeline
      ids = Array(below.prefix(3))
      olderCursor = below.count > 3 ? ids.last : nil
      newerCursor = request.isOlder ? nil : ids.first
    }
    let issues = ids.map { Issue.make($0, title: server[$0]!.title, at: server[$0]!.stamp) }
    return Page(issues, older: olderCursor, newer: withoutNewer ? nil : newerCursor)
  }

  // MARK: Landings

  /// Writes `issues` as a page does: each by its stamp; returns those the map keeps.
  mutating func write(_ issues: [Issue]) -> [Int] {
    var kept: [Int] = []
    for issue in issues {
      if let existing = stored[issue.id] {
        if issue.updatedAt > existing.stamp {
          stored[issue.id] = Entity(title: issue.title, stamp: issue.updatedAt)
        }
      } else if let tomb = tombstones[issue.id], issue.updatedAt <= tomb {
        continue
      } else {
        tombstones[issue.id] = nil
        stored[issue.id] = Entity(title: issue.title, stamp: issue.updatedAt)
      }
      if !kept.contains(issue.id) { kept.append(issue.id) }
    }
    return kept
  }

  mutating func land(older landingOlder: Bool, _ page: Page<Issue, Int>) {
    let fetch = landingOlder ? tail! : head!
    if head != nil && tail != nil { reached["both ends", default: 0] += 1 }
    if landingOlder {
      tail = nil
      if fetch.generation != generation { reached["older dropped", default: 0] += 1 }
      if fetch.generation == generation && hasAnswer {
        let new = write(page.items).filter { !items.contains($0) }
        hasOlder = !new.isEmpty && page.older != nil
        if new.isEmpty { reached["nothing new", default: 0] += 1 }
        if !new.isEmpty {
          items += new
          older = page.older
        }
      }
    } else {
      head = nil
      let kept = write(page.items)
      let shared = kept.contains { items.contains($0) }
      if fetch.request.isNewer && hasAnswer || !fetch.request.isNewer && shared && hasAnswer {
        items = kept.filter { !items.contains($0) } + items
        if !page.items.isEmpty { newer = page.newer }
      } else {
        if hasAnswer { reached["replaced", default: 0] += 1 }
        items = kept
        newer = page.newer
        older = page.older
        hasOlder = page.older != nil
        hasAnswer = true
        generation += 1
      }
      fetchedAt = now
      invalidated = fetch.invalidated
    }
    error = nil
    for id in fetch.waiters { outcomes[id] = landingOlder ? .done : .items(items) }
  }

  mutating func fail(older: Bool, _ message: String) {
    let fetch = older ? tail! : head!
    if older { tail = nil } else { head = nil }
    reached["failure", default: 0] += 1
    error = message
    for id in fetch.waiters { outcomes[id] = .error(message) }
  }

  // MARK: From outside

  mutating func invalidate() {
    invalidated = true
    head?.invalidated = true
  }

  mutating func remove(_ id: Int) {
    tombstones[id] = stored[id]!.stamp
    stored[id] = nil
    items.removeAll { $0 == id }
  }
}

/// What a state shows, comparably.
private struct Shown: Equatable, CustomStringConvertible {
  var titles: [String]
  var hasOlder: Bool
  var fetchedAt: Double?
  var isStale: Bool
  var isLoading: Bool
  var isLoadingOlder: Bool
  var error: String?

  init(_ state: PagedState<Issue>) {
    titles = state.items.map(\.title)
    hasOlder = state.hasOlder
    fetchedAt = state.fetchedAt?.timeIntervalSince1970
    isStale = state.isStale
    isLoading = state.isLoading
    isLoadingOlder = state.isLoadingOlder
    error = state.error.map { "\($0)" }
  }

  init(_ model: PagedModel) {
    titles = model.titles
    hasOlder = model.hasAnswer && model.hasOlder
    fetchedAt = model.fetchedAt
    isStale = model.isStale
    isLoading = model.head != nil
    isLoadingOlder = model.tail != nil
    error = model.error
  }

  var description: String {
    "\(titles)\(hasOlder ? " older" : "") at \(fetchedAt.map { "\($0)" } ?? "-")"
      + "\(isStale ? " stale" : "")\(isLoading ? " loading" : "")"
      + "\(isLoadingOlder ? " loading older" : "")\(error.map { " error \($0)" } ?? "")"
  }
}

@Suite("Persistence: a seeded model of paged lists")
struct PagedListModelTests {
  static let key = ResourceKey<[Issue]>("timelines/issues")

  @Test(
    "Random pages at both ends, server changes, outside writes and relaunches follow the model",
    .timeLimit(.minutes(5)),
    // NB: seeds 1 to 3 also with every waited-for page enqueued rather than started on the
    // caller's thread: the same steps, two ways of starting a fetch, one model.
    arguments: (UInt64(1)...6).map { ($0, true) } + (UInt64(1)...3).map { ($0, false) })
  func randomRun(seed: UInt64, inline: Bool) async throws {
    var random = SeededGenerator(seed: seed &* 0x2545_F491_4F6C_DD1D)
    let directory = TemporaryDirectory()
    let clock = ManualClock(now: Date(timeIntervalSince1970: 1_000))
    var model = PagedModel()
    for id in model.timeline {
      model.server[id] = .init(title: "issue \(id) v0", stamp: Double(id))
    }
    var pager = Pager()
    var map = try launch(directory.database, clock: clock)
    func make(_ map: IdentityMap, _ pager: Pager) -> PagedResource<Issue, Int> {
      map._resources.startsWaitedFetchesInline = inline
      return map.pagedResource(
        Self.key, staleAfter: .seconds(60), keepFor: .zero, retry: .none, load: pager.load)
    }
    var list = make(map, pager)
    var tasks: [Int: Task<Result<[Int]?, any Error>, Never>] = [:]
    var recorder: [Shown]?
    let recorded = Locked<[Shown]>([])
    var subscription: Subscription?
    var nextCaller = 0
    var nextID = 31
    var stamp = 10.0
    var log: [String] = []

    func settle(_ step: Int) async {
      let expected = Shown(model)
      let calls = model.calls
      var yields = 0
      let waiters = [model.head, model.tail].compactMap { $0?.waiters.count }.reduce(0, +)
      // NB: the stale timer of an observed fresh list: its sleep must have begun before the
      // clock moves on.
      let sleepers = recorder != nil && model.hasAnswer && !model.isStale ? 1 : 0
      while yields < 100_000
        && (Shown(list.state) != expected || pager.requests.count != calls
          || list._core.waiters != waiters || clock.sleepers != sleepers
          || pager.waiting.count != [model.head, model.tail].compactMap { $0 }.count
          || (recorder != nil && recorded.value.last != expected))
      {
        await Task.yield()
        yields += 1
      }
      let context = "seed \(seed), step \(step): \(log.suffix(6).joined(separator: "; "))"
      #expect(Shown(list.state) == expected, "\(context)")
      #expect(pager.requests.count == calls, "loader calls: \(context)")
      #expect(list._core.waiters == waiters, "waiters: \(context)")
      #expect(clock.sleepers == sleepers, "sleepers: \(context)")
      for fetch in [model.head, model.tail].compactMap({ $0 }) {
        #expect(pager.waiting.contains(fetch.request), "request \(fetch.request): \(context)")
      }
      if recorder != nil {
        let states = recorded.value
        #expect(states.last == expected, "observer: \(context)")
        for (earlier, later) in zip(states, states.dropFirst()) {
          #expect(earlier != later, "told twice: \(earlier): \(context)")
        }
      }
      for (id, outcome) in model.outcomes {
        guard let task = tasks.removeValue(forKey: id) else { continue }
        switch (await task.value, outcome) {
        case (.success(let ids?), .items(let expected)):
          #expect(ids == expected, "caller \(id): \(context)")
        case (.success(nil), .done):
          break
        case (.failure(let error), .error(let expected)):
          #expect("\(error)" == expected, "caller \(id): \(context)")
        case (let actual, let expected):
          Testing.Issue.record("caller \(id): \(actual), expected \(expected): \(context)")
        }
      }
      model.outcomes.removeAll()
    }

    /// Answers every fetch in flight with the server's page.
    func answerAll(_ step: Int) async {
      for older in [false, true] {
        guard let fetch = older ? model.tail : model.head else { continue }
        let page = model.page(fetch.request)
        pager.respond(older: older, with: .success(page))
        model.land(older: older, page)
        await settle(step)
      }
    }

    for step in 0..<max(1_000, randomSteps(share: 100)) {
      let roll = Int.random(in: 0..<100, using: &random)
      switch roll {
      case 0..<24:
        let id = nextCaller
        nextCaller += 1
        let kind = roll < 10 ? "loadOlder" : roll < 18 ? "refresh" : "load"
        log.append("\(kind) #\(id)")
        let list = list
        tasks[id] = Task {
          do {
            switch kind {
            case "loadOlder":
              try await list.loadOlder()
              return .success(nil)
            case "refresh":
              try await list.refresh()
              return .success(list.state.items.map(\.id))
            default:
              return .success(try await list.load().map(\.id))
            }
          } catch {
            return .failure(error)
          }
        }
        switch kind {
        case "loadOlder": model.loadOlder(id)
        case "refresh": model.refresh(id)
        default: model.load(id)
        }
      case 24..<46:
        let ends = [model.head.map { _ in false }, model.tail.map { _ in true }].compactMap { $0 }
        guard let older = ends.randomElement(using: &random) else { continue }
        let fetch = (older ? model.tail : model.head)!
        if Int.random(in: 0..<5, using: &random) == 0 {
          log.append("fail \(fetch.request)")
          pager.respond(older: older, with: .failure(URLError(.timedOut)))
          model.fail(older: older, "\(URLError(.timedOut))")
        } else {
          let page = model.page(
            fetch.request, withoutNewer: Bool.random(using: &random),
            back: Int.random(in: 0..<5, using: &random) == 0)
          log.append("answer \(fetch.request): \(page.items.map(\.id))")
          pager.respond(older: older, with: .success(page))
          model.land(older: older, page)
        }
      case 46..<54:
        let count = Int.random(in: 1...8, using: &random)
        for _ in 0..<count {
          stamp += 1
          model.timeline.insert(nextID, at: 0)
          model.server[nextID] = .init(title: "issue \(nextID) v0", stamp: stamp)
          nextID += 1
        }
        log.append("server grows by \(count)")
      case 54..<60:
        guard let id = model.timeline.randomElement(using: &random) else { continue }
        model.timeline.removeAll { $0 == id }
        log.append("server deletes \(id)")
        if model.stored[id] != nil && Bool.random(using: &random) {
          map.remove(Issue.self, id: id)
          model.remove(id)
        }
      case 60..<68:
        // An edit: on the server (a later page brings it), or from outside, newer or older.
        guard let id = (model.items + model.timeline).randomElement(using: &random) else {
          continue
        }
        stamp += 1
        if model.stored[id] != nil && Bool.random(using: &random) {
          let at = stamp + Double(Int.random(in: -8...0, using: &random))
          let title = "issue \(id) outside \(step)"
          log.append("outside edit \(id) at \(at)")
          map.store(Issue.make(id, title: title, at: at))
          if at > model.stored[id]!.stamp { model.stored[id] = .init(title: title, stamp: at) }
        } else if model.server[id] != nil {
          log.append("server edit \(id)")
          model.server[id] = .init(title: "issue \(id) v\(step)", stamp: stamp)
        }
      case 68..<74:
        guard let id = model.items.randomElement(using: &random) else { continue }
        log.append("remove \(id)")
        map.remove(Issue.self, id: id)
        model.remove(id)
      case 74..<82:
        let seconds = [10.0, 30, 59, 60, 61, 3_600].randomElement(using: &random)!
        log.append("advance \(seconds)")
        clock.advance(by: .seconds(seconds))
        model.now += seconds
      case 82..<86:
        log.append("invalidate")
        list.invalidate()
        model.invalidate()
      case 86..<92:
        if subscription != nil {
          log.append("unobserve")
          subscription = nil
          recorder = nil
        } else {
          log.append("observe")
          recorded.withValue { $0 = [] }
          subscription = list.observe(includingCurrentState: true) { state in
            recorded.append(Shown(state))
          }
          recorder = []
        }
      default:
        log.append("relaunch")
        model.reached["relaunch", default: 0] += 1
        await answerAll(step)
        subscription = nil
        recorder = nil
        try map.flush()
        map = try launch(directory.database, clock: clock)
        pager = Pager()
        list = make(map, pager)
        // NB: what a relaunch forgets: an invalidation, the last error, the loader's calls.
        model.invalidated = false
        model.error = nil
        model.calls = 0
        // A relaunch shows the list as it was, at once.
        let shown = Shown(list.state)
        #expect(shown == Shown(model), "seed \(seed), step \(step): at relaunch")
      }
      await settle(step)
    }
    await answerAll(-1)
    for mechanism in [
      "join", "both ends", "older dropped", "nothing new", "replaced", "failure", "relaunch",
    ] {
      #expect(model.reached[mechanism, default: 0] > 0, "seed \(seed) never reached \(mechanism)")
    }
    withExtendedLifetime((map, subscription)) {}
  }
}
