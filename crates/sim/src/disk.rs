//! A simulated disk: an in-memory engine that keeps what was synced apart from what was
//! only written, so a crash loses exactly the unsynced writes.

use shoal_store::{Batch, Cf, KvEngine, KvStats, MemKv};
use shoal_types::Result;
use std::sync::Mutex;

/// The engine an OSD's store runs on between two crashes.
pub struct SimKv {
    /// What reads see.
    live: MemKv,
    /// What survives a crash.
    durable: MemKv,
    /// Batches written since the last sync, oldest first.
    unsynced: Mutex<Vec<Batch>>,
}

impl Default for SimKv {
    fn default() -> Self {
        SimKv { live: MemKv::new(), durable: MemKv::new(), unsynced: Mutex::new(Vec::new()) }
    }
}

impl SimKv {
    /// An empty disk.
    pub fn new() -> Self {
        Self::default()
    }

    /// The disk as a restart finds it: only what was synced.
    pub fn after_crash(&self) -> Result<SimKv> {
        let (live, durable) = (MemKv::new(), MemKv::new());
        for cf in Cf::ALL {
            let rows = self.durable.scan(cf, &[], &[0xff; 64], usize::MAX)?;
            let batch: Batch = rows.into_iter().map(|(k, v)| shoal_store::BatchOp::Put(cf, k, v)).collect();
            live.write(batch.clone())?;
            durable.write(batch)?;
        }
        Ok(SimKv { live, durable, unsynced: Mutex::new(Vec::new()) })
    }

    fn unsynced(&self) -> std::sync::MutexGuard<'_, Vec<Batch>> {
        self.unsynced.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl KvEngine for SimKv {
    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.live.get(cf, key)
    }

    fn scan(&self, cf: Cf, start: &[u8], end: &[u8], limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.live.scan(cf, start, end, limit)
    }

    fn write(&self, batch: Batch) -> Result<()> {
        self.live.write(batch.clone())?;
        self.unsynced().push(batch);
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        for batch in std::mem::take(&mut *self.unsynced()) {
            self.durable.write(batch)?;
        }
        self.live.sync()
    }

    fn stats(&self) -> KvStats {
        self.live.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_keeps_synced_writes_and_loses_the_rest() {
        let kv = SimKv::new();
        kv.write(vec![shoal_store::BatchOp::Put(Cf::Meta, b"a".to_vec(), b"1".to_vec())]).unwrap();
        kv.sync().unwrap();
        kv.write(vec![shoal_store::BatchOp::Put(Cf::Meta, b"b".to_vec(), b"2".to_vec())]).unwrap();
        kv.write(vec![shoal_store::BatchOp::Delete(Cf::Meta, b"a".to_vec())]).unwrap();
        assert_eq!(kv.get(Cf::Meta, b"a").unwrap(), None);
        let after = kv.after_crash().unwrap();
        assert_eq!(after.get(Cf::Meta, b"a").unwrap(), Some(b"1".to_vec()));
        assert_eq!(after.get(Cf::Meta, b"b").unwrap(), None);
    }
}
