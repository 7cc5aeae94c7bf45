// swift-tools-version:6.0
import PackageDescription

let package = Package(
  name: "Concord",
  platforms: [
    .macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1),
  ],
  products: [
    .library(name: "Concord", targets: ["Concord"]),
    .library(name: "ConcordTesting", targets: ["ConcordTesting"]),
  ],
  targets: [
    .target(name: "Concord"),
    .target(name: "ConcordTesting", dependencies: ["Concord"]),
    .executableTarget(
      name: "ConcordBenchmarks",
      dependencies: ["Concord", "CBenchmarkSupport"],
      path: "Benchmarks/ConcordBenchmarks"
    ),
    .target(name: "CBenchmarkSupport", path: "Benchmarks/CBenchmarkSupport"),
    .executableTarget(name: "ConcordDemo", dependencies: ["Concord"]),
    .testTarget(name: "ConcordTests", dependencies: ["Concord", "ConcordTesting"]),
    .testTarget(name: "ReadmeTests", dependencies: ["Concord", "ConcordTesting"]),
    .testTarget(name: "ConcordDemoTests", dependencies: ["ConcordDemo"]),
    .testTarget(name: "ConcordTestingTests", dependencies: ["Concord", "ConcordTesting"]),
  ],
  swiftLanguageModes: [.v6]
)
