//! A shard's work as the primary of its erasure-coded PGs (the state lives in
//! [`crate::primary::erasure`]).

use super::Shard;
use crate::action::*;
use crate::ec::{self, EcObject, EcOutcome};
use crate::exec::ExecEnv;
use crate::peering::{PeerPlan, Plan, Recovery};
use crate::pglog::PgState;
use crate::primary::erasure::*;
use crate::primary::*;
use bytes::Bytes;
use shoal_store::{ObjectKey, Onode, Transaction};
use shoal_types::erasure::Touched;
use shoal_types::msg::{EcWrite, OsdOp, PeerRequest, RepOp, Reply};
use shoal_types::pg::{EVersion, PgSummary};
use shoal_types::{ActiveInterval, ClientId, ObjectName, OsdId, PgId, Result, Versioned as _, err};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

impl<R> Shard<R> {
    /// Peering decided an erasure-coded PG: activate if this primary's shard is at the
    /// head, else first take the authority's log (rolling back this shard's divergent
    /// writes), then activate with this shard among those to rebuild.
    pub(super) fn peered_erasure(
        &mut self,
        pg: PgId,
        plan: Plan,
        head: EVersion,
        summaries: &BTreeMap<OsdId, PgSummary>,
    ) {
        let me = self.config.me;
        let Some(mine) = plan.peers.get(&me).cloned() else { return };
        let at_head = summaries.get(&me).is_some_and(|s| s.info.last_update == head);
        if at_head && mine.keep_until == Some(head) && mine.recovery == Recovery::None {
            if let Err(e) = self.activate(pg, &plan) {
                tracing::error!(%pg, error = %e, "activation failed");
                self.restart_later(pg);
            }
            return;
        }
        if self.hand_over(pg, &plan, summaries, head) {
            return;
        }
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        let interval = p.interval;
        tracing::info!(%pg, auth = %plan.auth, %head, "primary's shard is behind; taking the authoritative log");
        let log_tail = summaries.get(&plan.auth).map(|s| s.info.log_tail).unwrap_or_default();
        let auth = plan.auth;
        p.phase = Phase::SelfRecovery {
            auth,
            pull: Pull::Log { missing: mine.recovery.clone() },
            keep_until: mine.keep_until,
            log_tail,
            erasure: Some((Box::new(plan), head)),
        };
        let after = mine.keep_until.unwrap_or_default();
        self.ask(pg, interval, auth, PeerRequest::Log { pg, after }, Expect::AuthLog);
    }

    /// Rolls this shard back to `keep_until` (or empties it, for a backfill) and adopts the
    /// authority's entries up to `head`, marked incomplete until its objects are rebuilt.
    pub(super) fn adopt_erasure(
        &mut self,
        pg: PgId,
        keep_until: Option<EVersion>,
        head: EVersion,
        mut entries: Vec<shoal_types::PgLogEntry>,
        log_tail: EVersion,
    ) -> Result<()> {
        if let Some(keep) = keep_until {
            self.roll_back_to(pg, keep)?;
        }
        entries.retain(|e| e.at <= head);
        self.adopt_locally(pg, keep_until, entries, log_tail, Vec::new())
    }

    /// The primary's shard took the authority's log; the objects it misses are known
    /// (listed from the authority for a backfill): activate, rebuilding them first.
    pub(super) fn activate_behind(&mut self, pg: PgId, missing: BTreeSet<ObjectName>) {
        let me = self.config.me;
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        let Phase::SelfRecovery { erasure: Some((plan, _)), .. } = &mut p.phase else { return };
        let mut plan = std::mem::replace(
            plan.as_mut(),
            Plan { auth: me, peers: BTreeMap::new(), stray_sources: BTreeMap::new(), serve_after_recovery: false },
        );
        // Only the primary's recovery counts in its own plan: its log is the authority's now.
        // Even with nothing to rebuild it is recovered: its copy is marked complete then.
        plan.peers.insert(me, PeerPlan { keep_until: None, recovery: Recovery::Log(missing) });
        if let Err(e) = self.activate(pg, &plan) {
            tracing::error!(%pg, error = %e, "activation failed");
            self.restart_later(pg);
        }
    }

