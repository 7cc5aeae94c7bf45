import Foundation

/// A websocket event, as the server pushes it: one JSON object per line (JSON Lines).
///
/// Every event has a `type` and a `stamp`, the server's modification time, which the client
/// passes as `modifiedAt` so that a late, older event is refused. The formats:
///
/// ```json
/// {"type": "author.renamed", "stamp": 105, "author": {"id": 1, "name": "Ursula K. Le Guin"}}
/// {"type": "book.retitled", "stamp": 106, "book": "earthsea", "title": "A Wizard of Earthsea"}
/// {"type": "book.published", "stamp": 107, "book": {"id": "tehanu", "title": "Tehanu", "author": {"id": 1, "name": "Ursula K. Le Guin"}}}
/// {"type": "book.removed", "stamp": 108, "book": "kindred"}
/// {"type": "user.renamed", "stamp": 109, "user": {"id": 7, "name": "Sparrowhawk"}}
/// {"type": "burst", "stamp": 110, "events": [ ...events... ]}
/// ```
///
/// A `burst` groups events the server sent together; the client applies them in one
/// transaction. Blank lines are skipped.
enum Event: Equatable, Sendable {
  case authorRenamed(Author, stamp: Double)
  case bookRetitled(id: String, title: String, stamp: Double)
  case bookPublished(Book, stamp: Double)
  case bookRemoved(id: String, stamp: Double)
  case userRenamed(User, stamp: Double)
  case burst([Event], stamp: Double)

  /// The server's stamp.
  var stamp: Double {
    switch self {
    case .authorRenamed(_, let stamp), .bookRetitled(_, _, let stamp), .bookPublished(_, let stamp),
      .bookRemoved(_, let stamp), .userRenamed(_, let stamp), .burst(_, let stamp):
      stamp
    }
  }

  /// One line for the console.
  var summary: String {
    switch self {
    case .authorRenamed(let author, let stamp):
      "author.renamed #\(author.id) → \"\(author.name)\" (stamp \(Int(stamp)))"
    case .bookRetitled(let id, let title, let stamp):
      "book.retitled \(id) → \"\(title)\" (stamp \(Int(stamp)))"
    case .bookPublished(let book, let stamp):
      "book.published \(book.id) \"\(book.title)\" (stamp \(Int(stamp)))"
    case .bookRemoved(let id, let stamp): "book.removed \(id) (stamp \(Int(stamp)))"
    case .userRenamed(let user, let stamp):
      "user.renamed #\(user.id) → \"\(user.name)\" (stamp \(Int(stamp)))"
    case .burst(let events, let stamp): "burst of \(events.count) events (stamp \(Int(stamp)))"
    }
  }
}

/// Why a line of an event stream could not be used.
struct EventError: Error, Equatable, CustomStringConvertible {
  let line: Int
  let reason: String

  var description: String { "line \(line): \(reason)" }
}

extension Event: Decodable {
  private enum Keys: String, CodingKey {
    case type, stamp, author, book, title, user, events
  }

  init(from decoder: any Decoder) throws {
    let fields = try decoder.container(keyedBy: Keys.self)
    let type = try fields.decode(String.self, forKey: .type)
    let stamp = try fields.decode(Double.self, forKey: .stamp)
    switch type {
    case "author.renamed":
      self = .authorRenamed(try fields.decode(Author.self, forKey: .author), stamp: stamp)
    case "book.retitled":
      self = .bookRetitled(
        id: try fields.decode(String.self, forKey: .book),
        title: try fields.decode(String.self, forKey: .title),
        stamp: stamp)
    case "book.published":
      self = .bookPublished(try fields.decode(Book.self, forKey: .book), stamp: stamp)
    case "book.removed":
      self = .bookRemoved(id: try fields.decode(String.self, forKey: .book), stamp: stamp)
    case "user.renamed":
      self = .userRenamed(try fields.decode(User.self, forKey: .user), stamp: stamp)
    case "burst":
      self = .burst(try fields.decode([Event].self, forKey: .events), stamp: stamp)
    default:
      throw DecodingError.dataCorruptedError(
        forKey: .type, in: fields, debugDescription: "unknown event type \"\(type)\"")
    }
  }

  /// The events of a JSON Lines stream, in order, each with its line number, and a readable
  /// error for each line that is not a valid event. Blank lines are skipped.
  static func parse(lines text: String) -> [(line: Int, result: Result<Event, EventError>)] {
    text.split(separator: "\n", omittingEmptySubsequences: false).enumerated().compactMap {
      offset, raw in
      let line = raw.trimmingCharacters(in: .whitespaces)
      guard !line.isEmpty else { return nil }
      return (
        offset + 1, Result { () throws(EventError) in try decode(line: line, number: offset + 1) }
      )
    }
  }

  /// Decodes one line, explaining what is wrong with it when it is not an event.
  static func decode(line: String, number: Int) throws(EventError) -> Event {
    do {
      return try JSONDecoder().decode(Event.self, from: Data(line.utf8))
    } catch let error as DecodingError {
      throw EventError(line: number, reason: explain(error))
    } catch {
      throw EventError(line: number, reason: "unreadable: \(error)")
    }
  }

  /// A short reason for a decoding error.
  private static func explain(_ error: DecodingError) -> String {
    func path(_ context: DecodingError.Context) -> String {
      context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
    }
    switch error {
    case .keyNotFound(let key, let context):
      let location = path(context)
      return "missing \"\(key.stringValue)\"" + (location.isEmpty ? "" : " in \(location)")
    case .typeMismatch(let type, let context), .valueNotFound(let type, let context):
      return context.codingPath.isEmpty
        ? "expected a JSON object" : "\(path(context)) is not a \(type)"
    case .dataCorrupted(let context):
      if context.codingPath.isEmpty { return "malformed JSON" }
      return context.debugDescription
    @unknown default:
      return "\(error)"
    }
  }
}
