//! `shoal rados`: object-layer commands in the manner of Ceph's `rados` tool, one-shot or
//! as an interactive session when no command is given.

use crate::bench::{print_rows, round, run_for};
use crate::session::{ClusterArgs, Session};
use bytes::Bytes;
use clap::{Args, Parser, Subcommand, ValueEnum};
use serde_json::Value;
use shoal_client::{IoCtx, Rados, ReadOp, WriteOp};
use shoal_objclass::lock::{BreakRequest, InfoRequest, LockInfo, LockList, LockRequest, LockType, LockerId};
use shoal_types::{ClientId, PoolSpec, Result, StepOutput, Versioned, err};
use std::io::{BufRead, Read, Write};
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `shoal rados`.
#[derive(Args, Debug)]
pub struct RadosArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    #[command(flatten)]
    target: Target,
    /// The command; without one, commands are read from standard input.
    #[command(subcommand)]
    command: Option<RadosCommand>,
}

/// Pool and namespace a command works in.
#[derive(Args, Debug, Clone, Default)]
struct Target {
    /// Pool to work in.
    #[arg(short = 'p', long, global = true)]
    pool: Option<String>,
    /// Namespace within the pool (default: the default namespace).
    #[arg(short = 'N', long, global = true)]
    namespace: Option<String>,
    /// With `ls`: list objects of every namespace.
    #[arg(long, global = true)]
    all: bool,
    /// Print tables (bench, df) as JSON, one object per row.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Subcommand, Debug)]
enum RadosCommand {
    /// List pools.
    Lspools,
    /// Create a pool.
    Mkpool {
        /// Pool name.
        name: String,
        /// Placement groups.
        #[arg(long, default_value_t = 32)]
        pg_num: u32,
        /// Replicas.
        #[arg(long, default_value_t = 1)]
        size: u32,
        /// Replicas needed for writes (default: size - size/2).
        #[arg(long)]
        min_size: Option<u32>,
    },
    /// Delete a pool and all its objects.
    Rmpool {
        /// Pool name.
        name: String,
    },
    /// List objects.
    Ls,
    /// Store a file (or `-` for stdin) as an object, in operations of 4 MiB.
    Put { name: String, file: PathBuf },
    /// Write an object to a file (or `-` for stdout), read in operations of 4 MiB.
    Get { name: String, file: PathBuf },
    /// Append a file (or `-`) to an object, in operations of 4 MiB.
    Append { name: String, file: PathBuf },
    /// Size, mtime and version of an object.
    Stat { name: String },
    /// Remove an object.
    Rm { name: String },
    /// Where an object lives: its PG and the OSDs serving it (computed from the map).
    Map { name: String },
    /// Set an xattr.
    Setxattr { name: String, key: String, value: String },
    /// Print an xattr.
    Getxattr { name: String, key: String },
    /// List xattr names.
    Listxattr { name: String },
    /// Set an omap value.
    Setomapval { name: String, key: String, value: String },
    /// Print an omap value.
    Getomapval { name: String, key: String },
    /// List omap keys.
    Listomapkeys { name: String },
    /// List omap keys and values.
    Listomapvals { name: String },
    /// Remove an omap key.
    Rmomapkey { name: String, key: String },
    /// Advisory locks (the `lock` object class).
    #[command(subcommand)]
    Lock(LockCommand),
    /// Store statistics: bytes written, WAL, flush, compaction, write amplification.
    Df {
        /// Also print RocksDB's own statistics report.
        #[arg(long)]
        detail: bool,
    },
    /// Benchmark: write, then read sequentially or randomly, for SECONDS.
    Bench {
        /// How long to run.
        seconds: u64,
        /// write, seq or rand.
        mode: BenchMode,
        /// Object size in bytes.
        #[arg(short = 'b', long = "block-size", default_value_t = 4 << 20)]
        block_size: usize,
        /// Concurrent operations.
        #[arg(short = 't', long = "concurrent-ios", default_value_t = 16)]
        threads: usize,
        /// Keep the written objects (needed before seq and rand).
        #[arg(long)]
        no_cleanup: bool,
    },
}

#[derive(Subcommand, Debug)]
enum LockCommand {
    /// Take a lock.
    Get {
        name: String,
        lock_name: String,
        #[arg(long, default_value = "")]
        lock_cookie: String,
        #[arg(long, default_value = "")]
        lock_tag: String,
        #[arg(long, default_value = "")]
        lock_description: String,
        /// Lease in seconds; 0 = until unlocked.
        #[arg(long, default_value_t = 0)]
        lock_duration: u64,
        #[arg(long, value_enum, default_value_t = LockKind::Exclusive)]
        lock_type: LockKind,
    },
    /// Show a lock's holders.
    Info { name: String, lock_name: String },
    /// List the locks on an object.
    List { name: String },
    /// Evict a holder (`client.N`).
    Break {
        name: String,
        lock_name: String,
        locker: String,
        #[arg(long, default_value = "")]
        lock_cookie: String,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum LockKind {
    Exclusive,
    Shared,
}

/// Benchmark modes, as `rados bench`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchMode {
    /// Write new objects.
    Write,
    /// Read the written objects in order.
    Seq,
    /// Read the written objects at random.
    Rand,
    /// Overwrite the written objects at random, whole, with the block size they have.
    RandWrite,
}

/// One line of an interactive session.
#[derive(Parser, Debug)]
#[command(name = "rados", no_binary_name = true)]
struct SessionLine {
    #[command(flatten)]
    target: Target,
    #[command(subcommand)]
    command: RadosCommand,
}

/// Runs `shoal rados`.
pub async fn run(args: RadosArgs) -> Result<()> {
    let session = args.cluster.open().await?;
    let result = match args.command {
        Some(command) => execute(&session, &args.target, command).await,
        None => interactive(&session, args.target).await,
    };
    session.close();
    result
}

async fn interactive(session: &Session, defaults: Target) -> Result<()> {
    eprintln!("shoal rados: type a command (e.g. `lspools`, `-p POOL ls`, `help`); `quit` ends");
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let line = line.map_err(|e| err::io(format!("reading stdin: {e}")))?;
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.first() {
            None => continue,
            Some(&("quit" | "exit")) => break,
            _ => {}
        }
        match SessionLine::try_parse_from(&words) {
            Ok(parsed) => {
                let target = Target {
                    pool: parsed.target.pool.or_else(|| defaults.pool.clone()),
                    namespace: parsed.target.namespace.or_else(|| defaults.namespace.clone()),
                    ..parsed.target
                };
                if let Err(e) = execute(session, &target, parsed.command).await {
                    eprintln!("error: {e}");
                }
            }
            Err(e) => eprintln!("{e}"),
        }
        std::io::stdout().flush().ok();
    }
    Ok(())
}

async fn ioctx(rados: &Rados, target: &Target) -> Result<IoCtx> {
    let pool = target.pool.as_deref().ok_or_else(|| err::invalid("this command needs a pool: -p POOL"))?;
    let mut io = rados.ioctx(pool).await?;
    io.set_namespace(target.namespace.as_deref().unwrap_or(""));
    Ok(io)
}

fn read_input(file: &PathBuf) -> Result<Bytes> {
    let mut data = Vec::new();
    if file.as_os_str() == "-" {
        std::io::stdin().read_to_end(&mut data).map_err(|e| err::io(format!("reading stdin: {e}")))?;
    } else {
        data = std::fs::read(file).map_err(|e| err::io(format!("reading {}: {e}", file.display())))?;
    }
    Ok(Bytes::from(data))
}

fn print_bytes(data: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(data).and_then(|()| out.flush()).map_err(|e| err::io(format!("writing stdout: {e}")))
}

fn single(outputs: Vec<StepOutput>) -> Result<StepOutput> {
    outputs.into_iter().next().ok_or_else(|| err::io("the OSD returned no output"))
}

/// Bytes one operation of `put`, `get` or `append` carries, as Ceph's rados tool (its
/// `op_size`): an object may be larger than a message or one write may be
/// (`osd_max_write_size`).
const OP_SIZE: usize = 4 << 20;

/// `data` cut into `(offset, part)` of at most [`OP_SIZE`] bytes; empty data is one empty part.
fn parts(data: &Bytes) -> impl Iterator<Item = (u64, Bytes)> + '_ {
    (0..data.len().max(1)).step_by(OP_SIZE).map(|at| (at as u64, data.slice(at..data.len().min(at + OP_SIZE))))
}

