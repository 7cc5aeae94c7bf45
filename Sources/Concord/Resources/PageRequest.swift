/// What one try of a paged list's loader is asked: the first page, the page older than a
/// cursor, or the page newer than a cursor.
///
/// The cursor is whatever the server pages by, handed back from an earlier ``Page``: Mastodon's
/// `max_id` and `min_id`, the URL of GitHub's `Link: rel="next"`, Matrix's `prev_batch`.
///
/// ```swift
/// let home = map.pagedResource(ResourceKey<[Status]>("timelines/home")) { (request: PageRequest<String>) in
///   var query = ["limit": "40"]
///   if request.isOlder { query["max_id"] = request.cursor }
///   if request.isNewer { query["min_id"] = request.cursor }
///   let statuses = try await api.get("/api/v1/timelines/home", query: query)
///   return Page(statuses, older: statuses.last?.id, newer: statuses.first?.id)
/// }
/// ```
public struct PageRequest<Cursor: Codable & Sendable>: Sendable {
  @usableFromInline
  enum _Kind: Sendable {
    case first
    case older(Cursor)
    case newer(Cursor)
  }

  let _kind: _Kind

  /// Which try this is: 1 for the first, 2 for the first retry, and so on.
  public internal(set) var attempt: Int

  @usableFromInline
  init(_ kind: _Kind, attempt: Int = 1) {
    _kind = kind
    self.attempt = attempt
  }

  /// The first page: the newest items.
  public static var first: PageRequest { PageRequest(.first) }

  /// The page of the items just older than `cursor` (the previous page's ``Page`` `older`).
  public static func older(than cursor: Cursor) -> PageRequest { PageRequest(.older(cursor)) }

  /// The page of the items just newer than `cursor` (the head page's ``Page`` `newer`).
  public static func newer(than cursor: Cursor) -> PageRequest { PageRequest(.newer(cursor)) }

  /// The cursor the page is asked relative to; `nil` for ``first``.
  public var cursor: Cursor? {
    switch _kind {
    case .first: nil
    case .older(let cursor), .newer(let cursor): cursor
    }
  }

  /// Whether it asks for the page older than ``cursor`` (`loadOlder()`).
  public var isOlder: Bool {
    if case .older = _kind { true } else { false }
  }

  /// Whether it asks for the page newer than ``cursor`` (`refresh()` of a list whose head page
  /// gave a newer cursor).
  public var isNewer: Bool {
    if case .newer = _kind { true } else { false }
  }
}

extension PageRequest: Equatable where Cursor: Equatable {
  /// Two requests are equal when they ask for the same page, on the same try.
  public static func == (lhs: PageRequest, rhs: PageRequest) -> Bool {
    lhs.attempt == rhs.attempt && lhs.isOlder == rhs.isOlder && lhs.isNewer == rhs.isNewer
      && lhs.cursor == rhs.cursor
  }
}

extension PageRequest: CustomStringConvertible {
  /// The request in a few words, for logs and test failures: `first`, `older than 42`,
  /// `newer than 42`, with the try when it is a retry.
  public var description: String {
    let page =
      switch _kind {
      case .first: "first"
      case .older(let cursor): "older than \(cursor)"
      case .newer(let cursor): "newer than \(cursor)"
      }
    return attempt > 1 ? "\(page) (try \(attempt))" : page
  }
}
