import Foundation

/// The scripted server the demo talks to: REST responses and a websocket script, as the JSON a
/// real server would send.
enum ScriptedServer {
  /// `GET /feed?page=1`: three books, two by the same author, each stamped with its own
  /// `updated_at`; the authors are stubs, without bio or stamp.
  static var feedPage: Data {
    Data(
      """
      {"stamp": 100, "page": {"id": 1, "books": [
        {"id": "earthsea", "title": "A Wizard of Earthsea", "updated_at": 100, "author": {"id": 1, "name": "Ursula Le Guin"}},
        {"id": "left-hand", "title": "The Left Hand of Darkness", "updated_at": 98, "author": {"id": 1, "name": "Ursula Le Guin"}},
        {"id": "kindred", "title": "Kindred", "updated_at": 99, "author": {"id": 3, "name": "Octavia Butler"}}
      ]}}
      """.utf8)
  }

  /// `GET /authors/1`: Ursula's full profile, last updated before the books that nest her.
  static var authorProfile: Data {
    Data(
      """
      {"stamp": 100, "author": {"id": 1, "name": "Ursula Le Guin", "bio": "wrote Earthsea", "updated_at": 90}}
      """.utf8)
  }

  /// `GET /books/dune`: a book that is not on the feed.
  static var book: Data {
    Data(
      """
      {"stamp": 100, "book": {"id": "dune", "title": "Dune", "updated_at": 100, "author": {"id": 2, "name": "Frank Herbert"}}}
      """.utf8)
  }

  /// `GET /me`.
  static var me: Data {
    Data(
      """
      {"stamp": 100, "user": {"id": 7, "name": "Ged"}}
      """.utf8)
  }

  /// The websocket script, in the JSON Lines format `--replay` reads. The narrative around it
  /// (closing a screen) happens between lines 3 and 4. Line 6 is a replay after a reconnect:
  /// the book removed on line 5, as published long before.
  static let script = """
    {"type": "author.renamed", "stamp": 105, "author": {"id": 1, "name": "Ursula K. Le Guin"}}
    {"type": "author.renamed", "stamp": 103, "author": {"id": 1, "name": "U. Le Guin"}}
    {"type": "user.renamed", "stamp": 104, "user": {"id": 7, "name": "Sparrowhawk"}}
    {"type": "burst", "stamp": 108, "events": [{"type": "book.retitled", "stamp": 106, "book": "earthsea", "title": "A Wizard of Earthsea (50th anniversary)"}, {"type": "author.renamed", "stamp": 107, "author": {"id": 1, "name": "Ursula Kroeber Le Guin"}}, {"type": "book.published", "stamp": 108, "book": {"id": "tehanu", "title": "Tehanu", "author": {"id": 1, "name": "Ursula Kroeber Le Guin"}}}]}
    {"type": "book.removed", "stamp": 109, "book": "left-hand"}
    {"type": "book.published", "stamp": 98, "book": {"id": "left-hand", "title": "The Left Hand of Darkness", "updated_at": 98, "author": {"id": 1, "name": "Ursula Le Guin"}}}
    {"type": "book.burned", "stamp": 110, "book": "earthsea"}
    {"type": "author.renamed", "stamp": 111, "author": {"id": 1, "name": 
    """

  /// One REST response: the payload and the server's stamp.
  struct Response<Payload: Decodable>: Decodable {
    let stamp: Double
    let payload: Payload

    private struct Key: CodingKey {
      var stringValue: String
      var intValue: Int? { nil }
      init(stringValue: String) { self.stringValue = stringValue }
      init?(intValue _: Int) { nil }
    }

    init(from decoder: any Decoder) throws {
      let container = try decoder.container(keyedBy: Key.self)
      stamp = try container.decode(Double.self, forKey: Key(stringValue: "stamp"))
      guard let key = container.allKeys.first(where: { $0.stringValue != "stamp" }) else {
        throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "no payload"))
      }
      payload = try container.decode(Payload.self, forKey: key)
    }
  }

  /// Decodes a REST response.
  static func decode<Payload: Decodable>(_: Payload.Type, from data: Data) throws -> Response<
    Payload
  > {
    try JSONDecoder().decode(Response<Payload>.self, from: data)
  }
}

