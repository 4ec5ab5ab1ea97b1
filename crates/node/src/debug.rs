//! Hidden tools for crash testing: a writer that prints each acknowledgement, a verifier
//! that reports what survived, and a check of a stopped store's books.
//!
//! In the append mode each object `crash.<w>` gets, per write, one atomic operation: a
//! 16-byte record appended to its data, an omap key for the record, and the xattr `last`.
//! A half-applied operation would show as a record without its key, a key without its
//! record, or a `last` that disagrees with them.
//!
//! In the large mode (`--object-size`) writer `w`'s write `seq` replaces object
//! `large.<w>.<seq % keys>` whole with bytes that only `(w, seq)` produces, and sets its
//! xattr `seq`: an object is then either one write's bytes or torn.

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
        /// Large mode: each write replaces a whole object of this many bytes.
        #[command(flatten)]
        large: LargeArgs,
    },
    /// Print, per object, `<writer> <last> <records> <omap keys>` after checking consistency
    /// (large mode: `<writer> <key> <seq>`).
    CrashVerify {
        /// The embedded object layer.
        #[command(flatten)]
        cluster: ClusterArgs,
        /// Writers the writer ran with.
        #[arg(long, default_value_t = 8)]
        writers: u64,
        /// The large mode the writer ran with.
        #[command(flatten)]
        large: LargeArgs,
    },
    /// Flip a stored byte of one chunk of an object's copy on an OSD's data device (Ceph's
    /// `injectdataerr`), so the next read of that copy fails its checksum.
    Corrupt {
        /// Where the cluster is.
        #[command(flatten)]
        cluster: ClusterArgs,
        /// The pool.
        #[arg(long)]
        pool: String,
        /// The object.
        #[arg(long)]
        object: String,
        /// The OSD whose copy to damage; the object's primary when not given.
        #[arg(long)]
        osd: Option<u32>,
        /// The chunk (checksum block) to damage.
        #[arg(long, default_value_t = 0)]
        chunk: u32,
        /// Rewrite the chunk with the byte flipped, checksum and all (`injectrewrite`): reads
        /// succeed, and only comparing copies or parity finds it.
        #[arg(long)]
        rewrite: bool,
    },
    /// Check a stopped store's books: extent records against objects and free space;
    /// exits non-zero when something is wrong.
    Fsck {
        /// The store's directory (an OSD's, or `shoal server --data`'s).
        #[arg(long, value_name = "DIR")]
        data: std::path::PathBuf,
        /// Also read every extent and check its checksum.
        #[arg(long)]
        deep: bool,
        /// A configuration option, `key=value` (repeatable).
        #[arg(short = 'o', long = "option", value_name = "KEY=VALUE")]
        options: Vec<String>,
    },
}

/// The large mode of the crash writer.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct LargeArgs {
    /// Bytes per object; 0 keeps the append mode.
    #[arg(long, default_value_t = 0)]
    object_size: usize,
    /// Objects per writer that its writes cycle over (each write after the first round
    /// overwrites one).
    #[arg(long, default_value_t = 3)]
    keys: u64,
}

