//! Scrub and repair. The primary of an active+clean PG compares its objects with every
//! replica's, a page of `osd_scrub_chunk_max` objects at a time in key order: sizes,
//! versions, digests of xattrs and omap (light), and of every byte read back against the
//! stored checksums (deep). Client operations run between pages. The replicas' entries
//! reflect the same log position as the primary's: a page request leaves after every
//! replicated write sent before it, on the same in-order link.
//!
//! Where copies disagree, the authority is a copy that read back whole, then the version
//! most copies hold, then the newest version, then the primary's. A repair pulls the
//! authority's copy to the primary if the primary's is bad and pushes it to the bad
//! replicas. Findings go to the OSD's [`ScrubBoard`], which `shoal status` reads.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use shoal_store::{ObjectKey, ObjectStore, Transaction, pg_scrub_key};
use shoal_types::msg::ScrubObject;
use shoal_types::{Errno, ObjectName, OsdId, PgId, Result, Versioned};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Chunks read at once by a deep scrub.
pub(crate) const CHUNKS_PER_READ: u32 = 256;
/// Omap entries read at once for a digest.
pub(crate) const OMAP_PAGE: usize = 1024;

/// What the last scrub of a PG found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScrubReport {
    /// Whether it read every byte.
    pub deep: bool,
    /// Whether it repaired what it could.
    pub repair: bool,
    /// When it finished (ns since the epoch).
    pub finished_ns: u64,
    /// Objects compared.
    pub objects: u64,
    /// Objects whose copies disagree and were not repaired, with what is wrong.
    pub errors: Vec<(ObjectName, String)>,
    /// Objects repaired.
    pub repaired: u64,
    /// Deep scrubs of the PG finished on this OSD since it started (this one included).
    pub deep_scrubs: u64,
}

/// An OSD's scrubs, shared by its shards and its admin commands: how many run, when each
/// PG was last scrubbed, and what the last scrub found.
#[derive(Debug, Default)]
pub struct ScrubBoard {
    pub(crate) running: AtomicUsize,
    pub(crate) pgs: Mutex<BTreeMap<PgId, PgScrubs>>,
}

#[derive(Debug, Default)]
pub(crate) struct PgScrubs {
    pub(crate) last_ns: u64,
    pub(crate) last_deep_ns: u64,
    pub(crate) deep_scrubs: u64,
    pub(crate) report: Option<ScrubReport>,
}

/// When a PG's copy here was last scrubbed, and last deep-scrubbed (ns since the epoch):
/// the `S` ‖ PG row of the store, so a restart does not put every PG's scrubs off again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct ScrubStamps {
    last_ns: u64,
    last_deep_ns: u64,
}

impl Versioned for ScrubStamps {
    const NAME: &'static str = "pg scrub stamps";
    const VERSION: u8 = 1;
}

/// A running scrub's place among the OSD's `osd_max_scrubs`; freed when dropped.
#[derive(Debug)]
pub(crate) struct ScrubSlot(Arc<ScrubBoard>);

impl Drop for ScrubSlot {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::AcqRel);
    }
}

