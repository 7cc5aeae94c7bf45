import ConcordTesting
import Foundation
import TestSupport
import Testing

@testable import Concord

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// A resource driven through a real `URLSession` against an HTTP/1.1 server on the loopback
/// address, serving recorded GitHub fixtures with ETags and answering `If-None-Match` with 304.
@Suite("Resources over a real URLSession: ETags, 304s, one request per key, retries")
struct URLSessionResourceTests {
  static let issuesPath = "/repos/apple/swift/issues"
  let clock = ManualClock()

  /// A session that sends every request to the server as it is: no cache of its own, so the
  /// server's 304 reaches the loader.
  static func session() -> URLSession {
    let configuration = URLSessionConfiguration.ephemeral
    configuration.urlCache = nil
    configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
    return URLSession(configuration: configuration)
  }

  /// An HTTP status a loader did not expect.
  struct HTTPStatus: Error, Equatable {
    let code: Int
  }

  /// The client's loader of `url`: it sends the validator as `If-None-Match`, reads a 304 as
  /// `.notModified`, and hands back the `ETag`.
  static func loader<T: Decodable & Sendable>(_ url: URL, session: URLSession)
    -> @Sendable (ResourceRequest) async throws -> Fetched<T>
  {
    { request in
      var urlRequest = URLRequest(url: url)
      if let validator = request.validator {
        urlRequest.setValue(validator, forHTTPHeaderField: "If-None-Match")
      }
      let (data, response) = try await session.data(for: urlRequest)
      let http = response as! HTTPURLResponse
      switch http.statusCode {
      case 304: return .notModified
      case 200:
        return .value(
          try Recorded.decode(T.self, String(decoding: data, as: UTF8.self)),
          validator: http.value(forHTTPHeaderField: "ETag"))
      default: throw HTTPStatus(code: http.statusCode)
      }
    }
  }

  @Test("The ETag goes back as If-None-Match; a 304 confirms the answer; a 200 replaces it")
  func etagsAnd304s() async throws {
    let server = try LoopbackHTTPServer(routes: [
      Self.issuesPath: .json(Recorded.issuesPage, etag: "\"page-1\"")
    ])
    defer { server.stop() }
    let session = Self.session()
    defer { session.invalidateAndCancel() }
    let map = IdentityMap(clock: clock)
    let issues = map.resource(
      ResourceKey<[GitHubIssue]>("repos/apple/swift/issues"), staleAfter: .seconds(60),
      load: Self.loader(server.url(Self.issuesPath), session: session))

    let page = try await issues.load()
    #expect(page.map(\.number) == [42, 43, 44])
    #expect(server.requests.map(\.status) == [200] && server.requests[0].ifNoneMatch == nil)
    #expect(try await issues.load() == page, "fresh: no request")
    #expect(server.requests.count == 1)

    clock.advance(by: .seconds(61))
    #expect(issues.state.isStale)
    let recorder = StateRecorder(issues)
    #expect(try await issues.refresh() == page)
    #expect(
      server.requests.last
        == .init(
          method: "GET", path: Self.issuesPath, ifNoneMatch: "\"page-1\"", status: 304))
    #expect(issues.state.fetchedAt == clock.now && !issues.state.isStale)
    #expect(recorder.states.allSatisfy { $0.value == page }, "a 304 changes no value")

    // Issue 42 retitled since, with its newer `updated_at` (an equal one would be refused).
    let retitled = Recorded.issuesPage
      .replacingOccurrences(of: "Crash when the ring closes", with: "Crash when a cycle closes")
      .replacingOccurrences(of: "2026-11-20T10:00:00Z", with: "2026-11-22T07:00:00Z")
    #expect(retitled != Recorded.issuesPage)
    server.set(Self.issuesPath, .json(retitled, etag: "\"page-2\""))
    clock.advance(by: .seconds(61))
    let renewed = try await issues.refresh()
    #expect(renewed.first?.title == "Crash when a cycle closes")
    #expect(
      server.requests.last?.status == 200 && server.requests.last?.ifNoneMatch == "\"page-1\"")
    clock.advance(by: .seconds(61))
    try await issues.refresh()
    #expect(
      server.requests.last?.ifNoneMatch == "\"page-2\"" && server.requests.last?.status == 304)

    // The answer is normalized: Ged's full profile reaches every issue he wrote.
    map.store(try Recorded.decode(GitHubUser.self, Recorded.gedProfile))
    #expect(issues.state.value?.first?.user.name == "Sparrowhawk")
  }

  @Test("Ten screens asking at once make one request")
  func oneRequestPerKey() async throws {
    let server = try LoopbackHTTPServer(routes: [
      Self.issuesPath: .json(Recorded.issuesPage, etag: "\"page-1\"")
    ])
    defer { server.stop() }
    let session = Self.session()
    defer { session.invalidateAndCancel() }
    let map = IdentityMap(clock: clock)
    let load: @Sendable (ResourceRequest) async throws -> Fetched<[GitHubIssue]> = Self.loader(
      server.url(Self.issuesPath), session: session)
    let pages = try await withThrowingTaskGroup(of: [GitHubIssue].self) { group in
      for _ in 0..<10 {
        group.addTask {
          // NB: fresh for a minute, so that a screen that asks after the answer landed is
          // answered from the map, as one that joined the fetch is: one request either way.
          try await map.resource(
            ResourceKey<[GitHubIssue]>("repos/apple/swift/issues"), staleAfter: .seconds(60),
            load: load
          )
          .load()
        }
      }
      return try await group.reduce(into: []) { $0.append($1) }
    }
    #expect(pages.count == 10 && Set(pages.map { $0.map(\.id) }).count == 1)
    #expect(server.requests.count == 1)
  }

  @Test("A 503 is retried after the back-off, on the map's clock")
  func retriedAfterA503() async throws {
    let server = try LoopbackHTTPServer(routes: [
      "/user": LoopbackHTTPServer.Route(status: 503, body: #"{"message": "busy"}"#)
    ])
    defer { server.stop() }
    let session = Self.session()
    defer { session.invalidateAndCancel() }
    let map = IdentityMap(clock: clock)
    let me = map.resource(
      ResourceKey<GitHubUser>("user"),
      retry: .exponential(attempts: 2, base: .seconds(2), jitter: false),
      load: Self.loader(server.url("/user"), session: session))
    let answer = Task { try await me.load() }
    await clock.waitForSleepers(1)
    server.set("/user", .json(Recorded.gedProfile, etag: "\"me\""))
    clock.advance(by: .seconds(2))
    #expect(try await answer.value.name == "Sparrowhawk")
    #expect(server.requests.map(\.status) == [503, 200])
  }

  @Test("A 404 is the fetch's error, and the cached answer stays")
  func notFound() async throws {
    let server = try LoopbackHTTPServer(routes: [:])
    defer { server.stop() }
    let session = Self.session()
    defer { session.invalidateAndCancel() }
    let map = IdentityMap(clock: clock)
    let me = map.resource(
      ResourceKey<GitHubUser>("user"), retry: .none,
      load: Self.loader(server.url("/user"), session: session))
    await #expect(throws: HTTPStatus(code: 404)) { try await me.load() }
    #expect(me.state.error as? HTTPStatus == HTTPStatus(code: 404))
  }
}
