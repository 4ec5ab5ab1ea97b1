//! The `shoal` command's building blocks: configuration, the embedded object layer, the
//! `rados` tool and the benchmarks. The binary in `main.rs` only parses arguments.

pub mod admin_cmd;
pub mod bench;
pub mod conffile;
pub mod config;
pub mod config_cmd;
pub mod daemon;
pub mod debug;
pub mod ec_bench;
pub mod embedded;
pub mod gateway_cmd;
pub mod guarded_append;
pub mod metrics;
pub mod rados_cmd;
pub mod recovery_bench;
pub mod registry;
pub mod s3_bench;
pub mod s3client;
pub mod scrub_bench;
pub mod session;
pub mod sim_cmd;
pub mod thrash;
pub mod vstart;
