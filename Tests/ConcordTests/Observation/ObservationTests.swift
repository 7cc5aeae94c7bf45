import Foundation
import TestSupport
import Testing

@testable import Concord

@Suite("Observation")
struct ObservationTests {
  @Test func valueReadsLive() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    map.update(Author.self, id: 1) { $0.name = "B" }
    #expect(author.value.name == "B")
  }

  @Test func observeDeliversEachLaterChangeBeforeTheWriteReturns() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "before"))
    let received = Locked<[String]>([])
    let subscription = author.observe { received.append($0.name) }
    #expect(received.value.isEmpty, "observe does not replay the current value")
    map.store(Author(id: 1, name: "B"))
    #expect(received.value == ["B"])
    map.update(Author.self, id: 1) { $0.name = "C" }
    #expect(received.value == ["B", "C"])
    subscription.cancel()
  }

  @Test func observeIncludingTheCurrentValueStartsWithIt() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    let received = Locked<[String]>([])
    let subscription = author.observe(includingCurrentValue: true) { received.append($0.name) }
    #expect(received.value == ["A"], "the current value is delivered before observe returns")
    map.store(Author(id: 1, name: "B"))
    #expect(received.value == ["A", "B"])
    subscription.cancel()
  }

  @Test func observeWithoutTheCurrentValueIsPlainObserve() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    let received = Locked<[String]>([])
    let subscription = author.observe(includingCurrentValue: false) { received.append($0.name) }
    map.store(Author(id: 1, name: "B"))
    #expect(received.value == ["B"])
    subscription.cancel()
  }

  @Test func callbackRunsOnTheWritingThread() async {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    let callbackThread = Locked<pthread_t?>(nil)
    let subscription = author.observe { _ in callbackThread.withValue { $0 = pthread_self() } }
    let writerThread = await Task.detached {
      map.store(Author(id: 1, name: "B"))
      return pthread_self()
    }.value
    #expect(callbackThread.value.map { pthread_equal($0, writerThread) != 0 } == true)
    subscription.cancel()
  }

  @Test func callbackRunsAfterTheLockIsReleased() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    let seen = Locked<[String]>([])
    let subscription = author.observe { _ in
      // Reading and writing the map here would deadlock if the lock were held.
      seen.append(map.find(Author.self, id: 1)?.value.name ?? "nil")
      map.store(User(id: 9, name: "written from a callback"))
    }
    map.store(Author(id: 1, name: "B"))
    #expect(seen.value == ["B"])
    subscription.cancel()
  }

  @Test func unchangedEquatableValueNotifiesNobody() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    let calls = Locked(0)
    let subscription = author.observe { _ in calls.increment() }
    map.store(Author(id: 1, name: "A"))
    map.update(Author.self, id: 1) { _ in }
    #expect(calls.value == 0)
    subscription.cancel()
  }

  @Test func nonEquatableValueNotifiesOnEveryWrite() {
    let map = IdentityMap()
    let note = map.store(Note(id: 1, text: "same"))
    let calls = Locked(0)
    let subscription = note.observe { _ in calls.increment() }
    map.store(Note(id: 1, text: "same"))
    map.store(Note(id: 1, text: "same"))
    #expect(calls.value == 2)
    subscription.cancel()
  }

  @Test func cancelStopsDeliveryAndIsIdempotent() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    let calls = Locked(0)
    let subscription = author.observe { _ in calls.increment() }
    map.store(Author(id: 1, name: "B"))
    subscription.cancel()
    subscription.cancel()
    map.store(Author(id: 1, name: "C"))
    #expect(calls.value == 1)
  }

  @Test func releasingTheSubscriptionCancelsIt() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    let calls = Locked(0)
    var subscription: Subscription? = author.observe { _ in calls.increment() }
    subscription = nil
    map.store(Author(id: 1, name: "B"))
    #expect(calls.value == 0)
    withExtendedLifetime(subscription) {}
  }

  @Test func storeInASetKeepsTheSubscription() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    let calls = Locked(0)
    var subscriptions = Set<Subscription>()
    author.observe { _ in calls.increment() }.store(in: &subscriptions)
    author.observe { _ in calls.increment() }.store(in: &subscriptions)
    #expect(subscriptions.count == 2)
    map.store(Author(id: 1, name: "B"))
    #expect(calls.value == 2)
    subscriptions.removeAll()
    map.store(Author(id: 1, name: "C"))
    #expect(calls.value == 2)
  }

  @Test func aCallbackMayCancelItsOwnSubscription() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    let calls = Locked(0)
    let subscription = Locked<Subscription?>(nil)
    subscription.withValue { slot in
      slot = author.observe { _ in
        calls.increment()
        subscription.value?.cancel()
      }
    }
    map.store(Author(id: 1, name: "B"))
    map.store(Author(id: 1, name: "C"))
    #expect(calls.value == 1)
  }

  @Test func aWriteFromInsideACallbackReachesThatCallbackAfterItReturns() {
    let map = IdentityMap()
    let counter = map.store(Author(id: 1, name: "0"))
    let log = Locked<[String]>([])
    let subscription = counter.observe { author in
      log.append("begin \(author.name)")
      if author.name == "1" { map.store(Author(id: 1, name: "2")) }
      log.append("end \(author.name)")
    }
    map.store(Author(id: 1, name: "1"))
    #expect(log.value == ["begin 1", "end 1", "begin 2", "end 2"])
    subscription.cancel()
  }

  @Test func transactionTellsEachSubscriberOnceWithTheFinalValue() {
    let map = IdentityMap()
    let a = map.store(Author(id: 1, name: "A"))
    let b = map.store(Author(id: 2, name: "B"))
    let receivedA = Locked<[String]>([])
    let receivedB = Locked<[String]>([])
    let subscriptions = [
      a.observe { receivedA.append($0.name) }, b.observe { receivedB.append($0.name) },
    ]
    map.transaction { transaction in
      transaction.update(Author.self, id: 1) { $0.name = "A1" }
      transaction.update(Author.self, id: 2) { $0.name = "B1" }
      transaction.update(Author.self, id: 1) { $0.name = "A2" }
      #expect(receivedA.value.isEmpty, "nothing is told before the commit")
    }
    #expect(receivedA.value == ["A2"])
    #expect(receivedB.value == ["B1"])
    withExtendedLifetime(subscriptions) {}
  }

  @Test func aTransactionThatEndsWhereItStartedStillTellsNonEquatableObservers() {
    let map = IdentityMap()
    let note = map.store(Note(id: 1, text: "x"))
    let calls = Locked(0)
    let subscription = note.observe { _ in calls.increment() }
    map.transaction { transaction in
      transaction.store(Note(id: 1, text: "y"))
      transaction.store(Note(id: 1, text: "x"))
    }
    #expect(calls.value == 1)
    subscription.cancel()
  }

  @Test func batchHandleIsToldOncePerWrite() {
    let map = IdentityMap()
    let batch = map.store([Author(id: 1, name: "A"), Author(id: 2, name: "B")])
    let received = Locked<[[String]]>([])
    let subscription = batch.observe { received.append($0.map(\.name)) }
    map.store(Author(id: 2, name: "B1"))
    map.transaction { transaction in
      transaction.store(Author(id: 1, name: "A1"))
      transaction.store(Author(id: 2, name: "B2"))
    }
    #expect(received.value == [["A", "B1"], ["A1", "B2"]])
    subscription.cancel()
  }

  @Test func valuesStartsWithTheCurrentValue() async {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    var iterator = author.values.makeAsyncIterator()
    #expect(await iterator.next()?.name == "A")
    map.store(Author(id: 1, name: "B"))
    #expect(await iterator.next()?.name == "B")
  }

  @Test func valuesKeepsTheNewestWhenTheReaderLags() async {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    var iterator = author.values.makeAsyncIterator()
    #expect(await iterator.next()?.name == "A")
    for name in ["B", "C", "D"] { map.store(Author(id: 1, name: name)) }
    #expect(await iterator.next()?.name == "D")
  }

  @Test func valuesFinishesWhenTheEntityIsRemoved() async {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    var names: [String] = []
    let stream = author.values
    map.remove(Author.self, id: 1)
    for await value in stream { names.append(value.name) }
    #expect(names == ["A"])
  }

  @Test func valuesOfARemovedEntityYieldsItsLastValueAndFinishes() async {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    map.remove(Author.self, id: 1)
    var names: [String] = []
    for await value in author.values { names.append(value.name) }
    #expect(names == ["A"])
  }

  @Test func droppingTheStreamCancelsItsSubscription() async {
    let map = IdentityMap()
    var author: EntityObserver<Author>? = map.store(Author(id: 1, name: "A"))
    var stream: AsyncStream<Author>? = author!.values
    author = nil
    #expect(map.count == 1, "the stream holds the entity")
    stream = nil
    #expect(map.count == 0)
    withExtendedLifetime(stream) {}
  }

  @Test func breakingOutOfTheLoopCancelsItsSubscription() async {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    for await _ in author.values { break }
    #expect(author._handle.node.s.extras?.subscribers.isEmpty == true)
  }

  @Test func aliasHandleStreamsItsValue() async {
    let map = IdentityMap()
    let me = map.find(named: .currentUser)
    var iterator = me.values.makeAsyncIterator()
    #expect(await iterator.next() == .some(nil))
    map.store(User(id: 1, name: "Ged"), named: .currentUser)
    #expect(await iterator.next() == .some(User(id: 1, name: "Ged")))
  }
}

