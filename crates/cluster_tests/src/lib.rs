//! Tests only (`tests/`): `shoal` daemons as separate processes, driven through the CLI as
//! an operator would, with the harness of `shoal-bench`. They run the `shoal` binary the
//! workspace's test build makes (`cargo test --workspace`).
