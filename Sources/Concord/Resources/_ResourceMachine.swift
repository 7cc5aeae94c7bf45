import Foundation

// A resource's state machine: everything one resource knows, as one value whose transitions
// return what to do (`_ResourceEffects`). `_ResourceCore` keeps it under a small lock of the
// resource's own, calls a transition, unlocks, then acts: starts or cancels the loader's task,
// resumes the callers that waited, tells the observers, starts or cancels a timer. Nothing here
// calls the map, the loader, the clock or a callback; time comes in as `now`.
//
// The rules it keeps (the API's "Resource semantics users rely on"):
// - One fetch per key: a demand that needs a fetch joins the one in flight (`ensureFetch`).
// - A fetch is cancelled only when every caller that waited for it was cancelled, nobody
//   observes the resource, and nothing that cannot be cancelled (a stale-while-revalidate
//   refresh) depends on it; it then lands nothing (`cancelIfAbandoned`).
// - Failures keep the answer: `fail` sets the error and touches nothing else.
// - The answer is what the map has: `offer` takes each value read from the map with the map's
//   version at the read, and keeps the newest read; a landing's own read is one more offer.
// - Observers hear each change once: each transition that changes what a state shows bumps
//   `version` once (`notify`), and an offer that arrives while a fetch lands waits for the
//   landing's single notification.
//
// NB: nothing here is generic over the resource's value. A `Resource` is called from another
// module, where its generic code runs unspecialized, and there every aggregate of `Value` (an
// optional, a tuple, an enum or a struct holding one) needs its metadata looked up at run time:
// those lookups were most of a `load()` of a fresh answer. So the machine holds the answer
// boxed (`_AnyAnswer`), its waiters wait for a `_ResourceOutcome`, its observers are
// `_AnySubscriber`s, and `_ResourceCore` opens the box only to hand the value out.

/// What a resource was configured with, by the call that made it.
@usableFromInline
struct _ResourceSettings: Sendable {
  let policy: FetchPolicy
  /// Never negative.
  @usableFromInline let staleAfter: Duration
  /// Never negative.
  @usableFromInline let keepFor: Duration

  @usableFromInline
  init(policy: FetchPolicy, staleAfter: Duration, keepFor: Duration) {
    self.policy = policy
    self.staleAfter = staleAfter
    self.keepFor = keepFor
  }
}

/// A resource's answer, boxed (an `_Answer<Value>` of the resource's `Value`), so that the
/// machine holds it without knowing its type.
@usableFromInline typealias _AnyAnswer = AnyObject & Sendable

/// One value of a resource's answer, as read from the map, in a box the machine holds.
@usableFromInline
final class _Answer<Value: Sendable>: Sendable {
  @usableFromInline let value: Value

  @inlinable
  init(_ value: Value) {
    self.value = value
  }

  /// `value`, boxed; `nil` for `nil`.
  @inlinable
  static func box(_ value: consuming Value?) -> _AnyAnswer? {
    guard let value else { return nil }
    return _Answer(value)
  }
}

/// What a waiting caller is resumed with: the answer, or an error.
@usableFromInline
typealias _ResourceOutcome = Result<_AnyAnswer, any Error>

/// The answer a resource holds, as last read from the map, and what it knows about it.
struct _ResourceAnswer {
  /// The slot's value at the last read, boxed; `nil` before the first answer, or once a
  /// single entity answer is removed.
  var value: _AnyAnswer?
  /// The map's delivery version when `value` was read: a read at a higher version is newer.
  var version: UInt64 = 0
  var fetchedAt: Date?
  var validator: String?
  /// Whether `invalidate()` was called since the answer was fetched.
  var invalidated = false
}

/// How a waiting caller is resumed.
///
/// NB: checked in debug builds, where a caller resumed twice, or never, stops the program with
/// a message (every test runs there); unchecked in release builds, where the checked kind's
/// object, allocated and freed on every wait, costs as much as a lock section. The machines
/// resume each waiter exactly once: a waiter leaves `waiters` as it is resumed.
#if DEBUG
  @usableFromInline
  typealias _ResourceContinuation = CheckedContinuation<_ResourceOutcome, Never>
#else
  @usableFromInline
  typealias _ResourceContinuation = UnsafeContinuation<_ResourceOutcome, Never>
#endif