/// Replaces the object's data with `data`: the first part replaces it, the others follow.
async fn put(io: &IoCtx, name: &str, data: Bytes) -> Result<()> {
    for (offset, part) in parts(&data) {
        let op = if offset == 0 { WriteOp::new().write_full(part) } else { WriteOp::new().write(offset, part) };
        io.operate(name, op).await?;
    }
    Ok(())
}

/// The object's data, read part after part until one comes back short.
async fn get(io: &IoCtx, name: &str) -> Result<Vec<u8>> {
    let mut data = Vec::new();
    loop {
        let reply = io.read(name, ReadOp::new().read(data.len() as u64, OP_SIZE as u64)).await?;
        let StepOutput::Data(part) = single(reply.outputs)? else {
            return Err(err::io("the OSD answered a read with no data"));
        };
        data.extend_from_slice(&part);
        if part.len() < OP_SIZE {
            return Ok(data);
        }
    }
}

/// `(year, month, day)` of a day counted from 1970-01-01 (proleptic Gregorian, after
/// Howard Hinnant's civil-from-days algorithm).
pub fn civil_date(days: u64) -> (i64, i64, i64) {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// `YYYY-MM-DDTHH:MM:SS.ffffffZ` for nanoseconds since the epoch.
pub fn format_time(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let (days, rem) = (secs / 86400, secs % 86400);
    let (year, month, day) = civil_date(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ns % 1_000_000_000 / 1000
    )
}

async fn execute(session: &Session, target: &Target, command: RadosCommand) -> Result<()> {
    let rados = &session.rados;
    match command {
        RadosCommand::Lspools => {
            for pool in rados.pool_list().await? {
                println!("{}", pool.name);
            }
        }
        RadosCommand::Mkpool { name, pg_num, size, min_size } => {
            let pool = rados
                .pool_create(PoolSpec { name, pg_num, size, min_size: min_size.unwrap_or(size - size / 2) })
                .await?;
            println!("successfully created pool {} (id {}, pg_num {})", pool.name, pool.id, pool.pg_num);
        }
        RadosCommand::Rmpool { name } => {
            rados.pool_delete(&name).await?;
            println!("successfully deleted pool {name}");
        }
        RadosCommand::Ls => {
            let io = ioctx(rados, target).await?;
            for object in io.list_all(target.all).await? {
                if target.all {
                    println!("{}\t{}", object.namespace, object.name);
                } else {
                    println!("{}", object.name);
                }
            }
        }
        RadosCommand::Put { name, file } => put(&ioctx(rados, target).await?, &name, read_input(&file)?).await?,
        RadosCommand::Append { name, file } => {
            let (io, data) = (ioctx(rados, target).await?, read_input(&file)?);
            for (_, part) in parts(&data) {
                io.append(&name, part).await?;
            }
        }
        RadosCommand::Get { name, file } => {
            let data = get(&ioctx(rados, target).await?, &name).await?;
            if file.as_os_str() == "-" {
                print_bytes(&data)?;
            } else {
                std::fs::write(&file, &data).map_err(|e| err::io(format!("writing {}: {e}", file.display())))?;
            }
        }
        RadosCommand::Stat { name } => {
            let io = ioctx(rados, target).await?;
            let s = io.stat(&name).await?;
            println!(
                "{}/{} mtime {}, size {}, version {}",
                io.pool().name,
                name,
                format_time(s.mtime_ns),
                s.size,
                s.version
            );
        }
        RadosCommand::Rm { name } => ioctx(rados, target).await?.remove(&name).await?,
        RadosCommand::Map { name } => {
            let io = ioctx(rados, target).await?;
            let map = rados.map();
            let object = shoal_types::ObjectName::new(target.namespace.clone().unwrap_or_default(), name.clone());
            let pg = shoal_placement::pg_of(io.pool(), &object);
            let osds: Vec<String> =
                shoal_placement::pg_up_osds(&map, io.pool(), pg).iter().map(|o| o.0.to_string()).collect();
            println!(
                "osdmap e{} pool '{}' ({}) object '{}' -> pg {} -> up [{}]",
                map.epoch,
                io.pool().name,
                io.pool().id,
                name,
                pg,
                osds.join(",")
            );
        }
        RadosCommand::Setxattr { name, key, value } => {
            ioctx(rados, target).await?.operate(&name, WriteOp::new().set_xattr(&key, value)).await?;
        }
        RadosCommand::Getxattr { name, key } => {
            let reply = ioctx(rados, target).await?.read(&name, ReadOp::new().get_xattr(&key)).await?;
            if let StepOutput::Data(v) = single(reply.outputs)? {
                print_bytes(&v)?;
                println!();
            }
        }
        RadosCommand::Listxattr { name } => {
            let reply = ioctx(rados, target).await?.read(&name, ReadOp::new().get_xattrs()).await?;
            if let StepOutput::Xattrs(x) = single(reply.outputs)? {
                x.keys().for_each(|k| println!("{k}"));
            }
        }
        RadosCommand::Setomapval { name, key, value } => {
            let entry = (Bytes::from(key), Bytes::from(value));
            ioctx(rados, target).await?.operate(&name, WriteOp::new().omap_set([entry])).await?;
        }
        RadosCommand::Getomapval { name, key } => {
            let io = ioctx(rados, target).await?;
            let reply = io.read(&name, ReadOp::new().omap_get_vals_by_keys([Bytes::from(key.clone())])).await?;
            match single(reply.outputs)? {
                StepOutput::OmapVals { entries, .. } if !entries.is_empty() => {
                    print_bytes(&entries[0].1)?;
                    println!();
                }
                _ => return Err(err::not_found(format!("no omap key '{key}' on {name}"))),
            }
        }
        RadosCommand::Listomapkeys { name } => {
            for (k, _) in omap_all(&ioctx(rados, target).await?, &name).await? {
                println!("{}", String::from_utf8_lossy(&k));
            }
        }
        RadosCommand::Listomapvals { name } => {
            for (k, v) in omap_all(&ioctx(rados, target).await?, &name).await? {
                println!("{}\t{}", String::from_utf8_lossy(&k), String::from_utf8_lossy(&v));
            }
        }
        RadosCommand::Rmomapkey { name, key } => {
            ioctx(rados, target).await?.operate(&name, WriteOp::new().omap_rm_keys([Bytes::from(key)])).await?;
        }
        RadosCommand::Lock(lock) => lock_command(&ioctx(rados, target).await?, lock).await?,
        RadosCommand::Df { detail } => {
            let local = session.need_local("df")?;
            let s = local.store.stats();
            let space = local.store.space();
            // Counters cover this process's run; live_bytes is the store's size on disk.
            let row = vec![
                ("device_bytes", Value::from(space.device)),
                ("used_bytes", Value::from(space.referenced)),
                ("free_bytes", Value::from(space.free)),
                ("unreferenced_bytes", Value::from(space.unreferenced)),
                ("live_bytes", Value::from(s.live_bytes)),
                ("user_bytes_written", Value::from(s.user_bytes_written)),
                ("wal_bytes", Value::from(s.wal_bytes)),
                ("wal_syncs", Value::from(s.wal_syncs)),
                ("flush_bytes", Value::from(s.flush_bytes)),
                ("compaction_bytes", Value::from(s.compaction_bytes)),
                ("write_amp", round(s.write_amplification(), 2)),
            ];
            print_rows(&[row], target.json);
            if detail {
                println!("{}", local.rocksdb_report());
            }
        }
        RadosCommand::Bench { seconds, mode, block_size, threads, no_cleanup } => {
            let io = ioctx(rados, target).await?;
            let row = rados_bench(session, io.clone(), Duration::from_secs(seconds), mode, block_size, threads.max(1))
                .await?;
            print_rows(&[row], target.json);
            if mode == BenchMode::Write && !no_cleanup {
                let removed = bench_cleanup(&io, threads.max(16)).await?;
                eprintln!("removed {removed} benchmark objects");
            }
        }
    }
    Ok(())
}

async fn omap_all(io: &IoCtx, name: &str) -> Result<Vec<(Bytes, Bytes)>> {
    let mut out: Vec<(Bytes, Bytes)> = Vec::new();
    loop {
        let after = out.last().map(|(k, _)| k.clone()).unwrap_or_default();
        let reply = io.read(name, ReadOp::new().omap_get_vals(after, Bytes::new(), 1000)).await?;
        match single(reply.outputs)? {
            StepOutput::OmapVals { entries, more } => {
                out.extend(entries);
                if !more {
                    return Ok(out);
                }
            }
            other => return Err(err::io(format!("unexpected output {other:?}"))),
        }
    }
}

async fn lock_command(io: &IoCtx, command: LockCommand) -> Result<()> {
    use shoal_objclass::lock::CLASS;
    match command {
        LockCommand::Get { name, lock_name, lock_cookie, lock_tag, lock_description, lock_duration, lock_type } => {
            let req = LockRequest {
                name: lock_name,
                lock_type: match lock_type {
                    LockKind::Exclusive => LockType::Exclusive,
                    LockKind::Shared => LockType::Shared,
                },
                cookie: lock_cookie,
                tag: lock_tag,
                description: lock_description,
                duration_ns: lock_duration.saturating_mul(1_000_000_000),
                may_renew: false,
                must_renew: false,
            };
            io.exec(&name, CLASS, "lock", req.encode()).await?;
        }
        LockCommand::Info { name, lock_name } => {
            let out = io.exec(&name, CLASS, "get_info", InfoRequest { name: lock_name }.encode()).await?;
            let info = LockInfo::decode(&out)?;
            println!("type {:?} tag '{}'", info.lock_type, info.tag);
            for (who, l) in info.lockers {
                let expires = if l.expires_ns == 0 { "never".to_owned() } else { format_time(l.expires_ns) };
                println!(
                    "  {} cookie '{}' expires {} description '{}'",
                    who.client, who.cookie, expires, l.description
                );
            }
        }
        LockCommand::List { name } => {
            let out = io.exec(&name, CLASS, "list_locks", Bytes::new()).await?;
            LockList::decode(&out)?.names.iter().for_each(|n| println!("{n}"));
        }
        LockCommand::Break { name, lock_name, locker, lock_cookie } => {
            let id = locker
                .strip_prefix("client.")
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| err::invalid(format!("locker '{locker}' is not client.N")))?;
            let req = BreakRequest { name: lock_name, locker: LockerId { client: ClientId(id), cookie: lock_cookie } };
            io.exec(&name, CLASS, "break_lock", req.encode()).await?;
        }
    }
    Ok(())
}

