import Foundation

/// What a resource knows now: its answer as the map has it, how old it is, and whether a fetch
/// is under way or failed.
///
/// ```swift
/// switch (state.value, state.error) {
/// case (let issues?, _): show(issues, refreshing: state.isLoading)
/// case (nil, let error?): showError(error)
/// case (nil, nil): showSpinner()
/// }
/// ```
public struct ResourceState<Value: Sendable>: Sendable {
  /// The answer as the map has it now: each entity in it current, wherever it was written
  /// since. `nil` before the first answer, and once a single entity answer is removed.
  public var value: Value?
  /// When the answer was fetched, or last confirmed by a `.notModified`; `nil` before the first.
  public var fetchedAt: Date?
  /// Whether the answer is stale: none, as old as `staleAfter` or older, or invalidated.
  public var isStale: Bool
  /// Whether a fetch is in flight (retries and their waits included).
  public var isLoading: Bool
  /// The last fetch's error, after its retries; `nil` after a success.
  public var error: (any Error)?

  /// A state; resources make them, and tests of code that reads them may too.
  public init(
    value: Value? = nil, fetchedAt: Date? = nil, isStale: Bool = true, isLoading: Bool = false,
    error: (any Error)? = nil
  ) {
    self.value = value
    self.fetchedAt = fetchedAt
    self.isStale = isStale
    self.isLoading = isLoading
    self.error = error
  }
}

extension ResourceState: CustomStringConvertible {
  /// The state in one line, for logs and test failures.
  public var description: String {
    var parts: [String] = [value.map { "value: \($0)" } ?? "no value"]
    if let fetchedAt { parts.append("fetched at \(fetchedAt.timeIntervalSince1970)") }
    if isStale { parts.append("stale") }
    if isLoading { parts.append("loading") }
    if let error { parts.append("error: \(error)") }
    return "ResourceState(" + parts.joined(separator: ", ") + ")"
  }
}
