import Concord
import ConcordTesting
import Foundation
import TestSupport

/// A paged list's loader that the test answers, as `ScriptedLoader` is a resource's: each call
/// is recorded and waits until the test responds to it.
///
/// ```swift
/// let pager = ScriptedPager<Counter, Int>()
/// let list = map.pagedResource(ResourceKey<[Counter]>("list"), load: pager.load)
/// async let first: Void = list.refresh()
/// #expect(await pager.nextCall() == .first)
/// pager.respond(Page([Counter(id: 1, value: 0)], older: 1))
/// ```
final class ScriptedPager<T: Sendable, Cursor: Codable & Sendable>: Sendable {
  private struct Call {
    let id: UUID
    let request: PageRequest<Cursor>
    let continuation: CheckedContinuation<Page<T, Cursor>, any Error>
  }

  private struct State {
    var requests: [PageRequest<Cursor>] = []
    var waiting: [Call] = []
    var watchers: [CheckedContinuation<PageRequest<Cursor>, Never>] = []
    var taken = 0
    var cancellations = 0
  }

  private let state = Locked(State())

  /// Every request made, in order.
  var requests: [PageRequest<Cursor>] { state.value.requests }
  /// How many calls were made.
  var calls: Int { state.value.requests.count }
  /// How many calls were cancelled while they waited.
  var cancellations: Int { state.value.cancellations }
  /// How many calls wait for a response.
  var waiting: Int { state.value.waiting.count }
  /// The requests of the calls that wait, oldest first.
  var waitingRequests: [PageRequest<Cursor>] { state.value.waiting.map(\.request) }

  /// The loader to give the list.
  var load: @Sendable (PageRequest<Cursor>) async throws -> Page<T, Cursor> {
    { request in try await self.call(request) }
  }

  private func call(_ request: PageRequest<Cursor>) async throws -> Page<T, Cursor> {
    let id = UUID()
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { continuation in
        let watcher = state.withValue {
          state -> CheckedContinuation<PageRequest<Cursor>, Never>? in
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
        guard let index = state.waiting.firstIndex(where: { $0.id == id }) else { return nil }
        state.cancellations += 1
        return state.waiting.remove(at: index)
      }
      cancelled?.continuation.resume(throwing: CancellationError())
    }
  }

  /// Waits for the next call not yet taken by an earlier `nextCall()`, and returns its request.
  func nextCall() async -> PageRequest<Cursor> {
    await withCheckedContinuation { continuation in
      let ready = state.withValue { state -> PageRequest<Cursor>? in
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

  /// Answers the oldest waiting call, or the oldest whose request matches.
  func respond(
    _ page: Page<T, Cursor>, to matches: (PageRequest<Cursor>) -> Bool = { _ in true }
  ) {
    take(matches)?.continuation.resume(returning: page)
  }

  /// Fails the oldest waiting call (or the oldest whose request matches) with `error`.
  func fail(_ error: any Error, to matches: (PageRequest<Cursor>) -> Bool = { _ in true }) {
    take(matches)?.continuation.resume(throwing: error)
  }

  private func take(_ matches: (PageRequest<Cursor>) -> Bool) -> Call? {
    state.withValue { state in
      guard let index = state.waiting.firstIndex(where: { matches($0.request) }) else {
        return nil
      }
      return state.waiting.remove(at: index)
    }
  }
}

/// Records the states a paged list delivers, and lets a test await one.
final class PagedStateRecorder<T: Identifiable & Sendable, Cursor: Codable & Sendable>: Sendable {
  private let recorder: DeliveryRecorder<PagedState<T>>

  init(_ list: PagedResource<T, Cursor>, includingCurrentState: Bool = false) {
    recorder = DeliveryRecorder { list.observe(includingCurrentState: includingCurrentState, $0) }
  }

  /// Every state delivered, in order.
  var states: [PagedState<T>] { recorder.recorded }

  /// The first state recorded that matches, already recorded or still to come.
  func first(where matches: @escaping @Sendable (PagedState<T>) -> Bool) async -> PagedState<T> {
    await recorder.first(where: matches)
  }

  /// Stops recording.
  func cancel() { recorder.cancel() }
}
