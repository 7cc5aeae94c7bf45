// Sorting by a comparator, then by creation order.
//
// A query's result, and a transaction's `entities(_:filter:sortedBy:)`, are in the order of
// their comparator, then in creation order (`_EntityNode.sequence`). Both sort positions
// into their values in two steps: by sequence number first, with a radix sort, then by the
// comparator, with the standard library's sort, which is stable. Entities the comparator does
// not order therefore stay in creation order, and the comparator runs once per comparison.
//
// NB: the first step also serves speed. The nodes come from hash tables, in no order, and a
// merge sort runs faster on an input with runs than on a shuffled one: creation order is often
// close to a client's own order (a timeline by date, fetched page by page).

/// Sorting positions by creation order, then by a comparator.
@usableFromInline
enum _CreationOrder {
  /// The fewest positions that the radix sort takes; the standard library sorts fewer.
  ///
  /// NB: a radix pass clears and sums 256 counters, which costs more than sorting a few
  /// dozen integers.
  @inlinable static var radixThreshold: Int { 64 }

  /// Sorts `positions` by `sequence(position)`, ascending, keeping the order of equal ones.
  ///
  /// - Parameter threshold: the fewest positions that take the radix sort; tests lower or
  ///   raise it to compare the two.
  /// - Complexity: O(*m*) for *m* positions at or above `threshold`, one pass per byte that
  ///   the sequence numbers span; O(*m* log *m*) below.
  @inlinable
  static func sort(
    _ positions: UnsafeMutableBufferPointer<Int>, radixFrom threshold: Int = radixThreshold,
    by sequence: (Int) -> UInt32
  ) {
    guard positions.count > 1 else { return }
    guard positions.count >= threshold else {
      var positions = positions
      positions.sort { sequence($0) < sequence($1) }
      return
    }
    var low = UInt32.max
    var high = UInt32.min
    for position in positions {
      let key = sequence(position)
      low = min(low, key)
      high = max(high, key)
    }
    let span = high &- low
    withUnsafeTemporaryAllocation(of: Int.self, capacity: positions.count) { scratch in
      withUnsafeTemporaryAllocation(of: Int.self, capacity: 256) { starts in
        // NB: each pass reads `source` in order and writes each position after the ones of
        // its digit already written, so it keeps the order of the pass before: least
        // significant byte first, the last pass leaves the positions sorted.
        var source = positions
        var target = scratch
        var shift: UInt32 = 0
        func byte(of position: Int) -> Int {
          Int(((sequence(position) &- low) >> shift) & 0xFF)
        }
        while shift < 32 && span >> shift != 0 {
          starts.initialize(repeating: 0)
          for position in source { starts[byte(of: position)] += 1 }
          var total = 0
          for value in 0..<256 {
            let count = starts[value]
            starts[value] = total
            total += count
          }
          for position in source {
            let value = byte(of: position)
            target.initializeElement(at: starts[value], to: position)
            starts[value] += 1
          }
          swap(&source, &target)
          shift += 8
        }
        if source.baseAddress != positions.baseAddress {
          _ = positions.update(fromContentsOf: source)
        }
      }
    }
  }

  /// Sorts `positions`, indices into `values`, in the order of `areInIncreasingOrder`, then
  /// of `sequence(position)`; without a comparator, by `sequence(position)` alone.
  ///
  /// - Complexity: O(*m* log *m*) calls of the comparator for *m* positions, one per
  ///   comparison.
  @inlinable
  static func sort<T>(
    _ positions: UnsafeMutableBufferPointer<Int>, of values: UnsafeBufferPointer<T>,
    by areInIncreasingOrder: ((T, T) -> Bool)?, sequence: (Int) -> UInt32
  ) {
    sort(positions, by: sequence)
    guard let areInIncreasingOrder else { return }
    // NB: stable ("The sorting algorithm is guaranteed to be stable", the standard library's
    // documentation of `sort(by:)`): what the comparator does not order stays in the creation
    // order the first step left.
    var positions = positions
    positions.sort { areInIncreasingOrder(values[$0], values[$1]) }
  }
}
