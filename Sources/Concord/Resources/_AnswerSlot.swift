import Foundation

/// Where a resource's answer lives in the map: an alias slot of its own, which holds the
/// answer's entities as a collection alias holds its entities, so that each is stored once
/// and stays current, and an entity written anywhere changes the answer.
///
/// The slot is hidden: its id is a name users cannot make (see `_ResourceRegistry.slotID`), so
/// only its resource writes it. It is written unstamped, so that every fetch's answer replaces
/// the one before, while each entity in it is judged by its own stamp. Its changes never reach
/// the store as an alias's would (the slot does not persist): a persisted answer is one record
/// of its own, saved when a fetch lands (`_AnswerRecord`).
final class _AnswerSlot<Value: Sendable>: Sendable {
  /// A handle on the slot: it holds the slot, and through it the map (rule 6 of
  /// `_Lifetime.swift`), for as long as the resource lives.
  let observer: EntityObserver<Value?>
  /// The typed operations of the answer's entity type.
  let shape: _AnswerShape<Value>
  /// The resource's name, from its key.
  let name: String
  /// The slot, untyped, for the shape's operations. NB: unowned (`Unmanaged`), as `observer`
  /// holds it (rule 6 of `_Lifetime.swift`); and of a type that is not generic, so that this
  /// code, which runs unspecialized, looks up no metadata to pass it on. Nonisolated(unsafe)
  /// as the handle's: the node is only touched under the map's lock.
  private nonisolated(unsafe) let slotNode: Unmanaged<_AnyNode>

  private init(observer: EntityObserver<Value?>, shape: _AnswerShape<Value>, name: String) {
    self.observer = observer
    self.shape = shape
    self.name = name
    slotNode = .passUnretained(observer._handle.node)
  }

  /// Makes the slot `id` of a resource named `name`, filled with the answer the store keeps
  /// for it, if its entity type is persisted and the store has one. One write of the map,
  /// after reading that answer, and the entities it names, outside the map's lock.
  static func make(in map: _MapCore, id: _AliasID, name: String, shape: _AnswerShape<Value>)
    -> (_AnswerSlot, _StoredAnswerInfo?)
  {
    let (held, stored) = map.writeReading(
      reading: { prefetch in shape.wantStored(map, name, prefetch) },
      write: {
        let node = shape.makeSlot(map, id)
        let stored = map.persistsTypes ? shape.loadStored(map, node, name) : nil
        return (map.holdForHandle(node), stored)
      })
    let observer = EntityObserver(_Handle(held: held))
    return (_AnswerSlot(observer: observer, shape: shape, name: name), stored)
  }

  /// The map.
  var map: _MapCore { observer._handle.core }

  /// The slot.
  var node: _AliasNode<Value> { unsafeDowncast(observer._handle.node, to: _AliasNode<Value>.self) }

  /// The answer as the map has it now, boxed, and the map's delivery version at that moment: a
  /// read at a higher version is newer.
  func read() -> (answer: _AnyAnswer?, version: UInt64) {
    slotNode._withUnsafeGuaranteedRef { shape.read(map, $0) }
  }

  /// Writes `value` as the answer, in one write of the map, each entity stamped `stamp` unless
  /// it carries its own; for a persisted entity type, the answer's record is saved with it.
  func store(_ value: Value, stamp: Stamp?, record: _StoredAnswerInfo) {
    let map = map
    slotNode._withUnsafeGuaranteedRef { node in
      map.write {
        shape.write(map, value, node, stamp)
        if map.persistsTypes { shape.saveRecord(map, node, name, record) }
      }
    }
  }

  /// Saves the answer's record with a new `fetchedAt`, after a `.notModified`: the store's
  /// only change, when the entity type is persisted.
  func confirm(_ record: _StoredAnswerInfo) {
    let map = map
    guard map.hasStore else { return }
    slotNode._withUnsafeGuaranteedRef { node in
      map.write {
        if map.persistsTypes { shape.saveRecord(map, node, name, record) }
      }
    }
  }

  /// Empties the slot, releasing what only it held. The store keeps a persisted answer.
  func release() {
    let map = map
    let node = node
    map.write { map.releaseAnswer(node) }
  }

  /// A subscription that keeps a resource observer: it holds the slot, and calls `onCancel`
  /// when cancelled.
  ///
  /// NB: the map's own `Subscription`, holding a subscriber of the slot that takes no value,
  /// so that a resource's observation is cancelled, released and counted as any other.
  func subscription(onCancel: @escaping @Sendable () -> Void) -> Subscription {
    let map = map
    let node = observer._handle.node
    // NB: `.max`: no version is newer, so it is never delivered anything.
    let holder = _Subscriber<Value?>(lastVersion: .max, onValue: nil)
    map.read { map.attach(holder, to: node) }
    return Subscription(core: map, node: node, subscriber: holder, onCancel: onCancel)
  }
}

/// When a stored answer was fetched, and its validator; for a paged list's record, its pages
/// and cursors too.
@usableFromInline
struct _StoredAnswerInfo: Sendable {
  @usableFromInline let fetchedAt: Date
  @usableFromInline let validator: String?
  @usableFromInline var paging: _StoredPaging? = nil

  @inlinable
  init(fetchedAt: Date, validator: String?, paging: _StoredPaging? = nil) {
    self.fetchedAt = fetchedAt
    self.validator = validator
    self.paging = paging
  }
}

