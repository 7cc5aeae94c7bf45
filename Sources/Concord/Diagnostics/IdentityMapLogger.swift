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

  /// Whether the map also logs a ``IdentityMapEvent/Kind/changed`` event, carrying the values
  /// before and after, for each change a write commits. `false` unless the logger says
  /// otherwise: keeping the values costs a copy of each entity a write touches, kept until the
  /// logger has run, and sends every write through the change log. ``DiffLogger`` says `true`.
  ///
  /// The map reads it once, when it is created.
  var logsChangedValues: Bool { get }
}

extension IdentityMapLogger {
  /// `false`: the map does not log ``IdentityMapEvent/Kind/changed`` events.
  public var logsChangedValues: Bool { false }
}

/// Something an ``IdentityMap`` did.
///
/// An event has a ``kind`` and, depending on it, an ``entity``, an ``alias``, stamps, a
/// ``message`` or the values of a change. Make events with the static members, and compare them
/// with `==`, or read their fields:
///
/// ```swift
/// if event == .stored(EntityReference(Author.self, id: 1), modifiedAt: nil) { … }
/// switch event.kind {
/// case .discardedStale: print("stale write to", event.target!)
/// default: break
/// }
/// ```
///
/// NB: a struct over an internal kind rather than an enum, so that a later version can add
/// kinds of events without breaking an exhaustive `switch`: switch over ``kind`` with a
/// `default` case.
public struct IdentityMapEvent: Hashable, Sendable, CustomStringConvertible {
  /// What a stale write was aimed at: an entity or the slot of an alias. Make one with
  /// ``entity(_:)`` or ``alias(_:)``; compare it with `==`, or read ``entity`` and ``alias``.
  ///
  /// NB: a struct over an internal enum, as the event is, so that a later version can aim a
  /// stale write at something new without breaking an exhaustive `switch`.
  public struct Target: Hashable, Sendable, CustomStringConvertible {
    private enum Storage: Hashable, Sendable {
      case entity(EntityReference)
      case alias(String)
    }

    private let storage: Storage

    private init(_ storage: Storage) { self.storage = storage }

    /// An entity.
    public static func entity(_ reference: EntityReference) -> Self { Self(.entity(reference)) }

    /// The slot of an alias, by name.
    public static func alias(_ name: String) -> Self { Self(.alias(name)) }

    /// The entity aimed at; `nil` for an alias.
    public var entity: EntityReference? {
      if case .entity(let reference) = storage { reference } else { nil }
    }

    /// The name of the alias aimed at; `nil` for an entity.
    public var alias: String? {
      if case .alias(let name) = storage { name } else { nil }
    }

    /// The entity reference or the alias name.
    public var description: String {
      switch storage {
      case .entity(let reference): reference.description
      case .alias(let name): "alias \"\(name)\""
      }
    }
  }

  /// What kind of thing happened. Switch over it with a `default` case: later versions may add
  /// kinds.
  public struct Kind: Hashable, Sendable, CustomStringConvertible {
    private let name: String
    private init(_ name: String) { self.name = name }

    /// An entity was written, on its own or nested in an aggregate, batch or alias.
    public static let stored = Kind("stored")
    /// A stamped write was refused because the stored stamp is as new or newer.
    public static let discardedStale = Kind("discardedStale")
    /// An entity was removed by `remove`, `removeAll`, `reset`, a removal cascade, or the
    /// rollback of an optimistic layer that alone created it.
    public static let removed = Kind("removed")
    /// An entity nobody held any more left the map.
    public static let released = Kind("released")
    /// An alias was set or replaced.
    public static let aliasSet = Kind("aliasSet")
    /// An alias was removed.
    public static let aliasRemoved = Kind("aliasRemoved")
    /// The map's ``PersistentStore`` failed to read or write.
    public static let persistenceFailed = Kind("persistenceFailed")
    /// A record in the store no longer decodes as its type.
    public static let undecodableRecord = Kind("undecodableRecord")
    /// A write committed a change to an entity: logged, with the values before and after, only
    /// to a logger whose ``IdentityMapLogger/logsChangedValues`` is `true`.
    public static let changed = Kind("changed")
    /// A write of a persisted entity or alias stayed in memory: the map's store never writes
    /// (a store opened read-only, in an extension). See ``IdentityMapEvent/notPersisted(_:)``.
    public static let notPersisted = Kind("notPersisted")

    /// The kind's name, such as `stored`.
    public var description: String { name }
  }

