import Testing

/// The reliability campaign (Docs/reliability.md): power loss, I/O faults, process crashes,
/// hostile files and permissions. `swift test --filter Reliability` runs it.
@Suite("Reliability")
enum Reliability {}