/// Suspends the calling task until the continuation handed to `body` is resumed, and returns
/// what it was resumed with; on `isolation`, as `withCheckedContinuation` is.
func _awaitOutcome(
  isolation: isolated (any Actor)? = #isolation, _ body: (_ResourceContinuation) -> Void
) async -> _ResourceOutcome {
  #if DEBUG
    await withCheckedContinuation(isolation: isolation, body)
  #else
    await withUnsafeContinuation(isolation: isolation, body)
  #endif
}

/// The outcome of a caller reserved on a fetch (see `_ResourceWaiter`): the one `collect`
/// finds parked, if any; else the one its continuation is resumed with, once `suspend` has
/// handed the continuation to the machine, under the caller's cancellation handler `onCancel`.
/// One mechanism for both cores: `_ResourceCore.demand(_:)` and `_PagedCore.demand(_:)`.
///
/// NB: `suspend` reads the task's cancellation under the machine's lock, as `onCancel` takes
/// it: a cancellation either comes before (and is seen there) or finds the caller listed.
@inline(__always)
@usableFromInline
func _outcome(
  isolation: isolated (any Actor)? = #isolation,
  collect: () -> _ResourceOutcome?,
  suspend: (_ResourceContinuation) -> Void,
  onCancel: @Sendable () -> Void
) async -> _ResourceOutcome {
  if let parked = collect() { return parked }
  return await withTaskCancellationHandler(
    operation: { await _awaitOutcome(isolation: isolation, suspend) }, onCancel: onCancel,
    isolation: isolation)
}

/// A caller of a fetch. It is listed, reserved, when its demand is decided, under the lock,
/// before its task suspends (`continuation` is `nil` until then): the fetch it waits for can
/// start, and even end, before that, outside every cancellation handler (see
/// `_ResourceCore.demand(_:)`).
@usableFromInline
struct _ResourceWaiter {
  let id: UInt64
  @usableFromInline var continuation: _ResourceContinuation?
}

/// The outcomes of fetches that ended while a caller of theirs was still reserved, each kept
/// until that caller collects it. Usually empty: a caller collects its outcome right after the
/// fetch it started on its own thread returns.
@usableFromInline
struct _ParkedOutcomes {
  private var entries: [(caller: UInt64, outcome: _ResourceOutcome)] = []

  /// How many outcomes are kept.
  @usableFromInline var count: Int { entries.count }

  /// Keeps `outcome` for the reserved caller `caller`.
  @usableFromInline
  mutating func park(_ outcome: _ResourceOutcome, for caller: UInt64) {
    entries.append((caller, outcome))
  }

  /// The outcome kept for `caller`, taken out; `nil` if none is.
  @usableFromInline
  mutating func take(_ caller: UInt64) -> _ResourceOutcome? {
    guard !entries.isEmpty, let index = entries.firstIndex(where: { $0.caller == caller }) else {
      return nil
    }
    return entries.remove(at: index).outcome
  }
}

/// The fetch in flight.
@usableFromInline
struct _ResourceFetch {
  @usableFromInline let id: UInt64
  @usableFromInline var waiters: [_ResourceWaiter] = []
  /// Whether something that cannot be cancelled depends on it: a background refresh
  /// (stale-while-revalidate, cacheThenNetwork).
  @usableFromInline var background: Bool
  /// Whether a waiting caller was cancelled: once none waits, and nobody observes, the fetch
  /// is cancelled.
  @usableFromInline var abandoned = false
  /// Whether its answer is being written: past the point where it can be cancelled.
  @usableFromInline var landing = false
  /// Whether the resource was invalidated while it was in flight: its answer may predate what
  /// the invalidation was about, so it lands stale.
  @usableFromInline var invalidated = false
  /// The loader's task, once started.
  @usableFromInline var task: Task<Void, Never>?

  @inlinable
  init(
    id: UInt64, waiters: [_ResourceWaiter] = [], background: Bool, abandoned: Bool = false,
    landing: Bool = false, invalidated: Bool = false, task: Task<Void, Never>? = nil
  ) {
    self.id = id
    self.waiters = waiters
    self.background = background
    self.abandoned = abandoned
    self.landing = landing
    self.invalidated = invalidated
    self.task = task
  }
}

