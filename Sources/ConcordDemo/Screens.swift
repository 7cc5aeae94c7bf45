import Concord
import Foundation

/// Where the demo writes: the console, or a list of lines for tests.
struct Console: Sendable {
  let write: @Sendable (String) -> Void

  /// Prints each line.
  static let standardOutput = Console { print($0) }

  /// Writes `text` under a left column naming who speaks.
  func say(_ who: String, _ text: String) {
    write("  " + who.padding(toLength: 7, withPad: " ", startingAt: 0) + "│ " + text)
  }
}

/// How many times something happened, from any thread.
final class Tally: @unchecked Sendable {
  // NB: @unchecked because `count` is only touched while holding `lock`.
  private let lock = NSLock()
  private var count = 0

  var value: Int { lock.withLock { count } }

  func increment() { lock.withLock { count += 1 } }
}

/// A screen of the app: it holds the handles it shows, redraws when they change, and releases
/// them when closed.
protocol Screen: AnyObject {
  /// How many times the screen drew itself, the first time included.
  var draws: Tally { get }
}

/// The home feed: one page of books.
final class FeedScreen: Screen {
  let draws = Tally()
  private let page: EntityObserver<FeedPage>
  private let subscription: Subscription

  init(page: EntityObserver<FeedPage>, console: Console, quiet: Bool) {
    self.page = page
    let draws = draws
    let draw: @Sendable (FeedPage) -> Void = { page in
      draws.increment()
      if !quiet { console.say("feed", Self.describe(page)) }
    }
    subscription = page.observe(includingCurrentValue: true, draw)
  }

  static func describe(_ page: FeedPage) -> String {
    page.books.map { "\($0.title) — \($0.author.name)" }.joined(separator: " · ")
  }
}

/// A book's detail page.
final class BookScreen: Screen {
  let draws = Tally()
  private var book: EntityObserver<Book>?
  private var subscription: Subscription?

  init(book: EntityObserver<Book>, console: Console, quiet: Bool) {
    self.book = book
    let draws = draws
    let draw: @Sendable (Book) -> Void = { book in
      draws.increment()
      if !quiet { console.say("book", "\(book.title) by \(book.author.name)") }
    }
    subscription = book.observe(includingCurrentValue: true, draw)
  }

  /// Closes the screen: its handle and subscription go, and with them what only they held.
  func close() {
    subscription = nil
    book = nil
  }
}

/// An author's profile: the author, and how many of their books the feed shows.
final class AuthorScreen: Screen {
  let draws = Tally()
  private let author: EntityObserver<Author>
  private let subscription: Subscription

  init(author: EntityObserver<Author>, console: Console, quiet: Bool) {
    self.author = author
    let draws = draws
    let draw: @Sendable (Author) -> Void = { author in
      draws.increment()
      if !quiet { console.say("author", author.name) }
    }
    subscription = author.observe(includingCurrentValue: true, draw)
  }
}

/// The header: who is signed in, from the `currentUser` alias.
final class HeaderScreen: Screen {
  let draws = Tally()
  private let user: EntityObserver<User?>
  private let subscription: Subscription

  /// Opens on the alias before it is set: the header is told when it is.
  init(user: EntityObserver<User?>, console: Console, quiet: Bool) {
    self.user = user
    let draws = draws
    let draw: @Sendable (User?) -> Void = { user in
      draws.increment()
      if !quiet { console.say("header", user.map { "signed in as \($0.name)" } ?? "signed out") }
    }
    subscription = user.observe(includingCurrentValue: true, draw)
  }
}
