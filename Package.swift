// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "ContentStore",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "ContentStore", targets: ["ContentStore"]),
        .library(name: "Warehouse", targets: ["Warehouse"]),
        .library(name: "DataArchive", targets: ["DataArchive"]),
        .library(name: "Persist", targets: ["Persist"]),
        .executable(name: "contentstore", targets: ["contentstore"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
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
        // No unsafeFlags: a package that uses them cannot be a versioned dependency. The CRC32C's
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
        .target(name: "DataArchive", dependencies: ["ContentStore"]),
        .target(name: "Persist", dependencies: ["ContentStore"]),
        .executableTarget(
            name: "contentstore",
            dependencies: [
                "ContentStore", "Warehouse", "DataArchive", "Persist",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The process-crash test's workload (Tests/ContentStoreTests/Reliability); not a product.
        .executableTarget(name: "CrashWorkload", dependencies: ["ContentStore"], path: "Tests/CrashWorkload"),
        .testTarget(
            name: "ContentStoreTests",
            dependencies: ["ContentStore", .product(name: "MetricsTestKit", package: "swift-metrics")]
        ),
        .testTarget(name: "WarehouseTests", dependencies: ["Warehouse"]),
        .testTarget(name: "DataArchiveTests", dependencies: ["DataArchive"]),
        .testTarget(name: "PersistTests", dependencies: ["Persist", "ContentStore"]),
        .testTarget(name: "contentstoreTests", dependencies: ["contentstore", "ContentStore"]),
    ],
    swiftLanguageModes: [.v6]
)
