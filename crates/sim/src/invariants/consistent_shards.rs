//! The shards of a clean erasure-coded PG agree: every shard holds the same objects with
//! the same metadata, and each shard's bytes are what encoding the object's data gives
//! (parity that disagrees with the data would decode wrongly once a data shard is lost).

use super::Violation;
use super::identical_replicas::pg_keys;
use shoal_pg_core::ec::{self, EcLayout};
use shoal_store::{ObjectKey, ObjectStore};
use shoal_types::{PgId, Result};
use std::collections::BTreeSet;

/// Checks the shards of `pg` (`shards[i]`: the store of shard `i`'s OSD).
pub fn check(
    pg: PgId,
    pg_num: u32,
    layout: &EcLayout,
    shards: &[Option<&ObjectStore>],
) -> std::result::Result<(), Violation> {
    let violation = |detail: String| Violation { invariant: "consistent_shards", detail };
    let stores: Vec<(usize, &ObjectStore)> = shards.iter().enumerate().filter_map(|(i, s)| Some((i, (*s)?))).collect();
    if stores.len() < shards.len() {
        return Err(violation(format!("pg {pg} is clean with {} of {} shards", stores.len(), shards.len())));
    }
    let mut keys = BTreeSet::new();
    for (shard, store) in &stores {
        let listed =
            pg_keys(store, pg, pg_num).map_err(|e| violation(format!("listing pg {pg} shard {shard}: {e}")))?;
        keys.extend(listed);
    }
    for key in keys {
        let name = key.decode().map(|(_, name)| name.to_string()).unwrap_or_default();
        check_object(layout, &key, &stores).map_err(|e| violation(format!("pg {pg} object {name}: {e}")))?;
    }
    Ok(())
}

fn check_object(layout: &EcLayout, key: &ObjectKey, stores: &[(usize, &ObjectStore)]) -> Result<()> {
    let coder = shoal_erasure::coder(layout.stripes.k, layout.stripes.m)?;
    let mut onodes = Vec::new();
    for (shard, store) in stores {
        onodes.push((*shard, store.onode(key)?));
    }
    let first = onodes[0].1.clone();
    if let Some((shard, other)) = onodes.iter().find(|(_, o)| *o != first) {
        return Err(shoal_types::err::io(format!("shard {shard} holds {other:?}, shard 0 {first:?}")));
    }
    let Some(onode) = first else { return Ok(()) };
    let size = ec::logical_onode(onode)?.size;
    let end = size.div_ceil(layout.logical_chunk()) as u32;
    let mut blocks = Vec::new();
    for (_, store) in stores {
        let chunks = store.chunks(key, 0, u32::MAX)?;
        blocks.push(ec::shard_block(layout, 0, end, &chunks)?);
    }
    let data = ec::assemble(layout, coder.as_ref(), size, 0, blocks.iter().cloned().map(Some).collect())?;
    let mut expected = vec![Vec::new(); blocks.len()];
    for (index, chunk) in &data {
        for (shard, block) in layout.encode_chunk(coder.as_ref(), chunk)?.into_iter().enumerate() {
            let at = *index as usize * layout.block() as usize;
            expected[shard].resize(at, 0);
            expected[shard].extend_from_slice(&block);
        }
    }
    for (shard, (stored, wanted)) in blocks.iter().zip(&expected).enumerate() {
        // Holes and explicit zeros are the same bytes.
        let len = stored.len().max(wanted.len());
        let padded = |b: &[u8]| b.iter().copied().chain(std::iter::repeat(0)).take(len).collect::<Vec<u8>>();
        if padded(stored) != padded(wanted) {
            let differ = padded(stored).iter().zip(padded(wanted)).position(|(a, b)| *a != b).unwrap_or(0);
            return Err(shoal_types::err::io(format!(
                "shard {shard} holds {} bytes that differ from its encoding from byte {differ} on",
                stored.len()
            )));
        }
    }
    Ok(())
}
