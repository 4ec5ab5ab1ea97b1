//! `shoal bench guarded-append`: the experiment of the RADOS compound-operations post.
//! N clients append 4 KiB to one object, plainly, through the `guard` object class (epoch
//! check + append), and as a compound op (`omap_cmp` on the epoch + append).

use bytes::Bytes;
use clap::Args;
use serde_json::Value;
use shoal_client::{IoCtx, OpBuilder, WriteOp};
use shoal_node::bench::{RunStats, print_rows, round, run_for};
use shoal_node::session::{ClusterArgs, Session};
use shoal_objclass::guard::{AppendRequest, Epoch};
use shoal_types::{CmpMode, CmpOp, Errno, PoolSpec, Result, Versioned};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Arguments of `shoal bench guarded-append`.
#[derive(Args, Debug)]
pub struct GuardedAppendArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Seconds per measurement (split over the rounds).
    #[arg(long, default_value_t = 6)]
    seconds: u64,
    /// Rounds per client count (default: one per second): the variants take turns in a
    /// rotating order, so that drift of a shared machine and of the store (flushes,
    /// compactions, fsync stalls) hits them alike.
    #[arg(long)]
    rounds: Option<u32>,
    /// Client counts to measure, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32")]
    clients: Vec<usize>,
    /// Variants to measure, comma separated (plain is always measured: it is the baseline).
    #[arg(long, value_delimiter = ',', default_value = "guard-class,omap-cmp")]
    variants: Vec<String>,
    /// Append size in bytes.
    #[arg(long, default_value_t = 4096)]
    size: usize,
    /// Print one JSON object per row.
    #[arg(long)]
    json: bool,
}

/// How each append is guarded.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Variant {
    Plain,
    GuardClass,
    OmapCmp,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Plain => "plain",
            Variant::GuardClass => "guard-class",
            Variant::OmapCmp => "omap-cmp",
        }
    }
}

/// Appends per object before the clients move on to the next one (keeps objects small).
const APPENDS_PER_OBJECT: u64 = 8192;
/// Objects prepared per run.
const OBJECTS_PER_RUN: u64 = 16;
const POOL: &str = "bench-guarded-append";

fn op(variant: Variant, payload: &Bytes) -> WriteOp {
    match variant {
        Variant::Plain => WriteOp::new().append(payload.clone()),
        Variant::GuardClass => {
            let req = AppendRequest { epoch: 1, payload: payload.clone() };
            WriteOp::new().exec(shoal_objclass::guard::CLASS, "append", req.encode())
        }
        Variant::OmapCmp => WriteOp::new()
            .omap_cmp(BTreeMap::from([(
                Bytes::from_static(b"epoch"),
                (CmpOp::Eq, CmpMode::Bytes, Bytes::from_static(b"1")),
            )]))
            .append(payload.clone()),
    }
}

async fn prepare(io: &IoCtx, variant: Variant, base: &str) -> Result<()> {
    for i in 0..OBJECTS_PER_RUN {
        let name = format!("{base}.{i}");
        let setup = match variant {
            Variant::Plain => WriteOp::new().create(false),
            Variant::GuardClass => {
                WriteOp::new().exec(shoal_objclass::guard::CLASS, "set_epoch", Epoch { epoch: 1 }.encode())
            }
            Variant::OmapCmp => WriteOp::new().omap_set([(Bytes::from_static(b"epoch"), Bytes::from_static(b"1"))]),
        };
        io.operate(&name, setup).await?;
    }
    Ok(())
}

/// Runs the benchmark and prints its table.
pub async fn run(args: GuardedAppendArgs) -> Result<()> {
    let session = args.cluster.open().await?;
    let result = measure(&session, &args).await;
    session.close();
    print_rows(&result?, args.json);
    Ok(())
}

async fn measure(session: &Session, args: &GuardedAppendArgs) -> Result<Vec<Vec<(&'static str, Value)>>> {
    let rados = &session.rados;
    let wal_bytes_now = || session.local().map_or(0, |l| l.store.stats().wal_bytes);
    // One PG: every variant's object is then served by the same shard thread. Hot objects
    // on different shards measured up to 20% apart on a 2-core machine, which would
    // drown the difference between the variants.
    match rados.pool_create(PoolSpec { pg_num: 1, ..PoolSpec::named(POOL, 1) }).await {
        Err(e) if e.errno != Errno::Exists => return Err(e),
        _ => {}
    }
    let io = rados.ioctx(POOL).await?;
    let payload = Bytes::from(vec![0x5a; args.size]);
    let run_id = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut variants = vec![Variant::Plain];
    for name in &args.variants {
        let v = [Variant::GuardClass, Variant::OmapCmp]
            .into_iter()
            .find(|v| v.name() == name)
            .ok_or_else(|| shoal_types::err::invalid(format!("unknown variant '{name}' (guard-class, omap-cmp)")))?;
        variants.push(v);
    }
    let rounds = args.rounds.unwrap_or(args.seconds as u32).max(1);
    let slice = Duration::from_secs_f64(args.seconds as f64 / f64::from(rounds));
    let mut rows = Vec::new();
    for &clients in &args.clients {
        let mut runs: Vec<Vec<RunStats>> = variants.iter().map(|_| Vec::new()).collect();
        let mut wal_bytes = vec![0u64; variants.len()];
        for round in 0..rounds as usize {
            for k in 0..variants.len() {
                let v = (k + round) % variants.len();
                let variant = variants[v];
                let base = format!("{run_id}-{}-{clients}-{round}", variant.name());
                prepare(&io, variant, &base).await?;
                let counter = Arc::new(AtomicU64::new(0));
                let (io2, payload2) = (io.clone(), payload.clone());
                let label = format!("{} x{clients} round {}", variant.name(), round + 1);
                let wal_before = wal_bytes_now();
                let stats = run_for(&label, clients, slice, move |_, _| {
                    let (io, payload, counter, base) = (io2.clone(), payload2.clone(), counter.clone(), base.clone());
                    async move {
                        let n = counter.fetch_add(1, Ordering::Relaxed) / APPENDS_PER_OBJECT % OBJECTS_PER_RUN;
                        io.operate(&format!("{base}.{n}"), op(variant, &payload)).await?;
                        Ok(payload.len() as u64)
                    }
                })
                .await?;
                wal_bytes[v] += wal_bytes_now() - wal_before;
                runs[v].push(stats);
            }
        }
        let merged: Vec<RunStats> = runs.into_iter().map(RunStats::merge).collect();
        let plain = merged[0].ops_per_sec();
        for ((variant, stats), wal) in variants.iter().zip(&merged).zip(&wal_bytes) {
            let mut row = vec![("clients", Value::from(clients)), ("variant", Value::from(variant.name()))];
            row.extend(stats.columns());
            row.push(("wal_bytes_per_op", Value::from(wal / stats.ops.max(1))));
            row.push(("vs_plain", round(stats.ops_per_sec() / plain.max(1e-9), 3)));
            rows.push(row);
        }
    }
    Ok(rows)
}