    /// Runs a client operation on an active erasure-coded PG, after those waiting for its
    /// object.
    pub(super) fn serve_erasure(&mut self, pg: PgId, op: OsdOp, caller: ClientId, reply: R) {
        let Some(ec) = self.primaries.get_mut(&pg).and_then(|p| p.ec.as_mut()) else { return };
        let op = Op { op, caller, reply };
        if ec.busy(&op.op.object) {
            if ec.queued_ops() >= crate::primary::MAX_WAITING_OPS {
                let busy =
                    format!("pg {pg}: {} operations wait for their objects already", crate::primary::MAX_WAITING_OPS);
                return self.respond(Err(err::again(busy)), op.reply);
            }
            ec.queued.entry(op.op.object.clone()).or_default().push_back(op);
            return;
        }
        // One that must gather while its object is written waits for the write.
        if let Some(op) = self.run_erasure(pg, op, BTreeMap::new()) {
            self.requeue_front(pg, op);
        }
    }

    /// Runs an operation with the chunks gathered for it so far. Returns it if it must
    /// wait for the writes in flight to its object before gathering.
    #[must_use = "an operation returned must wait, or its client is never answered"]
    pub(crate) fn run_erasure(&mut self, pg: PgId, op: Op<R>, gathered: BTreeMap<u32, Bytes>) -> Option<Op<R>> {
        let outcome = self.execute_erasure(pg, &op, gathered.clone());
        match outcome {
            Err(e) => self.respond(Err(e), op.reply),
            Ok(None) => {}
            Ok(Some(ExecutedEc::Repeat(r))) | Ok(Some(ExecutedEc::Done(EcOutcome::Read(r)))) => {
                self.attach_to_last_write(pg, op.reply, Ok(Reply::Op(r)))
            }
            Ok(Some(ExecutedEc::Done(EcOutcome::Gather(chunks)))) => {
                if self.writing(pg, &op.op.object) {
                    return Some(op);
                }
                let (first, end) = (chunks.first().copied().unwrap_or(0), chunks.last().map_or(0, |c| c + 1));
                let object = op.op.object.clone();
                self.start_gather(pg, object, Purpose::Op(op, gathered), first, end, None);
            }
            Ok(Some(ExecutedEc::Done(EcOutcome::Write { reply, txns, touched, usage, .. }))) => {
                if let Err(e) = self.refuse_when_full(pg, &op.op.steps) {
                    self.respond(Err(e), op.reply);
                    return None;
                }
                let Some(taking_whole) = self.shards_ready_for_write(pg, &op.op.object, &touched) else {
                    return Some(op);
                };
                let value = Ok(Reply::Op(reply.clone()));
                match self.write_erasure(pg, &op, reply, txns, touched, taking_whole) {
                    Ok(actions) => {
                        self.record_usage(pg, usage);
                        self.attach_to_last_write(pg, op.reply, value);
                        self.out.extend(actions);
                    }
                    Err(e) => self.respond(Err(e), op.reply),
                }
            }
        }
        None
    }

    /// Whether a write to `object` can go to every shard: `None` if it must wait because
    /// another shard of the acting set lacks the object (Ceph's `wait_for_degraded_object`),
    /// as that shard would take the write on a partial copy and still count as holding it.
    /// Starts rebuilding the object there now, out of turn and beyond the recovery slots;
    /// the write runs again once the shard acknowledged the rebuilt copy (or, if writes to
    /// the object are in flight, once they complete). A write that replaces the whole
    /// object (`touched`) needs no rebuild: the shards that lack it, returned, take it
    /// whole.
    pub(crate) fn shards_ready_for_write(
        &mut self,
        pg: PgId,
        object: &ObjectName,
        touched: &Touched,
    ) -> Option<BTreeSet<OsdId>> {
        let me = self.config.me;
        let writing = self.writing(pg, object);
        let Some(p) = self.primaries.get_mut(&pg) else { return Some(BTreeSet::new()) };
        let lacking: BTreeSet<OsdId> = p
            .acting
            .iter()
            .copied()
            .filter(|o| *o != me && p.recovery.get(o).is_some_and(|r| r.lacks_listed(object)))
            .collect();
        let pushing = lacking.iter().any(|o| p.recovery.get(o).is_some_and(|r| r.pushing.contains(object)));
        if lacking.is_empty() {
            return Some(lacking);
        }
        if *touched == Touched::Whole && !writing && !pushing {
            tracing::debug!(%pg, %object, ?lacking, "a write replaces the object whole on shards that lack it");
            return Some(lacking);
        }
        let target = *lacking.first()?;
        if writing || pushing {
            return None;
        }
        if let Some(r) = p.recovery.get_mut(&target) {
            r.objects.retain(|o| o != object);
        }
        tracing::debug!(%pg, %object, %target, "a write waits for the object's rebuild on a shard");
        self.start_rebuild(pg, target, object.clone(), 0);
        None
    }