extension _ResourceFetch {
  /// The position of the caller `id` in `waiters`, if it is listed.
  ///
  /// NB: a binary search: callers are listed as their demands are decided, each with an id
  /// taken from the machine's serial, so `waiters` is sorted by id. A thousand callers that
  /// join one fetch would otherwise each scan those listed before them as they suspend.
  func index(ofWaiter id: UInt64) -> Int? {
    var low = 0
    var high = waiters.count
    while low < high {
      let middle = (low + high) / 2
      if waiters[middle].id < id { low = middle + 1 } else { high = middle }
    }
    return low < waiters.count && waiters[low].id == id ? low : nil
  }

  /// Lists the caller `id`, reserved; `id` is newer than every id listed.
  @usableFromInline
  mutating func reserve(_ id: UInt64) {
    assert(waiters.last.map { $0.id < id } ?? true, "waiters are listed in the order of their ids")
    waiters.append(_ResourceWaiter(id: id))
  }

  /// Takes the caller `id` out of `waiters`; `nil` if it is not there.
  @usableFromInline
  mutating func removeWaiter(_ id: UInt64) -> _ResourceWaiter? {
    guard let index = index(ofWaiter: id) else { return nil }
    return waiters.remove(at: index)
  }

  /// Gives the reserved caller `id` the continuation its task now waits on; `false` if the
  /// caller is not listed.
  @usableFromInline
  mutating func attach(_ continuation: _ResourceContinuation, toWaiter id: UInt64) -> Bool {
    guard let index = index(ofWaiter: id) else { return false }
    waiters[index].continuation = continuation
    return true
  }

  /// Its callers' share of its end with `outcome`: the continuations of those that wait, to
  /// resume; the outcome of each caller still reserved is parked in `parked`.
  @usableFromInline
  func endWaiters(
    with outcome: _ResourceOutcome, parking parked: inout _ParkedOutcomes
  ) -> [_ResourceContinuation] {
    var resumed: [_ResourceContinuation] = []
    for waiter in waiters {
      if let continuation = waiter.continuation {
        resumed.append(continuation)
      } else {
        parked.park(outcome, for: waiter.id)
      }
    }
    return resumed
  }
}

/// Who depends on a resource: its observers and its live `Resource` handles.
@usableFromInline
struct _ResourceAudience {
  /// Each a `_Subscriber<ResourceState<Value>>` of the resource's `Value`.
  @usableFromInline var observers: [_AnySubscriber] = []
  @usableFromInline var handles = 0
  /// Whether the resource was let go (see `keepFor`): it takes no handle any more.
  @usableFromInline var isLetGo = false
}

/// A timer of a resource: a task sleeping on the map's clock. A newer generation supersedes it.
@usableFromInline
struct _ResourceTimer {
  @usableFromInline let generation: UInt64
  /// When it fires, for the stale timer; `nil` for the keep timer.
  @usableFromInline let deadline: Date?
  @usableFromInline var task: Task<Void, Never>?

  @inlinable
  init(generation: UInt64, deadline: Date?, task: Task<Void, Never>? = nil) {
    self.generation = generation
    self.deadline = deadline
    self.task = task
  }
}

/// The two timers of a resource.
@usableFromInline
struct _ResourceTimers {
  /// Sleeps until an observed answer turns stale, to tell its observers.
  @usableFromInline var stale: _ResourceTimer?
  /// Sleeps `keepFor` once nobody uses the resource, then lets it go.
  @usableFromInline var keep: _ResourceTimer?
}

/// Which timer.
@usableFromInline
enum _ResourceTimerKind: Sendable {
  case stale, keep
}

/// What a caller asks of a resource.
enum _ResourceDemand {
  /// `load()`, by the resource's policy.
  case load
  /// `refresh()`: a fetch, whatever the policy.
  case refresh
  /// `revalidate()`: a fetch when the resource is observed, stale, and not `cacheOnly`.
  case revalidate
}

/// What a demand gets at once.
enum _ResourceDecision {
  case answer(_AnyAnswer)
  case fail(any Error)
  /// Nothing to do (a `revalidate` of a resource that needs none).
  case skip
  /// It waits for a fetch, as the caller it reserved (see `_ResourceWaiter`).
  case wait(caller: UInt64)
}

/// What a resource's state shows, as `ResourceState` does, with the answer boxed.
struct _ResourceSnapshot {
  var answer: _AnyAnswer?
  var fetchedAt: Date?
  var isStale: Bool
  var isLoading: Bool
  var error: (any Error)?
}

