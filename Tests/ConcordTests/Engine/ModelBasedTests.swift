import Foundation
import TestSupport
import Testing

@testable import Concord

// A seeded model-based random test: random operations on a map and, beside it, on a reference
// model in plain Swift written from the documented contract (the articles of `Concord.docc` and
// the doc comments of the public API), compared after every step.
//
// The model keeps, per entity, its own fields, the ids of its nested entities and its stamp,
// and recomputes from them what every value must look like (a nested entity shows the stored
// one; inside a cycle, a repeated occurrence is cut), which entities are alive (reachable from a
// handle, a subscription, an alias, or a live parent), and which subscribers must be told. It
// replays the claims of a write as the contract describes them: breadth-first, the occurrence
// closest to the root wins, the last among equals, losers not expanded, each occurrence checked
// on its own stamp, Mergeable ones merged losers first.
//
// Transactions nest up to three deep, each level throwing or not, and every level stores
// batches, sets the collection alias, finds, subscribes and drops holders. The model tells
// entities apart by incarnation (`MStored.generation`): a rollback takes out what its body
// created, and a handle made on such an entity reports `isRemoved` afterwards, even when the
// same id exists again.

// MARK: The map's models

struct MLeaf: Identifiable, Sendable, Equatable {
  var id: Int
  var name: String
}

/// Mergeable: a nil `bio` keeps the stored one.
struct MUser: Mergeable, Equatable {
  var id: Int
  var name: String
  var bio: String?
  static func merge(_ incoming: MUser, into stored: MUser) -> MUser {
    incoming.keepingStoredValues(of: stored, whereNil: \.bio)
  }
}

/// Stamped by its own `version`.
struct MRev: Stamped, Identifiable, Sendable, Equatable {
  var id: Int
  var text: String
  var version: Stamp?
  var stamp: Stamp? { version }
}

struct MBook: Aggregate, Equatable {
  var id: Int
  var title: String
  var author: MLeaf
  var editor: MLeaf?
  var tags: [MLeaf]
  var reviewer: MUser?
  var rev: MRev?
  static var nestedEntities: [NestedEntity<MBook>] {
    [.init(\.author), .init(\.editor), .init(\.tags), .init(\.reviewer), .init(\.rev)]
  }
}

struct MShelf: Aggregate, Equatable {
  var id: Int
  var label: String
  var books: [MBook]
  static var nestedEntities: [NestedEntity<MShelf>] { [.init(\.books)] }
}

struct MMember: Aggregate, Equatable {
  var id: Int
  var name: String
  var friends: [MMember]
  static var nestedEntities: [NestedEntity<MMember>] { [.init(\.friends)] }
}

/// A Mergeable aggregate: a nil `flag` or `author` keeps the stored one, so a post met twice in
/// one write (on a feed, and boosted) keeps what either copy has.
struct MPost: Aggregate, Mergeable, Equatable {
  var id: Int
  var text: String
  var flag: String?
  var author: MUser?
  static var nestedEntities: [NestedEntity<MPost>] { [.init(\.author)] }
  static func merge(_ incoming: MPost, into stored: MPost) -> MPost {
    incoming.keepingStoredValues(of: stored, whereNil: \.flag, \.author)
  }
}

/// Boosts of posts: a post one level deeper than on the feed.
struct MBoost: Aggregate, Equatable {
  var id: Int
  var text: String
  var posts: [MPost]
  static var nestedEntities: [NestedEntity<MBoost>] { [.init(\.posts)] }
}

/// A page of posts and boosts.
struct MFeed: Aggregate, Equatable {
  var id: Int
  var text: String
  var posts: [MPost]
  var boosts: [MBoost]
  static var nestedEntities: [NestedEntity<MFeed>] { [.init(\.posts), .init(\.boosts)] }
}

extension AliasKey where Value == MLeaf {
  static var modelStar: Self { .init("star") }
}

extension AliasKey where Value == [MLeaf] {
  static var modelTeam: Self { .init("team") }
}

// MARK: The reference model

/// An entity kind of the model.
enum MKind: Int, CaseIterable, Hashable, CustomStringConvertible {
  case leaf, user, rev, book, shelf, member, post, boost, feed

  var ids: Range<Int> {
    switch self {
    case .leaf: 0..<6
    case .user: 0..<3
    case .rev: 0..<3
    case .book: 0..<5
    case .shelf: 0..<2
    case .member: 0..<3
    case .post: 0..<3
    case .boost, .feed: 0..<2
    }
  }

  var description: String {
    ["Leaf", "User", "Rev", "Book", "Shelf", "Member", "Post", "Boost", "Feed"][rawValue]
  }

  /// Whether the kind's type is Mergeable: its occurrences in one write all merge.
  var isMergeable: Bool { self == .user || self == .post }

  /// The shapes of the kind's nested-entity properties, in declaration order.
  var shapes: [MShape] {
    switch self {
    case .leaf, .user, .rev: []
    case .book: [.single, .optional, .collection, .optional, .optional]
    case .shelf, .member, .boost: [.collection]
    case .post: [.optional]
    case .feed: [.collection, .collection]
    }
  }
}

enum MShape { case single, optional, collection }

struct MKey: Hashable, CustomStringConvertible {
  var kind: MKind
  var id: Int
  var description: String { "\(kind)(\(id))" }
}

/// An occurrence of an entity in a written value: its own fields and its nested occurrences,
/// per nested-entity property, `nil` for an absent optional.
indirect enum MPayload {
  case entity(key: MKey, own: MOwn, slots: [MSlot])

  var key: MKey {
    if case .entity(let key, _, _) = self { return key }
    fatalError()
  }
}

/// One nested-entity property of a payload: a required or optional single, or a collection.
enum MSlot {
  case single(MPayload)
  case optional(MPayload?)
  case collection([MPayload])

  var payloads: [MPayload] {
    switch self {
    case .single(let payload): [payload]
    case .optional(let payload): payload.map { [$0] } ?? []
    case .collection(let payloads): payloads
    }
  }
}

/// An entity's own fields (the ones that are not nested entities).
struct MOwn: Equatable {
  var text: String
  var bio: String?
  var version: Stamp?
}

/// The stored state of one entity.
struct MStored {
  var own: MOwn
  /// Per nested-entity property: the ids of its children, `nil` for an absent optional.
  var slots: [[MKey]?]
  var stamp: Stamp = .nan
  /// Which incarnation of the entity this is: a new one each time the id is created anew (after
  /// a removal, a release or a rollback of its creation), so that a handle on an older one is
  /// told apart.
  var generation = 0
}

/// A holder the test keeps: a handle on an entity, a batch, or an alias.
enum MTarget: Equatable {
  case entity(MKey)
  case batch([MKey])
  case star
  case team
}

struct MHandle {
  var target: MTarget
  /// Which handle this is, for as long as the run lasts: transactions save and restore handles
  /// by it, since holders are dropped in their bodies.
  var id = 0
  /// The incarnation of each entity the handle follows: one for an entity, one per element of
  /// a batch, none for an alias.
  var generations: [Int] = []
  /// For a batch: what it was stored with, which a rollback of the body that stored it gives
  /// back, less what no longer exists.
  var origin: [(key: MKey, generation: Int)] = []
  /// The entity's last value once it was removed; its handle keeps showing it.
  var removedValue: String?
  var isRemoved: Bool { removedValue != nil }
  /// `removedValue` of a handle on an entity that a rollback took out: the contract says it is
  /// removed, not which of its uncommitted values it keeps.
  static let rolledBack = "<rolled back>"

  /// The handle's value, rendered, and whether it reports `isRemoved`.
  let read: () -> (value: String, isRemoved: Bool)
  /// Subscribes, appending each delivered value, rendered.
  let observe: (Locked<[String]>) -> Subscription
  var subscription: Subscription?
  var received = Locked<[String]>([])
  /// What the subscriber was last told (or the value when it subscribed).
  var lastTold: String?
}

