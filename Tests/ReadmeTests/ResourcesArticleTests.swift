// The article "Fetching with Resources", line for line; `.ci/check-readme` checks that every
// line of its checked blocks is in this target. The GitHub client runs against a real
// `URLSession` and a server on the loopback address, serving the `Issue` page of the article
// "Working with Real Payloads" (RealPayloadsArticleTests.swift) with an ETag.

import Concord
import ConcordTesting
import Foundation
import TestSupport
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

// MARK: A GitHub-style REST client

extension ResourceKey where Value == [Issue] {
  static func issues(of repository: String) -> Self { .init("repos/\(repository)/issues") }
}

struct HTTPError: Error {
  var status: Int
}

/// GitHub's REST API: a base URL and a session.
struct GitHubAPI: Sendable {
  let baseURL: URL
  let session: URLSession

  /// GET `path`, with the cached answer's validator: a 304 is `.notModified`.
  func get<T: Decodable & Sendable>(_ path: String, validator: String?) async throws -> Fetched<T> {
    var request = URLRequest(url: baseURL.appendingPathComponent(path))
    request.setValue(validator, forHTTPHeaderField: "If-None-Match")
    let (data, response) = try await session.data(for: request)
    let http = response as! HTTPURLResponse
    switch http.statusCode {
    case 304: return .notModified
    case 200: return .value(try .github(data), validator: http.value(forHTTPHeaderField: "ETag"))
    default: throw HTTPError(status: http.statusCode)
    }
  }
}

final class GitHubClient: Sendable {
  let map: IdentityMap
  let api: GitHubAPI

  init(map: IdentityMap, api: GitHubAPI) {
    self.map = map
    self.api = api
  }

  /// A repository's issues: one request however many screens ask, fresh for a minute,
  /// sent with the last ETag.
  func issues(of repository: String) -> Resource<[Issue]> {
    map.resource(.issues(of: repository), staleAfter: .seconds(60)) { [api] request in
      try await api.get("repos/\(repository)/issues", validator: request.validator)
    }
  }
}

extension Decodable {
  /// The value GitHub's JSON describes: snake case keys, ISO 8601 dates.
  static func github(_ data: Data) throws -> Self {
    let decoder = JSONDecoder()
    decoder.keyDecodingStrategy = .convertFromSnakeCase
    decoder.dateDecodingStrategy = .iso8601
    return try decoder.decode(Self.self, from: data)
  }
}

// MARK: A timeline with cache and network

struct Account: Identifiable, Sendable, Equatable {
  var id: String
  var acct: String
}

struct Status: Aggregate, Equatable {
  var id: String
  var content: String
  var account: Account
  static var nestedEntities: [NestedEntity<Status>] { [.init(\.account)] }
}

/// A Mastodon server's home timeline, as the test plays it: each call one page.
final class Mastodon: Sendable {
  let calls = Seen()
  func homeTimeline() async throws -> [Status] {
    calls.append("GET /api/v1/timelines/home")
    let ursula = Account(id: "1", acct: "ursula")
    return [Status(id: "\(calls.values.count)", content: "Hello", account: ursula)]
  }
}

@Test func fetchingWithResourcesArticle() async throws {
  let server = try LoopbackHTTPServer(routes: [
    "/repos/apple/swift/issues": .json(Server.page, etag: "\"page-1\"")
  ])
  defer { server.stop() }
  let configuration = URLSessionConfiguration.ephemeral
  configuration.urlCache = nil
  let session = URLSession(configuration: configuration)
  defer { session.invalidateAndCancel() }

  // A GitHub-style REST client.
  let clock = ManualClock()
  let map = IdentityMap(clock: clock)
  let client = GitHubClient(map: map, api: GitHubAPI(baseURL: server.url("/"), session: session))
  let issues = client.issues(of: "apple/swift")
  let page = try await issues.load()  // GET: 200, ETag "page-1"
  try await client.issues(of: "apple/swift").load()  // another screen: fresh, no request
  #expect(page.map(\.title) == ["Crash when the ring closes", "Stubs wipe fields"])
  #expect(server.requests.count == 1)

  // A 304.
  clock.advance(by: .seconds(61))  // a minute later, the answer is stale
  try await issues.refresh()  // GET with If-None-Match: "page-1": 304 Not Modified
  // issues.state.fetchedAt == clock.now: its age starts again, and nothing was written
  #expect(issues.state.fetchedAt == clock.now && !issues.state.isStale)
  #expect(server.requests.last?.status == 304)
  #expect(server.requests.last?.ifNoneMatch == "\"page-1\"")

  // A timeline with cache and network.
  let mastodon = Mastodon()
  let drawn = Seen()
  @Sendable func render(_ statuses: [Status], refreshing: Bool) {
    let line = statuses.map { "\($0.account.acct): \($0.content)" }.joined()
    drawn.append(line + (refreshing ? " …" : ""))
  }
  let home = map.resource(ResourceKey<[Status]>("timelines/home"), policy: .cacheThenNetwork) {
    try await mastodon.homeTimeline()
  }
  let screen = home.observe { state in
    render(state.value ?? [], refreshing: state.isLoading)
  }
  try await home.load()  // nothing cached yet: waits for the first page
  try await home.load()  // the cached page at once; a fetch refreshes it behind
  while drawn.values.count < 4 { await Task.yield() }
  #expect(mastodon.calls.values.count == 2)
  #expect(drawn.values == [" …", "ursula: Hello", "ursula: Hello …", "ursula: Hello"])
  map.update(Account.self, id: "1") { $0.acct = "ursula@example.social" }  // from the stream
  #expect(drawn.values.last == "ursula@example.social: Hello")
  #expect(drawn.values.count == 5, "one redraw for the stream's change")
  screen.cancel()

  // Testing: retries on a manual clock.
  let flaky = Seen()
  let profile = map.resource(
    ResourceKey<User>("user"), retry: .exponential(attempts: 3, base: .seconds(1), jitter: false)
  ) {
    flaky.append("try")
    guard flaky.values.count > 1 else { throw HTTPError(status: 503) }
    return try Server.decode(Server.profile)
  }
  async let me = profile.load()
  await clock.waitForSleepers(1)  // the first try failed: the retry's wait began
  clock.advance(by: .seconds(1))  // and is over: the second try answers
  #expect(try await me.name == "Sparrowhawk")
  #expect(flaky.values.count == 2)
}
