/// The nodes of one table, keyed by id: an open-addressing hash table that keeps each key beside
/// its node.
///
/// NB: why not `Dictionary`: a dictionary keeps its keys and its values in two arrays, so a
/// lookup that finds its key reads one cache line for the key and another for the value before
/// it reaches the node. With a million entities each of those is a miss. Here a bucket holds the
/// node's address and then the key, so a hit reads one line of the table and then the node
/// (`scale.find.1M`).
///
/// - Linear probing over a power-of-two number of buckets, at most three quarters full, so that
///   every probe ends at an empty bucket.
/// - Beside the buckets, one byte per bucket says whether it is full and holds seven bits of its
///   key's hash. A probe reads the bytes, a small array that stays in cache, and reads a bucket
///   only when the bits match: looking up an absent id seldom reads a bucket at all
///   (`find.miss`), as a dictionary's occupancy bitmap spares it.
/// - A removal shifts the later entries of its run back rather than leave a tombstone, so a
///   lookup never probes past more than the entries that share its run.
/// - Hashes are seeded per buffer, as `Dictionary` seeds them per storage: moving the entries of
///   one table into another in bucket order cannot crowd them into one run.
///
/// The index holds its nodes unretained: the table that owns it retains and releases them
/// (rule 2 of `_Lifetime.swift`), so every address in a full bucket is a live node. It
/// owns its buffers, though it is copyable: its owner keeps the only copy and calls `dispose()`
/// once, from its own deinit. (NB: a noncopyable struct with a deinit crashed the 6.3 optimizer
/// when the table's `@usableFromInline` property inlined the deinit.)
///
/// Not thread-safe: the map's lock guards it. Lookups may run under the shared lock; every
/// mutation runs under the exclusive one.
@usableFromInline
struct _NodeIndex<Key: Hashable, Node: AnyObject> {
  /// The buckets: each is a node's address followed by its key, both initialized only while the
  /// bucket is full. NB: the address is stored as a raw pointer, a type that is not generic, so
  /// that code that runs unspecialized (a table's deinit) reads it without looking up the
  /// metadata of `Unmanaged<Node>` on every bucket.
  @usableFromInline var buckets: UnsafeMutableRawPointer
  /// One byte per bucket: 0 while it is empty, otherwise `tag(hash)` of its key.
  @usableFromInline var tags: UnsafeMutablePointer<UInt8>
  /// The number of buckets minus one; the number of buckets is a power of two.
  @usableFromInline var mask: Int
  /// How many entries there are.
  @usableFromInline private(set) var count: Int
  /// The hash seed of this buffer.
  @usableFromInline var seed: Int

  /// The fewest buckets an index has.
  @inlinable static var minimumBuckets: Int { 8 }

  /// Where a bucket's key is, after its node's address.
  @inlinable static var keyOffset: Int {
    let alignment = MemoryLayout<Key>.alignment
    return (MemoryLayout<UnsafeMutableRawPointer>.size + alignment - 1) / alignment * alignment
  }

  /// The distance between two buckets.
  @inlinable static var bucketStride: Int {
    let alignment = bucketAlignment
    return (keyOffset + MemoryLayout<Key>.size + alignment - 1) / alignment * alignment
  }

  /// The alignment of a bucket: its address's or its key's, whichever is stricter.
  @inlinable static var bucketAlignment: Int {
    Swift.max(MemoryLayout<UnsafeMutableRawPointer>.alignment, MemoryLayout<Key>.alignment)
  }

  /// An empty index, of the fewest buckets.
  @inlinable
  init() {
    (buckets, tags) = Self.allocate(Self.minimumBuckets)
    mask = Self.minimumBuckets - 1
    count = 0
    seed = Int(bitPattern: buckets)
  }

  /// Destroys the keys and frees the buffers; the index must not be used after.
  func dispose() {
    for bucket in 0...mask where tags[bucket] != 0 {
      key(at: bucket).deinitialize(count: 1)
    }
    buckets.deallocate()
    tags.deallocate()
  }

  /// The fewest buckets, a power of two, that hold `capacity` entries at most three quarters
  /// full.
  @inlinable
  static func bucketCount(for capacity: Int) -> Int {
    precondition(capacity >= 0, "Concord: a negative capacity")
    var buckets = minimumBuckets
    while buckets / 4 * 3 < capacity { buckets *= 2 }
    return buckets
  }

