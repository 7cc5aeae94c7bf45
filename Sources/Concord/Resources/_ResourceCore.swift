import Foundation
import _ConcordAtomics

/// What the map's registry of resources asks of each, whatever its value type or kind.
@usableFromInline
protocol _ResourceEntry: AnyObject, Sendable {
  /// The name of its key.
  var name: String { get }
  /// Takes a handle on it for a new `Resource`; `false` once it is let go.
  func acquireHandle() -> Bool
  /// `invalidate()`.
  func invalidate()
  /// Refreshes it if it is observed, stale and not `cacheOnly`; returns when that fetch
  /// settled, whatever its outcome.
  func revalidate() async
}

/// How a resource fetches: its loader, its retries, and the clock they run on.
struct _ResourceFetcher<Value: Sendable>: Sendable {
  let clock: any ResourceClock
  let retry: RetryPolicy
  let load: @Sendable (ResourceRequest) async throws -> Fetched<Value>
  /// Whether a fetch a caller waits for starts on the caller's thread (`Task.immediate`);
  /// tests turn it off to run the same steps with every fetch enqueued.
  let startsInline: Bool
}

/// One resource: its state machine under its own lock, and the actions that state asks for.
///
/// Every transition of `_ResourceMachine` runs under `lock`, and what it returns is done after
/// the lock is released (`perform`): the loader, the clock, the map and every callback run
/// outside it. The lock is a leaf: nothing is called while holding it.
final class _ResourceCore<Value: Sendable>: _ResourceEntry, @unchecked Sendable {
  // NB: @unchecked because `machine` and `links` are only touched while holding
  // `lock`.

  let key: ResourceKey<Value>
  let fetcher: _ResourceFetcher<Value>
  /// The slot of the map holding the answer.
  let slot: _AnswerSlot<Value>
  private let lock = Lock()
  // NB: exclusivity checks off in release builds, as on the paged list's core: `lock` already
  // makes every access exclusive.
  #if DEBUG
    private var machine: _ResourceMachine
    /// What the resource keeps beside its state, under `lock` too.
    private var links = _ResourceLinks()
  #else
    @exclusivity(unchecked) private var machine: _ResourceMachine
    @exclusivity(unchecked) private var links = _ResourceLinks()
  #endif
  /// Guards the observers' delivery state (see `_Subscriber`); never held while calling out.
  let deliveryLock = Lock()
  /// The registry that lists the resource, to be taken out of it when let go. NB: weak: the
  /// registry holds the resource while it is live, and lives as long as its map.
  private weak var registry: _ResourceRegistry?

  /// A resource with `handles` handles, whose answer is in `slot`, as the map and the store
  /// had it when the slot was made.
  init(
    key: ResourceKey<Value>, settings: _ResourceSettings, fetcher: _ResourceFetcher<Value>,
    slot: _AnswerSlot<Value>, stored: _StoredAnswerInfo?, registry: _ResourceRegistry
  ) {
    self.key = key
    self.fetcher = fetcher
    self.slot = slot
    self.registry = registry
    machine = _ResourceMachine(settings: settings)
    machine.answer.fetchedAt = stored?.fetchedAt
    machine.answer.validator = stored?.validator
    machine.audience.handles = 1
  }

  deinit {
    // NB: a timer's task holds the resource weakly, and would sleep on, to no purpose, until
    // its deadline: on a manual clock that is never advanced, forever.
    for timer in [machine.timers.stale, machine.timers.keep] { timer?.task?.cancel() }
  }

  /// Starts following the map's changes of the answer, and reads it. Called once, right after
  /// `init`, before anyone else sees the resource.
  func open() {
    // NB: subscribed before the read, so that no change falls in between: a change after the
    // read is delivered, and one before it is in the read.
    // NB: weak: the resource holds the subscription (`links`), which would otherwise hold the
    // resource back.
    let subscription = slot.observer.observe { [weak self] _ in self?.answerChanged() }
    let (answer, mapVersion) = slot.read()
    lock.withLock {
      links.answerSubscription = subscription
      machine.take(answer, mapVersion: mapVersion)
    }
  }

