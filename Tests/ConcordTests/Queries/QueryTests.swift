import Foundation
import TestSupport
import Testing

@testable import Concord

/// A work item with a state and a priority: the shape of a filtered, sorted list.
struct Job: Identifiable, Sendable, Equatable {
  var id: Int
  var title: String
  var isOpen: Bool
  var priority: Int
}

/// A board nesting jobs: a job stored only inside a board is a stored job too.
struct JobBoard: Aggregate, Equatable {
  var id: Int
  var jobs: [Job]
  static var nestedEntities: [NestedEntity<JobBoard>] { [.init(\.jobs)] }
}

private let openJobs: @Sendable (Job) -> Bool = { $0.isOpen }
private let byPriority: @Sendable (Job, Job) -> Bool = { $0.priority < $1.priority }

@Suite("Live queries: filtered and sorted results kept current")
struct QueryTests {
  @Test("opens with the matching entities, in order")
  func opensWithMatches() {
    let map = IdentityMap()
    let jobs = map.store([
      Job(id: 1, title: "a", isOpen: true, priority: 3),
      Job(id: 2, title: "b", isOpen: false, priority: 1),
      Job(id: 3, title: "c", isOpen: true, priority: 2),
    ])
    let open = map.query(Job.self, filter: openJobs, sortedBy: byPriority)
    #expect(open.value.map(\.id) == [3, 1])
    withExtendedLifetime(jobs) {}
    map._core._checkInvariants()
  }

  @Test("an entity enters, moves and leaves as it is written and removed")
  func entersMovesLeaves() {
    let map = IdentityMap()
    let open = map.query(Job.self, filter: openJobs, sortedBy: byPriority)
    #expect(open.value.isEmpty)
    map.store(Job(id: 1, title: "a", isOpen: true, priority: 5))
    map.store(Job(id: 2, title: "b", isOpen: true, priority: 1))
    #expect(open.value.map(\.id) == [2, 1])
    map.update(Job.self, id: 1) { $0.priority = 0 }
    #expect(open.value.map(\.id) == [1, 2])
    map.update(Job.self, id: 2) { $0.title = "renamed" }
    #expect(open.value.map(\.title) == ["a", "renamed"])
    map.update(Job.self, id: 1) { $0.isOpen = false }
    #expect(open.value.map(\.id) == [2])
    map.remove(Job.self, id: 2)
    #expect(open.value.isEmpty)
    map._core._checkInvariants()
  }

  @Test("without a comparator, and for ties, the order first stored")
  func orderFirstStored() {
    let map = IdentityMap()
    let all = map.query(Job.self, sortedBy: { $0.isOpen && !$1.isOpen })
    map.store([
      Job(id: 5, title: "e", isOpen: false, priority: 0),
      Job(id: 3, title: "c", isOpen: true, priority: 0),
      Job(id: 9, title: "i", isOpen: true, priority: 0),
    ])
    map.store(Job(id: 1, title: "a", isOpen: false, priority: 0))
    #expect(all.value.map(\.id) == [3, 9, 5, 1])
    let unsorted = map.query(Job.self)
    #expect(unsorted.value.map(\.id) == [5, 3, 9, 1])
    // One that leaves and comes back counts from its return.
    map.remove(Job.self, id: 5)
    map.store(Job(id: 5, title: "e", isOpen: false, priority: 0))
    #expect(unsorted.value.map(\.id) == [3, 9, 1, 5])
    map._core._checkInvariants()
  }

  @Test("the query holds exactly its members")
  func holdsItsMembers() {
    let map = IdentityMap()
    let open = map.query(Job.self, filter: openJobs)
    // Stored without a handle: the query keeps the open one, the closed one is released.
    map.store(Job(id: 1, title: "a", isOpen: true, priority: 0))
    map.store(Job(id: 2, title: "b", isOpen: false, priority: 0))
    #expect(map.count == 1)
    #expect(map.find(Job.self, id: 1) != nil)
    // Leaving the result releases an entity nothing else holds.
    map.update(Job.self, id: 1) { $0.isOpen = false }
    #expect(map.count == 0)
    #expect(open.value.isEmpty)
    map._core._checkInvariants()
  }

  @Test("dropping the handle closes the query and releases its members")
  func closing() {
    let map = IdentityMap()
    var open: EntityObserver<[Job]>? = map.query(Job.self, filter: openJobs)
    map.store(Job(id: 1, title: "a", isOpen: true, priority: 0))
    #expect(map.count == 1)
    #expect(open?.value.count == 1)
    open = nil
    #expect(map.count == 0)
    #expect(map._core.read { map._core.audience.consumers } == 0)
    map._core._checkInvariants()
  }