  private enum Storage: Hashable, Sendable {
    case stored(EntityReference, modifiedAt: Stamp?)
    case discardedStale(Target, storedStamp: Stamp, incomingStamp: Stamp)
    case removed(EntityReference)
    case released(EntityReference)
    case aliasSet(String)
    case aliasRemoved(String)
    case persistenceFailed(String)
    case entityPersistenceFailed(EntityReference, String)
    case undecodableRecord(EntityReference, String)
    case changed(EntityReference, _ChangedValues)
    case notPersisted(Target)
  }

  private let storage: Storage

  private init(_ storage: Storage) { self.storage = storage }

  // MARK: Making events

  /// An entity was written, on its own or nested in an aggregate, batch or alias, with the
  /// stamp the write carried, if any.
  public static func stored(_ entity: EntityReference, modifiedAt stamp: Stamp?) -> Self {
    Self(.stored(entity, modifiedAt: stamp))
  }

  /// A stamped write was refused because the stored stamp is as new or newer. A NaN incoming
  /// stamp is refused by any stored stamp. NB: NaN is not equal to itself, so compare such
  /// events with `isNaN` rather than `==`.
  public static func discardedStale(
    _ target: Target, storedStamp: Stamp, incomingStamp: Stamp
  ) -> Self {
    Self(.discardedStale(target, storedStamp: storedStamp, incomingStamp: incomingStamp))
  }

  /// An entity was removed by `remove`, `removeAll`, `reset`, a removal cascade, or the
  /// rollback of an optimistic layer that alone created it.
  public static func removed(_ entity: EntityReference) -> Self { Self(.removed(entity)) }

  /// An entity nobody held any more left the map.
  public static func released(_ entity: EntityReference) -> Self { Self(.released(entity)) }

  /// The alias `name` was set or replaced.
  public static func aliasSet(_ name: String) -> Self { Self(.aliasSet(name)) }

  /// The alias `name` was removed.
  public static func aliasRemoved(_ name: String) -> Self { Self(.aliasRemoved(name)) }

  /// The map's ``PersistentStore`` failed to read or write; `message` says what and why. A
  /// failed write loses nothing: it is tried again at the next `flush()`, which throws the
  /// error. Logged from the persistence writer's thread for writes.
  public static func persistenceFailed(_ message: String) -> Self {
    Self(.persistenceFailed(message))
  }

  /// The map's ``PersistentStore`` failed to read `entity`; `message` says why. A failed read
  /// is not an absent entity: until the write under way ends, every write of the entity is
  /// refused (and so is the write of an aggregate nesting it), so that nothing replaces a
  /// record newer than the write; the next write reads it again. A `find` of it returns `nil`.
  public static func persistenceFailed(_ message: String, entity: EntityReference) -> Self {
    Self(.entityPersistenceFailed(entity, message))
  }

  /// A record in the store no longer decodes as its type (the model changed): it reads as a
  /// removed entity whose stamp, if the record has one, is its tombstone, so a write stamped
  /// no newer is refused and a newer (or unstamped) one replaces the record. `message` is the
  /// decoding error.
  public static func undecodableRecord(_ entity: EntityReference, _ message: String) -> Self {
    Self(.undecodableRecord(entity, message))
  }

  /// A write committed a change to `entity`: `before` is its value before the write (or the
  /// transaction), `nil` for an insertion; `after` its value at commit, `nil` for a removal.
  ///
  /// Two such events are equal when they name the same entity and their values are of the same
  /// type and equal: by `==` for `Equatable` values, by their `String(reflecting:)` text
  /// otherwise (for a class that is not `Equatable`, its type's name: compare such values
  /// yourself). As with `==`, a value holding NaN is not equal to itself.
  public static func changed(
    _ entity: EntityReference, before: (any Sendable)?, after: (any Sendable)?
  ) -> Self {
    Self(.changed(entity, _ChangedValues(before: before, after: after)))
  }

  /// A write of `target`, an entity of a persisted type or an alias naming them, stayed in
  /// memory: the store never writes (see ``PersistentStore/writeRefusal``). The write is kept
  /// as a write of a type that is not persisted would be (released when nobody holds it), and
  /// the next ``IdentityMap/flush()`` throws the store's error.
  public static func notPersisted(_ target: Target) -> Self {
    Self(.notPersisted(target))
  }

  // MARK: Reading events

  /// What kind of thing happened.
  public var kind: Kind {
    switch storage {
    case .stored: .stored
    case .discardedStale: .discardedStale
    case .removed: .removed
    case .released: .released
    case .aliasSet: .aliasSet
    case .aliasRemoved: .aliasRemoved
    case .persistenceFailed, .entityPersistenceFailed: .persistenceFailed
    case .undecodableRecord: .undecodableRecord
    case .changed: .changed
    case .notPersisted: .notPersisted
    }
  }