  var name: String { key.name }

  /// Its key in the registry.
  var registryKey: _ResourceRegistry.Key {
    _ResourceRegistry.Key(name: key.name, kind: .resource, valueType: ObjectIdentifier(Value.self))
  }

  // MARK: Reading

  /// How many callers wait for the fetch in flight; for tests.
  var waiters: Int {
    lock.withLock { machine.fetch?.waiters.count ?? 0 }
  }

  /// How many loader tasks are running, a cancelled one included until it returns; for tests.
  var runningFetches: Int {
    lock.withLock { links.runningFetches }
  }

  /// How many outcomes wait for a caller to collect them; for tests (0 once every caller
  /// returned).
  var parkedOutcomes: Int {
    lock.withLock { machine.parked.count }
  }

  /// The state now.
  var state: ResourceState<Value> {
    let now = fetcher.clock.now
    return state(lock.withLock { machine.state(at: now) })
  }

  /// What `snapshot` shows, with its answer's value out of its box.
  private func state(_ snapshot: _ResourceSnapshot) -> ResourceState<Value> {
    ResourceState(
      value: snapshot.answer.map(value(of:)), fetchedAt: snapshot.fetchedAt,
      isStale: snapshot.isStale, isLoading: snapshot.isLoading, error: snapshot.error)
  }

  /// The value in `answer`, a box of the machine.
  ///
  /// NB: `unsafeDowncast`: the machine only ever holds the boxes this core made (debug builds
  /// check the cast). An instance method, not a static one of `_Answer<Value>`: it finds
  /// `Value` in the resource's own class metadata, where a static method would look up that of
  /// `_Answer<Value>` at run time, on every `load()`.
  private func value(of answer: _AnyAnswer) -> Value {
    unsafeDowncast(answer, to: _Answer<Value>.self).value
  }

  // MARK: Demands

  /// `load()` (`.load`), `refresh()` (`.refresh`) or a `revalidate()`'s part (`.revalidate`).
  func demand(_ demand: _ResourceDemand) async throws -> Value {
    let now = fetcher.clock.now
    let (decision, effects) = lock.withLock {
      machine.begin(demand, at: now, isCancelled: Task.isCancelled)
    }
    let caller: UInt64
    switch decision {
    case .answer(let answer):
      perform(effects)
      return value(of: answer)
    case .fail(let error):
      perform(effects)
      throw error
    case .skip:
      perform(effects)
      throw _Skipped()
    case .wait(let reserved):
      caller = reserved
    }
    // NB: a fetch this caller waits for starts here, on its thread (unless tests turn that
    // off), before the caller suspends and outside the cancellation handler below: started
    // inside it, a task costs the runtime twice as much. A fetch that ran to its end here left
    // the caller's outcome parked. A fetch that answered at once and refreshes in the
    // background started in `perform` above, as any background refresh does.
    let started = effects.startFetch != nil
    perform(effects, startingInline: fetcher.startsInline)
    // NB: only a caller that started the fetch looks for its outcome before suspending: one
    // that joined a fetch in flight finds it parked, the rare time it is, when it suspends.
    let outcome = await _outcome(
      collect: { started ? lock.withLock { machine.collect(caller) } : nil },
      suspend: { continuation in
        let now = fetcher.clock.now
        perform(
          lock.withLock {
            machine.suspend(caller, on: continuation, isCancelled: Task.isCancelled, at: now)
          })
      },
      onCancel: {
        let now = fetcher.clock.now
        perform(lock.withLock { machine.cancelWaiter(caller, at: now) })
      })
    return value(of: try outcome.get())
  }

  func invalidate() {
    let now = fetcher.clock.now
    perform(lock.withLock { machine.invalidate(at: now) })
  }

  func revalidate() async {
    _ = try? await demand(.revalidate)
  }

  // MARK: Handles and observers

