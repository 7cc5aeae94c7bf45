/// What happened to an entity.
///
/// ```swift
/// for change in collector.drain() {
///   switch change {
///   case .inserted(let issue), .updated(let issue): cache.write(issue)
///   case .removed(let issue): cache.delete(issue.id)
///   }
/// }
/// ```
///
/// NB: a closed enum, unlike ``IdentityMapEvent``: an entity can only come, change or go, so an
/// exhaustive `switch` that binds the value is what its readers should write, and the public
/// contract names it an enum.
public enum EntityChange<Value: Sendable>: Sendable {
  /// Stored where none was.
  case inserted(Value)
  /// A stored value changed.
  case updated(Value)
  /// Taken out by `remove`, a removal cascade or `removeAll`; carries the last value. (A
  /// rolled-back transaction reports nothing: what it created never committed.)
  case removed(Value)

  /// The value the change carries: the new one, or the last one for a removal.
  public var value: Value {
    switch self {
    case .inserted(let value), .updated(let value), .removed(let value): value
    }
  }
}

extension EntityChange: Equatable where Value: Equatable {}
