/// What a full loader hands back: a new answer, or word that the cached one still holds.
///
/// ```swift
/// let issues = map.resource(.issues(of: "apple/swift")) { request in
///   let (data, response) = try await api.get("repos/apple/swift/issues", ifNoneMatch: request.validator)
///   if response.statusCode == 304 { return .notModified }
///   return .value(try decoder.decode([Issue].self, from: data), validator: response.etag)
/// }
/// ```
///
/// A loader that only ever has a value can be plain (`load: () async throws -> Value`), which
/// is `.value(try await load())`.
public struct Fetched<Value: Sendable>: Sendable {
  // NB: fields, not an enum whose case carries the three: the landing runs unspecialized, and
  // projecting such a case's payload looks up the metadata of a tuple of `Value`, under a lock
  // of the runtime, at every fetch.
  /// The new answer; `nil` for `.notModified`.
  @usableFromInline let _value: Value?
  @usableFromInline let _modifiedAt: Stamp?
  @usableFromInline let _validator: String?

  @inlinable
  init(value: Value?, modifiedAt: Stamp?, validator: String?) {
    _value = value
    _modifiedAt = modifiedAt
    _validator = validator
  }

  /// A new answer, stored as `store(value, modifiedAt:)` would store it: stamps, merges and
  /// tombstones apply to each entity, and the answer then shows what the map has.
  ///
  /// - Parameters:
  ///   - value: The answer.
  ///   - modifiedAt: The stamp of each entity that carries none of its own; see ``Stamp``.
  ///   - validator: The server's `ETag` (or `Last-Modified`), handed back to the next request
  ///     as ``ResourceRequest/validator``; `nil` forgets the previous one.
  public static func value(_ value: Value, modifiedAt: Stamp? = nil, validator: String? = nil)
    -> Fetched
  {
    Fetched(value: value, modifiedAt: modifiedAt, validator: validator)
  }

  /// The cached answer still holds (HTTP 304): nothing is written, nobody is told of a value
  /// change, the validator stays, and the answer's age starts again from now.
  ///
  /// With nothing cached, the fetch fails with ``ResourceError/notModifiedWithoutAnswer``.
  public static var notModified: Fetched { Fetched(value: nil, modifiedAt: nil, validator: nil) }
}

/// What one try of a loader is asked.
public struct ResourceRequest: Sendable, Hashable {
  /// The cached answer's validator, to send as `If-None-Match` (or `If-Modified-Since`);
  /// `nil` when nothing is cached or the server gave none.
  public var validator: String?
  /// Which try this is: 1 for the first, 2 for the first retry, and so on.
  public var attempt: Int

  /// A request, as the map makes them; for testing a loader on its own.
  public init(validator: String? = nil, attempt: Int = 1) {
    self.validator = validator
    self.attempt = attempt
  }
}
