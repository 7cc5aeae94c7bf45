import ConcordTesting
import Foundation
import TestSupport
import Testing

@testable import Concord

// A seeded model-based random test of resources. One list resource of counters, on a
// `ManualClock`, with a scripted loader the test answers; random steps start callers (`load`,
// `refresh`, `revalidate`) that return at once or join the fetch in flight, cancel waiting
// callers, answer the loader (an answer with a stamp that may be older than the map's, a
// `.notModified`, an error worth a retry or not), advance the clock (a retry's wait ends, an
// observed answer turns stale), invalidate, observe and stop observing, and write or remove the
// answer's entities from outside. The model keeps the rules of API.md's "Resource semantics
// users rely on": after every step the resource's state, each caller's outcome, the loader's
// calls and cancellations, the requests' validators and attempts, the clock's sleepers (a
// retry's wait, the stale timer of an observed fresh answer) and the map's entities must be the
// model's; an observer must end at the current state, never be told the same state twice in a
// row, and never see `fetchedAt` go back. The engine's invariants are checked after every step.

private struct ResourceModel {
  struct Entity: Equatable {
    var value: Int
    var stamp: Double
  }

  /// Where the fetch in flight is: its loader call for try `attempt` waits for an answer, or
  /// it waits before that try.
  enum Phase: Equatable {
    case calling(attempt: Int)
    case sleeping(until: Double, attempt: Int)
  }

  struct Fetch {
    var waiters: [Int] = []
    var background: Bool
    var abandoned = false
    var invalidated = false
    var phase = Phase.calling(attempt: 1)
  }

  /// What a caller ends with.
  enum Outcome: Equatable {
    case value([Counter])
    case error(String)
    case cancelled
    /// A revalidation: it returns, whatever the fetch did.
    case settled
  }

  let policy: FetchPolicy
  let staleAfter: Double
  var now = 0.0
  var answer: [Int]?
  /// Exactly the entities of the answer: nothing else holds one.
  var entities: [Int: Entity] = [:]
  var tombstones: [Int: Double] = [:]
  var fetchedAt: Double?
  var validator: String?
  var invalidated = false
  var error: String?
  var fetch: Fetch?
  var observed = false
  var calls = 0
  var cancellations = 0
  /// The callers each waiter is, and how those resolved ended.
  var revalidations: Set<Int> = []
  var outcomes: [Int: Outcome] = [:]
  /// The request the loader's last call should carry.
  var lastRequest: ResourceRequest?

  var value: [Counter]? {
    answer.map { ids in ids.map { Counter(id: $0, value: entities[$0]!.value) } }
  }

  var isStale: Bool {
    guard answer != nil, let fetchedAt, !invalidated, staleAfter > 0 else { return true }
    return now - fetchedAt >= staleAfter
  }

  /// The sleeps under way: a retry's wait, and the stale timer of an observed fresh answer.
  var sleepers: Int {
    var count = 0
    if case .sleeping = fetch?.phase { count += 1 }
    if observed && !isStale { count += 1 }
    return count
  }

  var snapshot: Snapshot {
    Snapshot(
      value: value, fetchedAt: fetchedAt, isStale: isStale, isLoading: fetch != nil,
      error: error)
  }

  // MARK: Demands

  /// A caller `id` asks `load()` (or `refresh()`, or a revalidation). Returns whether it was
  /// answered at once.
  mutating func demand(_ id: Int, refresh: Bool) {
    if refresh { return join(id) }
    switch policy {
    case .cacheOnly:
      outcomes[id] = value.map(Outcome.value) ?? .error(ResourceError.notCached.description)
    case .cacheFirst:
      guard let value else { return join(id) }
      if isStale { ensureFetch(background: true) }
      outcomes[id] = .value(value)
    case .cacheThenNetwork:
      guard let value else { return join(id) }
      ensureFetch(background: true)
      outcomes[id] = .value(value)
    default:
      join(id)
    }
  }

  mutating func revalidate(_ id: Int) {
    revalidations.insert(id)
    guard policy != .cacheOnly, observed, fetch != nil || isStale else {
      outcomes[id] = .settled
      return
    }
    join(id)
  }

  mutating func join(_ id: Int) {
    ensureFetch(background: false)
    fetch!.waiters.append(id)
  }

  mutating func ensureFetch(background: Bool) {
    if fetch != nil {
      if background { fetch!.background = true }
      return
    }
    fetch = Fetch(background: background)
    call(attempt: 1)
  }

