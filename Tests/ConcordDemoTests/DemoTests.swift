import Foundation
import Testing

@testable import ConcordDemo

/// The lines a demo run wrote.
final class Transcript: @unchecked Sendable {
  // NB: @unchecked because `lines` is only touched while holding `lock`.
  private let lock = NSLock()
  private var storage: [String] = []

  var lines: [String] { lock.withLock { storage } }
  var console: Console { Console { line in self.lock.withLock { self.storage.append(line) } } }
}

@Suite("ConcordDemo")
struct DemoTests {
  @Test func theScriptedStoryEndsInTheExpectedState() async throws {
    let transcript = Transcript()
    let outcome = try await Demo(console: transcript.console).run()

    #expect(outcome.applied == 6)
    #expect(
      outcome.refused == 3,
      "the late rename; the replayed book, refused by its tombstone, and its author stub")
    #expect(outcome.badLines.map(\.line) == [7, 8])
    #expect(outcome.live == 7, "page, three books, Ursula, Octavia, the signed-in user")
    #expect(
      outcome.feed?.books.map(\.title) == [
        "A Wizard of Earthsea (50th anniversary)", "Kindred", "Tehanu",
      ])
    #expect(
      Set(outcome.feed?.books.map(\.author.name) ?? []) == [
        "Ursula Kroeber Le Guin", "Octavia Butler",
      ])
    #expect(outcome.shelf == ["A Wizard of Earthsea (50th anniversary)", "Tehanu"])
    #expect(outcome.user == User(id: 7, name: "Sparrowhawk"))
    // Drawn once when opened, then once per write that changed them: a burst counts once.
    #expect(outcome.feedDraws == 4)
    #expect(outcome.authorDraws == 3)
    #expect(outcome.headerDraws == 3)
    #expect(outcome.shelfDraws == 4, "opened, the rename, the burst, the removal")
  }

  @Test func theWidgetInAnotherProcessShowsTheBookBeingRead() async throws {
    let transcript = Transcript()
    let outcome = try await Demo(console: transcript.console).run()
    // Drawn when it starts, then for each event that changed the book, from the app's file.
    #expect(
      outcome.widget == [
        "now reading A Wizard of Earthsea — Ursula Le Guin",
        "now reading A Wizard of Earthsea — Ursula K. Le Guin",
        "now reading A Wizard of Earthsea (50th anniversary) — Ursula Kroeber Le Guin",
      ])
    let lines = transcript.lines
    let burst = try #require(lines.firstIndex { $0.hasPrefix("ws line 4:") })
    let removal = try #require(lines.firstIndex { $0.hasPrefix("ws line 5:") })
    let drawn = try #require(
      lines.firstIndex { $0.contains("widget │ now reading A Wizard of Earthsea (50th") })
    #expect(burst < drawn && drawn < removal, "after the burst, before the next event")
    // Without it, the story is the same.
    var alone = Demo(console: Transcript().console)
    alone.widget = false
    let without = try await alone.run()
    #expect(without.widget.isEmpty)
    #expect(without.feed == outcome.feed && without.refused == outcome.refused)
  }

  @Test func aSecondRunWithTheSameDatabaseStartsFromTheCachedFeed() async throws {
    let directory = NSTemporaryDirectory() + "concord-demo-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    var demo = Demo(console: Transcript().console)
    demo.database = directory + "/demo.sqlite"

    let first = try await demo.run()
    #expect(first.cachedFeed == nil, "a first launch has nothing cached")

    let transcript = Transcript()
    demo = Demo(console: transcript.console)
    demo.database = directory + "/demo.sqlite"
    let second = try await demo.run()
    #expect(second.cachedFeed == first.feed, "the feed the first run ended with")
    // The cached feed is shown before the server is asked for anything.
    let lines = transcript.lines
    let cache = try #require(lines.firstIndex { $0.contains("cache  │ A Wizard of Earthsea") })
    let request = try #require(lines.firstIndex(of: "GET /feed?page=1"))
    #expect(cache < request)
    // The cache is newer than the scripted page: its older stamps are refused.
    #expect(lines.contains { $0.contains("discarded stale write to Book(earthsea)") })
  }

  @Test func theTranscriptTellsTheStory() async throws {
    let transcript = Transcript()
    try await Demo(console: transcript.console).run()
    let text = transcript.lines.joined(separator: "\n")
    #expect(
      text.contains("discarded stale write to Author(1): incoming stamp 103 is not newer than 105"))
    #expect(
      text.contains("9 → 7 entities live"), "closing the book screen releases Dune and its author")
    #expect(
      text.contains(
        "discarded stale write to Book(left-hand): incoming stamp 98 is not newer than 98"),
      "a replay after the delete is refused by the book's tombstone")
    #expect(text.contains("ws line 7: unknown event type \"book.burned\" (skipped)"))
    #expect(text.contains("ws line 8: malformed JSON (skipped)"))
    #expect(!text.contains("released FeedPage"), "the final teardown stays quiet")
    #expect(
      text.contains(
        "shelf  │ Ursula Kroeber Le Guin: A Wizard of Earthsea (50th anniversary) · Tehanu · "
          + "The Left Hand of Darkness"),
      "a published book enters the live shelf")
    #expect(
      text.contains(
        "ws line 5: book.removed left-hand (stamp 109)\n  log    │ removed Book(left-hand)\n"
          + "  feed   │ A Wizard of Earthsea (50th anniversary) — Ursula Kroeber Le Guin · Kindred — "
          + "Octavia Butler · Tehanu — Ursula Kroeber Le Guin\n"
          + "  shelf  │ Ursula Kroeber Le Guin: A Wizard of Earthsea (50th anniversary) · Tehanu"),
      "a removed book leaves it")
    #expect(
      text.contains("author │ Ursula K. Le Guin (wrote Earthsea)"),
      "the renaming event's stub merges into the profile: the bio stays")
  }

  @Test func theClientFetchesThroughResources() async throws {
    let transcript = Transcript()
    try await Demo(console: transcript.console).run()
    let lines = transcript.lines
    #expect(lines.filter { $0 == "GET /feed?page=1" }.count == 1, "two screens, one request")
    #expect(lines.contains("  net    │ 2 screens asked for the feed: 1 request"))
    let retry = try #require(
      lines.firstIndex(of: "  net    │ 503 Service Unavailable: the client retries"))
    #expect(lines[retry - 1] == "GET /authors/1" && lines[retry + 1] == "GET /authors/1")
    #expect(lines.filter { $0 == "GET /authors/1" }.count == 2, "one failure, one retry")
  }

  @Test func theOutputIsDeterministic() async throws {
    let first = Transcript()
    let second = Transcript()
    try await Demo(console: first.console).run()
    try await Demo(console: second.console).run()
    #expect(first.lines == second.lines)
  }

  @Test func theShippedReplayFilePlaysWithoutErrors() async throws {
    let file = URL(filePath: #filePath).deletingLastPathComponent().appending(
      path: "../../Examples/events.jsonl")
    var demo = Demo(console: Transcript().console)
    demo.events = try String(contentsOf: file, encoding: .utf8)
    demo.closeBookScreenBeforeLine = nil
    let outcome = try await demo.run()
    #expect(outcome.badLines.isEmpty)
    #expect(outcome.applied == 6)
    #expect(outcome.refused == 1)
    #expect(outcome.feed?.books.map(\.id) == ["left-hand", "kindred", "lathe"])
  }

  @Test func aGeneratedStreamIsTheSameForTheSameSeed() throws {
    let a = Throughput(events: 500, seed: 9, console: Transcript().console)
    let b = Throughput(events: 500, seed: 9, console: Transcript().console)
    let c = Throughput(events: 500, seed: 10, console: Transcript().console)
    #expect(a.generate() == b.generate())
    #expect(a.generate() != c.generate())
    let outcome = try a.run()
    #expect(outcome == (try b.run()))
    #expect(outcome.applied == 500)
    #expect(outcome.refused > 0, "the generator sends late events")
  }
}

