import Foundation
import TestSupport
import Testing

@testable import Concord

// A seeded model-based random test of live queries and collectors. Random writes (entities,
// batches, aggregates nesting them, transactions, removals, dropped handles) run against a map
// with queries and collectors opening and closing; a step moves the creation counter close to
// the mark at which the table renumbers its nodes. After every step:
//
// - every open query equals a brute-force filter and sort of the entities the map stores, ties
//   broken by the order the model saw each entity first stored;
// - every written entity that matches an open query is still stored (the query holds it);
// - the engine's invariants hold (`_checkInvariants`, which also checks each query's order,
//   membership and holds, and that its member filter answers "perhaps" for every member).
//
// Collectors are drained at random and compared with a model collector, fed by the changes the
// model expects each step to commit and collapsing them as the table in `ChangeCollector`'s
// documentation says.

private struct QueryKind: CustomStringConvertible {
  enum Match {
    case filter(@Sendable (Job) -> Bool)
    case isOpen(Bool)
    case priority(Int)
  }
  let name: String
  let match: Match
  let order: (@Sendable (Job, Job) -> Bool)?

  var description: String { name }

  func matches(_ job: Job) -> Bool {
    switch match {
    case .filter(let filter): filter(job)
    case .isOpen(let value): job.isOpen == value
    case .priority(let value): job.priority == value
    }
  }

  func open(on map: IdentityMap) -> EntityObserver<[Job]> {
    switch match {
    case .filter(let filter): map.query(Job.self, filter: filter, sortedBy: order)
    case .isOpen(let value): map.query(Job.self, where: \.isOpen, equals: value, sortedBy: order)
    case .priority(let value):
      map.query(Job.self, where: \.priority, equals: value, sortedBy: order)
    }
  }

  static func random(using random: inout SeededGenerator) -> QueryKind {
    let byPriority: @Sendable (Job, Job) -> Bool = { $0.priority < $1.priority }
    let byTitleDescending: @Sendable (Job, Job) -> Bool = { $0.title > $1.title }
    let value = Int.random(in: 0..<4, using: &random)
    switch Int.random(in: 0..<7, using: &random) {
    case 0: return QueryKind(name: "open by priority", match: .filter(\.isOpen), order: byPriority)
    case 1: return QueryKind(name: "all", match: .filter { _ in true }, order: nil)
    case 2:
      return QueryKind(
        name: "even, by title descending", match: .filter { $0.priority % 2 == 0 },
        order: byTitleDescending)
    case 3:
      return QueryKind(name: "index open by priority", match: .isOpen(true), order: byPriority)
    case 4: return QueryKind(name: "index closed", match: .isOpen(false), order: nil)
    case 5:
      return QueryKind(
        name: "index priority \(value) by title", match: .priority(value),
        order: byTitleDescending)
    default: return QueryKind(name: "index priority \(value)", match: .priority(value), order: nil)
    }
  }
}

/// The contract's collector, written from the table in `ChangeCollector`'s documentation. Each
/// entry remembers the step of its entity's first change: entries of different steps must drain in
/// step order; the changes of one write come in no promised order among themselves.
private struct ModelCollector {
  var entries: [Int: (change: EntityChange<Job>, step: Int)] = [:]

  mutating func collect(_ change: EntityChange<Job>, step: Int) {
    let id = change.value.id
    guard let pending = entries[id] else {
      entries[id] = (change, step)
      return
    }
    let collapsed: EntityChange<Job>?
    switch (pending.change, change) {
    case (.inserted, .updated), (.inserted, .inserted): collapsed = .inserted(change.value)
    case (.inserted, .removed): collapsed = nil
    case (.removed, .inserted), (.updated, .inserted), (.removed, .updated):
      collapsed = .updated(change.value)
    default: collapsed = change
    }
    entries[id] = collapsed.map { ($0, pending.step) }
  }

  /// Whether `drained` is what the model holds, in an order it allows; and forgets it all.
  mutating func matches(_ drained: [EntityChange<Job>]) -> Bool {
    defer { entries = [:] }
    guard drained.count == entries.count else { return false }
    var lastStep = Int.min
    for change in drained {
      guard let entry = entries[change.value.id], entry.change == change, entry.step >= lastStep
      else { return false }
      lastStep = entry.step
    }
    return true
  }
}

private struct QueryModelRun {
  var random: SeededGenerator
  let map = IdentityMap()
  var handles: [Any] = []
  var queries: [(kind: QueryKind, handle: EntityObserver<[Job]>)] = []
  var collectors: [(ChangeCollector<Job>, ModelCollector)] = []
  /// When the model saw each stored job first stored, for ties.
  var storeOrder: [Int: Int] = [:]
  var serial = 0
  var log: [String] = []
  var failed = false

