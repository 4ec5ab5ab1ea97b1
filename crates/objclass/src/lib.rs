//! Object classes: methods named `class.method` that run inside the OSD's transaction with
//! access to one object, taking and returning bytes.
//!
//! Built in: [`lock`] (leases), [`version`] (optimistic concurrency), [`queue2pc`] (the
//! `2pc_queue` two-phase-commit queue), [`guard`] (epoch-guarded append) and
//! [`bucket_index`] (a shard of an S3 bucket's index). Classes may
//! keep per-object state in memory through [`ObjectAccess::stage_state`], published only
//! when the transaction commits.
//!
//! This crate must not depend on the store, tokio, sockets or the clock: time and the
//! caller come in through [`MethodContext`].

pub mod access;
pub mod bucket_index;
pub mod guard;
pub mod lock;
pub mod queue2pc;
mod registry;
pub mod version;

pub use access::{ClassState, ObjectAccess};
pub use registry::{ClassRegistry, Method, MethodContext, MethodFlags, MethodFn, decode_input, decode_stored};

impl ClassRegistry {
    /// A registry with every built-in class.
    pub fn builtin() -> Self {
        let mut r = ClassRegistry::default();
        lock::register(&mut r);
        version::register(&mut r);
        queue2pc::register(&mut r);
        guard::register(&mut r);
        bucket_index::register(&mut r);
        r
    }
}

#[cfg(test)]
pub(crate) mod testing;
