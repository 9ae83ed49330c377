/// The cluster's PostgreSQL schema, version by version: the one place that knows its DDL
/// (Docs/cluster.md explains every table and column, and the orderings that use them).
///
/// Everything lives in the PostgreSQL schema `contentstore`, so the store can share a database
/// with an application's own tables. `contentstore.schema_version` holds one row, like the
/// embedded store's FORMAT file: a database whose version is newer than ``currentVersion`` is
/// refused with `unsupportedFormat`, never written.
///
/// Text keys are `COLLATE "C"`: PostgreSQL then orders them by their UTF-8 bytes, the order
/// `keys(withPrefix:)` promises on every backend.
enum ClusterSchema {
    /// The version this code creates and understands.
    static let currentVersion: Int32 = 1

    /// The PostgreSQL schema (namespace) holding every table.
    static let namespace = "contentstore"

    /// Session-level and transaction-level advisory lock keys, one per cluster-wide role.
    /// ("CSTORE" in ASCII, then a role number, so they will not collide with an application's.)
    enum AdvisoryLock: Int64 {
        /// Held (transaction-scoped) while an instance creates the schema.
        case schemaCreation = 0x4353_544F_5245_0001
        /// Held (session-scoped) by the one running collector.
        case collector = 0x4353_544F_5245_0002
        /// Held (session-scoped) by the one instance packing inline blobs.
        case packer = 0x4353_544F_5245_0003
    }

    /// Version 1, in creation order; run in one transaction.
    static let version1: [String] = [
        "CREATE SCHEMA IF NOT EXISTS contentstore",
        """
        CREATE TABLE contentstore.schema_version (
            singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
            version integer NOT NULL,
            store_id uuid NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now()
        )
        """,
        """
        CREATE TABLE contentstore.packs (
            id bigserial PRIMARY KEY,
            object_key text COLLATE "C" NOT NULL UNIQUE,
            state smallint NOT NULL CHECK (state IN (0, 1, 2)),
            size bigint NOT NULL CHECK (size >= 0),
            blob_count integer NOT NULL CHECK (blob_count >= 0),
            instance_id uuid NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            condemned_at timestamptz
        )
        """,
        """
        CREATE TABLE contentstore.blobs (
            digest bytea PRIMARY KEY CHECK (octet_length(digest) = 32),
            logical_size bigint NOT NULL CHECK (logical_size >= 0),
            stored_size bigint NOT NULL CHECK (stored_size >= 0),
            codec smallint NOT NULL CHECK (codec IN (0, 1)),
            pack_id bigint REFERENCES contentstore.packs (id),
            pack_offset bigint CHECK (pack_offset >= 0),
            inline_data bytea,
            ref_count bigint NOT NULL DEFAULT 0 CHECK (ref_count >= 0),
            zero_since timestamptz,
            freshened_at timestamptz NOT NULL DEFAULT now(),
            children bytea CHECK (octet_length(children) % 32 = 0),
            content_size bigint CHECK (content_size >= 0),
            CHECK (content_size IS NULL OR children IS NOT NULL),
            CHECK ((pack_id IS NULL) = (pack_offset IS NULL)),
            CHECK ((pack_id IS NULL) <> (inline_data IS NULL)),
            CHECK ((ref_count = 0) = (zero_since IS NOT NULL))
        )
        """,
        "CREATE INDEX blobs_garbage ON contentstore.blobs (zero_since) WHERE ref_count = 0",
        "CREATE INDEX blobs_by_pack ON contentstore.blobs (pack_id) WHERE pack_id IS NOT NULL",
        "CREATE INDEX blobs_inline ON contentstore.blobs (freshened_at) WHERE inline_data IS NOT NULL",
        """
        CREATE TABLE contentstore.records (
            key text COLLATE "C" PRIMARY KEY,
            value bytea NOT NULL,
            refs bytea NOT NULL CHECK (octet_length(refs) % 32 = 0),
            version bigint NOT NULL
        )
        """,
        "CREATE SEQUENCE contentstore.commit_sequence AS bigint",
        """
        CREATE TABLE contentstore.commit_tokens (
            token uuid PRIMARY KEY,
            committed boolean NOT NULL,
            sequence bigint,
            created_at timestamptz NOT NULL DEFAULT now()
        )
        """,
        """
        CREATE TABLE contentstore.instances (
            id uuid PRIMARY KEY,
            host text NOT NULL,
            pid integer NOT NULL,
            started_at timestamptz NOT NULL DEFAULT now(),
            heartbeat_at timestamptz NOT NULL DEFAULT now()
        )
        """,
        """
        CREATE TABLE contentstore.leases (
            id uuid PRIMARY KEY,
            instance_id uuid NOT NULL,
            kind text NOT NULL CHECK (kind IN ('snapshot', 'export', 'put', 'pack')),
            horizon timestamptz NOT NULL,
            expires_at timestamptz NOT NULL
        )
        """,
        "CREATE INDEX leases_horizon ON contentstore.leases (horizon)",
    ]
}
