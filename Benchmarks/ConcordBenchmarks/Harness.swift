import CBenchmarkSupport
import Foundation

/// Keeps `value` alive and opaque to the optimizer, so that the work producing it stays.
@inline(__always)
func blackHole<T>(_ value: T) {
  withUnsafePointer(to: value) { benchmark_sink(UnsafeRawPointer($0)) }
}

/// How long `body` takes, in nanoseconds.
@inline(__always)
func nanoseconds(_ body: () -> Void) -> Double {
  let clock = ContinuousClock()
  let elapsed = clock.measure(body)
  let (seconds, attoseconds) = elapsed.components
  return Double(seconds) * 1e9 + Double(attoseconds) / 1e9
}

/// Bytes allocated on the calling thread's malloc arena.
func allocatedBytes() -> Int {
  Int(benchmark_allocated_bytes())
}

/// One row of results.
struct Result {
  var name: String
  /// Per-sample nanoseconds per operation, sorted.
  var samples: [Double] = []
  /// The floor's median nanoseconds per operation, measured in the same run.
  var baselineNsPerOp: Double?
  var bytesPerEntity: Double?
  var baselineBytesPerEntity: Double?
  /// A note printed after the row, such as a second reference.
  var note: String?
  /// Extra numeric fields for the JSON file.
  var extra: [(String, Double)] = []

  var nsPerOp: Double? { samples.isEmpty ? nil : samples[samples.count / 2] }
  var opsPerSecond: Double? { nsPerOp.map { 1e9 / $0 } }
  var isMemory: Bool { bytesPerEntity != nil }

  /// The ratio to the floor, for time or for memory.
  var ratio: Double? {
    if let bytesPerEntity, let baselineBytesPerEntity {
      return bytesPerEntity / baselineBytesPerEntity
    }
    if let nsPerOp, let baselineNsPerOp { return nsPerOp / baselineNsPerOp }
    return nil
  }
}

/// Runs `sample` once to warm up, then `count` times, and returns the medians' inputs.
///
/// `sample` does its own setup, times only the measured part with `nanoseconds`, and returns
/// nanoseconds per operation.
func measure(samples count: Int, _ sample: () -> Double) -> [Double] {
  _ = sample()
  return (0..<count).map { _ in sample() }.sorted()
}

/// The median of a sorted or unsorted array.
func median(_ values: [Double]) -> Double {
  let sorted = values.sorted()
  return sorted[sorted.count / 2]
}

// MARK: Output

/// Formats nanoseconds with a unit.
func formatTime(_ ns: Double) -> String {
  switch ns {
  case ..<1_000: String(format: "%.1f ns", ns)
  case ..<1_000_000: String(format: "%.2f µs", ns / 1_000)
  default: String(format: "%.2f ms", ns / 1_000_000)
  }
}

/// The console table: one aligned row per result, with the ratio to the floor.
func table(_ results: [Result]) -> String {
  let header = ["benchmark", "median", "min", "max", "ops/s", "floor", "× floor"]
  var rows: [[String]] = [header]
  for result in results {
    if result.isMemory {
      rows.append([
        result.name,
        String(format: "%.0f B/entity", result.bytesPerEntity!),
        "", "", "",
        result.baselineBytesPerEntity.map { String(format: "%.0f B/entry", $0) } ?? "-",
        result.ratio.map { String(format: "%.2f", $0) } ?? "-",
      ])
    } else {
      rows.append([
        result.name,
        formatTime(result.nsPerOp!),
        formatTime(result.samples.first!),
        formatTime(result.samples.last!),
        String(format: "%.0f", result.opsPerSecond!),
        result.baselineNsPerOp.map(formatTime) ?? "-",
        result.ratio.map { String(format: "%.2f", $0) } ?? "-",
      ])
    }
  }
  let widths = header.indices.map { column in rows.map { $0[column].count }.max()! }
  var lines = rows.map { row in
    row.indices.map { column in
      column == 0
        ? row[column].padding(toLength: widths[column], withPad: " ", startingAt: 0)
        : String(repeating: " ", count: widths[column] - row[column].count) + row[column]
    }.joined(separator: "  ")
  }
  lines.insert(String(repeating: "-", count: lines[0].count), at: 1)
  for result in results where result.note != nil {
    lines.append("\(result.name): \(result.note!)")
  }
  return lines.joined(separator: "\n")
}

/// The JSON document: `{"n": N, "results": [...]}`.
func json(n: Int, results: [Result]) -> String {
  func number(_ value: Double?) -> String {
    guard let value, value.isFinite else { return "null" }
    return String(format: "%.3f", value)
  }
  func string(_ value: String) -> String {
    "\""
      + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(
        of: "\"", with: "\\\"") + "\""
  }
  let rows = results.map { result in
    var fields = [
      "\"name\": \(string(result.name))",
      "\"nsPerOp\": \(number(result.nsPerOp))",
      "\"opsPerSecond\": \(number(result.opsPerSecond))",
      "\"baselineNsPerOp\": \(number(result.baselineNsPerOp))",
      "\"samples\": \(result.isMemory ? 1 : result.samples.count)",
    ]
    if !result.isMemory {
      fields.append("\"minNsPerOp\": \(number(result.samples.first))")
      fields.append("\"maxNsPerOp\": \(number(result.samples.last))")
    } else {
      fields.append("\"bytesPerEntity\": \(number(result.bytesPerEntity))")
      fields.append("\"baselineBytesPerEntity\": \(number(result.baselineBytesPerEntity))")
    }
    fields.append("\"ratio\": \(number(result.ratio))")
    for (key, value) in result.extra { fields.append("\(string(key)): \(number(value))") }
    return "    {" + fields.joined(separator: ", ") + "}"
  }
  return "{\n  \"n\": \(n),\n  \"results\": [\n" + rows.joined(separator: ",\n") + "\n  ]\n}\n"
}
