import Dispatch
import Foundation
import TestSupport
import Testing

@testable import Concord

@Suite("observe(on:): delivery on a chosen queue, in commit order, the newest kept")
struct ObserveOnQueueTests {
  static let key = DispatchSpecificKey<String>()

  /// A serial queue that says its name when asked from inside.
  func queue(_ name: String) -> DispatchQueue {
    let queue = DispatchQueue(label: name)
    queue.setSpecific(key: Self.key, value: name)
    return queue
  }

  @Test("Each change is delivered on the queue")
  func deliversOnTheQueue() {
    let map = IdentityMap()
    let counter = map.store(Counter(id: 1, value: 0))
    let seen = Locked<[String?]>([])
    let ui = queue("ui")
    let subscription = counter.observe(on: ui) { _ in
      seen.append(DispatchQueue.getSpecific(key: Self.key))
    }
    map.update(Counter.self, id: 1) { $0.value = 1 }
    ui.sync {}
    #expect(seen.value == ["ui"])
    withExtendedLifetime(subscription) {}
  }

  @Test("With 8 concurrent writers, never older after newer, and the last value arrives")
  func concurrentWritersInOrder() async {
    let map = IdentityMap()
    let counter = map.store(Counter(id: 1, value: 0))
    let seen = Locked<[Int]>([])
    let ui = queue("ui")
    let subscription = counter.observe(on: ui) { seen.append($0.value) }
    await withTaskGroup(of: Void.self) { group in
      for _ in 0..<8 {
        group.addTask {
          for _ in 0..<500 { map.update(Counter.self, id: 1) { $0.value += 1 } }
        }
      }
    }
    ui.sync {}
    let values = seen.value
    #expect(!values.isEmpty)
    #expect(zip(values, values.dropFirst()).allSatisfy { $0 < $1 }, "strictly increasing")
    #expect(values.last == 4_000)
    withExtendedLifetime(subscription) {}
  }

  /// A counter observed on a queue that stays busy (blocked) until `busy` is signalled.
  func blockedQueue() -> (
    map: IdentityMap, subscription: Subscription, seen: Locked<[Int]>, ui: DispatchQueue,
    busy: DispatchSemaphore
  ) {
    let map = IdentityMap()
    let counter = map.store(Counter(id: 1, value: 0))
    let seen = Locked<[Int]>([])
    let ui = queue("ui")
    let subscription = counter.observe(on: ui) { seen.append($0.value) }
    let busy = DispatchSemaphore(value: 0)
    ui.async { busy.wait() }
    return (map, subscription, seen, ui, busy)
  }

  @Test("A queue that lags gets the newest value, once")
  func laggingQueueGetsTheNewest() {
    let (map, subscription, seen, ui, busy) = blockedQueue()
    // The queue is busy while 100 writes commit.
    for value in 1...100 { map.update(Counter.self, id: 1) { $0.value = value } }
    busy.signal()
    ui.sync {}
    #expect(seen.value == [100])
    withExtendedLifetime(subscription) {}
  }

  @Test("After cancel, nothing not yet delivered is delivered")
  func cancelDropsPendingValues() {
    let (map, subscription, seen, ui, busy) = blockedQueue()
    map.update(Counter.self, id: 1) { $0.value = 1 }
    subscription.cancel()
    map.update(Counter.self, id: 1) { $0.value = 2 }
    busy.signal()
    ui.sync {}
    #expect(seen.value.isEmpty)
  }

  @Test("The subscription holds the entity while it lives")
  func holdsTheEntity() {
    let map = IdentityMap()
    var subscription: Subscription?
    do {
      let counter = map.store(Counter(id: 1, value: 0))
      subscription = counter.observe(on: queue("ui")) { _ in }
    }
    #expect(map.find(Counter.self, id: 1) != nil)
    subscription = nil
    #expect(map.find(Counter.self, id: 1) == nil)
    withExtendedLifetime(subscription) {}
  }

  @Test(
    "Seeded random writes, lags, syncs and a cancel agree with the model", arguments: [1, 2, 3])
  func seededModel(seed: UInt64) {
    var generator = SeededGenerator(seed: seed &* 0x5DEE_CE66)
    let map = IdentityMap()
    let counter = map.store(Counter(id: 1, value: 0))
    let seen = Locked<[Int]>([])
    let ui = queue("ui")
    var subscription: Subscription? = counter.observe(on: ui) { seen.append($0.value) }
    // The model: the last value written, the values seen when the subscription was cancelled,
    // and whether the queue is blocked now.
    var written = 0
    var seenAtCancel: Int?
    var blocker: DispatchSemaphore?
    for _ in 0..<max(200, randomSteps(share: 200)) {
      switch Int.random(in: 0..<10, using: &generator) {
      case 0..<6:
        written += 1
        map.update(Counter.self, id: 1) { $0.value += 1 }
      case 6:
        guard blocker == nil else { continue }
        // NB: the queue is blocked once the blocker runs, not when it is queued: a delivery
        // queued before it may still be running, and a callback already running may finish
        // after `cancel()` returns.
        let semaphore = DispatchSemaphore(value: 0)
        let running = DispatchSemaphore(value: 0)
        ui.async {
          running.signal()
          semaphore.wait()
        }
        running.wait()
        blocker = semaphore
      case 7:
        blocker?.signal()
        blocker = nil
      case 8:
        guard blocker == nil else { continue }
        ui.sync {}
        // Nothing is in flight: the queue has delivered the newest value, unless cancelled.
        if seenAtCancel == nil { #expect(seen.value.last ?? 0 == written) }
      default:
        guard seenAtCancel == nil, blocker != nil, Bool.random(using: &generator) else { continue }
        subscription?.cancel()
        seenAtCancel = seen.value.count
      }
      let values = seen.value
      #expect(zip(values, values.dropFirst()).allSatisfy { $0 < $1 }, "never older after newer")
      #expect((values.last ?? 0) <= written)
      if let seenAtCancel { #expect(values.count == seenAtCancel, "nothing after cancel") }
    }
    blocker?.signal()
    ui.sync {}
    subscription = nil
    withExtendedLifetime(subscription) {}
  }
}
