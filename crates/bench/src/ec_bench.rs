//! `shoal bench ec`: how fast the erasure code encodes and decodes on this machine, per
//! code and object size, one core: encode (deal the object into stripes and compute the
//! parity), read with every data shard present (join, no decoding), and a degraded read
//! with `m` data shards lost (rebuild them, then join). Throughput counts object bytes.

use clap::Args;
use shoal_erasure::{ErasureCoder, StripeLayout};
use shoal_node::bench::{print_rows, round, run_for};
use shoal_types::{Result, err};
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `shoal bench ec`.
#[derive(Args, Debug)]
pub struct EcBenchArgs {
    /// Codes to measure, `k+m` separated by commas.
    #[arg(long, default_value = "2+2,4+2,8+3")]
    codes: String,
    /// Object sizes in KiB, separated by commas.
    #[arg(long, default_value = "64,4096,65536")]
    sizes_kib: String,
    /// Bytes of a stripe on one shard.
    #[arg(long, default_value_t = 4096)]
    stripe_unit: u32,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Print JSON rows.
    #[arg(long)]
    json: bool,
}

fn parse_code(code: &str) -> Result<(u32, u32)> {
    let bad = || err::invalid(format!("'{code}' is not a code like 4+2"));
    let (k, m) = code.trim().split_once('+').ok_or_else(bad)?;
    Ok((k.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?))
}

/// Runs the measurements and prints a row per code, size and operation.
pub async fn run(args: EcBenchArgs) -> Result<()> {
    let duration = Duration::from_secs_f64(args.seconds);
    let mut rows = Vec::new();
    for code in args.codes.split(',') {
        let (k, m) = parse_code(code)?;
        let coder: Arc<dyn ErasureCoder> = Arc::from(shoal_erasure::coder(k, m)?);
        let layout = StripeLayout { k, m, unit: args.stripe_unit };
        for size in args.sizes_kib.split(',') {
            let kib: usize = size.trim().parse().map_err(|_| err::invalid(format!("'{size}' is not a size in KiB")))?;
            let data: Arc<Vec<u8>> = Arc::new((0..kib << 10).map(|i| (i * 131 % 251) as u8).collect());
            let shards = layout.encode(coder.as_ref(), &data)?;
            let bytes = data.len() as u64;
            let (c, d) = (coder.clone(), data.clone());
            let encode = run_for("encode", 1, duration, move |_, _| {
                let result = layout.encode(c.as_ref(), &d).map(|_| bytes);
                async move { result }
            })
            .await?;
            let present = Arc::new(shards.clone());
            let read = run_for("read", 1, duration, move |_, _| {
                let data: Vec<&[u8]> = present[..k as usize].iter().map(Vec::as_slice).collect();
                let result = layout.join(&data).map(|_| bytes);
                async move { result }
            })
            .await?;
            let slots = Arc::new(std::sync::Mutex::new(shards.into_iter().map(Some).collect::<Vec<_>>()));
            let c = coder.clone();
            let degraded = run_for("degraded read", 1, duration, move |_, _| {
                let mut slots = slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                for lost in slots.iter_mut().take(m as usize) {
                    *lost = None;
                }
                let result = layout.decode(c.as_ref(), &mut slots).map(|_| bytes);
                async move { result }
            })
            .await?;
            let ops = [("encode".to_owned(), encode), ("read".to_owned(), read), (format!("read, {m} lost"), degraded)];
            for (op, stats) in ops {
                let mut row = vec![
                    ("code", serde_json::Value::from(format!("{k}+{m}"))),
                    ("object_kib", serde_json::Value::from(kib)),
                    ("op", serde_json::Value::from(op)),
                    ("gb_per_sec", round(stats.mb_per_sec() / 1000.0, 2)),
                ];
                row.extend(stats.columns());
                rows.push(row);
            }
        }
    }
    print_rows(&rows, args.json);
    Ok(())
}
