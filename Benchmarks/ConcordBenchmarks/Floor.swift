import Concord

/// A dictionary of values by id behind a lock: the floors of the store and find rows.
protocol LockedDictionary: Sendable {
  associatedtype Value: Identifiable & Sendable where Value.ID == Int
  /// Stores `value` under its id.
  func store(_ value: Value)
  /// The value stored under `id`, if any.
  func find(_ id: Int) -> Value?
}

/// The physical floor: a plain typed dictionary behind one recursive pthread mutex, as a user
/// would write it, doing the same work as the map, and nothing else.
final class Floor<Value: Identifiable & Sendable>: LockedDictionary, @unchecked Sendable
where Value.ID == Int {
  // NB: @unchecked because `storage` is only touched while holding `lock`.
  let lock = Lock(recursive: true)
  private var storage: [Int: Value] = [:]

  @inline(__always)
  func store(_ value: Value) {
    lock.lock()
    storage[value.id] = value
    lock.unlock()
  }

  @inline(__always)
  func store(_ values: ArraySlice<Value>) {
    lock.lock()
    for value in values { storage[value.id] = value }
    lock.unlock()
  }

  @inline(__always)
  func find(_ id: Int) -> Value? {
    lock.lock()
    defer { lock.unlock() }
    return storage[id]
  }

  @inline(__always)
  func remove(_ id: Int) {
    lock.lock()
    storage[id] = nil
    lock.unlock()
  }
}

/// The floor for an aggregate: one dictionary per entity type, all behind one lock.
final class AggregateFloor: @unchecked Sendable {
  // NB: @unchecked because the dictionaries are only touched while holding `lock`.
  private let lock = Lock(recursive: true)
  private var posts: [Int: Post] = [:]
  private var people: [Int: Person] = [:]
  private var titles: [Int: Title] = [:]
  /// The posts that nest each person and each title, as lists threaded through `links` from
  /// the newest link of each: what a later write of a person or a title needs to find the
  /// posts to bring up to date, as the map's parent links do. No allocation per entity.
  private var newestLinkOfPerson: [Int: Int32] = [:]
  private var newestLinkOfTitle: [Int: Int32] = [:]
  private var links: [(post: Int, next: Int32)] = []

  @inline(__always)
  func store(_ post: Post) {
    lock.lock()
    people[post.author.id] = post.author
    link(post.id, into: &newestLinkOfPerson, from: post.author.id)
    for title in post.books {
      titles[title.id] = title
      link(post.id, into: &newestLinkOfTitle, from: title.id)
    }
    posts[post.id] = post
    lock.unlock()
  }

  /// Links `post` to the entity `child`, as its newest parent (a post stored again over an
  /// older one is linked again: the floor does not look for it).
  @inline(__always)
  private func link(_ post: Int, into newest: inout [Int: Int32], from child: Int) {
    links.append((post, newest.updateValue(Int32(links.count), forKey: child) ?? -1))
  }
}

/// The floor of `store.merge`: entries and users in dictionaries behind one lock, each stub
/// merged into the stored user with the same `merge`.
///
/// NB: as `AggregateFloor` does, it keeps which entries nest each user (a list threaded through
/// one array), and it compares the merged user with the stored one: what a hand-written cache
/// needs to bring the entries up to date when a user changes, as the map's parent links and
/// its `==` dedupe do. Until 0.4.0 it did neither.
final class MergeFloor: @unchecked Sendable {
  // NB: @unchecked because the dictionaries are only touched while holding `lock`.
  private let lock = Lock(recursive: true)
  private var entries: [Int: Entry] = [:]
  private var users: [Int: Profile] = [:]
  /// The entries that nest each user, threaded through `links` from the newest link of each.
  private var newestLinkOfUser: [Int: Int32] = [:]
  private var links: [(entry: Int, next: Int32)] = []

  func store(_ user: Profile) {
    lock.withLock { users[user.id] = user }
  }

  @inline(__always)
  func store(_ page: [Entry]) {
    lock.lock()
    for var entry in page {
      let id = entry.author.id
      if let stored = users[id] {
        let merged = Profile.merge(entry.author, into: stored)
        if merged != stored {
          users[id] = merged
          refresh(nestersOf: id, with: merged)
        }
        entry.author = merged
      } else {
        users[id] = entry.author
      }
      links.append((entry.id, newestLinkOfUser.updateValue(Int32(links.count), forKey: id) ?? -1))
      entries[entry.id] = entry
    }
    lock.unlock()
  }

  /// Brings every entry that nests the user `id` up to date with `user`.
  private func refresh(nestersOf id: Int, with user: Profile) {
    var link = newestLinkOfUser[id] ?? -1
    while link >= 0 {
      entries[links[Int(link)].entry]?.author = user
      link = links[Int(link)].next
    }
  }
}

