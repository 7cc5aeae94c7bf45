import ConcordTesting
import Foundation
import TestSupport
import Testing

@testable import Concord

// The shapes of api.github.com, trimmed: an issue nests the *simple* user (no name, no bio, no
// updated_at), its labels, its assignees and its milestone; the full profile has it all.

struct GitHubUser: Mergeable, Stamped, Codable, Equatable {
  var id: Int
  var login: String
  var avatarURL: String
  var name: String?
  var bio: String?
  var updatedAt: Date?

  var stamp: Stamp? { updatedAt?.stamp }

  static func merge(_ incoming: GitHubUser, into stored: GitHubUser) -> GitHubUser {
    incoming.keepingStoredValues(of: stored, whereNil: \.name, \.bio, \.updatedAt)
  }

  enum CodingKeys: String, CodingKey {
    case id, login, name, bio
    case avatarURL = "avatar_url"
    case updatedAt = "updated_at"
  }
}

struct GitHubLabel: Identifiable, Codable, Sendable, Equatable {
  var id: Int
  var name: String
  var color: String
}

struct GitHubMilestone: Identifiable, Codable, Sendable, Equatable {
  var id: Int
  var number: Int
  var title: String
  var state: String
}

struct GitHubIssue: Aggregate, Stamped, Codable, Equatable {
  var id: Int
  var number: Int
  var title: String
  var state: String
  var updatedAt: Date
  var user: GitHubUser
  var labels: [GitHubLabel]
  var assignees: [GitHubUser]
  var milestone: GitHubMilestone?

  var stamp: Stamp? { updatedAt.stamp }

  static var nestedEntities: [NestedEntity<GitHubIssue>] {
    [.init(\.user), .init(\.labels), .init(\.assignees), .init(\.milestone)]
  }

  enum CodingKeys: String, CodingKey {
    case id, number, title, state, user, labels, assignees, milestone
    case updatedAt = "updated_at"
  }
}

enum Recorded {
  static let issuesPage = """
    [
      {"id": 1001, "number": 42, "title": "Crash when the ring closes", "state": "open",
       "updated_at": "2026-11-20T10:00:00Z",
       "user": {"id": 7, "login": "ged", "avatar_url": "https://avatars.example/7"},
       "labels": [{"id": 1, "name": "bug", "color": "d73a4a"}],
       "assignees": [{"id": 7, "login": "ged", "avatar_url": "https://avatars.example/7"},
                     {"id": 8, "login": "tenar", "avatar_url": "https://avatars.example/8"}],
       "milestone": {"id": 5, "number": 1, "title": "Wave 2", "state": "open"}},
      {"id": 1002, "number": 43, "title": "Stubs wipe fields", "state": "open",
       "updated_at": "2026-11-21T09:30:00Z",
       "user": {"id": 8, "login": "tenar", "avatar_url": "https://avatars.example/8"},
       "labels": [{"id": 1, "name": "bug", "color": "d73a4a"},
                  {"id": 2, "name": "payloads", "color": "0e8a16"}],
       "assignees": [{"id": 7, "login": "ged", "avatar_url": "https://avatars.example/7"}],
       "milestone": {"id": 5, "number": 1, "title": "Wave 2", "state": "open"}},
      {"id": 1003, "number": 44, "title": "Docs for stamps", "state": "closed",
       "updated_at": "2026-11-21T11:00:00Z",
       "user": {"id": 7, "login": "ged", "avatar_url": "https://avatars.example/7"},
       "labels": [], "assignees": [], "milestone": null}
    ]
    """

  /// Ged's full profile, last updated before any issue of the page.
  static let gedProfile = """
    {"id": 7, "login": "ged", "avatar_url": "https://avatars.example/7",
     "name": "Sparrowhawk", "bio": "Archmage of Roke", "updated_at": "2026-10-01T08:00:00Z"}
    """

