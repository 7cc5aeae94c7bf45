import TestSupport
import Testing

@testable import Concord

/// A node for the index's tests: the index holds nodes unretained, so the model keeps them.
private final class Box<Key: Hashable> {
  let key: Key
  init(_ key: Key) { self.key = key }
}

/// A key whose hash puts every four neighbours in one bucket, so that runs are long and
/// removals shift entries back across them.
private struct Clumped: Hashable {
  var value: Int
  func hash(into hasher: inout Hasher) { hasher.combine(value / 4) }
}

// The index also holds tombstones (`_Tombstones.swift`): the random steps make, move, drop and
// clear them beside the nodes, and lookups of nodes must pass over them.
@Suite("Registry: the node index")
struct NodeIndexTests {
  /// Random steps on the index and on a dictionary, compared after each one.
  private func compareWithDictionary<Key: Hashable>(
    seed: UInt64, steps: Int, keys: Int, _ makeKey: (Int) -> Key
  ) {
    var random = SeededGenerator(seed: seed)
    var index = _NodeIndex<Key, Box<Key>>()
    var model: [Key: Box<Key>] = [:]
    // The tombstones the index holds, with their marks: a key may have a node and one too.
    var tombs: [Key: Int] = [:]
    defer { index.dispose() }
    for step in 0..<steps {
      let key = makeKey(Int.random(in: 0..<keys, using: &random))
      let box = Box(key)
      let mark = Int.random(in: 0..<1_000_000, using: &random)
      switch Int.random(in: 0..<14, using: &random) {
      case 10:
        // A removal that leaves a tombstone: the node's bucket becomes one, in place.
        let (bucket, found) = index.find(key, hash: index.hash(key))
        if found && tombs[key] == nil {
          index.entomb(at: bucket, mark: mark)
          model[key] = nil
          tombs[key] = mark
        }
      case 11:
        if let bucket = index.findTomb(key) {
          #expect(index.mark(at: bucket) == tombs[key], "step \(step): a tombstone's mark")
          if Bool.random(using: &random) {
            index.removeEntry(at: bucket)
            tombs[key] = nil
          } else {
            index.setMark(mark, at: bucket)
            tombs[key] = mark
          }
        } else {
          #expect(tombs[key] == nil, "step \(step): a tombstone missed")
          index.insertTomb(key, mark: mark)
          tombs[key] = mark
        }
      case 12:
        if Int.random(in: 0..<40, using: &random) == 0 {
          index.removeAllTombs()
          tombs = [:]
        }
      case 13:
        #expect(index.findTomb(key).map(index.mark(at:)) == tombs[key], "step \(step): findTomb")
      case 0..<4:
        let got = index.getOrInsert(key) { .passUnretained(box) }.takeUnretainedValue()
        if model[key] == nil { model[key] = box }
        #expect(got === model[key], "step \(step): getOrInsert")
      case 4:
        let replaced = index.updateValue(.passUnretained(box), forKey: key)
        #expect(replaced?.takeUnretainedValue() === model[key], "step \(step): updateValue")
        model[key] = box
      case 5..<7:
        // Half the time the node given is another one: nothing is taken out.
        let stored = model[key]
        let given = Bool.random(using: &random) ? stored ?? box : box
        let removed = index.remove(key, ifNodeIs: .passUnretained(given))
        #expect(removed == (stored != nil && stored === given), "step \(step): remove")
        if removed { model[key] = nil }
      case 7:
        let removed = index.removeValue(forKey: key)
        #expect(removed?.takeUnretainedValue() === model.removeValue(forKey: key))
      case 8:
        if Int.random(in: 0..<50, using: &random) == 0 {
          index.reserveCapacity(index.count + Int.random(in: 0..<200, using: &random))
        }
      default:
        #expect(index[key]?.takeUnretainedValue() === model[key], "step \(step): lookup")
      }
      #expect(index.count == model.count && index.tombCount == tombs.count)
      if step % 97 == 0 || steps - step < 2 {
        #expect(index.problem { $0.takeUnretainedValue().key } == nil, "step \(step)")
        for (key, box) in model { #expect(index[key]?.takeUnretainedValue() === box) }
        var listedTombs: [Key: Int] = [:]
        index.forEachTomb { listedTombs[$0] = $1 }
        #expect(listedTombs == tombs, "step \(step): tombstones")
        let listed = Set(index.nodes.map { ObjectIdentifier($0.takeUnretainedValue()) })
        #expect(listed == Set(model.values.map(ObjectIdentifier.init)))
      }
    }
  }

  @Test(arguments: [1, 2, 3] as [UInt64])
  func clumpedKeysBehaveAsADictionary(seed: UInt64) {
    compareWithDictionary(seed: seed, steps: randomSteps(share: 10), keys: 300) {
      Clumped(value: $0)
    }
  }

  /// Keys that own memory: moving them between buckets and destroying them must neither leak
  /// nor free twice (the sanitizers' runs check).
  @Test func stringKeysBehaveAsADictionary() {
    compareWithDictionary(seed: 4, steps: randomSteps(share: 10), keys: 2_000) {
      "a key long enough to be stored out of line, number \($0)"
    }
  }

  /// A key aligned to 16 bytes sits after padding, at the next multiple of its alignment.
  @Test func overAlignedKeysBehaveAsADictionary() {
    typealias Index = _NodeIndex<SIMD4<Float>, Box<SIMD4<Float>>>
    #expect(Index.keyOffset == 16 && Index.bucketStride == 32)
    compareWithDictionary(seed: 5, steps: randomSteps(share: 20), keys: 500) {
      SIMD4(Float($0), 0, 1, 2)
    }
  }

  @Test func growsByPowersOfTwoAndStaysAtMostThreeQuartersFull() {
    #expect(_NodeIndex<Int, Box<Int>>.bucketCount(for: 0) == 8)
    #expect(_NodeIndex<Int, Box<Int>>.bucketCount(for: 6) == 8)
    #expect(_NodeIndex<Int, Box<Int>>.bucketCount(for: 7) == 16)
    #expect(_NodeIndex<Int, Box<Int>>.bucketCount(for: 100_000) == 262_144)
    var index = _NodeIndex<Int, Box<Int>>()
    defer { index.dispose() }
    let boxes = (0..<1_000).map(Box.init)
    for box in boxes {
      _ = index.getOrInsert(box.key) { .passUnretained(box) }
      #expect(index.count * 4 <= (index.mask + 1) * 3)
    }
    #expect(index.mask + 1 == 2_048)
    #expect(index.problem { $0.takeUnretainedValue().key } == nil)
  }

  /// The map's tables use the index: many entities come and go, and every one stays findable.
  @Test func aMapFindsEveryEntityWhileTablesGrowAndEmpty() {
    let map = IdentityMap()
    var handles: [Int: EntityObserver<Author>] = [:]
    for round in 0..<3 {
      for id in 0..<3_000 { handles[id] = map.store(Author(id: id, name: "\(round)")) }
      // Dropping a handle purges its entity: the table takes it out.
      for id in stride(from: round, to: 3_000, by: 2) { handles[id] = nil }
      #expect(map.count == handles.count)
      for id in 0..<3_000 {
        #expect((map.find(Author.self, id: id) != nil) == (handles[id] != nil), "id \(id)")
      }
      map._core._checkInvariants()
    }
    handles.removeAll()
    #expect(map.count == 0)
    map._core._checkInvariants()
  }
}
