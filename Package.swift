// swift-tools-version:6.2
import PackageDescription

let package = Package(
  name: "Concord",
  platforms: [
    .macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1),
  ],
  products: [
    .library(name: "Concord", targets: ["Concord"]),
    .library(name: "ConcordTesting", targets: ["ConcordTesting"]),
    .library(name: "ConcordSQLite", targets: ["ConcordSQLite"]),
  ],
  targets: [
    .target(name: "Concord", dependencies: ["_ConcordAtomics"]),
    // The atomic operations the map's lock-free paths use; see its header. Not a product.
    .target(name: "_ConcordAtomics"),
    .target(name: "ConcordTesting", dependencies: ["Concord"]),
    // The system's SQLite: the SDK's SQLite3 module on Apple platforms, this module map
    // elsewhere (Debian and Ubuntu: apt install libsqlite3-dev).
    .systemLibrary(
      name: "CSQLite",
      pkgConfig: "sqlite3",
      providers: [.apt(["libsqlite3-dev"]), .yum(["sqlite-devel"])]
    ),
    .target(
      name: "ConcordSQLite",
      dependencies: [
        "Concord",
        .target(name: "CSQLite", condition: .when(platforms: [.linux, .android, .windows])),
      ]
    ),
    .executableTarget(
      name: "ConcordBenchmarks",
      dependencies: [
        "Concord", "ConcordSQLite", "CBenchmarkSupport",
        .target(name: "CSQLite", condition: .when(platforms: [.linux, .android, .windows])),
      ],
      path: "Benchmarks/ConcordBenchmarks"
    ),
    .target(name: "CBenchmarkSupport", path: "Benchmarks/CBenchmarkSupport"),
    .executableTarget(name: "ConcordDemo", dependencies: ["Concord", "ConcordSQLite"]),
    // The second process of the sharing tests: a store on a shared file, driven line by line.
    .executableTarget(
      name: "ConcordSharingHelper",
      dependencies: [
        "Concord", "ConcordSQLite",
        .target(name: "CSQLite", condition: .when(platforms: [.linux, .android, .windows])),
      ],
      path: "Tests/ConcordSharingHelper"
    ),
    // Helpers the test targets share: a seeded generator, a locked box, a loopback HTTP server,
    // and `eventually`.
    .target(name: "TestSupport", path: "Tests/TestSupport"),
    .testTarget(
      name: "ConcordTests", dependencies: ["Concord", "ConcordTesting", "TestSupport"]),
    .testTarget(
      name: "ConcordSQLiteTests",
      dependencies: [
        "Concord", "ConcordSQLite", "ConcordTesting", "TestSupport",
        .target(name: "CSQLite", condition: .when(platforms: [.linux, .android, .windows])),
      ]),
    .testTarget(
      name: "ReadmeTests",
      dependencies: ["Concord", "ConcordSQLite", "ConcordTesting", "TestSupport"]),
    .testTarget(name: "ConcordDemoTests", dependencies: ["ConcordDemo"]),
    .testTarget(name: "ConcordTestingTests", dependencies: ["Concord", "ConcordTesting"]),
  ],
  swiftLanguageModes: [.v6]
)
