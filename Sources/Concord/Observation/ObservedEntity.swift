#if canImport(Observation)
  import Observation

  /// An `@Observable` view of one handle, for SwiftUI and any other user of Observation.
  ///
  /// ```swift
  /// @MainActor
  /// final class IssueScreen {
  ///   let issue: ObservedEntity<Issue>
  ///   init(map: IdentityMap, id: Int) {
  ///     issue = ObservedEntity(map.find(Issue.self, id: id)!)
  ///   }
  /// }
  /// ```
  ///
  /// ``value`` changes on the main actor, in commit order, never to an older value after a newer
  /// one. When the main actor is busy while writes commit, it skips to the newest value: one
  /// change, not one per write. The object holds its entity while it lives, as its handle does.
  ///
  /// In SwiftUI, a view that reads `value` in its `body` is redrawn when it changes, as with any
  /// `@Observable` model; keep the object in `@State` or in a model the view owns, so that it
  /// lives as long as the view shows it. See <doc:Concurrency>.
  @available(macOS 14, iOS 17, tvOS 17, watchOS 10, visionOS 1, *)
  @MainActor @Observable
  public final class ObservedEntity<Value: Sendable> {
    /// The entity's value as of the last change the main actor has applied.
    public private(set) var value: Value

    @ObservationIgnored private let observer: EntityObserver<Value>
    @ObservationIgnored private var subscription: Subscription?
    @ObservationIgnored private let relay = _NewestValue<Value>()
    /// How many times `value` changed; for tests.
    @ObservationIgnored private(set) var updates = 0

    /// Follows `observer`'s entity, starting from its current value.
    public init(_ observer: EntityObserver<Value>) {
      self.observer = observer
      value = observer.value
      let relay = relay
      subscription = observer.observe { [weak self] value in
        guard relay.offer(value) else { return }
        Task { @MainActor in self?.applyNewest() }
      }
    }

    /// Applies the newest value offered until none is left.
    private func applyNewest() {
      while let newest = relay.take() {
        value = newest
        updates += 1
      }
    }
  }
#endif
