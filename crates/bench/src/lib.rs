//! Shoal's benchmarks and load generators: the S3 benchmark (warp-like workloads, the
//! Reef cycle), the thrasher, the erasure-code, placement, recovery, growth, scrub and guarded-append
//! benchmarks (each prints a table or `--json`), the small SigV4 S3 client they use, and
//! the process harness of the tests that run `shoal` daemons.

pub mod ec_bench;
pub mod grow_bench;
pub mod guarded_append;
#[cfg(feature = "harness")]
pub mod harness;
pub mod placement_bench;
pub mod recovery_bench;
pub mod s3_bench;
pub mod s3client;
pub mod scrub_bench;
pub mod thrash;

/// The `shoal` binary: `$SHOAL_EXE`, the running binary if it is `shoal`, the `shoal`
/// beside the `deps/` directory a cargo test binary runs from, or else `shoal` on the PATH.
pub fn shoal_exe() -> std::path::PathBuf {
    if let Some(path) = std::env::var_os("SHOAL_EXE") {
        return path.into();
    }
    let Ok(current) = std::env::current_exe() else { return "shoal".into() };
    match current.file_stem().is_some_and(|stem| stem == "shoal") {
        true => current,
        false => current.parent().and_then(std::path::Path::parent).map_or("shoal".into(), |dir| dir.join("shoal")),
    }
}