    /// Whether a write to `object` is in flight.
    pub(crate) fn writing(&self, pg: PgId, object: &ObjectName) -> bool {
        self.primaries.get(&pg).is_some_and(|p| p.inflight.values().any(|f| f.object == *object))
    }

    pub(crate) fn execute_erasure(
        &mut self,
        pg: PgId,
        op: &Op<R>,
        gathered: BTreeMap<u32, Bytes>,
    ) -> Result<Option<ExecutedEc>> {
        let store = self.config.store.clone();
        let key = ObjectKey::new(pg.pool, &op.op.object)?;
        let state = self.pg(pg)?;
        if let Some(r) = state.applied(&op.op.reqid) {
            return Ok(Some(ExecutedEc::Repeat(r)));
        }
        let version = state.info.last_update.version + 1;
        let Some(ec) = self.primaries.get(&pg).and_then(|p| p.ec.as_ref()) else { return Ok(None) };
        let onode = store.onode(&key)?.map(ec::logical_onode).transpose()?;
        let object = EcObject::new(ec.layout, onode, gathered);
        let env =
            ExecEnv { classes: &self.config.classes, limits: &self.limits, caller: op.caller, now_ns: self.now_ns };
        let outcome = ec::execute(&object, &key, &op.op.steps, &env, version, ec.coder.as_ref(), ec.allow_overwrites)?;
        Ok(Some(ExecutedEc::Done(outcome)))
    }

    /// Commits this primary's shard of a write (keeping what undoes it) and sends every
    /// other shard its own; the reply leaves once every shard has it.
    pub(crate) fn write_erasure(
        &mut self,
        pg: PgId,
        op: &Op<R>,
        reply: shoal_types::msg::OpReply,
        mut txns: Vec<Transaction>,
        touched: Touched,
        taking_whole: BTreeSet<OsdId>,
    ) -> Result<Vec<Action<R>>> {
        let me = self.config.me;
        let store = self.config.store.clone();
        let p = self.primaries.get(&pg).ok_or_else(|| err::again(format!("not the primary of pg {pg}")))?;
        let (interval, committed_to, acting) = (p.interval, p.committed_to, p.acting.clone());
        let mine = acting.iter().position(|o| *o == me).ok_or_else(|| err::again("the primary left the acting set"))?;
        if txns.len() != acting.len() {
            return Err(err::io(format!("{} shard writes for {} shards", txns.len(), acting.len())));
        }
        let key = ObjectKey::new(pg.pool, &op.op.object)?;
        let state = self.pg(pg)?;
        let prev = state.info.last_update;
        let at = EVersion { epoch: interval, version: prev.version + 1 };
        let entry = PgState::entry(at, op.op.reqid, op.op.object.clone(), &reply);
        let mut txn = Transaction::new();
        let kept = ec::rollback::keep(&store, &key, &op.op.object, &touched, at.version, &mut txn)?;
        txn.extend(std::mem::take(&mut txns[mine]));
        state.keep_rollback(&mut txn, at, &key, Some(&kept), committed_to);
        state.append(&mut txn, &entry);
        let seq = self.commit(pg, txn)?;
        let mut sends = Vec::new();
        for (shard, osd) in acting.iter().copied().enumerate().filter(|(_, o)| *o != OsdId::NONE && *o != me) {
            let txn = std::mem::take(&mut txns[shard]).encode().into();
            let write = RepOp { pg, interval, prev, entry: entry.clone(), txn };
            let request = PeerRequest::EcWrite(EcWrite { write, touched: touched.clone(), committed_to });
            let awaiting = crate::shard::Awaiting { pg, interval, expect: Expect::Acked(osd, at) };
            sends.push(Action::Send { to: osd, request, awaiting });
        }
        sends.push(Action::WhenDurable { seq, awaiting: Durable { pg, interval, at: Some(at) } });
        if let Some(p) = self.primaries.get_mut(&pg) {
            let waiting = acting.iter().copied().filter(|o| *o != OsdId::NONE && *o != me).collect();
            let object = op.op.object.clone();
            let flight = InFlight { waiting, local_pending: true, replies: Vec::new(), object, taking_whole };
            p.inflight.insert(at, flight);
        }
        Ok(sends)
    }

