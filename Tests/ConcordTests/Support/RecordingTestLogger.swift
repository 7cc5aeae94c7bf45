import Concord

/// Collects the events a map logs.
final class RecordingTestLogger: IdentityMapLogger {
  private let recorded = Locked<[IdentityMapEvent]>([])

  var events: [IdentityMapEvent] { recorded.value }

  func log(_ event: IdentityMapEvent) {
    recorded.append(event)
  }

  func clear() {
    recorded.withValue { $0.removeAll() }
  }
}
