//! The local object store: objects (data chunks, xattrs, omap) laid out as keys in an
//! ordered key-value engine, changed only by atomic transactions, made durable by an
//! explicit group-commit sync.
//!
//! This crate must not depend on RocksDB (that is `shoal-store-rocks`), tokio or sockets:
//! every engine passes the same [`conformance`] suite.

pub mod alloc;
pub mod conformance;
pub mod device;
pub mod extents;
pub mod kv;
pub mod mem;
pub mod object;
mod prefix;

pub use device::{BlockDevice, FileDevice, MemDevice};
pub use extents::{Extent, SpaceStats};
pub use kv::{Batch, BatchOp, Cf, KvEngine, KvStats};
pub use mem::MemKv;
pub use object::{
    CopyResume, FsckReport, ObjectKey, ObjectStore, Onode, StoreFormat, StoreOptions, Transaction, pg_damage_key,
    pg_damage_rows, pg_dup_key, pg_dup_rows, pg_log_key, pg_meta_key, pg_missing_key, pg_missing_object_key,
    pg_missing_objects, pg_pool_pg_num_key, pg_pool_pg_num_rows, pg_rollback_key, pg_scrub_key, split_damage_key,
};
