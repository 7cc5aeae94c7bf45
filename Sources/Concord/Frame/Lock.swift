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
/// `--sanitize=thread` run meaningful. It is `package` so that the benchmarks' floors are what a
/// user would write: a dictionary behind a mutex. Every pthread call's result is checked, as
/// swift-nio's `NIOLock` does: a failing mutex is a broken program, never something to carry on
/// from. The map's own lock is ``ReadWriteLock``.
@usableFromInline
package final class Lock: @unchecked Sendable {
  // NB: @unchecked because the mutex lives behind a pointer; pthread makes it safe to share.
  @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>

  /// Creates an unlocked mutex. A recursive one may be locked again by the thread holding it.
  package init(recursive: Bool = false) {
    mutex = .allocate(capacity: 1)
    var attributes = pthread_mutexattr_t()
    Self.check(pthread_mutexattr_init(&attributes), "pthread_mutexattr_init")
    if recursive {
      Self.check(
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_RECURSIVE)),
        "pthread_mutexattr_settype")
    }
    Self.check(pthread_mutex_init(mutex, &attributes), "pthread_mutex_init")
    Self.check(pthread_mutexattr_destroy(&attributes), "pthread_mutexattr_destroy")
  }

  deinit {
    Self.check(pthread_mutex_destroy(mutex), "pthread_mutex_destroy")
    mutex.deallocate()
  }

  /// Stops the program if a pthread call failed.
  @usableFromInline @inline(__always)
  static func check(_ status: Int32, _ call: StaticString) {
    precondition(status == 0, "\(call) failed with \(status)")
  }

  /// Blocks until the calling thread holds the mutex.
  @inlinable
  package func lock() {
    Self.check(pthread_mutex_lock(mutex), "pthread_mutex_lock")
  }

  /// Releases the mutex. The calling thread must hold it.
  @inlinable
  package func unlock() {
    Self.check(pthread_mutex_unlock(mutex), "pthread_mutex_unlock")
  }

  /// Runs `body` while holding the mutex.
  @inlinable
  package func withLock<R>(_ body: () throws -> R) rethrows -> R {
    lock()
    defer { unlock() }
    return try body()
  }
}
