import Foundation
import TestSupport
import Testing

@testable import Concord

// A seeded model-based random test of optimistic layers. The model keeps the map underneath (values
// and stamps) and a stack of layers, each with the values it wrote, as the Optimistic Updates
// article (`OptimisticUpdates.md`) describes them; random steps interleave layer creation, server
// writes (stamped, some stale), updates, removals, commits, rollbacks and dropped layers. After
// every step, every entity the map shows must be the model's visible value (the newest pending
// layer's, else underneath), an observer must have been told the visible value when it changed and
// never otherwise, and the engine's invariants must hold. Each seed runs twice: once on a map
// that takes the shortcuts, once on one that takes none (`_Pass.isExhaustive`; among them,
// `_MapCore.show`'s shortcut, which shows a value underneath or a layer's value in an entity that
// nests nothing and that no parent shows without running the pass, and the lowering of such an
// entity by exchanging values, `_Shadow._lower`).

private struct ModelRollback: Error {}

private struct ModelLayer {
  let handle: OptimisticLayer
  var values: [Int: Counter] = [:]
  var order: [Int] = []
  /// The stamp each entity showed when the layer wrote it (the layer's writes give none).
  var stamps: [Int: Double] = [:]
}

private struct OptimisticModelRun {
  var random: SeededGenerator
  let map = IdentityMap()
  var base: [Int: (value: Counter, stamp: Double?)] = [:]
  var layers: [ModelLayer] = []
  /// The stamps of removed entities: the newest each showed or had underneath.
  var tombstones: [Int: Double] = [:]
  var handles: [EntityObserver<Counter>] = []
  var log: [String] = []
  let ids: Range<Int>
  /// The most entities the layers shadowed at once, after any step.
  var mostShadows = 0
  /// What a step found wrong while it ran.
  var failures: [String] = []
  /// What the observer of each id has been told, in order.
  let told = Locked<[Int: [Int]]>([:])
  var subscriptions: [Subscription] = []
  var lastTold: [Int: Int] = [:]
  /// How many times the observers of each id had been told, after the last step.
  var toldCounts: [Int: Int] = [:]

  init(seed: UInt64, exhaustive: Bool, entities: Int = 8) {
    random = SeededGenerator(seed: seed)
    ids = 0..<entities
    map._core.pass.isExhaustive = exhaustive
  }

  /// The stamp the entity shows: the newest layer's over it, else the one underneath.
  func visibleStamp(_ id: Int) -> Double? {
    for layer in layers.reversed() where layer.values[id] != nil { return layer.stamps[id] }
    return base[id]?.stamp
  }

  func visible(_ id: Int) -> Counter? {
    for layer in layers.reversed() { if let value = layer.values[id] { return value } }
    return base[id]?.value
  }

  mutating func observeIfNeeded(_ id: Int) {
    guard let handle = map.find(Counter.self, id: id) else { return }
    handles.append(handle)
    let told = told
    subscriptions.append(
      handle.observe { counter in told.withValue { $0[id, default: []].append(counter.value) } })
  }

  mutating func applyUnderneath(_ value: Counter, stamp: Double?) {
    let stored = base[value.id]
    if let stamp, let storedStamp = stored?.stamp, stamp <= storedStamp { return }
    base[value.id] = (value, stamp ?? stored?.stamp)
  }

  /// A layer that stores `writes`, (id, value) in order, and the model's record of it.
  mutating func applyLayer(_ writes: [(Int, Int)]) {
    log.append("layer \(writes)")
    var layer = ModelLayer(
      handle: map.optimistic { transaction in
        for (id, value) in writes {
          transaction.store(Counter(id: id, value: value))
        }
      })
    var created: [Int] = []
    var final: [Int: Counter] = [:]
    var order: [Int] = []
    for (id, value) in writes {
      if final[id] == nil { order.append(id) }
      final[id] = Counter(id: id, value: value)
    }
    // A layer holds what it changed: an entity it stored as it was keeps following the
    // value underneath.
    for id in order where final[id] != visible(id) {
      if visible(id) == nil { created.append(id) }
      layer.values[id] = final[id]
      layer.order.append(id)
      if let stamp = visibleStamp(id) { layer.stamps[id] = stamp }
    }
    layers.append(layer)
    for id in created {
      tombstones[id] = nil
      observeIfNeeded(id)
    }
  }

