#if canImport(FoundationEssentials)
  import FoundationEssentials
#else
  import Foundation
#endif

/// The modification time of a write: higher is newer.
///
/// Pass a stamp as `modifiedAt:` to refuse stale writes, for instance the `updatedAt` of a REST
/// payload or the sequence number of a websocket event. The map remembers the newest stamp it
/// applied to each entity and discards a stamped write that is not strictly newer:
///
/// | incoming stamp | entity never stamped | entity stamped `s` |
/// |---|---|---|
/// | `nil` | applies | applies, `s` is kept |
/// | `t` (a number) | applies, `t` is recorded | applies and records `t` only if `t > s` |
/// | `.nan` | applies, nothing is recorded | discarded (and logged) |
///
/// Infinities are ordinary numbers here: `-.infinity` is older than every finite stamp, and once
/// `+.infinity` is recorded every later stamped write to that entity is discarded.
public typealias Stamp = Double

extension Date {
  /// This date as a ``Stamp``: seconds since 1970.
  ///
  /// ```swift
  /// map.store(author, modifiedAt: Date().stamp)
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
