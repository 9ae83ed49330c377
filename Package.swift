// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "ContentStore",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "ContentStore", targets: ["ContentStore"]),
        .library(name: "Warehouse", targets: ["Warehouse"]),
        .library(name: "DataArchive", targets: ["DataArchive"]),
        // PostgreSQL + S3: its own product, so embedded users never build postgres-nio or async-http-client.
        .library(name: "ContentStoreCluster", targets: ["ContentStoreCluster"]),
        .library(name: "StateLens", targets: ["StateLens"]),
        .library(name: "Persist", targets: ["Persist"]),
        .library(name: "Sync", targets: ["Sync"]),
        .executable(name: "contentstore", targets: ["contentstore"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        // ContentStoreCluster and Sync only (PostgreSQL, the S3 client, the HTTP server and client).
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CZstd",
            pkgConfig: "libzstd",
            providers: [.apt(["libzstd-dev"]), .brew(["zstd"])]
        ),
        .systemLibrary(
            name: "COpenSSLCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]
        ),
        // No unsafe compiler flags: a package with them cannot be a versioned dependency. The CRC32C's
        // SSE4.2 path is chosen at run time by attribute, so it needs no compiler flag.
        .target(name: "CContentStoreSupport"),
        .target(
            name: "ContentStore",
            dependencies: [
                "CZstd",
                "COpenSSLCrypto",
                "CContentStoreSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        .target(name: "Warehouse", dependencies: ["ContentStore"]),
        .target(
            name: "ContentStoreCluster",
            dependencies: [
                "ContentStore",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(name: "DataArchive", dependencies: ["ContentStore"]),
        .target(
            name: "Sync",
            dependencies: [
                "ContentStore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(name: "StateLens", dependencies: ["ContentStore"]),
        .target(name: "Persist", dependencies: ["ContentStore"]),
        .executableTarget(
            name: "contentstore",
            dependencies: [
                "ContentStore", "ContentStoreCluster", "Warehouse", "DataArchive", "StateLens", "Persist", "Sync",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The process-crash test's workload (Tests/ContentStoreTests/Reliability); not a product.
        .executableTarget(name: "CrashWorkload", dependencies: ["ContentStore"], path: "Tests/CrashWorkload"),
        // The collection crash test's workload (Tests/contentstoreTests); not a product.
        .executableTarget(name: "CollectionWorkload", dependencies: ["ContentStore"], path: "Tests/CollectionWorkload"),
        // The threads tests that block run on, shared by every test target (Tests/TestThreads); not a product.
        .target(name: "TestThreads", path: "Tests/TestThreads"),
        .testTarget(
            name: "ContentStoreTests",
            // CZstd: known-answer tests of the frames the store writes, read with zstd's own API.
            dependencies: ["ContentStore", "CZstd", "TestThreads", .product(name: "MetricsTestKit", package: "swift-metrics")]
        ),
        .testTarget(name: "WarehouseTests", dependencies: ["Warehouse", "TestThreads"]),
        .testTarget(name: "DataArchiveTests", dependencies: ["DataArchive", "TestThreads"]),
        // The second-process workload of the cluster tests (Tests/ContentStoreClusterTests); not a product.
        .executableTarget(name: "ClusterWorkload", dependencies: ["ContentStoreCluster", "ContentStore"], path: "Tests/ClusterWorkload"),
        .testTarget(
            name: "ContentStoreClusterTests",
            dependencies: ["ContentStoreCluster", "ContentStore", "Warehouse", "DataArchive", "TestThreads",
                           .product(name: "PostgresNIO", package: "postgres-nio")]
        ),
        .testTarget(name: "StateLensTests", dependencies: ["StateLens", "TestThreads", .product(name: "MetricsTestKit", package: "swift-metrics")]),
        .testTarget(name: "PersistTests", dependencies: ["Persist", "ContentStore", "TestThreads"]),
        // The killed-client test's workload (Tests/SyncTests); not a product.
        .executableTarget(name: "SyncWorkload", dependencies: ["Sync", "ContentStore"], path: "Tests/SyncWorkload"),
        .testTarget(name: "SyncTests", dependencies: ["Sync", "ContentStore",
                                                      .product(name: "AsyncHTTPClient", package: "async-http-client")]),
        .testTarget(name: "contentstoreTests", dependencies: ["contentstore", "ContentStore", "TestThreads"]),
    ],
    swiftLanguageModes: [.v6]
)