extension MHandle {
  /// Keeps the elements of a batch for which `keep` is true, with their incarnations.
  mutating func keepElements(_ keep: (MKey, Int) -> Bool) {
    guard case .batch(let keys) = target else { return }
    let kept = zip(keys, generations).filter { keep($0.0, $0.1) }
    target = .batch(kept.map(\.0))
    generations = kept.map(\.1)
  }
}

/// What a transaction level restores when it throws: the model, and each holder as it was.
struct MLevel {
  let model: MModel
  let handles: [Int: (target: MTarget, generations: [Int], removedValue: String?)]

  init(model: MModel, handles: [MHandle]) {
    self.model = model
    self.handles = Dictionary(
      uniqueKeysWithValues: handles.map { ($0.id, ($0.target, $0.generations, $0.removedValue)) })
  }
}

struct MModel {
  var entities: [MKey: MStored] = [:]
  /// The last incarnation handed out; never rolled back.
  var lastGeneration = 0
  var star: (value: MKey?, stamp: Stamp) = (nil, .nan)
  var team: (value: [MKey]?, stamp: Stamp) = (nil, .nan)
  /// The stamps of removed entities (`TombstonePolicy.default`, never reached here).
  var tombstones: [MKey: Stamp] = [:]

  // MARK: Values

  /// The value of `key` as the map must show it, rendered.
  func render(_ key: MKey) -> String { render(key, path: [key]) }

  private func render(_ key: MKey, path: Set<MKey>) -> String {
    let stored = entities[key]!
    var parts = ["\(key) \(stored.own.text)"]
    if let bio = stored.own.bio { parts.append("bio \(bio)") }
    if let version = stored.own.version { parts.append("v \(version)") }
    for slot in stored.slots {
      guard let children = slot else {
        parts.append("-")
        continue
      }
      parts.append(
        "["
          + children.map { child in
            if path.contains(child) { return cut(child) }
            return render(child, path: path.union([child]))
          }.joined(separator: ", ") + "]")
    }
    return "{" + parts.joined(separator: " ") + "}"
  }

  /// A repeated occurrence inside a cycle: own fields, nested entities removed.
  private func cut(_ key: MKey) -> String {
    let stored = entities[key]!
    return "{\(key) \(stored.own.text) [cut]}".replacingOccurrences(of: "[cut]", with: "[]")
  }

  func render(_ target: MTarget) -> String {
    switch target {
    case .entity(let key): return render(key)
    case .batch(let keys): return "[" + keys.map { render($0) }.joined(separator: ", ") + "]"
    case .star: return star.value.map { render($0) } ?? "nil"
    case .team:
      return team.value.map { "[" + $0.map { render($0) }.joined(separator: ", ") + "]" } ?? "nil"
    }
  }

  // MARK: Stamps

  /// Whether a write stamped `incoming` may replace a value stamped `stored`.
  static func admits(_ stored: Stamp, _ incoming: Stamp?) -> Bool {
    guard let incoming, !stored.isNaN else { return true }
    return incoming > stored
  }
}

extension MModel {
  // MARK: Writes

  /// One occurrence met by the claims walk of a write.
  private struct Occurrence {
    var payload: MPayload
    var depth: Int
    var stamp: Stamp?
    var accepted: Bool
    var quiet: Bool
  }

  /// The stamp an occurrence carries: its own when it is a stamped `Rev` with one, the call's
  /// otherwise.
  static func stamp(of payload: MPayload, call: Stamp?) -> Stamp? {
    guard case .entity(let key, let own, _) = payload, key.kind == .rev, let version = own.version
    else { return call }
    return version
  }

  static func slotKeys(_ slots: [MSlot]) -> [[MKey]?] {
    slots.map { slot in
      switch slot {
      case .single(let payload): [payload.key]
      case .optional(let payload): payload.map { [$0.key] }
      case .collection(let payloads): payloads.map(\.key)
      }
    }
  }

  static func merged(_ incoming: MOwn, into stored: MOwn?, kind: MKind) -> MOwn {
    guard kind.isMergeable, let stored else { return incoming }
    var merged = incoming
    if merged.bio == nil { merged.bio = stored.bio }
    return merged
  }

  /// `incoming` merged into `stored` (a user: its `bio`; a post: its flag, kept in `bio`, and
  /// its author), or `incoming` when nothing is stored.
  static func merged(_ incoming: MPayload, into stored: MPayload?) -> MPayload {
    guard case .entity(let key, let own, var slots) = incoming,
      case .entity(_, let storedOwn, let storedSlots)? = stored
    else { return incoming }
    if key.kind == .post, case .optional(nil) = slots[0] { slots[0] = storedSlots[0] }
    return .entity(key: key, own: merged(own, into: storedOwn, kind: key.kind), slots: slots)
  }

  /// Whether an occurrence stamped `stamp` at `depth` takes its entity from the winner so far:
  /// the newer stamp wins; between equal stamps, or when either has none, the shallower one,
  /// then the later one.
  private func displaces(_ stamp: Stamp?, depth: Int, _ winner: Occurrence) -> Bool {
    if let stamp, let other = winner.stamp, stamp != other, !stamp.isNaN, !other.isNaN {
      return stamp > other
    }
    return winner.depth >= depth
  }

  /// Writes `roots`, met at `depth`, as one pass: the claims, then the apply. Returns the
  /// entities it did not create because their tombstones refused them: the caller removes
  /// them, with what cannot exist without them, as the map does when the pass ends.
  @discardableResult
  mutating func write(_ roots: [MPayload], depth startDepth: Int, call: Stamp?, mergeFromDepth: Int)
    -> [MKey]
  {
    // A Mergeable aggregate (a post) is expanded from every accepted occurrence of it merged,
    // losers first, winner last: walk the claims again, each time expanding each post's winner
    // from the merge of what the last walk met, until that no longer changes.
    var expansions: [MKey: MPayload] = [:]
    var walk = claims(roots, depth: startDepth, call: call, expanding: expansions)
    for _ in 0..<4 {
      var next: [MKey: MPayload] = [:]
      for (key, index) in walk.winner
      where key.kind == .post && walk.occurrences[index].depth >= mergeFromDepth {
        if let folded = fold(key, winner: index, walk) { next[key] = folded.payload }
      }
      let describe = { (payloads: [MKey: MPayload]) in
        payloads.sorted { $0.key.id < $1.key.id }.map { MValues.describe($0.value) }
      }
      if describe(next) == describe(expansions) { break }
      expansions = next
      walk = claims(roots, depth: startDepth, call: call, expanding: expansions)
    }
    // Every accepted occurrence of a Mergeable entity merges into the stored value, losers
    // first, winner last: folded before anything changes.
    var folds: [MKey: (payload: MPayload, stamp: Stamp?)] = [:]
    for (key, index) in walk.winner
    where key.kind.isMergeable && walk.occurrences[index].depth >= mergeFromDepth {
      folds[key] = fold(key, winner: index, walk)
    }
    var refused: [MKey] = []
    for (key, index) in walk.winner.sorted(by: { $0.value < $1.value }) {
      var payload = walk.occurrences[index].payload
      var stamp = walk.occurrences[index].stamp
      var accepted = walk.occurrences[index].accepted
      if let folded = folds[key] {
        payload = folded.payload
        stamp = folded.stamp
        accepted = true
      }
      guard case .entity(_, let own, let slots) = payload else { continue }
      guard accepted else {
        if entities[key] == nil { refused.append(key) }
        continue
      }
      if entities[key] == nil { tombstones[key] = nil }
      var stored = MStored(own: own, slots: Self.slotKeys(slots))
      stored.stamp = entities[key]?.stamp ?? .nan
      if let existing = entities[key] {
        stored.generation = existing.generation
      } else {
        lastGeneration += 1
        stored.generation = lastGeneration
      }
      if let stamp, !stamp.isNaN { stored.stamp = stamp }
      entities[key] = stored
    }
    return refused
  }

