import ConcordTesting
import TestSupport
import Testing

@testable import Concord

// A removal of an entity nobody else can see in between (no parent, no consumer of its type, no
// layer, outside transactions, held by a handle) skips the journal and the pass: it turns the
// entity's bucket in its table into its tombstone and tells its subscribers at once
// (`_MapCore.removesDirectly`). That is a second way to remove, so this seeded differential
// test runs the same random steps on two maps, one of which never takes it
// (`_Pass.isExhaustive`), and compares everything a user can see after every step: values,
// handles, what subscribers were told, the log, and which replays the tombstones refuse. The
// steps reach both sides of every condition: held and unheld entities, authors nested in books
// (parents), removals inside transactions that commit or throw and inside `update` bodies,
// subscribers, a tombstone limit small enough to evict, re-creations that drop tombstones, and
// `removeAll`.

private struct Rollback: Error {}

@Suite("Removals published directly agree with removals through the pass")
struct DirectRemovalDifferentialTests {
  @Test(
    "Random removals, replays and re-creations: both maps agree at every step",
    arguments: [(1, 3, true), (2, 3, false), (3, 10_000, true), (4, 1, false)]
      as [(UInt64, Int, Bool)])
  func directRemovalsAgreeWithThePass(seed: UInt64, limit: Int, logging: Bool) {
    var random = SeededGenerator(seed: seed &* 0x2545_F491)
    let loggers = logging ? (RecordingLogger(), RecordingLogger()) : nil
    let quick = IdentityMap(logger: loggers?.0, tombstones: .keepNewest(limit))
    let exhaustive = IdentityMap(logger: loggers?.1, tombstones: .keepNewest(limit))
    exhaustive._core.pass.isExhaustive = true
    let maps = [quick, exhaustive]
    let told = (Locked<[String]>([]), Locked<[String]>([]))
    var held: [(EntityObserver<Author>, EntityObserver<Author>)] = []
    var books: [(EntityObserver<Book>, EntityObserver<Book>)] = []
    var subscriptions: [Subscription] = []
    var clock = 10.0

    func stamp() -> Stamp? {
      switch Int.random(in: 0..<6, using: &random) {
      case 0: nil
      case 1: .nan
      case 2: clock - Double(Int.random(in: 1...5, using: &random))
      case 3: clock
      default: clock + 1
      }
    }
    func author(_ step: Int) -> Author {
      let id = Int.random(in: 0..<8, using: &random)
      return Author(id: id, name: "author \(id) at \(step)")
    }

    let steps = max(500, randomSteps(share: 40))
    for step in 0..<steps {
      clock += 1
      switch Int.random(in: 0..<100, using: &random) {
      case 0..<30:
        let (value, call) = (author(step), stamp())
        let pair = (quick.store(value, modifiedAt: call), exhaustive.store(value, modifiedAt: call))
        if Int.random(in: 0..<3, using: &random) != 0 { held.append(pair) }
        if held.count > 10 { held.removeFirst() }
      case 30..<38:
        // A book makes its author a parent's child: its removal takes the pass.
        let (value, call) = (author(step), stamp())
        let book = Book(id: "b\(value.id % 3)", title: "t\(step % 5)", author: value)
        books.append(
          (quick.store(book, modifiedAt: call), exhaustive.store(book, modifiedAt: call)))
        if books.count > 2 || Bool.random(using: &random) { books.removeFirst() }
      case 38..<62:
        let id = Int.random(in: 0..<8, using: &random)
        for map in maps { map.remove(Author.self, id: id) }
      case 62..<68:
        // Removals inside a transaction, which commits or throws, and inside an update body.
        let ids = (0..<Int.random(in: 1...3, using: &random)).map { _ in
          Int.random(in: 0..<8, using: &random)
        }
        let throwing = Bool.random(using: &random)
        let viaUpdate = Int.random(in: 0..<3, using: &random) == 0
        for map in maps {
          if viaUpdate {
            map.update(Author.self, id: ids[0]) { _ in
              for id in ids.dropFirst() { map.remove(Author.self, id: id) }
            }
          } else {
            try? map.transaction { transaction in
              for id in ids { transaction.remove(Author.self, id: id) }
              if throwing { throw Rollback() }
            }
          }
        }
      case 68..<80:
        if !held.isEmpty {
          let pair = held[Int.random(in: 0..<held.count, using: &random)]
          let (seenA, seenB) = told
          subscriptions.append(pair.0.observe { value in seenA.append("value \(value)") })
          subscriptions.append(pair.1.observe { value in seenB.append("value \(value)") })
          subscriptions.append(pair.0.observeRemoval { value in seenA.append("removed \(value)") })
          subscriptions.append(pair.1.observeRemoval { value in seenB.append("removed \(value)") })
        }
      case 80..<92:
        if !held.isEmpty { held.remove(at: Int.random(in: 0..<held.count, using: &random)) }
        if Int.random(in: 0..<4, using: &random) == 0 { subscriptions.removeAll() }
      case 92..<94:
        for map in maps { map.removeAll() }
      default:
        // A replay of an older write: refused where a tombstone stands.
        let value = author(step)
        let call = clock - Double(Int.random(in: 1...20, using: &random))
        let replayed = (
          quick.store(value, modifiedAt: call), exhaustive.store(value, modifiedAt: call)
        )
        #expect(replayed.0.isRemoved == replayed.1.isRemoved, "seed \(seed), step \(step)")
      }

      let context = "seed \(seed), step \(step)"
      #expect(quick.count == exhaustive.count, "\(context): count")
      for id in 0..<8 {
        #expect(
          quick.find(Author.self, id: id)?.value == exhaustive.find(Author.self, id: id)?.value,
          "\(context): author \(id)")
      }
      for (a, b) in held {
        #expect(a.value == b.value && a.isRemoved == b.isRemoved, "\(context): held author")
      }
      for (a, b) in books {
        #expect(a.value == b.value && a.isRemoved == b.isRemoved, "\(context): held book")
      }
      let heard = (
        told.0.withValue { seen in
          defer { seen = [] }
          return seen.sorted()
        },
        told.1.withValue { seen in
          defer { seen = [] }
          return seen.sorted()
        }
      )
      #expect(heard.0 == heard.1, "\(context): what subscribers were told (sorted)")
      if let (a, b) = loggers {
        // NB: sorted, as `removeAll` takes entities in no particular order, which differs with
        // where each table's tombstones sit.
        #expect(
          a.events.map(\.description).sorted() == b.events.map(\.description).sorted(),
          "\(context): events")
        a.clear()
        b.clear()
      }
    }
    #expect(
      quick._core.tombstones.count == exhaustive._core.tombstones.count,
      "both keep the same number of tombstones")
    withExtendedLifetime((held, books, subscriptions)) {}
  }
}
