// The section "Paged lists" of the article "Fetching with Resources", line for line;
// `.ci/check-readme` checks that every line of its checked blocks is in this target. The
// servers are played in memory: a Mastodon instance whose `max_id` is inclusive (its pages
// overlap by one status), and GitHub's issues, each page's `Link` header naming the next.

import Concord
import ConcordTesting
import Foundation
import TestSupport
import Testing

// MARK: A Mastodon timeline

struct TimelineStatus: Aggregate, Equatable {
  var id: String
  var content: String
  var account: Account
  var boosted: [TimelineStatus] = []  // the boosted status, if any

  static var nestedEntities: [NestedEntity<TimelineStatus>] {
    [.init(\.account), .init(\.boosted)]
  }
}

/// A Mastodon instance, as the test plays it: its statuses newest first, three a page.
final class MastodonInstance: Sendable {
  let statuses: Locked<[TimelineStatus]>
  let requests = Seen()

  init(_ statuses: [TimelineStatus]) {
    self.statuses = Locked(statuses)
  }

  /// GET /api/v1/timelines/home: `max_id` answers from that status on (inclusive), `min_id`
  /// the statuses newer than it.
  func home(maxID: String?, minID: String?) async throws -> [TimelineStatus] {
    requests.append("home max_id=\(maxID ?? "") min_id=\(minID ?? "")")
    let all = statuses.value
    if let minID { return Array(all.prefix { Int($0.id)! > Int(minID)! }.suffix(3)) }
    return Array(all.drop { maxID != nil && Int($0.id)! > Int(maxID!)! }.prefix(3))
  }

  /// GET /api/v1/timelines/public?local=true: `max_id` answers from the status after it.
  func localTimeline(maxID: String?) async throws -> [TimelineStatus] {
    requests.append("local max_id=\(maxID ?? "")")
    let all = statuses.value
    return Array(all.drop { maxID != nil && Int($0.id)! >= Int(maxID!)! }.prefix(3))
  }

  /// Statuses `range`, by ursula, newest first.
  static func posts(_ range: ClosedRange<Int>) -> [TimelineStatus] {
    range.reversed().map { TimelineStatus(id: "\($0)", content: "Toot \($0)", account: .ursula) }
  }
}

extension Account {
  static let ursula = Account(id: "1", acct: "ursula")
  static let ged = Account(id: "2", acct: "ged")
}

// MARK: A GitHub issues list