  func acquireHandle() -> Bool {
    let now = fetcher.clock.now
    let (acquired, effects) = lock.withLock { machine.addHandle(at: now) }
    perform(effects)
    return acquired
  }

  /// A `Resource` handle went.
  func releaseHandle() {
    let now = fetcher.clock.now
    perform(lock.withLock { machine.removeHandle(at: now) })
  }

  /// Calls `onChange` with each new state, after the current one if asked.
  func observe(
    includingCurrentState: Bool, _ onChange: @escaping @Sendable (ResourceState<Value>) -> Void
  ) -> Subscription {
    let now = fetcher.clock.now
    let (observer, snapshot, version, effects) = lock.withLock {
      // NB: without the current state, it starts at the current version, so that only later
      // states reach it; with it, below every version, so that the current state itself goes
      // through the ordered path and a newer one delivered meanwhile is never overtaken.
      let observer = _Subscriber<ResourceState<Value>>(
        lastVersion: includingCurrentState ? 0 : machine.version, onValue: onChange)
      let (snapshot, version, effects) = machine.addObserver(observer, at: now)
      return (observer, snapshot, version, effects)
    }
    perform(effects)
    // NB: nonisolated(unsafe): a subscriber's delivery state is only touched while holding
    // `deliveryLock`, and the machine's list of observers while holding `lock`.
    nonisolated(unsafe) let removed = observer
    let subscription = slot.subscription { [self] in removeObserver(removed) }
    if includingCurrentState { observer.deliver(state(snapshot), version: version, deliveryLock) }
    return subscription
  }

  /// An observer's subscription was cancelled. Idempotent.
  private func removeObserver(_ observer: _Subscriber<ResourceState<Value>>) {
    let now = fetcher.clock.now
    let effects = lock.withLock { machine.removeObserver(observer, at: now) }
    let dropped = observer.cancel(deliveryLock)
    perform(effects)
    // NB: the callback goes here, after every lock: its captures' deinits are user code.
    withExtendedLifetime(dropped) {}
  }

  // MARK: The map's changes

