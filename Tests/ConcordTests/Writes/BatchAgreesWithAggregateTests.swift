import ConcordTesting
import TestSupport
import Testing

@testable import Concord

// A batch of entities that hold no nested entity (`store([Badge])`) is written by the pass from
// a list root, its entities read again where they occur rather than kept aside. The same
// entities nested in an aggregate are written from an aggregate root, by a pass that takes none
// of its shortcuts (`_Pass.isExhaustive`), so the two must agree: this seeded differential test
// stores each random batch into one map as a batch and into another as the entities of a page
// aggregate, and
// compares everything a user can see after every step: each entity's value, the batch's value
// against the page's, what the other parents (boards) show, every event logged about the
// entities, and every value each subscriber was told. Batches mix new and stored entities,
// newer, older, equal, NaN and missing stamps, merges, and repeated ids (which take the pass).

/// An entity with its own optional stamp, merged field by field.
struct Badge: Identifiable, Stamped, Mergeable, Equatable {
  var id: Int
  var name: String?
  var color: String?
  var updatedAt: Double?

  /// NB: a negative `updatedAt` stands for a NaN stamp, so that values stay `==` to
  /// themselves (the engine's checks compare them).
  var stamp: Stamp? { updatedAt.map { $0 < 0 ? .nan : $0 } }

  static func merge(_ incoming: Badge, into stored: Badge) -> Badge {
    incoming.keepingStoredValues(of: stored, whereNil: \.name, \.color, \.updatedAt)
  }
}

/// What the second map stores instead of a batch.
struct BadgePage: Aggregate, Equatable {
  var id: Int
  var tags: [Badge]
  static var nestedEntities: [NestedEntity<BadgePage>] { [.init(\.tags)] }
}

/// Another parent of tags, stored the same way into both maps.
struct Pinboard: Aggregate, Equatable {
  var id: Int
  var pinned: Badge
  var tags: [Badge]
  static var nestedEntities: [NestedEntity<Pinboard>] { [.init(\.pinned), .init(\.tags)] }
}