  /// One claim walk of a write: every occurrence met, breadth-first, each entity's winner,
  /// and each entity's occurrences in the order met.
  private struct Walk {
    var occurrences: [Occurrence] = []
    var winner: [MKey: Int] = [:]
    var chains: [MKey: [Int]] = [:]
  }

  /// The claims of `roots`, met at `depth`: the newest stamp wins, then the shallowest, then
  /// the last; losers are not expanded; a post's winner is expanded from `expanding[key]`
  /// when there is one.
  private func claims(
    _ roots: [MPayload], depth startDepth: Int, call: Stamp?, expanding: [MKey: MPayload]
  ) -> Walk {
    var walk = Walk()
    // Entities an occurrence brought back past their tombstones: the later ones find none.
    var revived: Set<MKey> = []
    var level = roots
    var depth = startDepth
    while !level.isEmpty {
      var met: [Int] = []
      for payload in level {
        let key = payload.key
        let stamp = Self.stamp(of: payload, call: call)
        let loses =
          walk.winner[key].map { !displaces(stamp, depth: depth, walk.occurrences[$0]) } ?? false
        // An occurrence that loses is dropped; a Mergeable one is kept to be merged.
        if loses && !key.kind.isMergeable { continue }
        let (accepted, quiet) = verdict(payload, stamp: stamp, revived: &revived)
        walk.occurrences.append(
          Occurrence(payload: payload, depth: depth, stamp: stamp, accepted: accepted, quiet: quiet)
        )
        let index = walk.occurrences.count - 1
        walk.chains[key, default: []].append(index)
        if loses { continue }
        walk.winner[key] = index
        met.append(index)
      }
      var next: [MPayload] = []
      for index in met where walk.winner[walk.occurrences[index].payload.key] == index {
        let payload = walk.occurrences[index].payload
        guard case .entity(_, _, let slots) = expanding[payload.key] ?? payload else { continue }
        for slot in slots { next += slot.payloads }
      }
      level = next
      depth += 1
    }
    return walk
  }

  /// The stored value of `key` (none for a new entity) with every accepted occurrence of the
  /// walk merged into it, the losers in the order met, the winner (`winner`) last, and the
  /// newest stamp among them; `nil` when none is accepted.
  private func fold(_ key: MKey, winner: Int, _ walk: Walk) -> (payload: MPayload, stamp: Stamp?)? {
    var folded: MPayload? = entities[key] == nil ? nil : payload(of: key)
    var any = false
    var newest: Stamp?
    for other in walk.chains[key]!.filter({ $0 != winner }).sorted() + [winner]
    where walk.occurrences[other].accepted {
      folded = Self.merged(walk.occurrences[other].payload, into: folded)
      any = true
      if let otherStamp = walk.occurrences[other].stamp, !otherStamp.isNaN {
        newest = max(newest ?? otherStamp, otherStamp)
      }
    }
    return any ? (folded!, newest) : nil
  }

  /// Whether an occurrence applies, and if not, whether it is a quiet no-op (its stamp equals
  /// the stored one and its value, merged, is the stored one) rather than a stale write.
  private func verdict(_ payload: MPayload, stamp: Stamp?, revived: inout Set<MKey>) -> (
    accepted: Bool, quiet: Bool
  ) {
    guard case .entity(let key, let own, let slots) = payload, let stored = entities[key] else {
      // A removed entity's tombstone refuses a stamped write no newer than the removal.
      guard let tomb = tombstones[payload.key], !revived.contains(payload.key) else {
        return (true, false)
      }
      let accepted = stamp.map { $0 > tomb } ?? true
      if accepted { revived.insert(payload.key) }
      return (accepted, false)
    }
    if Self.admits(stored.stamp, stamp) { return (true, false) }
    // An older stamp is stale whatever the value: only an equal one is compared (merged first).
    guard stamp == stored.stamp else { return (false, false) }
    let merged = Self.merged(own, into: stored.own, kind: key.kind)
    return (false, merged == stored.own && Self.slotKeys(slots) == stored.slots)
  }

  // MARK: Removal

  /// Removes `keys` and whatever cannot exist without them; returns every removed key with its
  /// last value. Each removed entity with a stamp leaves a tombstone, but for `keys` when not
  /// `entombing`: those a tombstone refused, which the map never stored (`write`).
  mutating func remove(_ keys: [MKey], entombing: Bool = true) -> [MKey: String] {
    var removed: [MKey] = []
    var queue = entombing ? keys.filter { entities[$0] != nil } : keys
    let spared = entombing ? [] : Set(keys)
    while let key = queue.popLast() {
      guard !removed.contains(key) else { continue }
      removed.append(key)
      for (parent, stored) in entities where !removed.contains(parent) {
        // A book cannot exist without its author, its first nested entity.
        if parent.kind == .book, stored.slots[0]?.contains(key) == true { queue.append(parent) }
      }
    }
    var last: [MKey: String] = [:]
    for key in removed where entities[key] != nil {
      // A parent of an entity a tombstone refused shows that entity as written, which the
      // model does not keep: the contract says only that the parent is removed.
      last[key] = rendersStored(key, path: [key]) ? render(key) : MHandle.rolledBack
    }
    for key in removed {
      if !spared.contains(key), let stamp = entities[key]?.stamp, !stamp.isNaN {
        tombstones[key] = stamp
      }
      entities[key] = nil
    }
    for parent in Array(entities.keys) {
      let shapes = parent.kind.shapes
      entities[parent]!.slots = entities[parent]!.slots.enumerated().map { index, slot in
        guard let slot else { return nil }
        let kept = slot.filter { !removed.contains($0) }
        // An optional that lost its entity becomes nil; a collection drops it.
        return shapes[index] == .optional && kept.isEmpty ? nil : kept
      }
    }
    if let value = star.value, removed.contains(value) { star = (nil, .nan) }
    if let value = team.value { team.value = value.filter { !removed.contains($0) } }
    return last
  }

  /// Whether every entity `key` nests, at any depth, is stored.
  private func rendersStored(_ key: MKey, path: Set<MKey>) -> Bool {
    guard let stored = entities[key] else { return false }
    return stored.slots.allSatisfy { slot in
      (slot ?? []).allSatisfy { path.contains($0) || rendersStored($0, path: path.union([$0])) }
    }
  }

  // MARK: Lifetime

  /// Releases every entity nothing holds: not reachable from `roots` through nested entities.
  mutating func release(roots: [MKey]) {
    var reached: Set<MKey> = []
    var stack = roots + (star.value.map { [$0] } ?? []) + (team.value ?? [])
    while let key = stack.popLast() {
      guard entities[key] != nil, reached.insert(key).inserted else { continue }
      for slot in entities[key]!.slots { stack += slot ?? [] }
    }
    for key in Array(entities.keys) where !reached.contains(key) { entities[key] = nil }
  }
}

extension MModel {
  /// The stored value of `key` as a payload, the way `update` hands it to its body: nested
  /// entities show their stored values, cut inside a cycle.
  func payload(of key: MKey) -> MPayload { payload(of: key, path: [key]) }

  private func payload(of key: MKey, path: Set<MKey>) -> MPayload {
    let stored = entities[key]!
    let slots = zip(key.kind.shapes, stored.slots).map { shape, children -> MSlot in
      let payloads = (children ?? []).map { child -> MPayload in
        if path.contains(child) {
          // A cut occurrence: own fields, nested entities removed.
          let cut = entities[child]!
          return .entity(
            key: child, own: cut.own,
            slots: child.kind.shapes.map { $0 == .optional ? .optional(nil) : .collection([]) })
        }
        return payload(of: child, path: path.union([child]))
      }
      switch shape {
      case .single: return .single(payloads[0])
      case .optional: return .optional(payloads.first)
      case .collection: return .collection(payloads)
      }
    }
    return .entity(key: key, own: stored.own, slots: slots)
  }
}

// MARK: Between the model and the map