impl ScrubBoard {
    pub(crate) fn pgs(&self) -> std::sync::MutexGuard<'_, BTreeMap<PgId, PgScrubs>> {
        self.pgs.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A slot if fewer than `max` scrubs run.
    pub(crate) fn slot(self: &Arc<Self>, max: usize) -> Option<ScrubSlot> {
        let taken = self.running.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1));
        taken.ok().map(|_| ScrubSlot(self.clone()))
    }

    /// Scrubs running now.
    pub fn running(&self) -> usize {
        self.running.load(Ordering::Acquire)
    }

    /// Whether `pg` is due a scrub at `now_ns`, and whether a deep one: a PG first seen
    /// since the OSD started was scrubbed when `store` says, or counts as scrubbed now if
    /// it never was here. Before `max_interval`, only while the load allows.
    pub(crate) fn due(
        &self,
        store: &ObjectStore,
        pg: PgId,
        now_ns: u64,
        limits: &crate::limits::ScrubLimits,
        load_ok: bool,
    ) -> Option<bool> {
        let mut pgs = self.pgs();
        let s = pgs.entry(pg).or_insert_with(|| {
            let stored = store.meta(&pg_scrub_key(pg)).and_then(|v| v.map(|v| ScrubStamps::decode(&v)).transpose());
            let stamps = stored.unwrap_or_else(|e| {
                tracing::warn!(%pg, error = %e, "reading the PG's scrub stamps failed; counting it as scrubbed now");
                None
            });
            let stamps = stamps.unwrap_or(ScrubStamps { last_ns: now_ns, last_deep_ns: now_ns });
            PgScrubs { last_ns: stamps.last_ns, last_deep_ns: stamps.last_deep_ns, deep_scrubs: 0, report: None }
        });
        let since = |at: u64| std::time::Duration::from_nanos(now_ns.saturating_sub(at));
        let deep = since(s.last_deep_ns) >= limits.deep_interval;
        let due =
            since(s.last_ns) >= limits.max_interval || (load_ok && (deep || since(s.last_ns) >= limits.min_interval));
        due.then_some(deep)
    }

    /// Records a finished scrub of `pg`; its stamps go to `store` too.
    pub(crate) fn finished(&self, store: &ObjectStore, pg: PgId, mut report: ScrubReport) {
        let mut pgs = self.pgs();
        let s = pgs.entry(pg).or_default();
        s.last_ns = report.finished_ns;
        if report.deep {
            s.last_deep_ns = report.finished_ns;
            s.deep_scrubs += 1;
        }
        report.deep_scrubs = s.deep_scrubs;
        s.report = Some(report);
        let mut txn = Transaction::new();
        txn.put_meta(&pg_scrub_key(pg), ScrubStamps { last_ns: s.last_ns, last_deep_ns: s.last_deep_ns }.encode());
        if let Err(e) = store.commit(txn) {
            tracing::warn!(%pg, error = %e, "recording the PG's scrub stamps failed");
        }
    }

    /// Forgets `pg`, whose copy this OSD no longer holds.
    pub(crate) fn remove_pg(&self, pg: PgId) {
        self.pgs().remove(&pg);
    }

    /// Objects the last scrub of `pg` found inconsistent and did not repair.
    pub fn errors_in(&self, pg: PgId) -> usize {
        self.pgs().get(&pg).and_then(|s| s.report.as_ref()).map_or(0, |r| r.errors.len())
    }

    /// The last report of every PG scrubbed here.
    pub fn reports(&self) -> Vec<(PgId, ScrubReport)> {
        self.pgs().iter().filter_map(|(pg, s)| s.report.clone().map(|r| (*pg, r))).collect()
    }
}

/// One object's entry as this store holds it (`deep`: with its data's digest).
pub(crate) fn scrub_object(store: &ObjectStore, key: &ObjectKey, deep: bool) -> Result<Option<ScrubObject>> {
    let Some(onode) = store.onode(key)? else { return Ok(None) };
    let mut attrs = 0u32;
    for (name, value) in &onode.xattrs {
        attrs = digest_pair(attrs, name.as_bytes(), value);
    }
    attrs = crc32c::crc32c_append(attrs, &onode.omap_header);
    let mut omap = 0u32;
    let mut after: Option<Vec<u8>> = None;
    loop {
        let rows = store.omap_scan(key, after.as_deref().unwrap_or_default(), after.is_some(), OMAP_PAGE)?;
        for (k, v) in &rows {
            omap = digest_pair(omap, k, v);
        }
        if rows.len() < OMAP_PAGE {
            break;
        }
        after = rows.into_iter().last().map(|(k, _)| k);
    }
    let (mut data_digest, mut read_error) = (None, None);
    if deep {
        match data_digest_of(store, key, onode.size) {
            Ok(digest) => data_digest = Some(digest),
            Err(e) if e.errno == Errno::Io => read_error = Some(e.message),
            Err(e) => return Err(e),
        }
    }
    Ok(Some(ScrubObject {
        key: Bytes::copy_from_slice(key.as_bytes()),
        size: onode.size,
        version: onode.version,
        attrs_digest: attrs,
        omap_digest: omap,
        data_digest,
        read_error,
    }))
}