@Suite("Batches of plain entities: written from a list root as from an aggregate")
struct BatchAgreesWithAggregateTests {
  @Test("A batch agrees with the same entities nested in an aggregate", arguments: [1, 2, 3, 4])
  func batchesAgreeWithThePass(seed: UInt64) {
    var generator = SeededGenerator(seed: seed &* 0x5851_F42D)
    let batchLogger = RecordingLogger()
    let pageLogger = RecordingLogger()
    let batches = IdentityMap(logger: batchLogger)
    let pages = IdentityMap(logger: pageLogger)
    // NB: the pages through the pass without its shortcuts (see `AggregateOfLeavesDifferentialTests`).
    pages._core.pass.isExhaustive = true
    let seenByBatch = Locked<[Int: [Badge?]]>([:])
    let seenByPage = Locked<[Int: [Badge?]]>([:])
    var subscriptions: [Subscription] = []
    var held: [(EntityObserver<[Badge]>, EntityObserver<BadgePage>)] = []
    var boards: [(EntityObserver<Pinboard>, EntityObserver<Pinboard>)] = []
    var clock = 100.0

    func randomTag(_ step: Int) -> Badge {
      let id = Int.random(in: 0..<10, using: &generator)
      let stamp: Double? =
        switch Int.random(in: 0..<6, using: &generator) {
        case 0: nil
        case 1: -1
        case 2: clock - Double(Int.random(in: 0...30, using: &generator))
        case 3: clock
        default: clock + 1
        }
      return Badge(
        id: id, name: Bool.random(using: &generator) ? "tag\(step)" : nil,
        color: Int.random(in: 0..<3, using: &generator) == 0 ? "c\(step % 4)" : nil,
        updatedAt: stamp)
    }

    let steps = max(400, randomSteps(share: 30))
    for step in 0..<steps {
      clock += 1
      switch Int.random(in: 0..<100, using: &generator) {
      case 0..<50:
        let count = Int.random(in: 0...6, using: &generator)
        var batch = (0..<count).map { _ in randomTag(step) }
        // Mostly distinct ids; sometimes repeated ones, whose occurrences are ranked.
        if Int.random(in: 0..<4, using: &generator) != 0 {
          var seen = Set<Int>()
          batch = batch.filter { seen.insert($0.id).inserted }
        }
        let call: Stamp? = Bool.random(using: &generator) ? clock : nil
        let batchHandle = batches.store(batch, modifiedAt: call)
        let pageHandle = pages.store(BadgePage(id: step, tags: batch), modifiedAt: call)
        #expect(
          printsTheSame(batchHandle.value, pageHandle.value.tags), "step \(step): the batch's value"
        )
        if Bool.random(using: &generator) { held.append((batchHandle, pageHandle)) }
        if held.count > 6 { held.removeFirst() }
      case 50..<60:
        let board = Pinboard(
          id: Int.random(in: 0..<3, using: &generator), pinned: randomTag(step),
          tags: (0..<Int.random(in: 0...3, using: &generator)).map { _ in randomTag(step) })
        boards.append((batches.store(board), pages.store(board)))
        if boards.count > 4 { boards.removeFirst() }
      case 60..<68:
        let id = Int.random(in: 0..<10, using: &generator)
        let seenA = seenByBatch
        let seenB = seenByPage
        if let tag = batches.find(Badge.self, id: id), let other = pages.find(Badge.self, id: id) {
          subscriptions.append(
            tag.observe { value in seenA.withValue { $0[id, default: []].append(value) } })
          subscriptions.append(
            other.observe { value in seenB.withValue { $0[id, default: []].append(value) } })
        }
      case 68..<76:
        let id = Int.random(in: 0..<10, using: &generator)
        batches.remove(Badge.self, id: id)
        pages.remove(Badge.self, id: id)
      case 76..<84:
        if !held.isEmpty { held.remove(at: Int.random(in: 0..<held.count, using: &generator)) }
      case 84..<88:
        if !boards.isEmpty {
          boards.remove(at: Int.random(in: 0..<boards.count, using: &generator))
        }
      case 88..<92:
        subscriptions.removeAll()
      default:
        // A batch inside a transaction, beside an update of one of its entities.
        let batch = (0..<3).map { Badge(id: $0 * 3, name: "tx\(step)", updatedAt: nil) }
        let id = Int.random(in: 0..<10, using: &generator)
        batches.transaction { _ in
          batches.store(batch)
          batches.update(Badge.self, id: id) { $0.color = "tx" }
        }
        pages.transaction { _ in
          pages.store(BadgePage(id: -step, tags: batch))
          pages.update(Badge.self, id: id) { $0.color = "tx" }
        }
      }
      for id in 0..<10 {
        #expect(
          printsTheSame(
            batches.find(Badge.self, id: id)?.value, pages.find(Badge.self, id: id)?.value),
          "step \(step): tag \(id)")
      }
      for (batchBoard, pageBoard) in boards {
        #expect(printsTheSame(batchBoard.value, pageBoard.value), "step \(step): board")
      }
      for (batchHandle, pageHandle) in held {
        #expect(
          printsTheSame(batchHandle.value, pageHandle.value.tags), "step \(step): a held batch")
      }
      let batchEvents = batchLogger.events.filter { $0.entity?.typeName != "BadgePage" }
      let pageEvents = pageLogger.events.filter { $0.entity?.typeName != "BadgePage" }
      #expect(printsTheSame(batchEvents, pageEvents), "step \(step): events")
      batchLogger.clear()
      pageLogger.clear()
      #expect(
        printsTheSame(seenByBatch.takeSorted(), seenByPage.takeSorted()),
        "step \(step): what subscribers were told")
    }
  }

  @Test("A batch writes each entity with its own stamp, merges, and shows what was kept")
  func batchSemantics() {
    let map = IdentityMap()
    let stored = map.store(Badge(id: 1, name: "bug", color: "red", updatedAt: 10))
    let board = map.store(Pinboard(id: 1, pinned: Badge(id: 2, name: "docs"), tags: []))
    let batch = map.store([
      Badge(id: 1, name: nil, color: "blue", updatedAt: 11),  // newer: merged
      Badge(id: 2, name: "documentation", updatedAt: nil),  // unstamped: applies
      Badge(id: 3, name: "new", updatedAt: 5),  // new
    ])
    #expect(stored.value == Badge(id: 1, name: "bug", color: "blue", updatedAt: 11))
    #expect(board.value.pinned.name == "documentation")
    #expect(batch.value.map(\.name) == ["bug", "documentation", "new"])
    // Older than what is stored: refused, and the batch shows the stored value.
    let stale = map.store([Badge(id: 1, name: "old", updatedAt: 3)])
    #expect(stale.value == [stored.value])
    #expect(stored.value.name == "bug")
  }
}