/// SplitMix64: a small, seedable generator.
struct MRandom: RandomNumberGenerator {
  var state: UInt64

  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }

  mutating func int(_ range: Range<Int>) -> Int {
    range.lowerBound + Int(next() % UInt64(range.count))
  }

  mutating func chance(_ probability: Double) -> Bool {
    Double(next() % 10_000) < probability * 10_000
  }

  mutating func pick<T>(_ choices: [T]) -> T { choices[int(0..<choices.count)] }
}

enum MValues {
  // Payloads, random.

  static func own(_ kind: MKind, _ random: inout MRandom) -> MOwn {
    let text = random.pick(["a", "b", "c"])
    switch kind {
    case .user, .post:
      return MOwn(text: text, bio: random.chance(0.5) ? nil : random.pick(["x", "y"]))
    case .rev: return MOwn(text: text, version: random.chance(0.4) ? nil : Stamp(random.int(1..<6)))
    default: return MOwn(text: text)
    }
  }

  static func payload(_ kind: MKind, _ random: inout MRandom, depth: Int = 0) -> MPayload {
    let key = MKey(kind: kind, id: random.int(kind.ids))
    let own = own(kind, &random)
    var slots: [MSlot] = []
    switch kind {
    case .leaf, .user, .rev: break
    case .book:
      slots = [
        .single(payload(.leaf, &random)),
        .optional(random.chance(0.5) ? payload(.leaf, &random) : nil),
        .collection((0..<random.int(0..<3)).map { _ in payload(.leaf, &random) }),
        .optional(random.chance(0.5) ? payload(.user, &random) : nil),
        .optional(random.chance(0.4) ? payload(.rev, &random) : nil),
      ]
    case .shelf:
      slots = [.collection((0..<random.int(0..<3)).map { _ in payload(.book, &random) })]
    case .member:
      let friends = depth < 2 ? random.int(0..<3) : 0
      slots = [
        .collection((0..<friends).map { _ in payload(.member, &random, depth: depth + 1) })
      ]
    case .post:
      slots = [.optional(random.chance(0.5) ? payload(.user, &random) : nil)]
    case .boost:
      slots = [.collection((0..<random.int(0..<3)).map { _ in payload(.post, &random) })]
    case .feed:
      slots = [
        .collection((0..<random.int(0..<4)).map { _ in payload(.post, &random) }),
        .collection((0..<random.int(0..<3)).map { _ in payload(.boost, &random) }),
      ]
    }
    return .entity(key: key, own: own, slots: slots)
  }

  /// A payload, for the history.
  static func describe(_ payload: MPayload) -> String {
    guard case .entity(let key, let own, let slots) = payload else { return "" }
    let fields =
      [own.text] + (own.bio.map { ["bio \($0)"] } ?? []) + (own.version.map { ["v \($0)"] } ?? [])
    let nested = slots.map { "[" + $0.payloads.map(describe).joined(separator: ",") + "]" }
    return "\(key)(" + (fields + nested).joined(separator: " ") + ")"
  }

  // Payloads as the map's values.

  static func leaf(_ payload: MPayload) -> MLeaf {
    guard case .entity(let key, let own, _) = payload else { fatalError() }
    return MLeaf(id: key.id, name: own.text)
  }

  static func user(_ payload: MPayload) -> MUser {
    guard case .entity(let key, let own, _) = payload else { fatalError() }
    return MUser(id: key.id, name: own.text, bio: own.bio)
  }

  static func rev(_ payload: MPayload) -> MRev {
    guard case .entity(let key, let own, _) = payload else { fatalError() }
    return MRev(id: key.id, text: own.text, version: own.version)
  }

  static func book(_ payload: MPayload) -> MBook {
    guard case .entity(let key, let own, let slots) = payload else { fatalError() }
    return MBook(
      id: key.id, title: own.text, author: leaf(slots[0].payloads[0]),
      editor: slots[1].payloads.first.map(leaf), tags: slots[2].payloads.map(leaf),
      reviewer: slots[3].payloads.first.map(user), rev: slots[4].payloads.first.map(rev))
  }

  static func shelf(_ payload: MPayload) -> MShelf {
    guard case .entity(let key, let own, let slots) = payload else { fatalError() }
    return MShelf(id: key.id, label: own.text, books: slots[0].payloads.map(book))
  }

  static func post(_ payload: MPayload) -> MPost {
    guard case .entity(let key, let own, let slots) = payload else { fatalError() }
    return MPost(
      id: key.id, text: own.text, flag: own.bio, author: slots[0].payloads.first.map(user))
  }

  static func boost(_ payload: MPayload) -> MBoost {
    guard case .entity(let key, let own, let slots) = payload else { fatalError() }
    return MBoost(id: key.id, text: own.text, posts: slots[0].payloads.map(post))
  }

  static func feed(_ payload: MPayload) -> MFeed {
    guard case .entity(let key, let own, let slots) = payload else { fatalError() }
    return MFeed(
      id: key.id, text: own.text, posts: slots[0].payloads.map(post),
      boosts: slots[1].payloads.map(boost))
  }

  static func member(_ payload: MPayload) -> MMember {
    guard case .entity(let key, let own, let slots) = payload else { fatalError() }
    return MMember(id: key.id, name: own.text, friends: slots[0].payloads.map(member))
  }

  // The map's values, rendered as the model renders its own.

  static func render(_ leaf: MLeaf) -> String { "{Leaf(\(leaf.id)) \(leaf.name)}" }

  static func render(_ user: MUser) -> String {
    "{User(\(user.id)) \(user.name)" + (user.bio.map { " bio \($0)" } ?? "") + "}"
  }

  static func render(_ rev: MRev) -> String {
    "{Rev(\(rev.id)) \(rev.text)" + (rev.version.map { " v \($0)" } ?? "") + "}"
  }

  static func render(_ book: MBook) -> String {
    "{Book(\(book.id)) \(book.title) [\(render(book.author))] "
      + (book.editor.map { "[\(render($0))]" } ?? "-") + " ["
      + book.tags.map(render).joined(separator: ", ") + "] "
      + (book.reviewer.map { "[\(render($0))]" } ?? "-") + " "
      + (book.rev.map { "[\(render($0))]" } ?? "-") + "}"
  }

  static func render(_ shelf: MShelf) -> String {
    "{Shelf(\(shelf.id)) \(shelf.label) [" + shelf.books.map(render).joined(separator: ", ") + "]}"
  }

  static func render(_ post: MPost) -> String {
    "{Post(\(post.id)) \(post.text)" + (post.flag.map { " bio \($0)" } ?? "") + " "
      + (post.author.map { "[\(render($0))]" } ?? "-") + "}"
  }

  static func render(_ boost: MBoost) -> String {
    "{Boost(\(boost.id)) \(boost.text) [" + boost.posts.map(render).joined(separator: ", ") + "]}"
  }

  static func render(_ feed: MFeed) -> String {
    "{Feed(\(feed.id)) \(feed.text) [" + feed.posts.map(render).joined(separator: ", ") + "] ["
      + feed.boosts.map(render).joined(separator: ", ") + "]}"
  }

  static func render(_ member: MMember) -> String {
    "{Member(\(member.id)) \(member.name) ["
      + member.friends.map(render).joined(separator: ", ") + "]}"
  }

  static func render(_ values: [MLeaf]) -> String {
    "[" + values.map(render).joined(separator: ", ") + "]"
  }
}

// MARK: The run

struct MThrown: Error {}

/// One map, its model, the holders the test keeps, and what happened last.
final class ModelRun {
  let map = IdentityMap()
  var model = MModel()
  var random: MRandom
  var handles: [MHandle] = []
  var history: [String] = []
  let seed: UInt64
  var step = 0
  var failed = false
  /// The last `MHandle.id` handed out.
  var lastHandleID = 0
  /// The state when the outermost transaction under way began: what a subscription opened
  /// in its body is told against at commit.
  var writeStart: MLevel?

  init(seed: UInt64) {
    self.seed = seed
    random = MRandom(state: seed)
  }

