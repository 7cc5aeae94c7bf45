import Concord

// The reading app's models: plain Codable structs, decoded straight from the server's JSON.

/// A writer.
struct Author: Identifiable, Sendable, Equatable, Codable {
  var id: Int
  var name: String
}

/// A book, with its author nested: an aggregate.
struct Book: Aggregate, Equatable, Codable {
  var id: String
  var title: String
  var author: Author

  static var nestedEntities: [NestedEntity<Book>] { [.init(\.author)] }
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
