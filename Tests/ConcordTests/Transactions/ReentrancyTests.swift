import TestSupport
import Testing

@testable import Concord

@Suite("Calling the map back from bodies, callbacks and deinits")
struct ReentrancyTests {
  @Test func anUpdateBodyMayReadAndWriteTheMap() {
    let map = IdentityMap()
    let a = map.store(Author(id: 1, name: "A"))
    let b = map.store(Author(id: 2, name: "B"))
    map.update(Author.self, id: 1) { author in
      author.name = map.find(Author.self, id: 2)!.value.name + "!"
      map.update(Author.self, id: 2) { $0.name = "B2" }
    }
    #expect(a.value.name == "B!")
    #expect(b.value.name == "B2")
  }

  @Test func anUpdateBodyThatRemovesItsEntityReturnsFalse() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    let updated = map.update(Author.self, id: 1) { author in
      map.remove(Author.self, id: 1)
      author.name = "too late"
    }
    #expect(!updated)
    #expect(author.isRemoved)
    #expect(author.value.name == "A")
    #expect(map.find(Author.self, id: 1) == nil)
  }

  @Test func writesInsideAnUpdateBodyAreDeliveredAfterTheOuterWrite() {
    let map = IdentityMap()
    let a = map.store(Author(id: 1, name: "A"))
    let b = map.store(Author(id: 2, name: "B"))
    let log = Locked<[String]>([])
    let subscriptions = [
      a.observe { log.append("a=\($0.name)") }, b.observe { log.append("b=\($0.name)") },
    ]
    map.update(Author.self, id: 1) { author in
      map.store(Author(id: 2, name: "B2"))
      #expect(log.value.isEmpty, "nothing is delivered while the map is locked")
      author.name = "A2"
    }
    #expect(Set(log.value) == ["a=A2", "b=B2"])
    withExtendedLifetime(subscriptions) {}
  }

  @Test func aHandleDroppedInsideAnUpdateBodyIsReleasedAfterTheWrite() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    var other: EntityObserver<Author>? = map.store(Author(id: 2, name: "B"))
    map.update(Author.self, id: 1) { author in
      other = nil
      author.name = "A2"
    }
    #expect(map.count == 1)
    #expect(author.value.name == "A2")
    withExtendedLifetime(other) {}
  }

  @Test func pingPongBetweenTwoCallbacksTerminates() {
    let map = IdentityMap()
    let ping = map.store(Counter(id: 1, value: 0))
    let pong = map.store(Counter(id: 2, value: 0))
    let subscriptions = [
      ping.observe { counter in
        if counter.value < 50 { map.store(Counter(id: 2, value: counter.value + 1)) }
      },
      pong.observe { counter in
        if counter.value < 50 { map.store(Counter(id: 1, value: counter.value + 1)) }
      },
    ]
    map.store(Counter(id: 1, value: 1))
    #expect(max(ping.value.value, pong.value.value) == 50)
    withExtendedLifetime(subscriptions) {}
  }

  @Test func storingTheObservedEntityFromItsOwnCallbackIsDeliveredAfterItReturns() {
    let map = IdentityMap()
    let counter = map.store(Counter(id: 1, value: 0))
    let received = Locked<[Int]>([])
    let depth = Locked(0)
    let maxDepth = Locked(0)
    let subscription = counter.observe { counter in
      let current = depth.increment()
      maxDepth.withValue { $0 = max($0, current) }
      received.append(counter.value)
      if counter.value < 5 { map.store(Counter(id: 1, value: counter.value + 1)) }
      depth.withValue { $0 -= 1 }
    }
    map.store(Counter(id: 1, value: 1))
    #expect(received.value == [1, 2, 3, 4, 5])
    #expect(maxDepth.value == 1, "a callback is never re-entered")
    subscription.cancel()
  }

  @Test func aTransactionUsedAfterItsBodyStopsTheProgram() async {
    await #expect(processExitsWith: .failure) {
      let map = IdentityMap()
      let escaped = map.transaction { $0 }
      escaped.store(Author(id: 1, name: "A"))
    }
  }
}
