import ConcordTesting
import Foundation
import TestSupport
import Testing

@testable import Concord

// `commit(confirmedBy:)`: the layer ends and the server's answer is stored underneath in one
// write, an equal stamp applying to what the layer wrote. A Mastodon favourite leaves the
// status's only server time (`edited_at ?? created_at`) alone, so the answer carries the stamp
// the status already has. Examples, then a seeded run against a model.

@Suite("Optimistic layers: commit(confirmedBy:)")
struct OptimisticConfirmedTests {
  typealias Status = MastodonStatus

  /// A favourite: the layer's guess, then the server's answer with the same stamp.
  @Test func anAnswerWithTheSameStampReplacesTheGuessAndTellsOnce() {
    let map = IdentityMap()
    var posted = Status.post("9", "hello", at: 10)
    posted.favouritesCount = 6
    let status = map.store(posted)
    let told = Locked<[Int]>([])
    let subscription = status.observe { told.append($0.favouritesCount) }
    let favourite = map.optimistic { $0.update(Status.self, id: "9") { $0.favouritesCount += 1 } }
    #expect(status.value.favouritesCount == 7)
    var answer = posted
    answer.favouritesCount = 1  // others unfavourited meanwhile: the server's count is the truth
    favourite.commit(confirmedBy: answer)
    #expect(status.value.favouritesCount == 1)
    #expect(told.value == [7, 1], "told once by the layer, once by the answer")
    #expect(!favourite.isPending)
    subscription.cancel()
    map._core._checkInvariants()
  }

  @Test func commitThenStoreKeepsTheGuess() {
    // What `commit(confirmedBy:)` is for: the answer stored after `commit()` is refused.
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    let status = map.store(Status.post("9", "hello", at: 10))
    let favourite = map.optimistic { $0.update(Status.self, id: "9") { $0.favouritesCount = 7 } }
    favourite.commit()
    var answer = Status.post("9", "hello", at: 10)
    answer.favouritesCount = 1
    map.store(answer)
    #expect(status.value.favouritesCount == 7)
    #expect(logger.staleWrites.count == 1)
  }

  @Test func anOlderAnswerIsRefusedAsStaleAndANewerOneApplies() {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    let status = map.store(Status.post("9", "hello", at: 10, edited: 20))
    let layer = map.optimistic { $0.update(Status.self, id: "9") { $0.favouritesCount = 7 } }
    logger.clear()
    layer.commit(confirmedBy: Status.post("9", "old", at: 10, edited: 15))
    #expect(status.value.favouritesCount == 7 && status.value.content == "hello")
    #expect(logger.staleWrites.map(\.incoming) == [15])
    let next = map.optimistic { $0.update(Status.self, id: "9") { $0.favouritesCount = 8 } }
    next.commit(confirmedBy: [Status.post("9", "edited", at: 10, edited: 30)])
    #expect(status.value.content == "edited" && status.value.favouritesCount == 0)
    map._core._checkInvariants()
  }

  @Test func anEntityTheLayerDidNotWriteIsStoredAsStoreWould() {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    let status = map.store(Status.post("9", "hello", at: 10))
    let other = map.store(Status.post("8", "other", at: 10))
    let layer = map.optimistic { $0.update(Status.self, id: "9") { $0.favouritesCount = 7 } }
    logger.clear()
    layer.commit(confirmedBy: [
      Status.post("9", "confirmed", at: 10), Status.post("8", "equal stamp", at: 10),
    ])
    #expect(status.value.content == "confirmed")
    #expect(other.value.content == "other", "an equal stamp is refused for what the layer left")
    #expect(logger.staleWrites.count == 1)
  }

  @Test func afterTheLayerEndedItOnlyStoresTheAnswer() {
    let map = IdentityMap()
    let status = map.store(Status.post("9", "hello", at: 10))
    let layer = map.optimistic { $0.update(Status.self, id: "9") { $0.favouritesCount = 7 } }
    layer.rollback()
    layer.commit(confirmedBy: Status.post("9", "equal", at: 10))
    #expect(status.value.content == "hello", "an ordinary store: the equal stamp is refused")
    #expect(status.value.favouritesCount == 0)
    layer.commit(confirmedBy: Status.post("9", "newer", at: 10, edited: 11))
    #expect(status.value.content == "newer")
  }

  @Test func aLayerThatCreatedTheEntityKeepsItsHandles() {
    let map = IdentityMap()
    let layer = map.optimistic { $0.store(Status.post("local", "draft", at: 1)) }
    let draft = map.find(Status.self, id: "local")!
    layer.commit(confirmedBy: Status.post("local", "posted", at: 1))
    #expect(!draft.isRemoved && draft.value.content == "posted")
    map._core._checkInvariants()
  }

  @Test func insideATransactionItTakesEffectWhenTheWriteEnds() {
    let map = IdentityMap()
    let status = map.store(Status.post("9", "hello", at: 10))
    let layer = map.optimistic { $0.update(Status.self, id: "9") { $0.favouritesCount = 7 } }
    map.transaction { _ in
      layer.commit(confirmedBy: Status.post("9", "confirmed", at: 10))
      #expect(layer.isPending)
    }
    #expect(!layer.isPending)
    #expect(status.value.content == "confirmed")
  }