  init(seed: UInt64, exhaustive: Bool) {
    random = SeededGenerator(seed: seed)
    map._core.pass.isExhaustive = exhaustive
  }

  var stored: [Int: Job] {
    map._core.read {
      var jobs: [Int: Job] = [:]
      for slot in map._core.registry.table(for: Job.self).slots.nodes {
        let job = slot.takeUnretainedValue().value
        jobs[job.id] = job
      }
      return jobs
    }
  }

  mutating func randomJob(id: Int? = nil) -> Job {
    Job(
      id: id ?? Int.random(in: 0..<16, using: &random),
      title: ["a", "b", "c"].randomElement(using: &random)!,
      isOpen: Bool.random(using: &random), priority: Int.random(in: 0..<4, using: &random))
  }

  mutating func distinctJobs(_ count: Int) -> [Job] {
    var ids = Array(0..<16)
    ids.shuffle(using: &random)
    return ids.prefix(count).map { randomJob(id: $0) }
  }

  mutating func keep(_ handle: Any) {
    if Int.random(in: 0..<10, using: &random) < 7 { handles.append(handle) }
  }

  /// One random step. Returns the jobs it writes, in the order written, with their final
  /// values, and the jobs it removes.
  mutating func step() -> (written: [Job], removed: Set<Int>) {
    let before = stored
    switch Int.random(in: 0..<16, using: &random) {
    case 0, 1:
      let job = randomJob()
      log.append("store \(job)")
      keep(map.store(job))
      return ([job], [])
    case 2:
      let jobs = distinctJobs(Int.random(in: 1...4, using: &random))
      log.append("store batch \(jobs.map(\.id))")
      keep(map.store(jobs))
      return (jobs, [])
    case 3, 4:
      let id = Int.random(in: 0..<16, using: &random)
      guard var job = before[id] else { return ([], []) }
      switch Int.random(in: 0..<3, using: &random) {
      case 0: job.isOpen.toggle()
      case 1: job.priority = Int.random(in: 0..<4, using: &random)
      default: job.title = ["a", "b", "c"].randomElement(using: &random)!
      }
      log.append("update \(job)")
      let updated = job
      map.update(Job.self, id: id) { $0 = updated }
      return ([job], [])
    case 5:
      let id = Int.random(in: 0..<16, using: &random)
      log.append("remove \(id)")
      map.remove(Job.self, id: id)
      return ([], before[id] == nil ? [] : [id])
    case 6:
      let board = JobBoard(
        id: Int.random(in: 0..<4, using: &random),
        jobs: distinctJobs(Int.random(in: 1...3, using: &random)))
      log.append("store board \(board.id) \(board.jobs.map(\.id))")
      keep(map.store(board))
      return (board.jobs, [])
    case 7:
      let id = Int.random(in: 0..<4, using: &random)
      guard let board = map.find(JobBoard.self, id: id)?.value, !board.jobs.isEmpty else {
        return ([], [])
      }
      var jobs = board.jobs
      if Bool.random(using: &random) || jobs.count == 1 {
        jobs[0].isOpen.toggle()
      } else {
        jobs.removeLast()
      }
      log.append("update board \(id) \(jobs.map(\.id))")
      let updated = jobs
      map.update(JobBoard.self, id: id) { $0.jobs = updated }
      return (jobs, [])
    case 8:
      guard !handles.isEmpty else { return ([], []) }
      log.append("drop a handle")
      handles.remove(at: Int.random(in: 0..<handles.count, using: &random))
      return ([], [])
    case 9:
      if queries.count < 6 || Bool.random(using: &random) {
        let kind = QueryKind.random(using: &random)
        if Bool.random(using: &random) {
          log.append("open query \(kind)")
          queries.append((kind, kind.open(on: map)))
        } else {
          // Opened inside a write: it starts from what the write commits.
          log.append("open query \(kind) inside a transaction")
          let job = randomJob()
          let opened = map.transaction { transaction in
            keep(transaction.store(job))
            return kind.open(on: map)
          }
          queries.append((kind, opened))
          return ([job], [])
        }
      }
      if queries.count > 3 && Bool.random(using: &random) {
        let index = Int.random(in: 0..<queries.count, using: &random)
        log.append("close query \(queries[index].kind)")
        queries.remove(at: index)
      }
      return ([], [])
    case 10:
      var shadow = before
      var written: [Job] = []
      log.append("transaction")
      map.transaction { transaction in
        for _ in 0..<Int.random(in: 1...3, using: &random) {
          if Bool.random(using: &random), let id = shadow.keys.randomElement(using: &random) {
            var job = shadow[id]!
            job.priority = Int.random(in: 0..<4, using: &random)
            job.isOpen.toggle()
            let updated = job
            transaction.update(Job.self, id: id) { $0 = updated }
            shadow[id] = job
            written.append(job)
          } else {
            let job = randomJob()
            keep(transaction.store(job))
            shadow[job.id] = job
            written.append(job)
          }
        }
      }
      // The last write of each job is what commits; the first write decides the order.
      var final: [Int: Job] = [:]
      for job in written { final[job.id] = job }
      var seen: Set<Int> = []
      return (written.filter { seen.insert($0.id).inserted }.map { final[$0.id]! }, [])
    case 11:
      if collectors.isEmpty || Bool.random(using: &random) {
        log.append("open collector")
        collectors.append((map.collector(Job.self), ModelCollector()))
      } else {
        log.append("cancel a collector")
        let index = Int.random(in: 0..<collectors.count, using: &random)
        collectors[index].0.cancel()
        collectors.remove(at: index)
      }
      return ([], [])
    case 13:
      struct Thrown: Error {}
      log.append("transaction that throws")
      try? map.transaction { transaction in
        transaction.store(randomJob())
        if let id = before.keys.randomElement(using: &random) {
          transaction.update(Job.self, id: id) { $0.isOpen.toggle() }
          transaction.remove(Job.self, id: id)
        }
        throw Thrown()
      }
      return ([], [])
    case 15:
      // NB: the next creations, in whatever write, cross the mark at which the table renumbers
      // its nodes (`_Table.renumberNodes()`): creation order must survive it.
      let steps = UInt32.random(in: 1...3, using: &random)
      log.append("creation counter \(steps) short of the renumbering mark")
      map._core.write {
        let table = map._core.registry.table(for: Job.self)
        table.lastSequence = max(table.lastSequence, _Table<Job>.renumberingSequence - steps)
      }
      return ([], [])
    case 14:
      guard Int.random(in: 0..<20, using: &random) == 0 else { return ([], []) }
      log.append("removeAll")
      map.removeAll()
      return ([], Set(before.keys))
    default:
      log.append("drain")
      for index in collectors.indices {
        let drained = collectors[index].0.drain()
        let expected = collectors[index].1.entries
        let ok = collectors[index].1.matches(drained)
        #expect(ok, "drained \(drained), expected \(expected) after \(log.suffix(8))")
        if !ok { failed = true }
      }
      return ([], [])
    }
  }

