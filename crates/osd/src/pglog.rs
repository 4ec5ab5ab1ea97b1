//! The PG log: one entry per applied write, keyed by the PG's version, recording the
//! client's request id and the reply. A request resent after a lost connection (or, with
//! replication, after a primary change) is recognised by its request id and answered with
//! the recorded reply instead of being applied twice.
//!
//! Entries live in the store's `meta` column family next to the PG's version record and are
//! written in the same transaction as the change they describe. The newest
//! `osd_pg_log_entries` are kept; older ones are trimmed in batches so that trimming costs
//! one range delete per batch, not per write.

use serde::{Deserialize, Serialize};
use shoal_store::{ObjectStore, Transaction, pg_log_key, pg_meta_key};
use shoal_types::msg::OpReply;
use shoal_types::{ObjectName, PgId, ReqId, Result, StepOutput, Versioned, err};
use std::collections::{HashMap, VecDeque};

/// Outputs larger than this (encoded) are not kept; a resend then gets the version only.
pub const MAX_RETAINED_OUTPUT_BYTES: usize = 64 << 10;
/// Entries trimmed at once.
const TRIM_BATCH: usize = 128;

/// One applied write.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PgLogEntry {
    /// The PG version the write created (the object's new user version).
    pub version: u64,
    /// The request that made it.
    pub reqid: ReqId,
    /// The object it changed.
    pub object: ObjectName,
    /// The reply's outputs, unless they were too large to keep.
    pub outputs: Option<Vec<StepOutput>>,
}

impl Versioned for PgLogEntry {
    const NAME: &'static str = "pg log entry";
    const VERSION: u8 = 1;
}

/// What a shard keeps in memory about one PG.
pub struct PgState {
    pg: PgId,
    /// The version of the PG's latest write.
    pub last_version: u64,
    replies: HashMap<ReqId, OpReply>,
    order: VecDeque<(u64, ReqId)>,
    max_entries: usize,
}

impl PgState {
    /// Loads a PG's version and log from the store.
    pub fn load(store: &ObjectStore, pg: PgId, max_entries: usize) -> Result<PgState> {
        let last_version = match store.meta(&pg_meta_key(pg))? {
            Some(bytes) => u64::from_be_bytes(
                bytes.as_slice().try_into().map_err(|_| err::io(format!("corrupt version record of pg {pg}")))?,
            ),
            None => 0,
        };
        let mut state = PgState {
            pg,
            last_version,
            replies: HashMap::new(),
            order: VecDeque::new(),
            max_entries: max_entries.max(1),
        };
        let (start, end) = (pg_log_key(pg, 0), pg_log_key(pg, u64::MAX));
        for (_, value) in store.meta_scan(&start, &end, usize::MAX)? {
            let entry = PgLogEntry::decode(&value).map_err(|e| err::io(format!("pg {pg} log: {}", e.message)))?;
            state.remember(&entry);
        }
        Ok(state)
    }

    fn remember(&mut self, entry: &PgLogEntry) {
        let outputs = entry.outputs.clone().unwrap_or_default();
        self.replies.insert(entry.reqid, OpReply { version: entry.version, outputs });
        self.order.push_back((entry.version, entry.reqid));
    }

    /// The recorded reply of an already applied request.
    pub fn applied(&self, reqid: &ReqId) -> Option<OpReply> {
        self.replies.get(reqid).cloned()
    }

    /// Records a write in `txn` (log entry and PG version) and in memory, trimming old
    /// entries in batches.
    pub fn record(&mut self, txn: &mut Transaction, reqid: ReqId, object: &ObjectName, reply: &OpReply) {
        let retained = postcard_len(&reply.outputs) <= MAX_RETAINED_OUTPUT_BYTES;
        let entry = PgLogEntry {
            version: reply.version,
            reqid,
            object: object.clone(),
            outputs: retained.then(|| reply.outputs.clone()),
        };
        txn.put_meta(&pg_log_key(self.pg, entry.version), entry.encode());
        txn.put_meta(&pg_meta_key(self.pg), entry.version.to_be_bytes().to_vec());
        self.last_version = entry.version;
        self.remember(&entry);
        if self.order.len() >= self.max_entries + TRIM_BATCH {
            while self.order.len() > self.max_entries {
                if let Some((_, old)) = self.order.pop_front() {
                    self.replies.remove(&old);
                }
            }
            let oldest_kept = self.order.front().map_or(self.last_version, |(v, _)| *v);
            txn.delete_meta_range(&pg_log_key(self.pg, 0), &pg_log_key(self.pg, oldest_kept));
        }
    }

    /// Entries currently kept.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether the log is empty.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

fn postcard_len(outputs: &[StepOutput]) -> usize {
    outputs
        .iter()
        .map(|o| match o {
            StepOutput::Data(d) => d.len(),
            StepOutput::Xattrs(x) => x.iter().map(|(k, v)| k.len() + v.len()).sum(),
            StepOutput::OmapKeys { keys, .. } => keys.iter().map(|k| k.len()).sum(),
            StepOutput::OmapVals { entries, .. } => entries.iter().map(|(k, v)| k.len() + v.len()).sum(),
            StepOutput::None | StepOutput::Stat(_) | StepOutput::Checksum(_) => 16,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_store::{MemKv, StoreFormat};
    use shoal_types::{ClientId, PoolId};
    use std::sync::Arc;

    #[test]
    fn log_survives_reload_and_trims_in_batches() {
        let store = ObjectStore::open(Arc::new(MemKv::new()), StoreFormat::default()).unwrap();
        let pg = PgId { pool: PoolId(1), seed: 0 };
        let mut state = PgState::load(&store, pg, 10).unwrap();
        let reqid = |tid| ReqId { client: ClientId(7), tid };
        for tid in 1..=200u64 {
            let mut txn = Transaction::new();
            let reply = OpReply { version: tid, outputs: vec![StepOutput::Checksum(tid as u32)] };
            state.record(&mut txn, reqid(tid), &ObjectName::new("", "o"), &reply);
            store.commit(txn).unwrap();
            assert!(state.len() < 10 + TRIM_BATCH, "trimmed in batches");
        }
        let reloaded = PgState::load(&store, pg, 10).unwrap();
        assert_eq!(reloaded.last_version, 200);
        assert_eq!(reloaded.len(), state.len(), "memory and store agree after trims");
        assert_eq!(reloaded.applied(&reqid(200)).unwrap().outputs, vec![StepOutput::Checksum(200)]);
        assert!(reloaded.applied(&reqid(1)).is_none(), "old entries are trimmed");
    }
}
