import Concord
import Foundation

/// `--events N`: a generated stream of websocket events, decoded and applied as fast as the
/// client can, with the screens open but silent.
struct Throughput {
  let events: Int
  let seed: UInt64
  let console: Console

  /// What the run did; everything but the time is the same for a given seed.
  struct Outcome: Equatable {
    var applied = 0
    var refused = 0
    var feedDraws = 0
    var authorDraws = 0
  }

  /// The generated stream, as JSON Lines.
  func generate() -> String {
    var random = SplitMix64(seed: seed)
    var stamp = 100.0
    var lines: [String] = []
    lines.reserveCapacity(events)
    func event() -> String {
      stamp += 1
      let author = [1, 3].randomElement(using: &random)!
      switch Int.random(in: 0..<10, using: &random) {
      case 0:
        // A late event, older than what the client has.
        return
          #"{"type": "author.renamed", "stamp": \#(Int(stamp) - 50), "author": {"id": \#(author), "name": "late"}}"#
      case 1...6:
        return
          #"{"type": "author.renamed", "stamp": \#(Int(stamp)), "author": {"id": \#(author), "name": "Author \#(Int(stamp))"}}"#
      default:
        let book = ["earthsea", "left-hand", "kindred"].randomElement(using: &random)!
        return
          #"{"type": "book.retitled", "stamp": \#(Int(stamp)), "book": "\#(book)", "title": "Title \#(Int(stamp))"}"#
      }
    }
    while lines.count < events {
      if lines.count % 50 == 49 {
        let burst = (0..<5).map { _ in event() }.joined(separator: ", ")
        stamp += 1
        lines.append(#"{"type": "burst", "stamp": \#(Int(stamp)), "events": [\#(burst)]}"#)
      } else {
        lines.append(event())
      }
    }
    return lines.joined(separator: "\n")
  }

  @discardableResult
  func run() throws -> Outcome {
    let client = try ReadingClient(console: console, quiet: true)
    let page = try client.loadFeed(ScriptedServer.feedPage)
    let feed = Screen.feed(page, console: console, quiet: true)
    let author = Screen.author(client.map.find(Author.self, id: 1)!, console: console, quiet: true)
    let stream = generate()

    var outcome = Outcome()
    let clock = ContinuousClock()
    var decoded: [Event] = []
    let decoding = clock.measure {
      decoded = Event.parse(lines: stream).compactMap { try? $0.result.get() }
    }
    let applying = clock.measure {
      for event in decoded {
        client.apply(event)
        outcome.applied += 1
      }
    }
    outcome.refused = client.log.refused.value
    outcome.feedDraws = feed.draws.value
    outcome.authorDraws = author.draws.value

    console.write(
      "generated \(events) events (seed \(seed)): \(outcome.applied) applied, \(outcome.refused) refused as stale; "
        + "redraws: feed \(outcome.feedDraws), author \(outcome.authorDraws)")
    func seconds(_ duration: Duration) -> Double {
      Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
    console.write(
      String(
        format:
          "JSON decoding %.1f ms, applying to the map %.1f ms: %.0f events/s end to end, %.0f events/s "
          + "in the map (only these figures vary)",
        seconds(decoding) * 1_000, seconds(applying) * 1_000,
        Double(outcome.applied) / (seconds(decoding) + seconds(applying)),
        Double(outcome.applied) / seconds(applying)))
    return outcome
  }
}

/// A small deterministic generator, so that a seed always gives the same stream.
struct SplitMix64: RandomNumberGenerator {
  private var state: UInt64

  init(seed: UInt64) { state = seed }

  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var mixed = state
    mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
    mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
    return mixed ^ (mixed >> 31)
  }
}