/// The bytes of writer `w`'s write `seq`: a splitmix64 stream seeded by both.
fn large_contents(w: u64, seq: u64, size: usize) -> Bytes {
    let mut state = w.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ seq.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let mut out = Vec::with_capacity(size + 8);
    while out.len() < size {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(size);
    Bytes::from(out)
}

fn record(writer: u64, seq: u64) -> [u8; RECORD] {
    let mut r = [0u8; RECORD];
    r[..8].copy_from_slice(&seq.to_le_bytes());
    r[8..].copy_from_slice(&(seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ writer).to_le_bytes());
    r
}

async fn last_seq(io: &IoCtx, object: &str) -> Result<u64> {
    xattr_seq(io, object, "last").await
}

/// The number in xattr `name` of `object`; 0 when the object does not exist.
async fn xattr_seq(io: &IoCtx, object: &str, name: &str) -> Result<u64> {
    match io.read(object, ReadOp::new().get_xattr(name)).await {
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
        DebugCommand::CrashWriter { cluster, writers, large } => {
            let session = cluster.open().await?;
            match session.rados.pool_create(PoolSpec::named(POOL, 1)).await {
                Err(e) if e.errno != Errno::Exists => return Err(e),
                _ => {}
            }
            let io = session.rados.ioctx(POOL).await?;
            if large.object_size > 0 {
                return write_large(&io, writers, large).await;
            }
            let mut starts = Vec::new();
            for w in 0..writers {
                starts.push(last_seq(&io, &format!("crash.{w}")).await?);
            }
            run_writers(&io, starts, |w, seq| {
                let op = WriteOp::new()
                    .append(Bytes::copy_from_slice(&record(w, seq)))
                    .omap_set([(Bytes::from(format!("{seq:020}")), Bytes::from(format!("{w}")))])
                    .set_xattr("last", seq.to_string());
                (format!("crash.{w}"), op)
            })
            .await
        }
        DebugCommand::CrashVerify { cluster, writers, large } => {
            let session = cluster.open().await?;
            let result = if large.object_size > 0 {
                verify_large(&session, writers, large).await
            } else {
                verify(&session, writers).await
            };
            session.close();
            result
        }
        DebugCommand::Fsck { data, deep, options } => fsck(&data, deep, &options),
        DebugCommand::Corrupt { cluster, pool, object, osd, chunk, rewrite } => {
            let session = cluster.open().await?;
            let result = corrupt(&session, &pool, &object, osd, chunk, rewrite).await;
            session.close();
            result
        }
    }
}

async fn corrupt(
    session: &Session,
    pool: &str,
    object: &str,
    osd: Option<u32>,
    chunk: u32,
    rewrite: bool,
) -> Result<()> {
    let map = session.rados.refresh_map().await?;
    let spec = map.pool_named(pool)?;
    let pg = shoal_placement::pg_of(spec, &shoal_types::ObjectName::new("", object));
    let primary = shoal_placement::pg_primary(&map, spec, pg);
    let target = match osd {
        Some(id) => shoal_types::OsdId(id),
        None => primary.ok_or_else(|| err::again(format!("no OSD is up for {pool}/{object}")))?,
    };
    let role = if primary == Some(target) { "primary" } else { "replica" };
    let verb = if rewrite { "injectrewrite" } else { "injectdataerr" };
    session.rados.tell_osd(target, &format!("{verb} {pool} {object} {chunk}")).await?;
    print_line(format_args!("corrupted chunk {chunk} of {pool}/{object} on {target} ({role})"))
}

fn print_line(line: std::fmt::Arguments) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush()).map_err(|e| err::io(e.to_string()))
}

/// Runs one task per writer forever: writer `w` resumes after `starts[w]` and sends its
/// write `seq` as `next(w, seq)` (object, operation), printing `ack w seq` once it is
/// acknowledged.
async fn run_writers(
    io: &IoCtx,
    starts: Vec<u64>,
    next: impl Fn(u64, u64) -> (String, WriteOp) + Copy + Send + 'static,
) -> Result<()> {
    let tasks: Vec<_> = starts
        .into_iter()
        .enumerate()
        .map(|(w, mut seq)| {
            let io = io.clone();
            let w = w as u64;
            tokio::spawn(async move {
                loop {
                    seq += 1;
                    let (object, op) = next(w, seq);
                    io.operate(&object, op).await?;
                    print_line(format_args!("ack {w} {seq}"))?;
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

async fn write_large(io: &IoCtx, writers: u64, large: LargeArgs) -> Result<()> {
    // Each writer resumes after the newest of its writes that survived.
    let mut starts = Vec::new();
    for w in 0..writers {
        let mut seq = 0;
        for k in 0..large.keys {
            seq = seq.max(xattr_seq(io, &format!("large.{w}.{k}"), "seq").await?);
        }
        starts.push(seq);
    }
    run_writers(io, starts, move |w, seq| {
        let op = WriteOp::new().write_full(large_contents(w, seq, large.object_size)).set_xattr("seq", seq.to_string());
        (format!("large.{w}.{}", seq % large.keys), op)
    })
    .await
}

async fn verify_large(session: &Session, writers: u64, large: LargeArgs) -> Result<()> {
    let io = session.rados.ioctx(POOL).await?;
    for w in 0..writers {
        for k in 0..large.keys {
            let object = format!("large.{w}.{k}");
            let seq = xattr_seq(&io, &object, "seq").await?;
            if seq > 0 {
                let data = io.read_full(&object).await?;
                if data != large_contents(w, seq, large.object_size) {
                    return Err(err::io(format!("{object}: torn: its bytes are not those of write {seq}")));
                }
            }
            println!("{w} {k} {seq}");
        }
    }
    Ok(())
}

fn fsck(data: &std::path::Path, deep: bool, options: &[String]) -> Result<()> {
    let config = crate::config::Config::from_settings(options)?;
    let (kv, store) = crate::embedded::open_store(data, &config)?;
    let report = store.fsck(deep);
    kv.close();
    let report = report?;
    println!(
        "objects {} extents {} stashed {} referenced {} allocated {}",
        report.objects, report.extents, report.stashed, report.referenced, report.allocated
    );
    for e in &report.errors {
        println!("error: {e}");
    }
    match report.errors.len() {
        0 => Ok(()),
        n => Err(err::io(format!("fsck found {n} problems in {}", data.display()))),
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
