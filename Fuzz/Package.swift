// swift-tools-version:6.1
// libFuzzer targets for the files ContentStore reads: WAL segments, checkpoints and packs.
// Built and run by Fuzz/fuzz.sh (`make fuzz`); see Docs/reliability.md.
import PackageDescription

let package = Package(
    name: "ContentStoreFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "ContentStore", path: "..")],
    targets: [
        // Shared by the targets: checksum repair, an in-memory file, limits.
        .target(name: "FuzzSupport", dependencies: [.product(name: "ContentStore", package: "ContentStore")]),
        // Each target defines LLVMFuzzerTestOneInput; libFuzzer provides main.
        .executableTarget(name: "FuzzWALSegment", dependencies: ["FuzzSupport"], swiftSettings: [.unsafeFlags(["-parse-as-library"])]),
        .executableTarget(name: "FuzzCheckpoint", dependencies: ["FuzzSupport"], swiftSettings: [.unsafeFlags(["-parse-as-library"])]),
        .executableTarget(name: "FuzzPack", dependencies: ["FuzzSupport"], swiftSettings: [.unsafeFlags(["-parse-as-library"])]),
    ],
    swiftLanguageModes: [.v6]
)