/// The operations on a resource's answer that need its entity type `T`, made where `T` is
/// known (`_AnswerShape.single(_:)`, `_AnswerShape.list(_:)`) and called by the type-erased
/// resource, in writes of the map.
///
/// NB: `single(_:)` and `list(_:)` are inlinable, as are the `resource` methods that call them,
/// so that a resource made in the client's module makes its slot, and the slot's schema with
/// it, specialized for `T`: every answer a fetch stores then runs the pass as
/// `store(_:named:)` does, without looking up generic metadata at each entity.
@usableFromInline
struct _AnswerShape<Value: Sendable>: Sendable {
  /// The empty slot `id`, registered.
  @usableFromInline let makeSlot: @Sendable (_MapCore, _AliasID) -> _AliasNode<Value>
  /// Writes an answer into its slot, each entity stamped so unless it carries its own
  /// (`_MapCore.storeAnswer`, specialized for the entity type). In a write.
  @usableFromInline let write: @Sendable (_MapCore, Value, _AnyNode, Stamp?) -> Void
  /// Asks a prefetch for the answer the store keeps for the resource named so, if the entity
  /// type is persisted. Under the map's lock.
  @usableFromInline let wantStored: @Sendable (_MapCore, String, _Prefetch) -> Void
  /// Fills the slot with the answer the store keeps for the resource named so, if any, as a
  /// load (nobody is told); returns when it was fetched, and its validator.
  @usableFromInline let loadStored:
    @Sendable (_MapCore, _AliasNode<Value>, String) -> _StoredAnswerInfo?
  /// Lists the save of the record of the answer in the slot of the resource named so. In a
  /// write, when the entity type is persisted.
  @usableFromInline let saveRecord:
    @Sendable (_MapCore, _AnyNode, String, _StoredAnswerInfo) -> Void
  /// Reads the slot's answer, boxed, and the map's delivery version at that moment: see
  /// `_AnswerSlot.read()`. NB: made where the type is known, as `write` is: the resource runs
  /// unspecialized, where each value of `Value` (an optional of it, a tuple with it) looks up
  /// its type's metadata.
  @usableFromInline let read:
    @Sendable (_MapCore, _AnyNode) -> (answer: _AnyAnswer?, version: UInt64)

  @inlinable
  init(
    makeSlot: @escaping @Sendable (_MapCore, _AliasID) -> _AliasNode<Value>,
    write: @escaping @Sendable (_MapCore, Value, _AliasNode<Value>, Stamp?) -> Void,
    wantStored: @escaping @Sendable (_MapCore, String, _Prefetch) -> Void,
    loadStored: @escaping @Sendable (_MapCore, _AliasNode<Value>, String) -> _StoredAnswerInfo?,
    saveRecord: @escaping @Sendable (_MapCore, Value?, String, _StoredAnswerInfo) -> Void
  ) {
    // NB: the slot comes untyped (see `_AnswerSlot.slotNode`), and is downcast here, where
    // `Value` is known.
    @Sendable func slot(_ node: _AnyNode) -> _AliasNode<Value> {
      unsafeDowncast(node, to: _AliasNode<Value>.self)
    }
    self.makeSlot = makeSlot
    self.write = { map, value, node, stamp in write(map, value, slot(node), stamp) }
    self.wantStored = wantStored
    self.loadStored = loadStored
    self.saveRecord = { map, node, name, info in saveRecord(map, slot(node).value, name, info) }
    read = { map, node in
      let node = slot(node)
      var value: Value?
      var version: UInt64 = 0
      map.readOnly {
        value = node.value
        version = map.deliveryVersion
      }
      return (_Answer.box(value), version)
    }
  }

  /// The answer is one entity.
  @inlinable
  static func single<T: Identifiable & Sendable>(_: T.Type) -> _AnswerShape<T> {
    _AnswerShape<T>(
      makeSlot: { map, id in map.aliasSlot(id, of: T.self) },
      write: { map, value, node, stamp in map.storeAnswer(value, into: node, stamp: stamp) },
      wantStored: { map, name, prefetch in
        map.want(answer: name, of: T.self, list: false, in: prefetch)
      },
      loadStored: { map, node, name in
        map.loadStoredAnswer(T.self, into: node, name: name, list: false) { $0.first }
      },
      saveRecord: { map, value, name, info in
        map.saveAnswerRecord(
          T.self, ids: value.map { [$0.id] } ?? [], name: name, list: false, info)
      })
  }

  /// The answer is a list of entities.
  @inlinable
  static func list<T: Identifiable & Sendable>(_: T.Type) -> _AnswerShape<[T]> {
    _AnswerShape<[T]>(
      makeSlot: { map, id in map.collectionAliasSlot(id, of: T.self) },
      write: { map, value, node, stamp in map.storeAnswer(value, into: node, stamp: stamp) },
      wantStored: { map, name, prefetch in
        map.want(answer: name, of: T.self, list: true, in: prefetch)
      },
      loadStored: { map, node, name in
        map.loadStoredAnswer(T.self, into: node, name: name, list: true) { $0 }
      },
      saveRecord: { map, value, name, info in
        map.saveAnswerRecord(T.self, ids: value?.map { $0.id } ?? [], name: name, list: true, info)
      })
  }
}
