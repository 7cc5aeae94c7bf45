import Foundation
import TestSupport
import Testing

@testable import Concord

@Suite("Queries and collectors under 8 concurrent writers")
struct QueryConcurrencyTests {
  static let writers = 8
  static let writesPerWriter = 300

  @Test("collectors lose nothing, and queries end equal to a brute-force filter")
  func concurrentWriters() async {
    let map = IdentityMap()
    let open = map.query(Job.self, filter: { $0.isOpen }, sortedBy: { $0.priority < $1.priority })
    let indexed = map.query(Job.self, where: \.isOpen, equals: false)
    let changes = map.collector(Job.self)
    let keep = Locked<[EntityObserver<Job>]>([])
    let seen = Locked<Int>(0)
    let subscription = open.observe { jobs in
      // Every delivered result is in order.
      #expect(zip(jobs, jobs.dropFirst()).allSatisfy { $0.priority <= $1.priority })
      seen.increment()
    }
    let drained = Locked<[EntityChange<Job>]>([])
    await withTaskGroup(of: Void.self) { group in
      for writer in 0..<Self.writers {
        group.addTask {
          var random = SeededGenerator(seed: UInt64(writer))
          for step in 0..<Self.writesPerWriter {
            let id = writer * 1_000 + Int.random(in: 0..<20, using: &random)
            switch step % 4 {
            case 0:
              keep.append(
                map.store(
                  Job(
                    id: id, title: "w\(writer)", isOpen: Bool.random(using: &random),
                    priority: Int.random(in: 0..<50, using: &random))))
            case 1: map.update(Job.self, id: id) { $0.isOpen.toggle() }
            case 2:
              map.update(Job.self, id: id) { $0.priority = Int.random(in: 0..<50, using: &random) }
            default:
              if writer % 2 == 0 { map.remove(Job.self, id: id) }
              drained.withValue { $0 += changes.drain() }
            }
          }
        }
      }
    }
    drained.withValue { $0 += changes.drain() }
    // Replaying the drains gives the final state: no change was lost.
    var replayed: [Int: Job] = [:]
    for change in drained.value {
      switch change {
      case .inserted(let job), .updated(let job): replayed[job.id] = job
      case .removed(let job): replayed[job.id] = nil
      }
    }
    let stored = map._core.read {
      map._core.registry.table(for: Job.self).slots.nodes.map { $0.takeUnretainedValue().value }
    }
    // Entities can only have left by removal (every store is kept, or held by a query).
    #expect(replayed.count == stored.count)
    for job in stored { #expect(replayed[job.id] == job) }
    let expectedOpen = stored.filter(\.isOpen)
    #expect(Set(open.value.map(\.id)) == Set(expectedOpen.map(\.id)))
    #expect(zip(open.value, open.value.dropFirst()).allSatisfy { $0.priority <= $1.priority })
    #expect(Set(indexed.value.map(\.id)) == Set(stored.filter { !$0.isOpen }.map(\.id)))
    #expect(seen.value > 0)
    subscription.cancel()
    map._core._checkInvariants()
    withExtendedLifetime(keep) {}
  }
}
