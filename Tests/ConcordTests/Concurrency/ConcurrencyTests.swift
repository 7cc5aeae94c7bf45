import TestSupport
import Testing

@testable import Concord

@Suite("Thread safety under mixed load")
struct ConcurrencyTests {
  static let tasks = 8
  static let operationsPerTask = 2_000
  static let sharedCounters = 4
  static let ownIDs = 40

  /// What one task expects of the entities only it touches.
  struct Model {
    var handles: [Int: EntityObserver<Counter>] = [:]
    var expected: [Int: Int] = [:]
    var subscriptions: [Int: Subscription] = [:]
  }

  @Test func mixedOperationsFromManyTasksLeaveAConsistentMap() async {
    let map = IdentityMap()
    let shared = (0..<Self.sharedCounters).map { map.store(Counter(id: $0, value: 0)) }
    let sharedDeliveries = Locked(0)
    let sharedSubscriptions = shared.map { $0.observe { _ in sharedDeliveries.increment() } }

    let models = await withTaskGroup(of: (Int, Model, [Int]).self) { group in
      for task in 0..<Self.tasks {
        group.addTask { Self.run(task: task, on: map) }
      }
      var models: [(Int, Model, [Int])] = []
      for await result in group { models.append(result) }
      return models
    }

    // Shared counters: every increment from every task landed.
    var increments = Array(repeating: 0, count: Self.sharedCounters)
    for (_, _, taskIncrements) in models {
      for (id, count) in taskIncrements.enumerated() { increments[id] += count }
    }
    #expect(shared.map(\.value.value) == increments)
    #expect(sharedDeliveries.value > 0)

    // Each task's own entities: exactly those it still holds are there, with its last value.
    var alive = Self.sharedCounters
    for (task, model, _) in models {
      for offset in 0..<Self.ownIDs {
        let id = Self.ownBase(task) + offset
        let found = map.find(Counter.self, id: id)
        if let expected = model.expected[id] {
          #expect(found?.value.value == expected, "task \(task), id \(id)")
          alive += 1
        } else {
          #expect(found == nil, "task \(task), id \(id) should be gone")
        }
      }
    }
    #expect(map.count == alive)
    withExtendedLifetime((sharedSubscriptions, models)) {}
  }

  static func ownBase(_ task: Int) -> Int { 1_000 * (task + 1) }

  /// One task's random walk over store, find, update, observe, cancel, remove and release.
  static func run(task: Int, on map: IdentityMap) -> (Int, Model, [Int]) {
    var random = SeededGenerator(seed: UInt64(task) &* 7_919 &+ 17)
    var model = Model()
    var increments = Array(repeating: 0, count: sharedCounters)
    for step in 0..<operationsPerTask {
      let id = ownBase(task) + Int.random(in: 0..<ownIDs, using: &random)
      switch Int.random(in: 0..<8, using: &random) {
      case 0:
        model.handles[id] = map.store(Counter(id: id, value: step))
        model.expected[id] = step
      case 1:
        let found = map.find(Counter.self, id: id)
        precondition((found?.value.value) == model.expected[id], "find disagrees with the model")
      case 2:
        if map.update(Counter.self, id: id, { $0.value = step }) {
          model.expected[id] = step
        }
      case 3:
        if let handle = model.handles[id] {
          model.subscriptions[id] = handle.observe { counter in
            precondition(counter.id == id)
          }
        }
      case 4:
        // Cancel: the entity goes unless a handle still holds it.
        model.subscriptions[id]?.cancel()
        model.subscriptions[id] = nil
        if model.handles[id] == nil { model.expected[id] = nil }
      case 5:
        map.remove(Counter.self, id: id)
        model.expected[id] = nil
        model.handles[id] = nil
        model.subscriptions[id] = nil
      case 6:
        // Release: the entity goes unless a subscription still holds it.
        model.handles[id] = nil
        if model.subscriptions[id] == nil { model.expected[id] = nil }
      default:
        let counter = Int.random(in: 0..<sharedCounters, using: &random)
        map.update(Counter.self, id: counter) { $0.value += 1 }
        increments[counter] += 1
      }
    }
    return (task, model, increments)
  }
}