    /// Reads logical chunks `first..end` of `object` from `k` shards (data shards first),
    /// for `purpose`; `exclude`: a shard being rebuilt, never a source.
    pub(crate) fn start_gather(
        &mut self,
        pg: PgId,
        object: ObjectName,
        purpose: Purpose<R>,
        first: u32,
        end: u32,
        exclude: Option<OsdId>,
    ) {
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        let Some(ec) = p.ec.as_mut() else { return };
        let id = ec.next_gather;
        ec.next_gather += 1;
        let shards = ec.layout.shards();
        let gather = Gather {
            id,
            purpose,
            first,
            end,
            blocks: vec![None; shards],
            onodes: BTreeMap::new(),
            asked: BTreeSet::new(),
            pending: BTreeMap::new(),
        };
        ec.gathers.insert(object.clone(), gather);
        self.ask_more_shards(pg, &object, exclude);
    }

    /// Asks shards not asked yet until `k` have answered or are asked; fails the gather
    /// when too few shards can serve the object.
    pub(crate) fn ask_more_shards(&mut self, pg: PgId, object: &ObjectName, exclude: Option<OsdId>) {
        let me = self.config.me;
        let Ok(key) = ObjectKey::new(pg.pool, object) else { return };
        let Some(p) = self.primaries.get(&pg) else { return };
        let Some(ec) = p.ec.as_ref() else { return };
        let Some(g) = ec.gathers.get(object) else { return };
        let answered = g.blocks.iter().filter(|b| b.is_some()).count();
        let needed = g.purpose.shards_needed(&ec.layout);
        let wanted = needed.saturating_sub(answered + g.pending.len());
        let available: Vec<bool> = (0..p.acting.len())
            .map(|shard| {
                (g.blocks[shard].is_some() || g.pending.contains_key(&shard) || !g.asked.contains(&shard))
                    && source(p, shard, object, &key, exclude).is_some()
            })
            .collect();
        let chosen = match g.purpose {
            Purpose::Verify => Some((0..available.len()).filter(|s| available[*s]).collect::<Vec<_>>())
                .filter(|all| all.len() == needed),
            _ => ec::shards_to_read(&ec.layout, &available),
        };
        let Some(chosen) = chosen else {
            let why = format!("pg {pg}: fewer than {needed} shards can serve {object}");
            return self.gather_failed(pg, object, err::again(why));
        };
        let new: Vec<usize> = chosen.into_iter().filter(|s| !g.asked.contains(s)).take(wanted).collect();
        let (id, range, interval) = (g.id, ec::store_chunks(&ec.layout, g.first, g.end), p.interval);
        let targets: Vec<(usize, OsdId)> =
            new.iter().filter_map(|s| Some((*s, source(p, *s, object, &key, exclude)?))).collect();
        if let Some(g) = self.primaries.get_mut(&pg).and_then(|p| p.ec.as_mut()).and_then(|e| e.gathers.get_mut(object))
        {
            g.asked.extend(targets.iter().map(|(shard, _)| *shard));
            g.pending.extend(targets.iter().copied());
        }
        for (shard, osd) in targets {
            if osd == me {
                let local = ec::read_shard(&self.config.store, &key, range.clone());
                self.chunks_received(pg, object.clone(), id, shard, local);
            } else {
                let request =
                    PeerRequest::EcRead { pg, interval, object: object.clone(), first: range.start, end: range.end };
                self.ask(pg, interval, osd, request, Expect::Chunks(object.clone(), id, shard));
            }
        }
    }

