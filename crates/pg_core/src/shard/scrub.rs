//! A shard's scrubs: as primary, comparing the copies' maps and repairing; as any copy,
//! building its map (the bookkeeping lives in [`crate::scrub`]).

use super::Shard;
use crate::action::*;
use crate::damage::Kind;
use crate::scrub::*;
use bytes::Bytes;
use shoal_store::{ObjectKey, Transaction};
use shoal_types::msg::{PeerRequest, ScrubObject};
use shoal_types::pg::EVersion;
use shoal_types::{ObjectName, OsdId, PgId, Result, Versioned as _};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

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
    pub(crate) fn start_requested_scrub(&mut self, pg: PgId) {
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
            let Some(deep) = self.config.scrubs.due(&self.config.store, pg, self.now_ns, &limits, load_ok) else {
                continue;
            };
            let Some(slot) = self.config.scrubs.slot(limits.max_scrubs) else { return };
            self.start_scrub(pg, deep, false, slot);
        }
    }

    pub(crate) fn start_scrub(&mut self, pg: PgId, deep: bool, repair: bool, slot: ScrubSlot) {
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
    pub(crate) fn scrub_page_if_complete(&mut self, pg: PgId) {
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
    pub(crate) fn repair_next(&mut self, pg: PgId) {
        let me = self.config.me;
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        let interval = p.interval();
        let Some(scrub) = p.scrub.as_mut() else { return };
        let Some(verdict) = scrub.repairs.front().cloned() else { return self.check_next_parity(pg) };
        let name = object_name(&verdict.key);
        // The primary's copy of an unfound object is older than the object: never a source.
        if self.config.damage.get(pg, &name) == Some(Kind::Unfound) {
            return self.repair_finished(pg, false, "unfound: its only up-to-date copy does not read back");
        }
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
                self.config.damage.remove(&self.config.store, pg, &name);
                let mut rest = verdict;
                rest.bad.remove(&self.config.me);
                self.push_repair(pg, &rest);
            }
            Ok(false) => self.repair_finished(pg, false, "written while being repaired; scrub again"),
            Err(e) => self.abort_scrub(pg, &format!("pulling {name} for a repair: {e}")),
        }
    }

    /// Pushes this OSD's (good) copy to the bad replicas.
    pub(crate) fn push_repair(&mut self, pg: PgId, verdict: &Verdict) {
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

    pub(crate) fn repair_finished(&mut self, pg: PgId, repaired: bool, why: &str) {
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
    pub(crate) fn check_next_parity(&mut self, pg: PgId) {
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
    pub(crate) fn scrub_page_done(&mut self, pg: PgId) {
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

    pub(crate) fn finish_scrub(&mut self, pg: PgId) {
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
        self.config.scrubs.finished(&self.config.store, pg, report);
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
pub(crate) fn object_name(key: &Bytes) -> ObjectName {
    ObjectKey::from_bytes(key.to_vec())
        .and_then(|k| k.decode())
        .map_or_else(|_| ObjectName::new("", String::from_utf8_lossy(key)), |(_, name)| name)
}
