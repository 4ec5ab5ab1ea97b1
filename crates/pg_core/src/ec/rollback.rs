//! What a shard of an erasure-coded PG keeps to undo a write until every shard has it.
//!
//! A write reaches the shards one by one; if its primary fails half way, some shards hold
//! the new stripes and others the old, and a stripe mixed of both decodes to garbage.
//! Before applying a write, each shard therefore keeps what the write replaces in its own
//! copy ([`keep`]) under the write's version, in the same store transaction: a write that
//! replaces the whole copy (a rewrite, a removal) moves the old chunks to a stash of the
//! store without copying them (as Ceph's EC pools keep old objects by renaming them);
//! a partial write copies the chunks it overwrites. Peering rolls back the writes too few
//! shards hold ([`undo`], newest first); once every shard has a write, its records and
//! stash are dropped ([`Stash::drop_in`]).

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use shoal_store::{ObjectKey, ObjectStore, Onode, Transaction};
use shoal_types::erasure::Touched;
use shoal_types::{ObjectName, PoolId, Result, Versioned};

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
    /// The stash slot the whole old copy's chunks were moved to (the write's version), in
    /// place of `chunks`; `None`: nothing was stashed. Since version 2.
    pub stash: Option<u64>,
}

impl Versioned for Rollback {
    const NAME: &'static str = "ec rollback";
    const VERSION: u8 = 2;

    fn decode_older(version: u8, body: &[u8]) -> Option<Result<Self>> {
        (version == 1).then(|| {
            let old: v1::Rollback = shoal_types::encoding::decode_body(Self::NAME, body)?;
            Ok(Rollback { object: old.object, onode: old.onode, whole: old.whole, chunks: old.chunks, stash: None })
        })
    }
}

/// Version 1: whole copies were copied into `chunks`.
mod v1 {
    use bytes::Bytes;
    use serde::Deserialize;
    use shoal_store::Onode;
    use shoal_types::ObjectName;

    #[derive(Deserialize)]
    pub(super) struct Rollback {
        pub object: ObjectName,
        pub onode: Option<Onode>,
        pub whole: bool,
        pub chunks: Vec<(u32, Option<Bytes>)>,
    }
}

impl Rollback {
    /// Where this record's stash is, if it has one (the object is in `pool`).
    pub fn stash_of(&self, pool: PoolId) -> Result<Option<Stash>> {
        if self.stash.is_none() {
            return Ok(None);
        }
        Ok(self.stash_at(&ObjectKey::new(pool, &self.object)?))
    }

    /// Where this record's stash is, if it has one, its object's key being `key`.
    pub fn stash_at(&self, key: &ObjectKey) -> Option<Stash> {
        self.stash.map(|slot| Stash { key: key.clone(), slot })
    }
}

/// Where an undo record's stashed chunks are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stash {
    key: ObjectKey,
    slot: u64,
}

impl Stash {
    /// Drops the stash in `txn`, once nothing will undo its write.
    pub fn drop_in(&self, txn: &mut Transaction) {
        txn.drop_stash(&self.key, self.slot);
    }
}

/// Store chunks holding `size` bytes.
pub(crate) fn chunk_count(store: &ObjectStore, size: u64) -> u32 {
    size.div_ceil(u64::from(store.chunk_size())) as u32
}

/// Keeps what the write at `version` touching `touched` replaces in the shard's copy of
/// `key`: returns the record, and stashes a whole copy's chunks in `txn`, which the write's
/// own changes must follow.
pub fn keep(
    store: &ObjectStore,
    key: &ObjectKey,
    object: &ObjectName,
    touched: &Touched,
    version: u64,
    txn: &mut Transaction,
) -> Result<Rollback> {
    let onode = store.onode(key)?;
    let Some(existing) = &onode else {
        return Ok(Rollback { object: object.clone(), onode: None, whole: true, chunks: Vec::new(), stash: None });
    };
    let old_chunks = chunk_count(store, existing.size);
    let mut stash = None;
    let chunks = match touched {
        Touched::Whole => {
            if old_chunks > 0 {
                txn.stash_chunks(key, version);
                stash = Some(version);
            }
            Vec::new()
        }
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
    Ok(Rollback { object: object.clone(), onode, whole: matches!(touched, Touched::Whole), chunks, stash })
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
    if let Some(slot) = rollback.stash {
        txn.unstash_chunks(key, slot);
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
            stash: None,
        };
        // Version 2; "" "o"; Some(onode: its own encoding, postcard); not whole; two chunks;
        // no stash.
        let encoded = rollback.encode();
        assert_eq!(encoded[..4], [2, 0, 1, b'o']);
        assert_eq!(encoded[encoded.len() - 10..], [0, 2, 2, 1, 2, b'a', b'b', 3, 0, 0][..]);
        assert_eq!(Rollback::decode(&encoded).unwrap(), rollback);
        let stashed = Rollback { whole: true, chunks: Vec::new(), stash: Some(300), ..rollback.clone() };
        assert_eq!(stashed.encode()[encoded.len() - 10..], [1, 0, 1, 0xac, 0x02][..], "whole, no chunks, slot 300");
        // Version 1 had no stash field.
        let mut v1 = encoded[..encoded.len() - 1].to_vec();
        v1[0] = 1;
        assert_eq!(Rollback::decode(&v1).unwrap(), rollback);
    }
}
