//! Hidden tools for crash testing: a writer that appends to objects and omaps and prints
//! each acknowledgement, and a verifier that reports what survived.
//!
//! Each object `crash.<w>` gets, per write, one atomic operation: a 16-byte record
//! appended to its data, an omap key for the record, and the xattr `last`. A half-applied
//! operation would show as a record without its key, a key without its record, or a
//! `last` that disagrees with them.

use crate::session::{ClusterArgs, Session};
use bytes::Bytes;
use clap::Subcommand;
use shoal_client::{IoCtx, ReadOp, WriteOp};
use shoal_types::{Errno, PoolSpec, Result, StepOutput, err};
use std::io::Write;

const POOL: &str = "crash";
const RECORD: usize = 16;

/// Hidden debugging commands.
#[derive(Subcommand, Debug)]
pub enum DebugCommand {
    /// Append to objects forever, printing `ack <writer> <seq>` after each acknowledgement.
    CrashWriter {
        /// The embedded object layer.
        #[command(flatten)]
        cluster: ClusterArgs,
        /// Concurrent writers, one object each.
        #[arg(long, default_value_t = 8)]
        writers: u64,
    },
    /// Print, per object, `<writer> <last> <records> <omap keys>` after checking consistency.
    CrashVerify {
        /// The embedded object layer.
        #[command(flatten)]
        cluster: ClusterArgs,
        /// Writers the writer ran with.
        #[arg(long, default_value_t = 8)]
        writers: u64,
    },
}

fn record(writer: u64, seq: u64) -> [u8; RECORD] {
    let mut r = [0u8; RECORD];
    r[..8].copy_from_slice(&seq.to_le_bytes());
    r[8..].copy_from_slice(&(seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ writer).to_le_bytes());
    r
}

async fn last_seq(io: &IoCtx, object: &str) -> Result<u64> {
    match io.read(object, ReadOp::new().get_xattr("last")).await {
        Ok(reply) => match reply.outputs.into_iter().next() {
            Some(StepOutput::Data(v)) => std::str::from_utf8(&v)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| err::io(format!("{object}: bad last"))),
            _ => Err(err::io("unexpected output")),
        },
        Err(e) if e.errno == Errno::NotFound => Ok(0),
        Err(e) => Err(e),
    }
}

/// Runs a debug command.
pub async fn run(command: DebugCommand) -> Result<()> {
    match command {
        DebugCommand::CrashWriter { cluster, writers } => {
            let session = cluster.open().await?;
            match session.rados.pool_create(PoolSpec::named(POOL, 1)).await {
                Err(e) if e.errno != Errno::Exists => return Err(e),
                _ => {}
            }
            let io = session.rados.ioctx(POOL).await?;
            let tasks: Vec<_> = (0..writers)
                .map(|w| {
                    let io = io.clone();
                    tokio::spawn(async move {
                        let object = format!("crash.{w}");
                        let mut seq = last_seq(&io, &object).await?;
                        loop {
                            seq += 1;
                            let op = WriteOp::new()
                                .append(Bytes::copy_from_slice(&record(w, seq)))
                                .omap_set([(Bytes::from(format!("{seq:020}")), Bytes::from(format!("{w}")))])
                                .set_xattr("last", seq.to_string());
                            io.operate(&object, op).await?;
                            let mut out = std::io::stdout().lock();
                            writeln!(out, "ack {w} {seq}")
                                .and_then(|()| out.flush())
                                .map_err(|e| err::io(e.to_string()))?;
                        }
                        #[allow(unreachable_code)]
                        Ok::<(), shoal_types::RadosError>(())
                    })
                })
                .collect();
            for t in tasks {
                t.await.map_err(|e| err::io(e.to_string()))??;
            }
            Ok(())
        }
        DebugCommand::CrashVerify { cluster, writers } => {
            let session = cluster.open().await?;
            let result = verify(&session, writers).await;
            session.close();
            result
        }
    }
}

async fn verify(session: &Session, writers: u64) -> Result<()> {
    let io = session.rados.ioctx(POOL).await?;
    for w in 0..writers {
        let object = format!("crash.{w}");
        let last = last_seq(&io, &object).await?;
        if last == 0 {
            println!("{w} 0 0 0");
            continue;
        }
        let data = io.read_full(&object).await?;
        if data.len() % RECORD != 0 {
            return Err(err::io(format!("{object}: torn data, {} bytes", data.len())));
        }
        for (i, chunk) in data.chunks(RECORD).enumerate() {
            let expected = record(w, i as u64 + 1);
            if chunk != expected {
                return Err(err::io(format!("{object}: record {} is wrong", i + 1)));
            }
        }
        let keys: Vec<Bytes> = io.omap_vals_all(&object, b"").await?.into_iter().map(|(k, _)| k).collect();
        let records = (data.len() / RECORD) as u64;
        let expected_keys: Vec<Bytes> = (1..=records).map(|s| Bytes::from(format!("{s:020}"))).collect();
        if keys != expected_keys || records != last {
            return Err(err::io(format!(
                "{object}: half-applied state: last {last}, {records} records, {} keys",
                keys.len()
            )));
        }
        println!("{w} {last} {records} {}", keys.len());
    }
    Ok(())
}