  mutating func call(attempt: Int) {
    calls += 1
    lastRequest = ResourceRequest(validator: answer == nil ? nil : validator, attempt: attempt)
    fetch!.phase = .calling(attempt: attempt)
  }

  mutating func cancel(_ id: Int) {
    guard let index = fetch?.waiters.firstIndex(of: id) else { return }
    fetch!.waiters.remove(at: index)
    fetch!.abandoned = true
    outcomes[id] = .cancelled
    cancelIfAbandoned()
  }

  mutating func cancelIfAbandoned() {
    guard let fetch, fetch.abandoned, fetch.waiters.isEmpty, !fetch.background, !observed else {
      return
    }
    if case .calling = fetch.phase { cancellations += 1 }
    self.fetch = nil
  }

  // MARK: The loader's answers

  mutating func respond(_ list: [Counter], stamp: Double, validator: String?) {
    var ids: [Int] = []
    var kept: [Int: Entity] = [:]
    for counter in list {
      if let stored = entities[counter.id] {
        kept[counter.id] =
          stamp > stored.stamp ? Entity(value: counter.value, stamp: stamp) : stored
      } else if let tomb = tombstones[counter.id], stamp <= tomb {
        continue
      } else {
        tombstones[counter.id] = nil
        kept[counter.id] = Entity(value: counter.value, stamp: stamp)
      }
      ids.append(counter.id)
    }
    entities = kept
    answer = ids
    fetchedAt = now
    self.validator = validator
    finish(error: nil)
  }

  mutating func respondNotModified() {
    guard answer != nil else {
      return finish(error: ResourceError.notModifiedWithoutAnswer.description)
    }
    fetchedAt = now
    finish(error: nil)
  }

  mutating func respond(failing code: Int) {
    guard case .calling(let attempt) = fetch?.phase else { return }
    if code != 404 && attempt < 2 {
      fetch!.phase = .sleeping(until: now + 10, attempt: attempt + 1)
    } else {
      finish(error: LoaderError(code).description)
    }
  }

  mutating func finish(error: String?) {
    guard let fetch else { return }
    self.error = error
    if error == nil { invalidated = fetch.invalidated }
    for id in fetch.waiters {
      outcomes[id] =
        revalidations.contains(id) ? .settled : error.map(Outcome.error) ?? .value(value!)
    }
    self.fetch = nil
  }

  // MARK: Time, invalidation, observers, the map

  mutating func advance(_ seconds: Double) {
    now += seconds
    if case .sleeping(let until, let attempt) = fetch?.phase, now >= until {
      call(attempt: attempt)
    }
  }

  mutating func invalidate() {
    invalidated = true
    fetch?.invalidated = true
  }

  mutating func update(_ id: Int, stamp: Double) {
    entities[id] = Entity(value: entities[id]!.value + 1, stamp: stamp)
  }

  mutating func remove(_ id: Int) {
    tombstones[id] = entities[id]!.stamp
    entities[id] = nil
    answer?.removeAll { $0 == id }
  }
}

/// What a state shows, comparably.
private struct Snapshot: Equatable, CustomStringConvertible {
  var value: [Counter]?
  var fetchedAt: Double?
  var isStale: Bool
  var isLoading: Bool
  var error: String?

  init(
    value: [Counter]?, fetchedAt: Double?, isStale: Bool, isLoading: Bool, error: String?
  ) {
    self.value = value
    self.fetchedAt = fetchedAt
    self.isStale = isStale
    self.isLoading = isLoading
    self.error = error
  }

  init(_ state: ResourceState<[Counter]>) {
    self.init(
      value: state.value, fetchedAt: state.fetchedAt?.timeIntervalSince1970,
      isStale: state.isStale, isLoading: state.isLoading,
      error: state.error.map { String(describing: $0) })
  }

  var description: String {
    let values = value.map { $0.map { "\($0.id):\($0.value)" }.joined(separator: " ") } ?? "nil"
    return
      "[\(values)] fetchedAt \(fetchedAt.map { "\($0)" } ?? "nil")\(isStale ? " stale" : "")"
      + "\(isLoading ? " loading" : "")\(error.map { " error \($0)" } ?? "")"
  }
}

