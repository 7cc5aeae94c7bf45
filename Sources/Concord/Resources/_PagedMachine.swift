import Foundation

// A paged list's state machine: `_ResourceMachine`'s shape (a value whose transitions return
// what to do, kept by `_PagedCore` under a small lock of the list's own), with two fetches in
// flight at most, one per end of the list: the head's (the first page, a refresh) and the
// tail's (an older page). Nothing here calls the map, the loader, the clock or a callback.
//
// The rules it keeps, besides those of resources (one fetch per end: a demand joins the one
// in flight; a fetch is cancelled only when every caller that waited for it was cancelled and
// nobody observes the list; failures keep the list; observers hear each change once):
// - The list is what the map has. A landing hands its change over from within its write
//   (`apply`), so the machine's pages change in the order the map's did; a change of the
//   pages' entities is read whole (`offer`, a `_PagedSnapshot`), and kept if it is newer.
//   `items` is the pages' entities, concatenated, kept up to date page by page: a page
//   appended is appended, a page whose slot did not change is not copied again.
// - `loadOlder()` is a no-op without an answer or once `hasOlder` is false; it joins an older
//   page in flight. The age of the list is its head's: an older page does not make it fresh.

/// Which end of a paged list a fetch extends.
@usableFromInline
enum _PagedEnd: Sendable {
  /// The first page, or a refresh.
  case head
  /// An older page.
  case tail
}

/// The list a paged list holds, as last read from the map, and what it knows about it.
@usableFromInline
struct _PagedAnswer<T: Sendable> {
  /// The pages' entities, concatenated: the list's items.
  @usableFromInline var items: [T] = []
  /// Each page's serial, and its slot's value at the last read, in order.
  @usableFromInline var pages: [(serial: UInt64, items: [T])] = []
  /// Where each page is in `pages`.
  @usableFromInline var positions: [UInt64: Int] = [:]
  /// Whether a first page landed, and the slots are not emptied.
  @usableFromInline var hasAnswer = false
  @usableFromInline var hasOlder = false
  @usableFromInline var fetchedAt: Date?
  /// When the list was read.
  @usableFromInline var version = _PagedVersion()
  /// Whether `invalidate()` was called since the head was fetched.
  @usableFromInline var invalidated = false

  /// The value of the page `serial` at the last read, if the list has it.
  @inlinable
  func items(ofPage serial: UInt64) -> [T]? {
    positions[serial].map { pages[$0].items }
  }

  /// Takes the change a landing made, in the landing's write.
  ///
  /// - Complexity: O(the page's entities) for a page appended; O(the list) for a page on top
  ///   or a list replaced.
  @inlinable
  mutating func apply(_ change: _PagedChange<T>) -> [[T]] {
    version = change.version
    hasAnswer = change.hasAnswer
    hasOlder = change.hasOlder
    fetchedAt = change.fetchedAt
    switch change.shape {
    case .unchanged:
      return []
    case .appended(let serial, let added):
      positions[serial] = pages.count
      pages.append((serial, added))
      items.append(contentsOf: added)
      return []
    case .prepended(let serial, let added):
      pages.insert((serial, added), at: 0)
      items.insert(contentsOf: added, at: 0)
      reindex()
      return []
    case .replaced(let replacing):
      let released = pages.map { $0.items } + [items]
      pages = replacing
      items = replacing.flatMap { $0.items }
      reindex()
      return released
    }
  }

