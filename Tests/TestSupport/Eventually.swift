import Foundation
import Testing

/// Yields until `condition` holds: for effects that happen in other tasks, with no sleep.
///
/// A condition that still does not hold after `limit` of waiting is recorded as a failed
/// expectation and the wait ends, so that a lost wake-up fails the test rather than hanging
/// the run. The limit is a guard against a hang, never a claim about speed: it is generous
/// enough for the slowest instrumented build.
public func eventually(
  _ condition: () -> Bool, limit: Duration = .seconds(60),
  sourceLocation: SourceLocation = #_sourceLocation
) async {
  let clock = ContinuousClock()
  let deadline = clock.now.advanced(by: limit)
  while !condition() {
    guard clock.now < deadline else {
      Issue.record("the condition never held", sourceLocation: sourceLocation)
      return
    }
    await Task.yield()
  }
}