/// The floor of `retention.churn`: a dictionary with a least-recently-released queue, evicting
/// the oldest beyond its capacity, behind one lock.
final class LRUFloor: @unchecked Sendable {
  // NB: @unchecked because every field is only touched while holding `lock`.
  private let lock = Lock(recursive: true)
  private let capacity: Int
  private var values: [Int: (value: Model, ticket: Int)] = [:]
  private var queue: [(id: Int, ticket: Int)] = []
  private var head = 0
  private var ticket = 0

  init(capacity: Int) {
    self.capacity = capacity
  }

  /// Stores `value` as the most recently released.
  @inline(__always)
  func store(_ value: Model) {
    lock.lock()
    release(value)
    lock.unlock()
  }

  /// Finds the value of `id` and releases it again, as the most recently released.
  @inline(__always)
  func revive(_ id: Int) -> Model? {
    lock.lock()
    defer { lock.unlock() }
    guard let found = values[id]?.value else { return nil }
    release(found)
    return found
  }

  private func release(_ value: Model) {
    ticket += 1
    values[value.id] = (value, ticket)
    queue.append((value.id, ticket))
    while values.count > capacity, head < queue.count {
      let (id, stale) = queue[head]
      head += 1
      if values[id]?.ticket == stale { values[id] = nil }
    }
    if head > 4_096 && head * 2 > queue.count {
      queue.removeFirst(head)
      head = 0
    }
  }
}

/// Floors for the rows about propagation and delivery: values in a dictionary behind one lock,
/// patched in place, and callbacks called after the lock, one per changed value.
final class DeliveryFloor<Value: Identifiable & Sendable>: @unchecked Sendable
where Value.ID == Int {
  // NB: @unchecked because the dictionaries are only touched while holding `lock`.
  private let lock = Lock(recursive: true)
  private var values: [Int: Value] = [:]
  private var callbacks: [Int: @Sendable (Value) -> Void] = [:]
  /// The callbacks `observe(_:_:)` added, by entity and token.
  private var observers: [Int: [Int: @Sendable (Value) -> Void]] = [:]
  private var lastToken = 0

  func store(_ value: Value, callback: (@Sendable (Value) -> Void)? = nil) {
    lock.withLock {
      values[value.id] = value
      callbacks[value.id] = callback
    }
  }

  /// One write: changes one value, then calls its callback after the lock.
  @inline(__always)
  func update(_ id: Int, _ body: (inout Value) -> Void) {
    lock.lock()
    body(&values[id]!)
    let value = values[id]!
    let callback = callbacks[id]
    lock.unlock()
    callback?(value)
  }

  /// One transaction: changes each value under one lock, then calls each callback.
  @inline(__always)
  func update(_ ids: Range<Int>, _ body: (inout Value) -> Void) {
    var told: [(Value, @Sendable (Value) -> Void)] = []
    told.reserveCapacity(ids.count)
    lock.lock()
    for id in ids {
      body(&values[id]!)
      if let callback = callbacks[id] { told.append((values[id]!, callback)) }
    }
    lock.unlock()
    for (value, callback) in told { callback(value) }
  }

  /// Adds `callback` to the observers of `id`; returns its token.
  @inline(__always)
  func observe(_ id: Int, _ callback: @escaping @Sendable (Value) -> Void) -> Int {
    lock.lock()
    defer { lock.unlock() }
    lastToken += 1
    observers[id, default: [:]][lastToken] = callback
    return lastToken
  }

  /// Removes the observer `token` of `id`, releasing its callback after the lock.
  @inline(__always)
  func cancel(_ id: Int, token: Int) {
    lock.lock()
    let dropped = observers[id]?.removeValue(forKey: token)
    lock.unlock()
    withExtendedLifetime(dropped) {}
  }

  /// A fan-out: patches `ids` in place, under one lock.
  @inline(__always)
  func patch(_ ids: [Int], _ body: (inout Value) -> Void) {
    lock.lock()
    for id in ids { body(&values[id]!) }
    lock.unlock()
  }
}

/// The floor of `store.refetch`: compares a page with the posts, people and titles stored.
final class RefetchFloor: @unchecked Sendable {
  // NB: @unchecked because the dictionaries are only touched while holding `lock`.
  private let lock = Lock(recursive: true)
  private var posts: [Int: Post] = [:]
  private var people: [Int: Person] = [:]
  private var titles: [Int: Title] = [:]

  func store(_ page: [Post]) {
    lock.withLock {
      for post in page {
        people[post.author.id] = post.author
        for title in post.books { titles[title.id] = title }
        posts[post.id] = post
      }
    }
  }

  /// How many of the page's values differ from the stored ones.
  @inline(__always)
  func compare(_ page: [Post]) -> Int {
    lock.lock()
    defer { lock.unlock() }
    var changed = 0
    for post in page {
      if people[post.author.id] != post.author { changed += 1 }
      for title in post.books where titles[title.id] != title { changed += 1 }
      if posts[post.id] != post { changed += 1 }
    }
    return changed
  }
}