  mutating func run(steps: Int) {
    for _ in 0..<steps {
      let before = stored
      let (written, removed) = step()
      // The changes the step commits, and the order of first storing.
      var changes: [EntityChange<Job>] = []
      for job in written {
        if let old = before[job.id] {
          if old != job { changes.append(.updated(job)) }
        } else {
          changes.append(.inserted(job))
          serial += 1
          storeOrder[job.id] = serial
        }
      }
      for id in removed { changes.append(.removed(before[id]!)) }
      for index in collectors.indices {
        for change in changes { collectors[index].1.collect(change, step: log.count) }
      }
      guard check(written: written) && !failed else { return }
      map._core._checkInvariants()
    }
  }

  /// Whether every query and every written job is as the model expects.
  func check(written: [Job]) -> Bool {
    var ok = true
    let now = stored
    for (kind, handle) in queries {
      let expected = now.values.filter(kind.matches).sorted { first, second in
        if let order = kind.order {
          if order(first, second) { return true }
          if order(second, first) { return false }
        }
        return storeOrder[first.id]! < storeOrder[second.id]!
      }
      let value = handle.value
      #expect(value == expected, "query \(kind) after \(log.suffix(8))")
      ok = ok && value == expected
    }
    for job in written where queries.contains(where: { $0.kind.matches(job) }) {
      #expect(now[job.id] != nil, "\(job) matches a query but was released, after \(log.suffix(8))")
      ok = ok && now[job.id] != nil
    }
    return ok
  }

  mutating func finish() {
    queries = []
    handles = []
    collectors = []
    #expect(map.count == 0, "something outlived every holder")
    #expect(map._core.read { map._core.audience.consumers } == 0)
    map._core._checkInvariants()
  }
}

@Suite("Live queries and collectors against a model")
struct QueryModelTests {
  /// Ten runs of a hundredth of the random steps each, each run twice: once with the member
  /// filter in front of each query's set of members (`_MemberFilter`), once without it
  /// (`_Pass.isExhaustive`).
  static let steps = randomSteps(share: 100)

  @Test(arguments: 0..<10, [false, true])
  func randomRun(seed: UInt64, exhaustive: Bool) {
    var run = QueryModelRun(seed: 0xC0C0_0000 + seed, exhaustive: exhaustive)
    run.run(steps: Self.steps)
    run.finish()
  }
}
