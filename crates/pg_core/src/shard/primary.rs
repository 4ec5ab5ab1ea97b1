//! A shard's work as the primary of its replicated PGs: peering, replication, recovery,
//! backfill, strays and read repair (the state lives in [`crate::primary`]).

use super::Shard;
use crate::action::*;
use crate::damage::Kind;
use crate::peering::{self, PeerPlan, Plan, Recovery};
use crate::primary::*;
use bytes::Bytes;
use shoal_store::{ObjectKey, Transaction};
use shoal_types::msg::{Activate, OsdOp, PeerRequest, RepOp, Reply};
use shoal_types::pg::{EVersion, PgLogEntry, PgSummary};
use shoal_types::{
    ActiveInterval, ClientId, Errno, ObjectName, OsdId, PgId, RadosError, Result, Step, Versioned as _, err,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

impl<R> Shard<R> {
    /// Re-examines every PG of this shard under a new map: new intervals start peering,
    /// PGs that left this OSD are dropped, blocked PGs try again.
    pub(crate) fn on_new_map(&mut self) {
        let map = self.map.clone();
        let me = self.config.me;
        let topology = shoal_placement::Topology::from_map(&map);
        let mut live = BTreeSet::new();
        for pool in map.pools.values() {
            for seed in 0..pool.pg_num {
                let pg = PgId { pool: pool.id, seed };
                if crate::shard::shard_of(pg, self.config.shards) != self.config.index {
                    continue;
                }
                let up = topology.acting(&map, pool, pg);
                if !up.contains(&me) {
                    if self.intervals.remove(&pg).is_some() {
                        self.drop_primary(pg, "this OSD no longer serves the PG");
                        self.pgs.remove(&pg);
                    }
                    continue;
                }
                live.insert(pg);
                let primary = shoal_placement::acting_primary(&map, pg, &up);
                let changed = self.intervals.get(&pg).is_none_or(|(_, old, led)| (old, *led) != (&up, primary));
                if changed {
                    self.intervals.insert(pg, (map.epoch, up.clone(), primary));
                    self.drop_primary(pg, "the PG's acting set changed");
                    self.pgs.remove(&pg);
                    self.clear_class_cache();
                    if primary == Some(me) {
                        let ec = match &pool.erasure {
                            Some(erasure) => match erasure::EcPrimary::new(erasure, self.config.store.chunk_size()) {
                                Ok(ec) => Some(ec),
                                Err(e) => {
                                    tracing::error!(%pg, error = %e, "the pool's erasure code is unusable");
                                    continue;
                                }
                            },
                            None => None,
                        };
                        let primary = Primary {
                            interval: map.epoch,
                            acting: up,
                            phase: Phase::Blocked { reason: "not peered yet".into(), stall: Stall::Retrying },
                            waiting: Vec::new(),
                            inflight: BTreeMap::new(),
                            recovery: BTreeMap::new(),
                            pushes_in_flight: 0,
                            round: 0,
                            client_ops: 0,
                            strays: BTreeSet::new(),
                            scrub: None,
                            scrub_requested: None,
                            committed_to: EVersion::default(),
                            ec,
                            lost: None,
                        };
                        self.primaries.insert(pg, primary);
                        self.start_peering(pg);
                    }
                } else if self.primaries.get(&pg).is_some_and(|p| {
                    // Blocked (but not waiting for its handover), or peering with a query out
                    // to an OSD the map now marks down (a partitioned OSD never answers;
                    // waiting would last the whole timeout).
                    matches!(&p.phase, Phase::Blocked { stall, .. } if *stall != Stall::HandingOver)
                        || matches!(&p.phase, Phase::Peering { outstanding, .. }
                            if outstanding.iter().any(|osd| !map.osds.get(osd).is_some_and(|o| o.up)))
                }) {
                    self.start_peering(pg);
                } else if map.primary_temp.get(&pg) == Some(&me) {
                    // Primed to lead with the same acting set (this OSD missed the maps in
                    // between): nothing is left to recover, so placement's primary may lead.
                    self.release_lead_if_recovered(pg);
                }
            }
        }
        let gone: Vec<PgId> = self.intervals.keys().filter(|pg| !live.contains(pg)).copied().collect();
        for pg in gone {
            self.intervals.remove(&pg);
            self.drop_primary(pg, "the pool was deleted");
            self.pgs.remove(&pg);
        }
    }

    /// Stops being primary of `pg`: queued and in-flight operations get EAGAIN, so their
    /// clients resend to whoever serves the PG now.
    pub(crate) fn drop_primary(&mut self, pg: PgId, why: &str) {
        if let Some(mut p) = self.primaries.remove(&pg) {
            fail_all(&mut p, pg, why, &mut self.out);
            if p.pushes_in_flight > 0 {
                self.pump_waiting_recoveries(pg);
            }
        }
    }

    /// Sends a request to a peer; its answer comes back as the event `expect` makes of it.
    pub(crate) fn ask(&mut self, pg: PgId, interval: u64, to: OsdId, request: PeerRequest, expect: Expect<R>) {
        self.emit(Action::Send { to, request, awaiting: Awaiting { pg, interval, expect } });
    }

    /// Peers again after `delay` unless peering restarts or completes before.
    pub(crate) fn schedule_retry(&mut self, pg: PgId, delay: Duration) {
        let Some(p) = self.primaries.get(&pg) else { return };
        let timer = Timer { pg, interval: p.interval, round: p.round, kind: TimerKind::Retry };
        self.emit(Action::Timer { after: delay, timer });
    }

    /// Starts (or restarts) peering: asks every up OSD for its copy of the PG's history;
    /// OSDs outside the acting set may hold the newest copy from an earlier interval.
    pub(crate) fn start_peering(&mut self, pg: PgId) {
        let me = self.config.me;
        let Some(pool) = self.map.pools.get(&pg.pool).cloned() else { return };
        let summary = match self.pg(pg) {
            Ok(state) => state.summary(),
            Err(e) => {
                tracing::error!(%pg, error = %e, "cannot read the PG's record");
                return;
            }
        };
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        fail_in_flight(p, "the PG is peering again", &mut self.out);
        p.recovery.clear();
        if std::mem::take(&mut p.pushes_in_flight) > 0 {
            self.pump_waiting_recoveries(pg);
        }
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        p.scrub = None;
        p.round += 1;
        // Each round is an interval of its own, numbered by the newest map: a primary whose
        // map skipped an interval that others saw (and whose queries fenced the replicas at
        // that interval) gets past the fence once its map catches up.
        p.interval = p.interval.max(self.map.epoch);
        if p.up_count() < pool.min_size as usize {
            let reason = format!("{} of min_size {} replicas up", p.up_count(), pool.min_size);
            p.phase = Phase::Blocked { reason, stall: Stall::Undersized };
            return;
        }
        let interval = p.interval;
        let others: BTreeSet<OsdId> =
            self.map.osds.iter().filter(|(id, o)| o.up && **id != me).map(|(id, _)| *id).collect();
        p.phase = Phase::Peering { summaries: BTreeMap::from([(me, summary)]), outstanding: others.clone() };
        // Fenced like the replicas it queries: a write of the previous primary still on
        // its way here is refused, not applied behind the summary just read.
        self.fence(pg, interval);
        self.schedule_retry(pg, PEERING_TIMEOUT);
        for osd in others {
            self.ask(pg, interval, osd, PeerRequest::Query { pg, interval }, Expect::Summary(osd));
        }
        self.maybe_decide(pg);
    }

    /// Handles an event of one of this shard's primaries.
    pub(crate) fn primary_event(&mut self, pg: PgId, interval: u64, event: Event<R>) {
        if self.primaries.get(&pg).is_none_or(|p| p.interval != interval) {
            // From an interval that is over; a client waiting on it resends.
            if let Event::RepairCopy(repair, _) = event
                && let Repairing::Op { reply, .. } = repair.waiting
            {
                let value = Err(err::again(format!("pg {pg} changed interval during a repair")));
                self.emit(Action::Reply { to: reply, after: 0, value });
            }
            return;
        }
        match event {
            Event::Summary(osd, result) => match result {
                Ok(summary) => self.summary_received(pg, osd, summary),
                Err(e) => {
                    tracing::info!(%pg, %osd, error = %e, "peering query failed; retrying");
                    self.restart_later(pg);
                }
            },
            Event::AuthLog(result) => match result {
                Ok((entries, remembered)) => self.adopt_auth_log(pg, entries, remembered),
                Err(e) => self.peer_failed(pg, "fetching the authoritative log", e),
            },
            Event::Pulled(result) => match result {
                Ok((txn, next)) => self.pulled(pg, &txn, next),
                Err(e) if e.errno == Errno::Io => self.pull_unfound(pg, e),
                Err(e) => self.peer_failed(pg, "pulling objects", e),
            },
            Event::Listed(result) => match result {
                Ok((keys, more)) => self.listed(pg, keys, more),
                Err(e) => self.peer_failed(pg, "listing the authority's objects", e),
            },
            Event::Acked(osd, at, result) => match result {
                Ok(()) => {
                    if let Some(p) = self.primaries.get_mut(&pg)
                        && let Some(f) = p.inflight.get_mut(&at)
                    {
                        f.waiting.remove(&osd);
                        if f.taking_whole.remove(&osd)
                            && let Some(r) = p.recovery.get_mut(&osd)
                        {
                            r.objects.retain(|o| *o != f.object);
                        }
                    }
                    self.complete_writes(pg);
                }
                Err(e) => self.peer_failed(pg, "replicating a write", e),
            },
            Event::LocalDurable(at, result) => {
                if let Some(f) = self.primaries.get_mut(&pg).and_then(|p| p.inflight.get_mut(&at)) {
                    f.local_pending = false;
                    if let Err(e) = result {
                        for (_, reply) in &mut f.replies {
                            *reply = Err(e.clone());
                        }
                    }
                }
                self.complete_writes(pg);
            }
            Event::Activated(osd, result) => match result {
                Ok(()) => {
                    if let Some(Primary { phase: Phase::Activating { replicas, .. }, .. }) = self.primaries.get_mut(&pg)
                    {
                        replicas.remove(&osd);
                    }
                    self.register_when_activated(pg);
                }
                Err(e) => self.peer_failed(pg, &format!("activating replica {osd}"), e),
            },
            Event::ActivationDurable(result) => match result {
                Ok(()) => {
                    if let Some(Primary { phase: Phase::Activating { local, .. }, .. }) = self.primaries.get_mut(&pg) {
                        *local = true;
                    }
                    self.register_when_activated(pg);
                    self.record_when_synced(pg);
                }
                Err(e) => self.peer_failed(pg, "recording the activation", e),
            },
            // Either the activation's record, or one asked for after recovery.
            Event::Registered(true) => {
                self.go_active(pg);
                self.serve_recorded(pg);
            }
            Event::Registered(false) => {
                tracing::info!(%pg, "the monitor did not record the activation; peering again");
                self.restart_later(pg);
            }
            Event::Pushed(osd, size, result) => self.pushed(pg, osd, size, result),
            Event::Rebuilt(osd, object, bytes, result) => {
                if result.is_ok()
                    && let Some(r) = self.primaries.get_mut(&pg).and_then(|p| p.recovery.get_mut(&osd))
                {
                    r.pushing.remove(&object);
                }
                self.pushed(pg, osd, PushSize { objects: 1, bytes }, result);
                // Operations waiting for the object on that shard may go on.
                self.resume_erasure(pg);
            }
            Event::RecoverySlept(round) => {
                if self.primaries.get(&pg).is_some_and(|p| p.round == round) {
                    self.release_recovery_slot(pg);
                }
            }
            Event::Recovered(osd, result) => match result {
                Ok(()) => {
                    if let Some(p) = self.primaries.get_mut(&pg) {
                        p.recovery.remove(&osd);
                        if p.recovery.is_empty() {
                            tracing::info!(%pg, "recovery finished");
                        }
                    }
                    if osd == self.config.me {
                        // The primary's own shard is whole: serve what waited for it.
                        self.serve_waiting(pg);
                    }
                    self.record_when_recovered(pg);
                    self.pump_recovery(pg);
                    self.remove_strays_if_clean(pg);
                    self.release_lead_if_recovered(pg);
                }
                Err(e) => self.peer_failed(pg, "finishing recovery", e),
            },
            Event::StrayRemoved(osd, result) => {
                if let Err(e) = result {
                    tracing::info!(%pg, %osd, error = %e, "a stray copy was not removed");
                }
            }
            Event::RepairCopy(repair, part) => self.repair_part(pg, interval, *repair, part),
            Event::ScrubMap(osd, result) => self.scrub_map_received(pg, osd, result),
            Event::ScrubPulled(at, result) => self.scrub_pulled(pg, at, result),
            Event::ScrubPushed(result) => self.scrub_pushed(pg, result),
            Event::Chunks(object, gather, shard, result) => self.chunks_received(pg, object, gather, shard, result),
            Event::ScrubStep(round) => {
                if self.primaries.get(&pg).is_some_and(|p| p.round == round && p.scrub.is_some()) {
                    self.scrub_page(pg);
                }
            }
            Event::HandBack(round) => {
                if self.primaries.get(&pg).is_some_and(|p| p.round == round) {
                    self.release_lead_if_recovered(pg);
                }
            }
            Event::Retry(round) => {
                let stalled = |p: &Primary<R>| {
                    matches!(p.phase, Phase::Peering { .. } | Phase::Blocked { .. } | Phase::Activating { .. })
                        || crate::primary::recording(p)
                };
                if self.primaries.get(&pg).is_some_and(|p| p.round == round && stalled(p)) {
                    self.start_peering(pg);
                }
            }
        }
    }

    /// A push of `size` was applied (its recovery slot is free, after
    /// `osd_recovery_sleep`), or not.
    pub(crate) fn pushed(&mut self, pg: PgId, osd: OsdId, size: PushSize, result: Result<()>) {
        if let Err(e) = result {
            return self.peer_failed(pg, "pushing objects", e);
        }
        self.emit(Action::Count(Counted::Recovered { objects: size.objects, bytes: size.bytes }));
        let sleep = self.limits.recovery_sleep;
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        if let Some(r) = p.recovery.get_mut(&osd) {
            r.in_flight = r.in_flight.saturating_sub(1);
        }
        if sleep.is_zero() {
            self.release_recovery_slot(pg);
        } else {
            // The slot stays taken while the OSD sleeps.
            let timer = Timer { pg, interval: p.interval, round: p.round, kind: TimerKind::RecoverySleep };
            self.emit(Action::Timer { after: sleep, timer });
            self.pump_recovery(pg);
        }
    }

    pub(crate) fn restart_later(&mut self, pg: PgId) {
        if let Some(p) = self.primaries.get_mut(&pg) {
            fail_in_flight(p, "the PG is peering again", &mut self.out);
            p.phase = Phase::Blocked { reason: "waiting for peers to answer".into(), stall: Stall::Retrying };
        }
        self.schedule_retry(pg, RETRY_DELAY);
    }

    pub(crate) fn peer_failed(&mut self, pg: PgId, what: &str, e: RadosError) {
        tracing::info!(%pg, error = %e, "{what} failed; peering again");
        self.restart_later(pg);
    }

    pub(crate) fn summary_received(&mut self, pg: PgId, from: OsdId, summary: PgSummary) {
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        if let Phase::Peering { summaries, outstanding } = &mut p.phase
            && outstanding.remove(&from)
        {
            summaries.insert(from, summary);
        }
        self.maybe_decide(pg);
    }

    pub(crate) fn maybe_decide(&mut self, pg: PgId) {
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        let Phase::Peering { summaries, outstanding } = &p.phase else { return };
        if !outstanding.is_empty() {
            return;
        }
        let acting: BTreeSet<OsdId> = p.acting.iter().copied().collect();
        // OSDs outside the acting set count only if they hold something of the PG.
        let considered: BTreeMap<OsdId, PgSummary> = summaries
            .iter()
            .filter(|(osd, s)| {
                acting.contains(osd)
                    || s.info.last_update != EVersion::default()
                    || !s.info.complete
                    || s.info.last_epoch_started > 0
            })
            .map(|(o, s)| (*o, s.clone()))
            .collect();
        tracing::debug!(
            %pg,
            acting = ?p.acting,
            summaries = ?considered.iter().map(|(o, s)| (o.0, s.info.last_epoch_started, s.info.last_update.to_string(), s.info.complete, &s.info.last_acting)).collect::<Vec<_>>(),
            "deciding"
        );
        let needed = p.ec.as_ref().map_or(1, |ec| ec.k());
        let (recorded, lost) = peering::required_activation(&self.map, pg, needed);
        let recorded = recorded.as_ref();
        let decided = match &p.ec {
            Some(ec) => erasure::plan(ec.k(), &p.acting, &considered, recorded).map(|(plan, head)| (plan, Some(head))),
            None => peering::plan(self.config.me, &considered, recorded).map(|plan| (plan, None)),
        };
        if let (Ok(_), Some(gone)) = (&decided, self.map.pg_active.get(&pg).filter(|_| !lost.is_empty())) {
            let from = considered
                .iter()
                .filter(|(_, s)| s.info.last_update != EVersion::default())
                .max_by_key(|(_, s)| s.info.last_update);
            let what = match from {
                Some((osd, s)) => format!("goes on from {osd}'s copy at {}", s.info.last_update),
                None => "goes on empty".to_owned(),
            };
            let lost = lost.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
            let note = format!(
                "lost: the writes of interval {} that only {lost} held (declared lost); the PG {what}",
                gone.interval
            );
            tracing::warn!(%pg, note, "going active without OSDs declared lost");
            p.lost = Some(note);
        }
        match decided {
            Err(blocked) => {
                let reason = format!("{blocked:?}");
                tracing::info!(%pg, reason, "peering blocked");
                p.phase = Phase::Blocked { reason, stall: Stall::Incomplete };
                self.schedule_retry(pg, RETRY_DELAY);
            }
            Ok((plan, Some(head))) => self.peered_erasure(pg, plan, head, &considered),
            Ok((plan, None)) => self.peered(pg, plan, &considered),
        }
    }

    pub(crate) fn peered(&mut self, pg: PgId, plan: Plan, summaries: &BTreeMap<OsdId, PgSummary>) {
        let me = self.config.me;
        let Some(mine) = plan.peers.get(&me).cloned() else { return };
        let auth_update = summaries.get(&plan.auth).map(|s| s.info.last_update).unwrap_or_default();
        if mine.recovery != Recovery::None || mine.keep_until != Some(auth_update) {
            if self.hand_over(pg, &plan, summaries, auth_update) {
                return;
            }
            let Some(p) = self.primaries.get_mut(&pg) else { return };
            let interval = p.interval;
            tracing::info!(%pg, auth = %plan.auth, "primary is behind; recovering from the authority");
            let log_tail = summaries.get(&plan.auth).map(|s| s.info.log_tail).unwrap_or_default();
            p.phase = Phase::SelfRecovery {
                auth: plan.auth,
                pull: Pull::Log { missing: mine.recovery },
                keep_until: mine.keep_until,
                log_tail,
                erasure: None,
            };
            let after = mine.keep_until.unwrap_or_default();
            self.ask(pg, interval, plan.auth, PeerRequest::Log { pg, after }, Expect::AuthLog);
            return;
        }
        if let Err(e) = self.activate(pg, &plan) {
            tracing::error!(%pg, error = %e, "activation failed");
            self.restart_later(pg);
        }
    }

    /// This primary is behind `head`: if its copy lacks objects (not only divergent
    /// entries to undo) and another member of the acting set is complete and at `head`,
    /// asks the monitors to let that one lead (`primary_temp`, as Ceph's peering does), so
    /// that the PG serves while this copy is recovered rather than after. Whether it asked.
    pub(crate) fn hand_over(
        &mut self,
        pg: PgId,
        plan: &Plan,
        summaries: &BTreeMap<OsdId, PgSummary>,
        head: EVersion,
    ) -> bool {
        let me = self.config.me;
        if plan.peers.get(&me).is_none_or(|mine| mine.recovery == Recovery::None) {
            return false;
        }
        let Some(p) = self.primaries.get_mut(&pg) else { return false };
        let up_to_date = PeerPlan { keep_until: Some(head), recovery: Recovery::None };
        let lead = p.acting.iter().copied().find(|osd| {
            *osd != me
                && *osd != OsdId::NONE
                && plan.peers.get(osd) == Some(&up_to_date)
                && summaries.get(osd).is_some_and(|s| s.info.complete && s.info.last_update == head)
        });
        let Some(lead) = lead.filter(|_| plan.stray_sources.is_empty() && !plan.serve_after_recovery) else {
            return false;
        };
        tracing::info!(%pg, %lead, "primary is behind; asking the monitors to let an up-to-date copy lead");
        p.phase = Phase::Blocked { reason: format!("handing over to {lead}"), stall: Stall::HandingOver };
        self.emit(Action::PrimaryTemp { pg, lead: Some(lead) });
        self.schedule_retry(pg, RETRY_DELAY);
        true
    }

    /// First step of the primary's own recovery: adopt the authority's log, marked
    /// incomplete until every missing object is here.
    pub(crate) fn adopt_auth_log(&mut self, pg: PgId, entries: Vec<PgLogEntry>, remembered: Vec<PgLogEntry>) {
        let Some(p) = self.primaries.get(&pg) else { return };
        let Phase::SelfRecovery { keep_until, log_tail, erasure, .. } = &p.phase else { return };
        let (keep_until, log_tail, head) = (*keep_until, *log_tail, erasure.as_ref().map(|(_, head)| *head));
        // The PG keeps its own last activation: this is not one.
        let outcome = match head {
            Some(head) => self.adopt_erasure(pg, keep_until, head, entries, log_tail),
            None => self.adopt_locally(pg, keep_until, entries, log_tail, remembered),
        };
        if let Err(e) = outcome {
            tracing::error!(%pg, error = %e, "adopting the authoritative log failed");
            self.restart_later(pg);
            return;
        }
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        if let Phase::SelfRecovery { pull, .. } = &mut p.phase {
            let (queue, listing) = match std::mem::replace(pull, Pull::Log { missing: Recovery::None }) {
                Pull::Log { missing: Recovery::Log(objects) } => (objects.into_iter().collect(), None),
                Pull::Log { missing: Recovery::None } => (VecDeque::new(), None),
                _ => (VecDeque::new(), Some(None)),
            };
            *pull = Pull::Objects { queue, resume: None, listing };
        }
        self.pull_next(pg);
    }

    /// An erasure-coded primary pulls no objects: once their names are known it activates
    /// and rebuilds them. Whether that is so (and it did).
    pub(crate) fn names_known(&mut self, pg: PgId) -> bool {
        let Some(p) = self.primaries.get_mut(&pg) else { return false };
        let Phase::SelfRecovery { pull: Pull::Objects { queue, listing: None, .. }, erasure: Some(_), .. } =
            &mut p.phase
        else {
            return false;
        };
        let missing = std::mem::take(queue).into_iter().collect();
        self.activate_behind(pg, missing);
        true
    }

    pub(crate) fn adopt_locally(
        &mut self,
        pg: PgId,
        keep_until: Option<EVersion>,
        entries: Vec<PgLogEntry>,
        log_tail: EVersion,
        remembered: Vec<PgLogEntry>,
    ) -> Result<()> {
        let pg_num = self.map.pool(pg.pool)?.pg_num;
        let state = self.pg(pg)?;
        let activate = Activate {
            pg,
            interval: state.info.last_epoch_started,
            acting: state.info.last_acting.clone(),
            keep_until,
            entries,
            log_tail,
            complete: false,
            remembered,
        };
        let mut txn = Transaction::new();
        state.adopt(&mut txn, &activate, pg_num)?;
        self.commit(pg, txn)?;
        self.pgs.remove(&pg);
        Ok(())
    }

    pub(crate) fn pull_next(&mut self, pg: PgId) {
        if self.names_known(pg) {
            return;
        }
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        let interval = p.interval;
        let Phase::SelfRecovery { auth, pull: Pull::Objects { queue, resume, listing }, erasure, .. } = &mut p.phase
        else {
            return;
        };
        let auth = *auth;
        // An erasure-coded primary only lists the names (a backfill): it rebuilds them later.
        if let Some(object) = queue.front().filter(|_| erasure.is_none()) {
            let request = PeerRequest::PullPart { pg, object: object.clone(), resume: resume.clone() };
            self.ask(pg, interval, auth, request, Expect::Pulled);
        } else if let Some(after) = listing {
            let request = PeerRequest::ListRange { pg, after: after.clone(), max: OBJECTS_PER_COPY as u32 };
            self.ask(pg, interval, auth, request, Expect::Listed);
        } else {
            self.self_recovered(pg);
        }
    }

    /// Applies a pulled part; the next request continues the object or starts the next.
    pub(crate) fn pulled(&mut self, pg: PgId, txn: &[u8], next: Option<Bytes>) {
        let applied = Transaction::decode(txn).and_then(|t| {
            let bytes = t.bytes() as u64;
            self.commit(pg, t).map(|_| bytes)
        });
        let bytes = match applied {
            Ok(bytes) => bytes,
            Err(e) => {
                tracing::error!(%pg, error = %e, "applying pulled objects failed");
                self.restart_later(pg);
                return;
            }
        };
        if let Some(Primary { phase: Phase::SelfRecovery { pull: Pull::Objects { queue, resume, .. }, .. }, .. }) =
            self.primaries.get_mut(&pg)
        {
            let objects = u32::from(next.is_none());
            if next.is_none() {
                queue.pop_front();
            }
            *resume = next;
            self.out.push(Action::Count(Counted::Recovered { objects, bytes }));
        }
        self.pull_next(pg);
    }

    /// The authority's copy of the next object to pull does not read back (`e`), and no
    /// other copy is as new: the object is unfound. It is recorded so (persisted), its
    /// older local copy is never served, and the pull goes on with the next object, so the
    /// PG can go active with only this object unavailable (where Ceph's PG would stay
    /// `recovery_unfound` and block its operations).
    pub(crate) fn pull_unfound(&mut self, pg: PgId, e: RadosError) {
        let Some(Primary { phase: Phase::SelfRecovery { pull: Pull::Objects { queue, resume, .. }, .. }, .. }) =
            self.primaries.get_mut(&pg)
        else {
            return;
        };
        let Some(object) = queue.pop_front() else { return };
        *resume = None;
        tracing::error!(%pg, %object, error = %e, "unfound: the authority's copy does not read back; skipped");
        self.config.damage.add(&self.config.store, pg, &object, Kind::Unfound);
        self.pull_next(pg);
    }

    /// Queues the listed objects for pulling, and lists again after them if more follow.
    pub(crate) fn listed(&mut self, pg: PgId, keys: Vec<Bytes>, more: bool) {
        let names: Result<Vec<ObjectName>> =
            keys.iter().map(|k| ObjectKey::from_bytes(k.to_vec())?.decode().map(|(_, name)| name)).collect();
        let names = match names {
            Ok(names) => names,
            Err(e) => return self.peer_failed(pg, "reading the authority's object keys", e),
        };
        if let Some(Primary { phase: Phase::SelfRecovery { pull: Pull::Objects { queue, listing, .. }, .. }, .. }) =
            self.primaries.get_mut(&pg)
        {
            queue.extend(names);
            *listing = keys.last().filter(|_| more).map(|last| Some(last.clone()));
        }
        self.pull_next(pg);
    }

    /// Every missing object is here: mark the copy complete and peer again, now as an
    /// up-to-date primary.
    pub(crate) fn self_recovered(&mut self, pg: PgId) {
        match self.mark_own_copy_complete(pg) {
            Ok(_) => {
                tracing::info!(%pg, "primary recovered; peering again");
                self.start_peering(pg);
            }
            Err(e) => {
                tracing::error!(%pg, error = %e, "recording recovery failed");
                self.restart_later(pg);
            }
        }
    }

    /// Records that this OSD's copy of `pg` holds every object again.
    pub(crate) fn mark_own_copy_complete(&mut self, pg: PgId) -> Result<u64> {
        let mut txn = Transaction::new();
        self.pg(pg)?.mark_complete(&mut txn)?;
        self.commit(pg, txn)
    }

    /// The primary is up to date: tell every replica what to keep, start serving, and
    /// start recovering the replicas that are behind.
    pub(crate) fn activate(&mut self, pg: PgId, plan: &Plan) -> Result<()> {
        let Some(p) = self.primaries.get(&pg) else { return Ok(()) };
        let (interval, acting) = (p.interval, p.acting.clone());
        let me = self.config.me;
        let store = self.config.store.clone();
        let state = self.pg(pg)?;
        let (last_update, log_tail) = (state.info.last_update, state.info.log_tail);
        let mut recovery = BTreeMap::new();
        if let Some(Recovery::Log(objects)) = plan.peers.get(&me).map(|mine| &mine.recovery) {
            // An erasure-coded primary rebuilds its own shard first.
            recovery.insert(me, PeerRecovery::log(objects.iter().cloned().collect()));
        }
        let mut activations = Vec::new();
        for osd in acting.iter().copied().filter(|o| *o != me && *o != OsdId::NONE) {
            let peer = plan
                .peers
                .get(&osd)
                .cloned()
                .unwrap_or(peering::PeerPlan { keep_until: None, recovery: Recovery::Backfill });
            let entries = match peer.keep_until {
                Some(k) if k == last_update => Vec::new(),
                keep => state.entries_after(&store, keep.unwrap_or_default())?,
            };
            let complete = peer.recovery == Recovery::None;
            activations.push((
                osd,
                Activate {
                    pg,
                    interval,
                    acting: acting.clone(),
                    keep_until: peer.keep_until,
                    entries,
                    log_tail,
                    complete,
                    remembered: state.remembered().to_vec(),
                },
            ));
            let work = match peer.recovery {
                Recovery::None => None,
                Recovery::Log(objects) => Some(PeerRecovery::log(objects.into_iter().collect())),
                Recovery::Backfill => {
                    Some(PeerRecovery { backfill: Some((None, false)), ..PeerRecovery::log(VecDeque::new()) })
                }
            };
            if let Some(work) = work {
                recovery.insert(osd, work);
            }
        }
        state.info.last_epoch_started = interval;
        state.info.last_acting = acting.clone();
        let mut txn = Transaction::new();
        state.put_info(&mut txn);
        let seq = self.commit(pg, txn)?;
        let mut replicas: BTreeSet<OsdId> = activations.iter().map(|(osd, _)| *osd).collect();
        for (osd, activate) in activations {
            self.ask(pg, interval, osd, PeerRequest::Activate(activate), Expect::Activated(osd));
        }
        // Strays read in place of backfilled shards first undo their divergent writes.
        for stray in plan.stray_sources.values() {
            if let Some(to) = stray.roll_back_to {
                replicas.insert(stray.osd);
                let request = PeerRequest::RollBack { pg, interval, to };
                self.ask(pg, interval, stray.osd, request, Expect::Activated(stray.osd));
            }
        }
        self.emit(Action::WhenDurable { seq, awaiting: Durable { pg, interval, at: None } });
        let Some(p) = self.primaries.get_mut(&pg) else { return Ok(()) };
        p.phase = Phase::Activating { replicas, local: false, registering: false };
        p.recovery = recovery;
        p.committed_to = last_update;
        p.strays = plan.peers.keys().filter(|o| !acting.contains(o)).copied().collect();
        if let Some(ec) = p.ec.as_mut() {
            ec.activated(plan);
        }
        Ok(())
    }

    /// Once every replica applied its activation and the local record is durable, asks the
    /// monitor to record the activation: from then on, peering needs a copy this recent.
    pub(crate) fn register_when_activated(&mut self, pg: PgId) {
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        let Phase::Activating { replicas, local: true, registering } = &mut p.phase else { return };
        if !replicas.is_empty() || *registering {
            return;
        }
        *registering = true;
        if crate::primary::serves_after_recovery(p) {
            // Recorded once recovery is done (`record_when_recovered`).
            return self.go_active(pg);
        }
        let active = ActiveInterval { interval: p.interval, acting: p.acting.clone() };
        let registration = Registration { pg, active };
        self.emit(Action::Register(registration));
    }

    /// The activation is recorded: serve the queued operations and start recovering the
    /// replicas that are behind.
    pub(crate) fn go_active(&mut self, pg: PgId) {
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        if !matches!(p.phase, Phase::Activating { registering: true, .. }) {
            return;
        }
        p.phase = Phase::Active;
        tracing::info!(%pg, interval = p.interval, acting = ?p.acting, recovering = p.recovery.len(), "pg active");
        if !crate::primary::serves_after_recovery(p) {
            self.serve_waiting(pg);
        }
        self.pump_recovery(pg);
        self.record_when_recovered(pg);
        self.remove_strays_if_clean(pg);
        self.release_lead_if_recovered(pg);
    }

    /// Runs the operations that waited for the PG, in order; those that must still wait
    /// queue again.
    pub(crate) fn serve_waiting(&mut self, pg: PgId) {
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        for (op, caller, reply) in std::mem::take(&mut p.waiting) {
            self.client_op(op, caller, reply);
        }
    }

    /// Once the PG is clean with a full acting set, tells OSDs that still hold an old copy
    /// of it to delete that copy.
    pub(crate) fn remove_strays_if_clean(&mut self, pg: PgId) {
        let size = self.map.pools.get(&pg.pool).map_or(usize::MAX, |p| p.size as usize);
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        if !matches!(p.phase, Phase::Active) || !p.recovery.is_empty() || p.up_count() < size {
            return;
        }
        let (interval, strays) = (p.interval, std::mem::take(&mut p.strays));
        for osd in strays {
            self.ask(pg, interval, osd, PeerRequest::RemovePg { pg, interval }, Expect::StrayRemoved(osd));
        }
    }

    /// Once every member of the acting set is recovered, placement's primary can lead
    /// again: asks the monitors to drop the PG's `primary_temp`, if it has one.
    pub(crate) fn release_lead_if_recovered(&mut self, pg: PgId) {
        let Some(p) = self.primaries.get(&pg) else { return };
        if matches!(p.phase, Phase::Active) && p.recovery.is_empty() && self.map.primary_temp.contains_key(&pg) {
            let timer = Timer { pg, interval: p.interval, round: p.round, kind: TimerKind::HandBack };
            tracing::info!(%pg, "recovered; handing the PG back to placement's primary");
            self.emit(Action::PrimaryTemp { pg, lead: None });
            self.emit(Action::Timer { after: HAND_BACK_RETRY, timer });
        }
    }

    /// Whether this OSD serves `pg` now (its active primary); EAGAIN otherwise.
    pub(crate) fn check_serving(&self, pg: PgId) -> Result<()> {
        match self.primaries.get(&pg) {
            Some(Primary { phase: Phase::Active, .. }) => Ok(()),
            Some(_) => Err(err::again(format!("pg {pg} is not active yet"))),
            None => {
                Err(err::again(format!("{} is not the primary of pg {pg} at epoch {}", self.config.me, self.map.epoch)))
            }
        }
    }

    /// Runs a client operation on an active primary; queues it while the PG peers.
    pub(crate) fn client_op(&mut self, op: OsdOp, caller: ClientId, reply: R) {
        if self.map.has_flag("pause") {
            let paused = err::again("the cluster is paused (osd set pause): operations wait until it is unset");
            return self.respond(Err(paused), reply);
        }
        if self.map.merge_paused(op.pool) {
            let merging =
                err::again(format!("pool {}'s PGs are merging: operations wait until they are merged", op.pool));
            return self.respond(Err(merging), reply);
        }
        self.last_client_op_ns = Some(self.now_ns);
        self.serve_op(op, caller, reply, false);
    }

    /// Runs a client operation; `repaired` once its object's copy was repaired for it (a
    /// second bad read is then answered with EIO).
    pub(crate) fn serve_op(&mut self, op: OsdOp, caller: ClientId, reply: R, repaired: bool) {
        let pg = match self.map.pool(op.pool) {
            Ok(pool) => shoal_placement::pg_of(pool, &op.object),
            Err(e) => return self.respond(Err(e), reply),
        };
        let me = self.config.me;
        match self.primaries.get_mut(&pg) {
            None => return self.respond(self.check_serving(pg).map(|()| (0, Reply::Done)), reply),
            // An erasure-coded primary serves the objects its own shard holds; an
            // operation on one it lacks waits for that object's rebuild, started now.
            Some(p)
                if !matches!(p.phase, Phase::Active)
                    || crate::primary::serves_after_recovery(p)
                    || p.lacks_own_copy(me, pg, &op.object) =>
            {
                if p.waiting.len() >= MAX_WAITING_OPS {
                    let busy = format!("pg {pg} is not active and {MAX_WAITING_OPS} operations wait for it already");
                    return self.respond(Err(err::again(busy)), reply);
                }
                let rebuild_now = matches!(p.phase, Phase::Active).then(|| op.object.clone());
                p.waiting.push((op, caller, reply));
                if let Some(object) = rebuild_now {
                    self.rebuild_own_now(pg, object);
                }
                return;
            }
            Some(p) => {
                p.client_ops += 1;
                if p.ec.is_some() {
                    return self.serve_erasure(pg, op, caller, reply);
                }
            }
        }
        let damage = self.config.damage.get(pg, &op.object);
        if damage == Some(Kind::Unfound) && !matches!(op.steps.first(), Some(Step::Remove)) {
            let e = err::io(format!("object '{}' is unfound: its only up-to-date copy does not read back", op.object));
            return self.respond(Err(e), reply);
        }
        let outcome = self.run_op(pg, &op, caller);
        let served =
            matches!(outcome, Ok(OpOutcome::Done(..) | OpOutcome::AfterWrites(_) | OpOutcome::Replicating { .. }));
        match damage.filter(|_| served) {
            // Only a removal gets this far.
            Some(Kind::Unfound) => self.config.damage.remove(&self.config.store, pg, &op.object),
            Some(Kind::Unreadable) => self.forget_damage_if_readable(pg, &op.object),
            None => {}
        }
        match outcome {
            Err(e) => self.respond(Err(e), reply),
            Ok(OpOutcome::Unreadable(e)) if !repaired => self.repair_then_serve(pg, op, caller, reply, e),
            Ok(OpOutcome::Unreadable(e)) => {
                self.config.damage.add(&self.config.store, pg, &op.object, Kind::Unreadable);
                self.respond(Err(e), reply)
            }
            Ok(OpOutcome::Done(seq, r)) => self.respond(Ok((seq, Reply::Op(r))), reply),
            Ok(OpOutcome::AfterWrites(r)) => self.attach_to_last_write(pg, reply, Ok(Reply::Op(r))),
            Ok(OpOutcome::Replicating { at, seq, reply: r, prev, entry, shipped }) => {
                self.replicate(pg, at, seq, prev, entry, shipped, reply, r);
            }
        }
    }

    /// The local copy of the operation's object could not be read (a bad checksum): marks
    /// it damaged and asks a complete replica for its copy; the operation runs again once
    /// the copy is here. Without such a replica the client gets the error.
    pub(crate) fn repair_then_serve(&mut self, pg: PgId, op: OsdOp, caller: ClientId, reply: R, e: RadosError) {
        if let Some(repair) = self.repair_from_replica(pg, Repairing::Op { op, caller, reply }, &e)
            && let Repairing::Op { reply, .. } = repair
        {
            self.respond(Err(e), reply);
        }
    }

    /// Marks the local copy of `repair`'s object damaged (its read failed with `e`) and
    /// asks a complete replica for its copy, for `repair` to go on once it is here;
    /// without such a replica, gives `repair` back.
    fn repair_from_replica(&mut self, pg: PgId, repair: Repairing<R>, e: &RadosError) -> Option<Repairing<R>> {
        let object = repair.object().clone();
        self.emit(Action::Count(Counted::ChecksumError));
        self.config.damage.add(&self.config.store, pg, &object, Kind::Unreadable);
        let me = self.config.me;
        let Some(p) = self.primaries.get(&pg) else { return Some(repair) };
        let source = p.members().find(|o| *o != me && !p.recovery.contains_key(o));
        let Some(source) = source else {
            tracing::error!(%pg, %object, error = %e, "bad copy and no replica to repair it from");
            return Some(repair);
        };
        tracing::error!(%pg, %object, error = %e, %source, "bad copy; repairing it from a replica");
        let request = PeerRequest::PullPart { pg, object, resume: None };
        let interval = p.interval;
        let repair = Repair { waiting: repair, source, received: Transaction::new() };
        self.ask(pg, interval, source, request, Expect::RepairCopy(Box::new(repair)));
        None
    }

    /// A part of the replica's copy for `repair`: asks for the next one, or, with the
    /// last (or a failure), repairs.
    pub(crate) fn repair_part(
        &mut self,
        pg: PgId,
        interval: u64,
        mut repair: Repair<R>,
        part: Result<(Bytes, Option<Bytes>)>,
    ) {
        let next = part.and_then(|(txn, next)| {
            repair.received.extend(Transaction::decode(&txn)?);
            Ok(next)
        });
        match next {
            Ok(Some(resume)) => {
                let request =
                    PeerRequest::PullPart { pg, object: repair.waiting.object().clone(), resume: Some(resume) };
                let source = repair.source;
                self.ask(pg, interval, source, request, Expect::RepairCopy(Box::new(repair)));
            }
            last => self.repair_with(pg, repair.waiting, last.map(|_| repair.received)),
        }
    }

    /// Applies a replica's copy if it is of the same version as the local one (a write
    /// since may have changed either), then goes on with what waited for it.
    pub(crate) fn repair_with(&mut self, pg: PgId, repair: Repairing<R>, copy: Result<Transaction>) {
        let object = repair.object().clone();
        let applied: Result<bool> = (|| {
            let txn = copy?;
            let key = ObjectKey::new(pg.pool, &object)?;
            if txn.onode(&key)? != self.config.store.onode(&key)? {
                return Ok(false);
            }
            self.commit(pg, txn)?;
            Ok(true)
        })();
        match applied {
            Ok(true) => {
                self.emit(Action::Count(Counted::ReadRepaired));
                self.config.damage.remove(&self.config.store, pg, &object);
                tracing::info!(%pg, %object, "repaired the local copy from a replica");
            }
            Ok(false) => tracing::info!(%pg, %object, "the replica's copy is of another version; not used"),
            Err(e) => tracing::error!(%pg, %object, error = %e, "repairing the local copy failed"),
        }
        match repair {
            Repairing::Op { op, caller, reply } => self.serve_op(op, caller, reply, true),
            Repairing::Recovery { osd, .. } => {
                if let Ok(r) = self.peer_recovery(pg, osd) {
                    r.repairing = false;
                }
                self.pump_recovery(pg);
            }
        }
    }

    /// Forgets a damaged object once every chunk of its local copy reads back (a client
    /// rewrote or removed it).
    pub(crate) fn forget_damage_if_readable(&mut self, pg: PgId, object: &ObjectName) {
        let readable = self
            .map
            .pool(pg.pool)
            .and_then(|pool| ObjectKey::new(pool.id, object))
            .and_then(|key| self.config.store.chunks(&key, 0, u32::MAX));
        if readable.is_ok() {
            self.config.damage.remove(&self.config.store, pg, object);
            tracing::info!(%pg, %object, "a damaged object reads back whole again");
        }
    }

    pub(crate) fn run_op(&mut self, pg: PgId, op: &OsdOp, caller: ClientId) -> Result<OpOutcome> {
        let p = self.primaries.get(&pg).ok_or_else(|| err::again(format!("not the primary of pg {pg}")))?;
        let (interval, replicated, pending_writes) = (p.interval, p.acting.len() > 1, !p.inflight.is_empty());
        // A reply that changes nothing still waits for the writes in flight before it.
        let unchanged = |seq, r| if pending_writes { OpOutcome::AfterWrites(r) } else { OpOutcome::Done(seq, r) };
        let state = self.pg(pg)?;
        if let Some(r) = state.applied(&op.reqid) {
            // A resend of a write already applied: answer as the first time.
            return Ok(unchanged(self.last_seq, r));
        }
        let prev = state.info.last_update;
        let at = EVersion { epoch: interval, version: prev.version + 1 };
        let executed = match self.execute(op, caller, at) {
            // A store read failed: the local copy is damaged (nothing was applied).
            Err(e) if e.errno == Errno::Io => return Ok(OpOutcome::Unreadable(e)),
            other => other?,
        };
        let Some((mut txn, entry)) = executed.write else {
            return Ok(unchanged(self.last_seq, executed.reply));
        };
        self.refuse_when_full(pg, &op.steps)?;
        let shipped: Option<Bytes> = replicated.then(|| txn.encode().into());
        self.pg(pg)?.append(&mut txn, &entry);
        let seq = self.commit(pg, txn)?;
        self.record_usage(pg, executed.usage);
        self.publish_class_state(executed.key, at.version, executed.states);
        Ok(match shipped {
            None => OpOutcome::Done(seq, executed.reply),
            Some(shipped) => OpOutcome::Replicating { at, seq, reply: executed.reply, prev, entry, shipped },
        })
    }

    pub(crate) fn attach_to_last_write(&mut self, pg: PgId, reply: R, value: Result<Reply>) {
        match self.primaries.get_mut(&pg).and_then(|p| p.inflight.values_mut().next_back()) {
            Some(last) => last.replies.push((reply, value)),
            None => self.emit(Action::Reply { to: reply, after: 0, value }),
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn replicate(
        &mut self,
        pg: PgId,
        at: EVersion,
        seq: u64,
        prev: EVersion,
        entry: PgLogEntry,
        shipped: Bytes,
        reply: R,
        value: shoal_types::msg::OpReply,
    ) {
        let me = self.config.me;
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        let interval = p.interval;
        let replicas: Vec<OsdId> = p.members().filter(|o| *o != me).collect();
        p.inflight.insert(
            at,
            InFlight {
                waiting: replicas.iter().copied().collect(),
                local_pending: true,
                replies: vec![(reply, Ok(Reply::Op(value)))],
                object: entry.object.clone(),
                taking_whole: BTreeSet::new(),
            },
        );
        for osd in replicas {
            let rep = RepOp { pg, interval, prev, entry: entry.clone(), txn: shipped.clone() };
            self.ask(pg, interval, osd, PeerRequest::RepOp(rep), Expect::Acked(osd, at));
        }
        self.emit(Action::WhenDurable { seq, awaiting: Durable { pg, interval, at: Some(at) } });
    }

    /// Answers the writes at the head of the queue that every replica has made durable
    /// (in PG order: a later write is never answered before an earlier one).
    pub(crate) fn complete_writes(&mut self, pg: PgId) {
        let replicas_needed = !self.flaws.reply_before_replica_commit;
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        let mut completed = false;
        while let Some(entry) = p.inflight.first_entry() {
            if entry.get().local_pending || (replicas_needed && !entry.get().waiting.is_empty()) {
                break;
            }
            p.committed_to = *entry.key();
            completed = true;
            for (to, value) in entry.remove().replies {
                self.out.push(Action::Reply { to, after: 0, value });
            }
        }
        if completed && p.ec.is_some() {
            // Operations waiting for these writes to their objects may go on.
            self.resume_erasure(pg);
        }
    }

    /// Whether this shard runs as many recovery operations as it may: its part of the
    /// OSD's `osd_recovery_max_active`, shared by all its PGs, or of
    /// `osd_recovery_max_active_with_clients` while clients use it.
    pub(crate) fn recovery_slots_taken(&self) -> bool {
        let shard = (self.config.index, self.config.shards);
        let slots = recovery_slots(&self.limits, shard, self.last_client_op_ns, self.now_ns);
        self.primaries.values().map(|p| p.pushes_in_flight).sum::<usize>() >= slots
    }

    /// A recovery operation of `pg` is over: its slot goes to `pg`, then to the other
    /// PGs waiting for one, in turn from the next.
    pub(crate) fn release_recovery_slot(&mut self, pg: PgId) {
        if let Some(p) = self.primaries.get_mut(&pg) {
            p.pushes_in_flight = p.pushes_in_flight.saturating_sub(1);
        }
        self.pump_recovery(pg);
        self.pump_waiting_recoveries(pg);
    }

    /// Gives free recovery slots to the PGs with recovery waiting, in turn after `after`.
    pub(crate) fn pump_waiting_recoveries(&mut self, after: PgId) {
        use std::ops::Bound::{Excluded, Unbounded};
        let waiting = |p: &Primary<R>| p.recovery.values().any(PeerRecovery::has_work);
        let next = self.primaries.range((Excluded(after), Unbounded)).chain(self.primaries.range(..after));
        let turns: Vec<PgId> = next.filter(|(_, p)| waiting(p)).map(|(pg, _)| *pg).collect();
        for pg in turns {
            if self.recovery_slots_taken() {
                return;
            }
            self.pump_recovery(pg);
        }
    }

    /// Sends pushes to replicas that are behind, as far as the recovery slots allow.
    pub(crate) fn pump_recovery(&mut self, pg: PgId) {
        if self.primaries.get(&pg).is_some_and(|p| p.ec.is_some()) {
            return self.pump_erasure_recovery(pg);
        }
        let me = self.config.me;
        let Some(pool) = self.map.pools.get(&pg.pool).cloned() else { return };
        loop {
            let slots_taken = self.recovery_slots_taken();
            let Some(p) = self.primaries.get_mut(&pg) else { return };
            let interval = p.interval;
            let finished = p.take_finished();
            if slots_taken {
                self.send_recovered(pg, interval, finished);
                return;
            }
            let map = &self.map;
            let next = p.recovery.iter().find(|(osd, r)| r.has_work() && !recovery_held(map, **osd, **osd == me, r));
            let Some((osd, backfill)) = next.map(|(osd, r)| (*osd, r.backfill.as_ref().map(|(c, _)| c.clone()))) else {
                self.send_recovered(pg, interval, finished);
                return;
            };
            self.send_recovered(pg, interval, finished);
            let txn = self.next_push(pg, pool.pg_num, osd, backfill);
            match txn {
                Ok(None) => continue,
                Ok(Some((txn, objects))) => {
                    if let Some(p) = self.primaries.get_mut(&pg) {
                        p.pushes_in_flight += 1;
                        if let Some(r) = p.recovery.get_mut(&osd) {
                            r.in_flight += 1;
                        }
                    }
                    let at = self.pg(pg).map(|state| state.info.last_update).unwrap_or_default();
                    let size = PushSize { objects, bytes: txn.bytes() as u64 };
                    let push = PeerRequest::PushAt { pg, interval, at, txn: txn.encode().into() };
                    self.ask(pg, interval, osd, push, Expect::Pushed(osd, size));
                }
                Err(e) => {
                    tracing::error!(%pg, error = %e, "reading objects to push failed");
                    self.restart_later(pg);
                    return;
                }
            }
        }
    }

    /// The next push for `osd`: the rest of a partly pushed object, or the next objects
    /// of its log recovery or of its backfill (after `backfill`'s cursor), up to
    /// [`COPY_PART_BYTES`]; an object that does not fit is continued by the next push. With
    /// the push, how many objects it completes; `None` when the objects listed were none.
    pub(crate) fn next_push(
        &mut self,
        pg: PgId,
        pg_num: u32,
        osd: OsdId,
        backfill: Option<Option<ObjectKey>>,
    ) -> Result<Option<(Transaction, u32)>> {
        let r = self.peer_recovery(pg, osd)?;
        // What this push may copy, in order; for a log recovery its names leave the
        // replica's list only once started (a partial object is continued by the next push).
        let (queue, from_list, listed_all) = match (r.partial.take(), backfill) {
            (Some((key, resume)), _) => (vec![(key, Some(resume))], false, false),
            (None, Some(cursor)) => {
                let (keys, more) = self.list_keys(pg, pg_num, cursor.as_ref(), OBJECTS_PER_COPY)?;
                (keys.into_iter().map(|k| (k, None)).collect(), false, !more)
            }
            (None, None) => {
                let names = r.objects.iter().take(OBJECTS_PER_COPY);
                let keys: Result<Vec<_>> = names.map(|name| Ok((ObjectKey::new(pg.pool, name)?, None))).collect();
                (keys?, true, false)
            }
        };
        let listed = queue.len();
        let (mut txn, mut budget, mut last, mut started, mut completed) =
            (Transaction::new(), COPY_PART_BYTES, None, 0, 0);
        for (position, (key, resume)) in queue.into_iter().enumerate() {
            if budget == 0 {
                break;
            }
            let unfound =
                self.config.damage.in_pg(pg) && self.config.damage.get(pg, &key.decode()?.1) == Some(Kind::Unfound);
            let copied = match unfound {
                true => Err(err::io(format!("pg {pg}: the object is unfound"))),
                false => self.config.store.copy_object_part(&key, resume.as_ref(), budget),
            };
            let (part, next) = match copied {
                // A damaged copy is dealt with when it comes first, alone.
                Err(e) if e.errno == Errno::Io && position > 0 => break,
                Err(e) if e.errno == Errno::Io => match self.repair_push_source(pg, osd, &key, resume, e)? {
                    true => break,
                    false => {
                        (started, last) = (1, Some(key));
                        continue;
                    }
                },
                other => other?,
            };
            budget = budget.saturating_sub(part.bytes());
            txn.extend(part);
            started += 1;
            last = Some(key.clone());
            if let Some(next) = next {
                self.peer_recovery(pg, osd)?.partial = Some((key, next));
                break;
            }
            completed += 1;
        }
        let r = self.peer_recovery(pg, osd)?;
        if from_list {
            r.objects.drain(..started);
        }
        if let Some(cursor) = &mut r.backfill {
            // Objects listed but not started are listed again after the last one started.
            *cursor = (last.clone().or(cursor.0.take()), listed_all && started == listed);
        }
        Ok((!txn.is_empty()).then_some((txn, completed)))
    }

    /// The primary's copy of `key`, the next object to push to `osd` (from `resume`), does
    /// not read back (`e`). Unless it was known damaged already, it is repaired from a
    /// complete replica while `osd`'s recovery waits (true). Else the object is unfound:
    /// `osd`'s recovery goes on without it (false), and the damage stays reported until a
    /// write or a repair mends it.
    fn repair_push_source(
        &mut self,
        pg: PgId,
        osd: OsdId,
        key: &ObjectKey,
        resume: Option<shoal_store::CopyResume>,
        e: RadosError,
    ) -> Result<bool> {
        let (_, object) = key.decode()?;
        if !self.config.damage.contains(pg, &object) {
            let repair = Repairing::Recovery { osd, object: object.clone() };
            if self.repair_from_replica(pg, repair, &e).is_none() {
                let r = self.peer_recovery(pg, osd)?;
                r.repairing = true;
                r.partial = resume.map(|resume| (key.clone(), resume));
                return Ok(true);
            }
        }
        tracing::error!(%pg, %object, %osd, error = %e, "unfound: no good copy to recover it from; skipped");
        Ok(false)
    }

    pub(crate) fn peer_recovery(&mut self, pg: PgId, osd: OsdId) -> Result<&mut PeerRecovery> {
        let recovery = self.primaries.get_mut(&pg).and_then(|p| p.recovery.get_mut(&osd));
        recovery.ok_or_else(|| err::again(format!("pg {pg}: the recovery of {osd} ended")))
    }

    pub(crate) fn send_recovered(&mut self, pg: PgId, interval: u64, osds: Vec<OsdId>) {
        for osd in osds {
            if osd == self.config.me {
                // The primary's own shard was rebuilt: its copy is complete again.
                let recorded = self.mark_own_copy_complete(pg).map(|_| ());
                self.primary_event(pg, interval, Event::Recovered(osd, recorded));
                continue;
            }
            self.ask(pg, interval, osd, PeerRequest::RecoveryDone { pg, interval }, Expect::Recovered(osd));
        }
    }
}

/// What running an operation on the primary led to.
pub(crate) enum OpOutcome {
    /// Reading the object's local copy failed.
    Unreadable(RadosError),
    /// Answer once the store is durable up to the sequence number.
    Done(u64, shoal_types::msg::OpReply),
    /// Answer after the writes in flight (a read must not see what may still be lost).
    AfterWrites(shoal_types::msg::OpReply),
    /// A write committed locally, to be replicated.
    Replicating {
        at: EVersion,
        seq: u64,
        reply: shoal_types::msg::OpReply,
        prev: EVersion,
        entry: PgLogEntry,
        shipped: Bytes,
    },
}

/// Answers every write in flight, and every operation an erasure-coded PG holds, with
/// EAGAIN (its client resends).
pub(crate) fn fail_in_flight<R>(p: &mut Primary<R>, why: &str, out: &mut Vec<Action<R>>) {
    if let Some(ec) = &mut p.ec {
        ec.fail_all(why, out);
    }
    for (_, f) in std::mem::take(&mut p.inflight) {
        for (to, _) in f.replies {
            out.push(Action::Reply { to, after: 0, value: Err(err::again(why.to_owned())) });
        }
    }
}

/// Answers every write in flight and every queued operation with EAGAIN.
pub(crate) fn fail_all<R>(p: &mut Primary<R>, pg: PgId, why: &str, out: &mut Vec<Action<R>>) {
    fail_in_flight(p, why, out);
    for (_, _, to) in p.waiting.drain(..) {
        out.push(Action::Reply { to, after: 0, value: Err(err::again(format!("pg {pg}: {why}"))) });
    }
}

/// Whether recovery `r` of member `osd` waits: the cluster flags hold it (`nobackfill` a
/// backfill, `norecover` a recovery by log), or it is a backfill onto an OSD past the
/// backfill-full ratio (Ceph's `backfill_toofull`). The primary's own (`own`) never
/// waits, so that its PGs serve.
pub(crate) fn recovery_held(map: &shoal_types::OsdMap, osd: OsdId, own: bool, r: &PeerRecovery) -> bool {
    let backfill = r.backfill.is_some();
    let too_full = || map.osd_space.get(&osd).is_some_and(|s| *s >= shoal_types::space::SpaceState::BackfillFull);
    !own && (map.has_flag(if backfill { "nobackfill" } else { "norecover" }) || (backfill && too_full()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_types::space::SpaceState;

    #[test]
    fn flags_and_backfill_full_osds_hold_recovery_of_others_only() {
        let mut map = shoal_types::OsdMap::default();
        let log = PeerRecovery::log(VecDeque::new());
        let backfill = PeerRecovery { backfill: Some((None, false)), ..PeerRecovery::log(VecDeque::new()) };
        let held = |map: &shoal_types::OsdMap, own, r| recovery_held(map, OsdId(1), own, r);
        assert!(!held(&map, false, &log) && !held(&map, false, &backfill));
        map.flags.insert("norecover".into());
        assert!(held(&map, false, &log) && !held(&map, false, &backfill) && !held(&map, true, &log));
        map.flags.clear();
        map.flags.insert("nobackfill".into());
        assert!(!held(&map, false, &log) && held(&map, false, &backfill) && !held(&map, true, &backfill));
        map.flags.clear();
        map.osd_space.insert(OsdId(1), SpaceState::NearFull);
        assert!(!held(&map, false, &backfill), "near full still takes backfill");
        map.osd_space.insert(OsdId(1), SpaceState::BackfillFull);
        assert!(held(&map, false, &backfill) && !held(&map, false, &log), "backfill full: log recovery only");
        assert!(!recovery_held(&map, OsdId(2), false, &backfill), "another OSD is not full");
    }
}