  @Test("one notification per write or transaction that changes the result; none otherwise")
  func delivery() {
    let map = IdentityMap()
    let keep = map.store([
      Job(id: 1, title: "a", isOpen: true, priority: 1),
      Job(id: 2, title: "b", isOpen: false, priority: 2),
    ])
    let open = map.query(Job.self, filter: openJobs, sortedBy: byPriority)
    let seen = Locked<[[Int]]>([])
    let subscription = open.observe { seen.append($0.map(\.id)) }
    map.update(Job.self, id: 2) { $0.title = "closed, renamed" }  // not in the result
    map.store(Job(id: 1, title: "a", isOpen: true, priority: 1))  // == to what is stored
    map.transaction { transaction in
      transaction.update(Job.self, id: 2) { $0.isOpen = true }
      transaction.update(Job.self, id: 2) { $0.priority = 0 }
      transaction.store(Job(id: 3, title: "c", isOpen: true, priority: 9))
    }
    map.transaction { transaction in  // ends where it started
      transaction.update(Job.self, id: 1) { $0.priority = 7 }
      transaction.update(Job.self, id: 1) { $0.priority = 1 }
    }
    #expect(seen.value == [[2, 1, 3]])
    subscription.cancel()
    withExtendedLifetime(keep) {}
  }