  func note(_ text: String) {
    if ProcessInfo.processInfo.environment["CONCORD_TRACE"] != nil {
      print("TRACE \(seed) \(step): \(text)")
    }
    history.append("\(step): \(text)")
    if history.count > 24 { history.removeFirst() }
  }

  func stamp() -> Stamp? {
    switch random.int(0..<20) {
    case 0..<8: nil
    case 8: .nan
    default: Stamp(random.int(1..<7))
    }
  }

  func describe(_ stamp: Stamp?) -> String { stamp.map { "stamped \($0)" } ?? "unstamped" }

  // MARK: Handles

  func entityHandle(_ key: MKey) -> MHandle? {
    switch key.kind {
    case .leaf: map.find(MLeaf.self, id: key.id).map { entity(key, $0, MValues.render) }
    case .user: map.find(MUser.self, id: key.id).map { entity(key, $0, MValues.render) }
    case .rev: map.find(MRev.self, id: key.id).map { entity(key, $0, MValues.render) }
    case .book: map.find(MBook.self, id: key.id).map { entity(key, $0, MValues.render) }
    case .shelf: map.find(MShelf.self, id: key.id).map { entity(key, $0, MValues.render) }
    case .member: map.find(MMember.self, id: key.id).map { entity(key, $0, MValues.render) }
    case .post: map.find(MPost.self, id: key.id).map { entity(key, $0, MValues.render) }
    case .boost: map.find(MBoost.self, id: key.id).map { entity(key, $0, MValues.render) }
    case .feed: map.find(MFeed.self, id: key.id).map { entity(key, $0, MValues.render) }
    }
  }

  func entity<T: Identifiable & Sendable>(
    _ key: MKey, _ observer: EntityObserver<T>, _ render: @escaping @Sendable (T) -> String
  ) -> MHandle {
    MHandle(
      target: .entity(key), removedValue: nil,
      read: { (render(observer.value), observer.isRemoved) },
      observe: { told in observer.observe { told.append(render($0)) } })
  }

  /// The map's find of `key`, rendered; `nil` when it finds nothing.
  func found(_ key: MKey) -> String? {
    guard let handle = entityHandle(key) else { return nil }
    return handle.read().value
  }
}

extension ModelRun {
  // MARK: Writes, on both sides

  /// Stores a random entity of `kind`; returns a handle on it.
  @discardableResult
  func storeEntity(_ kind: MKind, in transaction: IdentityMap.Transaction? = nil) -> MHandle {
    let payload = pagePayload(kind)
    let stamp = stamp()
    let key = payload.key
    note("store \(MValues.describe(payload)) \(describe(stamp))")
    var handle: MHandle
    // The value as written, rendered: what the handle keeps when a tombstone refuses it.
    var written = ""
    func store<T: Identifiable & Sendable>(
      _ value: T, _ render: @escaping @Sendable (T) -> String
    ) -> MHandle {
      let observer =
        transaction?.store(value, modifiedAt: stamp) ?? map.store(value, modifiedAt: stamp)
      written = render(value)
      return entity(key, observer, render)
    }
    switch kind {
    case .leaf: handle = store(MValues.leaf(payload), MValues.render)
    case .user: handle = store(MValues.user(payload), MValues.render)
    case .rev: handle = store(MValues.rev(payload), MValues.render)
    case .book: handle = store(book(payload), MValues.render)
    case .shelf: handle = store(shelf(payload), MValues.render)
    case .member: handle = store(MValues.member(payload), MValues.render)
    case .post: handle = store(post(payload), MValues.render)
    case .boost: handle = store(boost(payload), MValues.render)
    case .feed: handle = store(feed(payload), MValues.render)
    }
    let refused = model.write([payload], depth: 0, call: stamp, mergeFromDepth: 0)
    modelRemove(refused, entombing: false)
    if refused.contains(key) {
      handle.removedValue = written
    } else if model.entities[key] == nil {
      // Removed with a nested entity a tombstone refused: its last value nests that entity as
      // written, which the model does not keep.
      handle.removedValue = MHandle.rolledBack
    }
    return handle
  }

  /// Stores a batch of leaves, books or posts, which may repeat an entity, some as stored;
  /// returns the batch handle.
  func storeBatch(in transaction: IdentityMap.Transaction? = nil) -> MHandle {
    let kind = random.pick([MKind.leaf, .book, .post])
    var payloads = (0..<random.int(0..<4)).map { _ in pagePayload(kind) }
    // Now and then an entity twice: the second copy as stored, or the first.
    if let first = payloads.first, random.chance(0.3) {
      payloads.insert(first, at: random.int(0..<(payloads.count + 1)))
    }
    let stamp = stamp()
    note("store batch \(payloads.map(MValues.describe)) \(describe(stamp))")
    // NB: the values first: one as stored is read from the map before the write.
    let leaves = kind == .leaf ? payloads.map(MValues.leaf) : []
    let books = kind == .book ? payloads.map(book) : []
    let posts = kind == .post ? payloads.map(post) : []
    let refused = model.write(payloads, depth: 1, call: stamp, mergeFromDepth: 1)
    modelRemove(refused, entombing: false)
    // Every position of an id shows the last occurrence's entity: positions are ids. The batch
    // drops what a tombstone refused, and what went with it.
    let target = MTarget.batch(payloads.map(\.key).filter { model.entities[$0] != nil })
    func batch<T: Identifiable & Sendable>(
      _ values: [T], _ render: @escaping @Sendable (T) -> String
    ) -> MHandle {
      let observer =
        transaction?.store(values, modifiedAt: stamp) ?? map.store(values, modifiedAt: stamp)
      let renderAll: @Sendable ([T]) -> String = {
        "[" + $0.map(render).joined(separator: ", ") + "]"
      }
      return MHandle(
        target: target, read: { (renderAll(observer.value), false) },
        observe: { told in observer.observe { told.append(renderAll($0)) } })
    }
    switch kind {
    case .leaf: return batch(leaves, MValues.render)
    case .book: return batch(books, MValues.render)
    default: return batch(posts, MValues.render)
    }
  }

  // MARK: Pages fetched again

  /// A random payload of `kind`; for an aggregate, now and then the one the model stores: a
  /// page fetched again holds entities as they are stored.
  func pagePayload(_ kind: MKind) -> MPayload {
    if kind != .leaf && kind != .member && random.chance(0.3) {
      let stored = model.entities.keys.filter { $0.kind == kind }.sorted { $0.id < $1.id }
      if !stored.isEmpty { return model.payload(of: random.pick(stored)) }
    }
    switch kind {
    case .boost:
      return .entity(
        key: MKey(kind: .boost, id: random.int(MKind.boost.ids)), own: MValues.own(.boost, &random),
        slots: [.collection((0..<random.int(0..<3)).map { _ in pagePayload(.post) })])
    case .feed:
      return .entity(
        key: MKey(kind: .feed, id: random.int(MKind.feed.ids)), own: MValues.own(.feed, &random),
        slots: [
          .collection((0..<random.int(0..<4)).map { _ in pagePayload(.post) }),
          .collection((0..<random.int(0..<3)).map { _ in pagePayload(.boost) }),
        ])
    default:
      return MValues.payload(kind, &random)
    }
  }

  /// The map's own value of the entity of `payload` when `payload` is what the model stores:
  /// bit for bit as stored, which the pass does not expand. `nil` otherwise.
  func asStored<T: Identifiable & Sendable>(_: T.Type, _ payload: MPayload) -> T?
  where T.ID == Int {
    let key = payload.key
    guard model.entities[key] != nil,
      MValues.describe(payload) == MValues.describe(model.payload(of: key))
    else { return nil }
    return map.find(T.self, id: key.id)?.value
  }

  func book(_ payload: MPayload) -> MBook { asStored(MBook.self, payload) ?? MValues.book(payload) }

  func post(_ payload: MPayload) -> MPost { asStored(MPost.self, payload) ?? MValues.post(payload) }