const BENCH_META: &str = "benchmark_last_metadata";

fn bench_object(i: u64) -> String {
    format!("benchmark_data_{i}")
}

async fn rados_bench(
    session: &Session,
    io: IoCtx,
    duration: Duration,
    mode: BenchMode,
    block_size: usize,
    threads: usize,
) -> Result<Vec<(&'static str, Value)>> {
    let stats_now = || session.local().map(|l| l.store.stats());
    let before = stats_now();
    let (stats, block_size) = match mode {
        BenchMode::Write => {
            let payload = Bytes::from((0..block_size).map(|i| (i % 251) as u8).collect::<Vec<u8>>());
            let written = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
            let (io2, w2) = (io.clone(), written.clone());
            let stats = run_for("write", threads, duration, move |_, _| {
                let (io, payload, written) = (io2.clone(), payload.clone(), w2.clone());
                async move {
                    let i = written.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    io.write_full(&bench_object(i), payload.clone()).await?;
                    Ok(payload.len() as u64)
                }
            })
            .await?;
            let count = written.load(std::sync::atomic::Ordering::Relaxed);
            let meta = WriteOp::new().set_xattr("count", count.to_string()).set_xattr("size", block_size.to_string());
            io.operate(BENCH_META, meta).await?;
            (stats, block_size)
        }
        BenchMode::Seq | BenchMode::Rand | BenchMode::RandWrite => {
            let reply = io.read(BENCH_META, ReadOp::new().get_xattrs()).await.map_err(|e| {
                err::not_found(format!("no benchmark data to read ({e}); run `bench N write --no-cleanup` first"))
            })?;
            let StepOutput::Xattrs(meta) = single(reply.outputs)? else {
                return Err(err::io("bad benchmark metadata"));
            };
            let field =
                |k: &str| -> u64 { meta.get(k).and_then(|v| std::str::from_utf8(v).ok()?.parse().ok()).unwrap_or(0) };
            let (count, size) = (field("count").max(1), field("size") as usize);
            let io2 = io.clone();
            let payload = Bytes::from((0..size).map(|i| (i % 241) as u8).collect::<Vec<u8>>());
            let label = match mode {
                BenchMode::Seq => "seq",
                BenchMode::Rand => "rand",
                _ => "rand-write",
            };
            let stats = run_for(label, threads, duration, move |w, i| {
                let (io, payload) = (io2.clone(), payload.clone());
                async move {
                    let index = match mode {
                        BenchMode::Seq => (i * threads as u64 + w as u64) % count,
                        _ => rand::random_range(0..count),
                    };
                    if mode == BenchMode::RandWrite {
                        io.write_full(&bench_object(index), payload.clone()).await?;
                        return Ok(payload.len() as u64);
                    }
                    Ok(io.read_full(&bench_object(index)).await?.len() as u64)
                }
            })
            .await?;
            (stats, size)
        }
    };
    let mut row = vec![
        ("mode", Value::from(format!("{mode:?}").to_lowercase())),
        ("threads", Value::from(threads)),
        ("block_size", Value::from(block_size)),
    ];
    row.extend(stats.columns());
    if let (Some(before), Some(after)) = (before, stats_now()) {
        let delta = after.since(&before);
        row.push(("wal_syncs", Value::from(delta.wal_syncs)));
        row.push(("write_amp", round(delta.write_amplification(), 2)));
    }
    Ok(row)
}

