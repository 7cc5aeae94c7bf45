import Concord
import Testing

@testable import ConcordTesting

struct Author: Identifiable, Sendable, Equatable {
  var id: Int
  var name: String
}

@Suite("ObservationRecorder")
struct ObservationRecorderTests {
  @Test func recordsEveryDeliveredValueInOrder() {
    let map = IdentityMap()
    let recorder = map.store(Author(id: 1, name: "A")).record()
    #expect(recorder.values.isEmpty)
    map.store(Author(id: 1, name: "B"))
    map.store(Author(id: 1, name: "C"))
    #expect(recorder.values.map(\.name) == ["B", "C"])
    #expect(recorder.count == 2)
    #expect(recorder.last?.name == "C")
  }

  @Test func canStartWithTheCurrentValue() {
    let map = IdentityMap()
    let recorder = map.store(Author(id: 1, name: "A")).record(includingCurrentValue: true)
    map.store(Author(id: 1, name: "B"))
    #expect(recorder.values.map(\.name) == ["A", "B"])
  }

  @Test func nextReturnsRecordedValuesInOrderThenWaits() async throws {
    let map = IdentityMap()
    let recorder = map.store(Author(id: 1, name: "A")).record()
    map.store(Author(id: 1, name: "B"))
    map.store(Author(id: 1, name: "C"))
    #expect(try await recorder.next().name == "B")
    #expect(try await recorder.next().name == "C")
    async let later = recorder.next()
    Task { map.store(Author(id: 1, name: "D")) }
    #expect(try await later.name == "D")
  }

  @Test func firstWhereSkipsAndConsumesWhatComesBefore() async throws {
    let map = IdentityMap()
    let recorder = map.store(Author(id: 1, name: "A")).record()
    for name in ["B", "C", "D"] { map.store(Author(id: 1, name: name)) }
    #expect(try await recorder.first { $0.name == "C" }.name == "C")
    #expect(try await recorder.next().name == "D")
  }

  @Test func firstWhereWaitsForAMatchFromAnotherTask() async throws {
    let map = IdentityMap()
    let recorder = map.store(Author(id: 1, name: "A")).record()
    async let match = recorder.first { $0.name == "done" }
    Task.detached {
      for step in 0..<20 { map.store(Author(id: 1, name: "step \(step)")) }
      map.store(Author(id: 1, name: "done"))
    }
    #expect(try await match.name == "done")
    #expect(recorder.count == 21)
  }

  @Test func timesOutWhenNothingComes() async {
    let map = IdentityMap()
    let recorder = map.store(Author(id: 1, name: "A")).record()
    map.store(Author(id: 1, name: "B"))
    let error = await #expect(throws: ObservationTimeout.self) {
      try await recorder.first(timeout: .milliseconds(20)) { $0.name == "never" }
    }
    #expect(error?.recorded == 1)
    #expect(
      error?.description == "no matching value arrived within 0.02 seconds (1 recorded in all)")
  }

  @Test func aCancelledWaitThrowsCancellation() async {
    let map = IdentityMap()
    let recorder = map.store(Author(id: 1, name: "A")).record()
    let waiting = Task { try await recorder.next(timeout: .seconds(60)) }
    waiting.cancel()
    await #expect(throws: CancellationError.self) { try await waiting.value }
  }

  @Test func aWaitThatEndsServesTheCallsQueuedBehindIt() async throws {
    let map = IdentityMap()
    let recorder = map.store(Author(id: 1, name: "A")).record()
    map.store(Author(id: 1, name: "B"))
    let never = Task { try await recorder.first(timeout: .seconds(60)) { $0.name == "never" } }
    while recorder.waitingCalls < 1 { await Task.yield() }
    // Queued behind `never`, although "B" is already recorded: calls are served in order.
    let next = Task { try await recorder.next(timeout: .seconds(10)) }
    while recorder.waitingCalls < 2 { await Task.yield() }
    never.cancel()
    await #expect(throws: CancellationError.self) { try await never.value }
    #expect(try await next.value.name == "B")
  }

  @Test func holdsWhatItRecordsUntilCancelled() {
    let map = IdentityMap()
    let recorder = map.store(Author(id: 1, name: "A")).record()
    #expect(map.count == 1, "the handle is gone, the recorder holds the author")
    recorder.cancel()
    #expect(map.count == 0)
    map.store(Author(id: 1, name: "B"))
    #expect(recorder.values.isEmpty)
  }

  @Test func recordsEveryValueFromManyWritersInOrder() async {
    let map = IdentityMap()
    let recorder = map.store(Author(id: 1, name: "0")).record()
    await withTaskGroup(of: Void.self) { group in
      for _ in 0..<8 {
        group.addTask {
          for _ in 0..<200 {
            map.update(Author.self, id: 1) { $0.name = String(Int($0.name)! + 1) }
          }
        }
      }
    }
    let numbers = recorder.values.map { Int($0.name)! }
    #expect(zip(numbers, numbers.dropFirst()).allSatisfy { $0 < $1 })
    #expect(numbers.last == 1_600)
  }
}
