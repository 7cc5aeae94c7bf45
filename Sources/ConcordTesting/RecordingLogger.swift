import Concord

/// A logger that keeps every event a map logs, for assertions in tests.
///
/// ```swift
/// let logger = RecordingLogger()
/// let map = IdentityMap(logger: logger)
/// // ... code under test ...
/// #expect(logger.staleWrites.count == 1)
/// #expect(logger.events.contains(.removed(EntityReference(Book.self, id: "dune"))))
/// ```
///
/// The map logs on the writing thread after its lock is released, before the write returns, so
/// a write's events are recorded by the time it returns.
public final class RecordingLogger: IdentityMapLogger, @unchecked Sendable {
  // NB: @unchecked because `recorded` is only touched while holding `lock`.
  private let lock = Lock()
  private var recorded: [IdentityMapEvent] = []

  /// Creates an empty logger.
  public init() {}

  /// Every event logged, oldest first.
  public var events: [IdentityMapEvent] {
    lock.withLock { recorded }
  }

  /// The stale writes the map refused, oldest first: what they targeted, the stamp the map had,
  /// and the stamp the write came with.
  public var staleWrites: [(target: IdentityMapEvent.Target, stored: Stamp, incoming: Stamp)] {
    events.compactMap { event in
      guard let target = event.target, let stored = event.storedStamp,
        let incoming = event.incomingStamp
      else { return nil }
      return (target, stored, incoming)
    }
  }

  /// The events about one entity (those whose `IdentityMapEvent.entity` it is), oldest
  /// first.
  public func events<T: Identifiable>(about type: T.Type, id: T.ID) -> [IdentityMapEvent] {
    let reference = EntityReference(type, id: id)
    return events.filter { $0.entity == reference }
  }

  /// Forgets every event recorded so far.
  public func clear() {
    lock.withLock { recorded.removeAll() }
  }

  /// Records the event.
  public func log(_ event: IdentityMapEvent) {
    lock.withLock { recorded.append(event) }
  }
}
