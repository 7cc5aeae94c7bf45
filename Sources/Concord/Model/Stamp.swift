#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// The modification time of a write: higher is newer.
///
/// Stamps refuse stale writes: the map remembers the newest stamp it applied to each entity and
/// discards a stamped write that is not strictly newer. Take them from the server, not from the
/// time a response arrived: two responses can arrive in the opposite order from the one in
/// which the server produced them, and only the server's clock orders them. The best source is
/// each entity's own `updated_at`: make the type ``Stamped`` and every path that writes it,
/// nested and batch writes included, compares its own stamp. For an event stream without
/// timestamps, pass its sequence number as `modifiedAt:`.
///
/// | incoming stamp | entity never stamped | entity stamped `s` |
/// |---|---|---|
/// | `nil` | applies | applies, `s` is kept |
/// | `t` (a number) | applies, `t` is recorded | applies and records `t` only if `t > s` |
/// | `.nan` | applies, nothing is recorded | discarded (and logged) |
///
/// A write stamped older than `s` (or NaN) is discarded and logged whatever its value, before
/// any ``Mergeable/merge(_:into:)``. A write stamped exactly `s` is the one compared with the
/// stored value (merged into it first, for a ``Mergeable`` type): `==` to it, it is a quiet
/// no-op (a refetch of unchanged data); otherwise it is discarded and logged, unless its type
/// accepts equal stamps (``Stamped/acceptsEqualStamps``).
///
/// Infinities are ordinary numbers here: `-.infinity` is older than every finite stamp, and once
/// `+.infinity` is recorded every later stamped write to that entity is discarded.
public typealias Stamp = Double

extension Date {
  /// This date as a ``Stamp``: seconds since 1970.
  ///
  /// An instance property: `issue.updatedAt.stamp`, or `Date().stamp` for now.
  ///
  /// ```swift
  /// struct Issue: Stamped, Identifiable, Sendable {
  ///   var id: Int
  ///   var updatedAt: Date
  ///   var stamp: Stamp? { updatedAt.stamp }
  /// }
  /// ```
  public var stamp: Stamp { timeIntervalSince1970 }
}

extension Stamp {
  /// Whether a write stamped `incoming` may replace a value whose recorded stamp is `self`.
  ///
  /// `self` is NaN when nothing was ever recorded. See ``Stamp`` for the table.
  @inlinable
  func _admits(_ incoming: Stamp?) -> Bool {
    guard let incoming, !isNaN else { return true }
    // NB: `incoming > self` is false for a NaN incoming stamp: NaN is older than any stamp.
    return incoming > self
  }
}

extension Stamp {
  /// Whether the two are the same stamp, NaN (no stamp) included.
  @inlinable
  func _isSame(as other: Stamp) -> Bool {
    self == other || (isNaN && other.isNaN)
  }
}