  /// Takes `snapshot`, if it is newer than the list held: each page whose slot changed is
  /// copied into `items` in its place, pages past the ones kept are appended. Returns whether
  /// it was newer, and the arrays it let go, to be released once no lock is held (their
  /// entities' deinits are user code).
  ///
  /// - Complexity: O(pages + the entities of the pages that changed), plus those of the pages
  ///   after the first one added or dropped in front of others.
  @inlinable
  mutating func take(_ snapshot: _PagedSnapshot<T>) -> (taken: Bool, released: [[T]]) {
    guard snapshot.version.isNewer(than: version) else { return (false, []) }
    version = snapshot.version
    fetchedAt = snapshot.fetchedAt
    hasOlder = snapshot.hasOlder
    var released: [[T]] = []
    // NB: `removeAll()` empties the slots: the list is gone, as an answer is.
    hasAnswer = snapshot.hasAnswer && !snapshot.pages.contains { $0.items == nil }
    guard hasAnswer else {
      released = pages.map { $0.items } + [items]
      pages = []
      items = []
      positions = [:]
      return (true, released)
    }
    var index = 0
    var start = 0
    while index < pages.count, index < snapshot.pages.count,
      pages[index].serial == snapshot.pages[index].serial
    {
      let fresh = snapshot.pages[index].items.unsafelyUnwrapped
      let old = pages[index].items
      if !_identical(old, fresh) {
        items.replaceSubrange(start..<start + old.count, with: fresh)
        pages[index].items = fresh
        released.append(old)
      }
      start += fresh.count
      index += 1
    }
    if index < pages.count || index < snapshot.pages.count {
      released += pages[index...].map { $0.items }
      pages.removeSubrange(index...)
      items.removeSubrange(start...)
      for page in snapshot.pages[index...] {
        let fresh = page.items.unsafelyUnwrapped
        items.append(contentsOf: fresh)
        pages.append((page.serial, fresh))
      }
      reindex()
    }
    return (true, released)
  }

  /// Lists where each page is again.
  @inlinable
  mutating func reindex() {
    positions = Dictionary(
      uniqueKeysWithValues: pages.enumerated().lazy.map { ($1.serial, $0) })
  }
}

/// The fetches of a paged list in flight: one per end at most.
@usableFromInline
struct _PagedFetches {
  @usableFromInline var head: _ResourceFetch?
  @usableFromInline var tail: _ResourceFetch?

  @inlinable
  subscript(end: _PagedEnd) -> _ResourceFetch? {
    get { end == .head ? head : tail }
    set { if end == .head { head = newValue } else { tail = newValue } }
  }

  /// The end whose fetch is `id`, if it is in flight.
  @inlinable
  func end(of id: UInt64) -> _PagedEnd? {
    if head?.id == id { return .head }
    if tail?.id == id { return .tail }
    return nil
  }

  /// Whether a fetch is writing its page.
  @inlinable
  var isLanding: Bool { head?.landing == true || tail?.landing == true }
}

/// What a caller asks of a paged list.
@usableFromInline
enum _PagedDemand {
  /// `load()`: cacheFirst.
  case load
  /// `refresh()`: a fetch of the head, whatever the list's age.
  case refresh
  /// `revalidate()`: a refresh when the list is observed and stale.
  case revalidate
  /// `loadOlder()`: the next older page, when there is one.
  case loadOlder
}

/// What a demand of a paged list gets at once; see `_ResourceDecision`.
@usableFromInline
enum _PagedDecision<T: Sendable> {
  case answer([T])
  case fail(any Error)
  /// Nothing to do (a `revalidate` of a list that needs none).
  case skip
  /// It waits for a fetch, as the caller it reserved (see `_ResourceWaiter`).
  case wait(caller: UInt64)
}

/// What a transition of a paged list leaves to do once its lock is released; see
/// `_ResourceEffects`.
@usableFromInline
struct _PagedEffects<T: Sendable> {
  @usableFromInline var cancelled: [Task<Void, Never>] = []
  /// The fetches to start: which end, and its id.
  @usableFromInline var startFetches: [(end: _PagedEnd, id: UInt64)] = []
  @usableFromInline var timers:
    [(kind: _ResourceTimerKind, generation: UInt64, duration: Duration)] = []
  /// Callers to resume, each with its outcome: the items boxed (an `_Answer<[T]>`), or an
  /// error. The waiters are the resources' (`_ResourceWaiter`), which wait for a boxed answer.
  @usableFromInline var resumed: [(_ResourceContinuation, _ResourceOutcome)] = []
  /// A new state for the observers `to`, each a `_Subscriber<PagedState<T>>`.
  @usableFromInline var delivery: (state: PagedState<T>, version: UInt64, to: [_AnySubscriber])?
  @usableFromInline var letGo = false
  /// What the list let go of, released after the lock (its entities' deinits are user code).
  @usableFromInline var released: [[T]] = []

  @inlinable init() {}
}