/// A timer to start: which, its generation, and how long it sleeps.
struct _ResourceTimerStart {
  let kind: _ResourceTimerKind
  let generation: UInt64
  let duration: Duration
}

/// Callers to resume, all with one outcome: a transition resumes one caller (one whose fetch
/// ended before it suspended, a cancelled caller) or every caller of a fetch (its end).
struct _ResourceResumption {
  let continuations: [_ResourceContinuation]
  let outcome: _ResourceOutcome
}

/// A new state for the observers `to`, at `version`.
struct _ResourceDelivery {
  let state: _ResourceSnapshot
  let version: UInt64
  let to: [_AnySubscriber]
}

/// What a transition leaves to do once the lock is released.
struct _ResourceEffects {
  /// Tasks to cancel: a fetch abandoned, timers superseded.
  var cancelled: [Task<Void, Never>] = []
  /// The fetch to start.
  var startFetch: UInt64?
  /// Timers to start.
  var timers: [_ResourceTimerStart] = []
  /// Callers to resume.
  var resumed: _ResourceResumption?
  /// A new state for the observers; `nil` when nobody observes.
  var delivery: _ResourceDelivery?
  /// Whether the resource is let go now.
  var letGo = false
}

extension _ResourceEffects {
  /// Resumes `continuations` with `outcome`. A transition resumes one set of callers at most.
  mutating func resume(_ continuations: [_ResourceContinuation], with outcome: _ResourceOutcome) {
    assert(resumed == nil, "a transition resumed two sets of callers")
    resumed = _ResourceResumption(continuations: continuations, outcome: outcome)
  }
}

/// A resource's state; see the top of this file.
struct _ResourceMachine {
  let settings: _ResourceSettings
  var answer = _ResourceAnswer()
  var fetch: _ResourceFetch?
  var error: (any Error)?
  var audience = _ResourceAudience()
  var timers = _ResourceTimers()
  /// The version of the newest state handed to observers.
  var version: UInt64 = 1
  /// The last id handed out, to fetches, waiters and timers alike.
  var serial: UInt64 = 0
  /// What callers whose fetch ended before they suspended get when they collect.
  var parked = _ParkedOutcomes()

  init(settings: _ResourceSettings) {
    self.settings = settings
  }

  /// A new id.
  mutating func nextID() -> UInt64 {
    serial += 1
    return serial
  }

  // MARK: Reading

  /// Whether the answer is stale at `now`: none, as old as `staleAfter` or older, or
  /// invalidated.
  func isStale(at now: Date) -> Bool {
    guard answer.value != nil, let fetchedAt = answer.fetchedAt, !answer.invalidated else {
      return true
    }
    return settings.staleAfter == .zero
      || now.timeIntervalSince(fetchedAt) >= settings.staleAfter._seconds
  }

  /// The state at `now`.
  func state(at now: Date) -> _ResourceSnapshot {
    _ResourceSnapshot(
      answer: answer.value, fetchedAt: answer.fetchedAt, isStale: isStale(at: now),
      isLoading: fetch != nil, error: error)
  }

  /// What `demand` gets from the answer as it is, before any fetch.
  func decide(_ demand: _ResourceDemand, at now: Date) -> _Verdict {
    switch demand {
    case .refresh:
      return .fetch
    case .revalidate:
      guard settings.policy != .cacheOnly, !audience.observers.isEmpty else { return .skip }
      return fetch != nil || isStale(at: now) ? .fetch : .skip
    case .load:
      let value = answer.value
      switch settings.policy._kind {
      case .cacheOnly:
        return value.map { .answer($0, refreshing: false) } ?? .fail(ResourceError.notCached)
      case .cacheFirst:
        return value.map { .answer($0, refreshing: isStale(at: now)) } ?? .fetch
      case .cacheThenNetwork:
        return value.map { .answer($0, refreshing: true) } ?? .fetch
      case .networkOnly:
        return .fetch
      }
    }
  }

  /// What a demand gets from the answer as it is.
  enum _Verdict {
    /// The answer, and whether a background fetch follows.
    case answer(_AnyAnswer, refreshing: Bool)
    case fail(any Error)
    case skip
    case fetch
  }

  // MARK: Demands

