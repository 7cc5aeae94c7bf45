import ConcordTesting
import TestSupport
import Testing

@testable import Concord

/// How many times `Tally.merge` ran, per `tag`: each test counts under a tag of its own, since
/// tests run in parallel.
let mergeCalls = Locked<[String: Int]>([:])

/// A partial, stamped entity that counts its merges.
struct Tally: Mergeable, Stamped, Equatable {
  var id: Int
  var tag: String
  var text: String
  var note: String?
  var version: Stamp?

  var stamp: Stamp? { version }

  static func merge(_ incoming: Tally, into stored: Tally) -> Tally {
    mergeCalls.withValue { $0[incoming.tag, default: 0] += 1 }
    return incoming.keepingStoredValues(of: stored, whereNil: \.note, \.version)
  }
}

/// An aggregate nesting a tally, unstamped itself.
struct TallyCard: Aggregate, Equatable {
  var id: Int
  var tally: Tally
  static var nestedEntities: [NestedEntity<TallyCard>] { [.init(\.tally)] }
}

extension AliasKey where Value == Tally {
  static var pinnedTally: Self { .init("pinnedTally") }
}

/// The paths a value of a type can be written by.
enum WritePath: CaseIterable, CustomTestStringConvertible {
  case store, nested, batch, alias, transaction

  var testDescription: String { "\(self)" }

  /// Writes `tally` to `map` by this path, and returns a handle on the entity that keeps it.
  @discardableResult
  func write(_ tally: Tally, to map: IdentityMap) -> EntityObserver<Tally>? {
    switch self {
    case .store: return map.store(tally)
    case .nested: _ = map.store(TallyCard(id: tally.id, tally: tally))
    case .batch: _ = map.store([tally])
    case .alias: _ = map.store(tally, named: .pinnedTally)
    case .transaction: return map.transaction { $0.store(tally) }
    }
    return nil
  }
}

@Suite("Stale writes never merge")
struct StaleWriteTests {
  /// The merges counted under `tag` since the last call.
  func merges(_ tag: String) -> Int {
    mergeCalls.withValue { $0.removeValue(forKey: tag) ?? 0 }
  }

  @Test(arguments: WritePath.allCases)
  func anOlderStampIsRefusedAndLoggedWithoutAMergeWhateverItsValue(path: WritePath) {
    let tag = "older-\(path)"
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    let stored = Tally(id: 1, tag: tag, text: "a", note: "kept", version: 5)
    let handle = map.store(stored)
    _ = merges(tag)
    logger.clear()

    // The same value, and another one, both older: neither is merged, both are refused.
    path.write(Tally(id: 1, tag: tag, text: "a", note: "kept", version: 3), to: map)
    path.write(Tally(id: 1, tag: tag, text: "b", note: nil, version: 4), to: map)
    #expect(merges(tag) == 0, "a stale write never reaches merge")
    #expect(handle.value == stored)
    let refused = logger.staleWrites.filter {
      $0.target == .entity(EntityReference(Tally.self, id: 1))
    }
    #expect(refused.map(\.incoming) == [3, 4], "each older write is logged as stale")
  }

  @Test(arguments: WritePath.allCases)
  func aNaNStampIsStaleWithoutAMerge(path: WritePath) {
    let tag = "nan-\(path)"
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    let handle = map.store(Tally(id: 1, tag: tag, text: "a", version: 5))
    _ = merges(tag)
    logger.clear()
    path.write(Tally(id: 1, tag: tag, text: "a", version: .nan), to: map)
    #expect(merges(tag) == 0)
    #expect(handle.value.text == "a")
    #expect(logger.staleWrites.count == 1)
  }

  @Test(arguments: WritePath.allCases)
  func anEqualStampIsMergedOnceThenComparedWithTheStoredValue(path: WritePath) {
    let tag = "equal-\(path)"
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    let handle = map.store(Tally(id: 1, tag: tag, text: "a", note: "kept", version: 5))
    _ = merges(tag)
    logger.clear()

    // A partial copy of the stored value: merged, it is the stored value, a quiet no-op.
    path.write(Tally(id: 1, tag: tag, text: "a", note: nil, version: 5), to: map)
    #expect(merges(tag) == 1)
    #expect(logger.staleWrites.isEmpty, "an equal stamp with an == merged value is quiet")

    // Another value with the same stamp: merged, compared, refused and logged.
    path.write(Tally(id: 1, tag: tag, text: "b", note: nil, version: 5), to: map)
    #expect(merges(tag) == 1)
    #expect(handle.value.text == "a")
    #expect(logger.staleWrites.map(\.incoming) == [5])
  }

  @Test(arguments: WritePath.allCases)
  func aNewerStampIsMergedAndApplies(path: WritePath) {
    let tag = "newer-\(path)"
    let map = IdentityMap()
    let handle = map.store(Tally(id: 1, tag: tag, text: "a", note: "kept", version: 5))
    _ = merges(tag)
    path.write(Tally(id: 1, tag: tag, text: "b", note: nil, version: 6), to: map)
    #expect(merges(tag) == 1)
    #expect(handle.value == Tally(id: 1, tag: tag, text: "b", note: "kept", version: 6))
  }

  @Test func aStaleAggregatesNestedEntitiesAreStillJudgedOnTheirOwnStamps() {
    let tag = "nested-own"
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    let card = map.store(TallyCard(id: 1, tally: Tally(id: 1, tag: tag, text: "a", version: 5)))
    map.store(TallyCard(id: 1, tally: Tally(id: 1, tag: tag, text: "b", version: 2)), modifiedAt: 9)
    #expect(merges(tag) == 0)
    #expect(card.value.tally.text == "a")
    map.store(TallyCard(id: 1, tally: Tally(id: 1, tag: tag, text: "c", version: 7)), modifiedAt: 8)
    #expect(merges(tag) == 1)
    #expect(card.value.tally.text == "c", "a stale card still writes its newer tally")
  }

  @Test func anUpdateLeavesTheEntitiesItsBodyDidNotTouchAlone() {
    // The tally's record is stamped 9 by the call, while its value still says version 5: the
    // card's update hands its body that value, which is not a write of the tally.
    let tag = "update-untouched"
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    let card = map.store(TallyCard(id: 1, tally: Tally(id: 1, tag: tag, text: "a", version: 5)))
    map.store(Tally(id: 1, tag: tag, text: "b", version: nil), modifiedAt: 9)
    _ = merges(tag)
    logger.clear()
    map.update(TallyCard.self, id: 1) { _ in }
    #expect(merges(tag) == 0)
    #expect(logger.staleWrites.isEmpty, "nothing was written, so nothing was refused")
    // A body that does change the tally writes it, and an older stamp is refused.
    map.update(TallyCard.self, id: 1) { $0.tally.text = "c" }
    #expect(merges(tag) == 0)
    #expect(card.value.tally.text == "b")
    #expect(logger.staleWrites.map(\.incoming) == [5])
  }
}