  /// A server update of `id` by `value`: underneath, or the layer's value for an entity only
  /// layers created.
  mutating func updateUnderneath(_ id: Int, by value: Int) {
    if let stored = base[id] {
      base[id] = (Counter(id: id, value: stored.value.value + value), stored.stamp)
    } else if let shown = visible(id) {
      base[id] = (Counter(id: id, value: shown.value + value), nil)
    }
  }

  /// A commit of a layer's `values`: underneath unless a newer stamp is there, with the stamp
  /// the entity showed.
  mutating func commitUnderneath(values: [Int: Counter], stamps: [Int: Double], order: [Int]) {
    for id in order {
      let stamp = stamps[id]
      if let stored = base[id]?.stamp, let stamp, stored > stamp { continue }
      base[id] = (values[id]!, stamp ?? base[id]?.stamp)
    }
  }

  mutating func step() {
    let id = Int.random(in: ids, using: &random)
    let value = Int.random(in: 0..<5, using: &random)
    switch Int.random(in: 0..<12, using: &random) {
    case 0, 1:
      // A server write, stamped most of the time, sometimes stale.
      let stamp: Double? =
        Bool.random(using: &random) ? Double(Int.random(in: 0..<40, using: &random)) : nil
      log.append("server store \(id) = \(value) stamp \(stamp.map { "\($0)" } ?? "nil")")
      let existed = visible(id) != nil
      handles.append(map.store(Counter(id: id, value: value), modifiedAt: stamp))
      if !existed, let tomb = tombstones[id], let stamp, stamp <= tomb { return }
      if !existed { tombstones[id] = nil }
      applyUnderneath(Counter(id: id, value: value), stamp: stamp)
      if !existed { observeIfNeeded(id) }
    case 2:
      log.append("server update \(id) += \(value)")
      map.update(Counter.self, id: id) { $0.value += value }
      updateUnderneath(id, by: value)
    case 3:
      log.append("server remove \(id)")
      map.remove(Counter.self, id: id)
      if visible(id) != nil,
        let stamp = [visibleStamp(id), base[id]?.stamp].compactMap({ $0 }).max()
      {
        tombstones[id] = stamp
      }
      base[id] = nil
      for index in layers.indices {
        layers[index].values[id] = nil
        layers[index].order.removeAll { $0 == id }
      }
    case 4, 5:
      var writes: [(Int, Int)] = []
      for _ in 0..<Int.random(in: 1...3, using: &random) {
        writes.append((Int.random(in: ids, using: &random), Int.random(in: 0..<5, using: &random)))
      }
      applyLayer(writes)
    case 6, 7:
      guard !layers.isEmpty else { return }
      let index = Int.random(in: 0..<layers.count, using: &random)
      log.append("commit layer \(index)")
      layers[index].handle.commit()
      let layer = layers.remove(at: index)
      commitUnderneath(values: layer.values, stamps: layer.stamps, order: layer.order)
    case 10:
      // A server transaction that throws after its writes: they went underneath, over the
      // lowered layers, and none of them stays. Before them, it reads every entity: a write
      // from outside sees what is underneath (an entity only layers created, its layer's
      // value), as `update` starts from it.
      log.append("server transaction \(id) = \(value), then throws")
      let ids = ids
      var seen: [Int: Counter] = [:]
      _ = try? map.transaction { transaction in
        for id in ids {
          if let value = transaction.find(Counter.self, id: id)?.value { seen[id] = value }
        }
        transaction.store(Counter(id: id, value: value), modifiedAt: 100)
        transaction.update(Counter.self, id: id) { $0.value += 1 }
        throw ModelRollback()
      }
      for id in ids where seen[id] != (base[id]?.value ?? visible(id)) {
        failures.append(
          "a server transaction read \(String(describing: seen[id])) for \(id), expected "
            + "\(String(describing: base[id]?.value ?? visible(id)))")
      }
    case 11:
      // A layer ended inside a server write: dropped, rolled back or committed there, it ends
      // when the write does, after the write's own change (a dropped one through the record
      // its handle hands its writes to, `OptimisticLayer.heir()`).
      guard !layers.isEmpty else { return }
      let index = Int.random(in: 0..<layers.count, using: &random)
      let ending = ["drop", "roll back", "commit"][Int.random(in: 0..<3, using: &random)]
      log.append("server update \(id) += \(value), and \(ending) layer \(index) in it")
      // NB: the write's change first, while the layer is still there.
      updateUnderneath(id, by: value)
      // NB: the only reference to the handle, so that setting it to `nil` drops it.
      var taken: ModelLayer? = layers.remove(at: index)
      let values = taken!.values
      let stamps = taken!.stamps
      let order = taken!.order
      map.transaction { transaction in
        transaction.update(Counter.self, id: id) { $0.value += value }
        switch ending {
        case "drop": taken = nil
        case "roll back": taken?.handle.rollback()
        default: taken?.handle.commit()
        }
      }
      taken = nil
      if ending == "commit" { commitUnderneath(values: values, stamps: stamps, order: order) }
    default:
      guard !layers.isEmpty else { return }
      let index = Int.random(in: 0..<layers.count, using: &random)
      let drop = Bool.random(using: &random)
      log.append(drop ? "drop layer \(index)" : "roll back layer \(index)")
      if !drop { layers[index].handle.rollback() }
      layers.remove(at: index)
    }
  }

