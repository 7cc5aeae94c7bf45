/// A remote resource: an answer the map fetches once however many callers ask, keeps
/// normalized, knows the age of, and refreshes by its ``FetchPolicy``.
///
/// Get one with `IdentityMap.resource(_:policy:staleAfter:keepFor:retry:load:)`; calls with the
/// same key share it. The answer is stored in the map, so every entity in it is the map's one
/// current value: an entity written anywhere (a websocket event, another screen's fetch)
/// changes ``state``'s value and tells this resource's observers, once.
///
/// ```swift
/// let issues = map.resource(ResourceKey<[Issue]>("repos/apple/swift/issues"), staleAfter: .seconds(60)) {
///   try await api.issues(of: "apple/swift")
/// }
/// let subscription = issues.observe { state in render(state) }
/// let current = try await issues.load()   // fetched once, then cached for a minute
/// ```
///
/// While any `Resource` handle on it lives, or any observation, the resource and its answer
/// stay; once none is left, its answer is kept for `keepFor`, then let go.
public final class Resource<Value: Sendable>: Sendable {
  let _core: _ResourceCore<Value>

  /// A handle on `core`, whose hold on it was taken for this handle.
  init(_ core: _ResourceCore<Value>) {
    _core = core
  }

  deinit {
    _core.releaseHandle()
  }

  /// The resource's key.
  public var key: ResourceKey<Value> { _core.key }

  /// What the resource knows now: its answer as the map has it, its age, whether a fetch is
  /// in flight or failed.
  public var state: ResourceState<Value> { _core.state }

  /// The answer, by the resource's policy (see ``FetchPolicy``).
  ///
  /// Every call that needs a fetch while one is in flight joins it: the loader runs once, and
  /// every caller that joined gets its answer or its error. The answer returned is the map's
  /// after the write (``state``'s value), so an entity whose stamp was refused shows the newer
  /// value the map has.
  ///
  /// A cancelled caller gets `CancellationError` at once; the fetch goes on while another
  /// caller waits for it or anything observes the resource, and is cancelled otherwise.
  ///
  /// - Throws: The fetch's last error after its retries (the cached answer stays);
  ///   ``ResourceError/notCached`` under ``FetchPolicy/cacheOnly`` with nothing cached;
  ///   `CancellationError`.
  @discardableResult
  public func load() async throws -> Value {
    try await _core.demand(.load)
  }

  /// Fetches whatever the answer's age and the policy (``FetchPolicy/cacheOnly`` included),
  /// joining a fetch in flight, and returns the answer.
  ///
  /// - Throws: As ``load()`` does.
  @discardableResult
  public func refresh() async throws -> Value {
    try await _core.demand(.refresh)
  }

  /// Makes the answer stale, so that the next ``load()`` fetches; nothing is fetched now.
  /// Observers are told, if it was fresh. A fetch already in flight lands stale: its answer
  /// may predate what made you invalidate.
  public func invalidate() {
    _core.invalidate()
  }

  /// Calls `onChange` with each change of state after this call: a new or changed answer
  /// (a change to any entity in it, written by anyone, included), a fetch starting or ending,
  /// an error, the answer turning stale (with time too: the map sleeps on its clock until
  /// then).
  ///
  /// Callbacks run as entity observers' do: after the write that caused them commits, outside
  /// every lock, one at a time, never an older state after a newer one, and once per change
  /// (a fetch that stores its answer is one change).
  ///
  /// The subscription keeps the resource, and its answer, while it lives; and a fetch goes on
  /// while the resource is observed, even when every caller that waited for it is cancelled.
  ///
  /// - Returns: A subscription. Keep it: releasing it cancels the observation.
  public func observe(_ onChange: @escaping @Sendable (ResourceState<Value>) -> Void)
    -> Subscription
  {
    _core.observe(includingCurrentState: false, onChange)
  }

  /// Calls `onChange` with the current state at once, then as ``observe(_:)`` does.
  public func observe(
    includingCurrentState: Bool, _ onChange: @escaping @Sendable (ResourceState<Value>) -> Void
  ) -> Subscription {
    _core.observe(includingCurrentState: includingCurrentState, onChange)
  }

  /// The current state, then each change; keeps the newest when the reader lags.
  ///
  /// The stream observes the resource from when you read this property until it is dropped
  /// or its iteration ends, so read it where you iterate it.
  public var states: AsyncStream<ResourceState<Value>> {
    let (stream, continuation) = AsyncStream.makeStream(
      of: ResourceState<Value>.self, bufferingPolicy: .bufferingNewest(1))
    let subscription = _core.observe(includingCurrentState: true) { continuation.yield($0) }
    continuation.onTermination = { _ in subscription.cancel() }
    return stream
  }
}
