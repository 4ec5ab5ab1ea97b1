//! An in-memory [`KvEngine`]: the reference for conformance tests and the model checks.

use crate::kv::{Batch, BatchOp, Cf, KvEngine, KvStats};
use shoal_types::Result;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// One column family's keys and values.
type Table = BTreeMap<Vec<u8>, Vec<u8>>;

/// Every column family as a `BTreeMap` behind one lock; nothing is ever durable.
#[derive(Default)]
pub struct MemKv {
    maps: Mutex<BTreeMap<Cf, Table>>,
    stats: Mutex<KvStats>,
}

impl MemKv {
    /// An empty engine.
    pub fn new() -> Self {
        Self::default()
    }
}

impl KvEngine for MemKv {
    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let maps = self.maps.lock().expect("memkv lock poisoned");
        Ok(maps.get(&cf).and_then(|m| m.get(key).cloned()))
    }

    fn scan(&self, cf: Cf, start: &[u8], end: &[u8], limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        if start >= end {
            return Ok(Vec::new());
        }
        let maps = self.maps.lock().expect("memkv lock poisoned");
        Ok(maps
            .get(&cf)
            .map(|m| m.range(start.to_vec()..end.to_vec()).take(limit).map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default())
    }

    fn write(&self, batch: Batch) -> Result<()> {
        if batch.iter().any(|op| matches!(op, BatchOp::Move(..))) {
            return Err(BatchOp::unlowered());
        }
        let mut maps = self.maps.lock().expect("memkv lock poisoned");
        let mut written = 0u64;
        for op in batch {
            match op {
                BatchOp::Put(cf, k, v) => {
                    written += (k.len() + v.len()) as u64;
                    maps.entry(cf).or_default().insert(k, v);
                }
                BatchOp::Delete(cf, k) => {
                    written += k.len() as u64;
                    maps.entry(cf).or_default().remove(&k);
                }
                BatchOp::DeleteRange(cf, start, end) => {
                    written += (start.len() + end.len()) as u64;
                    if start < end {
                        let m = maps.entry(cf).or_default();
                        let doomed: Vec<Vec<u8>> = m.range(start..end).map(|(k, _)| k.clone()).collect();
                        for k in doomed {
                            m.remove(&k);
                        }
                    }
                }
                BatchOp::Move(..) => unreachable!("refused above"),
            }
        }
        self.stats.lock().expect("memkv stats lock poisoned").user_bytes_written += written;
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.stats.lock().expect("memkv stats lock poisoned").wal_syncs += 1;
        Ok(())
    }

    fn stats(&self) -> KvStats {
        *self.stats.lock().expect("memkv stats lock poisoned")
    }
}
