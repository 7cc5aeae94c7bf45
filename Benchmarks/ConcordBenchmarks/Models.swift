import Concord
import Foundation

/// The plain entity of the store and find workloads: an id, a string and a number.
struct Model: Identifiable, Sendable, Equatable, Codable {
  var id: Int
  var name: String
  var score: Double

  /// The value stored for `id` in round `round`; different rounds give different values.
  init(_ id: Int, round: Int = 0) {
    self.id = id
    name = round == 0 ? "name-\(id)" : "renamed-\(id % 1_000_000)"
    score = Double(id) + Double(round)
  }
}

/// An author shared by aggregates.
struct Person: Identifiable, Sendable, Equatable, Codable {
  var id: Int
  var name: String
}

/// A plain book held by a post.
struct Title: Identifiable, Sendable, Equatable, Codable {
  var id: Int
  var title: String
}

/// The aggregate of `store.aggregate`: one author and five books.
struct Post: Aggregate, Equatable, Codable {
  var id: Int
  var author: Person
  var books: [Title]
  static var nestedEntities: [NestedEntity<Post>] { [.init(\.author), .init(\.books)] }

  init(_ id: Int) {
    self.id = id
    author = Person(id: id / 10, name: "author-\(id / 10)")
    books = (0..<5).map { Title(id: id * 5 + $0, title: "title-\(id * 5 + $0)") }
  }
}

/// The aggregate of the fan-out workload: it holds one shared author.
struct Review: Aggregate, Equatable {
  var id: Int
  var text: String
  var author: Person
  static var nestedEntities: [NestedEntity<Review>] { [.init(\.author)] }
}

/// A user as list endpoints nest it: a stub without `name` and `bio`, merged into the profile.
struct Profile: Mergeable, Equatable {
  var id: Int
  var login: String
  var name: String?
  var bio: String?

  static func merge(_ incoming: Profile, into stored: Profile) -> Profile {
    incoming.keepingStoredValues(of: stored, whereNil: \.name, \.bio)
  }

  static func full(_ id: Int) -> Profile {
    Profile(id: id, login: "user-\(id)", name: "User \(id)", bio: "bio of \(id)")
  }

  static func stub(_ id: Int) -> Profile {
    Profile(id: id, login: "user-\(id)", name: nil, bio: nil)
  }
}

/// The aggregate of `store.merge`: an entry of a list, nesting its author's stub.
struct Entry: Aggregate, Equatable {
  var id: Int
  var title: String
  var author: Profile
  static var nestedEntities: [NestedEntity<Entry>] { [.init(\.author)] }

  init(_ id: Int, users: Int) {
    self.id = id
    title = "entry-\(id)"
    author = .stub(id % users)
  }
}

/// A user as an issue nests it.
struct IssueUser: Identifiable, Sendable, Equatable, Codable {
  var id: Int
  var login: String
  var avatarURL: String
}

struct IssueLabel: Identifiable, Sendable, Equatable, Codable {
  var id: Int
  var name: String
  var color: String
}

/// The aggregate of `store.page.decoded`: an issue of a REST page, with its user and labels.
struct Issue: Aggregate, Equatable, Codable {
  var id: Int
  var number: Int
  var title: String
  var state: String
  var user: IssueUser
  var labels: [IssueLabel]
  static var nestedEntities: [NestedEntity<Issue>] { [.init(\.user), .init(\.labels)] }

  /// A page of `count` issues as a server sends it: 20 users and 8 labels among them.
  static func page(_ count: Int) -> Data {
    let issues = (0..<count).map { index in
      Issue(
        id: 1_000 + index, number: index, title: "Issue \(index) of the benchmark page",
        state: index % 3 == 0 ? "closed" : "open",
        user: IssueUser(
          id: index % 20, login: "user-\(index % 20)",
          avatarURL: "https://avatars.example.com/u/\(index % 20)"),
        labels: (0..<(index % 3)).map {
          IssueLabel(id: (index + $0) % 8, name: "label-\((index + $0) % 8)", color: "d73a4a")
        })
    }
    return try! JSONEncoder().encode(issues)
  }
}
