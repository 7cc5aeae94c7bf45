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

/// A screen of the app: it holds the handle it shows, draws itself at once and again whenever
/// the value changes, and lets go of it when closed.
final class Screen<Value: Sendable> {
  /// How many times the screen drew itself, the first time included.
  let draws = Tally()
  private var subscription: Subscription?

  /// Opens a screen named `name` on `value`, drawn as `describe` says, silently if `quiet`.
  init(
    _ name: String, showing value: EntityObserver<Value>, console: Console, quiet: Bool,
    describe: @escaping @Sendable (Value) -> String
  ) {
    let draws = draws
    // NB: the current value comes through the same ordered path as later changes, so that a
    // change committed meanwhile is never drawn before it.
    subscription = value.observe(includingCurrentValue: true) { value in
      draws.increment()
      if !quiet { console.say(name, describe(value)) }
    }
  }

  /// Closes the screen: its subscription goes, and with it what only the screen held.
  func close() {
    subscription = nil
  }
}

extension Screen where Value == FeedPage {
  /// The home feed: one page of books.
  static func feed(_ page: EntityObserver<FeedPage>, console: Console, quiet: Bool) -> Screen {
    Screen("feed", showing: page, console: console, quiet: quiet) { page in
      page.books.map { "\($0.title) — \($0.author.name)" }.joined(separator: " · ")
    }
  }
}

extension Screen where Value == Book {
  /// A book's detail page.
  static func book(_ book: EntityObserver<Book>, console: Console, quiet: Bool) -> Screen {
    Screen("book", showing: book, console: console, quiet: quiet) {
      "\($0.title) by \($0.author.name)"
    }
  }
}

extension Screen where Value == Author {
  /// An author's profile.
  static func author(_ author: EntityObserver<Author>, console: Console, quiet: Bool) -> Screen {
    Screen("author", showing: author, console: console, quiet: quiet) { author in
      author.name + (author.bio.map { " (\($0))" } ?? "")
    }
  }
}

extension Screen where Value == [Book] {
  /// An author's shelf: a live query of their books, by title. A book enters when it is
  /// published or stored, and leaves when it is removed or changes author.
  static func shelf(
    of author: Author.ID, in map: IdentityMap, console: Console, quiet: Bool
  ) -> Screen {
    let books = map.query(Book.self, where: \.author.id, equals: author) { $0.title < $1.title }
    return Screen("shelf", showing: books, console: console, quiet: quiet) { books in
      guard let first = books.first else { return "no books" }
      return "\(first.author.name): " + books.map(\.title).joined(separator: " · ")
    }
  }
}

extension Screen where Value == User? {
  /// The header: who is signed in, from the `currentUser` alias, open before the alias is set.
  static func header(_ user: EntityObserver<User?>, console: Console, quiet: Bool) -> Screen {
    Screen("header", showing: user, console: console, quiet: quiet) { user in
      user.map { "signed in as \($0.name)" } ?? "signed out"
    }
  }
}
