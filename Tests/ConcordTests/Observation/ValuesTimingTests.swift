import Testing

@testable import Concord

@Suite("values: the subscription starts when the property is read")
struct ValuesTimingTests {
  @Test("A stream read but not iterated holds its entity until it is dropped")
  func aStreamReadButNotIteratedHoldsTheEntity() {
    let map = IdentityMap()
    var stream: AsyncStream<Counter>?
    do {
      let counter = map.store(Counter(id: 1, value: 0))
      stream = counter.values  // read, never iterated
    }
    // The handle is gone; the stream's subscription holds the entity.
    #expect(map.find(Counter.self, id: 1) != nil)
    stream = nil
    #expect(map.find(Counter.self, id: 1) == nil)
    withExtendedLifetime(stream) {}
  }

  @Test("Values committed between the read and the iteration are delivered, the newest kept")
  func changesBeforeIterationAreKept() async {
    let map = IdentityMap()
    let counter = map.store(Counter(id: 1, value: 0))
    let stream = counter.values
    map.update(Counter.self, id: 1) { $0.value = 1 }
    map.update(Counter.self, id: 1) { $0.value = 2 }
    var iterator = stream.makeAsyncIterator()
    #expect(await iterator.next()?.value == 2, "the buffer keeps the newest")
    withExtendedLifetime(counter) {}
  }
}