    /// A shard answered a gather.
    pub(super) fn chunks_received(
        &mut self,
        pg: PgId,
        object: ObjectName,
        id: u64,
        shard: usize,
        result: Result<ec::ShardRead>,
    ) {
        let Some(Primary { ec: Some(ec), acting, .. }) = self.primaries.get_mut(&pg) else { return };
        let layout = ec.layout;
        let Some(g) = ec.gathers.get_mut(&object).filter(|g| g.id == id) else { return };
        let Some(osd) = g.pending.remove(&shard) else { return };
        let from_acting = acting.contains(&osd);
        let exclude = match &g.purpose {
            Purpose::Rebuild { target } => Some(*target),
            Purpose::Op(..) | Purpose::Verify => None,
        };
        let answer = result.and_then(|(onode, chunks)| {
            let onode = onode.map(|b| Onode::decode(&b).and_then(ec::logical_onode)).transpose()?;
            Ok((onode, ec::shard_block(&layout, g.first, g.end, &chunks)?))
        });
        match answer {
            Ok((onode, block)) => {
                g.onodes.insert(shard, onode);
                g.blocks[shard] = Some(block);
            }
            Err(e) => {
                tracing::info!(%pg, %object, shard, %osd, error = %e, "a shard could not be read; reading another");
                if e.errno == shoal_types::Errno::Io && from_acting {
                    // A bad copy (a checksum failed): rebuild it from the others.
                    self.emit(Action::Count(crate::shard::Counted::ChecksumError));
                    self.queue_rebuild(pg, osd, object.clone());
                }
                return self.ask_more_shards(pg, &object, exclude);
            }
        }
        let Some(ec) = self.primaries.get(&pg).and_then(|p| p.ec.as_ref()) else { return };
        let Some(g) = ec.gathers.get(&object) else { return };
        if !g.pending.is_empty()
            || g.blocks.iter().filter(|b| b.is_some()).count() < g.purpose.shards_needed(&ec.layout)
        {
            return;
        }
        // Every shard read must describe the same version of the object.
        let mut versions = g.onodes.values().map(|o| o.as_ref().map(|o| (o.version, o.size)));
        let first = versions.next().flatten();
        if versions.any(|v| v != first) {
            let why = format!("pg {pg}: the shards of {object} disagree on its version");
            return self.gather_failed(pg, &object, err::again(why));
        }
        let Some(g) = self.primaries.get_mut(&pg).and_then(|p| p.ec.as_mut()).and_then(|e| e.gathers.remove(&object))
        else {
            return;
        };
        let Some(ec) = self.primaries.get(&pg).and_then(|p| p.ec.as_ref()) else { return };
        let onode = g.onodes.values().next().cloned().flatten();
        let size = onode.as_ref().map_or(0, |o| o.size);
        if let Purpose::Verify = g.purpose {
            let checked = ec::check_parity(&ec.layout, ec.coder.as_ref(), g.blocks);
            let more = size > u64::from(g.end) * ec.layout.logical_chunk();
            self.resume_erasure(pg);
            return self.parity_checked(pg, object, g.end, more, checked);
        }
        let assembled = ec::assemble(&ec.layout, ec.coder.as_ref(), size, g.first, g.blocks);
        match (g.purpose, assembled) {
            (Purpose::Op(op, _), Err(e)) => self.respond(Err(e), op.reply),
            (Purpose::Op(op, mut gathered), Ok(chunks)) => {
                gathered.extend(chunks);
                if let Some(op) = self.run_erasure(pg, op, gathered) {
                    self.requeue_front(pg, op);
                }
            }
            (Purpose::Rebuild { .. }, Err(e)) => {
                tracing::error!(%pg, %object, error = %e, "decoding a shard to rebuild failed");
                self.restart_later(pg);
            }
            (Purpose::Rebuild { target }, Ok(chunks)) => self.rebuilt(pg, object.clone(), target, onode, g.end, chunks),
            (Purpose::Verify, _) => {}
        }
        self.resume_erasure(pg);
    }

    /// A gather cannot finish: its operation gets `e`; a rebuild makes the PG peer again.
    pub(crate) fn gather_failed(&mut self, pg: PgId, object: &ObjectName, e: shoal_types::RadosError) {
        let Some(g) = self.primaries.get_mut(&pg).and_then(|p| p.ec.as_mut()).and_then(|ec| ec.gathers.remove(object))
        else {
            return;
        };
        match g.purpose {
            Purpose::Op(op, _) => {
                self.respond(Err(e), op.reply);
                self.resume_erasure(pg);
            }
            Purpose::Rebuild { .. } => {
                tracing::info!(%pg, %object, error = %e, "rebuilding a shard failed; peering again");
                self.restart_later(pg);
            }
            Purpose::Verify => {
                self.resume_erasure(pg);
                self.parity_unread(pg, object.clone(), &e);
            }
        }
    }

    pub(crate) fn requeue_front(&mut self, pg: PgId, op: Op<R>) {
        if let Some(ec) = self.primaries.get_mut(&pg).and_then(|p| p.ec.as_mut()) {
            ec.queued.entry(op.op.object.clone()).or_default().push_front(op);
        }
    }

