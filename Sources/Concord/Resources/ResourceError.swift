/// An error of a resource itself, as opposed to its loader's.
public struct ResourceError: Error, Sendable, Equatable, CustomStringConvertible {
  @usableFromInline
  enum _Kind: UInt8, Sendable {
    case notCached, notModifiedWithoutAnswer, answerRemoved
  }

  @usableFromInline let _kind: _Kind

  @inlinable
  init(_ kind: _Kind) {
    _kind = kind
  }

  /// `load()` under ``FetchPolicy/cacheOnly`` found no answer.
  public static var notCached: ResourceError { ResourceError(.notCached) }

  /// The loader answered `.notModified` with nothing cached. Not retried.
  public static var notModifiedWithoutAnswer: ResourceError {
    ResourceError(.notModifiedWithoutAnswer)
  }

  /// A fetch of a single entity stored it, but the map does not have it: a tombstone refused
  /// it, or it was removed before the caller could be given it. The answer is then `nil`, and
  /// stale.
  public static var answerRemoved: ResourceError { ResourceError(.answerRemoved) }

  /// What went wrong, in a sentence.
  public var description: String {
    switch _kind {
    case .notCached: "the resource has no cached answer (cacheOnly)"
    case .notModifiedWithoutAnswer: "the loader answered notModified, but nothing is cached"
    case .answerRemoved: "the answer was removed from the map (or refused by a tombstone)"
    }
  }
}