  /// A webhook: issue 42 retitled, with its own newer `updated_at` and a stub user.
  static let retitledHook = """
    {"id": 1001, "number": 42, "title": "Crash when a cycle closes", "state": "open",
     "updated_at": "2026-11-22T07:00:00Z",
     "user": {"id": 7, "login": "ged", "avatar_url": "https://avatars.example/7"},
     "labels": [{"id": 1, "name": "bug", "color": "d73a4a"}],
     "assignees": [{"id": 7, "login": "ged", "avatar_url": "https://avatars.example/7"},
                   {"id": 8, "login": "tenar", "avatar_url": "https://avatars.example/8"}],
     "milestone": {"id": 5, "number": 1, "title": "Wave 2", "state": "open"}}
    """

  static func decode<T: Decodable>(_: T.Type, _ json: String) throws -> T {
    let decoder = JSONDecoder()
    decoder.dateDecodingStrategy = .iso8601
    return try decoder.decode(T.self, from: Data(json.utf8))
  }
}

@Suite("Real payloads: a recorded GitHub page, profile and webhook")
struct RealPayloadTests {
  @Test func everyScreenShowsTheFullMergedUserAndTheHeaderRedrawsOncePerChange() throws {
    let logger = RecordingLogger()
    let map = IdentityMap(logger: logger)
    let list = map.store(try Recorded.decode([GitHubIssue].self, Recorded.issuesPage))
    let detail = map.find(GitHubIssue.self, id: 1001)!
    let header = map.find(GitHubUser.self, id: 7)!
    let headerDraws = Locked<[String]>([])
    let listDraws = Locked(0)
    let subscriptions = [
      header.observe(includingCurrentValue: true) { headerDraws.append($0.name ?? $0.login) },
      list.observe { _ in listDraws.increment() },
    ]
    #expect(headerDraws.value == ["ged"])

    // The full profile is older than every issue that nested Ged's stub; the stubs carried no
    // stamp of their own, so it applies.
    map.store(try Recorded.decode(GitHubUser.self, Recorded.gedProfile))
    #expect(headerDraws.value == ["ged", "Sparrowhawk"])
    #expect(list.value.allSatisfy { $0.user.id != 7 || $0.user.name == "Sparrowhawk" })
    #expect(detail.value.assignees.first?.bio == "Archmage of Roke")
    #expect(listDraws.value == 1)

    // Pull to refresh: the same page again. Its stubs merge into the profile, its issues carry
    // the same stamps: nothing changes, nobody redraws, nothing is refused.
    logger.clear()
    map.store(try Recorded.decode([GitHubIssue].self, Recorded.issuesPage))
    #expect(headerDraws.value.count == 2)
    #expect(listDraws.value == 1)
    #expect(header.value.name == "Sparrowhawk")
    #expect(!logger.events.contains { $0.kind == .discardedStale })

    // A webhook retitles issue 42 with a newer stamp; its stub user merges, so the header
    // stays as it is.
    map.store(try Recorded.decode(GitHubIssue.self, Recorded.retitledHook))
    #expect(detail.value.title == "Crash when a cycle closes")
    #expect(detail.value.user.name == "Sparrowhawk")
    #expect(headerDraws.value.count == 2)
    #expect(listDraws.value == 2)

    // Replaying the page's older copy of issue 42 is refused on the issue's own stamp.
    map.store(try Recorded.decode([GitHubIssue].self, Recorded.issuesPage))
    #expect(detail.value.title == "Crash when a cycle closes")
    withExtendedLifetime(subscriptions) {}
  }

  @Test func aPageIsOneCallWithEachIssuesOwnStamp() throws {
    let map = IdentityMap()
    let page = try Recorded.decode([GitHubIssue].self, Recorded.issuesPage)
    let list = map.store(page)
    let stamps = list.value.map { map.find(GitHubIssue.self, id: $0.id)!._handle.node.s.stamp }
    #expect(stamps == page.map { $0.updatedAt.stamp })
    #expect(map.find(GitHubUser.self, id: 7)!._handle.node.s.stamp.isNaN, "stubs carry no stamp")
    #expect(map.find(GitHubLabel.self, id: 2) != nil)
    #expect(map.find(GitHubMilestone.self, id: 5) != nil)
  }
}
