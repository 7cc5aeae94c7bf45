import Foundation

/// How a paged list fetches: its loader, its retries, and the clock they run on.
@usableFromInline
struct _PagedFetcher<T: Sendable, Cursor: Codable & Sendable>: Sendable {
  @usableFromInline let clock: any ResourceClock
  @usableFromInline let retry: RetryPolicy
  @usableFromInline let load: @Sendable (PageRequest<Cursor>) async throws -> Page<T, Cursor>
  /// Whether a page a caller waits for starts on the caller's thread; see `_ResourceFetcher`.
  @usableFromInline let startsInline: Bool
}

/// One paged list: its state machine under its own lock, its pages in the map
/// (`_PagedList`), and the actions its state asks for; `_ResourceCore`'s counterpart.
///
/// Every transition of `_PagedMachine` runs under `lock`, and what it returns is done after
/// the lock is released (`perform`): the loader, the clock, the map and every callback run
/// outside it. The lock is a leaf: nothing is called while holding it.
@usableFromInline
final class _PagedCore<T: Identifiable & Sendable, Cursor: Codable & Sendable>: _ResourceEntry,
  @unchecked Sendable
{
  // NB: @unchecked because `machine` and `links` are only touched while holding `lock`.

  @usableFromInline let key: ResourceKey<[T]>
  @usableFromInline let fetcher: _PagedFetcher<T, Cursor>
  /// The list's pages in the map.
  @usableFromInline let list: _PagedList<T, Cursor>
  @usableFromInline let lock = Lock()
  // NB: exclusivity checks off, as on the core's parts: `lock` already makes every access
  // exclusive, and a check was a good share of reading `state`.
  @exclusivity(unchecked) @usableFromInline var machine: _PagedMachine<T>
  #if DEBUG
    @usableFromInline var links = _PagedLinks()
  #else
    @exclusivity(unchecked) @usableFromInline var links = _PagedLinks()
  #endif
  /// Guards the observers' delivery state (see `_Subscriber`); never held while calling out.
  @usableFromInline let deliveryLock = Lock()
  /// Whether the state depends on the time; see `_PagedMachine.needsClock`.
  @usableFromInline let needsClock: Bool
  /// The registry that lists the list, to be taken out of it when let go. NB: weak: the
  /// registry holds the list while it is live, and lives as long as its map.
  @usableFromInline weak var registry: _ResourceRegistry?

  @inlinable
  init(
    key: ResourceKey<[T]>, settings: _ResourceSettings, fetcher: _PagedFetcher<T, Cursor>,
    list: _PagedList<T, Cursor>, registry: _ResourceRegistry
  ) {
    self.key = key
    self.fetcher = fetcher
    self.list = list
    self.registry = registry
    machine = _PagedMachine(settings: settings)
    machine.audience.handles = 1
    needsClock = machine.needsClock
  }

  deinit {
    // NB: see `_ResourceCore.deinit`.
    for timer in [machine.timers.stale, machine.timers.keep] { timer?.task?.cancel() }
  }

  /// Starts following the list's pages, and reads them. Called once, right after `init`,
  /// before anyone else sees the list.
  @inlinable
  func open() {
    // NB: subscribed before the read, so that no change falls in between.
    let subscriptions = list.pages().map { ($0.serial, follow($0)) }
    let snapshot = list.snapshot()
    let now = self.now
    perform(
      lock.withLock {
        for (serial, subscription) in subscriptions { links.pages[serial] = subscription }
        return machine.offer(snapshot, at: now)
      })
  }

  @inlinable
  var name: String { key.name }

  /// Its key in the registry.
  @inlinable
  static func registryKey(_ name: String) -> _ResourceRegistry.Key {
    _ResourceRegistry.Key(
      name: name, kind: .paged, valueType: ObjectIdentifier(_PagedCore<T, Cursor>.self))
  }

  /// The time, when the state depends on it; see `_PagedMachine.needsClock`.
  @inlinable
  var now: Date? {
    needsClock ? fetcher.clock.now : nil
  }

  // MARK: Reading

  /// How many callers wait for a fetch in flight, both ends; for tests.
  @inlinable
  var waiters: Int {
    lock.withLock {
      (machine.fetches.head?.waiters.count ?? 0) + (machine.fetches.tail?.waiters.count ?? 0)
    }
  }

  /// How many loader tasks are running, a cancelled one included until it returns; for tests.
  @inlinable
  var runningFetches: Int {
    lock.withLock { links.runningFetches }
  }

  /// How many outcomes wait for a caller to collect them; for tests (0 once every caller
  /// returned).
  @inlinable
  var parkedOutcomes: Int {
    lock.withLock { machine.parked.count }
  }

  /// The state now.
  @inlinable
  var state: PagedState<T> {
    let now = self.now
    // NB: the fields read under the lock, the state made after it: made under it, and handed
    // out of it, the state was copied, each of its references retained once more.
    lock.lock()
    let items = machine.answer.items
    let hasOlder = machine.answer.hasAnswer && machine.answer.hasOlder
    let isStale = machine.isStale(at: now)
    let (isLoading, isLoadingOlder) = (machine.fetches.head != nil, machine.fetches.tail != nil)
    let details = machine.details
    lock.unlock()
    return PagedState(
      items: items, hasOlder: hasOlder, isStale: isStale, isLoading: isLoading,
      isLoadingOlder: isLoadingOlder, details: details)
  }

  // MARK: Demands

  /// `load()`, `refresh()`, `loadOlder()` or a `revalidate()`'s part.
  @discardableResult
  @inlinable
  func demand(_ demand: _PagedDemand) async throws -> [T] {
    let now = self.now
    let (decision, effects) = lock.withLock {
      machine.begin(demand, at: now, isCancelled: Task.isCancelled)
    }
    let caller: UInt64
    switch decision {
    case .answer(let items):
      perform(effects)
      return items
    case .fail(let error):
      perform(effects)
      throw error
    case .skip:
      perform(effects)
      throw _Skipped()
    case .wait(let reserved):
      caller = reserved
    }
    // NB: as in `_ResourceCore.demand(_:)`: the fetch this caller waits for starts before it
    // suspends, outside the cancellation handler, and may leave its outcome parked.
    let started = !effects.startFetches.isEmpty
    perform(effects, startingInline: fetcher.startsInline)
    let outcome = await _outcome(
      collect: { started ? lock.withLock { machine.collect(caller) } : nil },
      suspend: { continuation in
        let now = self.now
        perform(
          lock.withLock {
            machine.suspend(caller, on: continuation, isCancelled: Task.isCancelled, at: now)
          })
      },
      onCancel: {
        let now = self.now
        perform(lock.withLock { machine.cancelWaiter(caller, at: now) })
      })
    // NB: `unsafeDowncast`: the machine only boxes its items (debug builds check the cast).
    return unsafeDowncast(try outcome.get(), to: _Answer<[T]>.self).value
  }

  @inlinable
  func invalidate() {
    let now = self.now
    perform(lock.withLock { machine.invalidate(at: now) })
  }

  @inlinable
  func revalidate() async {
    _ = try? await demand(.revalidate)
  }

  // MARK: Handles and observers

  @inlinable
  func acquireHandle() -> Bool {
    let now = self.now
    let (acquired, effects) = lock.withLock { machine.addHandle(at: now) }
    perform(effects)
    return acquired
  }

  /// A `PagedResource` handle went.
  @inlinable
  func releaseHandle() {
    let now = self.now
    perform(lock.withLock { machine.removeHandle(at: now) })
  }

  /// Calls `onChange` with each new state, after the current one if asked.
  @inlinable
  func observe(
    includingCurrentState: Bool, _ onChange: @escaping @Sendable (PagedState<T>) -> Void
  ) -> Subscription {
    let now = self.now
    let (observer, state, version, effects) = lock.withLock {
      // NB: see `_ResourceCore.observe(includingCurrentState:_:)`.
      let observer = _Subscriber<PagedState<T>>(
        lastVersion: includingCurrentState ? 0 : machine.version, onValue: onChange)
      let (state, version, effects) = machine.addObserver(observer, at: now)
      return (observer, state, version, effects)
    }
    perform(effects)
    // NB: nonisolated(unsafe): a subscriber's delivery state is only touched while holding
    // `deliveryLock`, and the machine's list of observers while holding `lock`.
    nonisolated(unsafe) let removed = observer
    let subscription = list.subscription { [self] in removeObserver(removed) }
    if includingCurrentState { observer.deliver(state, version: version, deliveryLock) }
    return subscription
  }

  /// An observer's subscription was cancelled. Idempotent.
  @inlinable
  func removeObserver(_ observer: _Subscriber<PagedState<T>>) {
    let now = self.now
    let effects = lock.withLock { machine.removeObserver(observer, at: now) }
    let dropped = observer.cancel(deliveryLock)
    perform(effects)
    withExtendedLifetime(dropped) {}
  }

  // MARK: The map's changes

  /// A subscription to `page`'s slot: a change of its entities tells the list.
  @inlinable
  func follow(_ page: _PageSlot<T>) -> Subscription {
    let serial = page.serial
    // NB: weak: the list holds the subscriptions (`links`), which would otherwise hold it.
    return page.slot.observe { [weak self] items in self?.pageChanged(serial, items) }
  }

  /// Stops following the pages `serials`.
  @inlinable
  func unfollow(_ serials: [UInt64]) {
    guard !serials.isEmpty else { return }
    let dropped = lock.withLock { serials.compactMap { links.pages.removeValue(forKey: $0) } }
    for subscription in dropped { subscription.cancel() }
  }

  /// The map changed the page `serial` to `items`: unless the list has that already (the
  /// page's own landing, say), it is read again whole, with the version of the read, and
  /// offered. A page that lost entities has its record saved again (a persisted type).
  ///
  /// NB: read whole, so that a write that changed several pages tells the observers once.
  @inlinable
  func pageChanged(_ serial: UInt64, _ items: [T]?) {
    let known = lock.withLock { () -> Bool in
      guard let items, let held = machine.answer.items(ofPage: serial) else { return false }
      return _identical(held, items)
    }
    guard !known else { return }
    let snapshot = list.snapshot()
    let now = self.now
    let (effects, shrunk) = lock.withLock { () -> (_PagedEffects<T>, Set<UInt64>) in
      var shrunk = Set<UInt64>()
      for page in snapshot.pages {
        if let held = machine.answer.items(ofPage: page.serial), let items = page.items,
          items.count < held.count
        {
          shrunk.insert(page.serial)
        }
      }
      return (machine.offer(snapshot, at: now), shrunk)
    }
    perform(effects)
    if !shrunk.isEmpty { list.saveShrunkPages(shrunk, now: fetcher.clock.now) }
  }

  // MARK: Acting

  /// Does what a transition asked, in `_ResourceCore.perform(_:startingInline:)`'s order:
  /// cancels, tells the observers, starts the timers, resumes the callers, then starts the
  /// fetches (on this thread with `startingInline`); what the list let go of is released last.
  @inlinable
  func perform(_ effects: consuming _PagedEffects<T>, startingInline: Bool = false) {
    for task in effects.cancelled { task.cancel() }
    // NB: the delivery is let go before a fetch starts, for the reason `notify` gives.
    if let delivery = effects.delivery.take() {
      for observer in delivery.to {
        // NB: `unsafeDowncast`: the machine's observers are the ones `observe` made.
        unsafeDowncast(observer, to: _Subscriber<PagedState<T>>.self)
          .deliver(delivery.state, version: delivery.version, deliveryLock)
      }
    }
    for timer in effects.timers {
      startTimer(timer.kind, generation: timer.generation, timer.duration)
    }
    for (continuation, outcome) in effects.resumed { continuation.resume(returning: outcome) }
    for fetch in effects.startFetches {
      startFetch(fetch.id, fetch.end, inline: startingInline)
    }
    if effects.letGo { letGo() }
  }

  /// Starts the loader's task for the fetch `id` of `end`.
  @inlinable
  func startFetch(_ id: UInt64, _ end: _PagedEnd, inline: Bool) {
    // NB: the task holds the list until the fetch ends.
    let task = _startTask(inline: inline) { await self.run(fetch: id, end) }
    // NB: as in `_ResourceCore.startFetch(_:inline:)`, a run that already ended needs no cancel.
    let attached = lock.withLock {
      links.endedRun == id || machine.attach(task, toFetch: id)
    }
    if !attached { task.cancel() }
  }

  /// Starts a timer's task.
  @inlinable
  func startTimer(_ kind: _ResourceTimerKind, generation: UInt64, _ duration: Duration) {
    // NB: weak: a timer must not keep a list its registry let go of (its map gone).
    let task = _startTimerTask(on: fetcher.clock, after: duration) { [weak self] in
      guard let self else { return }
      let now = self.now
      perform(lock.withLock { machine.timerFired(kind, generation: generation, at: now) })
    }
    if !lock.withLock({ machine.attach(task, toTimer: kind, generation: generation) }) {
      task.cancel()
    }
  }

  // MARK: The fetch

  /// Runs the fetch `id` of `end`: the loader, and its retries with their waits, outside
  /// every lock. Each try asks for the page the list needs then.
  ///
  /// NB: every way out goes through `end(_:_:)`, whose lock section also counts the run out;
  /// `nonisolated(nonsending)` as `_ResourceCore.run(fetch:)` is.
  @inlinable
  nonisolated(nonsending) func run(fetch id: UInt64, _ end: _PagedEnd) async {
    var attempt = 1
    var inFlight = lock.withLock {
      links.runningFetches += 1
      return machine.isInFlight(id) != nil
    }
    while inFlight {
      guard let asked = list.request(end, attempt: attempt) else {
        // NB: the list has no older page to ask for any more (replaced meanwhile).
        return land(id, nil)
      }
      let failure: any Error
      do {
        let page = try await fetcher.load(asked.request)
        return land(id, (page, asked.kind, asked.generation))
      } catch {
        failure = error
      }
      // NB: a fetch no longer in flight was cancelled: it writes nothing, and tells nobody.
      guard lock.withLock({ machine.isInFlight(id) }) != nil else { break }
      guard fetcher.retry.retries(failure, attempt: attempt) else {
        return fail(id, failure)
      }
      let wait = fetcher.retry.delay(beforeRetry: attempt, factor: Double.random(in: 0.5..<1.5))
      do {
        try await fetcher.clock.sleep(for: wait)
      } catch {
        guard lock.withLock({ machine.isInFlight(id) }) != nil else { break }
        return fail(id, error)
      }
      attempt += 1
      inFlight = lock.withLock { machine.isInFlight(id) != nil }
    }
    self.end(id)
  }

  /// Ends the run of the fetch `id`: makes `transition`, if any, in the same lock section that
  /// counts the run out, then does what it asked.
  @inlinable
  func end(
    _ id: UInt64,
    _ transition: (inout _PagedMachine<T>) -> _PagedEffects<T> = { _ in .init() }
  ) {
    perform(
      lock.withLock {
        links.runningFetches -= 1
        links.endedRun = id
        return transition(&machine)
      })
  }

  /// The fetch `id` failed for good.
  @inlinable
  func fail(_ id: UInt64, _ error: any Error) {
    let now = self.now
    end(id) { $0.fail(id, error, at: now) }
  }

  /// Stores the page the fetch `id` got, in one write of the map, which follows the page it
  /// added and hands the machine its change; lets go of the pages it dropped; then tells
  /// everyone.
  @inlinable
  func land(
    _ id: UInt64, _ fetched: (page: Page<T, Cursor>, kind: _PageKind, generation: UInt64)?
  ) {
    guard lock.withLock({ machine.beginLanding(id) }) else { return end(id) }
    var released: [[T]] = []
    if let fetched {
      let landing = list.land(
        fetched.page, as: fetched.kind, generation: fetched.generation,
        fetchedAt: fetcher.clock.now, follow: follow
      ) { change in
        // NB: the machine's lock is a leaf, taken here under the map's: the change reaches
        // the machine in the order the map made it.
        released = lock.withLock { machine.apply(change) }
      }
      let extra = lock.withLock { () -> Subscription? in
        guard let added = landing.added else { return nil }
        guard !links.isClosed else { return added.subscription }
        links.pages[added.serial] = added.subscription
        return nil
      }
      extra?.cancel()
      unfollow(landing.dropped.map { $0.serial })
      withExtendedLifetime(landing) {}
    }
    let now = self.now
    end(id) { $0.land(id, at: now) }
    withExtendedLifetime(released) {}
  }

  // MARK: Letting go

  /// Nothing used the list for `keepFor`: it leaves the registry, and the map releases its
  /// pages (the store keeps a persisted list's records).
  @inlinable
  func letGo() {
    registry?.remove(self, as: Self.registryKey(name))
    close()
  }

  /// Drops a list made for a key that another thread listed first, before anyone saw it.
  @inlinable
  func discard() {
    lock.withLock { machine.audience.isLetGo = true }
    close()
  }

  /// Stops following the pages and empties their slots.
  @inlinable
  func close() {
    let subscriptions = lock.withLock { () -> [Subscription] in
      links.isClosed = true
      defer { links.pages = [:] }
      return Array(links.pages.values)
    }
    for subscription in subscriptions { subscription.cancel() }
    let released = list.release()
    withExtendedLifetime(released) {}
  }
}

/// What a paged list keeps beside its state machine, under the same lock.
@usableFromInline
struct _PagedLinks {
  /// The subscriptions that tell the list when the map changes one of its pages, by page.
  @usableFromInline var pages: [UInt64: Subscription] = [:]
  /// Whether the list was let go: it follows no page any more.
  @usableFromInline var isClosed = false
  /// How many loader tasks are running, cancelled ones included until they return.
  @usableFromInline var runningFetches = 0
  /// The last fetch whose run ended: see `_ResourceLinks.endedRun`.
  @usableFromInline var endedRun: UInt64 = 0
}
