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
