import Concord
import ConcordSQLite
import Foundation

#if canImport(SQLite3)
  import SQLite3
#else
  import CSQLite
#endif

// api.github.com's shapes, trimmed: an issue nests stub users (no name, no updated_at), its
// labels and its milestone, and is stamped by its own `updated_at`; the full profile has it all.

struct User: Mergeable, Stamped, Codable, Equatable {
  var id: Int
  var login: String
  var name: String?
  var updatedAt: Double?

  var stamp: Stamp? { updatedAt }

  static func merge(_ incoming: User, into stored: User) -> User {
    incoming.keepingStoredValues(of: stored, whereNil: \.name, \.updatedAt)
  }

  static func stub(_ id: Int) -> User { User(id: id, login: "user\(id)") }
}

struct Label: Identifiable, Codable, Sendable, Equatable {
  var id: Int
  var name: String
}

struct Milestone: Identifiable, Codable, Sendable, Equatable {
  var id: Int
  var title: String
}

struct Issue: Aggregate, Stamped, Codable, Equatable {
  var id: Int
  var title: String
  var updatedAt: Double
  var user: User
  var labels: [Label]
  var milestone: Milestone?

  var stamp: Stamp? { updatedAt }

  static var nestedEntities: [NestedEntity<Issue>] {
    [.init(\.user), .init(\.labels), .init(\.milestone)]
  }

  /// Issue `id`, by user `userID`, with labels and a milestone.
  static func make(_ id: Int, title: String? = nil, at stamp: Double = 1, userID: Int = 7)
    -> Issue
  {
    Issue(
      id: id, title: title ?? "Issue \(id)", updatedAt: stamp, user: .stub(userID),
      labels: [Label(id: 1, name: "bug"), Label(id: id % 3 + 2, name: "area \(id % 3)")],
      milestone: id.isMultiple(of: 2) ? Milestone(id: 5, title: "Wave 2") : nil)
  }
}

/// A plain entity with a String id.
struct Note: Identifiable, Codable, Sendable, Equatable {
  var id: String
  var text: String
}

/// A fresh directory for one test's databases, removed when the value goes.
final class TemporaryDirectory: Sendable {
  let path: String

  init() {
    path = NSTemporaryDirectory() + "concord-\(UUID().uuidString)"
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
  }

  deinit {
    try? FileManager.default.removeItem(atPath: path)
  }

  /// A database path in the directory.
  var database: String { path + "/cache.sqlite" }
}

/// A map persisting the fixtures' types in `path`: what an app makes at launch.
func launch(
  _ path: String, logger: (any IdentityMapLogger)? = nil, clock: any ResourceClock = .system
) throws -> IdentityMap {
  launch(try SQLiteStore(path: path), logger: logger, clock: clock)
}

/// A map persisting the fixtures' types in `store`.
func launch(
  _ store: any PersistentStore, logger: (any IdentityMapLogger)? = nil,
  clock: any ResourceClock = .system
) -> IdentityMap {
  let map = IdentityMap(logger: logger, persistence: store, clock: clock)
  map.persist(Issue.self)
  map.persist(User.self)
  map.persist(Label.self)
  map.persist(Milestone.self)
  map.persist(Note.self)
  return map
}

/// What `PRAGMA name` says of the database at `path`, opened read-only; `writable`, it may
/// set a pragma (`user_version = 99`), creating the file if there is none, and returns `nil`
/// when the pragma prints nothing, or `"error"` when SQLite fails.
func pragma(_ name: String, at path: String, writable: Bool = false) -> String? {
  var handle: OpaquePointer?
  var statement: OpaquePointer?
  defer {
    sqlite3_finalize(statement)
    sqlite3_close(handle)
  }
  let flags = writable ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY
  guard sqlite3_open_v2(path, &handle, flags, nil) == SQLITE_OK,
    // NB: a store just dropped may still be checkpointing on its writer: wait for it.
    sqlite3_busy_timeout(handle, 5_000) == SQLITE_OK,
    sqlite3_prepare_v2(handle, "PRAGMA \(name)", -1, &statement, nil) == SQLITE_OK
  else { return writable ? "error" : nil }
  switch sqlite3_step(statement) {
  case SQLITE_ROW: return sqlite3_column_text(statement, 0).map { String(cString: $0) }
  case SQLITE_DONE: return nil
  default: return writable ? "error" : nil
  }
}
