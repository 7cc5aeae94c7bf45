/// When a resource's `load()` fetches, and whether it waits for the fetch.
///
/// ```swift
/// // The timeline: whatever is cached at once, and always a fetch behind it.
/// let timeline = map.resource(.home, policy: .cacheThenNetwork) { try await api.home() }
/// ```
///
/// `refresh()` fetches whatever the policy, and `revalidate()` follows it (skipping
/// ``cacheOnly``).
public struct FetchPolicy: Hashable, Sendable, CustomStringConvertible {
  @usableFromInline
  enum _Kind: UInt8, Sendable {
    case cacheFirst, cacheThenNetwork, networkOnly, cacheOnly
  }

  @usableFromInline let _kind: _Kind

  @inlinable
  init(_ kind: _Kind) {
    _kind = kind
  }

  /// A fresh cached answer is returned and nothing is fetched. A stale one is returned at once
  /// and a fetch refreshes it in the background (stale-while-revalidate). With none, `load()`
  /// waits for a fetch. The default.
  public static var cacheFirst: FetchPolicy { FetchPolicy(.cacheFirst) }

  /// Any cached answer, fresh or stale, is returned at once, and a fetch always follows in the
  /// background. With none, `load()` waits for a fetch.
  public static var cacheThenNetwork: FetchPolicy { FetchPolicy(.cacheThenNetwork) }

  /// `load()` always waits for a fetch.
  public static var networkOnly: FetchPolicy { FetchPolicy(.networkOnly) }

  /// `load()` never fetches: it returns the cached answer, fresh or stale, and throws
  /// ``ResourceError/notCached`` when there is none. For offline screens.
  public static var cacheOnly: FetchPolicy { FetchPolicy(.cacheOnly) }

  /// The policy's name, such as `cacheFirst`.
  public var description: String {
    switch _kind {
    case .cacheFirst: "cacheFirst"
    case .cacheThenNetwork: "cacheThenNetwork"
    case .networkOnly: "networkOnly"
    case .cacheOnly: "cacheOnly"
    }
  }
}