@Suite("Resources: a seeded model of the rules")
struct ResourceModelTests {
  @Test(
    "Random demands, answers, cancellations, clock advances and outside writes follow the model",
    .timeLimit(.minutes(5)),
    // NB: seeds 1 to 4 also with every waited-for fetch enqueued rather than started on the
    // caller's thread: the same steps, two ways of starting a fetch, one model.
    arguments: Array(UInt64(1)...8).map { ($0, true) } + Array(UInt64(1)...4).map { ($0, false) })
  func randomRun(seed: UInt64, inline: Bool) async throws {
    var random = SeededGenerator(seed: seed &* 0x9E37_79B9)
    let policies: [FetchPolicy] = [.cacheFirst, .cacheThenNetwork, .networkOnly, .cacheOnly]
    let policy = policies[Int(seed) % 4]
    let staleAfter = seed % 3 == 0 ? 0.0 : 30.0
    var model = ResourceModel(policy: policy, staleAfter: staleAfter)
    let clock = ManualClock()
    let map = IdentityMap(clock: clock)
    map._resources.startsWaitedFetchesInline = inline
    let loader = ScriptedLoader<[Counter]>()
    let resource = map.resource(
      ResourceKey<[Counter]>("counters"), policy: policy, staleAfter: .seconds(staleAfter),
      retry: .exponential(
        attempts: 2, base: .seconds(10), jitter: false,
        retryIf: { ($0 as? LoaderError)?.code != 404 }),
      load: loader.load)
    var tasks: [Int: Task<Result<[Counter], any Error>, Never>] = [:]
    var revalidations: [Int: Task<Void, Never>] = [:]
    var recorder: StateRecorder<[Counter]>?
    var nextCaller = 0
    var stamp = 0.0
    var log: [String] = []

    /// Waits for the implementation to reach the model's state, then compares everything.
    func settle(_ step: Int) async {
      let expected = model.snapshot
      var yields = 0
      func reached() -> Bool {
        Snapshot(resource.state) == expected && loader.calls == model.calls
          && loader.waiting
            == (model.fetch.map { if case .calling = $0.phase { 1 } else { 0 } } ?? 0)
          && resource._core.waiters == (model.fetch?.waiters.count ?? 0)
          && resource._core.runningFetches == (model.fetch == nil ? 0 : 1)
          && clock.sleepers == model.sleepers
          && (recorder?.states.last.map { Snapshot($0) == expected } ?? true)
      }
      while !reached() && yields < 200_000 {
        await Task.yield()
        yields += 1
      }
      let context =
        "seed \(seed), \(policy), step \(step): \(log.suffix(6).joined(separator: "; "))"
      #expect(Snapshot(resource.state) == expected, "\(context)")
      #expect(loader.calls == model.calls, "\(context)")
      #expect(loader.cancellations == model.cancellations, "\(context)")
      #expect(clock.sleepers == model.sleepers, "sleepers: \(context)")
      #expect(resource._core.waiters == (model.fetch?.waiters.count ?? 0), "waiters: \(context)")
      if let request = model.lastRequest {
        #expect(loader.requests.last == request, "request: \(context)")
      }
      for (id, entity) in model.entities {
        #expect(map.find(Counter.self, id: id)?.value.value == entity.value, "\(context)")
      }
      #expect(map.count == model.entities.count, "only the answer's entities: \(context)")
      if let states = recorder?.states.map(Snapshot.init) {
        #expect(states.last.map { $0 == expected } ?? true, "observer: \(context)")
        for (earlier, later) in zip(states, states.dropFirst()) {
          #expect(earlier != later, "told twice: \(earlier): \(context)")
          #expect((earlier.fetchedAt ?? 0) <= (later.fetchedAt ?? 0), "went back: \(context)")
        }
      }
      // Callers that ended: each as the model says.
      for (id, outcome) in model.outcomes {
        if let task = tasks.removeValue(forKey: id) {
          switch (await task.value, outcome) {
          case (.success(let value), .value(let expected)):
            #expect(value == expected, "caller \(id): \(context)")
          case (.failure(let error), .error(let expected)):
            #expect(String(describing: error) == expected, "caller \(id): \(context)")
          case (.failure(let error), .cancelled):
            #expect(error is CancellationError, "caller \(id): \(context)")
          case (let actual, let expected):
            Issue.record("caller \(id): \(actual), expected \(expected): \(context)")
          }
        } else if let task = revalidations.removeValue(forKey: id) {
          await task.value
        }
      }
      model.outcomes.removeAll()
      if tasks.isEmpty && revalidations.isEmpty {
        #expect(resource._core.parkedOutcomes == 0, "an outcome nobody collects: \(context)")
      }
      map._core._checkInvariants()
    }

    for step in 0..<max(300, randomSteps(share: 200)) {
      let roll = Int.random(in: 0..<100, using: &random)
      switch roll {
      case 0..<22:
        let id = nextCaller
        nextCaller += 1
        let refresh = roll < 6
        log.append("\(refresh ? "refresh" : "load") #\(id)")
        tasks[id] = Task {
          do {
            return .success(try await refresh ? resource.refresh() : resource.load())
          } catch {
            return .failure(error)
          }
        }
        model.demand(id, refresh: refresh)
      case 22..<26:
        let id = nextCaller
        nextCaller += 1
        log.append("revalidate #\(id)")
        revalidations[id] = Task { await map.revalidate() }
        model.revalidate(id)
      case 26..<34:
        guard let waiters = model.fetch?.waiters, let id = waiters.randomElement(using: &random)
        else { continue }
        log.append("cancel #\(id)")
        (tasks[id].map { $0.cancel() }) ?? revalidations[id]?.cancel()
        model.cancel(id)
      case 34..<56:
        guard case .calling = model.fetch?.phase else { continue }
        switch Int.random(in: 0..<10, using: &random) {
        case 0..<6:
          var ids = Array(0..<6).shuffled(using: &random)
          ids.removeLast(Int.random(in: 0...6, using: &random))
          let list = ids.map { Counter(id: $0, value: Int.random(in: 0..<100, using: &random)) }
          let answerStamp = stamp + Double(Int.random(in: -2...2, using: &random))
          stamp = max(stamp, answerStamp)
          let validator = Bool.random(using: &random) ? "\"v\(step)\"" : nil
          log.append("answer \(list.map(\.id)) stamped \(answerStamp)")
          loader.respond(.value(list, modifiedAt: answerStamp, validator: validator))
          model.respond(list, stamp: answerStamp, validator: validator)
        case 6..<8:
          log.append("not modified")
          loader.respond(.notModified)
          model.respondNotModified()
        default:
          let code = Bool.random(using: &random) ? 503 : 404
          log.append("fail \(code)")
          loader.fail(LoaderError(code))
          model.respond(failing: code)
        }
      case 56..<68:
        let seconds = [1.0, 5, 10, 29, 30, 31, 60].randomElement(using: &random)!
        log.append("advance \(seconds)")
        clock.advance(by: .seconds(seconds))
        model.advance(seconds)
      case 68..<73:
        log.append("invalidate")
        if Bool.random(using: &random) {
          resource.invalidate()
        } else {
          map.invalidateResources(prefix: "count")
        }
        model.invalidate()
      case 73..<79:
        if model.observed {
          log.append("unobserve")
          recorder?.cancel()
          recorder = nil
          model.observed = false
          model.cancelIfAbandoned()
        } else {
          log.append("observe")
          recorder = StateRecorder(resource)
          model.observed = true
        }
      case 79..<92:
        guard let id = model.answer?.randomElement(using: &random) else { continue }
        stamp += 1
        log.append("update \(id) at \(stamp)")
        map.update(Counter.self, id: id, modifiedAt: stamp) { $0.value += 1 }
        model.update(id, stamp: stamp)
      default:
        guard let id = model.answer?.randomElement(using: &random) else { continue }
        log.append("remove \(id)")
        map.remove(Counter.self, id: id)
        model.remove(id)
      }
      await settle(step)
    }
    // The end: a fetch still in flight fails for good (a background one has nobody to cancel
    // it), and every caller still waiting is cancelled, and ends so.
    if case .sleeping(let until, _) = model.fetch?.phase {
      clock.advance(by: .seconds(until - model.now))
      model.advance(until - model.now)
      await settle(-2)
    }
    if case .calling = model.fetch?.phase {
      loader.fail(LoaderError(404))
      model.respond(failing: 404)
      await settle(-3)
    }
    for id in model.fetch?.waiters ?? [] {
      (tasks[id].map { $0.cancel() }) ?? revalidations[id]?.cancel()
      model.cancel(id)
    }
    recorder?.cancel()
    recorder = nil
    model.observed = false
    model.cancelIfAbandoned()
    await settle(-1)
    #expect(resource._core.parkedOutcomes == 0, "every caller collected its outcome")
  }
}
