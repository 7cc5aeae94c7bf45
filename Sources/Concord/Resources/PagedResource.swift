/// A paged list: a timeline, a feed, a search result, merged from cursor pages into one list
/// of the map's entities, without duplicates, without hidden gaps, current at every item.
///
/// Get one with `IdentityMap.pagedResource(_:staleAfter:keepFor:retry:load:)`; calls with the
/// same key share it. Each item is an entity of the map: an edit anywhere (a websocket event,
/// another screen's fetch) changes it in ``state``'s items and tells this list's observers,
/// once; a removal takes it out of the list.
///
/// ```swift
/// let home = map.pagedResource(ResourceKey<[Status]>("timelines/home")) { (request: PageRequest<String>) in
///   let statuses = try await api.homeTimeline(maxID: request.isOlder ? request.cursor : nil,
///                                             minID: request.isNewer ? request.cursor : nil)
///   return Page(statuses, older: statuses.last?.id, newer: statuses.first?.id)
/// }
/// try await home.load()        // the first page
/// try await home.loadOlder()   // scrolled to the end: the next page, appended
/// try await home.refresh()     // pulled to refresh: what is newer, on top
/// ```
///
/// While any `PagedResource` handle on it lives, or any observation, the list and its items
/// stay; once none is left, the list is kept for `keepFor`, then let go.
public final class PagedResource<T: Identifiable & Sendable, Cursor: Codable & Sendable>:
  Sendable
{
  @usableFromInline let _core: _PagedCore<T, Cursor>

  /// A handle on `core`, whose hold on it was taken for this handle.
  init(_ core: _PagedCore<T, Cursor>) {
    _core = core
  }

  deinit {
    _core.releaseHandle()
  }

  /// The list's key.
  public var key: ResourceKey<[T]> { _core.key }

  /// What the list knows now: its items as the map has them, whether older pages follow, its
  /// age, whether a page is in flight or failed.
  ///
  /// - Complexity: O(1): the items are kept up to date as pages land and entities change.
  @inlinable
  public var state: PagedState<T> { _core.state }

  /// The list by `cacheFirst`: a fresh list as it is; a stale one at once, refreshed behind
  /// (see ``refresh()``); with none, waits for the first page.
  ///
  /// Every call that needs the first page while it is in flight joins it, as do ``refresh()``
  /// and `revalidate()`: the loader runs once.
  ///
  /// - Returns: The items, as ``state`` has them after the page landed.
  /// - Throws: The first page's last error after its retries; `CancellationError`.
  @discardableResult
  @inlinable
  public func load() async throws -> [T] {
    try await _core.demand(.load)
  }

  /// Appends the next older page (`PageRequest.older(than:)` the last page's `older`
  /// cursor).
  ///
  /// An item already listed keeps its place, so the item two pages share (Mastodon's pages
  /// overlap by one) is listed once; an id the page repeats keeps its first place there, and
  /// its value follows the rules of one write (stamps, then the closest to the root, then the
  /// last). A page that brings nothing new (empty, or every item already listed or refused by
  /// its tombstone) ends the list: `hasOlder` becomes false, so a server whose cursor goes
  /// back or repeats cannot make it loop.
  ///
  /// A no-op when ``PagedState/hasOlder`` is false (and before the first page). Joins a
  /// `loadOlder()` in flight. A page asked for before a ``refresh()`` replaced the list is
  /// dropped when it lands: it would extend a list that is gone. A failure keeps the list and
  /// sets ``PagedState/error``.
  ///
  /// - Throws: The page's last error after its retries; `CancellationError`.
  @inlinable
  public func loadOlder() async throws {
    try await _core.demand(.loadOlder)
  }

  /// Loads what is newer than the head, and puts it at the head.
  ///
  /// It asks `PageRequest.newer(than:)` the head's newer cursor when the head page gave one:
  /// an adjacent answer, whose items go on top (ids already listed keep their places), and
  /// whose `newer` cursor becomes the head's when it is not empty. Otherwise it asks
  /// ``PageRequest/first``. A first page that shares no id with the listed items replaces the
  /// list: older pages are dropped (their items no longer held), `hasOlder` and the cursors
  /// come from the answer, so the list never hides a gap, the items a long sleep missed. One
  /// that shares an id goes on top as an adjacent answer does, the older end untouched.
  ///
  /// Joins a first page or refresh in flight; an older page in flight lands too, so both
  /// arrive without losing or duplicating an item.
  ///
  /// - Throws: The page's last error after its retries (the list stays); `CancellationError`.
  @inlinable
  public func refresh() async throws {
    try await _core.demand(.refresh)
  }

  /// Makes the list stale, so that the next ``load()`` refreshes it; nothing is fetched now.
  /// Observers are told, if it was fresh. A refresh already in flight lands stale.
  @inlinable
  public func invalidate() {
    _core.invalidate()
  }

  /// Calls `onChange` with each change of state after this call: items added, changed (an
  /// edit of any of them, by anyone) or removed, a page starting or ending, an error, the list
  /// turning stale.
  ///
  /// Callbacks run as entity observers' do: after the write that caused them commits, outside
  /// every lock, one at a time, never an older state after a newer one, and once per change
  /// (a page that lands is one change).
  ///
  /// The subscription keeps the list while it lives; and a page in flight goes on while the
  /// list is observed, even when every caller that waited for it is cancelled.
  ///
  /// - Returns: A subscription. Keep it: releasing it cancels the observation.
  public func observe(_ onChange: @escaping @Sendable (PagedState<T>) -> Void) -> Subscription {
    _core.observe(includingCurrentState: false, onChange)
  }

  /// Calls `onChange` with the current state at once, then as ``observe(_:)`` does.
  public func observe(
    includingCurrentState: Bool, _ onChange: @escaping @Sendable (PagedState<T>) -> Void
  ) -> Subscription {
    _core.observe(includingCurrentState: includingCurrentState, onChange)
  }

  /// The current state, then each change; keeps the newest when the reader lags.
  ///
  /// The stream observes the list from when you read this property until it is dropped or
  /// its iteration ends, so read it where you iterate it.
  public var states: AsyncStream<PagedState<T>> {
    let (stream, continuation) = AsyncStream.makeStream(
      of: PagedState<T>.self, bufferingPolicy: .bufferingNewest(1))
    let subscription = _core.observe(includingCurrentState: true) { continuation.yield($0) }
    continuation.onTermination = { _ in subscription.cancel() }
    return stream
  }
}
