#!/usr/bin/env bash
# Proves ContentStore works as a versioned dependency: a scratch consumer package depends on a tagged
# clone of this repository by file:// URL and `from:`, resolves it and builds. SwiftPM refuses a
# remote dependency whose targets use unsafeFlags, so this also keeps them out.
# Usage: Tests/Packaging/consumer-check.sh [SCRATCH_DIR]   (run from the repository root)
set -euo pipefail
REPO="$(pwd)"
SCRATCH="${1:-$REPO/.build/consumer-check}"
VERSION="1.0.0"
SWIFT="${SWIFT:-swift}"

rm -rf "$SCRATCH"
mkdir -p "$SCRATCH/ContentStore" "$SCRATCH/Consumer/Sources/Consumer"

# A clone of the committed HEAD (what a user would fetch), tagged with a release version.
git -C "$SCRATCH/ContentStore" init -q
git -C "$SCRATCH/ContentStore" fetch -q "$REPO" HEAD
git -C "$SCRATCH/ContentStore" checkout -q -b release FETCH_HEAD
git -C "$SCRATCH/ContentStore" -c user.name=check -c user.email=check@localhost tag -a "$VERSION" -m "$VERSION"

cat > "$SCRATCH/Consumer/Package.swift" <<SWIFT
// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "Consumer",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(url: "file://$SCRATCH/ContentStore", from: "$VERSION"),
    ],
    targets: [
        .executableTarget(
            name: "Consumer",
            dependencies: [.product(name: "ContentStore", package: "ContentStore")]
        ),
    ]
)
SWIFT

# An async entry point, as a backend has, where the compiler picks the async twins.
cat > "$SCRATCH/Consumer/Sources/Consumer/Consumer.swift" <<'SWIFT'
import ContentStore
import Foundation

@main
struct Consumer {
    static func main() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("consumer-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try Store(at: directory)
        let digest = try await store.put(Data("hello".utf8))
        try await store.write { tx in try tx.setRecord(Record(value: Data(), references: [digest]), forKey: "k") }
        let bytes = try await store.get(digest)
        precondition(bytes == Data("hello".utf8))
        try await store.close()
        print("consumer: ContentStore \(digest) ok")
    }
}
SWIFT

cd "$SCRATCH/Consumer"
"$SWIFT" package resolve
"$SWIFT" build
"$SWIFT" run --skip-build Consumer
