import ConcordTesting
import Foundation
import Testing

@Suite("ManualClock: time stands still until advanced")
struct ManualClockTests {
  @Test("now starts where it is told and moves only with advance(by:)")
  func now() {
    let clock = ManualClock(now: Date(timeIntervalSince1970: 100))
    #expect(clock.now == Date(timeIntervalSince1970: 100))
    clock.advance(by: .milliseconds(1_500))
    #expect(clock.now == Date(timeIntervalSince1970: 101.5))
    clock.advance(by: .seconds(-10))
    #expect(clock.now == Date(timeIntervalSince1970: 101.5), "a negative advance does nothing")
  }

  @Test("A sleeper resumes once the clock reaches its deadline, not before")
  func sleeperResumesAtItsDeadline() async throws {
    let clock = ManualClock()
    let woke = Task { try await clock.sleep(for: .seconds(10)) }
    await clock.waitForSleepers(1)
    clock.advance(by: .milliseconds(9_999))
    #expect(clock.sleepers == 1)
    clock.advance(by: .milliseconds(1))
    #expect(clock.sleepers == 0)
    try await woke.value
  }

  @Test("Sleepers resume when their deadline comes; one advance wakes all that it passes")
  @MainActor
  func deadlineOrder() async throws {
    let clock = ManualClock()
    let order = Order()
    var sleepers: [String: Task<Void, any Error>] = [:]
    for (name, seconds) in [("c", 3), ("a", 1), ("b1", 2), ("b2", 2)] {
      sleepers[name] = Task { @MainActor in
        try await clock.sleep(for: .seconds(seconds))
        order.names.append(name)
      }
      await clock.waitForSleepers(sleepers.count)
    }
    // NB: a resumed sleeper goes on in its own task, so the order in which tasks woken by one
    // advance run is the executor's; each advance here wakes one deadline, then awaits it.
    clock.advance(by: .seconds(1))
    #expect(clock.sleepers == 3, "only the sleeper whose deadline came")
    try await sleepers["a"]!.value
    clock.advance(by: .milliseconds(999))
    #expect(clock.sleepers == 3, "b1 and b2 are not due yet")
    clock.advance(by: .milliseconds(1))
    #expect(clock.sleepers == 1, "both sleepers with the deadline that came")
    try await sleepers["b1"]!.value
    try await sleepers["b2"]!.value
    clock.advance(by: .seconds(4))
    #expect(clock.sleepers == 0)
    try await sleepers["c"]!.value
    #expect(order.names.first == "a")
    #expect(Set(order.names[1...2]) == ["b1", "b2"])
    #expect(order.names.last == "c")
  }

  /// The order sleepers woke in.
  @MainActor final class Order {
    var names: [String] = []
  }

  @Test("A zero or negative sleep returns at once")
  func zeroSleep() async throws {
    let clock = ManualClock()
    try await clock.sleep(for: .zero)
    try await clock.sleep(for: .seconds(-1))
    #expect(clock.sleepers == 0)
  }

  @Test("A cancelled sleeper throws CancellationError, at once or while asleep, and stops counting")
  func cancellation() async throws {
    let clock = ManualClock()
    let asleep = Task { try await clock.sleep(for: .seconds(10)) }
    await clock.waitForSleepers(1)
    asleep.cancel()
    await #expect(throws: CancellationError.self) { try await asleep.value }
    #expect(clock.sleepers == 0)
    let early = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      try await clock.sleep(for: .seconds(10))
    }
    await #expect(throws: CancellationError.self) { try await early.value }
    #expect(clock.sleepers == 0)
  }

  @Test("waitForSleepers returns when the count is reached, or when cancelled")
  func waitForSleepers() async throws {
    let clock = ManualClock()
    await clock.waitForSleepers(0)
    let waiting = Task { await clock.waitForSleepers(2) }
    let first = Task { try await clock.sleep(for: .seconds(1)) }
    let second = Task { try await clock.sleep(for: .seconds(1)) }
    await waiting.value
    #expect(clock.sleepers == 2)
    clock.advance(by: .seconds(1))
    try await first.value
    try await second.value
    let cancelled = Task { await clock.waitForSleepers(5) }
    cancelled.cancel()
    await cancelled.value
  }
}
