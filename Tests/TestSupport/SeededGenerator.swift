import Foundation

/// A small deterministic generator (SplitMix64), so that a failing stress run can be replayed.
public struct SeededGenerator: RandomNumberGenerator {
  private var state: UInt64

  public init(seed: UInt64) {
    state = seed
  }

  public mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var mixed = state
    mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
    mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
    return mixed ^ (mixed >> 31)
  }
}

/// How many steps the seeded random tests take: `CONCORD_RANDOM_STEPS` (CI shortens it under
/// the sanitizers), 100,000 by default, divided by `share` for a test that takes a part of it.
public func randomSteps(share: Int = 1) -> Int {
  (ProcessInfo.processInfo.environment["CONCORD_RANDOM_STEPS"].flatMap(Int.init) ?? 100_000)
    / share
}