  /// The map changed the answer: it is read again, with the map's version, and offered.
  ///
  /// NB: a change that the landing of a fetch makes, told on the landing's thread during its
  /// write, is skipped: the landing reads the slot after that write, and offers what it read
  /// with the fetch's end. Another thread's change, or one made after the landing read, is not.
  /// The landing marks its thread with the resource (`land`), so no lock is taken to tell.
  private func answerChanged() {
    if _concord_load_thread_mark() == UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque()) {
      return
    }
    let (answer, mapVersion) = slot.read()
    let now = fetcher.clock.now
    perform(lock.withLock { machine.offer(answer, mapVersion: mapVersion, at: now) })
  }

  // MARK: Acting

  /// Does what a transition asked, in this order: cancels, tells the observers, starts the
  /// timers, resumes the callers, then starts the fetch. With `startingInline` (a caller that
  /// waits for the fetch), the fetch's task runs on this thread until its loader suspends
  /// (`Task.immediate`): a loader that answers without suspending lands before this returns,
  /// with no hand-off to another thread and back.
  ///
  /// NB: the observers are told before the fetch starts, so that the state of a fetch starting
  /// reaches them before the state of its end can (a newer version would make them skip the
  /// older one), and before the callers are resumed, so that a caller that awaited a fetch finds
  /// its observers told. The fetch starts last: a fetch that lands at once makes transitions
  /// of its own, which must come after every effect of the one that started it (a timer of
  /// this transition started after the landing would outlive the generation that landing made).
  private func perform(_ effects: _ResourceEffects, startingInline: Bool = false) {
    for task in effects.cancelled { task.cancel() }
    if let delivery = effects.delivery { deliver(delivery) }
    for timer in effects.timers {
      startTimer(timer.kind, generation: timer.generation, timer.duration)
    }
    if let resumed = effects.resumed {
      for continuation in resumed.continuations { continuation.resume(returning: resumed.outcome) }
    }
    if let id = effects.startFetch { startFetch(id, inline: startingInline) }
    if effects.letGo { letGo() }
  }

  /// Tells the observers a new state.
  ///
  /// NB: `@inline(never)`: inlined into `perform`, its `ResourceState<Value>` would have
  /// `perform` look that type's metadata up on entry, on every `load()`, whether or not it
  /// delivers.
  @inline(never)
  private func deliver(_ delivery: _ResourceDelivery) {
    let state = state(delivery.state)
    for observer in delivery.to {
      // NB: `unsafeDowncast`: the machine's observers are the ones `observe` made.
      unsafeDowncast(observer, to: _Subscriber<ResourceState<Value>>.self)
        .deliver(state, version: delivery.version, deliveryLock)
    }
  }

  /// Starts the loader's task for the fetch `id`.
  private func startFetch(_ id: UInt64, inline: Bool) {
    // NB: the task holds the resource until the fetch ends.
    let task = _startTask(inline: inline) { await self.run(fetch: id) }
    // NB: a task whose run already ended (one that ran inline and landed) has nothing to stop;
    // one whose fetch ended otherwise (cancelled before its task was attached) is cancelled.
    let attached = lock.withLock {
      links.endedRun == id || machine.attach(task, toFetch: id)
    }
    if !attached { task.cancel() }
  }

  /// Starts a timer's task.
  private func startTimer(_ kind: _ResourceTimerKind, generation: UInt64, _ duration: Duration) {
    let clock = fetcher.clock
    // NB: weak: a timer must not keep a resource its registry let go of (its map gone).
    let task = _startTimerTask(on: clock, after: duration) { [weak self] in
      guard let self else { return }
      let now = clock.now
      perform(lock.withLock { machine.timerFired(kind, generation: generation, at: now) })
    }
    if !lock.withLock({ machine.attach(task, toTimer: kind, generation: generation) }) {
      task.cancel()
    }
  }

  // MARK: The fetch

  /// Runs the fetch `id`: the loader, and its retries with their waits, outside every lock.
  ///
  /// NB: every way out goes through `end(_:_:)`, whose lock section also counts the run out.
  /// `nonisolated(nonsending)`: it runs where its task starts it, with no executor hop at its
  /// start and end (about 60 ns of a fetch that answers at once, on `resource.answer`).
  nonisolated(nonsending) private func run(fetch id: UInt64) async {
    var attempt = 1
    var request = lock.withLock {
      links.runningFetches += 1
      return machine.request(forFetch: id, attempt: attempt)
    }
    while let current = request {
      let failure: any Error
      do {
        let fetched = try await fetcher.load(current)
        return land(id, fetched)
      } catch {
        failure = error
      }
      // NB: a fetch no longer in flight was cancelled: it writes nothing, and tells nobody.
      guard lock.withLock({ machine.isInFlight(id) }) else { break }
      guard fetcher.retry.retries(failure, attempt: attempt) else {
        return fail(id, failure)
      }
      let wait = fetcher.retry.delay(
        beforeRetry: attempt, factor: Double.random(in: 0.5..<1.5))
      do {
        try await fetcher.clock.sleep(for: wait)
      } catch {
        guard lock.withLock({ machine.isInFlight(id) }) else { break }
        return fail(id, error)
      }
      attempt += 1
      request = lock.withLock { machine.request(forFetch: id, attempt: attempt) }
    }
    end(id)
  }

  /// Ends the run of the fetch `id`: makes `transition`, if any, in the same lock section that
  /// counts the run out, then does what it asked.
  private func end(
    _ id: UInt64, _ transition: (inout _ResourceMachine) -> _ResourceEffects = { _ in .init() }
  ) {
    perform(
      lock.withLock {
        links.runningFetches -= 1
        links.endedRun = id
        return transition(&machine)
      })
  }

  /// The fetch `id` failed for good.
  private func fail(_ id: UInt64, _ error: any Error) {
    let now = fetcher.clock.now
    end(id) { $0.fail(id, error, at: now) }
  }

  /// Stores what the fetch `id` got, in one write of the map, then tells everyone.
  private func land(_ id: UInt64, _ fetched: Fetched<Value>) {
    let now = fetcher.clock.now
    guard let value = fetched._value else { return confirm(id, at: now) }
    let validator = fetched._validator
    guard lock.withLock({ machine.beginLanding(id) }) else { return end(id) }
    // NB: the thread is marked with the resource while it writes, so that `answerChanged`
    // knows the changes this write tells it of; the mark it replaces is put back after. The
    // mark is an address compared, never followed, so it retains nothing.
    let outer = _concord_exchange_thread_mark(Unmanaged.passUnretained(self).toOpaque())
    slot.store(
      value, stamp: fetched._modifiedAt,
      record: _StoredAnswerInfo(fetchedAt: now, validator: validator))
    let (answer, mapVersion) = slot.read()
    _ = _concord_exchange_thread_mark(outer)
    end(id) {
      $0.land(
        id, value: answer, mapVersion: mapVersion, fetchedAt: now, validator: validator, at: now)
    }
  }

  /// The fetch `id` got `.notModified`: the answer's age starts again from `now`.
  private func confirm(_ id: UInt64, at now: Date) {
    let (confirmation, validator) = lock.withLock {
      (machine.beginConfirming(id), machine.answer.validator)
    }
    switch confirmation {
    case .gone: return end(id)
    case .noAnswer: return fail(id, ResourceError.notModifiedWithoutAnswer)
    case .confirming:
      slot.confirm(_StoredAnswerInfo(fetchedAt: now, validator: validator))
      end(id) { $0.confirm(id, fetchedAt: now, at: now) }
    }
  }

  // MARK: Letting go

  /// Nothing used the resource for `keepFor`: it leaves the registry, and the map releases
  /// its answer (the store keeps a persisted one).
  private func letGo() {
    registry?.remove(self, as: registryKey)
    close()
  }

  /// Drops a resource made for a key that another thread listed first, before anyone saw it.
  func discard() {
    lock.withLock { machine.audience.isLetGo = true }
    close()
  }

  /// Stops following the answer and empties its slot.
  private func close() {
    let subscription = lock.withLock {
      defer { links.answerSubscription = nil }
      return links.answerSubscription
    }
    subscription?.cancel()
    slot.release()
  }
}