/// The scripted server as the client reaches it over the network: every request takes
/// `latency`, and is printed when it is sent; `/authors/1` answers `503 Service Unavailable` the
/// first time, so that the client's retry shows.
final class ScriptedNetwork: Sendable {
  /// A status other than 200.
  struct Status: Error, CustomStringConvertible {
    let code: Int
    var description: String { code == 503 ? "503 Service Unavailable" : "\(code)" }
  }

  let console: Console
  let quiet: Bool
  let latency: Duration
  private let state = Guarded(State())

  private struct State {
    var failures: [String: Int] = ["/authors/1": 1]
    var requests: [String: Int] = [:]
    /// How many screens the server waits for before it answers a path; see `hold(_:until:)`.
    var holds: [String: Int] = [:]
    /// How many screens said they are about to ask for a path; see `ask(_:)`.
    var asking: [String: Int] = [:]
    var waiting: [(path: String, count: Int, continuation: CheckedContinuation<Void, Never>)] = []
  }

  init(console: Console, quiet: Bool, latency: Duration = .milliseconds(50)) {
    self.console = console
    self.quiet = quiet
    self.latency = latency
  }

  /// How many requests of `path` were sent.
  func requests(_ path: String) -> Int {
    state.withValue { $0.requests[path, default: 0] }
  }

  /// Holds the answer to `path` until `screens` screens said they ask for it (`ask(_:)`), so
  /// that the demo's output does not depend on which of them the scheduler runs first: each
  /// says so right before it asks, and the request's latency is counted from there.
  func hold(_ path: String, until screens: Int) {
    state.withValue { $0.holds[path] = screens }
  }

  /// A screen is about to ask for `path`; see `hold(_:until:)`.
  func ask(_ path: String) {
    let ready = state.withValue { state in
      state.asking[path, default: 0] += 1
      let asking = state.asking[path]!
      let ready = state.waiting.filter { $0.path == path && $0.count <= asking }
      state.waiting.removeAll { $0.path == path && $0.count <= asking }
      return ready
    }
    for waiter in ready { waiter.continuation.resume() }
  }

  /// `GET path`: its body after `latency`, or the scripted failure.
  func get(_ path: String) async throws -> Data {
    if !quiet { console.write("GET \(path)") }
    await withCheckedContinuation { continuation in
      let ready = state.withValue { state in
        state.requests[path, default: 0] += 1
        let screens = state.holds[path, default: 0]
        guard state.asking[path, default: 0] < screens else { return true }
        state.waiting.append((path, screens, continuation))
        return false
      }
      if ready { continuation.resume() }
    }
    try await Task.sleep(for: latency)
    let failing = state.withValue { state in
      guard let left = state.failures[path], left > 0 else { return false }
      state.failures[path] = left - 1
      return true
    }
    if failing {
      if !quiet { console.say("net", "\(Status(code: 503)): the client retries") }
      throw Status(code: 503)
    }
    guard let body = ScriptedServer.routes[path] else { throw Status(code: 404) }
    return body
  }
}

extension ScriptedServer {
  /// The REST responses, by path.
  static var routes: [String: Data] {
    ["/feed?page=1": feedPage, "/authors/1": authorProfile, "/books/dune": book, "/me": me]
  }
}

/// A value shared between tasks, guarded by a lock.
final class Guarded<Value>: @unchecked Sendable {
  // NB: @unchecked because `value` is only touched while holding `lock`.
  private let lock = NSLock()
  private var value: Value

  init(_ value: Value) {
    self.value = value
  }

  func withValue<R>(_ body: (inout Value) -> R) -> R {
    lock.withLock { body(&value) }
  }
}
