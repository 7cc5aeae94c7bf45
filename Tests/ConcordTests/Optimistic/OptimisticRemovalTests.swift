import Foundation
import Testing

@testable import Concord

/// A board nesting jobs 1 ("a") and 2 ("b"), held by the returned handle.
func storeBoardOfTwoJobs(in map: IdentityMap) -> EntityObserver<JobBoard> {
  map.store(
    JobBoard(
      id: 1,
      jobs: [
        Job(id: 1, title: "a", isOpen: true, priority: 0),
        Job(id: 2, title: "b", isOpen: true, priority: 0),
      ]))
}

@Suite("Optimistic layers and removal")
struct OptimisticRemovalTests {
  @Test("a removal from outside wins over every layer")
  func outsideRemovalWins() {
    let map = IdentityMap()
    let job = map.store(Job(id: 1, title: "a", isOpen: true, priority: 0))
    let layer = map.optimistic { $0.update(Job.self, id: 1) { $0.title = "mine" } }
    map.remove(Job.self, id: 1)
    #expect(job.isRemoved)
    #expect(shadowCount(map) == 0)
    // The write lowered the job by exchanging its value (it nests nothing, nothing nests it),
    // and the removal ended the shadow: the removed node, which the handle keeps, must not
    // stay marked as exchanged.
    #expect(!map._core.read { job._handle.node.s.flags.contains(.exchanged) })
    layer.rollback()
    #expect(map.find(Job.self, id: 1) == nil)
    layer.commit()
    #expect(map.find(Job.self, id: 1) == nil)
    map._core._checkInvariants()
  }

  @Test("a removal in a layer is an ordinary removal, kept by rollback")
  func removalInALayer() {
    let map = IdentityMap()
    let job = map.store(Job(id: 1, title: "a", isOpen: true, priority: 0))
    let below = map.optimistic { $0.update(Job.self, id: 1) { $0.title = "below" } }
    let layer = map.optimistic { $0.remove(Job.self, id: 1) }
    #expect(job.isRemoved)
    layer.rollback()
    below.rollback()
    #expect(job.isRemoved)
    #expect(map.find(Job.self, id: 1) == nil)
    #expect(shadowCount(map) == 0)
    map._core._checkInvariants()
  }

  @Test("removal cascades through aggregates as for ordinary writes")
  func removalCascade() {
    let map = IdentityMap()
    let board = storeBoardOfTwoJobs(in: map)
    let layer = map.optimistic { $0.update(Job.self, id: 2) { $0.title = "mine" } }
    #expect(board.value.jobs.map(\.title) == ["a", "mine"])
    map.remove(Job.self, id: 1)
    #expect(board.value.jobs.map(\.title) == ["mine"])
    layer.rollback()
    #expect(board.value.jobs.map(\.title) == ["b"])
    map._core._checkInvariants()
  }
}
