import ConcordTesting
import Foundation
import TestSupport
import Testing

@testable import Concord

/// An answer is held by its resource as a collection alias holds its entities: each stored
/// once, current wherever it is written, and gone from the answer when removed.
@Suite("Resources: normalized answers")
struct NormalizedAnswerTests {
  let clock = ManualClock()
  let ursula = Author(id: 1, name: "Ursula")
  let octavia = Author(id: 2, name: "Octavia")

  /// A list resource on `map`, loaded with `answer`.
  func loaded(_ map: IdentityMap, _ answer: [Author], stamp: Stamp? = nil) async throws
    -> Resource<[Author]>
  {
    let authors = map.resource(ResourceKey<[Author]>("authors"), staleAfter: .seconds(60)) {
      _ in .value(answer, modifiedAt: stamp)
    }
    try await authors.load()
    return authors
  }

  @Test("An entity written anywhere changes state.value and tells the resource's observers once")
  func editAnywhere() async throws {
    let map = IdentityMap(clock: clock)
    let authors = try await loaded(map, [ursula, octavia])
    let recorder = StateRecorder(authors)
    map.update(Author.self, id: 1) { $0.name = "Ursula K. Le Guin" }
    #expect(authors.state.value?.map(\.name) == ["Ursula K. Le Guin", "Octavia"])
    #expect(recorder.states.count == 1)
    #expect(recorder.states.last?.value?.first?.name == "Ursula K. Le Guin")
    #expect(recorder.states.last?.isLoading == false && recorder.states.last?.isStale == false)
  }

  @Test(
    "A write made on the landing's thread while the answer is delivered reaches the answer",
    arguments: [false, true])
  func writeDuringTheLandingsDelivery(observed: Bool) async throws {
    let map = IdentityMap(clock: clock)
    let handle = map.store(ursula)
    // NB: told on the landing's thread, during its write, when the answer renames Ursula;
    // the resource skips what it is told of its own write there, so this nested write must
    // reach the answer by the landing's read after the write.
    let renamer = handle.observe { author in
      if author.name == "U" { map.update(Author.self, id: 2) { $0.name = "Octavia E. Butler" } }
    }
    defer { renamer.cancel() }
    let authors = map.resource(ResourceKey<[Author]>("authors"), staleAfter: .seconds(60)) {
      _ in .value([Author(id: 1, name: "U"), octavia])
    }
    let recorder = observed ? StateRecorder(authors) : nil
    let answer = try await authors.load()
    #expect(answer.map(\.name) == ["U", "Octavia E. Butler"])
    #expect(authors.state.value?.map(\.name) == ["U", "Octavia E. Butler"])
    if let recorder {
      #expect(recorder.states.last?.value?.map(\.name) == ["U", "Octavia E. Butler"])
    }
  }

  @Test("A transaction that edits two entities of the answer tells its observers once")
  func transactionTellsOnce() async throws {
    let map = IdentityMap(clock: clock)
    let authors = try await loaded(map, [ursula, octavia])
    let recorder = StateRecorder(authors)
    map.transaction { transaction in
      transaction.update(Author.self, id: 1) { $0.name = "U" }
      transaction.update(Author.self, id: 2) { $0.name = "O" }
    }
    #expect(recorder.states.count == 1)
    #expect(recorder.states.last?.value?.map(\.name) == ["U", "O"])
  }

  @Test("A write that changes nothing (Equatable) tells nobody")
  func unchangedTellsNobody() async throws {
    let map = IdentityMap(clock: clock)
    let authors = try await loaded(map, [ursula])
    let recorder = StateRecorder(authors)
    map.store(ursula)
    #expect(recorder.states.isEmpty)
  }

  @Test(
    "Every entity is stored once: the answer's entities are the map's, and a second answer shares them"
  )
  func storedOnce() async throws {
    let map = IdentityMap(clock: clock)
    let authors = try await loaded(map, [ursula, octavia])
    let single = map.resource(ResourceKey<Author>("author/1")) { _ in .value(ursula) }
    try await single.load()
    #expect(map.count == 2)
    map.update(Author.self, id: 1) { $0.name = "Ursula K. Le Guin" }
    #expect(single.state.value?.name == "Ursula K. Le Guin")
    #expect(authors.state.value?.first?.name == "Ursula K. Le Guin")
  }

  @Test("The resource holds its answer's entities; they stay findable while it lives")
  func answerIsHeld() async throws {
    let map = IdentityMap(clock: clock)
    let authors = try await loaded(map, [ursula, octavia])
    #expect(map.find(Author.self, id: 2)?.value == octavia)
    #expect(map.holders(of: Author.self, id: 2)?.aliases.count == 1)
    withExtendedLifetime(authors) {}
  }

