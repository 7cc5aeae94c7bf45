import Foundation
import Testing

@testable import Concord

@Suite("Optimistic layers: server writes kept underneath")
struct OptimisticShadowedWriteTests {
  @Test("a server write under a pending layer is kept, shadowed, and revealed by rollback")
  func shadowedWrite() {
    let map = IdentityMap()
    let job = map.store(Job(id: 1, title: "server", isOpen: true, priority: 0))
    let layer = map.optimistic { $0.update(Job.self, id: 1) { $0.title = "mine" } }
    map.store(Job(id: 1, title: "server, later", isOpen: false, priority: 3))
    #expect(job.value.title == "mine")
    #expect(job.value.isOpen, "the layer's whole value stays visible")
    layer.rollback()
    #expect(job.value == Job(id: 1, title: "server, later", isOpen: false, priority: 3))
    map._core._checkInvariants()
  }

  @Test("update from outside starts from the value underneath")
  func updateStartsUnderneath() {
    let map = IdentityMap()
    let counter = map.store(Counter(id: 1, value: 10))
    let layer = map.optimistic { $0.update(Counter.self, id: 1) { $0.value = 100 } }
    map.update(Counter.self, id: 1) { $0.value += 1 }
    #expect(counter.value.value == 100)
    layer.rollback()
    #expect(counter.value.value == 11)
    map._core._checkInvariants()
  }

  @Test("Mergeable values merge into the value underneath")
  func mergeUnderneath() throws {
    let map = IdentityMap()
    let user = map.store(try Recorded.decode(GitHubUser.self, Recorded.gedProfile))
    let layer = map.optimistic {
      $0.update(GitHubUser.self, id: 7) { $0.bio = "Optimistic bio" }
    }
    // A page nests the user's stub: it merges into the profile underneath.
    map.store(try Recorded.decode([GitHubIssue].self, Recorded.issuesPage))
    #expect(user.value.bio == "Optimistic bio")
    layer.rollback()
    #expect(user.value.bio == "Archmage of Roke")
    #expect(user.value.name == "Sparrowhawk", "the stub did not wipe the profile underneath")
    map._core._checkInvariants()
  }

  @Test("an entity only a layer created is, underneath, what the layer wrote, until stored")
  func createdByALayer() {
    let map = IdentityMap()
    let layer = map.optimistic { $0.store(Job(id: 1, title: "draft", isOpen: true, priority: 0)) }
    // The server confirms the entity with its own value: now it exists underneath.
    map.store(Job(id: 1, title: "server", isOpen: true, priority: 0))
    let job = map.find(Job.self, id: 1)
    #expect(job?.value.title == "draft")
    layer.rollback()
    #expect(job?.value.title == "server", "stored underneath meanwhile: kept")
    map._core._checkInvariants()
  }
}
