//! Shoal's benchmarks and load generators: the S3 benchmark (warp-like workloads, the
//! Reef cycle), the thrasher, the erasure-code, recovery, scrub and guarded-append
//! benchmarks (each prints a table or `--json`), the small SigV4 S3 client they use, and
//! the process harness of the tests that run `shoal` daemons.

pub mod ec_bench;
pub mod guarded_append;
pub mod harness;
pub mod recovery_bench;
pub mod s3_bench;
pub mod s3client;
pub mod scrub_bench;
pub mod thrash;
