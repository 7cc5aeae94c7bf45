import Concord

/// A work item of the query workloads: a group (what the queries filter on) and a score (what
/// they sort by).
struct Ticket: Identifiable, Sendable, Equatable {
  var id: Int
  var group: Int
  var score: Double
}

/// How many groups, hence filtered queries, the query workloads use.
let ticketGroups = 100

/// The query workloads' order: by score, then by id (the floor's stand-in for "first stored").
@inline(__always)
func ticketPrecedes(_ first: Ticket, _ second: Ticket) -> Bool {
  first.score < second.score || (first.score == second.score && first.id < second.id)
}

/// `ticketPrecedes` as a closure the optimizer cannot see through: what a floor calls where the
/// map calls the comparator a query was given, so that both pay for calling a closure.
@inline(never)
func opaqueTicketPrecedes() -> @Sendable (Ticket, Ticket) -> Bool {
  ticketPrecedes
}

/// `count` tickets spread over the groups, with scores scattered by a multiplicative hash.
func makeTickets(_ count: Int) -> [Ticket] {
  (0..<count).map {
    Ticket(id: $0, group: $0 % ticketGroups, score: Double(($0 &* 2_654_435_761) % 1_000_000))
  }
}

extension Workloads {
  /// 100 open filtered and sorted queries over `n` tickets (one per group); each write moves one
  /// ticket's score, and one write in ten its group too. The floor keeps the same 100 sorted
  /// arrays beside a dictionary and, per write, evaluates the 100 filters on the old and the new
  /// value and moves the ticket by binary search (in place when the order allows).
  func queryMaintain() -> Result {
    let tickets = makeTickets(n)
    let writes = quick ? 2_000 : 10_000
    // Scattered by multiplicative hashes: each write moves a ticket far in its query.
    let updates = (0..<writes).map { step -> (id: Int, group: Int?, score: Double) in
      let id = (step &* 7_919) % n
      let group: Int? = step % 10 == 0 ? (step &* 31) % ticketGroups : nil
      return (id, group, Double((step &* 104_729) % 1_000_000))
    }
    let filters: [@Sendable (Ticket) -> Bool] = (0..<ticketGroups).map { group in
      { $0.group == group }
    }
    let map = IdentityMap()
    let handle = map.store(tickets)
    let queries = filters.map { map.query(Ticket.self, filter: $0, sortedBy: ticketPrecedes) }
    let floor = FilteredQueriesFloor(tickets, filters: filters)
    // NB: each sample writes new scores (the round is added), so that no write is a no-op.
    var round = 0.0
    var result = compare(
      "query.maintain",
      map: {
        round += 0.5
        return nanoseconds {
          for update in updates {
            map.update(Ticket.self, id: update.id) {
              $0.score = update.score + round
              if let group = update.group { $0.group = group }
            }
          }
        } / Double(writes)
      },
      floor: {
        nanoseconds {
          for update in updates {
            floor.update(update.id) {
              $0.score = update.score + round
              if let group = update.group { $0.group = group }
            }
          }
        } / Double(writes)
      })
    precondition(queries.reduce(0) { $0 + $1.value.count } == n, "every ticket in one query")
    result.note = "100 queries, cost per write"
    return result.keeping((handle, queries))
  }

  /// Opens a query on an index over `n` tickets (kept by another open query) and reads its
  /// result, sorted by score: the cost per result element. The floor copies and sorts the
  /// bucket of a dictionary of buckets, calling the comparator as a closure, as the map must
  /// (a floor that inlines it sorts about twice as fast as any query can).
  func queryIndexedOpen() -> Result {
    let tickets = makeTickets(n)
    let map = IdentityMap()
    let handle = map.store(tickets)
    let keeper = map.query(Ticket.self, where: \.group, equals: 0)
    var buckets: [Int: [Ticket]] = [:]
    for ticket in tickets { buckets[ticket.group, default: []].append(ticket) }
    let floor = Floor<Ticket>()
    let precedes = opaqueTicketPrecedes()
    let perGroup = n / ticketGroups
    let opens = quick ? 20 : 50
    var result = compare(
      "query.indexed.open",
      map: {
        var total = 0
        let ns = nanoseconds {
          for group in 1...opens {
            let query = map.query(
              Ticket.self, where: \.group, equals: group % ticketGroups, sortedBy: ticketPrecedes)
            total += query.value.count
          }
        }
        precondition(total == opens * perGroup, "every query holds its group")
        return ns / Double(total)
      },
      floor: {
        var total = 0
        let ns = nanoseconds {
          for group in 1...opens {
            let sorted = floor.locked { buckets[group % ticketGroups]!.sorted(by: precedes) }
            total += sorted.count
          }
        }
        return ns / Double(total)
      })
    result.note = "cost per result element"
    return result.keeping((handle, keeper))
  }