    /// Runs the operations waiting for objects that are free again, in order per object.
    pub(super) fn resume_erasure(&mut self, pg: PgId) {
        let objects: Vec<ObjectName> = match self.primaries.get(&pg).and_then(|p| p.ec.as_ref()) {
            Some(ec) => ec.queued.keys().filter(|o| !ec.gathers.contains_key(*o)).cloned().collect(),
            None => return,
        };
        for object in objects {
            loop {
                let Some(ec) = self.primaries.get_mut(&pg).and_then(|p| p.ec.as_mut()) else { return };
                if ec.gathers.contains_key(&object) {
                    break;
                }
                let Some(op) = ec.queued.get_mut(&object).and_then(VecDeque::pop_front) else {
                    ec.queued.remove(&object);
                    break;
                };
                if let Some(op) = self.run_erasure(pg, op, BTreeMap::new()) {
                    self.requeue_front(pg, op);
                    break;
                }
            }
        }
        self.pump_recovery(pg);
    }

    /// Once recovery is done on a PG that serves only then, asks the monitor to record
    /// the interval.
    pub(super) fn record_when_recovered(&mut self, pg: PgId) {
        let Some(Primary { ec: Some(ec), recovery, interval, .. }) = self.primaries.get_mut(&pg) else {
            return;
        };
        if ec.serving != Serving::AfterRecovery || !recovery.is_empty() {
            return;
        }
        tracing::info!(%pg, strays = ?ec.stray_sources.values().map(|s| s.osd).collect::<Vec<_>>(), "recovered; recording the interval");
        ec.serving = Serving::Syncing;
        ec.stray_sources.clear();
        let awaiting = Durable { pg, interval: *interval, at: None };
        self.emit(Action::WhenDurable { seq: self.last_seq, awaiting });
        self.schedule_retry(pg, crate::primary::PEERING_TIMEOUT);
    }

    /// The recovered copies are durable: asks the monitor to record the interval.
    pub(super) fn record_when_synced(&mut self, pg: PgId) {
        let Some(Primary { ec: Some(ec), acting, interval, .. }) = self.primaries.get_mut(&pg) else { return };
        if ec.serving != Serving::Syncing {
            return;
        }
        ec.serving = Serving::Recording;
        let active = ActiveInterval { interval: *interval, acting: acting.clone() };
        self.emit(Action::Register(crate::shard::Registration { pg, active }));
    }

    /// The interval is recorded after recovery: serves the operations that waited.
    pub(super) fn serve_recorded(&mut self, pg: PgId) {
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        let Some(ec) = p.ec.as_mut().filter(|ec| ec.serving == Serving::Recording) else { return };
        ec.serving = Serving::Now;
        tracing::info!(%pg, "serving");
        self.serve_waiting(pg);
    }

    /// Queues `object` for rebuilding on `osd` (its copy failed a read or a scrub).
    pub(crate) fn queue_rebuild(&mut self, pg: PgId, osd: OsdId, object: ObjectName) {
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        let r = p.recovery.entry(osd).or_insert_with(|| PeerRecovery::log(VecDeque::new()));
        if !r.objects.contains(&object) {
            r.objects.push_back(object);
        }
        r.done_sent = false;
        self.pump_recovery(pg);
    }

    /// An operation waits for the primary's own shard of `object`: rebuilds it now, out of
    /// turn and beyond the recovery slots, as Ceph recovers an object a client waits on.
    /// An object held by a gather or a write, or still ahead of the primary's backfill,
    /// waits for its turn.
    pub(super) fn rebuild_own_now(&mut self, pg: PgId, object: ObjectName) {
        let me = self.config.me;
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        let held = p.ec.as_ref().is_none_or(|ec| ec.busy(&object)) || p.inflight.values().any(|f| f.object == object);
        let Some(r) = p.recovery.get_mut(&me) else { return };
        let Some(at) = r.objects.iter().position(|o| *o == object) else { return };
        if held {
            // Next in line once free.
            if let Some(object) = r.objects.remove(at) {
                r.objects.push_front(object);
            }
            return;
        }
        r.objects.remove(at);
        self.start_rebuild(pg, me, object, 0);
    }

