//! The replicas of a clean PG are identical: every OSD of the acting set holds the same
//! objects with the same metadata, data and omap.

use super::Violation;
use shoal_store::{ObjectKey, ObjectStore, Transaction};
use shoal_types::{OsdId, PgId, Result, Versioned};

/// One OSD's copy of a PG: each object with the bytes of the transaction that recreates it.
type PgCopy = Vec<(ObjectKey, Vec<u8>)>;

/// The keys of every object of `pg` in `store`, in key order.
pub(crate) fn pg_keys(store: &ObjectStore, pg: PgId, pg_num: u32) -> Result<Vec<ObjectKey>> {
    let mut all = Vec::new();
    for range in shoal_placement::pg_reversed_hash_ranges(pg.seed, pg_num) {
        let mut after: Option<ObjectKey> = None;
        loop {
            let keys = store.list(pg.pool, range.clone(), after.as_ref(), 64)?;
            let Some(last) = keys.last().cloned() else { break };
            all.extend(keys);
            after = Some(last);
        }
    }
    Ok(all)
}

/// Every object of `pg` in `store`.
fn contents(store: &ObjectStore, pg: PgId, pg_num: u32) -> Result<PgCopy> {
    let mut objects = Vec::new();
    for key in pg_keys(store, pg, pg_num)? {
        let copy: Transaction = store.copy_object(&key)?;
        objects.push((key, copy.encode()));
    }
    Ok(objects)
}

/// Each object of a copy as `v<version>/<size>B/x<xattrs>/o<omap keys>/d<data crc32c>`.
fn describe(store: &ObjectStore, objects: &PgCopy) -> String {
    let one = |key: &ObjectKey| -> Result<String> {
        let Some(onode) = store.onode(key)? else { return Ok("gone".into()) };
        let omap = store.omap_scan(key, &[], false, usize::MAX)?.len();
        let crc = store.chunks(key, 0, u32::MAX)?.iter().fold(0, |h, (_, data)| crc32c::crc32c_append(h, data));
        Ok(format!("v{}/{}B/x{}/o{omap}/d{crc:08x}", onode.version, onode.size, onode.xattrs.len()))
    };
    let described: Vec<String> = objects.iter().map(|(key, _)| one(key).unwrap_or_else(|e| e.to_string())).collect();
    described.join(" ")
}

/// Compares the copies of `pg` on each OSD of its acting set (primary first) with the
/// primary's.
pub fn check(pg: PgId, pg_num: u32, acting: &[(OsdId, &ObjectStore)]) -> std::result::Result<(), Violation> {
    let mut copies = Vec::new();
    for (osd, store) in acting {
        let objects = contents(store, pg, pg_num).map_err(|e| Violation {
            invariant: "identical_replicas",
            detail: format!("reading pg {pg} on {osd}: {e}"),
        })?;
        copies.push((*osd, *store, objects));
    }
    let Some((primary, _, reference)) = copies.first() else { return Ok(()) };
    let Some((osd, _, objects)) = copies[1..].iter().find(|(_, _, objects)| objects != reference) else {
        return Ok(());
    };
    let differing = reference.iter().filter(|o| !objects.contains(o)).count()
        + objects.iter().filter(|o| !reference.contains(o)).count();
    let first = reference.iter().chain(objects).find(|o| !objects.contains(o) || !reference.contains(o));
    let mut detail = format!(
        "pg {pg} is clean but {osd} holds {} objects and primary {primary} {}; {differing} copies differ, the first {:?}",
        objects.len(),
        reference.len(),
        first.map(|(key, _)| key.decode().map(|(_, name)| name.to_string())),
    );
    for (osd, store, objects) in &copies {
        detail.push_str(&format!("\n       {osd}: {}", describe(store, objects)));
    }
    Err(Violation { invariant: "identical_replicas", detail })
}
