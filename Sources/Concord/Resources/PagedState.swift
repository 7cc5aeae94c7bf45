import Foundation

/// What a paged list knows now: its items as the map has them, whether older pages follow,
/// how old its head is, and whether a page is under way or failed.
///
/// ```swift
/// List(state.items) { status in StatusRow(status) }
/// if state.hasOlder { ProgressView().task { try? await home.loadOlder() } }
/// ```
public struct PagedState<T: Sendable>: Sendable {
  /// The items, newest first, as the pages came, each once, each as the map has it now
  /// (written anywhere since); empty before the first page.
  public var items: [T]
  /// Whether an older page may follow: the last page loaded gave an older cursor and brought
  /// something new.
  public var hasOlder: Bool
  /// Whether the list is stale: none yet, its head as old as `staleAfter` or older, or
  /// invalidated.
  public var isStale: Bool
  /// Whether the first page or a refresh is in flight (retries and their waits included).
  public var isLoading: Bool
  /// Whether an older page is in flight (`loadOlder()`).
  public var isLoadingOlder: Bool
  /// `fetchedAt` and `error`, which change seldom, in one shared box: a state is copied at
  /// each read, and a small one is copied in registers.
  @usableFromInline var _details: _PagedDetails?

  /// When the head of the list was fetched (the first page, or the last refresh); `nil`
  /// before the first page.
  public var fetchedAt: Date? {
    get { _details?.fetchedAt }
    set { _details = _PagedDetails(fetchedAt: newValue, error: error) }
  }

  /// The last page's error, after its retries; `nil` after a success.
  public var error: (any Error)? {
    get { _details?.error }
    set { _details = _PagedDetails(fetchedAt: fetchedAt, error: newValue) }
  }

  /// A state; paged lists make them, and tests of code that reads them may too.
  public init(
    items: [T] = [], hasOlder: Bool = false, fetchedAt: Date? = nil, isStale: Bool = true,
    isLoading: Bool = false, isLoadingOlder: Bool = false, error: (any Error)? = nil
  ) {
    self.init(
      items: items, hasOlder: hasOlder, isStale: isStale, isLoading: isLoading,
      isLoadingOlder: isLoadingOlder, details: _PagedDetails(fetchedAt: fetchedAt, error: error))
  }

  /// A state whose details are boxed already.
  @inlinable
  init(
    items: [T], hasOlder: Bool, isStale: Bool, isLoading: Bool, isLoadingOlder: Bool,
    details: _PagedDetails?
  ) {
    self.items = items
    self.hasOlder = hasOlder
    self.isStale = isStale
    self.isLoading = isLoading
    self.isLoadingOlder = isLoadingOlder
    _details = details
  }
}

/// A paged list's `fetchedAt` and `error`, in a box a list shares between its states; see
/// `PagedState`.
@usableFromInline
final class _PagedDetails: Sendable {
  @usableFromInline let fetchedAt: Date?
  let error: (any Error)?

  /// The box of `fetchedAt` and `error`; `nil` when both are.
  @usableFromInline
  init?(fetchedAt: Date?, error: (any Error)?) {
    guard fetchedAt != nil || error != nil else { return nil }
    self.fetchedAt = fetchedAt
    self.error = error
  }
}

extension PagedState: CustomStringConvertible {
  /// The state in one line, for logs and test failures.
  public var description: String {
    var parts = ["\(items.count) items"]
    if hasOlder { parts.append("has older") }
    if let fetchedAt { parts.append("fetched at \(fetchedAt.timeIntervalSince1970)") }
    if isStale { parts.append("stale") }
    if isLoading { parts.append("loading") }
    if isLoadingOlder { parts.append("loading older") }
    if let error { parts.append("error: \(error)") }
    return "PagedState(" + parts.joined(separator: ", ") + ")"
  }
}