  /// New buffers of `bucketCount` buckets, all empty.
  @inlinable
  static func allocate(
    _ bucketCount: Int
  ) -> (UnsafeMutableRawPointer, UnsafeMutablePointer<UInt8>) {
    let buckets = UnsafeMutableRawPointer.allocate(
      byteCount: bucketCount * bucketStride, alignment: bucketAlignment)
    let tags = UnsafeMutablePointer<UInt8>.allocate(capacity: bucketCount)
    tags.initialize(repeating: 0, count: bucketCount)
    return (buckets, tags)
  }

  /// The most entries the buckets hold before the index grows.
  @inlinable
  var capacity: Int { (mask + 1) / 4 * 3 }

  /// The node of `bucket`, which must be full.
  @inlinable
  func node(at bucket: Int) -> Unmanaged<Node> {
    .fromOpaque((buckets + bucket &* Self.bucketStride).load(as: UnsafeMutableRawPointer.self))
  }

  /// Stores the node of `bucket`.
  @inlinable
  func setNode(_ node: Unmanaged<Node>, at bucket: Int) {
    (buckets + bucket &* Self.bucketStride).storeBytes(
      of: node.toOpaque(), as: UnsafeMutableRawPointer.self)
  }

  /// The key of `bucket`, which must be full (or be about to be, for initialization).
  @inlinable
  func key(at bucket: Int) -> UnsafeMutablePointer<Key> {
    (buckets + bucket &* Self.bucketStride + Self.keyOffset).assumingMemoryBound(to: Key.self)
  }

  /// The hash of `key` in this buffer.
  @inlinable
  func hash(_ key: Key) -> Int {
    key._rawHashValue(seed: seed)
  }

  /// The byte a full bucket keeps for a key of hash `hash`: its top seven bits, and the eighth
  /// set so that it is never 0. NB: the top bits, because the bucket comes from the low ones.
  @inlinable
  static func tag(_ hash: Int) -> UInt8 {
    UInt8(truncatingIfNeeded: UInt(bitPattern: hash) &>> (Int.bitWidth - 7)) | 0x80
  }

  /// The bucket holding `key`, of hash `hash`, or the empty bucket where its probe ended.
  @inlinable
  func find(_ key: Key, hash: Int) -> (bucket: Int, found: Bool) {
    let tag = Self.tag(hash)
    var bucket = hash & mask
    while true {
      let found = tags[bucket]
      if found == 0 { return (bucket, false) }
      if found == tag && self.key(at: bucket).pointee == key { return (bucket, true) }
      bucket = (bucket &+ 1) & mask
    }
  }

  /// The node of `key`, if any.
  @inlinable
  subscript(key: Key) -> Unmanaged<Node>? {
    let (bucket, found) = find(key, hash: hash(key))
    return found ? node(at: bucket) : nil
  }

  /// The node of `key`, inserting `make()` if there is none, with a single probe unless the
  /// index grows.
  @inlinable
  mutating func getOrInsert(_ key: Key, _ make: () -> Unmanaged<Node>) -> Unmanaged<Node> {
    let hash = hash(key)
    let (bucket, found) = find(key, hash: hash)
    if found { return node(at: bucket) }
    let made = make()
    insert(made, forKey: key, hash: hash, at: bucket)
    return made
  }

  /// Makes `node` the entry of `key`, and returns the node it replaced, if any.
  @inlinable @discardableResult
  mutating func updateValue(_ node: Unmanaged<Node>, forKey key: Key) -> Unmanaged<Node>? {
    let hash = hash(key)
    let (bucket, found) = find(key, hash: hash)
    guard found else {
      insert(node, forKey: key, hash: hash, at: bucket)
      return nil
    }
    let replaced = self.node(at: bucket)
    setNode(node, at: bucket)
    return replaced
  }

  /// Adds an entry for `key`, which has none, at `bucket`, the empty bucket where its probe
  /// ended; or, when the index is full, where a probe ends once it has grown.
  @inlinable
  mutating func insert(_ node: Unmanaged<Node>, forKey key: Key, hash: Int, at bucket: Int) {
    var (hash, bucket) = (hash, bucket)
    if count >= capacity {
      grow(toHold: count + 1)
      // NB: the seed changed with the buffer.
      hash = self.hash(key)
      bucket = find(key, hash: hash).bucket
    }
    self.key(at: bucket).initialize(to: key)
    setNode(node, at: bucket)
    tags[bucket] = Self.tag(hash)
    count += 1
  }