  func shelf(_ payload: MPayload) -> MShelf {
    if let stored = asStored(MShelf.self, payload) { return stored }
    guard case .entity(let key, let own, let slots) = payload else { fatalError() }
    return MShelf(id: key.id, label: own.text, books: slots[0].payloads.map(book))
  }

  func boost(_ payload: MPayload) -> MBoost {
    if let stored = asStored(MBoost.self, payload) { return stored }
    guard case .entity(let key, let own, let slots) = payload else { fatalError() }
    return MBoost(id: key.id, text: own.text, posts: slots[0].payloads.map(post))
  }

  func feed(_ payload: MPayload) -> MFeed {
    if let stored = asStored(MFeed.self, payload) { return stored }
    guard case .entity(let key, let own, let slots) = payload else { fatalError() }
    return MFeed(
      id: key.id, text: own.text, posts: slots[0].payloads.map(post),
      boosts: slots[1].payloads.map(boost))
  }

  /// Renames a leaf with `update`.
  func updateLeaf(in transaction: IdentityMap.Transaction? = nil) {
    let key = MKey(kind: .leaf, id: random.int(MKind.leaf.ids))
    let name = random.pick(["a", "b", "c", "d"])
    let stamp = stamp()
    note("update \(key) → \(name) \(describe(stamp))")
    let body: (inout MLeaf) -> Void = { $0.name = name }
    let found =
      transaction?.update(MLeaf.self, id: key.id, modifiedAt: stamp, body)
      ?? map.update(MLeaf.self, id: key.id, modifiedAt: stamp, body)
    guard let stored = model.entities[key] else {
      expect(!found, "update of an absent \(key) returned true")
      return
    }
    expect(found, "update of \(key) returned false")
    guard MModel.admits(stored.stamp, stamp) else { return }
    var payloadOwn = stored.own
    payloadOwn.text = name
    model.write(
      [.entity(key: key, own: payloadOwn, slots: [])], depth: 0, call: stamp, mergeFromDepth: 1)
  }

  /// Retitles a book, or sets its editor, with `update`, stamped or not: the body starts from
  /// the stored value, nested entities included, and the editor it sets may be a removed
  /// leaf, whose tombstone refuses it as `store` would.
  func updateBook() {
    let key = MKey(kind: .book, id: random.int(MKind.book.ids))
    let title = random.pick(["a", "b", "c", "d"])
    var editor = random.chance(0.6) ? MValues.payload(.leaf, &random) : nil
    let tombstoned = model.tombstones.keys.filter { $0.kind == .leaf }.sorted { $0.id < $1.id }
    if editor != nil, !tombstoned.isEmpty, random.chance(0.7) {
      editor = .entity(key: random.pick(tombstoned), own: MValues.own(.leaf, &random), slots: [])
    }
    let stamp = stamp()
    note(
      "update \(key) → title \(title), editor \(editor.map(MValues.describe) ?? "kept") "
        + describe(stamp))
    let found = map.update(MBook.self, id: key.id, modifiedAt: stamp) { book in
      book.title = title
      if let editor { book.editor = MValues.leaf(editor) }
    }
    guard let stored = model.entities[key] else {
      expect(!found, "update of an absent \(key) returned true")
      return
    }
    expect(found, "update of \(key) returned false")
    // A stale call stamp is refused before the body runs; an equal one runs it.
    guard MModel.admits(stored.stamp, stamp) || stamp == stored.stamp else { return }
    guard case .entity(_, var own, var slots) = model.payload(of: key) else { return }
    own.text = title
    if let editor { slots[1] = .optional(editor) }
    let refused = model.write(
      [.entity(key: key, own: own, slots: slots)], depth: 0, call: stamp, mergeFromDepth: 1)
    modelRemove(refused, entombing: false)
  }

  /// Adds a leaf to the team through `update(named:)`, stamped newer than the slot: the leaf
  /// takes the call's stamp, and may be a removed one whose tombstone refuses it.
  func updateTeam() {
    var leaf = MValues.payload(.leaf, &random)
    let tombstoned = model.tombstones.keys.filter { $0.kind == .leaf }.sorted { $0.id < $1.id }
    if !tombstoned.isEmpty, random.chance(0.5) {
      leaf = .entity(key: random.pick(tombstoned), own: MValues.own(.leaf, &random), slots: [])
    }
    let slotStamp = model.team.stamp
    let stamp = slotStamp.isNaN ? Stamp(random.int(1..<7)) : slotStamp + 1
    note("update team += \(MValues.describe(leaf)) \(describe(stamp))")
    let found = map.update(named: AliasKey<[MLeaf]>.modelTeam, modifiedAt: stamp) {
      $0.append(MValues.leaf(leaf))
    }
    guard let keys = model.team.value else {
      expect(!found, "update of an unset alias returned true")
      return
    }
    expect(found, "update of a set alias returned false")
    let payloads = keys.map { model.payload(of: $0) } + [leaf]
    // The alias's own entities do not merge (none of them is Mergeable here).
    let refused = model.write(payloads, depth: 1, call: stamp, mergeFromDepth: 2)
    model.team = (payloads.map(\.key), stamp)
    modelRemove(refused, entombing: false)
  }

  /// Removes an entity with a tombstone, whether or not the map has it: a stream's `delete`.
  func removeWithTombstone(in transaction: IdentityMap.Transaction? = nil) {
    let kind = random.pick(MKind.allCases)
    let key = MKey(kind: kind, id: random.int(kind.ids))
    let floor = random.chance(0.1) ? Stamp.nan : Stamp(random.int(1..<8))
    note("remove \(key) with tombstone \(floor)")
    func remove<T: Identifiable & Sendable>(_ type: T.Type, _ id: T.ID) {
      if let transaction {
        transaction.remove(type, id: id, tombstone: floor)
      } else {
        map.remove(type, id: id, tombstone: floor)
      }
    }
    switch kind {
    case .leaf: remove(MLeaf.self, key.id)
    case .user: remove(MUser.self, key.id)
    case .rev: remove(MRev.self, key.id)
    case .book: remove(MBook.self, key.id)
    case .shelf: remove(MShelf.self, key.id)
    case .member: remove(MMember.self, key.id)
    case .post: remove(MPost.self, key.id)
    case .boost: remove(MBoost.self, key.id)
    case .feed: remove(MFeed.self, key.id)
    }
    modelRemove([key])
    // The tombstone is the larger of the given stamp and the one the entity left, if any.
    if !floor.isNaN, !(model.tombstones[key].map { $0 >= floor } ?? false) {
      model.tombstones[key] = floor
    }
  }

  /// Reads the leaves as the transaction sees them, sorted, and compares with the model.
  func snapshotLeaves(_ transaction: IdentityMap.Transaction) {
    let named = random.pick(["a", "b"])
    note("entities of Leaf named \(named)")
    let seen = transaction.entities(
      MLeaf.self, filter: { $0.name == named }, sortedBy: { $0.id < $1.id }
    ).map(MValues.render)
    let expected = model.entities.keys.filter { $0.kind == .leaf }.sorted { $0.id < $1.id }
      .filter { model.entities[$0]!.own.text == named }.map { model.render($0) }
    expect(seen == expected, "the transaction's leaves are \(seen), the model says \(expected)")
  }

  /// Makes a member's friends the stored values of other members, which can close cycles.
  func updateMember() {
    let key = MKey(kind: .member, id: random.int(MKind.member.ids))
    let friends = (0..<random.int(0..<3)).map { _ in
      MKey(kind: .member, id: random.int(MKind.member.ids))
    }
    .filter { model.entities[$0] != nil }
    note("update \(key) → friends \(friends)")
    let values = friends.map { map.find(MMember.self, id: $0.id)!.value }
    let found = map.update(MMember.self, id: key.id) { $0.friends = values }
    guard model.entities[key] != nil else {
      expect(!found, "update of an absent \(key) returned true")
      return
    }
    expect(found, "update of \(key) returned false")
    guard case .entity(_, let own, _) = model.payload(of: key) else { return }
    let slots: [MSlot] = [.collection(friends.map { model.payload(of: $0) })]
    model.write([.entity(key: key, own: own, slots: slots)], depth: 0, call: nil, mergeFromDepth: 1)
  }