/// `digest` extended by a key and a value, each preceded by its length (so that moving a
/// byte from one to the other changes the digest).
pub(crate) fn digest_pair(digest: u32, key: &[u8], value: &[u8]) -> u32 {
    let digest = crc32c::crc32c_append(digest, &(key.len() as u32).to_le_bytes());
    let digest = crc32c::crc32c_append(digest, key);
    let digest = crc32c::crc32c_append(digest, &(value.len() as u32).to_le_bytes());
    crc32c::crc32c_append(digest, value)
}

/// crc32c over every stored chunk (index and bytes), each checked against its stored
/// checksum on the way (EIO if one does not match).
pub(crate) fn data_digest_of(store: &ObjectStore, key: &ObjectKey, size: u64) -> Result<u32> {
    let chunk = u64::from(store.chunk_size().max(1));
    let end = u32::try_from(size.div_ceil(chunk)).unwrap_or(u32::MAX);
    let mut digest = 0u32;
    let mut first = 0;
    while first < end {
        let last = first.saturating_add(CHUNKS_PER_READ).min(end);
        for (index, bytes) in store.chunks(key, first, last)? {
            digest = crc32c::crc32c_append(digest, &index.to_le_bytes());
            digest = crc32c::crc32c_append(digest, &bytes);
        }
        first = last;
    }
    Ok(digest)
}

/// The entries of `keys` that exist in `store`.
pub(crate) fn scrub_entries(store: &ObjectStore, keys: &[ObjectKey], deep: bool) -> Result<Vec<ScrubObject>> {
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        out.extend(scrub_object(store, key, deep)?);
    }
    Ok(out)
}

/// Copies of one object that disagree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// The object's store key.
    pub key: Bytes,
    /// The copy to repair from, if any copy is good.
    pub auth: Option<OsdId>,
    /// The bad copies and what is wrong with each.
    pub bad: BTreeMap<OsdId, String>,
}

pub(crate) type Fingerprint = (u64, u64, u32, u32, Option<u32>);

pub(crate) fn fingerprint(o: &ScrubObject) -> Fingerprint {
    (o.size, o.version, o.attrs_digest, o.omap_digest, o.data_digest)
}

/// Compares the copies (per OSD, by key) of every object any copy lists; returns the
/// objects whose copies disagree. An absent copy never outvotes a present one.
pub(crate) fn compare(copies: &BTreeMap<OsdId, BTreeMap<Bytes, ScrubObject>>, primary: OsdId) -> Vec<Verdict> {
    let keys: BTreeSet<&Bytes> = copies.values().flat_map(|c| c.keys()).collect();
    let mut verdicts = Vec::new();
    for key in keys {
        let mut groups: BTreeMap<Fingerprint, Vec<OsdId>> = BTreeMap::new();
        for (osd, copy) in copies {
            if let Some(o) = copy.get(key).filter(|o| o.read_error.is_none()) {
                groups.entry(fingerprint(o)).or_default().push(*osd);
            }
        }
        let chosen = groups
            .iter()
            .max_by_key(|(f, osds)| (osds.len(), f.1, osds.contains(&primary), std::cmp::Reverse(osds[0])))
            .map(|(f, osds)| (*f, if osds.contains(&primary) { primary } else { osds[0] }));
        let mut bad = BTreeMap::new();
        for (osd, copy) in copies {
            let problem = match (copy.get(key), &chosen) {
                (None, _) => Some("missing".to_owned()),
                (Some(o), _) if o.read_error.is_some() => o.read_error.clone().map(|e| format!("read error: {e}")),
                (Some(o), Some((f, auth))) if fingerprint(o) != *f => Some(differences(o, f, *auth)),
                _ => None,
            };
            if let Some(problem) = problem {
                bad.insert(*osd, problem);
            }
        }
        if !bad.is_empty() {
            verdicts.push(Verdict { key: key.clone(), auth: chosen.map(|(_, osd)| osd), bad });
        }
    }
    verdicts
}

