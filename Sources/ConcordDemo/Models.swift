import Concord

// The reading app's models: plain Codable structs, decoded straight from the server's JSON.

/// A writer. The feed nests a stub (id and name); the profile adds a bio and the server's
/// `updated_at`. `Mergeable`, so that a stub never wipes the bio; `Stamped`, so that the
/// profile's own stamp is the one compared.
struct Author: Mergeable, Stamped, Equatable, Codable {
  var id: Int
  var name: String
  var bio: String?
  var updatedAt: Double?

  var stamp: Stamp? { updatedAt }

  static func merge(_ incoming: Author, into stored: Author) -> Author {
    incoming.keepingStoredValues(of: stored, whereNil: \.bio, \.updatedAt)
  }

  enum CodingKeys: String, CodingKey {
    case id, name, bio
    case updatedAt = "updated_at"
  }
}

/// A book, with its author nested: an aggregate, stamped by the server.
struct Book: Aggregate, Stamped, Equatable, Codable {
  var id: String
  var title: String
  var author: Author
  var updatedAt: Double?

  var stamp: Stamp? { updatedAt }

  static var nestedEntities: [NestedEntity<Book>] { [.init(\.author)] }

  enum CodingKeys: String, CodingKey {
    case id, title, author
    case updatedAt = "updated_at"
  }
}

/// One page of the home feed: an aggregate of aggregates.
struct FeedPage: Aggregate, Equatable, Codable {
  var id: Int
  var books: [Book]

  static var nestedEntities: [NestedEntity<FeedPage>] { [.init(\.books)] }
}

/// The person using the app.
struct User: Identifiable, Sendable, Equatable, Codable {
  var id: Int
  var name: String
}

extension AliasKey where Value == User {
  /// Whoever is signed in.
  static var currentUser: Self { .init("currentUser") }
}

extension ResourceKey where Value == FeedPage {
  /// The home feed's first page.
  static var homeFeed: Self { .init("feed/1") }
}

extension ResourceKey where Value == Author {
  /// An author's profile.
  static func author(_ id: Int) -> Self { .init("authors/\(id)") }
}
