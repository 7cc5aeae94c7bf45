import TestSupport
import Testing

@testable import Concord

@Suite("Delivery order with several writers")
struct DeliveryOrderTests {
  static let writers = 8
  static let writesPerWriter = 1_000

  /// Each write commits the next number (it is read and incremented under the map's lock), so
  /// commit order is numeric order, whatever thread wins.
  static func hammer(_ map: IdentityMap) async {
    await withTaskGroup(of: Void.self) { group in
      for _ in 0..<writers {
        group.addTask {
          for _ in 0..<writesPerWriter {
            map.update(Counter.self, id: 1) { $0.value += 1 }
          }
        }
      }
    }
  }

  @Test func aCallbackNeverSeesAnOlderValueAfterANewerOne() async {
    let map = IdentityMap()
    let counter = map.store(Counter(id: 1, value: 0))
    let received = Locked<[Int]>([])
    let concurrentCalls = Locked(0)
    let overlapped = Locked(false)
    let subscription = counter.observe { counter in
      if concurrentCalls.increment() > 1 { overlapped.withValue { $0 = true } }
      received.append(counter.value)
      concurrentCalls.withValue { $0 -= 1 }
    }
    await Self.hammer(map)
    let values = received.value
    #expect(zip(values, values.dropFirst()).allSatisfy { $0 < $1 }, "values must only grow")
    #expect(
      values.last == Self.writers * Self.writesPerWriter, "the newest value is always delivered")
    #expect(!overlapped.value, "one subscriber is never called on two threads at once")
    subscription.cancel()
  }

  @Test func theCurrentValueNeverArrivesAfterANewerChange() async {
    let map = IdentityMap()
    let counter = map.store(Counter(id: 1, value: 0))
    let received = Locked<[Int]>([])
    let subscriptions = Locked<[Subscription]>([])
    await withTaskGroup(of: Void.self) { group in
      group.addTask { await Self.hammer(map) }
      group.addTask {
        // Subscribe while the writers run: the current value must never follow a newer one.
        let subscription = counter.observe(includingCurrentValue: true) {
          received.append($0.value)
        }
        subscriptions.append(subscription)
      }
    }
    let values = received.value
    #expect(!values.isEmpty)
    #expect(zip(values, values.dropFirst()).allSatisfy { $0 < $1 })
    #expect(values.last == Self.writers * Self.writesPerWriter)
  }

  @Test func aStreamNeverYieldsAnOlderValueAfterANewerOne() async {
    let map = IdentityMap()
    let counter = map.store(Counter(id: 1, value: 0))
    let total = Self.writers * Self.writesPerWriter
    async let seen: [Int] = {
      var seen: [Int] = []
      for await counter in counter.values {
        seen.append(counter.value)
        if counter.value == total { break }
      }
      return seen
    }()
    await Self.hammer(map)
    let values = await seen
    #expect(zip(values, values.dropFirst()).allSatisfy { $0 < $1 })
    #expect(values.last == total)
  }

  @Test func aBatchHandleNeverSeesAnOlderElementAfterANewerOne() async {
    let map = IdentityMap()
    let batch = map.store([Counter(id: 1, value: 0), Counter(id: 2, value: 0)])
    let received = Locked<[Int]>([])
    let subscription = batch.observe { counters in received.append(counters[0].value) }
    await Self.hammer(map)
    let values = received.value
    #expect(zip(values, values.dropFirst()).allSatisfy { $0 < $1 })
    #expect(values.last == Self.writers * Self.writesPerWriter)
    subscription.cancel()
  }
}