    /// Starts rebuilding `target`'s shard of `object` from logical chunk `first` (one
    /// part), counted as a recovery push in flight. At an empty head (nothing written, or
    /// all of it rolled back) no object exists: the rebuild removes it, reading nothing.
    pub(crate) fn start_rebuild(&mut self, pg: PgId, target: OsdId, object: ObjectName, first: u32) {
        if let Some(p) = self.primaries.get_mut(&pg) {
            p.pushes_in_flight += 1;
            if let Some(r) = p.recovery.get_mut(&target) {
                r.in_flight += 1;
            }
        }
        if self.pgs.get(&pg).is_some_and(|state| state.info.last_update == EVersion::default()) {
            return self.rebuilt(pg, object, target, None, first, BTreeMap::new());
        }
        let end = self.part_end(pg, first);
        self.start_gather(pg, object, Purpose::Rebuild { target }, first, end, Some(target));
    }

    /// The primary's own shard holds more objects (one rebuilt, or its backfill past
    /// more names): serves, in order, the operations no longer waiting for it.
    pub(crate) fn serve_own_shard_ready(&mut self, pg: PgId) {
        let me = self.config.me;
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        let waiting = std::mem::take(&mut p.waiting);
        let (ready, rest) = waiting.into_iter().partition(|(op, _, _)| !p.lacks_own_copy(me, pg, &op.object));
        p.waiting = rest;
        for (op, caller, reply) in ready {
            self.client_op(op, caller, reply);
        }
    }

    /// Starts rebuilding the next objects of the shards being recovered, the primary's own
    /// first (operations on the objects it lacks wait for them), as far as the recovery
    /// slots allow.
    pub(super) fn pump_erasure_recovery(&mut self, pg: PgId) {
        let me = self.config.me;
        let Some(pool) = self.map.pools.get(&pg.pool).cloned() else { return };
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        if !matches!(p.phase, Phase::Active) {
            return;
        }
        let interval = p.interval;
        let finished = p.take_finished();
        self.send_recovered(pg, interval, finished);
        let Some(p) = self.primaries.get(&pg) else { return };
        let own_first = p.recovery.contains_key(&me);
        let held = |o: &OsdId, r| super::primary::recovery_held(&self.map, *o, *o == me, r);
        let targets: Vec<OsdId> = p
            .recovery
            .iter()
            .filter(|(o, r)| r.has_work() && (!own_first || **o == me) && !held(o, r))
            .map(|(o, _)| *o)
            .collect();
        for target in targets {
            loop {
                if self.recovery_slots_taken() {
                    return;
                }
                let next = match self.next_to_rebuild(pg, pool.pg_num, target) {
                    Ok(next) => next,
                    Err(e) => {
                        tracing::error!(%pg, error = %e, "listing objects to rebuild failed");
                        return self.restart_later(pg);
                    }
                };
                let Some(object) = next else { break };
                self.start_rebuild(pg, target, object, 0);
            }
        }
        // A backfill that found nothing more to rebuild, with nothing in flight, is done.
        let Some(p) = self.primaries.get_mut(&pg) else { return };
        let finished = p.take_finished();
        self.send_recovered(pg, interval, finished);
    }

    /// Starts a deep scrub's parity check of `object` from logical chunk `first` (one
    /// part); false if a write or another gather holds the object now.
    pub(crate) fn start_parity_check(&mut self, pg: PgId, object: ObjectName, first: u32) -> bool {
        let held = self.primaries.get(&pg).and_then(|p| p.ec.as_ref()).is_none_or(|ec| ec.busy(&object));
        if held || self.writing(pg, &object) {
            return false;
        }
        let end = self.part_end(pg, first);
        self.start_gather(pg, object, Purpose::Verify, first, end, None);
        true
    }

    /// The logical chunk after a rebuild part that starts at chunk `first`.
    pub(crate) fn part_end(&self, pg: PgId, first: u32) -> u32 {
        let chunk = self.primaries.get(&pg).and_then(|p| p.ec.as_ref()).map_or(1, |ec| ec.layout.logical_chunk());
        first + (REBUILD_PART_BYTES / chunk).max(1) as u32
    }