  /// Takes out the entry of `key` if its node is `node`; returns whether it did.
  @inlinable
  mutating func remove(_ key: Key, ifNodeIs node: Unmanaged<Node>) -> Bool {
    let (bucket, found) = find(key, hash: hash(key))
    guard found, self.node(at: bucket).toOpaque() == node.toOpaque() else { return false }
    removeEntry(at: bucket)
    return true
  }

  /// Takes out the entry of `key`, and returns its node.
  @inlinable @discardableResult
  mutating func removeValue(forKey key: Key) -> Unmanaged<Node>? {
    let (bucket, found) = find(key, hash: hash(key))
    guard found else { return nil }
    let removed = node(at: bucket)
    removeEntry(at: bucket)
    return removed
  }

  /// Empties `bucket`, then moves back each later entry of its run that a probe from its own
  /// ideal bucket would otherwise no longer reach.
  @inlinable
  mutating func removeEntry(at bucket: Int) {
    key(at: bucket).deinitialize(count: 1)
    tags[bucket] = 0
    count -= 1
    var hole = bucket
    var next = (bucket &+ 1) & mask
    while tags[next] != 0 {
      let ideal = hash(key(at: next).pointee) & mask
      // NB: the entry may fill the hole when the hole lies on its probe, from its ideal bucket
      // up to where it is: it is at least as far from its ideal bucket as from the hole.
      if (next &- ideal) & mask >= (next &- hole) & mask {
        key(at: hole).moveInitialize(from: key(at: next), count: 1)
        setNode(node(at: next), at: hole)
        tags[hole] = tags[next]
        tags[next] = 0
        hole = next
      }
      next = (next &+ 1) & mask
    }
  }

  /// Makes room for `capacity` entries without growing again.
  @inlinable
  mutating func reserveCapacity(_ capacity: Int) {
    if capacity > self.capacity { grow(toHold: capacity) }
  }

  /// Moves every entry to new buffers with room for `capacity` entries.
  @inlinable
  mutating func grow(toHold capacity: Int) {
    let old = self
    let bucketCount = Self.bucketCount(for: capacity)
    (buckets, tags) = Self.allocate(bucketCount)
    mask = bucketCount - 1
    seed = Int(bitPattern: buckets)
    for bucket in 0...old.mask where old.tags[bucket] != 0 {
      let key = old.key(at: bucket)
      let hash = hash(key.pointee)
      var to = hash & mask
      while tags[to] != 0 { to = (to &+ 1) & mask }
      self.key(at: to).moveInitialize(from: key, count: 1)
      setNode(old.node(at: bucket), at: to)
      tags[to] = Self.tag(hash)
    }
    old.buckets.deallocate()
    old.tags.deallocate()
  }

  /// Calls `body` with the node of every entry, in bucket order. `body` must not change the
  /// index.
  @inlinable
  func forEachNode(_ body: (Unmanaged<Node>) throws -> Void) rethrows {
    for bucket in 0...mask where tags[bucket] != 0 { try body(node(at: bucket)) }
  }

  /// The nodes of every entry, in bucket order.
  @inlinable
  var nodes: [Unmanaged<Node>] {
    var nodes: [Unmanaged<Node>] = []
    nodes.reserveCapacity(count)
    forEachNode { nodes.append($0) }
    return nodes
  }

  /// What is wrong with the index, if anything: an entry filed under another key than its
  /// node's, a byte that does not match its key's hash, an entry a probe for its key does not
  /// reach, or a count that differs from the entries; for `_checkInvariants`.
  @usableFromInline
  func problem(key keyOfNode: (Unmanaged<Node>) -> Key) -> String? {
    var entries = 0
    for bucket in 0...mask where tags[bucket] != 0 {
      entries += 1
      let key = self.key(at: bucket).pointee
      let hash = hash(key)
      guard keyOfNode(node(at: bucket)) == key else {
        return "the index files a node under another id"
      }
      guard tags[bucket] == Self.tag(hash) else { return "a bucket's byte is not its id's" }
      guard find(key, hash: hash) == (bucket, true) else {
        return "a probe for an id misses its entry"
      }
    }
    guard entries == count, count <= capacity else {
      return "the index counts \(count) entries in \(mask + 1) buckets, and holds \(entries)"
    }
    return nil
  }
}