  /// `demand` from a caller: an answer at once (starting a background fetch if the policy
  /// says so), or `.wait`, with the caller reserved on the fetch in flight, which is started
  /// if there is none. A caller whose task is cancelled gets `CancellationError` instead of
  /// starting a fetch.
  mutating func begin(_ demand: _ResourceDemand, at now: Date, isCancelled: Bool)
    -> (_ResourceDecision, _ResourceEffects)
  {
    var effects = _ResourceEffects()
    switch decide(demand, at: now) {
    case .answer(let value, let refreshing):
      if refreshing { ensureFetch(background: true, at: now, &effects) }
      return (.answer(value), effects)
    case .fail(let error):
      return (.fail(error), effects)
    case .skip:
      return (.skip, effects)
    case .fetch:
      guard !isCancelled else { return (.fail(CancellationError()), effects) }
      ensureFetch(background: false, at: now, &effects)
      let caller = nextID()
      fetch!.reserve(caller)
      return (.wait(caller: caller), effects)
    }
  }

  /// The outcome of the reserved `caller`, if its fetch already ended.
  mutating func collect(_ caller: UInt64) -> _ResourceOutcome? {
    parked.take(caller)
  }

  /// The reserved `caller`'s task suspends on `continuation`: it waits for its fetch, or is
  /// resumed at once if that fetch ended meanwhile or its task is cancelled (which abandons the
  /// fetch as `cancelWaiter(_:at:)` does).
  mutating func suspend(
    _ caller: UInt64, on continuation: _ResourceContinuation, isCancelled: Bool, at now: Date
  ) -> _ResourceEffects {
    if let outcome = parked.take(caller) {
      var effects = _ResourceEffects()
      effects.resume([continuation], with: outcome)
      return effects
    }
    let attached = fetch?.attach(continuation, toWaiter: caller) ?? false
    assert(attached, "a reserved caller is listed or has an outcome parked")
    return isCancelled ? cancelWaiter(caller, at: now) : _ResourceEffects()
  }

  /// The caller `id` was cancelled: it gets `CancellationError` (resumed, or parked while it
  /// is reserved), and the fetch is cancelled if that abandons it.
  mutating func cancelWaiter(_ id: UInt64, at now: Date) -> _ResourceEffects {
    var effects = _ResourceEffects()
    guard let waiter = fetch?.removeWaiter(id) else { return effects }
    fetch!.abandoned = true
    if let continuation = waiter.continuation {
      effects.resume([continuation], with: .failure(CancellationError()))
    } else {
      parked.park(.failure(CancellationError()), for: id)
    }
    cancelIfAbandoned(at: now, &effects)
    return effects
  }

  /// Starts a fetch unless one is in flight; a background demand marks the one in flight as
  /// one that cannot be cancelled.
  mutating func ensureFetch(
    background: Bool, at now: Date, _ effects: inout _ResourceEffects
  ) {
    if fetch != nil {
      if background { fetch!.background = true }
      return
    }
    let id = nextID()
    fetch = _ResourceFetch(id: id, background: background)
    effects.startFetch = id
    notify(at: now, &effects)
  }

  /// Cancels the fetch when every caller that waited for it was cancelled, nobody observes the
  /// resource, nothing else depends on it, and it is not landing yet.
  mutating func cancelIfAbandoned(at now: Date, _ effects: inout _ResourceEffects) {
    guard let fetch, fetch.abandoned, fetch.waiters.isEmpty, !fetch.background, !fetch.landing,
      audience.observers.isEmpty
    else { return }
    if let task = fetch.task { effects.cancelled.append(task) }
    self.fetch = nil
    notify(at: now, &effects)
    settle(at: now, &effects)
  }

  // MARK: The fetch

  /// Records the task of the fetch `id`; returns `false` when that fetch is no longer in
  /// flight (then the caller cancels the task).
  mutating func attach(_ task: Task<Void, Never>, toFetch id: UInt64) -> Bool {
    guard fetch?.id == id else { return false }
    fetch!.task = task
    return true
  }

  /// What try number `attempt` of the fetch `id` asks; `nil` when the fetch is no longer in
  /// flight. The validator is sent only with an answer to confirm.
  func request(forFetch id: UInt64, attempt: Int) -> ResourceRequest? {
    guard fetch?.id == id else { return nil }
    return ResourceRequest(
      validator: answer.value == nil ? nil : answer.validator, attempt: attempt)
  }

