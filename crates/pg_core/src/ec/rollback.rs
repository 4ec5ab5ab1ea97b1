//! What a shard of an erasure-coded PG keeps to undo a write until every shard has it.
//!
//! A write reaches the shards one by one; if its primary fails half way, some shards hold
//! the new stripes and others the old, and a stripe mixed of both decodes to garbage.
//! Before applying a write, each shard therefore reads what the write replaces in its own
//! copy ([`keep`]) and stores it under the write's version, in the same store transaction.
//! Peering rolls back the writes too few shards hold ([`undo`], newest first); once every
//! shard has a write, its records are dropped.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use shoal_store::{ObjectKey, ObjectStore, Onode, Transaction};
use shoal_types::erasure::Touched;
use shoal_types::{ObjectName, Result, Versioned};

/// A shard's copy of an object as it was before one write, as far as the write changes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rollback {
    /// The object.
    pub object: ObjectName,
    /// Its metadata; `None`: it did not exist.
    pub onode: Option<Onode>,
    /// The whole copy is kept (`chunks` holds every chunk that had data).
    pub whole: bool,
    /// The store chunks within the old copy that the write replaced; `None`: a hole.
    /// (Chunks past the old copy's end are dropped on undo.)
    pub chunks: Vec<(u32, Option<Bytes>)>,
}

impl Versioned for Rollback {
    const NAME: &'static str = "ec rollback";
    const VERSION: u8 = 1;
}

/// Store chunks holding `size` bytes.
pub(crate) fn chunk_count(store: &ObjectStore, size: u64) -> u32 {
    size.div_ceil(u64::from(store.chunk_size())) as u32
}

/// Reads what a write touching `touched` replaces in the shard's copy of `key`.
pub fn keep(store: &ObjectStore, key: &ObjectKey, object: &ObjectName, touched: &Touched) -> Result<Rollback> {
    let onode = store.onode(key)?;
    let Some(existing) = &onode else {
        return Ok(Rollback { object: object.clone(), onode: None, whole: true, chunks: Vec::new() });
    };
    let old_chunks = chunk_count(store, existing.size);
    let chunks = match touched {
        Touched::Whole => store.chunks(key, 0, old_chunks)?.into_iter().map(|(i, d)| (i, Some(d))).collect(),
        Touched::Chunks(ranges) => {
            let mut kept = Vec::new();
            // Only chunks within the old copy: the ranges come from the primary, and what
            // lies past the old end is dropped on undo, whatever the write put there.
            for &(start, end) in ranges {
                let end = end.min(old_chunks);
                let mut stored = store.chunks(key, start, end)?.into_iter().peekable();
                for index in start..end {
                    let data = stored.next_if(|(i, _)| *i == index).map(|(_, d)| d);
                    kept.push((index, data));
                }
            }
            kept
        }
    };
    Ok(Rollback { object: object.clone(), onode, whole: matches!(touched, Touched::Whole), chunks })
}

/// Adds to `txn` what puts the shard's copy of `key` back as `rollback` kept it.
pub fn undo(store: &ObjectStore, key: &ObjectKey, rollback: &Rollback, txn: &mut Transaction) -> Result<()> {
    let current = store.onode(key)?;
    let current_chunks = current.as_ref().map_or(0, |o| chunk_count(store, o.size));
    if rollback.whole && current.is_some() {
        txn.remove_object_sized(key, current_chunks, false);
    }
    let Some(onode) = &rollback.onode else { return Ok(()) };
    txn.put_onode(key, onode);
    let old_chunks = chunk_count(store, onode.size);
    if !rollback.whole && current_chunks > old_chunks {
        txn.delete_chunks_between(key, old_chunks, current_chunks);
    }
    for (index, data) in &rollback.chunks {
        match data {
            Some(data) => txn.put_chunk(key, *index, data.to_vec()),
            None => txn.delete_chunk(key, *index),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rollback_has_golden_bytes() {
        let object = ObjectName::new("", "o");
        let onode = Onode { size: 3, ..Onode::default() };
        let rollback = Rollback {
            object,
            onode: Some(onode),
            whole: false,
            chunks: vec![(2, Some(Bytes::from_static(b"ab"))), (3, None)],
        };
        // Version 1; "" "o"; Some(onode: its own encoding, postcard); not whole; two chunks.
        let encoded = rollback.encode();
        assert_eq!(encoded[..4], [1, 0, 1, b'o']);
        assert_eq!(encoded[encoded.len() - 9..], [0, 2, 2, 1, 2, b'a', b'b', 3, 0][..]);
        assert_eq!(Rollback::decode(&encoded).unwrap(), rollback);
    }
}
