// swift-tools-version:6.1
// A small Hummingbird 2 backend storing uploads in a ContentStore through the async API.
// Its own package (built by `make test` in the repository root), depending on ContentStore by path;
// a real backend depends on it by URL and version (README, "Depend on it").
import PackageDescription

let package = Package(
    name: "BackendExample",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "ContentStore", path: "../../"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
    ],
    targets: [
        .executableTarget(
            name: "BackendExample",
            dependencies: [
                .product(name: "ContentStore", package: "ContentStore"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
