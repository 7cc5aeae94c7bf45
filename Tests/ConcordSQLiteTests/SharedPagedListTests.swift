import Concord
import ConcordSQLite
import ConcordTesting
import Foundation
import TestSupport
import Testing

/// A server of the books `b1` to `b<highest>`, newest first, three a page: the older cursor is
/// the number of a page's last book, the newer one that of its first.
private struct BookPages: Sendable {
  let highest: Locked<Int>

  init(_ highest: Int) {
    self.highest = Locked(highest)
  }

  func page(_ request: PageRequest<Int>) -> Page<SharedBook, Int> {
    let top = highest.value
    let numbers: [Int]
    if request.isNewer {
      numbers = request.cursor! < top ? Array((request.cursor! + 1...top).reversed()) : []
    } else {
      let below = request.cursor ?? top + 1
      numbers = Array((max(below - 3, 1)..<below).reversed())
    }
    let books = numbers.map { SharedBook("b\($0)", "Book \($0)", 1) }
    let older = numbers.last.flatMap { $0 > 1 ? $0 : nil }
    return Page(books, older: older, newer: numbers.first ?? request.cursor)
  }
}

/// Paged lists in a store shared by several processes (two stores on one file, as in
/// `SharingTests`): another process's commits reach a list's items as they reach any entity;
/// its page records do not reach this map's list, which keeps its own pages.
@Suite("Sharing: paged lists")
struct SharedPagedListTests {
  static let key = ResourceKey<[SharedBook]>("timeline")

  fileprivate func timeline(_ side: Side, _ server: BookPages) -> PagedResource<SharedBook, Int> {
    side.map.pagedResource(Self.key, retry: .none) { server.page($0) }
  }

  @Test("Another process's edits and removals reach a paged list's items at a sync, once each")
  func externalChangesReachTheItems() async throws {
    let directory = TemporaryDirectory()
    let app = try Side(directory.database)
    let widget = try Side(directory.database)
    let server = BookPages(9)
    let appList = timeline(app, server)
    try await appList.refresh()
    try await appList.loadOlder()
    #expect(appList.state.items.map(\.id) == ["b9", "b8", "b7", "b6", "b5", "b4"])
    try app.map.flush()

    // NB: the widget's list is made after the app's pages reached the file: it reads them, as
    // a relaunch would.
    let widgetList = timeline(widget, server)
    #expect(widgetList.state.items.map(\.id) == ["b9", "b8", "b7", "b6", "b5", "b4"])
    #expect(widgetList.state.hasOlder)
    let told = Locked<[[String]]>([])
    let subscription = widgetList.observe { state in
      told.withValue { $0.append(state.items.map(\.title)) }
    }

    app.map.store(SharedBook("b8", "Book 8 (edited)", 2))
    try app.map.flush()
    try widget.map.syncExternalChanges()
    #expect(widgetList.state.items.map(\.title)[1] == "Book 8 (edited)")
    #expect(told.value.count == 1, "an edit from another process tells the list once")

    app.map.remove(SharedBook.self, id: "b5")
    try app.map.flush()
    try widget.map.syncExternalChanges()
    #expect(widgetList.state.items.map(\.id) == ["b9", "b8", "b7", "b6", "b4"])
    #expect(told.value.count == 2)

    // The app's list gains a page on top; the widget's keeps its own pages (resources and
    // paged lists do not follow other processes' answers), and the new book reaches the
    // widget's map as any entity does.
    server.highest.withValue { $0 = 10 }
    try await appList.refresh()
    #expect(appList.state.items.first?.id == "b10")
    try app.map.flush()
    try widget.map.syncExternalChanges()
    #expect(widgetList.state.items.map(\.id) == ["b9", "b8", "b7", "b6", "b4"])
    try await widgetList.refresh()
    #expect(widgetList.state.items.map(\.id) == ["b10", "b9", "b8", "b7", "b6", "b4"])
    #expect(widgetList.state.items[2].title == "Book 8 (edited)")

    #expect(
      widget.logger.events.filter { $0.kind == .persistenceFailed }.isEmpty,
      "the app's page records are not read as aliases")
    subscription.cancel()
  }
}