/// How a copy differs from the authority's fingerprint.
pub(crate) fn differences(o: &ScrubObject, auth: &Fingerprint, from: OsdId) -> String {
    let mut out = Vec::new();
    if o.size != auth.0 {
        out.push(format!("size {} ({from} has {})", o.size, auth.0));
    }
    if o.version != auth.1 {
        out.push(format!("version {} ({from} has {})", o.version, auth.1));
    }
    if o.attrs_digest != auth.2 {
        out.push(format!("xattr digest {:#010x} ({from} has {:#010x})", o.attrs_digest, auth.2));
    }
    if o.omap_digest != auth.3 {
        out.push(format!("omap digest {:#010x} ({from} has {:#010x})", o.omap_digest, auth.3));
    }
    if o.data_digest != auth.4 {
        let show = |d: Option<u32>| d.map_or("none".to_owned(), |d| format!("{d:#010x}"));
        out.push(format!("data digest {} ({from} has {})", show(o.data_digest), show(auth.4)));
    }
    out.join(", ")
}

/// A running scrub of one PG.
pub(crate) struct Scrub {
    pub(crate) deep: bool,
    pub(crate) repair: bool,
    pub(crate) _slot: ScrubSlot,
    /// Objects up to this key are done (`None`: none yet).
    pub(crate) cursor: Option<Bytes>,
    /// This page's entries per OSD, and whether that OSD has more after them.
    pub(crate) page: BTreeMap<OsdId, (Vec<ScrubObject>, bool)>,
    pub(crate) waiting: BTreeSet<OsdId>,
    pub(crate) objects: u64,
    pub(crate) errors: Vec<(ObjectName, String)>,
    pub(crate) repaired: u64,
    pub(crate) repairs: VecDeque<Verdict>,
    /// Pushes of the repair in progress still unanswered.
    pub(crate) pushes: usize,
    /// Erasure-coded objects of the page whose parity a deep scrub checks next.
    pub(crate) parity: VecDeque<ObjectName>,
}

impl Scrub {
    /// Whether it reads every byte.
    pub(crate) fn deep(&self) -> bool {
        self.deep
    }
}

