import Foundation
import TestSupport
import Testing
import _ConcordAtomics

@testable import Concord

/// Two numbers a writer keeps equal, behind a lock.
final class Pair: @unchecked Sendable {
  // NB: @unchecked because both are only touched while holding `lock`.
  let lock: ReadWriteLock
  var first = 0
  var second = 0

  init(spinLimit: Int) {
    lock = ReadWriteLock(spinLimit: spinLimit)
  }
}

// NB: the other side of each wait runs on a thread of its own, not on a dispatch queue: a test
// that waits by yielding holds a thread of the pool the queue would need.
@Suite("ReadWriteLock: the map's lock")
struct ReadWriteLockTests {
  @Test("The exclusive side is re-entrant, and a shared hold is refused to its owner")
  func reentrancy() {
    let lock = ReadWriteLock()
    lock.lock()
    lock.lock()
    #expect(!lock.lockShared(), "the owner reads under its exclusive hold")
    lock.unlock()
    #expect(!lock.lockShared())
    lock.unlock()
    #expect(lock.lockShared())
    lock.unlockShared()
    lock.withLock {}
  }

  @Test(
    "A reader takes the lock shared again while a writer waits for it", .timeLimit(.minutes(1)))
  func sharedReentrancyPastAWaitingWriter() {
    // NB: synchronous, so that every hold is taken and given back on this one thread.
    let lock = ReadWriteLock()
    #expect(lock.lockShared())
    // A writer on another thread takes the lock word, then waits for this reader.
    let written = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
      lock.withLock {}
      written.signal()
    }
    while _concord_load_seq_cst_word(lock.word) & ReadWriteLock.held == 0 { sched_yield() }
    // The second hold must not wait for the writer, which waits for the first.
    #expect(lock.lockShared())
    lock.unlockShared()
    lock.unlockShared()
    written.wait()
    #expect(lock.lockShared())
    lock.unlockShared()
  }

  @Test(
    "A reader past the threads with a stripe of their own takes the lock shared again while a writer waits",
    .timeLimit(.minutes(1)))
  func sharedReentrancyOnASharedStripe() {
    let lock = ReadWriteLock()
    // NB: threads that keep their numbers until the end, so that a thread made after them gets
    // one past the stripes: numbers are handed out smallest first.
    let keep = DispatchSemaphore(value: 0)
    var keepers = 0
    func addKeeper() {
      let numbered = DispatchSemaphore(value: 0)
      Thread.detachNewThread {
        _ = _concord_thread_index()
        numbered.signal()
        keep.wait()
      }
      numbered.wait()
      keepers += 1
    }
    for _ in 0..<_StripedCounter.stripes { addKeeper() }
    let reentered = Locked<Bool?>(nil)
    while reentered.value == nil && keepers < 256 {
      let done = DispatchSemaphore(value: 0)
      Thread.detachNewThread {
        defer { done.signal() }
        guard !lock.readers.stripe(of: _concord_thread_index()).isOwn else { return }
        guard lock.lockShared() else { return reentered.withValue { $0 = false } }
        let written = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
          lock.withLock {}
          written.signal()
        }
        while _concord_load_seq_cst_word(lock.word) & ReadWriteLock.held == 0 { sched_yield() }
        // The second hold must not wait for the writer, which waits for the first.
        let again = lock.lockShared()
        lock.unlockShared()
        lock.unlockShared()
        written.wait()
        reentered.withValue { $0 = again }
      }
      done.wait()
      if reentered.value == nil { addKeeper() }
    }
    for _ in 0..<keepers { keep.signal() }
    #expect(reentered.value == true, "a thread past the stripes took the lock shared twice")
    #expect(lock.lockShared(), "nothing is left held")
    lock.unlockShared()
  }

  @Test(
    "A writer that takes the lock again lets the reader waiting behind it in first",
    .timeLimit(.minutes(1)))
  func aWriterTakingTheLockAgainLetsTheWaitingReaderIn() {
    // NB: yields without bound, so that the order is the lock's, not the scheduler's.
    let lock = ReadWriteLock(spinLimit: 0, waitingReaderYields: .max)
    let entered = Locked(false)
    let left = DispatchSemaphore(value: 0)
    lock.lock()
    Thread.detachNewThread {
      #expect(lock.lockShared())
      entered.withValue { $0 = true }
      lock.unlockShared()
      left.signal()
    }
    // The reader stepped back for this writer and waits.
    while _concord_load_seq_cst_word(lock.waitingReaders) == 0 { sched_yield() }
    lock.unlock()
    lock.lockAfterWaitingReaders()
    // NB: once it is in, this writer's `lock()` waits for it to leave; it sets the flag first.
    #expect(entered.value, "the waiting reader got in before the writer's next hold")
    #expect(_concord_load_seq_cst_word(lock.waitingReaders) == 0)
    lock.unlock()
    left.wait()
  }

  @Test("A writer waiting for a reader sleeps until the reader leaves", .timeLimit(.minutes(1)))
  func aWriterSleepsUntilTheReadersLeave() {
    let lock = ReadWriteLock(spinLimit: 0)
    #expect(lock.lockShared())
    let written = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
      lock.withLock {}
      written.signal()
    }
    // The writer says it sleeps until the readers leave; it cannot be in.
    while _concord_load_seq_cst_word(lock.word) & ReadWriteLock.drainWaiting == 0 { sched_yield() }
    #expect(written.wait(timeout: .now()) == .timedOut)
    lock.unlockShared()
    written.wait()
    #expect(_concord_load_seq_cst_word(lock.word) == 0)
    #expect(lock.lockShared())
    lock.unlockShared()
  }

  @Test(
    "A reader waiting for a writer sleeps on the writer's lock and reads what it wrote",
    .timeLimit(.minutes(1)))
  func aReaderSleepsUntilTheWriterLeaves() {
    let pair = Pair(spinLimit: 0)
    pair.lock.lock()
    let read = DispatchSemaphore(value: 0)
    let seen = Locked(-1)
    Thread.detachNewThread {
      precondition(pair.lock.lockShared(), "a reader holding the lock exclusively")
      seen.withValue { $0 = pair.first }
      pair.lock.unlockShared()
      read.signal()
    }
    // NB: with no spins, a reader that meets the writer sleeps on the owned lock at once.
    pair.first = 1
    #expect(read.wait(timeout: .now()) == .timedOut)
    pair.lock.unlock()
    read.wait()
    #expect(seen.value == 1)
  }

  @Test(
    "Readers never see a write half done, and every write lands",
    arguments: [1, 2] as [UInt64], [0, 100])
  func readersAndWriters(seed: UInt64, spinLimit: Int) async {
    let pair = Pair(spinLimit: spinLimit)
    let threads = 4
    let steps = max(2_000, randomSteps(share: 20))
    let torn = Locked(0)
    let writes = Locked(0)
    await withTaskGroup(of: Void.self) { group in
      for thread in 0..<threads {
        group.addTask {
          var random = SeededGenerator(seed: seed &* 100 &+ UInt64(thread))
          var seenTorn = 0
          var written = 0
          for _ in 0..<steps {
            switch Int.random(in: 0..<8, using: &random) {
            case 0:
              pair.lock.withLock {
                pair.first += 1
                // NB: a nested hold, as a write made from an `update` body takes.
                pair.lock.withLock { pair.second += 1 }
              }
              written += 1
            default:
              precondition(pair.lock.lockShared(), "a reader holding the lock exclusively")
              if pair.first != pair.second { seenTorn += 1 }
              pair.lock.unlockShared()
            }
          }
          torn.withValue { $0 += seenTorn }
          writes.withValue { $0 += written }
        }
      }
    }
    #expect(torn.value == 0)
    pair.lock.withLock {
      #expect(pair.first == writes.value && pair.second == writes.value)
    }
  }
}
