import Testing

@testable import Concord

/// Addresses as the allocator hands them out: 16-byte aligned, close together.
private func addresses(_ range: Range<Int>) -> [UInt] {
  range.map { 0x6000_0000_0000 + UInt($0) * 48 }
}

/// The Bloom filter a query asks before its set of members (`_MemberFilter`). A "surely not"
/// for a member would lose it from the query, so the first test is the one that matters; the
/// model-based tests (`QueryModelTests`) run the queries with the filter and without it.
@Suite("Queries: the member filter")
struct MemberFilterTests {
  @Test(arguments: [0, 1, 3, 4, 5, 100, 1_000, 10_000])
  func answersPerhapsForEveryMember(count: Int) {
    let members = addresses(0..<count)
    var filter = _MemberFilter(members, count: count)
    #expect(members.allSatisfy(filter.mayContain))
    // Members that join later, up to the point where the filter asks to be made again.
    let joined = addresses(count..<(count + count + 1))
    for identity in joined { filter.insert(identity) }
    #expect((members + joined).allSatisfy(filter.mayContain))
  }

  @Test func answersSurelyNotForMostOtherNodes() {
    let filter = _MemberFilter(addresses(0..<1_000), count: 1_000)
    let others = addresses(1_000..<101_000)
    let perhaps = others.filter(filter.mayContain).count
    // 16 bits a member, two of them set in one word: about 2 % expected.
    #expect(perhaps < others.count / 20, "\(perhaps) of \(others.count) answered perhaps")
  }

  @Test(arguments: [1_000, 1_025])
  func asksToBeMadeAgainWhenHalfItsMembersLeftOrTheyDoubled(count: Int) {
    var filter = _MemberFilter(addresses(0..<count), count: count)
    #expect(filter.words.count * 4 >= count && filter.words.count * 2 < count)
    #expect(!filter.isWorn(members: count))
    #expect(!filter.isWorn(members: 2 * count))
    #expect(filter.isWorn(members: 2 * count + 1))
    filter.departures = count / 2
    #expect(!filter.isWorn(members: count - count / 2))
    filter.departures = count / 2 + 1
    #expect(filter.isWorn(members: count - count / 2 - 1))
  }

  @Test func aFilterForFewMembersStillHasRoomForFour() {
    var filter = _MemberFilter([], count: 0)
    #expect(filter.words.count == 1)
    #expect(!filter.isWorn(members: 8))
    #expect(filter.isWorn(members: 9))
    filter.departures = 3
    #expect(filter.isWorn(members: 0))
  }
}
