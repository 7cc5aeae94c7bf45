import Foundation
import TestSupport
import Testing

@testable import Concord

@Suite("Change collectors: what changed since I last looked")
struct CollectorTests {
  @Test("entries collapse as the contract's table says")
  func collapsing() {
    let map = IdentityMap()
    let changes = map.collector(Job.self)
    let a = Job(id: 1, title: "a", isOpen: true, priority: 0)
    let b = Job(id: 2, title: "b", isOpen: true, priority: 0)
    var handles = [map.store(a), map.store(b)]
    map.update(Job.self, id: 1) { $0.title = "a2" }  // inserted + updated
    #expect(
      changes.drain() == [
        .inserted(Job(id: 1, title: "a2", isOpen: true, priority: 0)), .inserted(b),
      ])
    #expect(changes.drain().isEmpty)

    map.update(Job.self, id: 1) { $0.priority = 1 }
    map.update(Job.self, id: 1) { $0.priority = 2 }  // updated + updated
    map.update(Job.self, id: 2) { $0.priority = 3 }
    map.remove(Job.self, id: 2)  // updated + removed
    #expect(
      changes.drain() == [
        .updated(Job(id: 1, title: "a2", isOpen: true, priority: 2)),
        .removed(Job(id: 2, title: "b", isOpen: true, priority: 3)),
      ])

    map.store(Job(id: 3, title: "c", isOpen: true, priority: 0))  // inserted + released
    handles.append(map.store(Job(id: 4, title: "d", isOpen: true, priority: 0)))
    map.remove(Job.self, id: 4)  // inserted + removed: nothing
    map.remove(Job.self, id: 1)
    // removed + inserted
    handles.append(map.store(Job(id: 1, title: "back", isOpen: false, priority: 0)))
    // inserted, released, inserted
    map.store(Job(id: 3, title: "c again", isOpen: true, priority: 0))
    #expect(
      changes.drain() == [
        .inserted(Job(id: 3, title: "c again", isOpen: true, priority: 0)),
        .updated(Job(id: 1, title: "back", isOpen: false, priority: 0)),
      ])
    withExtendedLifetime(handles) {}
  }

  @Test("releases, writes == to what is stored, and rolled-back transactions are not changes")
  func notChanges() {
    struct Failure: Error {}
    let map = IdentityMap()
    var held: EntityObserver<Job>? = map.store(Job(id: 1, title: "a", isOpen: true, priority: 0))
    let changes = map.collector(Job.self)
    map.store(Job(id: 1, title: "a", isOpen: true, priority: 0))
    held = nil
    #expect(map.count == 0)
    #expect(throws: Failure.self) {
      try map.transaction { transaction in
        transaction.store(Job(id: 2, title: "b", isOpen: true, priority: 0))
        throw Failure()
      }
    }
    #expect(changes.drain().isEmpty)
    withExtendedLifetime(held) {}
  }

  @Test("a collector holds nothing alive, and sees entities nested in aggregates")
  func holdsNothing() {
    let map = IdentityMap()
    let changes = map.collector(Job.self)
    map.store(JobBoard(id: 1, jobs: [Job(id: 1, title: "a", isOpen: true, priority: 0)]))
    #expect(map.count == 0)
    #expect(changes.drain() == [.inserted(Job(id: 1, title: "a", isOpen: true, priority: 0))])
  }

  @Test("cancel stops collecting and keeps what was collected; so does deinit")
  func cancelling() {
    let map = IdentityMap()
    let changes = map.collector(Job.self)
    let kept = map.store(Job(id: 1, title: "a", isOpen: true, priority: 0))
    changes.cancel()
    changes.cancel()
    map.update(Job.self, id: 1) { $0.title = "later" }
    #expect(changes.drain() == [.inserted(Job(id: 1, title: "a", isOpen: true, priority: 0))])
    #expect(map._core.read { map._core.audience.consumers } == 0)
    do { _ = map.collector(Job.self) }
    #expect(map._core.read { map._core.audience.consumers } == 0)
    withExtendedLifetime(kept) {}
  }

  @Test("a collector dropped inside a transaction body detaches when the write ends")
  func droppedInsideAWrite() {
    let map = IdentityMap()
    var outer: ChangeCollector<Job>? = map.collector(Job.self)
    let inner = Locked<ChangeCollector<Job>?>(nil)
    let kept = map.transaction { transaction in
      let job = transaction.store(Job(id: 1, title: "a", isOpen: true, priority: 0))
      outer = nil
      // Opened inside the write: it collects the whole write when it commits.
      inner.withValue { $0 = map.collector(Job.self) }
      return job
    }
    #expect(inner.value?.drain() == [.inserted(Job(id: 1, title: "a", isOpen: true, priority: 0))])
    inner.withValue { $0 = nil }
    #expect(map._core.read { map._core.audience.consumers } == 0)
    withExtendedLifetime((outer, kept)) {}
  }

  @Test("one collector per type: other types are not collected")
  func perType() {
    let map = IdentityMap()
    let jobs = map.collector(Job.self)
    let users = map.collector(User.self)
    let kept = (
      map.store(User(id: 1, name: "u")),
      map.store(Job(id: 1, title: "j", isOpen: true, priority: 0))
    )
    #expect(jobs.drain().map(\.value.id) == [1])
    #expect(users.drain() == [.inserted(User(id: 1, name: "u"))])
    withExtendedLifetime(kept) {}
  }
}
