/// The live resources of a map, by key: those with a handle, an observer or a fetch in flight,
/// and those in their `keepFor` window.
///
/// A resource is made outside the registry's lock (its slot is made by a write of the map) and
/// listed after, unless another thread listed one for the same key meanwhile: the lock is never
/// held while the map's is taken, so a `resource(...)` call inside a transaction body cannot
/// deadlock with one on another thread.
@usableFromInline
final class _ResourceRegistry: @unchecked Sendable {
  // NB: @unchecked because `entries` and `serial` are only touched while holding `lock`.

  /// What tells resources apart: the key's name, the kind of resource, and the value type.
  @usableFromInline
  struct Key: Hashable {
    @usableFromInline let name: String
    @usableFromInline let kind: Kind
    @usableFromInline let valueType: ObjectIdentifier

    @inlinable
    init(name: String, kind: Kind, valueType: ObjectIdentifier) {
      self.name = name
      self.kind = kind
      self.valueType = valueType
    }
  }

  /// A kind of resource: `resource` and `pagedResource` with one key name are two resources.
  @usableFromInline
  enum Kind: Hashable {
    case resource, paged
  }

  /// The map's clock.
  let clock: any ResourceClock
  private let lock = Lock()
  private var entries: [Key: any _ResourceEntry] = [:]
  /// The last serial number given to a slot.
  private var serial: UInt64 = 0
  private var inline = true

  init(clock: any ResourceClock) {
    self.clock = clock
  }

  /// Whether the resources made from now on start a fetch their caller waits for on the
  /// caller's thread (`Task.immediate`, the default) rather than enqueued (`Task.init`). For
  /// the tests that run the same steps both ways: the outcomes must not differ.
  var startsWaitedFetchesInline: Bool {
    get { lock.withLock { inline } }
    set { lock.withLock { inline = newValue } }
  }

  /// The live entry for `key`, with a handle taken on it, if there is one.
  func existing<Entry: _ResourceEntry>(_ key: Key, as _: Entry.Type) -> Entry? {
    lock.withLock {
      guard let entry = entries[key] as? Entry, entry.acquireHandle() else { return nil }
      return entry
    }
  }

  /// Lists `made` under `key`, unless a live entry was listed meanwhile: then that one is
  /// returned, with a handle taken, and `made` is not listed.
  func list<Entry: _ResourceEntry>(_ made: Entry, as key: Key) -> Entry {
    lock.withLock {
      if let entry = entries[key] as? Entry, entry !== made, entry.acquireHandle() { return entry }
      entries[key] = made
      return made
    }
  }

  /// Takes `entry` out, if it is the one listed under `key`.
  @usableFromInline
  func remove(_ entry: any _ResourceEntry, as key: Key) {
    lock.withLock {
      if entries[key] === entry { entries[key] = nil }
    }
  }

  /// The id of a new resource's slot: unique in the map, and of a value type no alias key
  /// names, so that no alias meets it.
  ///
  /// NB: unique per resource, not per key: a resource made while another with the same key is
  /// being let go gets a slot of its own, which that one's release does not empty.
  func slotID<Value>(named name: String, for _: Value.Type) -> _AliasID {
    let number = lock.withLock {
      serial += 1
      return serial
    }
    return _AliasID(
      valueType: ObjectIdentifier(_ResourceSlot<Value>.self),
      name: "resource #\(number): \(name)")
  }

  /// The live entries whose key name starts with `prefix`.
  ///
  /// - Complexity: O(live resources).
  func entries(prefix: String) -> [any _ResourceEntry] {
    lock.withLock { entries.filter { $0.key.name.hasPrefix(prefix) }.map { $0.value } }
  }
}

/// The value type of a resource's slot, in the slot's id: a type no alias key names.
@usableFromInline
enum _ResourceSlot<Value> {}
