import Concord
import Dispatch
import Foundation

/// Runs `body` in a task and blocks the calling thread until it returns: the harness is
/// synchronous, resources are not. The caller is the main thread, never a thread of the
/// cooperative pool, so blocking it starves nothing.
func blocking<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
  let done = DispatchSemaphore(value: 0)
  let result = ResultBox<T>()
  Task {
    result.value = await body()
    done.signal()
  }
  done.wait()
  return result.value!
}

/// A value handed from a task to the thread that waits for it.
final class ResultBox<T>: @unchecked Sendable {
  // NB: @unchecked because the one write happens before the semaphore's signal, and the one
  // read after its wait.
  var value: T?
}

/// A gate the loader of `resource.join` waits at, and the floor's callers too; also a count of
/// callers that arrived.
final class JoinGate: @unchecked Sendable {
  // NB: @unchecked because every field is only touched while holding `lock`.
  private let lock = NSLock()
  private var waiting: [CheckedContinuation<Void, Never>] = []
  private var arrivals = 0

  /// How many waited (or arrived), in all.
  var count: Int { lock.withLock { arrivals } }

  /// Counts one arrival, without waiting.
  func arrive() {
    lock.withLock { arrivals += 1 }
  }

  func wait() async {
    await withCheckedContinuation { continuation in
      lock.withLock {
        arrivals += 1
        waiting.append(continuation)
      }
    }
  }

  func open() {
    let all = lock.withLock {
      defer { waiting.removeAll() }
      return waiting
    }
    for continuation in all { continuation.resume() }
  }
}

extension Workloads {
  /// `load()` of a fresh 100-entity list answer (cacheFirst, fresh for an hour), against an
  /// alias `find` of the same list and a read of its value.
  func resourceLoadFresh() -> Result {
    let list = (0..<100).map { Model($0) }
    let loads = quick ? 20_000 : 100_000
    let map = IdentityMap()
    let resource = map.resource(ResourceKey<[Model]>("list"), staleAfter: .seconds(3_600)) {
      list
    }
    _ = blocking { try? await resource.load() }
    let key = AliasKey<[Model]>("list")
    map.store(list, named: key)
    return compare(
      "resource.load.fresh",
      map: {
        blocking {
          var total = 0
          let ns = await asyncNanoseconds {
            for _ in 0..<loads { total &+= (try? await resource.load())?.count ?? 0 }
          }
          blackHole(total)
          return ns / Double(loads)
        }
      },
      floor: {
        var total = 0
        let ns = nanoseconds {
          for _ in 0..<loads { total &+= map.find(named: key).value?.count ?? 0 }
        }
        blackHole(total)
        return ns / Double(loads)
      })
  }

  /// 1,000 concurrent `load()`s of one key, on a loader that waits for a gate: exactly one
  /// loader call (checked), and the cost per joined caller, against 1,000 tasks that each wait
  /// in a `withCheckedContinuation` resumed by the same kind of gate.
  func resourceJoin() -> Result {
    let callers = 1_000
    return compare(
      "resource.join",
      map: {
        blocking {
          let map = IdentityMap()
          let gate = JoinGate()
          let arrived = JoinGate()
          // NB: fresh for an hour, so that a caller that came after the answer landed would
          // be answered from the map: the loader is called once, whatever the scheduling.
          let resource = map.resource(
            ResourceKey<[Model]>("joined"), staleAfter: .seconds(3_600)
          ) { () async -> [Model] in
            await gate.wait()
            return [Model(1)]
          }
          let ns = await asyncNanoseconds {
            await withTaskGroup(of: Void.self) { group in
              for _ in 0..<callers {
                group.addTask {
                  // NB: a caller joins the fetch right after it arrives, without suspending.
                  arrived.arrive()
                  _ = try? await resource.load()
                }
              }
              while arrived.count < callers || gate.count == 0 { await Task.yield() }
              gate.open()
            }
          }
          precondition(gate.count == 1, "resource.join: \(gate.count) loader calls, not 1")
          return ns / Double(callers)
        }
      },
      floor: {
        blocking {
          let gate = JoinGate()
          let ns = await asyncNanoseconds {
            await withTaskGroup(of: Void.self) { group in
              for _ in 0..<callers { group.addTask { await gate.wait() } }
              while gate.count < callers { await Task.yield() }
              gate.open()
            }
          }
          return ns / Double(callers)
        }
      })
  }

  /// Storing a 100-entity answer (`refresh()` of a resource whose loader returns it), against
  /// `store([T])` of the same list; per answer.
  func resourceAnswer() -> Result {
    let rounds = quick ? 2_000 : 10_000
    let lists = (0..<2).map { round in (0..<100).map { Model($0, round: round) } }
    return compare(
      "resource.answer",
      map: {
        blocking {
          let map = IdentityMap()
          let next = ResultBox<Int>()
          next.value = 0
          let resource = map.resource(ResourceKey<[Model]>("answer"), retry: .none) {
            () async -> [Model] in
            next.value! &+= 1
            return lists[next.value! % 2]
          }
          let ns = await asyncNanoseconds {
            for _ in 0..<rounds { _ = try? await resource.refresh() }
          }
          return ns / Double(rounds)
        }
      },
      floor: {
        // NB: one handle at a time, as the resource's slot holds one answer at a time: a
        // handle kept per round would make every entity the child of every list stored, and
        // each store tell them all.
        let map = IdentityMap()
        var handle: EntityObserver<[Model]>?
        let ns = nanoseconds {
          for round in 0..<rounds { handle = map.store(lists[round % 2]) }
        }
        blackHole(handle)
        return ns / Double(rounds)
      })
  }
}

/// The nanoseconds `body` takes, awaited.
func asyncNanoseconds(_ body: () async -> Void) async -> Double {
  let start = DispatchTime.now().uptimeNanoseconds
  await body()
  return Double(DispatchTime.now().uptimeNanoseconds - start)
}