/// Removes the objects a write benchmark left, `threads` at a time.
async fn bench_cleanup(io: &IoCtx, threads: usize) -> Result<u64> {
    let doomed: Vec<String> = io
        .list_all(false)
        .await?
        .into_iter()
        .map(|o| o.name)
        .filter(|n| n.starts_with("benchmark_data_") || n == BENCH_META)
        .collect();
    let count = doomed.len() as u64;
    let mut workers = tokio::task::JoinSet::new();
    for part in 0..threads {
        let io = io.clone();
        let names: Vec<String> = doomed.iter().skip(part).step_by(threads).cloned().collect();
        workers.spawn(async move {
            for name in names {
                io.remove(&name).await?;
            }
            Ok::<(), shoal_types::RadosError>(())
        });
    }
    while let Some(done) = workers.join_next().await {
        done.map_err(|e| err::io(format!("cleanup worker failed: {e}")))??;
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_is_cut_into_parts_of_op_size() {
        let cut = |len: usize| -> Vec<(u64, usize)> {
            parts(&Bytes::from(vec![7u8; len])).map(|(offset, part)| (offset, part.len())).collect()
        };
        assert_eq!(cut(0), [(0, 0)], "empty data still writes (creates) the object");
        assert_eq!(cut(5), [(0, 5)]);
        assert_eq!(cut(2 * OP_SIZE), [(0, OP_SIZE), (OP_SIZE as u64, OP_SIZE)]);
        assert_eq!(cut(2 * OP_SIZE + 1), [(0, OP_SIZE), (OP_SIZE as u64, OP_SIZE), (2 * OP_SIZE as u64, 1)]);
    }
}
