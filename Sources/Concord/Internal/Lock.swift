#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// A pthread mutex, optionally recursive.
///
/// NB: `Synchronization.Mutex` would be the obvious choice, but on Linux its futex calls are not
/// intercepted by ThreadSanitizer, which then reports false races. A pthread mutex keeps the
/// `--sanitize=thread` run meaningful. It is `package` so that the benchmarks' floor measures the
/// same lock the map uses.
@usableFromInline
package final class Lock: @unchecked Sendable {
  // NB: @unchecked because the mutex lives behind a pointer; pthread makes it safe to share.
  @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>

  /// Creates an unlocked mutex. A recursive one may be locked again by the thread holding it.
  package init(recursive: Bool = false) {
    mutex = .allocate(capacity: 1)
    var attributes = pthread_mutexattr_t()
    pthread_mutexattr_init(&attributes)
    if recursive {
      pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_RECURSIVE))
    }
    let status = pthread_mutex_init(mutex, &attributes)
    pthread_mutexattr_destroy(&attributes)
    precondition(status == 0, "pthread_mutex_init failed with \(status)")
  }

  deinit {
    pthread_mutex_destroy(mutex)
    mutex.deallocate()
  }

  /// Blocks until the calling thread holds the mutex.
  @inlinable
  package func lock() {
    pthread_mutex_lock(mutex)
  }

  /// Releases the mutex. The calling thread must hold it.
  @inlinable
  package func unlock() {
    pthread_mutex_unlock(mutex)
  }

  /// Runs `body` while holding the mutex.
  @inlinable
  package func withLock<R>(_ body: () throws -> R) rethrows -> R {
    pthread_mutex_lock(mutex)
    defer { pthread_mutex_unlock(mutex) }
    return try body()
  }
}
