extension IdentityMap {
  // MARK: Paged lists

  /// The paged list named `key`, made on first use: pages of `T`s, entities or aggregates,
  /// merged into one list as `loadOlder()` and `refresh()` bring them.
  ///
  /// ```swift
  /// // GitHub: pages by the Link header's rel="next", a URL.
  /// let issues = map.pagedResource(ResourceKey<[Issue]>("repos/apple/swift/issues")) {
  ///   (request: PageRequest<URL>) in
  ///   let (issues, next) = try await api.issues(at: request.cursor ?? firstPageURL)
  ///   return Page(issues, older: next)
  /// }
  /// try await issues.load()
  /// try await issues.loadOlder()
  /// ```
  ///
  /// The settings and loader of the call that makes the list are kept while it lives; later
  /// calls with the same key return it as it is. A `resource` with the same key is another
  /// resource.
  ///
  /// For a persisted `T` (`persist(_:)`), the list (the ids of each page, in order, its
  /// cursors, when its head was fetched, whether older pages follow) is saved with its
  /// entities: after a relaunch it shows every page loaded before, read from the store
  /// outside the map's lock, and `load()` refreshes it only when it is stale.
  ///
  /// - Parameters:
  ///   - key: The list's name and item type.
  ///   - staleAfter: The age of the head at which the list is stale: `.zero` (the default)
  ///     makes it stale at once, so that `load()` answers from the cache and refreshes
  ///     behind. A negative duration counts as zero.
  ///   - keepFor: Once the list has no observer and no live ``PagedResource`` handle, how
  ///     long it is kept; then it is let go (entities nobody else holds are released; a
  ///     persisted list stays in the store). A negative duration counts as zero.
  ///   - retry: How every page retries; see ``RetryPolicy``.
  ///   - load: The loader: one try of one page, the first, an older or a newer one (see
  ///     ``PageRequest``). It runs outside every lock, in a task of its own, cancelled when
  ///     nobody waits for or observes the list any more. A page that a caller waits for starts
  ///     on that caller's thread, until the loader first suspends, as a resource's fetch does.
  /// - Returns: A handle on the list; it keeps the list live while it exists.
  /// - Complexity: O(1) for a live list; making one reads the store when `T` is persisted.
  @inlinable
  public func pagedResource<T: Identifiable & Sendable, Cursor: Codable & Sendable>(
    _ key: ResourceKey<[T]>, staleAfter: Duration = .zero, keepFor: Duration = .seconds(300),
    retry: RetryPolicy = .exponential(),
    load: @escaping @Sendable (PageRequest<Cursor>) async throws -> Page<T, Cursor>
  ) -> PagedResource<T, Cursor> {
    // NB: made here, in the caller's module, so that the pass writing each page is
    // specialized for `T`: type-erased, it looked up `T`'s metadata at every entity.
    _pagedResource(
      key, staleAfter: staleAfter, keepFor: keepFor, retry: retry, load: load,
      write: { map, items, slot, stamp in map.storeAnswer(items, into: slot, stamp: stamp) },
      makeSlot: { map, id in map.collectionAliasSlot(id, of: T.self) })
  }

  /// `pagedResource(_:staleAfter:keepFor:retry:load:)`, whose pages `write` stores.
  @usableFromInline
  func _pagedResource<T: Identifiable & Sendable, Cursor: Codable & Sendable>(
    _ key: ResourceKey<[T]>, staleAfter: Duration, keepFor: Duration, retry: RetryPolicy,
    load: @escaping @Sendable (PageRequest<Cursor>) async throws -> Page<T, Cursor>,
    write: @escaping _PageWriter<T>, makeSlot: @escaping _PageSlotMaker<T>
  ) -> PagedResource<T, Cursor> {
    let registryKey = _PagedCore<T, Cursor>.registryKey(key.name)
    if let live = _resources.existing(registryKey, as: _PagedCore<T, Cursor>.self) {
      return PagedResource(live)
    }
    // NB: made outside the registry's lock, which is never held while the map's is taken.
    let slotName = _resources.slotID(named: key.name, for: PagedResource<T, Cursor>.self).name
    let list = _PagedList<T, Cursor>.make(
      in: _core, name: key.name, slotName: slotName, write: write, makeSlot: makeSlot)
    let made = _PagedCore(
      key: key,
      settings: _ResourceSettings(
        policy: .cacheFirst, staleAfter: staleAfter._clampedToZero,
        keepFor: keepFor._clampedToZero),
      fetcher: _PagedFetcher(
        clock: _resources.clock, retry: retry, load: load,
        startsInline: _resources.startsWaitedFetchesInline),
      list: list,
      registry: _resources)
    made.open()
    let listed = _resources.list(made, as: registryKey)
    if listed !== made { made.discard() }
    return PagedResource(listed)
  }
}
