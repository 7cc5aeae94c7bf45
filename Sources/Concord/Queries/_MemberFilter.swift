/// A query's quick test of membership: a Bloom filter of its members' identities.
///
/// Every write of a `T` asks each filtered query of `T` whether the entity is a member, and
/// for all but the few queries that hold it the answer is no. The set of members answers
/// exactly, but its buckets are spread over memory: with 100 queries of 1,000 members, each
/// answer was a hash and two cache misses (`query.maintain` spent about 40 % of its time
/// there). This filter keeps 16 bits a member when it is made, and never fewer than 8, so a
/// hundred of them fit in the processor's cache. It answers "surely not" for most entities,
/// and "perhaps" for every member: only then is the set asked.
///
/// It is *blocked*: an identity sets two bits of one 64-bit word, so a test reads one word. With
/// 16 bits a member, about 2 % of the nodes that are not members get a "perhaps"; with 8, about
/// 6 %. A member that leaves keeps its bits (a Bloom filter cannot forget), which only makes
/// "perhaps" more frequent; the query drops the filter, to be made again from its members,
/// when more than half the members it was made for left, or when the members come to more
/// than twice those.
///
/// - Invariant: every member's two bits are set: no false "surely not". `_QueryNode.problem`
///   checks it, and `_Pass.isExhaustive` turns the filter off, so that the model-based tests
///   run both ways.
@usableFromInline
struct _MemberFilter {
  /// The bits, in a power-of-two count of words.
  @usableFromInline var words: [UInt64]
  /// How many members the filter was made for (at least 4).
  @usableFromInline let madeFor: Int
  /// How many members left since the filter was made: their bits are still set.
  @usableFromInline var departures = 0

  /// A filter of `identities`, the `count` members' nodes, with room for `count` more
  /// members.
  @inlinable
  init<S: Sequence<UInt>>(_ identities: S, count: Int) {
    madeFor = max(count, 4)
    var size = 1
    while size * 4 < madeFor { size <<= 1 }
    words = Array(repeating: 0, count: size)
    for identity in identities { insert(identity) }
  }

  /// The word and the two bits of `identity` (a node's address).
  @inlinable @inline(__always)
  func slot(of identity: UInt) -> (word: Int, mask: UInt64) {
    // NB: a multiplicative hash (the odd constant is 2^64 divided by the golden ratio). Only
    // the product's high half is used: its low bits are the address's, whose lowest are
    // zeros of alignment. Bits 44 and up pick the word (up to a million), bits 32 to 43 the
    // two bits in it.
    let hash = UInt64(truncatingIfNeeded: identity) &* 0x9E37_79B9_7F4A_7C15
    let word = Int(truncatingIfNeeded: hash &>> 44) & (words.count &- 1)
    let mask =
      (1 as UInt64) &<< ((hash &>> 32) & 63) | (1 as UInt64) &<< ((hash &>> 38) & 63)
    return (word, mask)
  }

  /// The identity the filter keeps for `node`: its address, as `Unmanaged.toOpaque()` gives it
  /// for a member.
  @inlinable
  static func identity(of node: AnyObject) -> UInt { UInt(bitPattern: ObjectIdentifier(node)) }

  /// Whether `identity` may be a member: `false` only for a node that is not one.
  @inlinable
  func mayContain(_ identity: UInt) -> Bool {
    let (word, mask) = slot(of: identity)
    return words.withUnsafeBufferPointer { $0[word] & mask == mask }
  }

  /// Records a member.
  @inlinable
  mutating func insert(_ identity: UInt) {
    let (word, mask) = slot(of: identity)
    words[word] |= mask
  }

  /// Whether the filter should be made again for the query's `count` members: since it was
  /// made, more than half its members left, or the members more than doubled.
  @inlinable
  func isWorn(members count: Int) -> Bool {
    2 * departures > madeFor || count > 2 * madeFor
  }
}
