import Concord
import ConcordSQLite
import Foundation

/// The networking layer of the reading app: it stores what the server says into an
/// `IdentityMap`, and hands the app handles on it.
final class ReadingClient: Sendable {
  let map: IdentityMap
  /// What the map logged, as the demo reports it.
  let log: DemoLogger
  /// The scripted server, over a network with latency.
  let network: ScriptedNetwork

  /// A client whose map is in memory only, or, with `database`, also kept in that SQLite file,
  /// so that the next launch starts from what this one saw.
  init(console: Console, quiet: Bool, database: String? = nil) throws {
    log = DemoLogger(console: console, quiet: quiet)
    network = ScriptedNetwork(console: console, quiet: quiet)
    guard let database else {
      map = IdentityMap(logger: log)
      return
    }
    // NB: shared: the widget (see `Widget.swift`) reads the file from a process of its own.
    map = IdentityMap(logger: log, persistence: try SQLiteStore(path: database, sharing: .shared))
    map.persist(Author.self)
    map.persist(Book.self)
    map.persist(FeedPage.self)
    map.persist(User.self)
  }

  // MARK: Resources

  /// The home feed's first page: one request however many screens ask at once. Its answer is
  /// kept in the SQLite file with the map, when there is one, so that the next launch shows it
  /// before the server answers.
  ///
  /// NB: no `modifiedAt`: each book carries its own `updated_at`.
  var feed: Resource<FeedPage> {
    map.resource(.homeFeed, staleAfter: .seconds(60)) { [network] in
      try ScriptedServer.decode(FeedPage.self, from: try await network.get("/feed?page=1")).payload
    }
  }

  /// An author's profile, merged into what the feed's stubs said. A failed request is retried
  /// after 40 ms, then 80 ms.
  func author(_ id: Int) -> Resource<Author> {
    map.resource(
      .author(id), retry: .exponential(attempts: 3, base: .milliseconds(40), jitter: false)
    ) { [network] in
      try ScriptedServer.decode(Author.self, from: try await network.get("/authors/\(id)")).payload
    }
  }

  /// A book, fetched once for its screen.
  func book(_ id: String) async throws -> EntityObserver<Book> {
    map.store(
      try ScriptedServer.decode(Book.self, from: try await network.get("/books/\(id)")).payload)
  }

  /// Marks the book `id` as the one the reader has open (the `currentBook` alias), which the
  /// widget shows.
  func startReading(_ id: String) {
    guard let book = map.find(Book.self, id: id) else { return }
    map.store(book.value, named: .currentBook)
  }

  /// Stores the signed-in user in the `currentUser` alias.
  func signIn() async throws {
    let response = try ScriptedServer.decode(User.self, from: try await network.get("/me"))
    map.store(response.payload, named: .currentUser, modifiedAt: response.stamp)
  }

  // MARK: REST, without the network

  /// Stores a feed page and returns a handle on it: the throughput run's start.
  ///
  /// NB: no `modifiedAt`: each book carries its own `updated_at`, and the author stubs carry
  /// none, which is right: a stub is not as new as the book that nests it.
  func loadFeed(_ data: Data) throws -> EntityObserver<FeedPage> {
    map.store(try ScriptedServer.decode(FeedPage.self, from: data).payload)
  }

  // MARK: Websocket

  /// Applies one event, with the server's stamp so that a late one is refused.
  func apply(_ event: Event) {
    switch event {
    case .authorRenamed(let author, let stamp):
      // The event's author is a stub: merged, it keeps the bio.
      map.store(author, modifiedAt: stamp)
    case .bookRetitled(let id, let title, let stamp):
      // A book is Stamped: the event's stamp becomes its own.
      map.update(Book.self, id: id) {
        $0.title = title
        $0.updatedAt = stamp
      }
    case .bookPublished(let book, let stamp):
      // New books land on the first page of the feed, if the app has it. The book carries the
      // event's stamp (unless it has its own); the page gets the book as stored, so that it
      // writes nothing the store refused. A book removed since (a replay after the delete) is
      // refused by its tombstone, and stays off the page.
      map.transaction { _ in
        let stored = map.store(book, modifiedAt: stamp)
        guard !stored.isRemoved else { return }
        let published = stored.value
        map.update(FeedPage.self, id: 1) { $0.books.append(published) }
      }
    case .bookRemoved(let id, _):
      map.remove(Book.self, id: id)
    case .userRenamed(let user, let stamp):
      map.update(named: .currentUser, modifiedAt: stamp) { current in
        if current.id == user.id { current = user }
      }
    case .burst(let events, _):
      // Events the server sent together: one transaction, so each screen redraws once.
      map.transaction { _ in events.forEach(apply) }
    }
  }
}

/// The map's log, trimmed to what the demo's reader cares about: stale writes it refused,
/// removals and releases.
final class DemoLogger: IdentityMapLogger {
  private let console: Console
  private let quiet: Bool
  /// Set once the story is told, so that the releases of the final teardown stay quiet.
  let muted = Tally()
  /// How many stale writes the map refused.
  let refused = Tally()

  init(console: Console, quiet: Bool) {
    self.console = console
    self.quiet = quiet
  }

  func log(_ event: IdentityMapEvent) {
    switch event.kind {
    case .discardedStale:
      refused.increment()
    case .removed, .released, .persistenceFailed, .undecodableRecord:
      break
    default:
      return
    }
    if !quiet && muted.value == 0 { console.say("log", event.description) }
  }
}
