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
  }

  /// Plays the story and returns what happened.
  @discardableResult
  func run() async throws -> Outcome {
    let client = try ReadingClient(console: console, quiet: false, database: database)
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
      case .failure(let error):
        console.write("\(source) \(error) (skipped)")
        outcome.badLines.append(error)
      }
    }

    outcome.refused = client.log.refused.value
    outcome.live = map.count
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
    if database != nil {
      try map.flush()
      console.say("cache", "saved for the next launch")
    }
    client.log.muted.increment()
    return outcome
  }
}
