import TestSupport
import Testing

@testable import Concord

// How a query, an indexed query and a transaction's snapshot sort what they open with: by
// creation order first (`_CreationOrder`, a radix sort from 64 entities), then by the
// comparator, whose sort is stable. The result is the comparator's order, ties in creation
// order, whatever order the hash tables hand the nodes over in.

/// A post of a feed: sorted by `score`, which many posts share, listed by `topic`.
private struct Post: Identifiable, Sendable, Equatable {
  var id: Int
  var topic: Int
  var score: Int
}

private let byScore: @Sendable (Post, Post) -> Bool = { $0.score < $1.score }

/// `posts` stable-sorted by `score`: the order every sorted read must give, when `posts` are
/// in creation order.
private func expected(_ posts: [Post], topic: Int? = nil) -> [Int] {
  posts.filter { topic == nil || $0.topic == topic }.sorted(by: byScore).map(\.id)
}

@Suite("Sorted reads: the comparator, then creation order")
struct QuerySortTests {
  @Test(
    "the radix sort and the standard sort put positions in the same order, ties kept",
    arguments: [0, 1, 2, 3, 63, 64, 65, 300, 1_000])
  func radixAgreesWithTheStandardSort(count: Int) {
    var random = SeededGenerator(seed: UInt64(count) &+ 7)
    // Keys that span no byte (all equal), one, two, three and four bytes: each number of
    // passes; the narrow spans repeat keys.
    for span: UInt32 in [0, 3, 255, 1_000, 70_000, (1 << 24) + 5, .max] {
      let keys = (0..<count).map { _ in UInt32.random(in: 0...span, using: &random) &+ 11 }
      let stable = Array(0..<count).sorted { first, second in
        keys[first] != keys[second] ? keys[first] < keys[second] : first < second
      }
      // The radix sort, the standard sort, and whichever the default threshold picks.
      for threshold in [0, Int.max, _CreationOrder.radixThreshold] {
        var positions = Array(0..<count)
        positions.withUnsafeMutableBufferPointer { positions in
          _CreationOrder.sort(positions, radixFrom: threshold) { keys[$0] }
        }
        #expect(positions == stable, "\(count) keys over \(span), threshold \(threshold)")
      }
    }
  }

  @Test("a query opened on many posts sorts them by score, ties in the order first stored")
  func aQueryOpensInOrder() {
    var random = SeededGenerator(seed: 42)
    // Created in an order unlike their ids, over several stores; eight scores for 500 posts.
    let posts = (0..<500).shuffled(using: &random).map {
      Post(id: $0, topic: $0 % 3, score: Int.random(in: 0..<8, using: &random))
    }
    let map = IdentityMap()
    let handles = stride(from: 0, to: posts.count, by: 100).map {
      map.store(Array(posts[$0..<min($0 + 100, posts.count)]))
    }
    let sorted = map.query(Post.self, sortedBy: byScore)
    let unsorted = map.query(Post.self)
    let filtered = map.query(Post.self, filter: { $0.topic == 1 }, sortedBy: byScore)
    let indexed = map.query(Post.self, where: \.topic, equals: 2, sortedBy: byScore)
    #expect(sorted.value.map(\.id) == expected(posts))
    #expect(unsorted.value.map(\.id) == posts.map(\.id))
    #expect(filtered.value.map(\.id) == expected(posts, topic: 1))
    #expect(indexed.value.map(\.id) == expected(posts, topic: 2))
    let snapshot = map.transaction { $0.entities(Post.self, sortedBy: byScore) }
    #expect(snapshot.map(\.id) == expected(posts))
    map._core._checkInvariants()
    withExtendedLifetime((handles, sorted, unsorted, filtered, indexed)) {}
  }

  @Test("posts moved between topics open in order: the index's bucket is not in creation order")
  func movedPostsOpenInOrder() {
    var random = SeededGenerator(seed: 7)
    var posts = (0..<300).map {
      Post(id: $0, topic: $0 % 2, score: Int.random(in: 0..<5, using: &random))
    }
    let map = IdentityMap()
    let handle = map.store(posts)
    // The index is built now, and filed posts move between its buckets below.
    let keeper = map.query(Post.self, where: \.topic, equals: 0)
    for id in (0..<300).shuffled(using: &random).prefix(120) {
      posts[id].topic = 1 - posts[id].topic
      map.store(posts[id])
    }
    let moved = map.query(Post.self, where: \.topic, equals: 1, sortedBy: byScore)
    #expect(moved.value.map(\.id) == expected(posts, topic: 1))
    #expect(keeper.value.map(\.id) == posts.filter { $0.topic == 0 }.map(\.id))
    map._core._checkInvariants()
    withExtendedLifetime(handle) {}
  }
}
