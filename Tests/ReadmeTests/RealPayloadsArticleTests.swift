// The article "Working with Real Payloads", line for line; `.ci/check-readme` checks that every
// line of its checked blocks is in this target.

import Concord
import ConcordTesting
import Foundation
import Testing

struct User: Mergeable, Stamped, Codable, Equatable {
  var id: Int
  var login: String
  var name: String?  // only in the full profile
  var bio: String?  // only in the full profile
  var updatedAt: Date?  // only in the full profile

  var stamp: Stamp? { updatedAt?.stamp }

  static func merge(_ incoming: User, into stored: User) -> User {
    incoming.keepingStoredValues(of: stored, whereNil: \.name, \.bio, \.updatedAt)
  }
}

struct Label: Identifiable, Codable, Sendable, Equatable {
  var id: Int
  var name: String
}

struct Milestone: Identifiable, Codable, Sendable, Equatable {
  var id: Int
  var title: String
}

struct Issue: Aggregate, Stamped, Codable, Equatable {
  var id: Int
  var title: String
  var state: String
  var updatedAt: Date
  var user: User
  var labels: [Label]
  var assignees: [User]
  var milestone: Milestone?

  var stamp: Stamp? { updatedAt.stamp }

  static var nestedEntities: [NestedEntity<Issue>] {
    [.init(\.user), .init(\.labels), .init(\.assignees), .init(\.milestone)]
  }
}

struct IssueScreen: Aggregate, Equatable {
  var id: Int
  var issue: Issue
  var viewer: User
  static var nestedEntities: [NestedEntity<IssueScreen>] { [.init(\.issue), .init(\.viewer)] }
}

/// What callbacks saw, for the test's checks.
final class Seen: @unchecked Sendable {
  // NB: @unchecked because `items` is only touched while holding `lock`.
  private let lock = NSLock()
  private var items: [String] = []

  var values: [String] { lock.withLock { items } }

  func append(_ item: String) {
    lock.withLock { items.append(item) }
  }

  func clear() {
    lock.withLock { items.removeAll() }
  }
}

/// What the server answered, in its own snake case.
enum Server {
  static let profile = """
    {"id": 7, "login": "ged", "name": "Sparrowhawk", "bio": "Archmage",
     "updated_at": "2026-10-01T08:00:00Z"}
    """
  static let page = """
    [{"id": 1, "title": "Crash when the ring closes", "state": "open",
      "updated_at": "2026-11-20T10:00:00Z", "user": {"id": 7, "login": "ged"},
      "labels": [{"id": 1, "name": "bug"}], "assignees": [{"id": 7, "login": "ged"}],
      "milestone": {"id": 5, "title": "Wave 2"}},
     {"id": 2, "title": "Stubs wipe fields", "state": "open",
      "updated_at": "2026-11-21T09:30:00Z", "user": {"id": 7, "login": "ged"},
      "labels": [], "assignees": [], "milestone": null}]
    """
  static let hook = """
    {"id": 1, "title": "Crash when a cycle closes", "state": "open",
     "updated_at": "2026-11-22T07:00:00Z", "user": {"id": 7, "login": "ged"},
     "labels": [{"id": 1, "name": "bug"}], "assignees": [], "milestone": null}
    """

  static func decode<T: Decodable>(_ json: String) throws -> T {
    let decoder = JSONDecoder()
    decoder.keyDecodingStrategy = .convertFromSnakeCase
    decoder.dateDecodingStrategy = .iso8601
    return try decoder.decode(T.self, from: Data(json.utf8))
  }
}

@Test func realPayloadsArticle() throws {
  let profile: User = try Server.decode(Server.profile)
  let page: [Issue] = try Server.decode(Server.page)
  let hook: Issue = try Server.decode(Server.hook)

  // Partial objects.
  let map = IdentityMap()
  let header = map.store(profile)  // the full profile: name, bio, updated_at
  let list = map.store(page)  // issues nesting stubs of the same user
  // header.value.name is still the profile's name, and so is list.value[0].user.name
  #expect(header.value.name == "Sparrowhawk")
  #expect(list.value[0].user.name == "Sparrowhawk")
  #expect(list.value[0].assignees[0].bio == "Archmage")

  // Stamps from the server.
  map.store(hook)  // a webhook: issue 1 retitled, updated_at newer than the page's
  map.store(page)  // a late replay of the page: issue 1 keeps the webhook's title
  #expect(list.value[0].title == "Crash when a cycle closes")

  // Deletions.
  let removed = Seen()
  let detail = map.find(Issue.self, id: 1)!
  let removal = detail.observeRemoval { issue in print("closing the screen of", issue.title) }
  let recorder = detail.observeRemoval { removed.append($0.title) }
  map.remove(Issue.self, id: 1)  // prints once
  #expect(removed.values == ["Crash when a cycle closes"])
  map.store(hook)  // replayed after the delete: refused, issue 1 stays deleted
  #expect(map.find(Issue.self, id: 1) == nil)
  #expect(list.value.map(\.id) == [2], "the batch handle drops the removed issue")

  // Retention.
  let cache = IdentityMap(retention: .keepReleased(1_000))
  _ = cache.store(page)  // nothing holds the issues...
  let back = cache.find(Issue.self, id: 2)  // ...but the screen finds issue 2 again
  #expect(back?.value.title == "Stubs wipe fields")

  // One aggregate per screen.
  let redraws = Seen()
  let shown = map.find(Issue.self, id: 2)!.value
  let screen = map.store(IssueScreen(id: 2, issue: shown, viewer: header.value))
  let draws = screen.observe { print("redraw:", $0.issue.title, "for", $0.viewer.login) }
  let counter = screen.observe { redraws.append($0.issue.title) }
  map.transaction { transaction in
    transaction.store(profile)  // the viewer, again
    transaction.store(page)  // and the page, again
  }
  #expect(redraws.values.isEmpty, "nothing the screen shows changed")
  map.transaction { transaction in
    transaction.update(User.self, id: 7) { $0.name = "Ged" }
    transaction.update(Issue.self, id: 2) { $0.title = "Stubs no longer wipe fields" }
  }
  #expect(redraws.values == ["Stubs no longer wipe fields"], "two entities changed, one redraw")
  withExtendedLifetime((removal, recorder, draws, counter)) {}
}
