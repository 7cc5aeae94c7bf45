import Concord
import ConcordSQLite
import Foundation

// The reading app's widget: a second process, as a home-screen widget is, that shows the book
// being read. It opens the app's database read-only, holds the `currentBook` alias, and draws
// itself each time another process's commit changes it. The demo starts it (`ConcordDemo
// --widget PATH`) and, after each event, asks it to sync, so that the transcript shows its
// draws in order, the same on every run.

extension AliasKey where Value == Book {
  /// The book the reader has open.
  static var currentBook: Self { .init("currentBook") }
}

/// The widget's side: a process of its own.
enum Widget {
  /// What the widget shows for `book`.
  static func render(_ book: Book?) -> String {
    book.map { "now reading \($0.title) — \($0.author.name)" } ?? "nothing being read"
  }

  /// Runs the widget on the database at `path` until its input ends: it prints its draws when
  /// it reads `sync` (after syncing), then `synced`.
  static func run(database path: String) -> Never {
    let map: IdentityMap
    do {
      map = IdentityMap(persistence: try SQLiteStore(path: path, sharing: .readOnly))
    } catch {
      FileHandle.standardError.write(Data("widget: \(error)\n".utf8))
      exit(1)
    }
    map.persist(Author.self)
    map.persist(Book.self)
    map.persist(FeedPage.self)
    map.persist(User.self)
    let draws = Draws()
    let current = map.find(named: .currentBook)
    // NB: the first draw, and then each change, whichever thread applies it: the file watch's,
    // or this one's sync.
    let subscription = current.observe(includingCurrentValue: true) { draws.add(render($0)) }
    while let line = readLine() {
      guard line == "sync" else { break }
      try? map.syncExternalChanges()
      let lines = draws.take().map { "draw \($0)\n" }.joined() + "synced\n"
      FileHandle.standardOutput.write(Data(lines.utf8))
    }
    subscription.cancel()
    exit(0)
  }

  /// The draws not yet printed.
  final class Draws: @unchecked Sendable {
    // NB: @unchecked because `lock` guards `lines`.
    private let lock = NSLock()
    private var lines: [String] = []

    func add(_ line: String) { lock.withLock { lines.append(line) } }

    func take() -> [String] {
      lock.withLock {
        defer { lines = [] }
        return lines
      }
    }
  }
}

/// The app's side: the widget's process, started on the app's database.
final class WidgetProcess {
  private let process = Process()
  private let input = Pipe()
  private let output = Pipe()
  private var pending = Data()

  /// The demo's own executable: this process's, or, from its tests, the one beside the test
  /// binary. `nil` when there is none.
  static let executable: URL? = {
    var url = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    if url.lastPathComponent == "ConcordDemo" { return url }
    for _ in 0..<5 {
      url.deleteLastPathComponent()
      let candidate = url.appendingPathComponent("ConcordDemo")
      if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
    }
    return nil
  }()

  /// Starts the widget on the database at `path`; `nil` when the demo's executable cannot be
  /// found.
  init?(database path: String) {
    guard let executable = Self.executable else { return nil }
    process.executableURL = executable
    process.arguments = ["--widget", path]
    process.standardInput = input
    process.standardOutput = output
    guard (try? process.run()) != nil else { return nil }
  }

  /// Has the widget apply what the app committed, and returns what it drew since it last
  /// said.
  func sync() -> [String] {
    input.fileHandleForWriting.write(Data("sync\n".utf8))
    var lines: [String] = []
    while true {
      while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
        let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
        pending.removeSubrange(pending.startIndex...newline)
        if line == "synced" { return lines }
        if line.hasPrefix("draw ") { lines.append(String(line.dropFirst(5))) }
      }
      let data = output.fileHandleForReading.availableData
      guard !data.isEmpty else { return lines }
      pending.append(data)
    }
  }

  /// Ends the widget, and waits until it has.
  func close() {
    try? input.fileHandleForWriting.close()
    process.waitUntilExit()
  }
}