/// A paged list's state; see the top of this file.
@usableFromInline
struct _PagedMachine<T: Sendable> {
  @usableFromInline let settings: _ResourceSettings
  /// `settings.staleAfter`, in seconds.
  @usableFromInline let staleAfter: Double
  @usableFromInline var answer = _PagedAnswer<T>()
  @usableFromInline var fetches = _PagedFetches()
  /// The last fetch's error.
  @usableFromInline var error: (any Error)? {
    didSet { details = _PagedDetails(fetchedAt: answer.fetchedAt, error: error) }
  }
  /// The list's `fetchedAt` and `error`, boxed for its states; see `PagedState`.
  @usableFromInline var details: _PagedDetails?
  @usableFromInline var audience = _ResourceAudience()
  @usableFromInline var timers = _ResourceTimers()
  /// The version of the newest state handed to observers.
  @usableFromInline var version: UInt64 = 1
  /// The last id handed out, to fetches, waiters and timers alike.
  @usableFromInline var serial: UInt64 = 0
  /// What callers whose fetch ended before they suspended get when they collect.
  @usableFromInline var parked = _ParkedOutcomes()

  @inlinable
  init(settings: _ResourceSettings) {
    self.settings = settings
    staleAfter = settings.staleAfter._seconds
  }

  /// A new id.
  @inlinable
  mutating func nextID() -> UInt64 {
    serial += 1
    return serial
  }

  // MARK: Reading

  /// Whether the list is stale at `now`: none, its head as old as `staleAfter` or older, or
  /// invalidated. `now` is only read when the age matters (`needsClock`).
  // NB: the reads are mutating, as the core's parts' are: a non-mutating one, called on the
  // machine the core keeps, copies it first, retaining every array in it. And inlinable, so
  // that reading the state is specialized for `T` where it is read.
  @inlinable
  mutating func isStale(at now: Date?) -> Bool {
    guard answer.hasAnswer, let fetchedAt = answer.fetchedAt, !answer.invalidated,
      staleAfter > 0, let now
    else { return true }
    return now.timeIntervalSince(fetchedAt) >= staleAfter
  }

  /// Whether the state depends on the time: the list is fresh unless it is old enough.
  @inlinable
  var needsClock: Bool { staleAfter > 0 }

  /// The state at `now`.
  @inlinable
  mutating func state(at now: Date?) -> PagedState<T> {
    PagedState(
      items: answer.items, hasOlder: answer.hasAnswer && answer.hasOlder,
      isStale: isStale(at: now), isLoading: fetches.head != nil,
      isLoadingOlder: fetches.tail != nil, details: details)
  }

  /// What a demand gets from the list as it is.
  @usableFromInline
  enum _Verdict {
    /// The items, and whether a background refresh follows.
    case answer([T], refreshing: Bool)
    case skip
    /// It waits for a fetch of this end.
    case fetch(_PagedEnd)
  }

  /// What `demand` gets from the list as it is, before any fetch.
  @inlinable
  mutating func decide(_ demand: _PagedDemand, at now: Date?) -> _Verdict {
    switch demand {
    case .refresh:
      return .fetch(.head)
    case .revalidate:
      guard !audience.observers.isEmpty else { return .skip }
      return fetches.head != nil || isStale(at: now) ? .fetch(.head) : .skip
    case .load:
      guard answer.hasAnswer else { return .fetch(.head) }
      return .answer(answer.items, refreshing: isStale(at: now))
    case .loadOlder:
      if fetches.tail != nil { return .fetch(.tail) }
      guard answer.hasAnswer && answer.hasOlder else {
        return .answer(answer.items, refreshing: false)
      }
      return .fetch(.tail)
    }
  }

  // MARK: Demands

  /// `demand` from a caller: an answer at once (starting a background refresh if the list is
  /// stale), or `.wait`, with the caller reserved on the fetch of its end in flight, which is
  /// started if there is none; see `_ResourceMachine.begin(_:at:isCancelled:)`.
  @inlinable
  mutating func begin(_ demand: _PagedDemand, at now: Date?, isCancelled: Bool)
    -> (_PagedDecision<T>, _PagedEffects<T>)
  {
    var effects = _PagedEffects<T>()
    switch decide(demand, at: now) {
    case .answer(let items, let refreshing):
      if refreshing { ensureFetch(.head, background: true, at: now, &effects) }
      return (.answer(items), effects)
    case .skip:
      return (.skip, effects)
    case .fetch(let end):
      guard !isCancelled else { return (.fail(CancellationError()), effects) }
      ensureFetch(end, background: false, at: now, &effects)
      let caller = nextID()
      fetches[end]!.reserve(caller)
      return (.wait(caller: caller), effects)
    }
  }