@Suite("ConcordDemo event lines")
struct EventLineTests {
  @Test func everyEventTypeDecodes() throws {
    let lines = """
      {"type": "author.renamed", "stamp": 1, "author": {"id": 1, "name": "A"}}
      {"type": "book.retitled", "stamp": 2, "book": "b", "title": "T"}
      {"type": "book.published", "stamp": 3, "book": {"id": "b", "title": "T", "author": {"id": 1, "name": "A"}}}
      {"type": "book.removed", "stamp": 4, "book": "b"}
      {"type": "user.renamed", "stamp": 5, "user": {"id": 7, "name": "U"}}
      {"type": "burst", "stamp": 6, "events": [{"type": "book.removed", "stamp": 6, "book": "c"}]}
      """
    let events = try Event.parse(lines: lines).map { try $0.result.get() }
    #expect(events.map(\.stamp) == [1, 2, 3, 4, 5, 6])
    #expect(events.last == .burst([.bookRemoved(id: "c", stamp: 6)], stamp: 6))
  }

  @Test(arguments: [
    ("{\"type\": \"author.renamed\", \"stamp\": 1}", "missing \"author\""),
    (
      "{\"type\": \"book.retitled\", \"stamp\": \"late\", \"book\": \"b\", \"title\": \"T\"}",
      ".stamp is not a Double"
    ),
    ("{\"stamp\": 1}", "missing \"type\""),
    ("{\"type\": \"book.burned\", \"stamp\": 1}", "unknown event type \"book.burned\""),
    ("{\"type\": ", "malformed JSON"),
    ("[1, 2]", "expected a JSON object"),
  ])
  func aBadLineIsExplainedWithItsNumber(line: String, reason: String) {
    let results = Event.parse(lines: "\n" + line)
    #expect(results.count == 1)
    guard case .failure(let error) = results.first?.result else {
      Issue.record("expected an error for \(line)")
      return
    }
    #expect(error.line == 2)
    #expect(error.reason == reason)
  }

  @Test func blankLinesAreSkippedAndNumbersStayRight() {
    let results = Event.parse(
      lines: "\n\n{\"type\": \"book.removed\", \"stamp\": 1, \"book\": \"b\"}\n\n")
    #expect(results.map(\.line) == [3])
  }
}
