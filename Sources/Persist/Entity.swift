import Foundation

/// A value Persist stores: `Codable`, identified by a UUID, and stored under a name of its own.
///
/// ```swift
/// struct Budget: Entity {
///     static let entityName = "Budget"
///     var id = UUID()
///     var date: Date
///     var amount: Double
/// }
/// ```
///
/// The body is stored as canonical JSON (sorted keys; dates as `Double` seconds, so at full
/// precision). The type is found by ``entityName``, not by the Swift type's name, so renaming the
/// Swift type keeps the data: keep the name.
public protocol Entity: Codable, Sendable, Identifiable where ID == UUID {
    /// The stored type name: non-empty UTF-8 without NUL, at most 256 bytes. Renaming the Swift
    /// type keeps the data as long as this stays the same.
    static var entityName: String { get }
}
