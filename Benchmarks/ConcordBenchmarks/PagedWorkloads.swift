import Concord
import Foundation

/// Paged lists loaded in a task, and their map, handed to the thread that waits for them.
private struct LoadedLists: Sendable {
  /// The map the lists store their pages in.
  let map: IdentityMap
  /// The lists, loaded.
  let lists: [PagedResource<Model, Int>]
}

/// A timeline server for the paged workloads: page `k` of list `list` is 40 models, the newest
/// first, and every page has an older one.
private func timelinePage(list: Int, _ k: Int) -> Page<Model, Int> {
  let first = list * 1_000_000 + k * 40
  return Page((first..<first + 40).map { Model($0) }, older: k + 1)
}

extension Workloads {
  /// `lists` paged lists of one map, each loaded to `pages` pages of 40 models. The pages after
  /// those of list `i` are `next[i]`, made beforehand, so that a timed load does not make its
  /// models (as the floor, which stores pages made beforehand, does not).
  private func pagedLists(_ lists: Int, pages: Int, next: [[Page<Model, Int>]] = [])
    -> (IdentityMap, [PagedResource<Model, Int>])
  {
    let made = blocking { await loadedLists(lists, pages: pages, next: next) }
    return (made.map, made.lists)
  }

  /// `pagedLists(_:pages:next:)` from a task.
  ///
  /// NB: the loader never suspends, and a fetch a caller waits for starts on the caller's
  /// thread (`Task.immediate`), so no `await` here moves the task to another thread: the lists
  /// load on the thread the task started on, and a caller that goes on in the same task stays
  /// there too.
  private func loadedLists(_ lists: Int, pages: Int, next: [[Page<Model, Int>]] = []) async
    -> LoadedLists
  {
    let map = IdentityMap()
    let made = (0..<lists).map { list in
      map.pagedResource(ResourceKey<[Model]>("timeline \(list)"), retry: .none) {
        (request: PageRequest<Int>) in
        let k = request.cursor ?? 0
        return k >= pages && list < next.count ? next[list][k - pages] : timelinePage(list: list, k)
      }
    }
    for list in made {
      _ = try? await list.load()
      for _ in 1..<pages { try? await list.loadOlder() }
    }
    precondition(made.allSatisfy { $0.state.items.count == pages * 40 }, "the lists did not load")
    return LoadedLists(map: map, lists: made)
  }

  /// `loadOlder()` appending 40-model pages to 2,000-model lists (five appends to each of
  /// several lists, per item appended), against `store([T])` of the same pages of 40 models.
  ///
  /// NB: five appends to each list, not one: a sample of 40 appends took under a millisecond,
  /// and the row's ratio varied from 2.4 to 3.7 between runs of one build.
  func pagedLoadOlder() -> Result {
    let lists = quick ? 10 : 40
    let appends = 5
    let next = (0..<lists).map { list in (50..<50 + appends).map { timelinePage(list: list, $0) } }
    let appended = next.flatMap { $0.map(\.items) }
    return compare(
      "paged.loadOlder",
      map: {
        // NB: the lists load in the task that then times the appends, and the floor's map is
        // filled in the task that times its stores. Loaded in one task and appended to in
        // another, the appends may run on another thread than the loads, with another malloc
        // arena (glibc gives threads their own): in a harness of this loop, that read 0.32 µs
        // an item instead of 0.21, for the same instruction count under callgrind, and with
        // `GLIBC_TUNABLES=glibc.malloc.arena_max=1` both read 0.21. The floor runs in a task
        // too, so that both sides allocate from a worker thread's arena, not the main one.
        let ns = blocking {
          let loaded = await loadedLists(lists, pages: 50, next: next)
          let ns = await asyncNanoseconds {
            for _ in 0..<appends {
              for list in loaded.lists { try? await list.loadOlder() }
            }
          }
          precondition(
            loaded.lists.allSatisfy { $0.state.items.count == (50 + appends) * 40 },
            "no page appended")
          withExtendedLifetime(loaded.map) {}
          return ns
        }
        return ns / Double(lists * appends * 40)
      },
      floor: {
        let ns = blocking {
          let map = IdentityMap()
          // NB: a map as full as the lists' (the same entities, held), so that neither side
          // pays for a young table's growth.
          let held = (0..<lists).map { list in
            map.store((0..<50).flatMap { timelinePage(list: list, $0).items })
          }
          var handles: [EntityObserver<[Model]>] = []
          handles.reserveCapacity(appended.count)
          let ns = nanoseconds {
            for page in appended { handles.append(map.store(page)) }
          }
          blackHole(handles.count + held.count)
          return ns
        }
        return ns / Double(lists * appends * 40)
      })
  }

  /// Reading `state.items` of a 2,000-model paged list, against reading the value of a
  /// 2,000-model collection alias through its handle.
  func pagedItems() -> Result {
    let reads = quick ? 100_000 : 500_000
    let (map, made) = pagedLists(1, pages: 50)
    let list = made[0]
    let alias = map.store(list.state.items, named: AliasKey<[Model]>("timeline"))
    return compare(
      "paged.items",
      map: {
        var total = 0
        let ns = nanoseconds {
          for _ in 0..<reads { total &+= list.state.items.count }
        }
        blackHole(total)
        return ns / Double(reads)
      },
      floor: {
        var total = 0
        let ns = nanoseconds {
          for _ in 0..<reads { total &+= alias.value?.count ?? 0 }
        }
        blackHole(total)
        return ns / Double(reads)
      })
  }
}
