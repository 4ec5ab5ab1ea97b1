//! Group commit: one thread syncs the store's WAL for every transaction committed since
//! its last sync, then releases the replies that were waiting for that durability.
//! Writers never sync themselves, so concurrent writers share each sync.

use shoal_store::ObjectStore;
use shoal_types::{Result, err};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};

/// A reply that may be delivered once the store is durable up to `seq`.
pub struct Pending {
    /// Store sequence number the reply depends on.
    pub seq: u64,
    /// Delivers the reply, or the error that made durability impossible.
    pub deliver: Box<dyn FnOnce(Result<()>) + Send>,
}

/// Shared durability state.
pub struct Durability {
    /// Highest store sequence number known durable.
    pub durable_seq: AtomicU64,
    /// Set when a sync failed: nothing written since can be acknowledged.
    pub failed: AtomicBool,
    /// Whether replies wait for syncs at all (off only for benchmarks).
    pub sync_enabled: bool,
    /// Raised when a sync fails.
    pub fault: Arc<crate::fault::Fault>,
    /// Makes the next sync fail, for tests (`tell inject wal-sync-failure`).
    pub inject_sync_failure: AtomicBool,
}

impl Durability {
    /// Whether a reply depending on `seq` may go out now.
    pub fn is_durable(&self, seq: u64) -> bool {
        !self.sync_enabled || seq <= self.durable_seq.load(Ordering::Acquire)
    }
}

/// Most replies waiting for a sync before shards block.
pub const PENDING_QUEUE: usize = 65536;

/// Starts the committer thread; it ends when every sender is dropped.
pub fn start(store: Arc<ObjectStore>, durability: Arc<Durability>) -> SyncSender<Pending> {
    let (tx, rx) = std::sync::mpsc::sync_channel(PENDING_QUEUE);
    std::thread::Builder::new()
        .name("osd-committer".into())
        .spawn(move || run(&store, &durability, rx))
        .expect("spawning the committer thread");
    tx
}

fn run(store: &ObjectStore, durability: &Durability, rx: Receiver<Pending>) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        batch.extend(rx.try_iter());
        let needed = batch.iter().map(|p| p.seq).max().unwrap_or(0);
        let outcome = if durability.failed.load(Ordering::Acquire) {
            Err(err::again(
                "an earlier WAL sync failed: this OSD acknowledges nothing more; resend to the next primary",
            ))
        } else if needed > durability.durable_seq.load(Ordering::Acquire) {
            let synced = if durability.inject_sync_failure.swap(false, Ordering::AcqRel) {
                Err(err::io("injected WAL sync failure"))
            } else {
                store.sync()
            };
            match synced {
                Ok(upto) => {
                    durability.durable_seq.fetch_max(upto, Ordering::AcqRel);
                    Ok(())
                }
                Err(e) => {
                    durability.failed.store(true, Ordering::Release);
                    durability.fault.raise(format!("WAL sync failed ({e}); no further write can be acknowledged"));
                    // Not an answer about the write: the client resends it to the next
                    // primary, which knows it by request id if a replica applied it.
                    Err(err::again(format!("WAL sync failed on this OSD: {e}")))
                }
            }
        } else {
            Ok(())
        };
        for p in batch {
            (p.deliver)(outcome.clone());
        }
    }
}
