/// Receives what an ``IdentityMap`` does, for debugging and tests.
///
/// The map calls the logger on the writing thread, after its lock is released and before the
/// write's callbacks run, in the order things happened. A logger may call the map.
///
/// ```swift
/// let map = IdentityMap(logger: PrintLogger())
/// ```
public protocol IdentityMapLogger: Sendable {
  /// Called once per event.
  func log(_ event: IdentityMapEvent)
}

/// Something an ``IdentityMap`` did.
///
/// Switch over events with a `default` case: later versions may add events.
public enum IdentityMapEvent: Hashable, Sendable, CustomStringConvertible {
  /// What a stale write was aimed at.
  public enum Target: Hashable, Sendable, CustomStringConvertible {
    /// An entity.
    case entity(EntityReference)
    /// The slot of an alias, by name.
    case alias(String)

    /// The entity reference or the alias name.
    public var description: String {
      switch self {
      case .entity(let reference): reference.description
      case .alias(let name): "alias \"\(name)\""
      }
    }
  }

  /// An entity was written, on its own or nested in an aggregate, batch or alias.
  case stored(EntityReference, modifiedAt: Stamp?)
  /// A stamped write was refused because the stored stamp is as new or newer. A NaN incoming
  /// stamp is refused by any stored stamp. NB: NaN is not equal to itself, so compare such
  /// events with `isNaN` rather than `==`.
  case discardedStale(Target, storedStamp: Stamp, incomingStamp: Stamp)
  /// An entity was removed by `remove`, `removeAll`, or a removal cascade.
  case removed(EntityReference)
  /// An entity nobody held any more left the map.
  case released(EntityReference)
  /// An alias was set or replaced.
  case aliasSet(String)
  /// An alias was removed.
  case aliasRemoved(String)
  /// The map's ``PersistentStore`` failed to read or write; the text says what and why. A
  /// failed write loses nothing: it is tried again at the next `flush()`, which throws the
  /// error. Logged from the persistence writer's thread for writes.
  case persistenceFailed(String)
  /// A record in the store no longer decodes as its type (the model changed): it was skipped,
  /// as if the store did not have it. The text is the decoding error.
  case undecodableRecord(EntityReference, String)

  /// One line describing the event.
  public var description: String {
    switch self {
    case .stored(let reference, let stamp):
      "stored \(reference)" + (stamp.map { " modifiedAt \($0._text)" } ?? "")
    case .discardedStale(let target, let stored, let incoming):
      "discarded stale write to \(target): incoming stamp \(incoming._text) is not newer than \(stored._text)"
    case .removed(let reference):
      "removed \(reference)"
    case .released(let reference):
      "released \(reference)"
    case .aliasSet(let name):
      "set alias \"\(name)\""
    case .aliasRemoved(let name):
      "removed alias \"\(name)\""
    case .persistenceFailed(let text):
      "persistence failed: \(text)"
    case .undecodableRecord(let reference, let error):
      "skipped the stored \(reference), which no longer decodes: \(error)"
    }
  }
}

/// Names one entity in log events: its type and its id, as text.
public struct EntityReference: Hashable, Sendable, CustomStringConvertible {
  /// The entity type's name, such as `Author`.
  public let typeName: String
  /// The id, as `String(describing:)` renders it.
  public let id: String

  /// A reference to the entity of type `type` with id `id`.
  public init<T: Identifiable>(_ type: T.Type, id: T.ID) {
    typeName = String(describing: type)
    self.id = String(describing: id)
  }

  /// `Type(id)`, such as `Author(42)`.
  public var description: String { "\(typeName)(\(id))" }
}

/// A logger that prints each event on its own line.
///
/// ```swift
/// let map = IdentityMap(logger: PrintLogger())
/// // [Concord] stored Author(1) modifiedAt 1700000000.0
/// ```
public struct PrintLogger: IdentityMapLogger {
  /// Printed before each event.
  public let prefix: String
  private let output: @Sendable (String) -> Void

  /// Creates a logger writing `prefix`, a space and the event to `output`, which prints by
  /// default.
  public init(
    prefix: String = "[Concord]", output: @escaping @Sendable (String) -> Void = { print($0) }
  ) {
    self.prefix = prefix
    self.output = output
  }

  /// Writes one line for the event.
  public func log(_ event: IdentityMapEvent) {
    output("\(prefix) \(event)")
  }
}

extension Stamp {
  /// The stamp as log text: `105` rather than `105.0` when it is a whole number.
  var _text: String {
    guard isFinite, rounded() == self, abs(self) < 1e15 else { return "\(self)" }
    return String(Int64(self))
  }
}