/// An object whose release a test can watch.
final class Tracker: Sendable {}

@Suite("Observation: releasing callbacks")
struct CallbackReleaseTests {
  @Test func cancellingReleasesTheCallbackAndWhatItCaptured() {
    let map = IdentityMap()
    let author = map.store(Author(id: 1, name: "A"))
    weak var tracker: Tracker?
    let subscription: Subscription
    do {
      let captured = Tracker()
      tracker = captured
      subscription = author.observe { _ in _ = captured }
    }
    #expect(tracker != nil)
    subscription.cancel()
    #expect(tracker == nil)
  }

  @Test func aRemovalFromItsOwnCallbackClosesTheSubscriberOnceTheCallbackReturns() {
    let map = IdentityMap()
    let counter = map.store(Counter(id: 1, value: 0))
    let received = Locked<[Int]>([])
    weak var tracker: Tracker?
    let subscription: Subscription
    do {
      let captured = Tracker()
      tracker = captured
      subscription = counter.observe { value in
        _ = captured
        received.append(value.value)
        // NB: the removal reaches the subscriber while this callback runs: it is parked.
        if value.value == 1 { map.remove(Counter.self, id: 1) }
      }
    }
    map.store(Counter(id: 1, value: 1))
    #expect(counter.isRemoved)
    #expect(received.value == [1])
    #expect(tracker == nil, "closed by the parked removal, the subscriber dropped its callback")
    map.store(Counter(id: 1, value: 2))
    #expect(received.value == [1], "a new entity of that id is not the subscriber's")
    subscription.cancel()
  }