  @Test("a transaction that throws changes no result")
  func rollback() {
    struct Failure: Error {}
    let map = IdentityMap()
    let open = map.query(Job.self, filter: openJobs)
    map.store(Job(id: 1, title: "a", isOpen: true, priority: 0))
    #expect(throws: Failure.self) {
      try map.transaction { transaction in
        transaction.update(Job.self, id: 1) { $0.isOpen = false }
        transaction.store(Job(id: 2, title: "b", isOpen: true, priority: 0))
        throw Failure()
      }
    }
    #expect(open.value.map(\.id) == [1])
    #expect(map.count == 1)
    map._core._checkInvariants()
  }

  @Test("entities nested in aggregates are stored entities of their own type")
  func nestedEntities() {
    let map = IdentityMap()
    let open = map.query(Job.self, filter: openJobs, sortedBy: byPriority)
    let board = map.store(
      JobBoard(
        id: 1,
        jobs: [
          Job(id: 1, title: "a", isOpen: true, priority: 2),
          Job(id: 2, title: "b", isOpen: true, priority: 1),
        ]))
    #expect(open.value.map(\.id) == [2, 1])
    // A write through the aggregate reaches the query.
    map.update(JobBoard.self, id: 1) { $0.jobs[0].isOpen = false }
    #expect(open.value.map(\.id) == [2])
    // A write to the entity reaches the aggregate and the query.
    map.update(Job.self, id: 2) { $0.priority = 5 }
    #expect(open.value.first?.priority == 5)
    #expect(board.value.jobs[1].priority == 5)
    map._core._checkInvariants()
  }

  @Test("an aggregate's query follows its nested entities")
  func aggregateQuery() {
    let map = IdentityMap()
    let busy = map.query(JobBoard.self, filter: { $0.jobs.contains(where: \.isOpen) })
    map.store(JobBoard(id: 1, jobs: [Job(id: 1, title: "a", isOpen: false, priority: 0)]))
    #expect(busy.value.isEmpty)
    #expect(map.count == 0)
    var board: EntityObserver<JobBoard>? = map.store(
      JobBoard(id: 2, jobs: [Job(id: 7, title: "x", isOpen: false, priority: 0)]))
    #expect(busy.value.isEmpty)
    map.update(Job.self, id: 7) { $0.isOpen = true }
    #expect(busy.value.map(\.id) == [2])
    #expect(busy.value.first?.jobs.first?.isOpen == true)
    // Now the query holds the board, and the board its job.
    board = nil
    #expect(map.count == 2)
    map.update(Job.self, id: 7) { $0.isOpen = false }
    #expect(busy.value.isEmpty)
    #expect(map.count == 0)
    withExtendedLifetime(board) {}
    map._core._checkInvariants()
  }

  @Test("entities in the release buffer are stored entities, and a query holds them")
  func releaseBuffer() {
    let map = IdentityMap(retention: .keepReleased(2))
    map.store(Job(id: 1, title: "a", isOpen: true, priority: 0))
    map.store(Job(id: 2, title: "b", isOpen: false, priority: 0))
    let open = map.query(Job.self, filter: openJobs)
    #expect(open.value.map(\.id) == [1])
    map.store(Job(id: 3, title: "c", isOpen: false, priority: 0))
    map.store(Job(id: 4, title: "d", isOpen: false, priority: 0))
    // 1 left the buffer for the query, so the buffer evicts only beyond the closed ones.
    #expect(map.find(Job.self, id: 1) != nil)
    map._core._checkInvariants()
  }

  @Test("a filter and a comparator may read the map")
  func predicateReadsTheMap() {
    let map = IdentityMap()
    let owners = map.store([User(id: 1, name: "active"), User(id: 2, name: "away")])
    let activeOwned = map.query(
      Job.self,
      filter: { [map] job in map.find(User.self, id: job.priority)?.value.name == "active" },
      sortedBy: { [map] first, second in map.count > 0 && first.id < second.id })
    map.store(Job(id: 10, title: "a", isOpen: true, priority: 1))
    map.store(Job(id: 11, title: "b", isOpen: true, priority: 2))
    #expect(activeOwned.value.map(\.id) == [10])
    withExtendedLifetime(owners) {}
    map._core._checkInvariants()
  }

  @Test("a filter that writes to the map stops the program with a clear message")
  func predicateWritesTraps() async {
    await #expect(processExitsWith: .failure) {
      let map = IdentityMap()
      let query = map.query(
        Job.self,
        filter: { [map] job in
          map.store(User(id: job.id, name: "side effect"))
          return true
        })
      map.store(Job(id: 1, title: "a", isOpen: true, priority: 0))
      withExtendedLifetime(query) {}
    }
  }

  @Test("a query opened inside a transaction starts from what it commits")
  func openedInsideATransaction() {
    let map = IdentityMap()
    let opened = Locked<EntityObserver<[Job]>?>(nil)
    map.transaction { transaction in
      transaction.store(Job(id: 1, title: "a", isOpen: true, priority: 0))
      let query = map.query(Job.self, filter: openJobs)
      #expect(query.value.isEmpty)
      opened.withValue { $0 = query }
      transaction.store(Job(id: 2, title: "b", isOpen: true, priority: 0))
    }
    #expect(opened.value?.value.map(\.id) == [1, 2])
    #expect(map.count == 2)
    map._core._checkInvariants()
  }

  @Test("a subscription on a query opened inside a write is told of its first result")
  func observedWhenOpenedInsideAWrite() {
    let map = IdentityMap()
    let seen = Locked<[[Int]]>([])
    let kept = map.transaction { transaction in
      transaction.store(Job(id: 1, title: "a", isOpen: true, priority: 0))
      let query = map.query(Job.self, filter: openJobs)
      let subscription = query.observe { seen.append($0.map(\.id)) }
      return (query, subscription)
    }
    #expect(seen.value == [[1]])
    withExtendedLifetime(kept) {}
  }

  @Test("a write that leaves the result == to what it was tells nobody")
  func equatableDedupe() {
    let map = IdentityMap()
    let all = map.query(Job.self, sortedBy: byPriority)
    map.store(Job(id: 1, title: "a", isOpen: true, priority: 1))
    map.store(Job(id: 2, title: "b", isOpen: true, priority: 2))
    let seen = Locked<Int>(0)
    let subscription = all.observe { _ in seen.increment() }
    map.transaction { transaction in
      transaction.remove(Job.self, id: 1)
      transaction.store(Job(id: 1, title: "a", isOpen: true, priority: 1))
    }
    #expect(all.value.map(\.id) == [1, 2])
    #expect(seen.value == 0)
    map.update(Job.self, id: 2) { $0.title = "b2" }
    #expect(seen.value == 1)
    subscription.cancel()
    map._core._checkInvariants()
  }

  @Test("removeAll empties every query")
  func removeAll() {
    let map = IdentityMap()
    let open = map.query(Job.self, filter: openJobs)
    map.store(Job(id: 1, title: "a", isOpen: true, priority: 0))
    map.removeAll()
    #expect(open.value.isEmpty)
    #expect(map.count == 0)
    map._core._checkInvariants()
  }

  @Test("with no query or collector, writes publish directly again")
  func noConsumersNoCost() {
    let map = IdentityMap()
    do {
      let query = map.query(Job.self)
      let collector = map.collector(Job.self)
      #expect(map._core.read { map._core.audience.consumers } == 2)
      withExtendedLifetime((query, collector)) {}
    }
    #expect(map._core.read { map._core.audience.consumers } == 0)
    #expect(map._core.read { map._core.registry.table(for: Job.self).consumers == nil })
  }
}