  /// Whether the fetch `id` is still in flight.
  func isInFlight(_ id: UInt64) -> Bool { fetch?.id == id }

  /// The fetch `id` got a value: it can no longer be cancelled. Returns `false` when it is no
  /// longer in flight (cancelled): then its value is dropped.
  mutating func beginLanding(_ id: UInt64) -> Bool {
    guard fetch?.id == id else { return false }
    fetch!.landing = true
    return true
  }

  /// What a `.notModified` of the fetch `id` does.
  enum _Confirmation {
    /// The fetch is no longer in flight.
    case gone
    /// Nothing is cached to confirm: the fetch fails.
    case noAnswer
    /// It confirms the answer.
    case confirming
  }

  /// The fetch `id` answered `.notModified`.
  mutating func beginConfirming(_ id: UInt64) -> _Confirmation {
    guard fetch?.id == id else { return .gone }
    guard answer.value != nil else { return .noAnswer }
    fetch!.landing = true
    return .confirming
  }

  /// The fetch `id` wrote its answer, which the map then showed as `value` at `mapVersion`.
  mutating func land(
    _ id: UInt64, value: _AnyAnswer?, mapVersion: UInt64, fetchedAt: Date, validator: String?,
    at now: Date
  ) -> _ResourceEffects {
    var effects = _ResourceEffects()
    guard let fetch, fetch.id == id else { return effects }
    take(value, mapVersion: mapVersion)
    answer.fetchedAt = fetchedAt
    answer.validator = validator
    finish(fetch, error: nil, at: now, &effects)
    return effects
  }

  /// The fetch `id` confirmed the answer (`.notModified`) at `fetchedAt`.
  mutating func confirm(_ id: UInt64, fetchedAt: Date, at now: Date) -> _ResourceEffects {
    var effects = _ResourceEffects()
    guard let fetch, fetch.id == id else { return effects }
    answer.fetchedAt = fetchedAt
    finish(fetch, error: nil, at: now, &effects)
    return effects
  }

  /// The fetch `id` failed with `error`, after its retries: the answer stays as it was.
  mutating func fail(_ id: UInt64, _ error: any Error, at now: Date) -> _ResourceEffects {
    var effects = _ResourceEffects()
    guard let fetch, fetch.id == id else { return effects }
    finish(fetch, error: error, at: now, &effects)
    return effects
  }

  /// Ends `fetch`: its callers get the answer (or `error`), the observers one new state.
  private mutating func finish(
    _ fetch: _ResourceFetch, error: (any Error)?, at now: Date,
    _ effects: inout _ResourceEffects
  ) {
    self.fetch = nil
    self.error = error
    if error == nil { answer.invalidated = fetch.invalidated }
    let outcome: _ResourceOutcome =
      if let error { .failure(error) } else if let value = answer.value { .success(value) } else {
        .failure(ResourceError.answerRemoved)
      }
    let resumed = fetch.endWaiters(with: outcome, parking: &parked)
    if !resumed.isEmpty { effects.resume(resumed, with: outcome) }
    notify(at: now, &effects)
    settle(at: now, &effects)
  }

  // MARK: The answer

  /// Keeps `value`, read from the map at `mapVersion`, if it is newer than the answer held.
  /// Returns whether it was.
  @discardableResult
  mutating func take(_ value: _AnyAnswer?, mapVersion: UInt64) -> Bool {
    guard mapVersion > answer.version else { return false }
    answer.value = value
    answer.version = mapVersion
    return true
  }

  /// The map changed the answer (an entity in it written or removed by anyone), and showed
  /// `value` at `mapVersion`. While a fetch lands, its own notification tells the observers.
  mutating func offer(_ value: _AnyAnswer?, mapVersion: UInt64, at now: Date) -> _ResourceEffects {
    var effects = _ResourceEffects()
    guard take(value, mapVersion: mapVersion) else { return effects }
    if fetch?.landing != true { notify(at: now, &effects) }
    settle(at: now, &effects)
    return effects
  }

  /// `invalidate()`: the answer is stale from now on, until a fetch that starts after this
  /// lands.
  mutating func invalidate(at now: Date) -> _ResourceEffects {
    var effects = _ResourceEffects()
    guard !audience.isLetGo else { return effects }
    let wasStale = isStale(at: now)
    answer.invalidated = true
    fetch?.invalidated = true
    if !wasStale { notify(at: now, &effects) }
    settle(at: now, &effects)
    return effects
  }

