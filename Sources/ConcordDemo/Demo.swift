import Concord
import Foundation

/// The demo's story: load the app's data, open four screens and a header, then play the
/// websocket events and show who hears what.
struct Demo {
  let console: Console
  /// Events from `--replay`, or the scripted ones.
  var events: String = ScriptedServer.script
  /// Where the events came from, for the console.
  var source = "ws"
  /// The line before which the story closes the book screen; `nil` keeps it open.
  var closeBookScreenBeforeLine: Int? = 4
  /// The SQLite file of `--db`: the client starts from what it holds, and keeps what it saw.
  var database: String?
  /// Whether a widget, in a process of its own, shows the book being read from the app's file
  /// (a temporary one without `--db`).
  var widget = true

  /// What a run did, for the summary and for tests.
  struct Outcome: Equatable {
    var applied = 0
    var refused = 0
    var badLines: [EventError] = []
    var live = 0
    var feedDraws = 0
    var authorDraws = 0
    var headerDraws = 0
    var shelfDraws = 0
    var feed: FeedPage?
    /// The titles on Ursula's shelf at the end.
    var shelf: [String] = []
    var user: User?
    /// The feed page the database held when the run started, if any.
    var cachedFeed: FeedPage?
    /// What the widget drew, in order.
    var widget: [String] = []
  }

  /// Plays the story and returns what happened.
  @discardableResult
  func run() async throws -> Outcome {
    // NB: the widget reads the app's file: without `--db`, a temporary one, which says nothing
    // of a previous launch.
    let temporary =
      database == nil && widget && WidgetProcess.executable != nil
      ? NSTemporaryDirectory() + "concord-demo-\(UUID().uuidString).sqlite" : nil
    defer {
      for suffix in ["", "-wal", "-shm", "-concord"] {
        if let temporary { try? FileManager.default.removeItem(atPath: temporary + suffix) }
      }
    }
    let client = try ReadingClient(
      console: console, quiet: false, database: database ?? temporary)
    let map = client.map
    var outcome = Outcome()
    let feedResource = client.feed

    // Offline first: the last feed this app saw, the feed resource's answer kept in the file,
    // shown until the network answers.
    if let database {
      outcome.cachedFeed = feedResource.state.value
      let titles = outcome.cachedFeed?.books.map { "\($0.title) — \($0.author.name)" }
      console.write("open \((database as NSString).lastPathComponent)")
      console.say("cache", titles?.joined(separator: " · ") ?? "no feed yet: a first launch")
    }

    // The feed screen and the shelf ask for the feed at once: one request answers both.
    client.network.hold("/feed?page=1", until: 2)
    @Sendable func ask() async throws -> FeedPage {
      client.network.ask("/feed?page=1")
      return try await feedResource.refresh()
    }
    async let forFeed = ask()
    async let forShelf = ask()
    _ = try await (forFeed, forShelf)
    console.say(
      "net", "2 screens asked for the feed: \(client.network.requests("/feed?page=1")) request")
    // The author's profile, fetched whatever a previous launch kept: its first request fails,
    // and the resource retries it.
    let profileResource = client.author(1)
    try await profileResource.refresh()
    let page = map.find(FeedPage.self, id: 1)!
    let profile = map.find(Author.self, id: 1)!
    let feed = Screen.feed(page, console: console, quiet: false)
    let author = Screen.author(profile, console: console, quiet: false)
    let shelf = Screen.shelf(of: 1, in: map, console: console, quiet: false)

    var bookScreen: Screen<Book>? = .book(
      try await client.book("dune"), console: console, quiet: false)

    let header = Screen.header(map.find(named: .currentUser), console: console, quiet: false)
    try await client.signIn()
    console.say("map", "\(map.count) entities live")

    // The widget, in another process: the book being read, from the app's file.
    client.startReading("earthsea")
    var widgetProcess: WidgetProcess?
    if widget, let path = database ?? temporary {
      try map.flush()
      widgetProcess = WidgetProcess(database: path)
    }
    /// Brings what the app committed to the file, and shows what the widget drew.
    func showWidget() throws {
      guard let widgetProcess else { return }
      try map.flush()
      for draw in widgetProcess.sync() {
        console.say("widget", draw)
        outcome.widget.append(draw)
      }
    }
    try showWidget()

    for (line, result) in Event.parse(lines: events) {
      if let closing = closeBookScreenBeforeLine, line >= closing, bookScreen != nil {
        console.write("close the book screen")
        let before = map.count
        bookScreen?.close()
        bookScreen = nil
        console.say("map", "\(before) → \(map.count) entities live")
      }
      switch result {
      case .success(let event):
        console.write("\(source) line \(line): \(event.summary)")
        client.apply(event)
        outcome.applied += 1
        try showWidget()
      case .failure(let error):
        console.write("\(source) \(error) (skipped)")
        outcome.badLines.append(error)
      }
    }

    outcome.refused = client.log.refused.value
    outcome.live = map.count
    // NB: what the summary reads is not part of the story: a query of a persisted type loads
    // the books the file has, and releases them, which would be logged.
    client.log.muted.increment()
    outcome.feedDraws = feed.draws.value
    outcome.authorDraws = author.draws.value
    outcome.headerDraws = header.draws.value
    outcome.shelfDraws = shelf.draws.value
    outcome.shelf = map.query(Book.self, where: \.author.id, equals: 1).value.map(\.title).sorted()
    outcome.feed = page.value
    outcome.user = map.find(named: .currentUser).value
    withExtendedLifetime((feedResource, profileResource)) {}
    console.write(
      "done: \(outcome.applied) events applied (\(outcome.refused) refused as stale), "
        + "\(outcome.badLines.count) bad lines skipped; \(outcome.live) entities live; "
        + "redraws: feed \(outcome.feedDraws), author \(outcome.authorDraws), "
        + "shelf \(outcome.shelfDraws), header \(outcome.headerDraws)"
    )
    widgetProcess?.close()
    if database != nil {
      try map.flush()
      console.say("cache", "saved for the next launch")
    }
    return outcome
  }
}
