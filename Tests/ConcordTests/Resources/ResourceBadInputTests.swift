import ConcordTesting
import Foundation
import TestSupport
import Testing

@testable import Concord

/// Bad input: loaders that hang, throw or call back into the map, resources made in odd places.
@Suite("Resources: bad input")
struct ResourceBadInputTests {
  let clock = ManualClock()

  @Test("A loader that hangs until cancelled is cancelled with its only caller, and writes nothing")
  func hangingLoader() async throws {
    let map = IdentityMap(clock: clock)
    let never = ManualClock()
    let started = Gate()
    let me = map.resource(ResourceKey<Author>("me")) { () async throws -> Author in
      started.open()
      try await never.sleep(for: .seconds(1_000_000))
      return Author(id: 1, name: "never")
    }
    let caller = Task { try await me.load() }
    await started.wait()
    await never.waitForSleepers(1)
    caller.cancel()
    await #expect(throws: CancellationError.self) { try await caller.value }
    await eventually { never.sleepers == 0 && me._core.runningFetches == 0 }
    #expect(me.state.value == nil && me.state.error == nil && !me.state.isLoading)
  }

  @Test(
    "A loader that calls back into the map (store, find, transaction, another resource) runs outside its lock"
  )
  func loaderCallsTheMap() async throws {
    let map = IdentityMap(clock: clock)
    do {
      let other = map.resource(ResourceKey<User>("other")) { User(id: 9, name: "other") }
      let me = map.resource(ResourceKey<Author>("me")) { () async throws -> Author in
        let user = map.store(User(id: 7, name: "Ged"))
        #expect(map.find(User.self, id: 7)?.value == user.value)
        map.transaction { $0.store(User(id: 8, name: "Tenar")) }
        #expect(try await other.load().name == "other")
        // Another thread writes while the loader runs: it would wait forever under the lock.
        await Task.detached { _ = map.store(Author(id: 2, name: "from another thread")) }.value
        return Author(id: 1, name: "Ursula")
      }
      #expect(try await me.load().name == "Ursula")
      #expect(other.state.value?.name == "other")
    }
    // NB: the loader holds the map, and the map its live resources: let them go. The first
    // resource's loader holds the second, which is let go after it.
    await clock.waitForSleepers(1)
    clock.advance(by: .seconds(300))
    await clock.waitForSleepers(1)
    clock.advance(by: .seconds(300))
    await eventually { map.statistics.aliases == 0 }
  }

  @Test("Observers run outside the lock: a callback that waits for another thread's write finishes")
  func observersOutsideTheLock() async throws {
    let map = IdentityMap(clock: clock)
    let me = map.resource(ResourceKey<Author>("me")) { Author(id: 1, name: "Ursula") }
    let written = Locked(false)
    let subscription = me.observe { state in
      guard state.value != nil, !written.value else { return }
      let done = DispatchSemaphore(value: 0)
      Thread.detachNewThread {
        map.store(User(id: 7, name: "Ged"))
        done.signal()
      }
      done.wait()
      written.withValue { $0 = true }
    }
    try await me.load()
    #expect(written.value)
    subscription.cancel()
  }

  @Test("A resource made inside a transaction body, or an observer's callback, works")
  func madeInsideAWrite() async throws {
    let map = IdentityMap(clock: clock)
    let made = map.transaction { _ in
      map.resource(ResourceKey<Author>("me")) { Author(id: 1, name: "Ursula") }
    }
    #expect(try await made.load().name == "Ursula")
    let inCallback = Locked<Resource<User>?>(nil)
    let author = try #require(map.find(Author.self, id: 1))
    let subscription = author.observe { _ in
      inCallback.withValue { $0 = map.resource(ResourceKey<User>("u")) { User(id: 7, name: "G") } }
    }
    map.update(Author.self, id: 1) { $0.name = "Le Guin" }
    let user = try #require(inCallback.value)
    #expect(try await user.load().name == "G")
    subscription.cancel()
  }

  @Test("A loader whose answer changes the id of a single answer: the answer is the new entity")
  func singleAnswerChangesEntity() async throws {
    let map = IdentityMap(clock: clock)
    let ids = Locked([1, 2])
    let me = map.resource(ResourceKey<Author>("me"), policy: .networkOnly) {
      Author(id: ids.withValue { $0.removeFirst() }, name: "someone")
    }
    #expect(try await me.load().id == 1)
    #expect(try await me.load().id == 2)
    #expect(map.find(Author.self, id: 1) == nil, "the first is no longer held")
  }

  @Test("A list answer repeating an id keeps each position, as a collection alias does")
  func repeatedIDs() async throws {
    let map = IdentityMap(clock: clock)
    let authors = map.resource(ResourceKey<[Author]>("authors")) {
      [Author(id: 1, name: "a"), Author(id: 2, name: "b"), Author(id: 1, name: "c")]
    }
    let answer = try await authors.load()
    #expect(answer.map(\.id) == [1, 2, 1])
    #expect(answer.first?.name == answer.last?.name)
    #expect(map.count == 2)
  }

  @Test("An empty list answer is an answer")
  func emptyList() async throws {
    let map = IdentityMap(clock: clock)
    let authors = map.resource(ResourceKey<[Author]>("authors"), staleAfter: .seconds(60)) {
      [Author]()
    }
    #expect(try await authors.load().isEmpty)
    #expect(authors.state.value == [] && !authors.state.isStale)
  }
}