  mutating func run(steps: Int) -> Bool {
    for _ in 0..<steps {
      step()
      if let failure = failures.first {
        Issue.record("\(failure), after \(log.suffix(10))")
        return false
      }
      for id in ids {
        let shown = map.find(Counter.self, id: id)?.value
        let expected = visible(id)
        guard shown == expected else {
          Issue.record(
            "Counter \(id) shows \(String(describing: shown)), expected \(String(describing: expected)), after \(log.suffix(10))"
          )
          return false
        }
        // Told of each visible change, and of nothing else.
        if let expected, lastTold[id] != expected.value {
          let last = told.value[id]?.last
          if last != expected.value && lastTold[id] != nil {
            Issue.record(
              "the observer of \(id) was last told \(String(describing: last)), expected \(expected.value), after \(log.suffix(10))"
            )
            return false
          }
        }
        // A value that stayed the same is told to nobody.
        let count = told.value[id]?.count ?? 0
        if let expected, lastTold[id] == expected.value, count != toldCounts[id, default: 0] {
          Issue.record(
            "the observer of \(id) was told \(count - toldCounts[id, default: 0]) times of a value that did not change, after \(log.suffix(10))"
          )
          return false
        }
        toldCounts[id] = count
        lastTold[id] = expected?.value
      }
      map._core._checkInvariants()
      mostShadows = max(mostShadows, shadowCount(map))
    }
    return true
  }
}

@Suite("Optimistic layers against a model")
struct OptimisticModelTests {
  /// Ten seeds, each run both ways, of a hundredth of the random steps each.
  static let steps = randomSteps(share: 100)

  @Test(arguments: 0..<10, [false, true])
  func randomRun(seed: UInt64, exhaustive: Bool) {
    var run = OptimisticModelRun(seed: 0x0971_0000 + seed, exhaustive: exhaustive)
    let passed = run.run(steps: Self.steps)
    #expect(passed)
    run.layers = []
    #expect(shadowCount(run.map) == 0, "every layer ended, no shadow left")
    run.subscriptions = []
    run.handles = []
    #expect(run.map.count == 0)
  }

  /// Over 24 entities, so that the layers shadow more than eight at once: a shadow is then
  /// found through the shadows' index, not by looking through their order
  /// (`_Layers.shadow(of:)`), and both ways must give the same answers.
  @Test(arguments: 0..<4, [false, true])
  func randomRunOverMoreEntities(seed: UInt64, exhaustive: Bool) {
    var run = OptimisticModelRun(seed: 0x0972_0000 + seed, exhaustive: exhaustive, entities: 24)
    // NB: a first layer over twelve entities, so that the index is in use from the first step
    // however few steps the run takes (CI shortens them).
    run.applyLayer((0..<12).map { ($0, 1) })
    run.mostShadows = shadowCount(run.map)
    let passed = run.run(steps: Self.steps)
    #expect(passed)
    #expect(run.mostShadows > 8, "the layers shadowed \(run.mostShadows) entities at most")
    run.layers = []
    #expect(shadowCount(run.map) == 0, "every layer ended, no shadow left")
    run.subscriptions = []
    run.handles = []
    #expect(run.map.count == 0)
  }
}
