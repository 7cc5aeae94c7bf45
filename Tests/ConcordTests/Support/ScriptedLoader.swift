import Concord
import ConcordTesting
import Foundation
import TestSupport

/// A resource loader that the test answers: each call is recorded and waits until the test
/// responds to it, so the test decides when every fetch ends, and how.
///
/// ```swift
/// let loader = ScriptedLoader<[Author]>()
/// let authors = map.resource(ResourceKey<[Author]>("authors"), load: loader.load)
/// async let answer = authors.load()
/// let request = await loader.nextCall()
/// loader.respond(.value([ursula]))
/// ```
final class ScriptedLoader<Value: Sendable>: Sendable {
  private struct Call {
    let id: UUID
    let request: ResourceRequest
    let continuation: CheckedContinuation<Fetched<Value>, any Error>
  }

  private struct State {
    var requests: [ResourceRequest] = []
    var waiting: [Call] = []
    /// Callers of `nextCall()`: each takes the next call not yet taken.
    var watchers: [CheckedContinuation<ResourceRequest, Never>] = []
    var taken = 0
    var cancellations = 0
  }

  private let state = Locked(State())

  /// Every request made, in order.
  var requests: [ResourceRequest] { state.value.requests }
  /// How many calls were made.
  var calls: Int { state.value.requests.count }
  /// How many calls were cancelled while they waited.
  var cancellations: Int { state.value.cancellations }
  /// How many calls wait for a response.
  var waiting: Int { state.value.waiting.count }

  /// The loader to give the resource.
  var load: @Sendable (ResourceRequest) async throws -> Fetched<Value> {
    { request in try await self.call(request) }
  }

  private func call(_ request: ResourceRequest) async throws -> Fetched<Value> {
    let id = UUID()
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { continuation in
        let watcher = state.withValue { state -> CheckedContinuation<ResourceRequest, Never>? in
          state.requests.append(request)
          if Task.isCancelled {
            state.cancellations += 1
            continuation.resume(throwing: CancellationError())
            return nil
          }
          state.waiting.append(Call(id: id, request: request, continuation: continuation))
          guard !state.watchers.isEmpty else { return nil }
          state.taken += 1
          return state.watchers.removeFirst()
        }
        watcher?.resume(returning: request)
      }
    } onCancel: {
      let cancelled = state.withValue { state -> Call? in
        guard let index = state.waiting.firstIndex(where: { $0.id == id }) else {
          return nil
        }
        state.cancellations += 1
        return state.waiting.remove(at: index)
      }
      cancelled?.continuation.resume(throwing: CancellationError())
    }
  }

  /// Waits for the next call not yet taken by an earlier `nextCall()`, and returns its request.
  func nextCall() async -> ResourceRequest {
    await withCheckedContinuation { continuation in
      let ready = state.withValue { state -> ResourceRequest? in
        if state.taken < state.requests.count {
          state.taken += 1
          return state.requests[state.taken - 1]
        }
        state.watchers.append(continuation)
        return nil
      }
      if let ready { continuation.resume(returning: ready) }
    }
  }

  /// Answers the oldest waiting call.
  func respond(_ fetched: Fetched<Value>) {
    take()?.continuation.resume(returning: fetched)
  }

  /// Fails the oldest waiting call with `error`.
  func fail(_ error: any Error) {
    take()?.continuation.resume(throwing: error)
  }

  private func take() -> Call? {
    state.withValue { state in state.waiting.isEmpty ? nil : state.waiting.removeFirst() }
  }
}

/// An error a loader throws in tests.
struct LoaderError: Error, Equatable, CustomStringConvertible {
  let code: Int
  init(_ code: Int) { self.code = code }
  var description: String { "LoaderError(\(code))" }
}

/// Records what an observation delivers, in order, and lets a test await a delivery: what
/// `StateRecorder` and `PagedStateRecorder` share.
final class DeliveryRecorder<Delivered: Sendable>: Sendable {
  private struct State {
    var recorded: [Delivered] = []
    var watchers:
      [(
        matches: @Sendable (Delivered) -> Bool,
        continuation: CheckedContinuation<Delivered, Never>
      )] = []
  }

  private let state = Locked(State())
  private let subscription: Locked<Subscription?> = Locked(nil)

  /// Starts recording what `observe` delivers to the callback it is given.
  init(observe: (@escaping @Sendable (Delivered) -> Void) -> Subscription) {
    let state = state
    subscription.withValue {
      $0 = observe { delivered in
        let ready = state.withValue { state in
          state.recorded.append(delivered)
          let ready = state.watchers.filter { $0.matches(delivered) }
          state.watchers.removeAll { $0.matches(delivered) }
          return ready
        }
        for watcher in ready { watcher.continuation.resume(returning: delivered) }
      }
    }
  }

  /// Everything delivered, in order.
  var recorded: [Delivered] { state.value.recorded }

  /// The first delivery that matches, already recorded or still to come.
  func first(where matches: @escaping @Sendable (Delivered) -> Bool) async -> Delivered {
    await withCheckedContinuation { continuation in
      let found = state.withValue { state -> Delivered? in
        if let found = state.recorded.first(where: matches) { return found }
        state.watchers.append((matches, continuation))
        return nil
      }
      if let found { continuation.resume(returning: found) }
    }
  }

  /// Stops recording.
  func cancel() {
    subscription.withValue { $0?.cancel() }
  }
}

/// Records the states a resource delivers, and lets a test await one.
final class StateRecorder<Value: Sendable>: Sendable {
  private let recorder: DeliveryRecorder<ResourceState<Value>>

  init(_ resource: Resource<Value>, includingCurrentState: Bool = false) {
    recorder = DeliveryRecorder {
      resource.observe(includingCurrentState: includingCurrentState, $0)
    }
  }

  /// Every state delivered, in order.
  var states: [ResourceState<Value>] { recorder.recorded }

  /// The first state recorded that matches, already recorded or still to come.
  func first(where matches: @escaping @Sendable (ResourceState<Value>) -> Bool) async
    -> ResourceState<Value>
  {
    await recorder.first(where: matches)
  }

  /// Stops recording.
  func cancel() { recorder.cancel() }
}

/// A `ManualClock` that also records how long each sleep asked for.
final class RecordingClock: ResourceClock {
  let manual: ManualClock
  private let recorded = Locked<[Duration]>([])

  init(_ manual: ManualClock = ManualClock()) {
    self.manual = manual
  }

  var now: Date { manual.now }

  /// Every duration asked for, in order.
  var sleeps: [Duration] { recorded.value }

  func sleep(for duration: Duration) async throws {
    recorded.append(duration)
    try await manual.sleep(for: duration)
  }
}

/// A gate tasks wait at, ignoring cancellation, until the test opens it.
final class Gate: Sendable {
  private let state = Locked<(open: Bool, waiting: [CheckedContinuation<Void, Never>])>((false, []))

  /// How many tasks wait at the gate.
  var waiting: Int { state.value.waiting.count }

  /// Waits until the gate is open, whether or not the task is cancelled.
  func wait() async {
    await withCheckedContinuation { continuation in
      let open = state.withValue { state in
        if !state.open { state.waiting.append(continuation) }
        return state.open
      }
      if open { continuation.resume() }
    }
  }

  /// Opens the gate: every waiting task goes on, and later ones do not wait.
  func open() {
    let waiting = state.withValue { state in
      state.open = true
      defer { state.waiting.removeAll() }
      return state.waiting
    }
    for continuation in waiting { continuation.resume() }
  }
}
