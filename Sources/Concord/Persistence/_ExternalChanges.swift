// What another process committed to a shared store, decoded for this map: one change of a
// persisted type's entity, of an alias, or a deletion of whole kinds. `_MapCore.sync-
// ExternalChanges()` decodes them with no lock held, asks a prefetch (under the lock) for what
// applying them reads, and applies each commit's changes in one write (see "One store, several
// processes" in `_MapCore+Persistence.swift`).

/// One change another process committed, decoded. Each subclass knows its type.
@usableFromInline
class _ExternalChange: @unchecked Sendable {
  // NB: @unchecked because it is made by one thread, with no lock held, then handed to the
  // map's lock, which guards every later access (as `_Prefetch` is).

  /// Under the map's lock: asks `prefetch` for the persisted entities applying the change
  /// reads that memory lacks.
  func want(into prefetch: _Prefetch, _ core: _MapCore) {}

  /// In the write applying the change's commit.
  func apply(_ core: _MapCore) {}
}

/// A change of the entity `id` of `T`: saved with a value and a stamp, removed leaving a
/// tombstone, or deleted.
final class _ExternalEntity<T: Identifiable & Sendable>: _ExternalChange, @unchecked Sendable {
  enum State {
    case saved(T, Stamp?)
    case tombstone(Stamp)
    case deleted
  }

  let persisted: _Persisted<T>
  let id: T.ID
  let state: State
  /// Why the record did not decode, when it did not: it then reads as a removal (see
  /// `_Persisted.decoded(_:)`), and is logged.
  let undecodable: String?

  init(_ persisted: _Persisted<T>, id: T.ID, state: State, undecodable: String? = nil) {
    self.persisted = persisted
    self.id = id
    self.state = state
    self.undecodable = undecodable
  }

  override func want(into prefetch: _Prefetch, _ core: _MapCore) {
    guard case .saved(let value, _) = state else { return }
    core.wantNested(value, in: prefetch)
  }

  override func apply(_ core: _MapCore) {
    core.applyExternal(self)
  }
}

/// A change of the alias `name`, naming entities of `T`: the ids it names now and its stamp.
@usableFromInline
final class _ExternalAlias<T: Identifiable & Sendable>: _ExternalChange, @unchecked Sendable {
  let persisted: _Persisted<T>
  let name: String
  let ids: [T.ID]
  let stamp: Stamp?

  init(_ persisted: _Persisted<T>, name: String, ids: [T.ID], stamp: Stamp?) {
    self.persisted = persisted
    self.name = name
    self.ids = ids
    self.stamp = stamp
  }

  override func want(into prefetch: _Prefetch, _ core: _MapCore) {
    core.want(ids, of: persisted, in: prefetch)
  }

  override func apply(_ core: _MapCore) {
    core.applyExternal(alias: name, self)
  }
}

/// The removal of the alias `name`, whatever it named, or of every alias naming entities of a
/// persisted type, or of every alias.
final class _ExternalAliasRemoval: _ExternalChange, @unchecked Sendable {
  enum Scope {
    case named(String)
    case kind(_AnyPersisted)
    case all
  }

  let scope: Scope

  init(_ scope: Scope) {
    self.scope = scope
  }

  override func apply(_ core: _MapCore) {
    core.applyExternalRemoval(of: scope)
  }
}

/// The deletion of every row of a persisted type (another process's `removeAll()`).
final class _ExternalWipe: _ExternalChange, @unchecked Sendable {
  let persisted: _AnyPersisted

  init(_ persisted: _AnyPersisted) {
    self.persisted = persisted
  }

  override func apply(_ core: _MapCore) {
    core.applyExternalWipe(of: persisted)
  }
}

/// Why another process's change could not be decoded: its key, or an alias's ids, no longer
/// decode (the model changed). Logged, and skipped.
struct _Undecodable: Error {
  let message: String
}

extension _PersistedOps {
  /// `change`, a change of a row of `persisted`'s kind, decoded: see
  /// `_AnyPersisted.decodeExternal(_:)`. A record that no longer decodes reads as a removal,
  /// as it does when a read meets it.
  func decodeExternal(_ persisted: _Persisted<T>, _ change: PersistentChange)
    -> Result<_ExternalChange, _Undecodable>?
  {
    switch change {
    case .save(let kind, let key, let record):
      let id: T.ID
      do {
        id = try decodeID(key)
      } catch {
        return .failure(_Undecodable(message: "reading a key of \(kind): \(error)"))
      }
      switch persisted.decoded(record) {
      case .saved(let value, let stamp):
        return .success(_ExternalEntity(persisted, id: id, state: .saved(value, stamp)))
      case .tombstone(let stamp, let undecodable):
        return .success(
          _ExternalEntity(persisted, id: id, state: .tombstone(stamp), undecodable: undecodable))
      case .deleted(let undecodable):
        return .success(
          _ExternalEntity(persisted, id: id, state: .deleted, undecodable: undecodable))
      case .failed(let message):
        return .failure(_Undecodable(message: "reading \(kind): \(message)"))
      }
    case .delete(let kind, let key):
      do {
        return .success(_ExternalEntity(persisted, id: try decodeID(key), state: .deleted))
      } catch {
        return .failure(_Undecodable(message: "reading a key of \(kind): \(error)"))
      }
    case .saveAlias(let name, _, let record):
      do {
        return .success(
          _ExternalAlias(
            persisted, name: name, ids: try decodeIDs(record.payload), stamp: record.stamp))
      } catch {
        return .failure(_Undecodable(message: "reading alias \"\(name)\": \(error)"))
      }
    case .deleteKind:
      return .success(_ExternalWipe(persisted))
    case .deleteAliases:
      return .success(_ExternalAliasRemoval(.kind(persisted)))
    case .deleteAlias(let name):
      return .success(_ExternalAliasRemoval(.named(name)))
    case .deleteEverything:
      return .success(_ExternalAliasRemoval(.all))
    }
  }
}
