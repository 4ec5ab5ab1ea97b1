//! The lifecycle worker: every gateway runs one; buckets with a lifecycle configuration
//! are registered in `.rgw.log/lc/lc.buckets`, and each bucket's pass is owned by one
//! gateway at a time through a `lock`-class lease on the bucket's status object
//! `lc.<bucket>` (a killed gateway's share is taken over when its lease runs out). A pass
//! walks the bucket's versions in index order, a page at a time, decides with
//! [`rules::plan`], and removes through [`Service::delete_key`](crate::service::Service::delete_key), the path of a user DELETE
//! (so GC, object lock and notifications see lifecycle removals as they see any other).

pub mod registry;
pub mod rules;
pub mod worker;
