//! Bucket notifications in the spirit of Ceph RGW's: SNS-style [`topic`]s, per-bucket
//! notification configurations ([`filter`]), S3 [`event`] records, and delivery to HTTP,
//! AMQP and Kafka [`endpoint`]s, either before the S3 reply (synchronous topics) or through
//! persistent [`queue`]s: `2pc_queue` objects sharded per topic. A persistent event is
//! admitted by the gateway's [`publish`] path, written into the bucket index transaction
//! of its operation ([`eventlog`]), moved to its queue and delivered by the gateways'
//! [`manager`]s, each for the logs and shards whose [`lease`] it holds.
//!
//! This crate knows nothing of how the gateway stores objects: the gateway gives it topics
//! ([`manager::TopicSource`]) and writes the logged events itself.

pub mod endpoint;
pub mod event;
pub mod eventlog;
pub mod filter;
pub mod lease;
pub mod manager;
pub mod metrics;
pub mod publish;
pub mod queue;
pub mod topic;

/// The wall clock, ns since the Unix epoch.
fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}
