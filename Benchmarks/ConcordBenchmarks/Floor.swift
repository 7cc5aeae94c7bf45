import Concord

/// The physical floor: a plain typed dictionary behind the lock type the map uses, doing the
/// same work as the map, and nothing else.
final class Floor<Value: Identifiable & Sendable>: @unchecked Sendable where Value.ID == Int {
  // NB: @unchecked because `storage` is only touched while holding `lock`.
  private let lock = Lock(recursive: true)
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
}

/// The floor for an aggregate: one dictionary per entity type, all behind one lock.
final class AggregateFloor: @unchecked Sendable {
  // NB: @unchecked because the dictionaries are only touched while holding `lock`.
  private let lock = Lock(recursive: true)
  private var posts: [Int: Post] = [:]
  private var people: [Int: Person] = [:]
  private var titles: [Int: Title] = [:]

  @inline(__always)
  func store(_ post: Post) {
    lock.lock()
    people[post.author.id] = post.author
    for title in post.books { titles[title.id] = title }
    posts[post.id] = post
    lock.unlock()
  }
}