  // MARK: Audience

  /// Adds an observer; it starts after the current version unless it asked for the current
  /// state. Returns the state and version to deliver first.
  mutating func addObserver(_ observer: _AnySubscriber, at now: Date)
    -> (state: _ResourceSnapshot, version: UInt64, effects: _ResourceEffects)
  {
    var effects = _ResourceEffects()
    audience.observers.append(observer)
    settle(at: now, &effects)
    return (state(at: now), version, effects)
  }

  /// Removes an observer, which may abandon the fetch and start the keep timer.
  mutating func removeObserver(_ observer: _AnySubscriber, at now: Date) -> _ResourceEffects {
    var effects = _ResourceEffects()
    guard let index = audience.observers.firstIndex(where: { $0 === observer }) else {
      return effects
    }
    audience.observers.remove(at: index)
    cancelIfAbandoned(at: now, &effects)
    settle(at: now, &effects)
    return effects
  }

  /// A new `Resource` handle; `false` once the resource is let go.
  mutating func addHandle(at now: Date) -> (Bool, _ResourceEffects) {
    var effects = _ResourceEffects()
    guard !audience.isLetGo else { return (false, effects) }
    audience.handles += 1
    settle(at: now, &effects)
    return (true, effects)
  }

  /// A `Resource` handle went.
  mutating func removeHandle(at now: Date) -> _ResourceEffects {
    var effects = _ResourceEffects()
    audience.handles -= 1
    settle(at: now, &effects)
    return effects
  }

  // MARK: Timers

  /// Records the task of a timer; returns `false` when that timer was superseded (then the
  /// caller cancels the task).
  mutating func attach(
    _ task: Task<Void, Never>, toTimer kind: _ResourceTimerKind, generation: UInt64
  )
    -> Bool
  {
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
  mutating func timerFired(_ kind: _ResourceTimerKind, generation: UInt64, at now: Date)
    -> _ResourceEffects
  {
    var effects = _ResourceEffects()
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

  /// Whether nothing depends on the resource: no handle, no observer, no fetch in flight.
  var isUnused: Bool {
    audience.handles == 0 && audience.observers.isEmpty && fetch == nil
  }

  /// Brings the timers in line with the state: a stale timer while an observed answer is
  /// fresh, a keep timer while nothing uses the resource.
  mutating func settle(at now: Date, _ effects: inout _ResourceEffects) {
    // The stale timer.
    var staleDeadline: Date?
    if !audience.observers.isEmpty, !audience.isLetGo, !isStale(at: now),
      let fetchedAt = answer.fetchedAt
    {
      staleDeadline = fetchedAt.addingTimeInterval(settings.staleAfter._seconds)
    }
    if timers.stale?.deadline != staleDeadline {
      if let task = timers.stale?.task { effects.cancelled.append(task) }
      timers.stale = nil
      if let staleDeadline {
        let generation = nextID()
        timers.stale = _ResourceTimer(generation: generation, deadline: staleDeadline)
        let wait = max(0, staleDeadline.timeIntervalSince(now))
        effects.timers.append(
          _ResourceTimerStart(
            kind: .stale, generation: generation,
            duration: .nanoseconds(Int64((wait * 1e9).rounded(.up)))))
      }
    }
    // The keep timer.
    let keeps = isUnused && !audience.isLetGo
    if keeps && timers.keep == nil {
      let generation = nextID()
      timers.keep = _ResourceTimer(generation: generation, deadline: nil)
      effects.timers.append(
        _ResourceTimerStart(kind: .keep, generation: generation, duration: settings.keepFor))
    } else if !keeps, let keep = timers.keep {
      if let task = keep.task { effects.cancelled.append(task) }
      timers.keep = nil
    }
  }

  /// The state changed: one new version, for the observers if any.
  mutating func notify(at now: Date, _ effects: inout _ResourceEffects) {
    version += 1
    effects.delivery =
      audience.observers.isEmpty
      ? nil : _ResourceDelivery(state: state(at: now), version: version, to: audience.observers)
  }
}

/// What a `revalidate()` that found nothing to do is resumed with; never seen by users.
@usableFromInline
struct _Skipped: Error {
  @inlinable init() {}
}
