// ConcordSharingHelper: a second process for the sharing tests (`SharingProcessTests`) and a
// reading widget's stand-in. It opens a store on a database file, shared as its arguments say,
// runs the commands it reads on standard input, one a line, and prints what it observes, one
// event a line. Each command ends with a line `ok <command>`, or `error <kind> <message>`.
//
//   ConcordSharingHelper PATH shared|readOnly|exclusive
//
// Commands:
//   put ID TITLE [VERSION]        store a book (stamped with VERSION when given)
//   count-up ID N                 store book ID N times, versions 1...N, one write each, then
//                                 flush; prints `wrote N`
//   transactions PREFIX N K       N transactions, each storing books PREFIX0..PREFIX(K-1)
//                                 titled with the transaction's number, then flush
//   remove ID [TOMBSTONE]         remove a book (leaving a tombstone stamped TOMBSTONE)
//   get ID                        prints `value ID TITLE VERSION` or `value ID nil`
//   watch ID                      holds a handle on book ID and prints `changed ID TITLE
//                                 VERSION` (or `removed ID`) from each callback
//   query                         opens a live query of every book; prints `query N` from
//                                 each callback
//   books                         prints `book ID TITLE VERSION` for each book of the query
//   sync | flush                  syncExternalChanges() | flush()
//   legacy-put ID TITLE           writes a row with plain SQL, as a process of ConcordSQLite
//                                 0.3 would (no change log of its own)
//   kill-mid-transaction N        begins a transaction writing N rows, and is killed (SIGKILL)
//                                 before it commits
//   claim-old-slot VERSION        claims a slot of the file beside the database as a sharing
//                                 process of schema VERSION would
//   quit

import Concord
import ConcordSQLite
import Foundation

#if canImport(SQLite3)
  import SQLite3
#else
  import CSQLite
#endif

/// The book the tests share: the same JSON as the tests' `SharedBook`.
struct Book: Identifiable, Codable, Sendable, Equatable, Stamped {
  var id: String
  var title: String
  var version: Double?

  var stamp: Stamp? { version }
}

/// Prints whole lines, from any thread.
let output = NSLock()
func say(_ line: String) {
  output.lock()
  FileHandle.standardOutput.write(Data((line + "\n").utf8))
  output.unlock()
}

func describe(_ book: Book?, id: String) -> String {
  guard let book else { return "\(id) nil" }
  return "\(book.id) \(book.title) \(book.version.map { String(Int($0)) } ?? "-")"
}

/// Logs each event as `log KIND DESCRIPTION`.
struct Logger: IdentityMapLogger {
  func log(_ event: IdentityMapEvent) {
    guard event.kind != .stored, event.kind != .released else { return }
    say("log \(event.kind) \(event)")
  }
}

let arguments = CommandLine.arguments
guard arguments.count == 3 else {
  FileHandle.standardError.write(Data("usage: ConcordSharingHelper PATH MODE\n".utf8))
  exit(2)
}
let path = arguments[1]
let sharing: SQLiteStore.Sharing =
  switch arguments[2] {
  case "readOnly": .readOnly
  case "exclusive": .exclusive
  default: .shared
  }

let store: SQLiteStore
do {
  store = try SQLiteStore(path: path, sharing: sharing)
} catch let error as SQLiteStore.Error {
  say("error \(error.kind) \(error.message)")
  exit(1)
}
let map = IdentityMap(logger: Logger(), persistence: store)
map.persist(Book.self, as: "Book")
say("ready \(ProcessInfo.processInfo.processIdentifier)")

var handles: [String: EntityObserver<Book>] = [:]
var subscriptions: [Subscription] = []
var query: EntityObserver<[Book]>?