  func remove(in transaction: IdentityMap.Transaction? = nil) {
    let kind = random.pick(MKind.allCases)
    let key = MKey(kind: kind, id: random.int(kind.ids))
    note("remove \(key)")
    func remove<T: Identifiable & Sendable>(_ type: T.Type, _ id: T.ID) {
      if let transaction { transaction.remove(type, id: id) } else { map.remove(type, id: id) }
    }
    switch kind {
    case .leaf: remove(MLeaf.self, key.id)
    case .user: remove(MUser.self, key.id)
    case .rev: remove(MRev.self, key.id)
    case .book: remove(MBook.self, key.id)
    case .shelf: remove(MShelf.self, key.id)
    case .member: remove(MMember.self, key.id)
    case .post: remove(MPost.self, key.id)
    case .boost: remove(MBoost.self, key.id)
    case .feed: remove(MFeed.self, key.id)
    }
    modelRemove([key])
  }

  func removeAll() {
    note("removeAll")
    map.removeAll()
    modelRemove(Array(model.entities.keys))
    model.tombstones = [:]
    model.star = (nil, .nan)
    model.team = (nil, .nan)
  }

  /// Removes `keys` from the model, and records the last values their handles keep; see
  /// `MModel.remove(_:entombing:)`.
  func modelRemove(_ keys: [MKey], entombing: Bool = true) {
    guard entombing || !keys.isEmpty else { return }
    let last = model.remove(keys, entombing: entombing)
    for index in handles.indices {
      switch handles[index].target {
      case .entity(let key):
        if handles[index].removedValue == nil, let value = last[key] {
          handles[index].removedValue = value
        }
      case .batch:
        handles[index].keepElements { key, _ in last[key] == nil }
      case .star, .team:
        break
      }
    }
  }

  func setStar(in transaction: IdentityMap.Transaction? = nil) {
    let payload = MValues.payload(.leaf, &random)
    let stamp = stamp()
    note("star = \(MValues.describe(payload)) \(describe(stamp))")
    if let transaction {
      transaction.store(MValues.leaf(payload), named: .modelStar, modifiedAt: stamp)
    } else {
      map.store(MValues.leaf(payload), named: .modelStar, modifiedAt: stamp)
    }
    writeAlias(star: true, [payload], stamp: stamp)
  }

  func setTeam(in transaction: IdentityMap.Transaction? = nil) {
    let payloads = (0..<random.int(0..<3)).map { _ in MValues.payload(.leaf, &random) }
    let stamp = stamp()
    note("team = \(payloads.map(MValues.describe)) \(describe(stamp))")
    let leaves = payloads.map(MValues.leaf)
    if let transaction {
      transaction.store(leaves, named: .modelTeam, modifiedAt: stamp)
    } else {
      map.store(leaves, named: .modelTeam, modifiedAt: stamp)
    }
    writeAlias(star: false, payloads, stamp: stamp)
  }

  /// An alias write: the slot's stamp decides whether the slot moves; the entities are written
  /// on their own stamps either way.
  func writeAlias(star: Bool, _ payloads: [MPayload], stamp: Stamp?) {
    let slotStamp = star ? model.star.stamp : model.team.stamp
    let keys = payloads.map(\.key)
    let accepted = MModel.admits(slotStamp, stamp)
    let refused = model.write(payloads, depth: 1, call: stamp, mergeFromDepth: 0)
    if accepted {
      let recorded = stamp.flatMap { $0.isNaN ? nil : $0 } ?? slotStamp
      if star {
        model.star = (keys.first, recorded)
      } else {
        model.team = (keys, recorded)
      }
    }
    // The slot loses what a tombstone refused, as it would any removed entity.
    modelRemove(refused, entombing: false)
  }

  func removeAlias() {
    let star = random.chance(0.5)
    note("remove alias \(star ? "star" : "team")")
    if star {
      map.removeAlias(named: AliasKey<MLeaf>.modelStar)
      model.star = (nil, .nan)
    } else {
      map.removeAlias(named: AliasKey<[MLeaf]>.modelTeam)
      model.team = (nil, .nan)
    }
  }

  /// Renames the starred leaf through the alias.
  func updateStar() {
    let name = random.pick(["a", "b", "c", "d"])
    let stamp = stamp()
    note("update star → \(name) \(describe(stamp))")
    let found = map.update(named: AliasKey<MLeaf>.modelStar, modifiedAt: stamp) { $0.name = name }
    guard let key = model.star.value else {
      expect(!found, "update of an unset alias returned true")
      return
    }
    expect(found, "update of a set alias returned false")
    guard MModel.admits(model.star.stamp, stamp) || stamp == model.star.stamp else { return }
    var own = model.entities[key]!.own
    own.text = name
    // The alias's own entity does not merge; its slot compares the alias's stamp.
    let accepted = MModel.admits(model.star.stamp, stamp)
    model.write([.entity(key: key, own: own, slots: [])], depth: 1, call: stamp, mergeFromDepth: 2)
    if accepted, let stamp, !stamp.isNaN { model.star.stamp = stamp }
  }

  /// A transaction of a few random steps, which may open transactions of their own, down to
  /// `depth` 3, and which throws at the end now and then. A level that throws rolls the model
  /// back as the map must: to its state when the level began, the holders made before then as
  /// they were, and the holders made in the body following what survives.
  func transaction(depth: Int = 1) {
    let throwing = random.chance(0.3)
    let indent = String(repeating: "  ", count: depth - 1)
    note("\(indent)transaction\(throwing ? ", throwing" : "") {")
    let start = MLevel(model: model, handles: handles)
    if depth == 1 { writeStart = start }
    do {
      try map.transaction { transaction in
        for _ in 0..<random.int(1..<5) { stepInside(transaction, depth: depth) }
        if throwing { throw MThrown() }
      }
    } catch {
      rollBack(to: start)
    }
    if depth == 1 { writeStart = nil }
    note("\(indent)}")
  }

  /// One random step inside a transaction body at `depth`.
  func stepInside(_ transaction: IdentityMap.Transaction, depth: Int) {
    switch random.int(0..<100) {
    case 0..<16: keep(storeEntity(random.pick(MKind.allCases), in: transaction))
    case 16..<24: keep(storeBatch(in: transaction))
    case 24..<30: updateLeaf(in: transaction)
    case 30..<34: updateBook()
    case 34..<39: remove(in: transaction)
    case 39..<42: removeWithTombstone(in: transaction)
    case 42..<47: setStar(in: transaction)
    case 47..<51: setTeam(in: transaction)
    case 51..<53: snapshotLeaves(transaction)
    case 53..<59: find()
    case 59..<63: findAlias()
    case 63..<71: subscribe()
    case 71..<74: cancel()
    case 74..<82: dropHandle()
    case 82..<84: removeAll()
    default: if depth < 3 { self.transaction(depth: depth + 1) } else { find() }
    }
  }

  /// Puts the model back as it was when `start` began, and the holders made before then; a
  /// holder made in the body keeps following what survives: an entity it holds is removed
  /// unless the same incarnation is back, and a batch shows those of the entities it was
  /// stored with that are.
  func rollBack(to start: MLevel) {
    let lastGeneration = model.lastGeneration
    model = start.model
    model.lastGeneration = lastGeneration
    for index in handles.indices {
      if let saved = start.handles[handles[index].id] {
        handles[index].target = saved.target
        handles[index].generations = saved.generations
        handles[index].removedValue = saved.removedValue
        continue
      }
      switch handles[index].target {
      case .entity(let key):
        let survives = model.entities[key]?.generation == handles[index].generations.first
        handles[index].removedValue = survives ? nil : MHandle.rolledBack
      case .batch:
        let kept = handles[index].origin.filter {
          model.entities[$0.key]?.generation == $0.generation
        }
        handles[index].target = .batch(kept.map(\.key))
        handles[index].generations = kept.map(\.generation)
      case .star, .team:
        break
      }
    }
  }