  /// The outcome of the reserved `caller`, if its fetch already ended.
  @inlinable
  mutating func collect(_ caller: UInt64) -> _ResourceOutcome? {
    parked.take(caller)
  }

  /// The reserved `caller`'s task suspends on `continuation`; see
  /// `_ResourceMachine.suspend(_:on:isCancelled:at:)`.
  @inlinable
  mutating func suspend(
    _ caller: UInt64, on continuation: _ResourceContinuation, isCancelled: Bool, at now: Date?
  ) -> _PagedEffects<T> {
    if let outcome = parked.take(caller) {
      var effects = _PagedEffects<T>()
      effects.resumed.append((continuation, outcome))
      return effects
    }
    let attached = [_PagedEnd.head, .tail].contains {
      fetches[$0]?.attach(continuation, toWaiter: caller) ?? false
    }
    assert(attached, "a reserved caller is listed or has an outcome parked")
    return isCancelled ? cancelWaiter(caller, at: now) : _PagedEffects<T>()
  }

  /// The caller `id` was cancelled: it gets `CancellationError` (resumed, or parked while it
  /// is reserved), and its fetch is cancelled if that abandons it.
  @inlinable
  mutating func cancelWaiter(_ id: UInt64, at now: Date?) -> _PagedEffects<T> {
    var effects = _PagedEffects<T>()
    for end in [_PagedEnd.head, .tail] {
      guard let waiter = fetches[end]?.removeWaiter(id) else { continue }
      fetches[end]!.abandoned = true
      if let continuation = waiter.continuation {
        effects.resumed.append((continuation, .failure(CancellationError())))
      } else {
        parked.park(.failure(CancellationError()), for: id)
      }
      cancelIfAbandoned(end, at: now, &effects)
    }
    return effects
  }

  /// Starts a fetch of `end` unless one is in flight.
  @inlinable
  mutating func ensureFetch(
    _ end: _PagedEnd, background: Bool, at now: Date?, _ effects: inout _PagedEffects<T>
  ) {
    if fetches[end] != nil {
      if background { fetches[end]!.background = true }
      return
    }
    let id = nextID()
    fetches[end] = _ResourceFetch(id: id, background: background)
    effects.startFetches.append((end, id))
    notify(at: now, &effects)
  }

  /// Cancels the fetch of `end` when every caller that waited for it was cancelled, nobody
  /// observes the list, nothing else depends on it, and it is not landing yet.
  @inlinable
  mutating func cancelIfAbandoned(
    _ end: _PagedEnd, at now: Date?, _ effects: inout _PagedEffects<T>
  ) {
    guard let fetch = fetches[end], fetch.abandoned, fetch.waiters.isEmpty, !fetch.background,
      !fetch.landing, audience.observers.isEmpty
    else { return }
    if let task = fetch.task { effects.cancelled.append(task) }
    fetches[end] = nil
    notify(at: now, &effects)
    settle(at: now, &effects)
  }

  // MARK: The fetch

  /// Records the task of the fetch `id`; returns `false` when it is no longer in flight.
  @inlinable
  mutating func attach(_ task: Task<Void, Never>, toFetch id: UInt64) -> Bool {
    guard let end = fetches.end(of: id) else { return false }
    fetches[end]!.task = task
    return true
  }

  /// The end of the fetch `id`, if it is still in flight.
  @inlinable
  func isInFlight(_ id: UInt64) -> _PagedEnd? { fetches.end(of: id) }

  /// The fetch `id` got a page: it can no longer be cancelled. Returns `false` when it is no
  /// longer in flight (cancelled): then its page is dropped.
  @inlinable
  mutating func beginLanding(_ id: UInt64) -> Bool {
    guard let end = fetches.end(of: id) else { return false }
    fetches[end]!.landing = true
    return true
  }