/// A scrub asked for by an operator, waiting for the PG to be active and clean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Requested {
    pub deep: bool,
    pub repair: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_store::{StoreFormat, StoreOptions};

    fn object(key: &str, size: u64, version: u64, data: Option<u32>) -> ScrubObject {
        ScrubObject {
            key: Bytes::copy_from_slice(key.as_bytes()),
            size,
            version,
            attrs_digest: 1,
            omap_digest: 2,
            data_digest: data,
            read_error: None,
        }
    }

    fn copies(per_osd: &[(u32, Vec<ScrubObject>)]) -> BTreeMap<OsdId, BTreeMap<Bytes, ScrubObject>> {
        per_osd
            .iter()
            .map(|(osd, objs)| (OsdId(*osd), objs.iter().map(|o| (o.key.clone(), o.clone())).collect()))
            .collect()
    }

    #[test]
    fn identical_copies_have_no_verdict() {
        let a = object("a", 10, 3, Some(7));
        assert!(compare(&copies(&[(0, vec![a.clone()]), (1, vec![a.clone()]), (2, vec![a])]), OsdId(0)).is_empty());
    }

    #[test]
    fn a_missing_copy_is_bad_and_the_present_one_is_the_authority() {
        let a = object("a", 10, 3, None);
        let verdicts = compare(&copies(&[(0, vec![]), (1, vec![a])]), OsdId(0));
        assert_eq!(verdicts.len(), 1);
        assert_eq!(verdicts[0].auth, Some(OsdId(1)));
        assert_eq!(verdicts[0].bad, BTreeMap::from([(OsdId(0), "missing".to_owned())]));
    }

    #[test]
    fn a_copy_that_reads_back_whole_beats_the_primarys_bad_one() {
        let good = object("a", 10, 3, Some(7));
        let bad = ScrubObject { data_digest: None, read_error: Some("checksum mismatch".into()), ..good.clone() };
        let verdicts = compare(&copies(&[(0, vec![bad]), (1, vec![good])]), OsdId(0));
        assert_eq!(verdicts[0].auth, Some(OsdId(1)));
        assert!(verdicts[0].bad[&OsdId(0)].contains("checksum mismatch"), "{:?}", verdicts[0]);
    }

    #[test]
    fn the_majority_wins_then_the_newest_version() {
        let (good, odd) = (object("a", 10, 3, Some(7)), object("a", 10, 3, Some(8)));
        let verdicts = compare(&copies(&[(0, vec![odd]), (1, vec![good.clone()]), (2, vec![good])]), OsdId(0));
        assert_eq!(verdicts[0].auth, Some(OsdId(1)));
        assert_eq!(verdicts[0].bad.keys().copied().collect::<Vec<_>>(), vec![OsdId(0)]);
        assert!(verdicts[0].bad[&OsdId(0)].contains("data digest"), "{:?}", verdicts[0]);
        let (old, new) = (object("b", 10, 3, None), object("b", 12, 4, None));
        let verdicts = compare(&copies(&[(0, vec![old]), (1, vec![new])]), OsdId(0));
        assert_eq!(verdicts[0].auth, Some(OsdId(1)));
        assert!(verdicts[0].bad[&OsdId(0)].contains("size 10 (osd.1 has 12)"), "{:?}", verdicts[0]);
    }

    #[test]
    fn no_good_copy_leaves_no_authority() {
        let bad = ScrubObject { read_error: Some("checksum mismatch".into()), ..object("a", 10, 3, None) };
        let verdicts = compare(&copies(&[(0, vec![bad.clone()]), (1, vec![bad])]), OsdId(0));
        assert_eq!(verdicts[0].auth, None);
        assert_eq!(verdicts[0].bad.len(), 2);
    }

    #[test]
    fn the_board_counts_slots_and_frees_them_on_drop() {
        let board = Arc::new(ScrubBoard::default());
        let first = board.slot(1).expect("a first slot");
        assert!(board.slot(1).is_none(), "osd_max_scrubs 1 allows one");
        let second = board.slot(2).expect("osd_max_scrubs 2 allows two");
        assert_eq!(board.running(), 2);
        drop((first, second));
        assert_eq!(board.running(), 0);
    }

    #[test]
    fn a_pg_is_due_after_the_min_interval_only_when_the_load_allows() {
        let store = ObjectStore::in_memory(StoreFormat::default(), StoreOptions::default()).unwrap();
        let board = ScrubBoard::default();
        let limits = crate::limits::ScrubLimits {
            min_interval: std::time::Duration::from_secs(10),
            max_interval: std::time::Duration::from_secs(100),
            deep_interval: std::time::Duration::from_secs(50),
            ..Default::default()
        };
        let pg = PgId { pool: shoal_types::PoolId(1), seed: 0 };
        let s = 1_000_000_000u64;
        assert_eq!(board.due(&store, pg, 0, &limits, true), None, "first seen counts as scrubbed");
        assert_eq!(board.due(&store, pg, 11 * s, &limits, false), None, "the load is too high");
        assert_eq!(board.due(&store, pg, 11 * s, &limits, true), Some(false));
        assert_eq!(board.due(&store, pg, 51 * s, &limits, false), None, "deep scrubs wait for the load too");
        assert_eq!(board.due(&store, pg, 51 * s, &limits, true), Some(true));
        assert_eq!(
            board.due(&store, pg, 101 * s, &limits, false),
            Some(true),
            "past the max interval, whatever the load"
        );
        board.finished(&store, pg, ScrubReport { deep: true, finished_ns: 51 * s, ..Default::default() });
        assert_eq!(board.due(&store, pg, 52 * s, &limits, true), None);
        // A restarted OSD goes by the stamps in its store, not by when it first sees the PG.
        let restarted = ScrubBoard::default();
        assert_eq!(restarted.due(&store, pg, 62 * s, &limits, true), Some(false), "scrubbed at 51, due at 61");
        assert_eq!(restarted.due(&store, pg, 102 * s, &limits, true), Some(true), "deep-scrubbed at 51, due at 101");
        let never = PgId { pool: shoal_types::PoolId(1), seed: 1 };
        assert_eq!(restarted.due(&store, never, 102 * s, &limits, true), None, "never scrubbed here: counts as now");
        restarted.remove_pg(pg);
        assert_eq!(restarted.due(&store, pg, 62 * s, &limits, true), Some(false), "stamps are reread");
    }

    #[test]
    fn scrub_stamps_keep_their_golden_bytes() {
        let stamps = ScrubStamps { last_ns: 3, last_deep_ns: 300 };
        let golden = [1, 3, 0xac, 0x02];
        assert_eq!(stamps.encode(), golden);
        assert_eq!(ScrubStamps::decode(&golden).unwrap(), stamps);
    }
}
