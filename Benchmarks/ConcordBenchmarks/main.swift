// ConcordBenchmarks: store, find and propagation throughput of `IdentityMap`, each against a
// plain dictionary behind one mutex, measured in the same run.
//
//   swift run -c release ConcordBenchmarks [--quick] [--filter NAME] [--n N] [--json FILE]

import Foundation

let usage = """
  usage: ConcordBenchmarks [--quick] [--filter NAME] [--n N] [--samples K] [--json FILE]

    --quick        N = 20,000 and fewer repetitions: the whole run takes well under a minute
    --filter NAME  run only the workloads whose name contains NAME (repeatable)
    --n N          entities per workload (default 100,000; 20,000 with --quick)
    --json FILE    also write the results as JSON to FILE
    --samples K    timed samples per workload after one warm-up (default 7; 5 with --quick)

  workloads: \(Workloads.names.joined(separator: ", "))
  """

func fail(_ message: String) -> Never {
  FileHandle.standardError.write(Data("error: \(message)\n\n\(usage)\n".utf8))
  exit(2)
}

// NB: the second process of `shared.propagate` (see `SharingWorkloads.swift`).
if CommandLine.arguments.count == 3 && CommandLine.arguments[1] == "--shared-writer" {
  runSharedWriter(path: CommandLine.arguments[2])
}

var quick = false
var filters: [String] = []
var n: Int?
var samples: Int?
var jsonPath: String?
var arguments = CommandLine.arguments.dropFirst()[...]
while let argument = arguments.popFirst() {
  func value() -> String {
    guard let value = arguments.popFirst() else { fail("\(argument) needs a value") }
    return value
  }
  switch argument {
  case "--quick": quick = true
  case "--filter": filters.append(value())
  case "--n":
    guard let parsed = Int(value()), parsed >= 100 else {
      fail("--n needs an integer of at least 100")
    }
    n = parsed
  case "--samples":
    guard let parsed = Int(value()), parsed >= 1 else { fail("--samples needs a positive integer") }
    samples = parsed
  case "--json": jsonPath = value()
  case "--help", "-h":
    print(usage)
    exit(0)
  default: fail("unknown argument \(argument)")
  }
}

let workloads = Workloads(
  n: n ?? (quick ? 20_000 : 100_000), samples: samples ?? (quick ? 5 : 7), quick: quick)
let selected = Workloads.names.filter { name in
  filters.isEmpty || filters.contains { name.contains($0) }
}
if selected.isEmpty { fail("no workload matches \(filters.joined(separator: ", "))") }

#if DEBUG
  print("warning: a debug build; measure with `swift run -c release ConcordBenchmarks`\n")
#endif
print(
  "Concord benchmarks: N = \(workloads.n), \(workloads.samples) samples after a warm-up, median shown"
)
var results: [Result] = []
for name in selected {
  FileHandle.standardError.write(Data("running \(name)…\n".utf8))
  results.append(workloads.run(name))
}
print(table(results))
if let jsonPath {
  do {
    try json(n: workloads.n, results: results).write(
      toFile: jsonPath, atomically: true, encoding: .utf8)
  } catch {
    fail("could not write \(jsonPath): \(error)")
  }
}