  /// The fetch `id` wrote its page (its change already applied), or had none to ask for.
  @inlinable
  mutating func land(_ id: UInt64, at now: Date?) -> _PagedEffects<T> {
    var effects = _PagedEffects<T>()
    guard let end = fetches.end(of: id), let fetch = fetches[end] else { return effects }
    if end == .head { answer.invalidated = fetch.invalidated }
    finish(end, error: nil, at: now, &effects)
    return effects
  }

  /// The fetch `id` failed with `error`, after its retries: the list stays as it was.
  @inlinable
  mutating func fail(_ id: UInt64, _ error: any Error, at now: Date?) -> _PagedEffects<T> {
    var effects = _PagedEffects<T>()
    guard let end = fetches.end(of: id) else { return effects }
    finish(end, error: error, at: now, &effects)
    return effects
  }

  /// Ends the fetch of `end`: its callers get the items (or `error`), the observers one new
  /// state.
  @inlinable
  mutating func finish(
    _ end: _PagedEnd, error: (any Error)?, at now: Date?, _ effects: inout _PagedEffects<T>
  ) {
    guard let fetch = fetches[end] else { return }
    fetches[end] = nil
    self.error = error
    if !fetch.waiters.isEmpty {
      // NB: one box for every caller.
      let outcome: _ResourceOutcome =
        error.map { .failure($0) } ?? .success(_Answer(answer.items))
      for continuation in fetch.endWaiters(with: outcome, parking: &parked) {
        effects.resumed.append((continuation, outcome))
      }
    }
    notify(at: now, &effects)
    settle(at: now, &effects)
  }

  // MARK: The list

  /// A landing changed the list: see `_PagedAnswer.apply(_:)`. Returns what the list let go
  /// of, to be released once no lock is held.
  @inlinable
  mutating func apply(_ change: _PagedChange<T>) -> [[T]] {
    defer { noteFetchedAt() }
    return answer.apply(change)
  }

  /// Boxes the list's `fetchedAt` again for its states, if it changed.
  @inlinable
  mutating func noteFetchedAt() {
    guard details?.fetchedAt != answer.fetchedAt else { return }
    details = _PagedDetails(fetchedAt: answer.fetchedAt, error: error)
  }

  /// The map changed the list (an entity in it written or removed by anyone), and showed it
  /// as `snapshot`. While a fetch lands, its own notification tells the observers.
  @inlinable
  mutating func offer(_ snapshot: _PagedSnapshot<T>, at now: Date?) -> _PagedEffects<T> {
    var effects = _PagedEffects<T>()
    let (taken, released) = answer.take(snapshot)
    effects.released = released
    guard taken else { return effects }
    noteFetchedAt()
    if !fetches.isLanding { notify(at: now, &effects) }
    settle(at: now, &effects)
    return effects
  }

  /// `invalidate()`: the list is stale from now on, until a refresh that starts after this
  /// lands.
  @inlinable
  mutating func invalidate(at now: Date?) -> _PagedEffects<T> {
    var effects = _PagedEffects<T>()
    guard !audience.isLetGo else { return effects }
    let wasStale = isStale(at: now)
    answer.invalidated = true
    fetches.head?.invalidated = true
    if !wasStale { notify(at: now, &effects) }
    settle(at: now, &effects)
    return effects
  }

  // MARK: Audience

  /// Adds an observer. Returns the state and version to deliver first.
  @inlinable
  mutating func addObserver(_ observer: _Subscriber<PagedState<T>>, at now: Date?)
    -> (state: PagedState<T>, version: UInt64, effects: _PagedEffects<T>)
  {
    var effects = _PagedEffects<T>()
    audience.observers.append(observer)
    settle(at: now, &effects)
    return (state(at: now), version, effects)
  }

  /// Removes an observer, which may abandon a fetch and start the keep timer.
  @inlinable
  mutating func removeObserver(_ observer: _AnySubscriber, at now: Date?) -> _PagedEffects<T> {
    var effects = _PagedEffects<T>()
    guard let index = audience.observers.firstIndex(where: { $0 === observer }) else {
      return effects
    }
    audience.observers.remove(at: index)
    cancelIfAbandoned(.head, at: now, &effects)
    cancelIfAbandoned(.tail, at: now, &effects)
    settle(at: now, &effects)
    return effects
  }

