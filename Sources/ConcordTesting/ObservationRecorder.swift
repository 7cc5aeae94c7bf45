import Concord

/// Records every value an `EntityObserver` delivers, so that a test can assert on them, or
/// await the next one.
///
/// Recording starts when the recorder is made, and holds what it observes alive until it is
/// cancelled or released. Values are recorded synchronously, as the map delivers them, so after
/// a write returns its value is already there:
///
/// ```swift
/// let recorder = map.store(Author(id: 1, name: "Ursula")).record()
/// map.update(Author.self, id: 1) { $0.name = "Ursula K. Le Guin" }
/// #expect(recorder.values.map(\.name) == ["Ursula K. Le Guin"])
/// ```
///
/// When the write happens elsewhere, in a task the code under test starts, await it:
///
/// ```swift
/// let author = try await recorder.first { $0.name.hasPrefix("Ursula K.") }
/// ```
///
/// ``next(timeout:)`` and ``first(timeout:where:)`` consume recorded values in order: each
/// returns a value recorded after the last one they returned, already recorded or still to
/// come. Calls that wait are served in the order they were made.
public final class ObservationRecorder<Value: Sendable>: @unchecked Sendable {
  // NB: @unchecked because every mutable field is only touched while holding `lock`.
  private let lock = Lock()
  private var recorded: [Value] = []
  /// How many recorded values `next` and `first(where:)` have consumed.
  private var consumed = 0
  private var waiters: [Waiter] = []
  private var nextWaiter = 0
  private var subscription: Subscription?

  private struct Waiter {
    let id: Int
    let matches: @Sendable (Value) -> Bool
    let continuation: CheckedContinuation<Value, any Error>
  }

  /// Starts recording what `observer` delivers.
  ///
  /// - Parameters:
  ///   - observer: The handle to observe. The recorder holds its value alive until cancelled.
  ///   - includingCurrentValue: Whether to record the current value first, before any change.
  ///     No change can slip in between.
  public init(_ observer: EntityObserver<Value>, includingCurrentValue: Bool = false) {
    // NB: the subscription delivers the current value before `observe` returns, so it is
    // set after the first value may be recorded; `record` only needs `lock`.
    let subscription = observer.observe(includingCurrentValue: includingCurrentValue) {
      [weak self] value in
      self?.record(value)
    }
    lock.withLock { self.subscription = subscription }
  }

  deinit {
    subscription?.cancel()
    for waiter in waiters { waiter.continuation.resume(throwing: CancellationError()) }
  }

  /// Every value recorded, oldest first.
  public var values: [Value] {
    lock.withLock { recorded }
  }

  /// The number of values recorded.
  public var count: Int {
    lock.withLock { recorded.count }
  }

  /// The newest value recorded, if any.
  public var last: Value? {
    lock.withLock { recorded.last }
  }

  /// Stops recording, and lets go of what the recorder held. Values already recorded stay.
  public func cancel() {
    let subscription = lock.withLock { () -> Subscription? in
      defer { self.subscription = nil }
      return self.subscription
    }
    subscription?.cancel()
  }

  /// The next value after the last one `next` or `first(where:)` returned: one already
  /// recorded, or the next one to come.
  ///
  /// - Throws: ``ObservationTimeout`` if no such value arrives within `timeout`, or
  ///   `CancellationError` if the task is cancelled.
  public func next(timeout: Duration = .seconds(1)) async throws -> Value {
    try await first(timeout: timeout) { _ in true }
  }

  /// The first value after the last one `next` or `first(where:)` returned that satisfies
  /// `predicate`: one already recorded, or one to come. Values before it are consumed too.
  ///
  /// ```swift
  /// let renamed = try await recorder.first(timeout: .seconds(2)) { $0.name == "Sparrowhawk" }
  /// ```
  ///
  /// - Throws: ``ObservationTimeout`` if no such value arrives within `timeout`, or
  ///   `CancellationError` if the task is cancelled.
  public func first(
    timeout: Duration = .seconds(1), where predicate: @escaping @Sendable (Value) -> Bool
  ) async throws -> Value {
    let id = lock.withLock { () -> Int in
      nextWaiter += 1
      return nextWaiter
    }
    return try await withThrowingTaskGroup(of: Value.self) { group in
      group.addTask { try await self.wait(id: id, matches: predicate) }
      group.addTask {
        try await Task.sleep(for: timeout)
        throw ObservationTimeout(timeout: timeout, recorded: self.count)
      }
      defer { group.cancelAll() }
      guard let value = try await group.next() else { throw CancellationError() }
      return value
    }
  }

  // MARK: Internals

  /// How many calls are waiting for a value.
  var waitingCalls: Int {
    lock.withLock { waiters.count }
  }

  private func record(_ value: Value) {
    let resumed = lock.withLock { () -> [(CheckedContinuation<Value, any Error>, Value)] in
      recorded.append(value)
      return serveWaiters()
    }
    for (continuation, value) in resumed { continuation.resume(returning: value) }
  }

  /// Serves waiting calls in order while recorded values satisfy them. Called under `lock`.
  private func serveWaiters() -> [(CheckedContinuation<Value, any Error>, Value)] {
    var resumed: [(CheckedContinuation<Value, any Error>, Value)] = []
    while let waiter = waiters.first, let value = consume(matching: waiter.matches) {
      waiters.removeFirst()
      resumed.append((waiter.continuation, value))
    }
    return resumed
  }

  /// The first unconsumed value that matches, consuming it and those before it. Called under
  /// `lock`.
  private func consume(matching matches: (Value) -> Bool) -> Value? {
    guard let offset = recorded[consumed...].firstIndex(where: matches) else { return nil }
    consumed = offset + 1
    return recorded[offset]
  }

  private func wait(id: Int, matches: @escaping @Sendable (Value) -> Bool) async throws -> Value {
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { continuation in
        lock.lock()
        // NB: served at once only when no earlier call waits, so that calls stay in order.
        if waiters.isEmpty, let value = consume(matching: matches) {
          lock.unlock()
          continuation.resume(returning: value)
        } else if Task.isCancelled {
          // NB: cancelled before the waiter was registered: `onCancel` found nothing to resume.
          lock.unlock()
          continuation.resume(throwing: CancellationError())
        } else {
          waiters.append(Waiter(id: id, matches: matches, continuation: continuation))
          lock.unlock()
        }
      }
    } onCancel: {
      // NB: the calls queued behind this one may already have their values recorded.
      let (waiter, resumed) = lock.withLock {
        () -> (Waiter?, [(CheckedContinuation<Value, any Error>, Value)]) in
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return (nil, []) }
        return (waiters.remove(at: index), serveWaiters())
      }
      waiter?.continuation.resume(throwing: CancellationError())
      for (continuation, value) in resumed { continuation.resume(returning: value) }
    }
  }
}

/// No matching value arrived in time.
public struct ObservationTimeout: Error, CustomStringConvertible {
  /// How long the call waited.
  public let timeout: Duration
  /// How many values the recorder had recorded when it gave up.
  public let recorded: Int

  /// A sentence for the test's failure message.
  public var description: String {
    "no matching value arrived within \(timeout) (\(recorded) recorded in all)"
  }
}

extension EntityObserver {
  /// Starts recording the values this handle's subscription delivers.
  ///
  /// ```swift
  /// let recorder = handle.record()
  /// ```
  ///
  /// - Parameter includingCurrentValue: Whether to record the current value first.
  public func record(includingCurrentValue: Bool = false) -> ObservationRecorder<Value> {
    ObservationRecorder(self, includingCurrentValue: includingCurrentValue)
  }
}
