import ConcordTesting
import TestSupport
import Testing

@testable import Concord

// A page fetched again holds many aggregates bit for bit as stored, which the pass does not
// expand (their nested entities already show what they would write), beside aggregates that
// changed and nest the same entities. The shortcut may skip work, never change a winner: an
// occurrence skipped at depth 1 would have won over an earlier one at its depth, or over a deeper
// one. And a `Mergeable` aggregate met again deeper in the page, after its winner was expanded,
// is merged all the same. This seeded differential test runs random refetches of unstamped and
// Mergeable aggregates on two maps, one of which takes no shortcut (`_Pass.isExhaustive`), and
// compares every entity, every page and everything subscribers were told, after every step.

@Suite("Pages fetched again: the shortcut for what is stored agrees with the exhaustive pass")
struct RefetchDifferentialTests {
  @Test(arguments: [11, 12, 13] as [UInt64])
  func refetchedPagesAgree(seed: UInt64) {
    var generator = SeededGenerator(seed: seed &* 0x9E37_79B9)
    let quick = IdentityMap()
    let exhaustive = IdentityMap()
    exhaustive._core.pass.isExhaustive = true
    let seen = (Locked<[String]>([]), Locked<[String]>([]))
    /// The pages held, each map's read as text.
    var held: [(() -> String, () -> String)] = []
    var subscriptions: [Subscription] = []

    func author(_ step: Int) -> Author {
      let id = Int.random(in: 0..<4, using: &generator)
      return Author(id: id, name: "author \(id) at \(step % 5)")
    }
    func book(_ step: Int) -> Book {
      let id = Int.random(in: 0..<6, using: &generator)
      // Half the time as the map has it now: a page fetched again.
      if Bool.random(using: &generator), let stored = quick.find(Book.self, id: "\(id)")?.value {
        return stored
      }
      return Book(id: "\(id)", title: "title \(step % 3)", author: author(step))
    }
    func shelf(_ step: Int) -> Shelf {
      let id = Int.random(in: 0..<3, using: &generator)
      if Bool.random(using: &generator), let stored = quick.find(Shelf.self, id: id)?.value {
        return stored
      }
      return Shelf(
        id: id, owner: author(step),
        books: (0..<Int.random(in: 0...2, using: &generator)).map { _ in book(step) },
        pinned: Bool.random(using: &generator) ? book(step) : nil, media: .none)
    }
    func status(_ step: Int, depth: Int = 0) -> Status2 {
      let id = Int.random(in: 0..<5, using: &generator)
      if Bool.random(using: &generator), let stored = quick.find(Status2.self, id: "\(id)")?.value {
        return stored
      }
      var value = Status2(
        id: "\(id)", text: "text \(step % 3)",
        favourited: Bool.random(using: &generator) ? step.isMultiple(of: 2) : nil,
        account: Bool.random(using: &generator)
          ? Member2(id: Int.random(in: 0..<3, using: &generator), login: "m\(step % 4)") : nil)
      if depth < 2 && Bool.random(using: &generator) {
        value.reblog = status(step, depth: depth + 1)
      }
      return value
    }

    func hold<T: Sendable>(_ a: EntityObserver<T>, _ b: EntityObserver<T>) {
      held.append(({ "\(a.value)" }, { "\(b.value)" }))
    }

    for step in 0..<max(200, randomSteps(share: 100)) {
      switch Int.random(in: 0..<10, using: &generator) {
      case 0..<3:
        let page = (0..<Int.random(in: 1...4, using: &generator)).map { _ in book(step) }
        hold(quick.store(page), exhaustive.store(page))
      case 3..<5:
        let page = (0..<Int.random(in: 1...3, using: &generator)).map { _ in shelf(step) }
        hold(quick.store(page), exhaustive.store(page))
      case 5..<8:
        let page = (0..<Int.random(in: 1...4, using: &generator)).map { _ in status(step) }
        hold(quick.store(page), exhaustive.store(page))
      case 8:
        let value = author(step)
        quick.store(value)
        exhaustive.store(value)
      default:
        if !held.isEmpty { held.remove(at: Int.random(in: 0..<held.count, using: &generator)) }
        if Int.random(in: 0..<4, using: &generator) == 0 {
          subscriptions.removeAll()
          let id = Int.random(in: 0..<4, using: &generator)
          if let a = quick.find(Author.self, id: id), let b = exhaustive.find(Author.self, id: id) {
            let (seenA, seenB) = seen
            subscriptions.append(a.observe { seenA.append("\($0)") })
            subscriptions.append(b.observe { seenB.append("\($0)") })
          }
        }
      }
      if held.count > 6 { held.removeFirst() }
      let context = "seed \(seed), step \(step)"
      #expect(quick.count == exhaustive.count, "\(context): count")
      for id in 0..<4 {
        #expect(
          quick.find(Author.self, id: id)?.value == exhaustive.find(Author.self, id: id)?.value,
          "\(context): author \(id)")
      }
      for id in 0..<6 {
        #expect(
          quick.find(Book.self, id: "\(id)")?.value
            == exhaustive.find(Book.self, id: "\(id)")?.value, "\(context): book \(id)")
      }
      for id in 0..<3 {
        #expect(
          quick.find(Shelf.self, id: id)?.value == exhaustive.find(Shelf.self, id: id)?.value,
          "\(context): shelf \(id)")
        #expect(
          quick.find(Member2.self, id: id)?.value == exhaustive.find(Member2.self, id: id)?.value,
          "\(context): member \(id)")
      }
      for id in 0..<5 {
        #expect(
          quick.find(Status2.self, id: "\(id)")?.value
            == exhaustive.find(Status2.self, id: "\(id)")?.value, "\(context): status \(id)")
      }
      for (a, b) in held {
        #expect(a() == b(), "\(context): a page")
      }
      #expect(seen.0.value == seen.1.value, "\(context): what subscribers were told")
      quick._core._checkInvariants()
      exhaustive._core._checkInvariants()
    }
    withExtendedLifetime(subscriptions) {}
  }
}