/// What a resource keeps beside its state machine, under the same lock.
private struct _ResourceLinks {
  /// The subscription that tells the resource when the map changes its answer; `nil` once it
  /// is let go.
  var answerSubscription: Subscription?
  /// How many loader tasks are running, cancelled ones included until they return.
  var runningFetches = 0
  /// The last fetch whose run ended: its task, attached after it ran inline to the end, has
  /// nothing left to cancel.
  var endedRun: UInt64 = 0
}

/// Starts `operation` in a new task: with `inline`, at once on the calling thread until its
/// first suspension (`Task.immediate`), else enqueued as `Task.init` does.
@usableFromInline
func _startTask(
  inline: Bool, _ operation: sending @escaping @isolated(any) () async -> Void
) -> Task<Void, Never> {
  if inline, #available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *) {
    return Task.immediate(operation: operation)
  }
  return Task(operation: operation)
}

/// Starts a timer's task: it sleeps on `clock` until `duration` after now, then calls `fired`
/// unless it was cancelled.
///
/// NB: the deadline is read now, not when the task first runs: a task that runs late (after
/// its starter returned at once, and the clock moved) still wakes when it was due.
@usableFromInline
func _startTimerTask(
  on clock: any ResourceClock, after duration: Duration, _ fired: @escaping @Sendable () -> Void
) -> Task<Void, Never> {
  let deadline = clock.now.addingTimeInterval(duration._seconds)
  return Task {
    let left = deadline.timeIntervalSince(clock.now)
    do { try await clock.sleep(for: .seconds(max(0, left))) } catch { return }
    fired()
  }
}
