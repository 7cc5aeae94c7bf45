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
/// - A removal shifts the later entries of its run back rather than leave a deletion marker,
///   so a lookup never probes past more than the entries that share its run.
/// - A bucket may instead hold an entity's tombstone (see `_Tombstones.swift`): its key, and
///   where the table's list of tombstones keeps the rest (`mark`). Its byte has the top bit
///   clear, so a lookup of a node passes over it as over another key; and a removal that leaves
///   a tombstone turns the node's bucket into one in place (`entomb(at:mark:)`), so that it
///   costs one probe, as removing the entry does.
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
  /// One byte per bucket: 0 while it is empty, `tag(hash)` of its key while it holds a node,
  /// `tombTag(hash)` while it holds a tombstone.
  @usableFromInline var tags: UnsafeMutablePointer<UInt8>
  /// The number of buckets minus one; the number of buckets is a power of two.
  @usableFromInline var mask: Int
  /// How many nodes there are.
  @usableFromInline private(set) var count: Int
  /// How many tombstones there are.
  @usableFromInline private(set) var tombCount: Int
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
    tombCount = 0
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

  /// The most entries, nodes and tombstones, the buckets hold before the index grows.
  @inlinable
  var capacity: Int { (mask + 1) / 4 * 3 }

  /// Whether `bucket` holds a node (rather than nothing or a tombstone).
  @inlinable
  func holdsNode(_ bucket: Int) -> Bool { tags[bucket] & 0x80 != 0 }

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

  /// The mark of `bucket`, which must hold a tombstone.
  @inlinable
  func mark(at bucket: Int) -> Int {
    (buckets + bucket &* Self.bucketStride).load(as: Int.self)
  }

  /// Stores the mark of `bucket`, which holds a tombstone.
  @inlinable
  func setMark(_ mark: Int, at bucket: Int) {
    (buckets + bucket &* Self.bucketStride).storeBytes(of: mark, as: Int.self)
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

  /// The byte of a bucket holding the tombstone of a key whose node's byte is `tag`: its top
  /// bit clear, never 0. NB: derived from the node's byte, so that a node's bucket becomes a
  /// tombstone's without hashing its key again.
  @inlinable
  static func tombTag(fromTag tag: UInt8) -> UInt8 { tag & 0x7F | 0x01 }

  /// The bucket holding `key`, of hash `hash`, or the empty bucket where its probe ended.
  /// Tombstones are passed over.
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

  /// The bucket holding the tombstone of `key`, if any.
  @inlinable
  func findTomb(_ key: Key) -> Int? {
    let hash = hash(key)
    let tag = Self.tombTag(fromTag: Self.tag(hash))
    var bucket = hash & mask
    while true {
      let found = tags[bucket]
      if found == 0 { return nil }
      if found == tag && self.key(at: bucket).pointee == key { return bucket }
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
    if count + tombCount >= capacity {
      grow(toHold: count + tombCount + 1)
      // NB: the seed changed with the buffer.
      hash = self.hash(key)
      bucket = find(key, hash: hash).bucket
    }
    self.key(at: bucket).initialize(to: key)
    setNode(node, at: bucket)
    tags[bucket] = Self.tag(hash)
    count += 1
  }

  /// Adds a tombstone for `key`, which has none, holding `mark`.
  @inlinable
  mutating func insertTomb(_ key: Key, mark: Int) {
    if count + tombCount >= capacity { grow(toHold: count + tombCount + 1) }
    let hash = hash(key)
    var bucket = hash & mask
    while tags[bucket] != 0 { bucket = (bucket &+ 1) & mask }
    self.key(at: bucket).initialize(to: key)
    setMark(mark, at: bucket)
    tags[bucket] = Self.tombTag(fromTag: Self.tag(hash))
    tombCount += 1
  }

  /// Turns the node of `bucket` into a tombstone of the same key, holding `mark`, in place. The
  /// caller releases the node.
  @inlinable
  mutating func entomb(at bucket: Int, mark: Int) {
    setMark(mark, at: bucket)
    tags[bucket] = Self.tombTag(fromTag: tags[bucket])
    count -= 1
    tombCount += 1
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

  /// Empties `bucket`, which holds a node or a tombstone, then moves back each later entry of
  /// its run that a probe from its own ideal bucket would otherwise no longer reach.
  @inlinable
  mutating func removeEntry(at bucket: Int) {
    key(at: bucket).deinitialize(count: 1)
    if holdsNode(bucket) { count -= 1 } else { tombCount -= 1 }
    tags[bucket] = 0
    var hole = bucket
    var next = (bucket &+ 1) & mask
    while tags[next] != 0 {
      let ideal = hash(key(at: next).pointee) & mask
      // NB: the entry may fill the hole when the hole lies on its probe, from its ideal bucket
      // up to where it is: it is at least as far from its ideal bucket as from the hole.
      if (next &- ideal) & mask >= (next &- hole) & mask {
        key(at: hole).moveInitialize(from: key(at: next), count: 1)
        // NB: a node's address or a tombstone's mark, moved as it is.
        setMark(mark(at: next), at: hole)
        tags[hole] = tags[next]
        tags[next] = 0
        hole = next
      }
      next = (next &+ 1) & mask
    }
  }

  /// Makes room for `capacity` nodes, beside the tombstones, without growing again.
  @inlinable
  mutating func reserveCapacity(_ capacity: Int) {
    if capacity + tombCount > self.capacity { grow(toHold: capacity + tombCount) }
  }

  /// Gives back room that a burst of entries left unused: when the index has four times the
  /// buckets its entries need, or more, moves them to buffers with room for twice as many.
  ///
  /// - Complexity: O(buckets) when it shrinks; O(1) otherwise.
  @inlinable
  mutating func shrinkIfSparse() {
    let entries = count + tombCount
    guard mask + 1 >= 4 * Self.bucketCount(for: entries) else { return }
    grow(toHold: 2 * entries)
  }

  /// Takes out every tombstone.
  @inlinable
  mutating func removeAllTombs() {
    guard tombCount > 0 else { return }
    grow(toHold: count, keepingTombs: false)
  }

  /// Moves every entry (every node, when not `keepingTombs`) to new buffers with room for
  /// `capacity` entries.
  @inlinable
  mutating func grow(toHold capacity: Int, keepingTombs: Bool = true) {
    let old = self
    let bucketCount = Self.bucketCount(for: capacity)
    (buckets, tags) = Self.allocate(bucketCount)
    mask = bucketCount - 1
    seed = Int(bitPattern: buckets)
    tombCount = 0
    for bucket in 0...old.mask where old.tags[bucket] != 0 {
      let key = old.key(at: bucket)
      let isNode = old.holdsNode(bucket)
      guard isNode || keepingTombs else {
        key.deinitialize(count: 1)
        continue
      }
      let hash = hash(key.pointee)
      var to = hash & mask
      while tags[to] != 0 { to = (to &+ 1) & mask }
      self.key(at: to).moveInitialize(from: key, count: 1)
      setMark(old.mark(at: bucket), at: to)
      tags[to] = isNode ? Self.tag(hash) : Self.tombTag(fromTag: Self.tag(hash))
      if !isNode { tombCount += 1 }
    }
    old.buckets.deallocate()
    old.tags.deallocate()
  }

  /// Calls `body` with the node of every entry, in bucket order. `body` must not change the
  /// index.
  @inlinable
  func forEachNode(_ body: (Unmanaged<Node>) throws -> Void) rethrows {
    for bucket in 0...mask where holdsNode(bucket) { try body(node(at: bucket)) }
  }

  /// Calls `body` with the key and the mark of every tombstone, in bucket order. `body` must
  /// not change the index.
  @inlinable
  func forEachTomb(_ body: (Key, Int) throws -> Void) rethrows {
    for bucket in 0...mask where tags[bucket] != 0 && !holdsNode(bucket) {
      try body(key(at: bucket).pointee, mark(at: bucket))
    }
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
  /// reach, two tombstones of one key, or counts that differ from the entries; for
  /// `_checkInvariants`.
  @usableFromInline
  func problem(key keyOfNode: (Unmanaged<Node>) -> Key) -> String? {
    var nodes = 0
    var tombs = 0
    for bucket in 0...mask where tags[bucket] != 0 {
      let key = self.key(at: bucket).pointee
      let hash = hash(key)
      if holdsNode(bucket) {
        nodes += 1
        guard keyOfNode(node(at: bucket)) == key else {
          return "the index files a node under another id"
        }
        guard tags[bucket] == Self.tag(hash) else { return "a bucket's byte is not its id's" }
        guard find(key, hash: hash) == (bucket, true) else {
          return "a probe for an id misses its entry"
        }
      } else {
        tombs += 1
        guard tags[bucket] == Self.tombTag(fromTag: Self.tag(hash)) else {
          return "a tombstone's byte is not its id's"
        }
        guard findTomb(key) == bucket else { return "a probe for a tombstone misses it" }
      }
    }
    guard nodes == count, tombs == tombCount, count + tombCount <= capacity else {
      return "the index counts \(count) nodes and \(tombCount) tombstones in \(mask + 1) "
        + "buckets, and holds \(nodes) and \(tombs)"
    }
    return nil
  }
}
