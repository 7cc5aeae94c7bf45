import ConcordTesting
import Foundation
import TestSupport
import Testing

@testable import Concord

@Suite("Retention: released entities can stay cached")
struct RetentionTests {
  @Test func aCountOfZeroOrLessKeepsNothingAsTombstonePoliciesDo() {
    #expect(RetentionPolicy.keepReleased(-3) == .none)
    #expect(RetentionPolicy.keepReleased(0) == .none)
    #expect(TombstonePolicy.keepNewest(-3) == .none)
    #expect(TombstonePolicy.keepNewest(0) == .none)
    #expect(TombstonePolicy.default == .keepNewest(10_000))
    let map = IdentityMap(retention: .keepReleased(-1))
    map.store(Author(id: 1, name: "released"))
    #expect(map.find(Author.self, id: 1) == nil)
  }

  @Test func noneReleasesAtOnce() {
    let map = IdentityMap(retention: .none)
    _ = map.store(Author(id: 1, name: "A"))
    #expect(map.count == 0)
    #expect(map.find(Author.self, id: 1) == nil)
  }

  @Test func aStoreWhoseHandleIsDroppedStaysFindable() {
    let map = IdentityMap(retention: .keepReleased(10))
    _ = map.store(Author(id: 1, name: "A"))
    #expect(map.count == 1, "count counts buffered entities")
    #expect(map.find(Author.self, id: 1)?.value.name == "A")
  }

  @Test func theLeastRecentlyReleasedIsEvictedFirst() {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger, retention: .keepReleased(3))
    for id in 1...3 { _ = map.store(Author(id: id, name: "\(id)")) }
    // Author 1 is found and released again: it becomes the most recently released.
    _ = map.find(Author.self, id: 1)
    logger.clear()
    _ = map.store(Author(id: 4, name: "4"))
    #expect(map.count == 3)
    #expect(map.find(Author.self, id: 2) == nil, "2 was the least recently released")
    #expect(
      logger.events == [
        .stored(EntityReference(Author.self, id: 4), modifiedAt: nil),
        .released(EntityReference(Author.self, id: 2)),
      ])
    _ = map.store(Author(id: 5, name: "5"))
    #expect(map.find(Author.self, id: 3) == nil)
    #expect(map.find(Author.self, id: 1) != nil)
  }

  @Test func aHeldEntityIsNotInTheBuffer() {
    let map = IdentityMap(retention: .keepReleased(1))
    let held = map.store(Author(id: 1, name: "held"))
    _ = map.store(Author(id: 2, name: "2"))
    _ = map.store(Author(id: 3, name: "3"))
    #expect(map.count == 2, "the held one and the last released one")
    #expect(held.value.name == "held")
    #expect(map.find(Author.self, id: 2) == nil)
  }

  @Test func aBufferedEntityKeepsItsStampAndMergesWrites() {
    let map = IdentityMap(retention: .keepReleased(10))
    _ = map.store(Member2.full(1), modifiedAt: 10)
    _ = map.store(Member2(id: 1, login: "stale", name: "Stale", bio: nil), modifiedAt: 5)
    #expect(map.find(Member2.self, id: 1)?.value == .full(1))
    _ = map.store(Member2.stub(1), modifiedAt: 11)
    #expect(map.find(Member2.self, id: 1)?.value.name == "Ged", "merged into the buffered value")
  }

  @Test func aBufferedAggregateKeepsItsChildrenAliveAndCurrent() {
    let map = IdentityMap(retention: .keepReleased(1))
    _ = map.store(Book.make("a", by: .ged))
    #expect(map.count == 2, "the book is buffered, its author held by it")
    map.update(Author.self, id: 2) { $0.name = "Sparrowhawk" }
    #expect(map.find(Book.self, id: "a")?.value.author.name == "Sparrowhawk")
  }

  @Test func anEvictedAggregatesChildrenEnterTheBufferInTheirTurn() {
    let map = IdentityMap(retention: .keepReleased(1))
    _ = map.store(Book.make("a", by: .ged))
    _ = map.store(Author(id: 9, name: "newcomer"))
    // The book was evicted; its author lost its holder and entered the buffer, evicting the
    // newcomer in turn.
    #expect(map.find(Book.self, id: "a") == nil)
    #expect(map.find(Author.self, id: 2)?.value == .ged)
    #expect(map.find(Author.self, id: 9) == nil)
  }

  @Test func anyNewHolderTakesAnEntityOutOfTheBuffer() {
    let map = IdentityMap(retention: .keepReleased(1))
    _ = map.store(Author(id: 2, name: "Ged"))
    let book = map.store(Book(id: "a", title: "T", author: Author(id: 2, name: "Ged")))
    _ = map.store(Author(id: 3, name: "3"))
    #expect(map.find(Author.self, id: 2) != nil, "the book holds its author")
    let subscription = map.find(Author.self, id: 3)!.observe { _ in }
    _ = map.store(Author(id: 4, name: "4"))
    #expect(map.find(Author.self, id: 3) != nil, "the subscription holds it")
    subscription.cancel()
    withExtendedLifetime(book) {}
  }

  @Test func removeAndRemoveAllEmptyTheBufferOfWhatTheyRemove() {
    let map = IdentityMap(retention: .keepReleased(10))
    for id in 1...3 { _ = map.store(Author(id: id, name: "\(id)")) }
    map.remove(Author.self, id: 2)
    #expect(map.count == 2)
    #expect(map.find(Author.self, id: 2) == nil)
    map.removeAll()
    #expect(map.count == 0)
    for id in 4...13 { _ = map.store(Author(id: id, name: "\(id)")) }
    #expect(map.count == 10, "removed entities no longer take room in the buffer")
  }

  @Test func aRemovedBufferedEntityIsRemovedNotReleased() {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger, retention: .keepReleased(10))
    _ = map.store(Author(id: 1, name: "A"))
    logger.clear()
    map.remove(Author.self, id: 1)
    #expect(logger.events == [.removed(EntityReference(Author.self, id: 1))])
  }

  @Test func aBufferedAliasedValueIsRetainedByTheAliasFirst() {
    let map = IdentityMap(retention: .keepReleased(1))
    map.store(User(id: 1, name: "Ged"), named: .currentUser)
    map.removeAlias(named: AliasKey<User>.currentUser)
    #expect(map.find(User.self, id: 1) != nil, "released by the alias into the buffer")
  }

  /// The invariant checks include the buffer's queue: every slot names a node buffered there,
  /// and the queue holds at most about twice the buffer's count, however many went through.
  @Test func churnThroughASmallBufferStaysBounded() {
    let map = IdentityMap(retention: .keepReleased(100))
    for id in 0..<10_000 {
      _ = map.store(Author(id: id, name: "\(id)"))
      if id % 7 == 0 { _ = map.find(Author.self, id: id / 2) }
    }
    #expect(map.count == 100)
    map._core._checkInvariants()
  }
}

