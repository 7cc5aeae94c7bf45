import Foundation
import Testing

@testable import Concord

/// The order in which a paged list takes what it reads of the map: reads of the list can
/// reach its machine out of order (two threads' writes, each read after its own), and a read
/// older than what the list has must never replace it.
@Suite("Paged lists: reads taken in order")
struct PagedSnapshotOrderTests {
  /// A list of one page `serial` holding `items`, as read at `version`.
  func snapshot(_ items: [Int], serial: UInt64 = 1, version: _PagedVersion) -> _PagedSnapshot<Int> {
    _PagedSnapshot(
      pages: [(serial, items)], hasAnswer: true, hasOlder: true, fetchedAt: nil,
      version: version)
  }

  /// An answer that landed one page, `[1, 2, 3]`, at delivery 5, revision 1.
  func landed() -> _PagedAnswer<Int> {
    var answer = _PagedAnswer<Int>()
    _ = answer.apply(
      _PagedChange(
        shape: .replaced([(1, [1, 2, 3])]), hasAnswer: true, hasOlder: true, fetchedAt: nil,
        version: _PagedVersion(delivery: 5, book: 1)))
    return answer
  }

  @Test("A read older than the list, or as old, is refused; a newer one is taken")
  func olderReadsAreRefused() {
    var answer = landed()
    let stale = answer.take(snapshot([1, 2], version: _PagedVersion(delivery: 4, book: 1)))
    #expect(!stale.taken && answer.items == [1, 2, 3])
    let same = answer.take(snapshot([1], version: _PagedVersion(delivery: 5, book: 1)))
    #expect(!same.taken && answer.items == [1, 2, 3])
    let newer = answer.take(snapshot([1, 3], version: _PagedVersion(delivery: 6, book: 1)))
    #expect(newer.taken && answer.items == [1, 3])
    #expect(answer.version == _PagedVersion(delivery: 6, book: 1))
  }

  @Test("A read from before a landing is refused even at a later delivery of the map")
  func aReadFromBeforeALandingIsRefused() {
    var answer = landed()
    // Read when the list had no page yet (revision 0), delivered after the landing.
    let before = answer.take(
      _PagedSnapshot(
        pages: [], hasAnswer: false, hasOlder: false, fetchedAt: nil,
        version: _PagedVersion(delivery: 9, book: 0)))
    #expect(!before.taken && answer.hasAnswer && answer.items == [1, 2, 3])
  }

  @Test("Reads delivered in reverse order leave the newest")
  func reverseOrder() {
    var answer = landed()
    let reads = (6...9).map { delivery in
      snapshot(Array(1...delivery - 4), version: _PagedVersion(delivery: UInt64(delivery), book: 1))
    }
    for read in reads.reversed() { _ = answer.take(read) }
    #expect(answer.items == [1, 2, 3, 4, 5])
    #expect(answer.version.delivery == 9)
  }
}