  @Test func aCancelFromTheCallbackDropsTheValueParkedWhileItRan() {
    let map = IdentityMap()
    let counter = map.store(Counter(id: 1, value: 0))
    let received = Locked<[Int]>([])
    let slot = Locked<Subscription?>(nil)
    weak var tracker: Tracker?
    do {
      let captured = Tracker()
      tracker = captured
      let subscription = counter.observe { value in
        _ = captured
        received.append(value.value)
        // NB: delivered while this callback runs, the new value is parked; the cancel drops it.
        map.store(Counter(id: 1, value: value.value + 1))
        slot.value?.cancel()
      }
      slot.withValue { $0 = subscription }
    }
    map.store(Counter(id: 1, value: 1))
    #expect(received.value == [1])
    #expect(counter.value.value == 2)
    #expect(tracker == nil, "the callback and the parked value went with the cancel")
  }

  @Test func aCallbackThatCapturesItsOwnSubscriptionDoesNotLeakTheMap() {
    weak var core: _MapCore?
    do {
      let map = IdentityMap()
      core = map._core
      let author = map.store(Author(id: 1, name: "A"))
      let slot = Locked<Subscription?>(nil)
      slot.withValue { $0 = author.observe { _ in slot.value?.cancel() } }
      map.store(Author(id: 1, name: "B"))
    }
    #expect(core == nil)
  }
}
