// swift-tools-version:6.1
// The benchmark harness: its own package, so the top-level `make test` never builds it.
//   make bench    → swift package benchmark   (ordo-one suites in Benchmarks/<Name>/<Name>.swift)
//   make compare  → swift run -c release compare   (side-by-side runner, writes Docs/benchmarks/)
import PackageDescription

let package = Package(
    name: "ContentStoreBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "ContentStore", path: "../"),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        // The cluster comparison's plain-PostgreSQL peer (already in the graph through ContentStoreCluster).
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // commitrounds counts WAL syncs through the store's metrics factory (already in the graph through ContentStore).
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        // Every tool's command line (already in the graph through the `contentstore` command).
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
    ],
    targets: [
        // zstd for the peers (ContentStore's own C modules are internal to the engine).
        .systemLibrary(name: "CBenchZstd", pkgConfig: "libzstd", providers: [.apt(["libzstd-dev"]), .brew(["zstd"])]),
        // Linux system calls the Glibc module does not import (renameat2 for the directory-swap baseline).
        .target(name: "CBenchSupport"),
        // Corpus generator, deterministic random numbers, POSIX helpers, store fixtures, and the
        // command-line pieces the tools share.
        .target(
            name: "BenchSupport",
            dependencies: [
                "CBenchZstd", "CBenchSupport",
                .product(name: "ContentStore", package: "ContentStore"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "compare",
            dependencies: [
                "BenchSupport",
                .product(name: "ContentStore", package: "ContentStore"),
                .product(name: "Warehouse", package: "ContentStore"),
                .product(name: "DataArchive", package: "ContentStore"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // `make compare-cluster` (and the end of `make compare`): issue 17's cluster targets against
        // plain PostgreSQL and restic on the same services; also its own worker processes.
        .executableTarget(
            name: "cluster-compare",
            dependencies: [
                "BenchSupport",
                .product(name: "ContentStore", package: "ContentStore"),
                .product(name: "ContentStoreCluster", package: "ContentStore"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Issue 21's graph, and its SQLite peer with the original Persist's undo table.
        .target(
            name: "PersistGraph",
            dependencies: [
                "BenchSupport",
                .product(name: "Persist", package: "ContentStore"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // issue 20's and 21's targets: StateLens and Persist against a durable 1 KiB commit, rounds interleaved.
        .executableTarget(
            name: "facadespeed",
            dependencies: [
                "BenchSupport",
                "PersistGraph",
                .product(name: "ContentStore", package: "ContentStore"),
                .product(name: "StateLens", package: "ContentStore"),
                .product(name: "Persist", package: "ContentStore"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // `make scale`: issue 19's million-object open, memory and collection targets.
        .executableTarget(
            name: "scale",
            dependencies: ["BenchSupport", .product(name: "ContentStore", package: "ContentStore"), .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        // Issue 19's DataArchive callback get of 1 KiB against a file read, with CPU and switches per call.
        .executableTarget(
            name: "callbackget",
            dependencies: ["BenchSupport", .product(name: "ContentStore", package: "ContentStore"),
                           .product(name: "DataArchive", package: "ContentStore"), .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        // Durable commits from many writers, blocking threads against awaiting tasks, round by round.
        .executableTarget(
            name: "commitrounds",
            dependencies: ["BenchSupport", .product(name: "ContentStore", package: "ContentStore"),
                           .product(name: "CoreMetrics", package: "swift-metrics"), .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// ordo-one benchmark suites: Benchmarks/<Name>/<Name>.swift, each `let benchmarks = { ... }`.
let facades: [String: String] = ["Warehouse": "Warehouse", "DataArchive": "DataArchive", "StateLens": "StateLens", "Persist": "Persist", "Sync": "Sync"]
for name in ["Blobs", "Commits", "Snapshots", "Recovery", "GarbageCollection", "Warehouse", "DataArchive", "LargeData", "Async", "StateLens", "Persist", "Sync"] {
    package.targets.append(.executableTarget(
        name: name + "Benchmarks",
        dependencies: [
            "BenchSupport",
            .product(name: "ContentStore", package: "ContentStore"),
            .product(name: "Benchmark", package: "benchmark"),
        ] + (facades[name].map { [.product(name: $0, package: "ContentStore")] } ?? [])
            // Persist is compared with GRDB keeping its own undo table, as the original did.
            + (name == "Persist" ? ["PersistGraph"] : []),
        path: "Benchmarks/\(name)",
        plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
    ))
}