    /// The next object to rebuild on `target` that no operation or write holds, taken off
    /// its list (for a backfill, the next key after its cursor); `None` when there is none
    /// now.
    pub(crate) fn next_to_rebuild(&mut self, pg: PgId, pg_num: u32, target: OsdId) -> Result<Option<ObjectName>> {
        let Some(p) = self.primaries.get(&pg) else { return Ok(None) };
        let Some(r) = p.recovery.get(&target) else { return Ok(None) };
        let free = |p: &Primary<R>, o: &ObjectName| {
            !p.ec.as_ref().is_some_and(|ec| ec.busy(o)) && !p.inflight.values().any(|f| f.object == *o)
        };
        if let Some(cursor) = r.backfill.as_ref().filter(|(_, exhausted)| !exhausted).map(|(c, _)| c.clone()) {
            let (keys, _) = self.list_keys(pg, pg_num, cursor.as_ref(), 1)?;
            let Some(p) = self.primaries.get_mut(&pg) else { return Ok(None) };
            let Some(key) = keys.into_iter().next() else {
                if let Some(r) = p.recovery.get_mut(&target) {
                    r.backfill = Some((cursor, true));
                }
                return Ok(None);
            };
            let (_, object) = key.decode()?;
            if !free(p, &object) {
                return Ok(None);
            }
            if let Some(r) = p.recovery.get_mut(&target) {
                r.backfill = Some((Some(key), false));
            }
            return Ok(Some(object));
        }
        let Some(p) = self.primaries.get_mut(&pg) else { return Ok(None) };
        let position = p.recovery.get(&target).and_then(|r| r.objects.iter().position(|o| free(p, o)));
        Ok(position.and_then(|at| p.recovery.get_mut(&target).and_then(|r| r.objects.remove(at))))
    }

    /// Sends `target` its shard of the logical `chunks` of `object` (up to chunk `end`),
    /// then continues with the object's next part or releases it.
    pub(crate) fn rebuilt(
        &mut self,
        pg: PgId,
        object: ObjectName,
        target: OsdId,
        onode: Option<Onode>,
        end: u32,
        chunks: BTreeMap<u32, Bytes>,
    ) {
        let me = self.config.me;
        let Some(p) = self.primaries.get(&pg) else { return };
        let (interval, shard) = (p.interval, p.acting.iter().position(|o| *o == target));
        let Some(ec) = p.ec.as_ref() else { return };
        let txn = match (ObjectKey::new(pg.pool, &object), shard) {
            (Ok(key), Some(shard)) => {
                ec::rebuild_shard(&ec.layout, ec.coder.as_ref(), &key, shard, onode.as_ref(), &chunks)
            }
            (Err(e), _) => Err(e),
            (_, None) => Err(err::again(format!("{target} left the acting set"))),
        };
        let more = onode.as_ref().is_some_and(|o| o.size > u64::from(end) * ec.layout.logical_chunk());
        let mut txn = match txn {
            Ok(txn) => txn,
            Err(e) => {
                tracing::error!(%pg, %object, %target, error = %e, "rebuilding a shard failed");
                return self.restart_later(pg);
            }
        };
        let bytes = txn.bytes() as u64;
        if target == me {
            // Whole again: no longer among what the primary's own copy lacks.
            let recorded = if more { Ok(()) } else { self.pg(pg).and_then(|state| state.recovered(&mut txn, &object)) };
            if let Err(e) = recorded.and_then(|()| self.commit(pg, txn)) {
                tracing::error!(%pg, %object, error = %e, "storing the rebuilt shard failed");
                return self.restart_later(pg);
            }
            if !more {
                self.config.damage.remove(&self.config.store, pg, &object);
                self.serve_own_shard_ready(pg);
            }
        } else {
            let at = self.pgs.get(&pg).map(|s| s.info.last_update).unwrap_or_default();
            let txn = txn.encode().into();
            if more {
                let push = PeerRequest::PushAt { pg, interval, at, txn };
                self.ask(pg, interval, target, push, Expect::Pushed(target, PushSize { objects: 0, bytes }));
            } else {
                if let Some(r) = self.primaries.get_mut(&pg).and_then(|p| p.recovery.get_mut(&target)) {
                    r.pushing.insert(object.clone());
                }
                let push = PeerRequest::PushRebuilt { pg, interval, at, object: object.clone(), txn };
                self.ask(pg, interval, target, push, Expect::Rebuilt(target, object.clone(), bytes));
            }
        }
        if more {
            // The next part keeps the object held, so no write comes between the parts.
            self.start_rebuild(pg, target, object, end);
        }
        if target == me {
            let size = PushSize { objects: u32::from(!more), bytes };
            self.primary_event(pg, interval, Event::Pushed(me, size, Ok(())));
        }
    }
}

/// What running an operation on an erasure-coded object came to.
pub(crate) enum ExecutedEc {
    /// A resent write already applied: its first reply.
    Repeat(shoal_types::msg::OpReply),
    /// Run now.
    Done(EcOutcome),
}
