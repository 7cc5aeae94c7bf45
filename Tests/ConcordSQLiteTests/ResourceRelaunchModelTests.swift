import Concord
import ConcordSQLite
import ConcordTesting
import Foundation
import TestSupport
import Testing

// A seeded model-based random test of persisted answers over SQLite: random fetches (answers
// whose stamps may be older than the store's, `.notModified`, failures), clock advances,
// removals of the answer's issues, resources let go and made again, and relaunches on the
// same file. The model keeps the answer's ids in order, its age and validator, every issue the
// store has with its stamp, and the tombstones. After every step, and at once after every
// relaunch, the resource's state (the answer, as the map has it, `fetchedAt`, `isStale`) must
// be the model's; `load()` must fetch exactly when the model's answer is stale; a fetch must
// send the model's validator. The engine checks its invariants after every write in the
// CONCORD_INTERNAL_CHECKS run.

private struct RelaunchModel {
  var now = 1_000.0
  var answer: [Int]?
  var fetchedAt: Double?
  var validator: String?
  /// Every issue the store has: its title and stamp.
  var stored: [Int: (title: String, stamp: Double)] = [:]
  var tombstones: [Int: Double] = [:]
  let staleAfter = 60.0

  var isStale: Bool {
    guard answer != nil, let fetchedAt else { return true }
    return now - fetchedAt >= staleAfter
  }

  var titles: [String]? {
    answer.map { $0.map { stored[$0]!.title } }
  }

  mutating func answer(_ issues: [(id: Int, title: String)], stamp: Double, validator: String?) {
    var ids: [Int] = []
    for issue in issues {
      if let existing = stored[issue.id] {
        if stamp > existing.stamp { stored[issue.id] = (issue.title, stamp) }
      } else if let tomb = tombstones[issue.id], stamp <= tomb {
        continue
      } else {
        tombstones[issue.id] = nil
        stored[issue.id] = (issue.title, stamp)
      }
      ids.append(issue.id)
    }
    answer = ids
    fetchedAt = now
    self.validator = validator
  }

  mutating func remove(_ id: Int) {
    tombstones[id] = stored[id]!.stamp
    stored[id] = nil
    answer?.removeAll { $0 == id }
  }
}

@Suite("Persistence: a seeded model of resources' answers across relaunches")
struct ResourceRelaunchModelTests {
  static let key = ResourceKey<[Issue]>("issues")

  @Test(
    "Random fetches, removals, clock advances and relaunches keep the answer the model's",
    .timeLimit(.minutes(5)), arguments: [1, 2, 3, 4])
  func randomRun(seed: UInt64) async throws {
    var random = SeededGenerator(seed: seed &* 0xD1B5_4A32)
    let directory = TemporaryDirectory()
    let clock = ManualClock(now: Date(timeIntervalSince1970: 1_000))
    var model = RelaunchModel()
    let next = Locked<Result<Fetched<[Issue]>, any Error>?>(nil)
    let requests = Locked<[ResourceRequest]>([])
    var map = try launch(directory.database, clock: clock)
    func make(_ map: IdentityMap) -> Resource<[Issue]> {
      map.resource(Self.key, staleAfter: .seconds(60), keepFor: .zero, retry: .none) { request in
        requests.append(request)
        return try next.value!.get()
      }
    }
    var resource: Resource<[Issue]>? = make(map)
    var stamp = 10.0
    var log: [String] = []

    func check(_ step: Int, _ what: String) {
      let state = resource!.state
      let context = "seed \(seed), step \(step) (\(what)): \(log.suffix(5).joined(separator: "; "))"
      #expect(state.value?.map(\.title) == model.titles, "\(context)")
      #expect(state.fetchedAt?.timeIntervalSince1970 == model.fetchedAt, "\(context)")
      #expect(state.isStale == model.isStale, "\(context)")
      #expect(!state.isLoading, "\(context)")
    }

    for step in 0..<max(120, randomSteps(share: 800)) {
      switch Int.random(in: 0..<100, using: &random) {
      case 0..<30:
        let ids = Array(0..<6).shuffled(using: &random).prefix(
          Int.random(in: 0...4, using: &random))
        let issueStamp = stamp + Double(Int.random(in: -3...1, using: &random))
        stamp = max(stamp, issueStamp)
        let issues = ids.map { Issue.make($0, title: "issue \($0) at \(step)", at: issueStamp) }
        let validator = Bool.random(using: &random) ? "\"e\(step)\"" : nil
        log.append("answer \(Array(ids)) at \(issueStamp)")
        next.withValue { $0 = .success(.value(issues, validator: validator)) }
        let sent = model.answer == nil ? nil : model.validator
        _ = try await resource!.refresh()
        #expect(requests.value.last?.validator == sent, "validator, seed \(seed) step \(step)")
        model.answer(
          issues.map { ($0.id, $0.title) }, stamp: issueStamp, validator: validator)
      case 30..<40:
        log.append("not modified")
        next.withValue { $0 = .success(.notModified) }
        if model.answer == nil {
          await #expect(throws: ResourceError.notModifiedWithoutAnswer) {
            try await resource!.refresh()
          }
        } else {
          _ = try await resource!.refresh()
          model.fetchedAt = model.now
        }
      case 40..<46:
        log.append("fail")
        next.withValue { $0 = .failure(URLError(.notConnectedToInternet)) }
        await #expect(throws: URLError.self) { try await resource!.refresh() }
      case 46..<58:
        let seconds = [10.0, 30, 59, 60, 61, 600].randomElement(using: &random)!
        log.append("advance \(seconds)")
        clock.advance(by: .seconds(seconds))
        model.now += seconds
      case 58..<68:
        guard let id = model.answer?.randomElement(using: &random) else { continue }
        log.append("remove \(id)")
        map.remove(Issue.self, id: id)
        model.remove(id)
      case 68..<78:
        // A load: from the map while fresh; stale, at once, then refreshed with a value.
        log.append("load")
        let calls = requests.value.count
        let fresh = !model.isStale
        if fresh {
          #expect(try await resource!.load().map(\.title) == model.titles!)
          #expect(requests.value.count == calls, "fresh: no fetch, seed \(seed) step \(step)")
        } else if model.answer != nil {
          next.withValue { $0 = .success(.notModified) }
          #expect(try await resource!.load().map(\.title) == model.titles!)
          while resource!.state.isLoading { await Task.yield() }
          #expect(requests.value.count == calls + 1)
          model.fetchedAt = model.now
        } else {
          next.withValue { $0 = .success(.value([], validator: nil)) }
          _ = try await resource!.load()
          model.answer([], stamp: stamp, validator: nil)
        }
      case 78..<88:
        log.append("let go")
        resource = nil
        while map.statistics.aliases > 0 { await Task.yield() }
        resource = make(map)
      default:
        log.append("relaunch")
        try map.flush()
        resource = nil
        map = try launch(directory.database, clock: clock)
        resource = make(map)
      }
      check(step, log.last ?? "")
    }
    withExtendedLifetime(map) {}
  }
}
