//! What the `shoal` command runs: the cluster configuration and its file, the daemons
//! (monitor, OSD, gateway) and their wiring, the embedded object layer, `vstart`, and the
//! operator commands (`rados`, `admin`, `config`, `status`, `pool`, `pg`, `osd`, `sim`).
//! The binary only parses arguments; the benchmarks live in `shoal-bench`.

pub mod admin_cmd;
pub mod auth_cmd;
pub mod autoscale_cmd;
pub mod balancer_cmd;
pub mod bench;
pub mod conffile;
pub mod config;
pub mod config_cmd;
pub mod daemon;
pub mod debug;
pub mod embedded;
pub mod gateway_cmd;
pub mod keyring;
pub mod metrics;
pub mod mon_cmd;
pub mod rados_cmd;
pub mod registry;
pub mod session;
pub mod sim_cmd;
pub mod vstart;
