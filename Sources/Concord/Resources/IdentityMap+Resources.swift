extension IdentityMap {
  // MARK: Resources

  /// The resource named `key`, whose answer is one entity (or aggregate), made on first use.
  ///
  /// ```swift
  /// let me = map.resource(ResourceKey<User>("me"), staleAfter: .seconds(300)) { request in
  ///   let response = try await api.get("/user", ifNoneMatch: request.validator)
  ///   return response.status == 304 ? .notModified : .value(response.user, validator: response.etag)
  /// }
  /// let user = try await me.load()
  /// ```
  ///
  /// The settings and loader of the call that makes the resource are kept while it lives;
  /// later calls with the same key return it as it is. A key with the same name and another
  /// value type is another resource.
  ///
  /// - Parameters:
  ///   - key: The resource's name and value type.
  ///   - policy: When `load()` fetches; see ``FetchPolicy``.
  ///   - staleAfter: The age at which an answer is stale: `.zero` (the default) makes it stale
  ///     at once, as TanStack Query's default does, so that `cacheFirst` answers from the cache
  ///     and refreshes behind it. A negative duration counts as zero.
  ///   - keepFor: Once the resource has no observer and no live ``Resource`` handle, how long
  ///     its answer is kept; then it is let go (entities nobody else holds are released; a
  ///     persisted answer stays in the store, and the next call answers from it). A negative
  ///     duration counts as zero.
  ///   - retry: How every fetch retries; see ``RetryPolicy``.
  ///   - load: The loader: one try of the fetch. It runs outside every lock, in a task of its
  ///     own, cancelled when nobody waits for or observes the resource any more. A fetch that a
  ///     caller waits for starts on that caller's thread and runs there until the loader first
  ///     suspends (`Task.immediate`), so a loader that answers without suspending costs no
  ///     hand-off between threads.
  /// - Returns: A handle on the resource; it keeps the resource live while it exists.
  /// - Complexity: O(1) for a live resource; making one reads the store when `T` is persisted.
  @inlinable
  public func resource<T: Identifiable & Sendable>(
    _ key: ResourceKey<T>, policy: FetchPolicy = .cacheFirst, staleAfter: Duration = .zero,
    keepFor: Duration = .seconds(300), retry: RetryPolicy = .exponential(),
    load: @escaping @Sendable (ResourceRequest) async throws -> Fetched<T>
  ) -> Resource<T> {
    _resource(
      key, .single(T.self),
      _ResourceSettings(
        policy: policy, staleAfter: staleAfter._clampedToZero, keepFor: keepFor._clampedToZero),
      retry: retry, load: load)
  }

  /// The resource named `key`, whose answer is a list of entities (or aggregates), made on
  /// first use. See `resource(_:policy:staleAfter:keepFor:retry:load:)`.
  ///
  /// ```swift
  /// let timeline = map.resource(ResourceKey<[Status]>("timelines/home"), policy: .cacheThenNetwork) {
  ///   request in
  ///   let page = try await api.homeTimeline(ifNoneMatch: request.validator)
  ///   return page.notModified ? .notModified : .value(page.statuses, validator: page.etag)
  /// }
  /// ```
  ///
  /// The list is held as a collection alias holds its entities: an entity removed from the
  /// map leaves the list, and one written anywhere shows its new value in it.
  @inlinable
  public func resource<T: Identifiable & Sendable>(
    _ key: ResourceKey<[T]>, policy: FetchPolicy = .cacheFirst, staleAfter: Duration = .zero,
    keepFor: Duration = .seconds(300), retry: RetryPolicy = .exponential(),
    load: @escaping @Sendable (ResourceRequest) async throws -> Fetched<[T]>
  ) -> Resource<[T]> {
    _resource(
      key, .list(T.self),
      _ResourceSettings(
        policy: policy, staleAfter: staleAfter._clampedToZero, keepFor: keepFor._clampedToZero),
      retry: retry, load: load)
  }

  /// The resource named `key`, with a plain loader: `.value(try await load())` each time. See
  /// `resource(_:policy:staleAfter:keepFor:retry:load:)`.
  ///
  /// ```swift
  /// let repository = map.resource(ResourceKey<Repository>("repos/apple/swift")) {
  ///   try await api.repository("apple/swift")
  /// }
  /// ```
  @inlinable
  public func resource<T: Identifiable & Sendable>(
    _ key: ResourceKey<T>, policy: FetchPolicy = .cacheFirst, staleAfter: Duration = .zero,
    keepFor: Duration = .seconds(300), retry: RetryPolicy = .exponential(),
    load: @escaping @Sendable () async throws -> T
  ) -> Resource<T> {
    resource(key, policy: policy, staleAfter: staleAfter, keepFor: keepFor, retry: retry) { _ in
      .value(try await load())
    }
  }

  /// The resource named `key`, whose answer is a list, with a plain loader. See
  /// `resource(_:policy:staleAfter:keepFor:retry:load:)`.
  @inlinable
  public func resource<T: Identifiable & Sendable>(
    _ key: ResourceKey<[T]>, policy: FetchPolicy = .cacheFirst, staleAfter: Duration = .zero,
    keepFor: Duration = .seconds(300), retry: RetryPolicy = .exponential(),
    load: @escaping @Sendable () async throws -> [T]
  ) -> Resource<[T]> {
    resource(key, policy: policy, staleAfter: staleAfter, keepFor: keepFor, retry: retry) { _ in
      .value(try await load())
    }
  }

  /// The live resource of `key`, or a new one made with these settings.
  @usableFromInline
  func _resource<Value: Sendable>(
    _ key: ResourceKey<Value>, _ shape: _AnswerShape<Value>, _ settings: _ResourceSettings,
    retry: RetryPolicy, load: @escaping @Sendable (ResourceRequest) async throws -> Fetched<Value>
  ) -> Resource<Value> {
    let registryKey = _ResourceRegistry.Key(
      name: key.name, kind: .resource, valueType: ObjectIdentifier(Value.self))
    if let live = _resources.existing(registryKey, as: _ResourceCore<Value>.self) {
      return Resource(live)
    }
    // NB: made outside the registry's lock, which is never held while the map's is taken.
    let (slot, stored) = _AnswerSlot.make(
      in: _core, id: _resources.slotID(named: key.name, for: Value.self), name: key.name,
      shape: shape)
    let made = _ResourceCore(
      key: key, settings: settings,
      fetcher: _ResourceFetcher(
        clock: _resources.clock, retry: retry, load: load,
        startsInline: _resources.startsWaitedFetchesInline),
      slot: slot,
      stored: stored, registry: _resources)
    made.open()
    let listed = _resources.list(made, as: registryKey)
    if listed !== made { made.discard() }
    return Resource(listed)
  }

  /// Marks stale every live resource whose key's name starts with `prefix` (every one, by
  /// default): the next `load()` of each fetches, and their observers are told. Nothing is
  /// fetched now. Resources in their `keepFor` window are live.
  ///
  /// ```swift
  /// try await api.post(comment, on: issue)
  /// map.invalidateResources(prefix: "repos/apple/swift/issues/\(issue.number)")
  /// ```
  ///
  /// - Complexity: O(live resources).
  public func invalidateResources(prefix: String = "") {
    for entry in _resources.entries(prefix: prefix) { entry.invalidate() }
  }

  /// Refreshes, concurrently, every stale resource that has an observer, and returns when
  /// they have settled, whatever their outcome; for an app's foreground and reconnect events.
  ///
  /// A resource already fetching is joined, not fetched twice. `cacheOnly` resources are
  /// skipped; observed resources with no answer yet are fetched.
  ///
  /// ```swift
  /// for await _ in NotificationCenter.default.notifications(named: UIApplication.willEnterForegroundNotification) {
  ///   await map.revalidate()
  /// }
  /// ```
  ///
  /// - Complexity: O(live resources), plus their fetches.
  public func revalidate() async {
    let entries = _resources.entries(prefix: "")
    await withTaskGroup(of: Void.self) { group in
      for entry in entries { group.addTask { await entry.revalidate() } }
    }
  }
}
