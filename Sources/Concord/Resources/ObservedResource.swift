#if canImport(Observation)
  import Observation

  /// An `@Observable` view of a resource, for SwiftUI and any other user of Observation, as
  /// `ObservedEntity` is for a handle.
  ///
  /// ```swift
  /// @MainActor
  /// final class TimelineScreen {
  ///   let timeline: ObservedResource<[Status]>
  ///   init(map: IdentityMap, api: API) {
  ///     timeline = ObservedResource(map.resource(.home, policy: .cacheThenNetwork) { try await api.home() })
  ///   }
  /// }
  /// ```
  ///
  /// ``state`` changes on the main actor, in order, never to an older state after a newer one;
  /// when the main actor is busy, it skips to the newest. The object observes the resource
  /// while it lives, so it keeps the resource and its answer, and a fetch goes on while it
  /// does. It fetches nothing by itself: call the resource's `load()` (in SwiftUI, from
  /// `.task`).
  @available(macOS 14, iOS 17, tvOS 17, watchOS 10, visionOS 1, *)
  @MainActor @Observable
  public final class ObservedResource<Value: Sendable> {
    /// The resource's state as of the last change the main actor has applied.
    public private(set) var state: ResourceState<Value>

    /// The resource it observes.
    @ObservationIgnored public let resource: Resource<Value>
    @ObservationIgnored private var subscription: Subscription?
    @ObservationIgnored private let relay = _NewestValue<ResourceState<Value>>()
    /// How many times `state` changed; for tests.
    @ObservationIgnored private(set) var updates = 0

    /// Follows `resource`, starting from its current state.
    public init(_ resource: Resource<Value>) {
      self.resource = resource
      state = resource.state
      let relay = relay
      subscription = resource.observe { [weak self] state in
        guard relay.offer(state) else { return }
        Task { @MainActor in self?.applyNewest() }
      }
    }

    /// Applies the newest state offered until none is left.
    private func applyNewest() {
      while let newest = relay.take() {
        state = newest
        updates += 1
      }
    }
  }
#endif
