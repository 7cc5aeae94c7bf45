import Concord

#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// A second, informational floor for `concurrent.read90`: the floor's dictionary behind the
/// map's own lock type, ``ReadWriteLock``, finds taking it shared. The map's ratio to it says
/// how much of the ratio to the floor is the lock type.
final class SharedFloor<Value: Identifiable & Sendable>: LockedDictionary, @unchecked Sendable
where Value.ID == Int {
  // NB: @unchecked because `storage` is only touched while holding `lock`.
  let lock = ReadWriteLock()
  private var storage: [Int: Value] = [:]

  @inline(__always)
  func store(_ value: Value) {
    lock.lock()
    storage[value.id] = value
    lock.unlock()
  }

  @inline(__always)
  func find(_ id: Int) -> Value? {
    // NB: `lockShared()` declines only on a thread holding the lock exclusively, which a find
    // here never does.
    precondition(lock.lockShared(), "a find holding the floor's lock exclusively")
    defer { lock.unlockShared() }
    return storage[id]
  }
}

/// A third, informational floor for `concurrent.read90`: the floor's dictionary behind a
/// `pthread_rwlock_t`, finds taking it shared, the lock the map's lock type replaced.
final class PthreadRWLockFloor<Value: Identifiable & Sendable>: LockedDictionary,
  @unchecked Sendable
where Value.ID == Int {
  // NB: @unchecked because `storage` is only touched while holding `rwlock`.
  private let rwlock: UnsafeMutablePointer<pthread_rwlock_t> = .allocate(capacity: 1)
  private var storage: [Int: Value] = [:]

  init() {
    rwlock.initialize(to: pthread_rwlock_t())
    precondition(pthread_rwlock_init(rwlock, nil) == 0, "pthread_rwlock_init failed")
  }

  deinit {
    precondition(pthread_rwlock_destroy(rwlock) == 0, "pthread_rwlock_destroy failed")
    rwlock.deallocate()
  }

  @inline(__always)
  func store(_ value: Value) {
    precondition(pthread_rwlock_wrlock(rwlock) == 0, "pthread_rwlock_wrlock failed")
    storage[value.id] = value
    precondition(pthread_rwlock_unlock(rwlock) == 0, "pthread_rwlock_unlock failed")
  }

  @inline(__always)
  func find(_ id: Int) -> Value? {
    precondition(pthread_rwlock_rdlock(rwlock) == 0, "pthread_rwlock_rdlock failed")
    defer { precondition(pthread_rwlock_unlock(rwlock) == 0, "pthread_rwlock_unlock failed") }
    return storage[id]
  }
}