  /// The entity the event is about, if it is about one: every kind but alias events and
  /// persistence failures that name no entity (and stale writes to an alias).
  public var entity: EntityReference? {
    switch storage {
    case .stored(let entity, _), .removed(let entity), .released(let entity),
      .undecodableRecord(let entity, _), .entityPersistenceFailed(let entity, _),
      .changed(let entity, _):
      entity
    case .discardedStale(let target, _, _), .notPersisted(let target): target.entity
    default: nil
    }
  }

  /// The name of the alias the event is about: set, removed, or aimed at by a stale write.
  public var alias: String? {
    switch storage {
    case .aliasSet(let name), .aliasRemoved(let name): name
    case .discardedStale(let target, _, _), .notPersisted(let target): target.alias
    default: nil
    }
  }

  /// The stamp a ``Kind/stored`` write carried, if any.
  public var modifiedAt: Stamp? {
    if case .stored(_, let stamp) = storage { stamp } else { nil }
  }

  /// What a ``Kind/discardedStale`` or ``Kind/notPersisted`` write was aimed at.
  public var target: Target? {
    switch storage {
    case .discardedStale(let target, _, _), .notPersisted(let target): target
    default: nil
    }
  }

  /// The stamp stored when a ``Kind/discardedStale`` write was refused.
  public var storedStamp: Stamp? {
    if case .discardedStale(_, let stamp, _) = storage { stamp } else { nil }
  }

  /// The stamp of a refused ``Kind/discardedStale`` write (NaN when it carried none).
  public var incomingStamp: Stamp? {
    if case .discardedStale(_, _, let stamp) = storage { stamp } else { nil }
  }

  /// The text of a ``Kind/persistenceFailed`` or ``Kind/undecodableRecord`` event.
  public var message: String? {
    switch storage {
    case .persistenceFailed(let text), .entityPersistenceFailed(_, let text),
      .undecodableRecord(_, let text):
      text
    default: nil
    }
  }

  /// For a ``Kind/changed`` event, the entity's value before the write; `nil` for an insertion
  /// and for other kinds.
  public var valueBefore: (any Sendable)? {
    if case .changed(_, let values) = storage { values.before } else { nil }
  }

  /// For a ``Kind/changed`` event, the entity's value at commit; `nil` for a removal and for
  /// other kinds.
  public var valueAfter: (any Sendable)? {
    if case .changed(_, let values) = storage { values.after } else { nil }
  }

  /// One line describing the event.
  public var description: String {
    switch storage {
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
    case .persistenceFailed(let text), .entityPersistenceFailed(_, let text):
      "persistence failed: \(text)"
    case .undecodableRecord(let reference, let error):
      "skipped the stored \(reference), which no longer decodes: \(error)"
    case .changed(let reference, let values):
      switch (values.before, values.after) {
      case (nil, _?): "inserted \(reference)"
      case (_?, nil): "removed \(reference)"
      default: "changed \(reference)"
      }
    case .notPersisted(let target):
      "kept the write to \(target) in memory only: the store does not take writes"
    }
  }
}

/// The values of a `changed` event, compared as ``IdentityMapEvent/changed(_:before:after:)``
/// says.
struct _ChangedValues: Hashable, Sendable {
  let before: (any Sendable)?
  let after: (any Sendable)?

  static func == (lhs: Self, rhs: Self) -> Bool {
    _same(lhs.before, rhs.before) && _same(lhs.after, rhs.after)
  }

  /// NB: hashes nothing: equal values of unrelated representations (an `Equatable` class and
  /// its text) cannot be hashed alike; the event's entity tells events apart.
  func hash(into _: inout Hasher) {}
}

/// Whether two optional values are equal: never when their types differ, by `==` when they are
/// `Equatable`, by their `String(reflecting:)` text otherwise.
func _same(_ lhs: Any?, _ rhs: Any?) -> Bool {
  switch (lhs, rhs) {
  case (nil, nil): return true
  case (let lhs?, let rhs?):
    guard type(of: lhs) == type(of: rhs) else { return false }
    if let lhs = lhs as? any Equatable, let equal = lhs._isEqual(to: rhs) { return equal }
    return String(reflecting: lhs) == String(reflecting: rhs)
  default: return false
  }
}

extension Equatable {
  /// `==` with `other` when it is of the same type; `nil` when it is not.
  func _isEqual(to other: Any) -> Bool? {
    guard let other = other as? Self else { return nil }
    return self == other
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
