import Foundation
import TestSupport
import Testing

@testable import Concord

@Suite("Optimistic layers: who is told, and what queries see")
struct OptimisticNotificationTests {
  @Test("each visible change notifies once; what stays hidden notifies nobody")
  func visibleChangesOnly() {
    let map = IdentityMap()
    let counter = map.store(Counter(id: 1, value: 0))
    let seen = Locked<[Int]>([])
    let subscription = counter.observe { seen.append($0.value) }
    let layer = map.optimistic { $0.update(Counter.self, id: 1) { $0.value = 5 } }
    map.update(Counter.self, id: 1) { $0.value = 1 }  // underneath: hidden
    map.update(Counter.self, id: 1) { $0.value = 2 }
    layer.rollback()
    #expect(seen.value == [5, 2])
    subscription.cancel()
  }

  @Test("a rollback that reveals a value == to the one shown notifies nobody")
  func equalRevealNotifiesNobody() {
    let map = IdentityMap()
    let counter = map.store(Counter(id: 1, value: 0))
    let seen = Locked<[Int]>([])
    let subscription = counter.observe { seen.append($0.value) }
    let layer = map.optimistic { $0.update(Counter.self, id: 1) { $0.value = 5 } }
    map.update(Counter.self, id: 1) { $0.value = 5 }  // the server agrees
    layer.rollback()
    #expect(seen.value == [5])
    let confirmed = map.optimistic { $0.update(Counter.self, id: 1) { $0.value = 6 } }
    confirmed.commit()
    #expect(seen.value == [5, 6])
    subscription.cancel()
  }

  @Test("live queries and collectors see visible values only")
  func queriesAndCollectors() {
    let map = IdentityMap()
    let jobs = map.store([
      Job(id: 1, title: "a", isOpen: true, priority: 0),
      Job(id: 2, title: "b", isOpen: true, priority: 0),
    ])
    let open = map.query(Job.self, filter: { $0.isOpen })
    let changes = map.collector(Job.self)
    let close = map.optimistic { $0.update(Job.self, id: 1) { $0.isOpen = false } }
    #expect(open.value.map(\.id) == [2])
    map.update(Job.self, id: 1) { $0.title = "hidden" }  // underneath
    #expect(open.value.map(\.id) == [2])
    #expect(changes.drain() == [.updated(Job(id: 1, title: "a", isOpen: false, priority: 0))])
    close.rollback()
    #expect(open.value.map(\.id) == [1, 2])
    #expect(changes.drain() == [.updated(Job(id: 1, title: "hidden", isOpen: true, priority: 0))])
    withExtendedLifetime(jobs) {}
    map._core._checkInvariants()
  }
}
