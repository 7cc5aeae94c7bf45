/// What a paged list's loader hands back: one page of items, newest first, and the cursors
/// that lead past it.
///
/// ```swift
/// // GitHub: the next page is the URL of the `Link` header's rel="next", nil on the last page.
/// return Page(issues, older: response.link(rel: "next"))
/// // Mastodon: pages are asked by status id, older (max_id) and newer (min_id).
/// return Page(statuses, older: statuses.last?.id, newer: statuses.first?.id)
/// ```
///
/// The items are stored as `store(items, modifiedAt:)` would store them: stamps, merges and
/// tombstones apply to each, and an id the page repeats is one entity whose value follows the
/// rules of one write.
public struct Page<T: Sendable, Cursor: Codable & Sendable>: Sendable {
  /// The items, newest first.
  public var items: [T]
  /// The cursor of the next older page; `nil` at the end of the list.
  public var older: Cursor?
  /// The cursor for the items newer than this page's first; `nil` when the server has none
  /// (then `refresh()` asks for the first page).
  public var newer: Cursor?
  /// The stamp of each item that carries none of its own; see ``Stamp``.
  public var modifiedAt: Stamp?

  /// A page.
  ///
  /// - Parameters:
  ///   - items: The items, newest first.
  ///   - older: The cursor of the next older page; `nil` when this page is the last.
  ///   - newer: The cursor for newer items than this page's first; `nil`: refresh with the
  ///     first page.
  ///   - modifiedAt: The stamp of each item that carries none of its own.
  public init(_ items: [T], older: Cursor?, newer: Cursor? = nil, modifiedAt: Stamp? = nil) {
    self.items = items
    self.older = older
    self.newer = newer
    self.modifiedAt = modifiedAt
  }
}