  /// A new `PagedResource` handle; `false` once the list is let go.
  @inlinable
  mutating func addHandle(at now: Date?) -> (Bool, _PagedEffects<T>) {
    var effects = _PagedEffects<T>()
    guard !audience.isLetGo else { return (false, effects) }
    audience.handles += 1
    settle(at: now, &effects)
    return (true, effects)
  }

  /// A `PagedResource` handle went.
  @inlinable
  mutating func removeHandle(at now: Date?) -> _PagedEffects<T> {
    var effects = _PagedEffects<T>()
    audience.handles -= 1
    settle(at: now, &effects)
    return effects
  }

  // MARK: Timers

  /// Records the task of a timer; returns `false` when that timer was superseded.
  @inlinable
  mutating func attach(
    _ task: Task<Void, Never>, toTimer kind: _ResourceTimerKind, generation: UInt64
  ) -> Bool {
    switch kind {
    case .stale:
      guard timers.stale?.generation == generation else { return false }
      timers.stale!.task = task
    case .keep:
      guard timers.keep?.generation == generation else { return false }
      timers.keep!.task = task
    }
    return true
  }

  /// A timer woke up.
  @inlinable
  mutating func timerFired(_ kind: _ResourceTimerKind, generation: UInt64, at now: Date?)
    -> _PagedEffects<T>
  {
    var effects = _PagedEffects<T>()
    switch kind {
    case .stale:
      guard timers.stale?.generation == generation else { return effects }
      timers.stale = nil
      if isStale(at: now) { notify(at: now, &effects) }
    case .keep:
      guard timers.keep?.generation == generation else { return effects }
      timers.keep = nil
      if isUnused {
        audience.isLetGo = true
        effects.letGo = true
      }
    }
    settle(at: now, &effects)
    return effects
  }

  /// Whether nothing depends on the list: no handle, no observer, no fetch in flight.
  @inlinable
  var isUnused: Bool {
    audience.handles == 0 && audience.observers.isEmpty && fetches.head == nil
      && fetches.tail == nil
  }

  /// Brings the timers in line with the state: a stale timer while an observed list is
  /// fresh, a keep timer while nothing uses the list.
  @inlinable
  mutating func settle(at now: Date?, _ effects: inout _PagedEffects<T>) {
    var staleDeadline: Date?
    if !audience.observers.isEmpty, !audience.isLetGo, !isStale(at: now), let now,
      let fetchedAt = answer.fetchedAt
    {
      staleDeadline = fetchedAt.addingTimeInterval(settings.staleAfter._seconds)
      if timers.stale?.deadline != staleDeadline {
        let wait = max(0, staleDeadline!.timeIntervalSince(now))
        replaceStaleTimer(staleDeadline, wait: wait, &effects)
      }
    } else if timers.stale != nil {
      replaceStaleTimer(nil, wait: 0, &effects)
    }
    let keeps = isUnused && !audience.isLetGo
    if keeps && timers.keep == nil {
      let generation = nextID()
      timers.keep = _ResourceTimer(generation: generation, deadline: nil)
      effects.timers.append((.keep, generation, settings.keepFor))
    } else if !keeps, let keep = timers.keep {
      if let task = keep.task { effects.cancelled.append(task) }
      timers.keep = nil
    }
  }

  /// Cancels the stale timer, and starts one for `deadline`, `wait` seconds from now, if any.
  @inlinable
  mutating func replaceStaleTimer(
    _ deadline: Date?, wait: Double, _ effects: inout _PagedEffects<T>
  ) {
    if let task = timers.stale?.task { effects.cancelled.append(task) }
    timers.stale = nil
    guard let deadline else { return }
    let generation = nextID()
    timers.stale = _ResourceTimer(generation: generation, deadline: deadline)
    effects.timers.append((.stale, generation, .nanoseconds(Int64((wait * 1e9).rounded(.up)))))
  }

  /// The state changed: one new version for the observers.
  @inlinable
  mutating func notify(at now: Date?, _ effects: inout _PagedEffects<T>) {
    version += 1
    // NB: no state without observers: a state held by the effects while a fetch starts (at
    // once, on the caller's thread) would share the items, and the page it lands would copy
    // the whole list to append to it.
    effects.delivery =
      audience.observers.isEmpty ? nil : (state(at: now), version, audience.observers)
  }
}