/// The URL a `Link` header names rel="next", if any.
func nextPage(_ link: String?) -> URL? {
  guard let next = link?.split(separator: ",").first(where: { $0.hasSuffix(#"rel="next""#) }),
    let start = next.firstIndex(of: "<"), let end = next.firstIndex(of: ">")
  else { return nil }
  return URL(string: String(next[next.index(after: start)..<end]))
}

/// GitHub's open issues, as the test plays them: newest first, two a page, each page's
/// `Link` header naming the next page after its last issue.
final class GitHubIssues: Sendable {
  let open = Locked(Array((1...6).reversed()))
  let firstPage = URL(string: "https://api.github.com/repos/apple/swift/issues?state=open")!

  /// GET `url`: the issues, and the `Link` header.
  func issues(at url: URL) async throws -> ([Issue], String?) {
    let after = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?
      .first { $0.name == "after" }.flatMap { $0.value.flatMap(Int.init) }
    let numbers = Array(open.value.filter { after == nil || $0 < after! }.prefix(2))
    let link =
      numbers.count == 2 && numbers.last! > 1
      ? "<\(firstPage.absoluteString)&after=\(numbers.last!)>; rel=\"next\", "
        + "<\(firstPage.absoluteString)&after=2>; rel=\"last\"" : nil
    let issues = numbers.map { number in
      Issue(
        id: number, title: "Issue \(number)", state: "open",
        updatedAt: Date(timeIntervalSince1970: 1_700_000_000), user: User(id: 7, login: "ged"),
        labels: [], assignees: [], milestone: nil)
    }
    return (issues, link)
  }
}

@Test func pagedListsArticle() async throws {
  // A Mastodon timeline.
  do {
    let map = IdentityMap()
    let hello = TimelineStatus(id: "100", content: "Hello", account: .ursula)
    let mastodon = MastodonInstance(
      [TimelineStatus(id: "103", content: "", account: .ged, boosted: [hello])]
        + MastodonInstance.posts(102...102) + [hello] + MastodonInstance.posts(98...99))
    let home = map.pagedResource(ResourceKey<[TimelineStatus]>("timelines/home")) {
      (request: PageRequest<String>) in
      let maxID = request.isOlder ? request.cursor : nil
      let minID = request.isNewer ? request.cursor : nil
      let statuses = try await mastodon.home(maxID: maxID, minID: minID)
      return Page(statuses, older: statuses.last?.id, newer: statuses.first?.id)
    }
    try await home.load()  // 103 (ged boosts 100), 102, 100
    try await home.loadOlder()  // max_id=100: 100 again, 99, 98; 100 keeps its place
    #expect(home.state.items.map(\.id) == ["103", "102", "100", "99", "98"])
    #expect(mastodon.requests.values == ["home max_id= min_id=", "home max_id=100 min_id="])
    map.update(TimelineStatus.self, id: "100") { $0.content = "Hello, edited" }  // the stream
    // home.state.items[2] and the boost home.state.items[0].boosted[0] both show the edit
    #expect(home.state.items[2].content == "Hello, edited")
    #expect(home.state.items[0].boosted[0].content == "Hello, edited")
    // Pull to refresh: min_id=103 asks for what is newer, which goes on top.
    mastodon.statuses.withValue { $0.insert(contentsOf: MastodonInstance.posts(104...105), at: 0) }
    try await home.refresh()
    #expect(mastodon.requests.values.last == "home max_id= min_id=103")
    #expect(home.state.items.map(\.id) == ["105", "104", "103", "102", "100", "99", "98"])
    try await home.loadOlder()  // max_id=98 answers 98 alone: nothing new, the end
    #expect(!home.state.hasOlder)
  }

  // A GitHub issues list.
  do {
    let map = IdentityMap()
    let github = GitHubIssues()
    let issues = map.pagedResource(ResourceKey<[Issue]>("repos/apple/swift/issues?state=open")) {
      (request: PageRequest<URL>) in
      let (page, link) = try await github.issues(at: request.cursor ?? github.firstPage)
      return Page(page, older: nextPage(link))
    }
    try await issues.load()  // issues 6 and 5; Link: <…&after=5>; rel="next"
    try await issues.loadOlder()  // 4 and 3
    github.open.withValue { $0.removeAll { $0 == 5 } }
    map.remove(Issue.self, id: 5)  // the webhook: issue 5 closed
    try await issues.loadOlder()  // 2 and 1, and no rel="next": the end
    // issues.state.items.map(\.id) == [6, 4, 3, 2, 1], and issues.state.hasOlder is false
    #expect(issues.state.items.map(\.id) == [6, 4, 3, 2, 1])
    #expect(!issues.state.hasOlder)
  }

  // A refresh after a long gap.
  do {
    let clock = ManualClock()
    let map = IdentityMap(clock: clock)
    let mastodon = MastodonInstance(MastodonInstance.posts(1...20))
    let local = map.pagedResource(
      ResourceKey<[TimelineStatus]>("timelines/public?local=true"), staleAfter: .seconds(60)
    ) { (request: PageRequest<String>) in
      let statuses = try await mastodon.localTimeline(maxID: request.cursor)
      return Page(statuses, older: statuses.last?.id)  // no newer cursor: refresh asks .first
    }
    try await local.load()  // 20, 19, 18
    clock.advance(by: .seconds(8 * 3_600))  // overnight, 300 new statuses
    mastodon.statuses.withValue { $0.insert(contentsOf: MastodonInstance.posts(21...320), at: 0) }
    try await local.refresh()  // 320, 319, 318: nothing in common with the list, so it replaces it
    // local.state.items.map(\.id) == ["320", "319", "318"], and local.state.hasOlder
    #expect(local.state.items.map(\.id) == ["320", "319", "318"])
    #expect(local.state.hasOlder)
    try await local.loadOlder()  // max_id=318: 317, 316, 315, the night's, not yesterday's
    #expect(local.state.items.map(\.id) == ["320", "319", "318", "317", "316", "315"])
  }
}
