//! Bucket notifications in the spirit of Ceph RGW's: SNS-style [`topic`]s, per-bucket
//! notification configurations ([`filter`]), S3 [`event`] records, and delivery to HTTP,
//! AMQP and Kafka [`endpoint`]s, either before the S3 reply (synchronous topics) or through
//! persistent [`queue`]s: `2pc_queue` objects sharded per topic, written by the gateway's
//! [`publish`] path and delivered by each gateway's [`manager`] for the shards it owns.
//!
//! This crate knows nothing of how the gateway stores objects: the gateway gives it topics
//! ([`manager::TopicSource`]) and says whether an operation happened ([`manager::Resolver`]).

pub mod endpoint;
pub mod event;
pub mod filter;
pub mod manager;
pub mod metrics;
pub mod publish;
pub mod queue;
pub mod topic;
