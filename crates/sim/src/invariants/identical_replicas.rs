//! The replicas of a clean PG are identical: every OSD of the acting set holds the same
//! objects with the same metadata, data and omap.

use super::Violation;
use shoal_store::{ObjectKey, ObjectStore, Transaction};
use shoal_types::{OsdId, PgId, Result, Versioned};

/// One OSD's copy of a PG: each object with the bytes of the transaction that recreates it.
pub type PgCopy = Vec<(ObjectKey, Vec<u8>)>;

/// Every object of `pg` in `store`.
pub fn contents(store: &ObjectStore, pg: PgId, pg_num: u32) -> Result<PgCopy> {
    let mut objects = Vec::new();
    for range in shoal_placement::pg_reversed_hash_ranges(pg.seed, pg_num) {
        let mut after: Option<ObjectKey> = None;
        loop {
            let keys = store.list(pg.pool, range.clone(), after.as_ref(), 64)?;
            let Some(last) = keys.last().cloned() else { break };
            for key in keys {
                let copy: Transaction = store.copy_object(&key)?;
                objects.push((key, copy.encode()));
            }
            after = Some(last);
        }
    }
    Ok(objects)
}

/// Compares the copies of `pg` on each OSD of its acting set with the primary's.
pub fn check(pg: PgId, copies: &[(OsdId, PgCopy)]) -> std::result::Result<(), Violation> {
    let Some((primary, reference)) = copies.first() else { return Ok(()) };
    for (osd, objects) in &copies[1..] {
        if objects != reference {
            let first = reference
                .iter()
                .find(|o| !objects.contains(o))
                .or_else(|| objects.iter().find(|o| !reference.contains(o)));
            let differing = reference.iter().filter(|o| !objects.contains(o)).count()
                + objects.iter().filter(|o| !reference.contains(o)).count();
            return Err(Violation {
                invariant: "identical_replicas",
                detail: format!(
                    "pg {pg} is clean but {osd} holds {} objects and primary {primary} {}; {differing} copies differ, the first {:?}",
                    objects.len(),
                    reference.len(),
                    first.map(|(key, _)| key.decode().map(|(_, name)| name.to_string())),
                ),
            });
        }
    }
    Ok(())
}