  @Test("A removed entity leaves a list answer, and its observers are told")
  func removalLeavesTheList() async throws {
    let map = IdentityMap(clock: clock)
    let authors = try await loaded(map, [ursula, octavia])
    let recorder = StateRecorder(authors)
    map.remove(Author.self, id: 1)
    #expect(authors.state.value == [octavia])
    #expect(recorder.states.count == 1 && recorder.states.last?.value == [octavia])
    #expect(!authors.state.isStale, "a list without it is still an answer")
  }

  @Test("A removed single answer becomes nil and stale")
  func removedSingleAnswer() async throws {
    let map = IdentityMap(clock: clock)
    let me = map.resource(ResourceKey<Author>("me"), staleAfter: .seconds(60)) { _ in
      .value(Author(id: 1, name: "Ursula"))
    }
    try await me.load()
    let recorder = StateRecorder(me)
    map.remove(Author.self, id: 1)
    #expect(me.state.value == nil && me.state.isStale)
    #expect(recorder.states.count == 1 && recorder.states.last?.isStale == true)
  }

  @Test(
    "An answer whose entity is refused as stale shows the map's newer value, and load returns it")
  func staleEntityInTheAnswer() async throws {
    let map = IdentityMap(clock: clock)
    let newer = map.store(Author(id: 1, name: "Ursula K. Le Guin"), modifiedAt: 10)
    let authors = map.resource(ResourceKey<[Author]>("authors")) { _ in
      .value([Author(id: 1, name: "Ursula"), Author(id: 2, name: "Octavia")], modifiedAt: 5)
    }
    let answer = try await authors.load()
    #expect(answer.map(\.name) == ["Ursula K. Le Guin", "Octavia"])
    #expect(authors.state.value == answer, "state is never ahead of the map")
    withExtendedLifetime(newer) {}
  }

  @Test("An entity refused by its tombstone stays out of a list answer")
  func tombstonedEntityInTheAnswer() async throws {
    let map = IdentityMap(clock: clock)
    let stored = map.store(ursula, modifiedAt: 10)
    map.remove(Author.self, id: 1)  // leaves a tombstone stamped 10
    withExtendedLifetime(stored) {}
    let authors = map.resource(ResourceKey<[Author]>("authors")) { _ in
      .value([Author(id: 1, name: "Ursula"), Author(id: 2, name: "Octavia")], modifiedAt: 5)
    }
    #expect(try await authors.load() == [octavia])
  }

  @Test(
    "A single answer refused by its tombstone: load throws answerRemoved, and the answer is nil")
  func tombstonedSingleAnswer() async throws {
    let map = IdentityMap(clock: clock)
    let stored = map.store(ursula, modifiedAt: 10)
    map.remove(Author.self, id: 1)
    withExtendedLifetime(stored) {}
    let me = map.resource(ResourceKey<Author>("me")) { _ in .value(ursula, modifiedAt: 5) }
    await #expect(throws: ResourceError.answerRemoved) { try await me.load() }
    #expect(me.state.value == nil && me.state.isStale && me.state.error == nil)
  }

  @Test("An answer of aggregates stays current at every depth")
  func aggregateAnswer() async throws {
    let map = IdentityMap(clock: clock)
    let books = map.resource(ResourceKey<[Book]>("books")) { _ in
      .value([
        Book(id: "earthsea", title: "A Wizard of Earthsea", author: ursula),
        Book(id: "kindred", title: "Kindred", author: octavia),
      ])
    }
    try await books.load()
    let recorder = StateRecorder(books)
    map.store(Author(id: 1, name: "Ursula K. Le Guin"))
    #expect(books.state.value?.first?.author.name == "Ursula K. Le Guin")
    #expect(recorder.states.count == 1)
    map.remove(Author.self, id: 2)
    #expect(books.state.value?.map(\.id) == ["earthsea"], "a book requires its author")
  }

  @Test("A single aggregate answer")
  func singleAggregate() async throws {
    let map = IdentityMap(clock: clock)
    let book = map.resource(ResourceKey<Book>("books/earthsea")) {
      Book(id: "earthsea", title: "A Wizard of Earthsea", author: ursula)
    }
    #expect(try await book.load().author == ursula)
    map.store(Author(id: 1, name: "Le Guin"))
    #expect(book.state.value?.author.name == "Le Guin")
  }

  @Test("A new answer replaces the list: entities that left it are released")
  func newAnswerReplacesTheList() async throws {
    let map = IdentityMap(clock: clock)
    let answers = Locked([[ursula, octavia], [octavia]])
    let authors = map.resource(ResourceKey<[Author]>("authors"), policy: .networkOnly) {
      answers.withValue { $0.removeFirst() }
    }
    try await authors.load()
    #expect(map.count == 2)
    #expect(try await authors.load() == [octavia])
    #expect(map.find(Author.self, id: 1) == nil, "Ursula is no longer held")
  }

  @Test("removeAll() empties every answer")
  func removeAllEmptiesAnswers() async throws {
    let map = IdentityMap(clock: clock)
    let authors = try await loaded(map, [ursula])
    map.removeAll()
    #expect(authors.state.value == nil && authors.state.isStale)
  }
}