/// A seeded random run against a model of the release buffer: held entities, and an LRU list
/// of released ones.
@Suite("Retention: a seeded run against an LRU model")
struct RetentionModelTests {
  struct Model {
    var values: [Int: String] = [:]
    var stamps: [Int: Stamp] = [:]
    /// The stamps of removed entities (`TombstonePolicy.default`); evicted ones leave none.
    var tombstones: [Int: Stamp] = [:]
    /// Released entities, least recently released first.
    var buffer: [Int] = []
    let capacity: Int

    mutating func release(_ id: Int) {
      buffer.removeAll { $0 == id }
      buffer.append(id)
      while buffer.count > capacity {
        let evicted = buffer.removeFirst()
        values[evicted] = nil
        stamps[evicted] = nil
      }
    }

    mutating func hold(_ id: Int) { buffer.removeAll { $0 == id } }
  }

  @Test(arguments: 0..<4)
  func aSeededRunAgreesWithAnLRUModel(run: Int) {
    let capacity = 4
    let map = IdentityMap(retention: .keepReleased(capacity))
    var model = Model(capacity: capacity)
    var random = MRandom(state: 0xB0FF_E200 &+ UInt64(run))
    var held: [Int: [EntityObserver<MLeaf>]] = [:]
    var history: [String] = []
    let steps = randomSteps(share: 20)

    func drop(_ id: Int) {
      held[id]?.removeLast()
      if held[id]?.isEmpty == true {
        held[id] = nil
        model.release(id)
      }
    }

    for step in 0..<steps {
      let id = random.int(0..<10)
      switch random.int(0..<6) {
      case 0:
        let name = random.pick(["a", "b", "c"])
        let stamp: Stamp? = random.chance(0.5) ? nil : Stamp(random.int(1..<5))
        history.append("\(step): store \(id) \(name) \(stamp.map { "\($0)" } ?? "-")")
        let handle = map.store(MLeaf(id: id, name: name), modifiedAt: stamp)
        let admitted =
          if model.values[id] == nil {
            stamp == nil || model.tombstones[id].map { stamp! > $0 } ?? true
          } else {
            MModel.admits(model.stamps[id] ?? .nan, stamp)
          }
        if admitted {
          if model.values[id] == nil { model.tombstones[id] = nil }
          model.values[id] = name
          if let stamp { model.stamps[id] = stamp }
        }
        if model.values[id] == nil {
          // Refused by the tombstone: the handle shows a removed entity, held by nobody.
          #expect(handle.isRemoved, "\(history.suffix(12))")
        } else if random.chance(0.4) {
          held[id, default: []].append(handle)
          model.hold(id)
        } else if held[id] == nil {
          model.release(id)
        }
      case 1:
        history.append("\(step): find \(id)")
        let handle = map.find(MLeaf.self, id: id)
        #expect((handle != nil) == (model.values[id] != nil), "\(history.suffix(12))")
        if let handle, random.chance(0.5) {
          held[id, default: []].append(handle)
          model.hold(id)
        } else if handle != nil, held[id] == nil {
          model.release(id)
        }
      case 2, 3:
        guard let some = held.keys.sorted().first(where: { _ in random.chance(0.5) }) else {
          continue
        }
        history.append("\(step): drop a handle on \(some)")
        drop(some)
      case 4:
        history.append("\(step): remove \(id)")
        map.remove(MLeaf.self, id: id)
        if model.values[id] != nil, let stamp = model.stamps[id] { model.tombstones[id] = stamp }
        model.values[id] = nil
        model.stamps[id] = nil
        model.hold(id)
        held[id] = nil
      default:
        let name = random.pick(["a", "b", "c"])
        history.append("\(step): update \(id) \(name)")
        #expect(
          map.update(MLeaf.self, id: id) { $0.name = name } == (model.values[id] != nil),
          "\(history.suffix(12))")
        if model.values[id] != nil { model.values[id] = name }
      }
      // Check every entity; finding the buffered ones oldest first keeps their order.
      #expect(map.count == model.values.count, "count, after \(history.suffix(12))")
      for buffered in model.buffer {
        #expect(
          map.find(MLeaf.self, id: buffered)?.value.name == model.values[buffered],
          "\(history.suffix(12))")
      }
      for id in 0..<10 where !model.buffer.contains(id) {
        #expect(
          map.find(MLeaf.self, id: id)?.value.name == model.values[id], "\(history.suffix(12))")
      }
      map._core._checkInvariants()
    }
    withExtendedLifetime(held) {}
  }
}