  @Test func layersAboveKeepShowingTheirValues() {
    let map = IdentityMap()
    let status = map.store(Status.post("9", "hello", at: 10))
    let below = map.optimistic { $0.update(Status.self, id: "9") { $0.favouritesCount = 1 } }
    let above = map.optimistic { $0.update(Status.self, id: "9") { $0.content = "draft" } }
    below.commit(confirmedBy: Status.post("9", "server", at: 10))
    #expect(status.value.content == "draft", "the layer above still shows")
    above.rollback()
    #expect(status.value.content == "server")
    map._core._checkInvariants()
  }
}

/// A stamped counter: the server's time moves only on some changes.
struct Favourited: Identifiable, Stamped, Equatable {
  var id: Int
  var count: Int
  var at: Double?
  var stamp: Stamp? { at }
}

@Suite("Optimistic layers: commit(confirmedBy:) against a model")
struct OptimisticConfirmedModelTests {
  struct Layer {
    let handle: OptimisticLayer
    /// What it wrote, and the stamp each entity showed then.
    var values: [Int: (count: Int, stamp: Double?)] = [:]
  }

  @Test(arguments: 0..<6)
  func aSeededRunAgreesWithTheModel(seed: UInt64) {
    var random = SeededGenerator(seed: 0xC0F1_0000 &+ seed)
    let map = IdentityMap()
    var base: [Int: (count: Int, stamp: Double?)] = [:]
    var layers: [Layer] = []
    // NB: every entity exists and is held from the start: one nobody holds is released.
    var held = (0..<4).map { map.store(Favourited(id: $0, count: 0, at: nil)) }
    for id in 0..<4 { base[id] = (0, nil) }
    var log: [String] = []
    func visible(_ id: Int) -> Int? {
      layers.last { $0.values[id] != nil }?.values[id]?.count ?? base[id]?.count
    }
    func stampShown(_ id: Int) -> Double? {
      if let layer = layers.last(where: { $0.values[id] != nil }) { return layer.values[id]!.stamp }
      return base[id]?.stamp
    }
    /// A write underneath; `confirming` when an equal stamp applies.
    func writeUnderneath(_ value: Favourited, confirming: Bool) {
      guard let stored = base[value.id] else {
        base[value.id] = (value.count, value.at)
        return
      }
      if let stamp = value.at, let old = stored.stamp {
        if stamp < old || (stamp == old && !confirming && value.count != stored.count) { return }
      }
      base[value.id] = (value.count, value.at ?? stored.stamp)
    }

    for _ in 0..<max(300, randomSteps(share: 100)) {
      let id = Int.random(in: 0..<4, using: &random)
      let count = Int.random(in: 0..<5, using: &random)
      let stamp: Double? =
        Bool.random(using: &random) ? Double(Int.random(in: 0..<6, using: &random)) : nil
      switch Int.random(in: 0..<8, using: &random) {
      case 0, 1:
        log.append("server \(id) = \(count) at \(stamp.map { "\($0)" } ?? "-")")
        held.append(map.store(Favourited(id: id, count: count, at: stamp)))
        writeUnderneath(Favourited(id: id, count: count, at: stamp), confirming: false)
      case 2, 3:
        log.append("layer \(id) = \(count)")
        var layer = Layer(
          handle: map.optimistic { $0.update(Favourited.self, id: id) { $0.count = count } })
        if visible(id) != count { layer.values[id] = (count, stampShown(id)) }
        layers.append(layer)
      case 4:
        guard !layers.isEmpty else { continue }
        let index = Int.random(in: 0..<layers.count, using: &random)
        log.append("roll back layer \(index)")
        layers[index].handle.rollback()
        layers.remove(at: index)
      default:
        guard !layers.isEmpty else { continue }
        let index = Int.random(in: 0..<layers.count, using: &random)
        let confirmed = Favourited(id: id, count: count, at: stamp)
        log.append("confirm layer \(index) by \(id) = \(count) at \(stamp.map { "\($0)" } ?? "-")")
        layers[index].handle.commit(confirmedBy: confirmed)
        let layer = layers.remove(at: index)
        // The commit: the layer's values underneath, unless a newer stamp is there.
        for (written, value) in layer.values {
          if let old = base[written]?.stamp, let stamp = value.stamp, old > stamp { continue }
          base[written] = (value.count, value.stamp ?? base[written]?.stamp)
        }
        writeUnderneath(confirmed, confirming: layer.values[id] != nil)
        // The layer ended either way: a second call only stores, as `store` would.
        if Bool.random(using: &random) {
          log.append("confirm again")
          layer.handle.commit(confirmedBy: confirmed)
          writeUnderneath(confirmed, confirming: false)
        }
      }
      for id in 0..<4 {
        #expect(
          map.find(Favourited.self, id: id)?.value.count == visible(id),
          "\(id) after \(log.suffix(8))")
      }
      map._core._checkInvariants()
    }
    layers = []
    withExtendedLifetime(held) {}
  }
}