@MainActor
func run(_ words: [String]) throws {
  switch words.first ?? "" {
  case "put":
    map.store(
      Book(id: words[1], title: words[2], version: words.count > 3 ? Double(words[3]) : nil))
  case "count-up":
    let count = Int(words[2])!
    for version in 1...count {
      map.store(Book(id: words[1], title: "v\(version)", version: Double(version)))
    }
    try map.flush()
    say("wrote \(count)")
  case "transactions":
    let count = Int(words[2])!
    let size = Int(words[3])!
    for number in 0..<count {
      map.transaction { transaction in
        for index in 0..<size {
          transaction.store(Book(id: "\(words[1])\(index)", title: "t\(number)", version: nil))
        }
      }
    }
    try map.flush()
  case "remove":
    if words.count > 2 {
      map.remove(Book.self, id: words[1], tombstone: Double(words[2])!)
    } else {
      map.remove(Book.self, id: words[1])
    }
  case "get":
    say("value \(describe(map.find(Book.self, id: words[1])?.value, id: words[1]))")
  case "watch":
    let id = words[1]
    guard let handle = map.find(Book.self, id: id) else { return say("error missing \(id)") }
    handles[id] = handle
    subscriptions.append(handle.observe { book in say("changed \(describe(book, id: id))") })
    subscriptions.append(handle.observeRemoval { _ in say("removed \(id)") })
  case "query":
    let opened = map.query(Book.self)
    query = opened
    subscriptions.append(opened.observe { books in say("query \(books.count)") })
  case "books":
    for book in (query?.value ?? []).sorted(by: { $0.id < $1.id }) {
      say("book \(describe(book, id: book.id))")
    }
  case "sync": try map.syncExternalChanges()
  case "flush": try map.flush()
  case "legacy-put":
    var handle: OpaquePointer?
    sqlite3_open(path, &handle)
    sqlite3_busy_timeout(handle, 5_000)
    let json = "{\"id\":\"\(words[1])\",\"title\":\"\(words[2])\"}"
    let key = "\"\(words[1])\""
    let sql =
      "INSERT OR REPLACE INTO entities (kind, key, payload, stamp) VALUES ('Book', "
      + "CAST('\(key)' AS BLOB), CAST('\(json)' AS BLOB), NULL)"
    let status = sqlite3_exec(handle, sql, nil, nil, nil)
    sqlite3_close(handle)
    guard status == SQLITE_OK else { throw SQLiteStore.Error.Legacy(status: status) }
  case "kill-mid-transaction":
    var handle: OpaquePointer?
    sqlite3_open(path, &handle)
    sqlite3_busy_timeout(handle, 5_000)
    sqlite3_exec(handle, "BEGIN IMMEDIATE", nil, nil, nil)
    for index in 0..<Int(words[1])! {
      let json = "{\"id\":\"k\(index)\",\"title\":\"killed\"}"
      sqlite3_exec(
        handle,
        "INSERT OR REPLACE INTO entities (kind, key, payload, stamp) VALUES ('Book', "
          + "CAST('\"k\(index)\"' AS BLOB), CAST('\(json)' AS BLOB), NULL)", nil, nil, nil)
    }
    // NB: the pages are in the WAL, the commit is not: the system kills the process here.
    sqlite3_exec(handle, "PRAGMA wal_checkpoint", nil, nil, nil)
    say("killing")
    kill(getpid(), SIGKILL)
  case "claim-old-slot":
    let descriptor = open(path + "-concord", O_RDWR | O_CREAT, 0o644)
    var version = Int64(words[1])!
    var position: Int64 = 0
    _ = withUnsafeBytes(of: &position) { pwrite(descriptor, $0.baseAddress, 8, 4096 + 16 * 63) }
    _ = withUnsafeBytes(of: &version) { pwrite(descriptor, $0.baseAddress, 8, 4096 + 16 * 63 + 8) }
    var lock = flock()
    lock.l_type = Int16(F_RDLCK)
    lock.l_whence = Int16(SEEK_SET)
    lock.l_start = 64 + 63
    lock.l_len = 1
    guard fcntl(descriptor, F_SETLK, &lock) == 0 else { throw SQLiteStore.Error.Legacy(status: 0) }
    lock.l_start = 1
    _ = fcntl(descriptor, F_SETLK, &lock)
  case "quit":
    say("ok quit")
    exit(0)
  default:
    say("error unknown \(words.joined(separator: " "))")
    return
  }
  say("ok \(words.first ?? "")")
}

extension SQLiteStore.Error {
  /// A failure of the plain SQL commands.
  struct Legacy: Error {
    let status: Int32
  }
}

while let line = readLine() {
  let words = line.split(separator: " ").map(String.init)
  guard !words.isEmpty else { continue }
  do {
    try run(words)
  } catch let error as SQLiteStore.Error {
    say("error \(error.kind) \(error.message)")
  } catch {
    say("error other \(error)")
  }
}