  func expect(_ condition: Bool, _ message: @autoclosure () -> String) {
    guard !condition else { return }
    Issue.record(
      Comment(
        rawValue: "seed \(seed), step \(step): \(message())\nlast operations:\n"
          + history.joined(separator: "\n")))
    failed = true
  }
}

extension ModelRun {
  // MARK: Holders

  func find() {
    let kind = random.pick(MKind.allCases)
    let key = MKey(kind: kind, id: random.int(kind.ids))
    note("find \(key)")
    if let handle = entityHandle(key) {
      expect(model.entities[key] != nil, "find \(key) found what the model does not have")
      hold(handle)
    }
  }

  func findAlias() {
    let star = random.chance(0.5)
    note("find alias \(star ? "star" : "team")")
    if star {
      let observer = map.find(named: .modelStar)
      hold(
        MHandle(
          target: .star, read: { (observer.value.map(MValues.render) ?? "nil", false) },
          observe: { told in observer.observe { told.append($0.map(MValues.render) ?? "nil") } }))
    } else {
      let observer = map.find(named: .modelTeam)
      hold(
        MHandle(
          target: .team, read: { (observer.value.map(MValues.render) ?? "nil", false) },
          observe: { told in observer.observe { told.append($0.map(MValues.render) ?? "nil") } }))
    }
  }

  func dropHandle() {
    guard !handles.isEmpty else { return }
    let index = random.int(0..<handles.count)
    note("drop handle \(index) on \(handles[index].target)")
    handles.remove(at: index)
  }

  func subscribe() {
    guard
      let index = handles.indices.filter({ handles[$0].subscription == nil }).randomElement(
        using: &random)
    else { return }
    note("observe handle \(index) on \(handles[index].target)")
    handles[index].lastTold = toldBefore(handles[index])
    handles[index].subscription = handles[index].observe(handles[index].received)
  }

  func cancel() {
    guard
      let index = handles.indices.filter({ handles[$0].subscription != nil }).randomElement(
        using: &random)
    else { return }
    note("cancel handle \(index)")
    handles[index].subscription?.cancel()
    handles[index].subscription = nil
    handles[index].received.withValue { $0.removeAll() }
  }

  // MARK: Checks

  /// What a subscription opened on `handle` now is told against when the write commits: the
  /// value now, or inside a transaction, the value committed before it began (`nil` for what
  /// did not exist then), since nothing uncommitted is ever delivered.
  func toldBefore(_ handle: MHandle) -> String? {
    guard let start = writeStart else { return expectedValue(of: handle) }
    if let saved = start.handles[handle.id] {
      return saved.removedValue ?? start.model.render(saved.target)
    }
    switch handle.target {
    case .entity(let key):
      guard start.model.entities[key]?.generation == handle.generations.first else { return nil }
      return start.model.render(key)
    case .batch:
      return nil
    case .star, .team:
      return start.model.render(handle.target)
    }
  }

  /// What a handle must show now.
  func expectedValue(of handle: MHandle) -> String {
    if let removed = handle.removedValue { return removed }
    return model.render(handle.target)
  }

  /// Compares the map with the model: count, find of every id, every handle, every delivery.
  func check() {
    var roots: [MKey] = []
    for handle in handles where !handle.isRemoved {
      switch handle.target {
      case .entity(let key): roots.append(key)
      case .batch(let keys): roots += keys
      case .star, .team: break
      }
    }
    model.release(roots: roots)
    map._core._checkInvariants()
    expect(
      map.count == model.entities.count,
      "count is \(map.count), the model has \(model.entities.count)")
    for kind in MKind.allCases {
      for id in kind.ids {
        let key = MKey(kind: kind, id: id)
        let expected = model.entities[key] != nil ? model.render(key) : nil
        let actual = found(key)
        expect(
          actual == expected,
          "find \(key) is \(actual ?? "nil"), the model says \(expected ?? "nil")")
      }
    }
    for index in handles.indices {
      let handle = handles[index]
      let (value, isRemoved) = handle.read()
      let expected = expectedValue(of: handle)
      expect(
        value == expected || expected == MHandle.rolledBack,
        "handle \(index) on \(handle.target) shows \(value), not \(expected)")
      if case .entity = handle.target {
        expect(isRemoved == handle.isRemoved, "handle \(index): isRemoved is \(isRemoved)")
      }
      guard handle.subscription != nil else { continue }
      let told = handle.received.withValue { received in
        defer { received.removeAll() }
        return received
      }
      if handle.isRemoved {
        // Removed now or before: told nothing, not even a change made before the removal.
        expect(told.isEmpty, "handle \(index) on a removed entity was told \(told)")
      } else if expected != handle.lastTold {
        expect(told == [expected], "handle \(index) was told \(told), expected [\(expected)]")
        handles[index].lastTold = expected
      } else {
        expect(told.isEmpty, "handle \(index) was told \(told) though its value stayed \(expected)")
      }
    }
  }

  /// One random step.
  func runStep() {
    step += 1
    switch random.int(0..<100) {
    case 0..<12: keep(storeEntity(random.pick([MKind.leaf, .user, .rev])))
    case 12..<20: keep(storeEntity(random.pick([MKind.book, .book, .shelf])))
    case 20..<24: keep(storeEntity(.member))
    case 24..<29: keep(storeEntity(random.pick([MKind.feed, .feed, .boost, .post])))
    case 29..<34: keep(storeBatch())
    case 34..<41: updateLeaf()
    case 41..<46: updateBook()
    case 46..<50: updateMember()
    case 50..<55: remove()
    case 55..<57: removeWithTombstone()
    case 57..<60: setStar()
    case 60..<62: setTeam()
    case 62..<63: updateTeam()
    case 63..<65: removeAlias()
    case 65..<70: updateStar()
    case 70..<77: find()
    case 77..<79: findAlias()
    case 79..<85: dropHandle()
    case 85..<90: subscribe()
    case 90..<92: cancel()
    case 92..<99: transaction()
    default: if random.chance(0.3) { removeAll() } else { find() }
    }
    // NB: a bounded number of holders keeps each step's checks cheap.
    while handles.count > 24 { dropHandle() }
    check()
  }

  /// Keeps a handle a store returned, sometimes.
  func keep(_ handle: MHandle) {
    if random.chance(0.35) { hold(handle) }
  }

  /// Keeps `handle`, numbered, with the incarnations of what it follows.
  func hold(_ handle: MHandle) {
    var handle = handle
    lastHandleID += 1
    handle.id = lastHandleID
    switch handle.target {
    case .entity(let key): handle.generations = [model.entities[key]?.generation ?? -1]
    case .batch(let keys):
      handle.generations = keys.map { model.entities[$0]?.generation ?? -1 }
      handle.origin = Array(zip(keys, handle.generations))
    case .star, .team: handle.generations = []
    }
    handles.append(handle)
  }
}

@Suite("Model-based random runs")
struct ModelBasedTests {
  /// The total number of random steps; see `randomSteps(share:)`.
  static let steps = randomSteps()
  static let runs = 20

  @Test(arguments: 0..<runs)
  func aSeededRunAgreesWithTheModel(run: Int) {
    if let only = ProcessInfo.processInfo.environment["CONCORD_RANDOM_RUN"].flatMap(Int.init),
      only != run
    {
      return
    }
    let seed = 0xC0FF_EE00 &+ UInt64(run) &* 7_919
    let modelRun = ModelRun(seed: seed)
    for _ in 0..<(Self.steps / Self.runs) {
      modelRun.runStep()
      if modelRun.failed { break }
    }
    for handle in modelRun.handles { handle.subscription?.cancel() }
  }
}