  /// 10,000 updates of distinct tickets with a collector open, then a drain: the cost per
  /// change. The tickets were stored as one list, whose handle the row keeps. The floor updates
  /// a dictionary and the stored list, records each change in a collapsing log (a dictionary of
  /// entries and their order), then drains it.
  func collectorDrain() -> Result {
    let changes = 10_000
    let tickets = makeTickets(changes)
    let map = IdentityMap()
    let handle = map.store(tickets)
    let collector = map.collector(Ticket.self)
    let floor = ChangeLogFloor(tickets)
    var round = 0.0
    var result = compare(
      "collector.drain",
      map: {
        round += 1
        let ns = nanoseconds {
          for id in 0..<changes { map.update(Ticket.self, id: id) { $0.score = round } }
          blackHole(collector.drain())
        }
        return ns / Double(changes)
      },
      floor: {
        let ns = nanoseconds {
          for id in 0..<changes { floor.update(id) { $0.score = round } }
          blackHole(floor.drain())
        }
        return ns / Double(changes)
      })
    result.note = "10k changes, then a drain; cost per change"
    return result.keeping((handle, collector))
  }
}

/// The floor of `query.maintain`: tickets in a dictionary, and one sorted array per filter,
/// behind one lock.
final class FilteredQueriesFloor: @unchecked Sendable {
  // NB: @unchecked because every field is only touched while holding `lock`.
  private let lock = Lock(recursive: true)
  private var storage: [Int: Ticket] = [:]
  private let filters: [@Sendable (Ticket) -> Bool]
  private var results: [[Ticket]]

  init(_ tickets: [Ticket], filters: [@Sendable (Ticket) -> Bool]) {
    self.filters = filters
    results = filters.map { filter in tickets.filter(filter).sorted(by: ticketPrecedes) }
    for ticket in tickets { storage[ticket.id] = ticket }
  }

  private func position(of ticket: Ticket, in result: [Ticket]) -> Int {
    var low = 0
    var high = result.count
    while low < high {
      let middle = (low + high) / 2
      if ticketPrecedes(result[middle], ticket) { low = middle + 1 } else { high = middle }
    }
    return low
  }

  func update(_ id: Int, _ body: (inout Ticket) -> Void) {
    lock.lock()
    defer { lock.unlock() }
    guard let old = storage[id] else { return }
    var new = old
    body(&new)
    storage[id] = new
    for index in filters.indices {
      let was = filters[index](old)
      let matches = filters[index](new)
      guard was || matches else { continue }
      if was && matches {
        // In place when the order allows, as the map does.
        let at = position(of: old, in: results[index])
        let result = results[index]
        if (at == 0 || ticketPrecedes(result[at - 1], new))
          && (at == result.count - 1 || ticketPrecedes(new, result[at + 1]))
        {
          results[index][at] = new
          continue
        }
      }
      if was { results[index].remove(at: position(of: old, in: results[index])) }
      if matches { results[index].insert(new, at: position(of: new, in: results[index])) }
    }
  }
}

/// The floor of `collector.drain`: a dictionary, and a log that collapses changes per id.
///
/// It keeps the stored list of tickets current, as the map keeps the row's batch handle: the
/// position of each ticket in it, and the list patched in place at each change.
final class ChangeLogFloor: @unchecked Sendable {
  // NB: @unchecked because every field is only touched while holding `lock`.
  private let lock = Lock(recursive: true)
  private var storage: [Int: Ticket] = [:]
  private var list: [Ticket]
  private var positions: [Int: Int] = [:]
  private var entries: [Int: EntityChange<Ticket>] = [:]
  private var order: [Int] = []

  init(_ tickets: [Ticket]) {
    list = tickets
    for (position, ticket) in tickets.enumerated() {
      storage[ticket.id] = ticket
      positions[ticket.id] = position
    }
  }

  func update(_ id: Int, _ body: (inout Ticket) -> Void) {
    lock.lock()
    defer { lock.unlock() }
    guard var value = storage[id] else { return }
    body(&value)
    storage[id] = value
    if let position = positions[id] { list[position] = value }
    if entries.updateValue(.updated(value), forKey: id) == nil { order.append(id) }
  }

  func drain() -> [EntityChange<Ticket>] {
    lock.lock()
    defer { lock.unlock() }
    let drained = order.compactMap { entries[$0] }
    order.removeAll(keepingCapacity: true)
    entries.removeAll(keepingCapacity: true)
    return drained
  }
}

extension Floor {
  /// Runs `body` under the floor's lock.
  func locked<R>(_ body: () -> R) -> R {
    lock.withLock(body)
  }
}
