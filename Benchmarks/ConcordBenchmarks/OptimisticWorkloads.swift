import Concord

extension Workloads {
  /// An optimistic update of one entity, then its rollback, per operation, over `n` stored
  /// entities; against the same change and its undo written by hand on a map in the same run:
  /// two plain updates, the first keeping the value before in an object, the second writing
  /// it back.
  func optimisticApplyRollback() -> Result {
    let (map, handles) = filledMap(n)
    let (plain, plainHandles) = filledMap(n)
    let operations = quick ? 2_000 : 20_000
    var result = compare(
      "optimistic.apply+rollback",
      map: {
        nanoseconds {
          for step in 0..<operations {
            let id = (step &* 7_919) % n
            let layer = map.optimistic { $0.update(Model.self, id: id) { $0.score += 1 } }
            layer.rollback()
          }
        } / Double(operations)
      },
      floor: {
        nanoseconds {
          for step in 0..<operations {
            let id = (step &* 7_919) % n
            // NB: the undo a client writes by hand: a layer's change is any code, which has
            // no inverse to apply, so rolling it back writes back the value before, kept
            // until the server answers (here in an object, as a request's record keeps it).
            let undo = Undo()
            plain.update(Model.self, id: id) {
              undo.before = $0
              $0.score += 1
            }
            blackHole(undo)
            plain.update(Model.self, id: id) { $0 = undo.before.unsafelyUnwrapped }
          }
        } / Double(operations)
      })
    result.note =
      "floor: the same change and its undo by hand, the value before kept and written back"
    return result.keeping((handles, plainHandles))
  }

  /// A server write to an entity under a pending layer, against the same write to an entity no
  /// layer shadows, on the same map.
  func optimisticShadowedWrite() -> Result {
    let (map, handles) = filledMap(n)
    let layer = map.optimistic { $0.update(Model.self, id: 0) { $0.name = "optimistic" } }
    let writes = quick ? 10_000 : 100_000
    var round = 0.0
    var result = compare(
      "optimistic.shadowed.write",
      map: {
        round += 1
        return nanoseconds {
          for step in 0..<writes {
            map.update(Model.self, id: 0) { $0.score = round + Double(step) }
          }
        } / Double(writes)
      },
      floor: {
        let unlayered = IdentityMap()
        let handle = unlayered.store(Model(0))
        let ns = nanoseconds {
          for step in 0..<writes {
            unlayered.update(Model.self, id: 0) { $0.score = round + Double(step) }
          }
        }
        blackHole(handle)
        return ns / Double(writes)
      })
    precondition(map.find(Model.self, id: 0)?.value.name == "optimistic", "the layer stays on top")
    layer.rollback()
    result.note = "floor: the same update with no layer pending"
    return result.keeping(handles)
  }
}

/// What a client without layers keeps of an optimistic change until the server answers: the
/// value before it, to write back if the request fails (the floor of
/// `optimistic.apply+rollback`).
///
/// NB: not generic: a generic class's deinit runs unspecialized, and asked the runtime for
/// `Model?`'s metadata on every object freed, which more than doubled what it added.
final class Undo {
  var before: Model?
}
