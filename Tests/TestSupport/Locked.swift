import Foundation

/// A value shared with `@Sendable` callbacks, guarded by a lock.
public final class Locked<Value>: @unchecked Sendable {
  // NB: @unchecked because `stored` is only touched while holding `lock`.
  private let lock = NSLock()
  private var stored: Value

  public init(_ value: Value) {
    stored = value
  }

  public var value: Value {
    lock.lock()
    defer { lock.unlock() }
    return stored
  }

  @discardableResult
  public func withValue<R>(_ body: (inout Value) throws -> R) rethrows -> R {
    lock.lock()
    defer { lock.unlock() }
    return try body(&stored)
  }
}

extension Locked where Value: RangeReplaceableCollection {
  /// Appends one element.
  public func append(_ element: Value.Element) {
    withValue { $0.append(element) }
  }
}

extension Locked where Value == Int {
  /// Adds one and returns the new value.
  @discardableResult
  public func increment() -> Int {
    withValue {
      $0 += 1
      return $0
    }
  }
}

extension Locked {
  /// Empties a dictionary and returns its entries sorted by key: in an order two dictionaries
  /// with the same entries share.
  public func takeSorted<Key: Comparable, Entry>() -> [(key: Key, value: Entry)]
  where Value == [Key: Entry] {
    withValue { dictionary in
      defer { dictionary.removeAll() }
      return dictionary.sorted { $0.key < $1.key }
    }
  }
}

/// Whether `a` and `b` print the same. Differential tests compare so: an event holding a NaN
/// stamp is not `==` to itself.
public func printsTheSame<V>(_ a: V, _ b: V) -> Bool {
  String(describing: a) == String(describing: b)
}
