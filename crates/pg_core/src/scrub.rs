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

use crate::primary::Expect;
use crate::shard::{Action, Shard, Timer, TimerKind};
use bytes::Bytes;
use shoal_store::{ObjectKey, ObjectStore, Transaction};
use shoal_types::msg::{PeerRequest, ScrubObject};
use shoal_types::pg::EVersion;
use shoal_types::{Errno, ObjectName, OsdId, PgId, Result, Versioned};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Chunks read at once by a deep scrub.
const CHUNKS_PER_READ: u32 = 256;
/// Omap entries read at once for a digest.
const OMAP_PAGE: usize = 1024;

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
    running: AtomicUsize,
    pgs: Mutex<BTreeMap<PgId, PgScrubs>>,
}

#[derive(Debug, Default)]
struct PgScrubs {
    last_ns: u64,
    last_deep_ns: u64,
    deep_scrubs: u64,
    report: Option<ScrubReport>,
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
    fn pgs(&self) -> std::sync::MutexGuard<'_, BTreeMap<PgId, PgScrubs>> {
        self.pgs.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A slot if fewer than `max` scrubs run.
    fn slot(self: &Arc<Self>, max: usize) -> Option<ScrubSlot> {
        let taken = self.running.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1));
        taken.ok().map(|_| ScrubSlot(self.clone()))
    }

    /// Scrubs running now.
    pub fn running(&self) -> usize {
        self.running.load(Ordering::Acquire)
    }

    /// Whether `pg` is due a scrub at `now_ns`, and whether a deep one: a PG first seen
    /// now counts as scrubbed now. Before `max_interval`, only while the load allows.
    fn due(&self, pg: PgId, now_ns: u64, limits: &crate::limits::ScrubLimits, load_ok: bool) -> Option<bool> {
        let mut pgs = self.pgs();
        let s = pgs.entry(pg).or_insert_with(|| PgScrubs {
            last_ns: now_ns,
            last_deep_ns: now_ns,
            deep_scrubs: 0,
            report: None,
        });
        let since = |at: u64| std::time::Duration::from_nanos(now_ns.saturating_sub(at));
        let deep = since(s.last_deep_ns) >= limits.deep_interval;
        let due =
            since(s.last_ns) >= limits.max_interval || (load_ok && (deep || since(s.last_ns) >= limits.min_interval));
        due.then_some(deep)
    }

    fn finished(&self, pg: PgId, mut report: ScrubReport) {
        let mut pgs = self.pgs();
        let s = pgs.entry(pg).or_default();
        s.last_ns = report.finished_ns;
        if report.deep {
            s.last_deep_ns = report.finished_ns;
            s.deep_scrubs += 1;
        }
        report.deep_scrubs = s.deep_scrubs;
        s.report = Some(report);
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
fn digest_pair(digest: u32, key: &[u8], value: &[u8]) -> u32 {
    let digest = crc32c::crc32c_append(digest, &(key.len() as u32).to_le_bytes());
    let digest = crc32c::crc32c_append(digest, key);
    let digest = crc32c::crc32c_append(digest, &(value.len() as u32).to_le_bytes());
    crc32c::crc32c_append(digest, value)
}

/// crc32c over every stored chunk (index and bytes), each checked against its stored
/// checksum on the way (EIO if one does not match).
fn data_digest_of(store: &ObjectStore, key: &ObjectKey, size: u64) -> Result<u32> {
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

type Fingerprint = (u64, u64, u32, u32, Option<u32>);

fn fingerprint(o: &ScrubObject) -> Fingerprint {
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
fn differences(o: &ScrubObject, auth: &Fingerprint, from: OsdId) -> String {
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
    deep: bool,
    repair: bool,
    _slot: ScrubSlot,
    /// Objects up to this key are done (`None`: none yet).
    cursor: Option<Bytes>,
    /// This page's entries per OSD, and whether that OSD has more after them.
    page: BTreeMap<OsdId, (Vec<ScrubObject>, bool)>,
    waiting: BTreeSet<OsdId>,
    objects: u64,
    errors: Vec<(ObjectName, String)>,
    repaired: u64,
    repairs: VecDeque<Verdict>,
    /// Pushes of the repair in progress still unanswered.
    pushes: usize,
    /// Erasure-coded objects of the page whose parity a deep scrub checks next.
    parity: VecDeque<ObjectName>,
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

impl<R> Shard<R> {
    /// An operator asks for a scrub of `pg` (deep, or a repair: deep, then fixing).
    pub(crate) fn request_scrub(&mut self, pg: PgId, deep: bool, repair: bool) {
        let Some(p) = self.primaries.get_mut(&pg) else {
            tracing::info!(%pg, "not the primary: scrub request ignored");
            return;
        };
        let asked = Requested { deep: deep || repair, repair };
        p.scrub_requested = Some(match p.scrub_requested {
            Some(r) => Requested { deep: r.deep || asked.deep, repair: r.repair || asked.repair },
            None => asked,
        });
        self.start_requested_scrub(pg);
    }

    /// Starts a scrub an operator asked for, if the PG can be scrubbed now and
    /// `osd_max_scrubs` allows (else a later tick does).
    fn start_requested_scrub(&mut self, pg: PgId) {
        let Some(p) = self.primaries.get(&pg) else { return };
        let Some(asked) = p.scrub_requested.filter(|_| p.scrubbable(pg, &self.map)) else { return };
        let Some(slot) = self.config.scrubs.slot(self.limits.scrub.max_scrubs) else { return };
        if let Some(p) = self.primaries.get_mut(&pg) {
            p.scrub_requested = None;
        }
        self.start_scrub(pg, asked.deep, asked.repair, slot);
    }

    /// Starts the scrubs that are due, as far as `osd_max_scrubs` allows, and those
    /// operators asked for; `host_load` is the load average per CPU.
    pub(crate) fn scrub_tick(&mut self, host_load: f64) {
        let limits = self.limits.scrub.clone();
        let load_ok = host_load <= limits.load_threshold;
        let pgs: Vec<PgId> = self.primaries.keys().copied().collect();
        for pg in pgs {
            self.start_requested_scrub(pg);
            let Some(p) = self.primaries.get(&pg) else { continue };
            if !p.scrubbable(pg, &self.map) {
                continue;
            }
            let Some(deep) = self.config.scrubs.due(pg, self.now_ns, &limits, load_ok) else { continue };
            let Some(slot) = self.config.scrubs.slot(limits.max_scrubs) else { return };
            self.start_scrub(pg, deep, false, slot);
        }
    }

    fn start_scrub(&mut self, pg: PgId, deep: bool, repair: bool, slot: ScrubSlot) {
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        tracing::info!(%pg, deep, repair, "scrub starting");
        p.scrub = Some(Scrub {
            deep,
            repair,
            _slot: slot,
            cursor: None,
            page: BTreeMap::new(),
            waiting: BTreeSet::new(),
            objects: 0,
            errors: Vec::new(),
            repaired: 0,
            repairs: VecDeque::new(),
            pushes: 0,
            parity: VecDeque::new(),
        });
        self.scrub_page(pg);
    }

    /// Lists the next page here and asks every replica for the same.
    pub(crate) fn scrub_page(&mut self, pg: PgId) {
        let me = self.config.me;
        let max = self.limits.scrub.chunk_max.max(1);
        let Some(p) = self.primaries.get(&pg) else { return };
        let Some(scrub) = &p.scrub else { return };
        let (interval, deep, after) = (p.interval(), scrub.deep, scrub.cursor.clone());
        let replicas: BTreeSet<OsdId> = p.members().filter(|o| *o != me).collect();
        let local = self
            .list_requested(pg, after.clone(), max)
            .and_then(|(keys, more)| Ok((scrub_entries(&self.config.store, &keys, deep)?, more)));
        let local = match local {
            Ok(local) => local,
            Err(e) => return self.abort_scrub(pg, &format!("reading the local copies: {e}")),
        };
        let Some(scrub) = self.primaries.get_mut(&pg).and_then(|p| p.scrub.as_mut()) else { return };
        scrub.page = BTreeMap::from([(me, local)]);
        scrub.waiting = replicas.clone();
        for osd in replicas {
            let request = PeerRequest::ScrubMap { pg, interval, after: after.clone(), max, deep };
            self.ask(pg, interval, osd, request, Expect::ScrubMap(osd));
        }
        self.scrub_page_if_complete(pg);
    }

    /// A replica's entries for the page.
    pub(crate) fn scrub_map_received(&mut self, pg: PgId, osd: OsdId, result: Result<(Vec<ScrubObject>, bool)>) {
        let entries = match result {
            Ok(entries) => entries,
            Err(e) => return self.abort_scrub(pg, &format!("{osd} did not send its copies: {e}")),
        };
        let Some(scrub) = self.primaries.get_mut(&pg).and_then(|p| p.scrub.as_mut()) else { return };
        if scrub.waiting.remove(&osd) {
            scrub.page.insert(osd, entries);
        }
        self.scrub_page_if_complete(pg);
    }

    /// Once every copy's page is here: compares up to the first key past which some copy
    /// has not listed yet, records what disagrees, and repairs it or moves on.
    fn scrub_page_if_complete(&mut self, pg: PgId) {
        let me = self.config.me;
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        // The shards of an erasure-coded object hold different bytes: their metadata must
        // agree, and a deep scrub reads every chunk through its checksum.
        let erasure = p.is_erasure();
        let Some(scrub) = p.scrub.as_mut() else { return };
        if !scrub.waiting.is_empty() {
            return;
        }
        let page = std::mem::take(&mut scrub.page);
        let boundary: Option<Bytes> = page
            .values()
            .filter(|(_, more)| *more)
            .filter_map(|(entries, _)| entries.last())
            .map(|o| o.key.clone())
            .min();
        let copies: BTreeMap<OsdId, BTreeMap<Bytes, ScrubObject>> = page
            .into_iter()
            .map(|(osd, (entries, _))| {
                let within = entries.into_iter().filter(|o| boundary.as_ref().is_none_or(|b| o.key <= *b));
                let shards = within.map(|o| ScrubObject { data_digest: o.data_digest.filter(|_| !erasure), ..o });
                (osd, shards.map(|o| (o.key.clone(), o)).collect())
            })
            .collect();
        let keys: BTreeSet<&Bytes> = copies.values().flat_map(|c| c.keys()).collect();
        scrub.objects += keys.len() as u64;
        let verdicts = compare(&copies, me);
        if erasure && scrub.deep {
            // Objects whose shards agree on metadata and read back whole: is their parity right?
            let flagged: BTreeSet<&Bytes> = verdicts.iter().map(|v| &v.key).collect();
            scrub.parity = keys.iter().filter(|k| !flagged.contains(**k)).map(|k| object_name(k)).collect();
        }
        let mut rebuilds = Vec::new();
        for verdict in verdicts {
            let name = object_name(&verdict.key);
            let problems: Vec<String> = verdict.bad.iter().map(|(osd, why)| format!("{osd}: {why}")).collect();
            tracing::warn!(%pg, object = %name, problems = problems.join("; "), "scrub found an inconsistent object");
            if scrub.repair && erasure && verdict.auth.is_some() {
                // A bad shard is rebuilt from the others, as recovery does.
                scrub.repaired += 1;
                rebuilds.extend(verdict.bad.keys().map(|osd| (*osd, name.clone())));
            } else if scrub.repair && verdict.auth.is_some() {
                scrub.repairs.push_back(verdict);
            } else {
                scrub.errors.push((name, problems.join("; ")));
            }
        }
        scrub.cursor = boundary;
        for (osd, object) in rebuilds {
            self.queue_rebuild(pg, osd, object);
        }
        self.repair_next(pg);
    }

    /// Repairs the next object of the page, or moves to the next page once none is left.
    fn repair_next(&mut self, pg: PgId) {
        let me = self.config.me;
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        let interval = p.interval();
        let Some(scrub) = p.scrub.as_mut() else { return };
        let Some(verdict) = scrub.repairs.front().cloned() else { return self.check_next_parity(pg) };
        let name = object_name(&verdict.key);
        match verdict.auth {
            Some(auth) if verdict.bad.contains_key(&me) => {
                let at = self.pg(pg).map(|s| s.info.last_update).unwrap_or_default();
                let request = PeerRequest::Pull { pg, objects: vec![name] };
                self.ask(pg, interval, auth, request, Expect::ScrubPulled(at));
            }
            _ => self.push_repair(pg, &verdict),
        }
    }

    /// The authority's copy of an object whose local copy is bad: applied unless the
    /// object was written since the pull was sent (the write already made it whole).
    pub(crate) fn scrub_pulled(&mut self, pg: PgId, sent_at: EVersion, result: Result<Bytes>) {
        let Some(verdict) = self.primaries.get(&pg).and_then(|p| p.scrub.as_ref()?.repairs.front().cloned()) else {
            return;
        };
        let name = object_name(&verdict.key);
        let applied = result.and_then(|txn| {
            let store = self.config.store.clone();
            let written_since = self.pg(pg)?.entries_after(&store, sent_at)?.iter().any(|e| e.object == name);
            if written_since {
                return Ok(false);
            }
            self.commit(pg, Transaction::decode(&txn)?)?;
            Ok(true)
        });
        match applied {
            Ok(true) => {
                self.config.damage.remove(pg, &name);
                let mut rest = verdict;
                rest.bad.remove(&self.config.me);
                self.push_repair(pg, &rest);
            }
            Ok(false) => self.repair_finished(pg, false, "written while being repaired; scrub again"),
            Err(e) => self.abort_scrub(pg, &format!("pulling {name} for a repair: {e}")),
        }
    }

    /// Pushes this OSD's (good) copy to the bad replicas.
    fn push_repair(&mut self, pg: PgId, verdict: &Verdict) {
        let me = self.config.me;
        let targets: Vec<OsdId> = verdict.bad.keys().copied().filter(|o| *o != me).collect();
        if targets.is_empty() {
            return self.repair_finished(pg, true, "");
        }
        let copied = ObjectKey::from_bytes(verdict.key.to_vec()).and_then(|key| self.config.store.copy_object(&key));
        let txn: Bytes = match copied {
            Ok(txn) => txn.encode().into(),
            Err(e) => return self.abort_scrub(pg, &format!("reading {} for a repair: {e}", object_name(&verdict.key))),
        };
        let at = self.pg(pg).map(|s| s.info.last_update).unwrap_or_default();
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        let interval = p.interval();
        if let Some(scrub) = p.scrub.as_mut() {
            scrub.pushes = targets.len();
        }
        for osd in targets {
            let push = PeerRequest::PushAt { pg, interval, at, txn: txn.clone() };
            self.ask(pg, interval, osd, push, Expect::ScrubPushed);
        }
    }

    /// A bad replica took the repair push (or did not).
    pub(crate) fn scrub_pushed(&mut self, pg: PgId, result: Result<()>) {
        if let Err(e) = result {
            return self.abort_scrub(pg, &format!("pushing a repair: {e}"));
        }
        let Some(scrub) = self.primaries.get_mut(&pg).and_then(|p| p.scrub.as_mut()) else { return };
        scrub.pushes = scrub.pushes.saturating_sub(1);
        if scrub.pushes == 0 {
            self.repair_finished(pg, true, "");
        }
    }

    fn repair_finished(&mut self, pg: PgId, repaired: bool, why: &str) {
        let Some(scrub) = self.primaries.get_mut(&pg).and_then(|p| p.scrub.as_mut()) else { return };
        let Some(verdict) = scrub.repairs.pop_front() else { return };
        let name = object_name(&verdict.key);
        if repaired {
            tracing::info!(%pg, object = %name, "scrub repaired an object");
            scrub.repaired += 1;
        } else {
            scrub.errors.push((name, why.to_owned()));
        }
        self.repair_next(pg);
    }

    /// Checks the parity of the page's next erasure-coded object; moves to the next page once
    /// none is left. An object a write holds now is left for the next deep scrub.
    fn check_next_parity(&mut self, pg: PgId) {
        loop {
            let Some(scrub) = self.primaries.get_mut(&pg).and_then(|p| p.scrub.as_mut()) else { return };
            let Some(object) = scrub.parity.pop_front() else { return self.scrub_page_done(pg) };
            if self.start_parity_check(pg, object.clone(), 0) {
                return;
            }
            tracing::debug!(%pg, %object, "being written: parity not checked this time");
        }
    }

    /// A part of an object's parity check is done: the next part, or the next object. A bad
    /// shard is recorded, or rebuilt when repairing.
    pub(crate) fn parity_checked(
        &mut self,
        pg: PgId,
        object: ObjectName,
        end: u32,
        more: bool,
        checked: Result<shoal_erasure::Parity>,
    ) {
        use shoal_erasure::Parity;
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        let acting = p.acting.clone();
        let Some(scrub) = p.scrub.as_mut() else { return };
        let problem = match checked {
            Ok(Parity::Consistent) => {
                if more && self.start_parity_check(pg, object.clone(), end) {
                    return;
                }
                return self.check_next_parity(pg);
            }
            Ok(Parity::Bad(shard)) => {
                let osd = acting.get(shard).copied().unwrap_or(OsdId::NONE);
                if scrub.repair {
                    scrub.repaired += 1;
                    tracing::warn!(%pg, %object, shard, %osd, "deep scrub: a shard disagrees with the parity; rebuilding it");
                    self.queue_rebuild(pg, osd, object);
                    return self.check_next_parity(pg);
                }
                format!("{osd}: shard {shard} disagrees with the parity of the others")
            }
            Ok(Parity::Unlocated) => {
                "the shards disagree with their parity, and no single shard explains it".to_owned()
            }
            Err(e) => format!("checking the parity: {e}"),
        };
        tracing::warn!(%pg, %object, problem, "scrub found an inconsistent object");
        scrub.errors.push((object, problem));
        self.check_next_parity(pg)
    }

    /// A parity check could not read every shard of `object`.
    pub(crate) fn parity_unread(&mut self, pg: PgId, object: ObjectName, e: &shoal_types::RadosError) {
        let Some(scrub) = self.primaries.get_mut(&pg).and_then(|p| p.scrub.as_mut()) else { return };
        scrub.errors.push((object, format!("reading every shard for the parity check: {e}")));
        self.check_next_parity(pg);
    }

    /// The page is compared (and repaired): the next one, after `osd_scrub_sleep`, or the end.
    fn scrub_page_done(&mut self, pg: PgId) {
        let sleep = self.limits.scrub.sleep;
        let Some(p) = self.primaries.get(&pg) else { return };
        let Some(scrub) = &p.scrub else { return };
        if scrub.cursor.is_none() {
            return self.finish_scrub(pg);
        }
        if sleep.is_zero() {
            self.scrub_page(pg);
        } else {
            let timer = Timer { pg, interval: p.interval(), round: p.round, kind: TimerKind::ScrubStep };
            self.emit(Action::Timer { after: sleep, timer });
        }
    }

    fn finish_scrub(&mut self, pg: PgId) {
        let now_ns = self.now_ns;
        let Some(scrub) = self.primaries.get_mut(&pg).and_then(|p| p.scrub.take()) else { return };
        tracing::info!(
            %pg, deep = scrub.deep, objects = scrub.objects, errors = scrub.errors.len(), repaired = scrub.repaired,
            "scrub finished"
        );
        let report = ScrubReport {
            deep: scrub.deep,
            repair: scrub.repair,
            finished_ns: now_ns,
            objects: scrub.objects,
            errors: scrub.errors,
            repaired: scrub.repaired,
            deep_scrubs: 0,
        };
        self.config.scrubs.finished(pg, report);
    }

    /// Ends a scrub that cannot go on; the next tick (or request) starts over.
    pub(crate) fn abort_scrub(&mut self, pg: PgId, why: &str) {
        if let Some(p) = self.primaries.get_mut(&pg)
            && p.scrub.take().is_some()
        {
            tracing::info!(%pg, why, "scrub abandoned");
        }
    }
}

/// The object a store key names (its raw key when it does not decode).
fn object_name(key: &Bytes) -> ObjectName {
    ObjectKey::from_bytes(key.to_vec())
        .and_then(|k| k.decode())
        .map_or_else(|_| ObjectName::new("", String::from_utf8_lossy(key)), |(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let board = ScrubBoard::default();
        let limits = crate::limits::ScrubLimits {
            min_interval: std::time::Duration::from_secs(10),
            max_interval: std::time::Duration::from_secs(100),
            deep_interval: std::time::Duration::from_secs(50),
            ..Default::default()
        };
        let pg = PgId { pool: shoal_types::PoolId(1), seed: 0 };
        let s = 1_000_000_000u64;
        assert_eq!(board.due(pg, 0, &limits, true), None, "first seen counts as scrubbed");
        assert_eq!(board.due(pg, 11 * s, &limits, false), None, "the load is too high");
        assert_eq!(board.due(pg, 11 * s, &limits, true), Some(false));
        assert_eq!(board.due(pg, 51 * s, &limits, false), None, "deep scrubs wait for the load too");
        assert_eq!(board.due(pg, 51 * s, &limits, true), Some(true));
        assert_eq!(board.due(pg, 101 * s, &limits, false), Some(true), "past the max interval, whatever the load");
        board.finished(pg, ScrubReport { deep: true, finished_ns: 51 * s, ..Default::default() });
        assert_eq!(board.due(pg, 52 * s, &limits, true), None);
    }
}
