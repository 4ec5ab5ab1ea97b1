//! The primary of an erasure-coded PG: peering by shard, client operations that gather
//! stripes from `k` shards before they run, writes sent to every shard as its own
//! transaction with what undoes it, and recovery that rebuilds each shard from `k` others.
//!
//! An object being gathered is locked: later operations on it wait in its queue, in
//! order, and a gather starts only once no write to the object is in flight, so the
//! shards it reads agree. A recovery holds its object's lock until its last part is sent:
//! a client write to the object reaches the recovering shard after the rebuilt copy, on
//! the same in-order link.

use super::{Event, Expect, InFlight, PeerRecovery, Phase, Primary, Pull, PushSize};
use crate::ec::{self, EcLayout, EcObject, EcOutcome};
use crate::exec::ExecEnv;
use crate::peering::{self, Blocked, PeerPlan, Plan, Recovery, StraySource};
use crate::pglog::PgState;
use crate::shard::{Action, Durable, Shard};
use bytes::Bytes;
use shoal_erasure::ErasureCoder;
use shoal_store::{ObjectKey, Onode, Transaction};
use shoal_types::erasure::{PoolErasure, Touched};
use shoal_types::msg::{EcWrite, OsdOp, PeerRequest, RepOp, Reply};
use shoal_types::pg::{EVersion, PgSummary};
use shoal_types::{ActiveInterval, ClientId, ObjectName, OsdId, PgId, Result, Versioned as _, err};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// Logical bytes rebuilt per recovery push (a larger object goes in parts).
const REBUILD_PART_BYTES: u64 = super::COPY_PART_BYTES as u64;

/// A client operation and where its reply goes.
pub(crate) struct Op<R> {
    op: OsdOp,
    caller: ClientId,
    reply: R,
}

/// What an erasure-coded PG's primary keeps besides what every primary keeps.
pub(crate) struct EcPrimary<R> {
    layout: EcLayout,
    coder: Arc<dyn ErasureCoder>,
    allow_overwrites: bool,
    /// Operations waiting for their object, oldest first.
    queued: BTreeMap<ObjectName, VecDeque<Op<R>>>,
    /// Objects whose chunks are being gathered, and what for.
    gathers: BTreeMap<ObjectName, Gather<R>>,
    next_gather: u64,
    /// The strays read in place of backfilled positions until recovery is done.
    stray_sources: BTreeMap<usize, StraySource>,
    /// When the interval is recorded and client operations are served.
    serving: Serving,
}

/// When an erasure-coded PG's interval is recorded and its client operations served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Serving {
    /// Recorded at activation: the acting set can decode every object.
    Now,
    /// Once recovery is done, the acting set alone could not decode every object. Until
    /// then the interval acknowledges no write, so no stray's copy goes stale, and a
    /// primary that crashes leaves peering where it was.
    AfterRecovery,
    /// Recovery is done; waiting for the store to make the primary's own copy's
    /// completion durable, which peering after a crash needs.
    Syncing,
    /// The record asked for.
    Recording,
}

impl<R> EcPrimary<R> {
    pub(crate) fn new(erasure: &PoolErasure, store_chunk: u32) -> Result<EcPrimary<R>> {
        Ok(EcPrimary {
            layout: EcLayout::new(&erasure.code, store_chunk),
            coder: Arc::from(shoal_erasure::coder(erasure.code.k, erasure.code.m)?),
            allow_overwrites: erasure.allow_overwrites,
            queued: BTreeMap::new(),
            gathers: BTreeMap::new(),
            next_gather: 0,
            stray_sources: BTreeMap::new(),
            serving: Serving::Now,
        })
    }

    pub(super) fn k(&self) -> usize {
        self.layout.stripes.k as usize
    }

    /// Takes the activated plan's stray sources and when it serves.
    pub(super) fn activated(&mut self, plan: &Plan) {
        self.stray_sources = plan.stray_sources.clone();
        self.serving = if plan.serve_after_recovery { Serving::AfterRecovery } else { Serving::Now };
    }

    fn busy(&self, object: &ObjectName) -> bool {
        self.gathers.contains_key(object) || self.queued.get(object).is_some_and(|q| !q.is_empty())
    }

    fn queued_ops(&self) -> usize {
        self.queued.values().map(VecDeque::len).sum()
    }

    /// Answers every waiting operation with EAGAIN and drops the gathers (peering again).
    pub(crate) fn fail_all(&mut self, why: &str, out: &mut Vec<Action<R>>) {
        let gathered = std::mem::take(&mut self.gathers).into_values().filter_map(|g| match g.purpose {
            Purpose::Op(op, _) => Some(op),
            Purpose::Rebuild { .. } | Purpose::Verify => None,
        });
        let queued = std::mem::take(&mut self.queued).into_values().flatten();
        for op in gathered.chain(queued) {
            out.push(Action::Reply { to: op.reply, after: 0, value: Err(err::again(why.to_owned())) });
        }
    }
}

/// What chunks are gathered for.
enum Purpose<R> {
    /// A client operation, with the chunks gathered for it before.
    Op(Op<R>, BTreeMap<u32, Bytes>),
    /// Rebuilding `target`'s shard of the object.
    Rebuild { target: OsdId },
    /// A deep scrub's parity check: every shard is read.
    Verify,
}

impl<R> Purpose<R> {
    /// Shards to read: `k`, or all of them for a parity check.
    fn shards_needed(&self, layout: &EcLayout) -> usize {
        match self {
            Purpose::Verify => layout.shards(),
            _ => layout.stripes.k as usize,
        }
    }
}

/// Logical chunks `first..end` of an object, being read from `k` shards.
struct Gather<R> {
    id: u64,
    purpose: Purpose<R>,
    first: u32,
    end: u32,
    /// Per shard: its block once it answered.
    blocks: Vec<Option<Vec<u8>>>,
    /// The logical metadata of the shards that answered.
    onodes: BTreeMap<usize, Option<Onode>>,
    /// Shards asked (answered or not), and those not answered yet with the OSD asked.
    asked: BTreeSet<usize>,
    pending: BTreeMap<usize, OsdId>,
}

/// Whether `osd` lacks its shard of `key` while it is being recovered.
fn lacks(p: &Primary<impl Sized>, osd: OsdId, object: &ObjectName, key: &ObjectKey) -> bool {
    p.recovery.get(&osd).is_some_and(|r| {
        r.lacks_listed(object)
            || r.backfill.as_ref().is_some_and(|(cursor, exhausted)| {
                !exhausted && cursor.as_ref().is_none_or(|c| key.as_bytes() > c.as_bytes())
            })
    })
}

/// The OSD to read shard `shard` of `object` from, other than `exclude` (a shard being
/// rebuilt): its acting OSD unless that lacks the object, else the stray read in its place.
fn source<R>(
    p: &Primary<R>,
    shard: usize,
    object: &ObjectName,
    key: &ObjectKey,
    exclude: Option<OsdId>,
) -> Option<OsdId> {
    let osd = p.acting.get(shard).copied().filter(|o| *o != OsdId::NONE && Some(*o) != exclude);
    // A stray is never in the acting set, so never the shard being rebuilt.
    osd.filter(|o| !lacks(p, *o, object, key)).or_else(|| {
        let stray = p.ec.as_ref()?.stray_sources.get(&shard)?;
        (!stray.lacks.contains(object)).then_some(stray.osd)
    })
}

/// Whether client operations wait for recovery to finish (see [`Serving`]).
pub(super) fn serves_after_recovery<R>(p: &Primary<R>) -> bool {
    p.ec.as_ref().is_some_and(|ec| ec.serving != Serving::Now)
}

/// Whether the PG recovered and waits to be recorded: peering starts again if that takes
/// too long (a lost request).
pub(super) fn recording<R>(p: &Primary<R>) -> bool {
    p.ec.as_ref().is_some_and(|ec| matches!(ec.serving, Serving::Syncing | Serving::Recording))
}

/// Whether the primary `me` lacks its shard of `object` or is rebuilding it now: its
/// operations wait, in order, until the shard is whole.
pub(super) fn awaits_own_shard<R>(p: &Primary<R>, me: OsdId, object: &ObjectName, key: &ObjectKey) -> bool {
    let rebuilding = p.ec.as_ref().and_then(|ec| ec.gathers.get(object));
    lacks(p, me, object, key)
        || rebuilding.is_some_and(|g| matches!(g.purpose, Purpose::Rebuild { target } if target == me))
}

/// Peering by shard: each copy is the shard at its position in the acting set it was last
/// activated in (a copy never activated holds nothing, and stands for its position now);
/// [`peering::erasure::plan`] decides on those, and an OSD whose copy is of another shard
/// than its position now is backfilled. Returns the plan by OSD and the authoritative head.
pub(crate) fn plan(
    k: usize,
    acting: &[OsdId],
    summaries: &BTreeMap<OsdId, PgSummary>,
    recorded: Option<&ActiveInterval>,
) -> std::result::Result<(Plan, EVersion), Blocked> {
    let mut holders: BTreeMap<u8, (OsdId, &PgSummary)> = BTreeMap::new();
    for (osd, summary) in summaries {
        let Some(shard) = copy_shard(*osd, summary, acting) else { continue };
        // A copy peering can use (activated in the recorded interval or later, knowing
        // what it lacks) first: an older complete one would only block.
        let rank = |s: &PgSummary| {
            (peering::erasure::usable(s, recorded), s.info.complete, s.info.last_epoch_started, s.info.last_update)
        };
        if holders.get(&(shard as u8)).is_none_or(|(_, held)| rank(summary) > rank(held)) {
            holders.insert(shard as u8, (*osd, summary));
        }
    }
    let by_shard: BTreeMap<u8, PgSummary> = holders.iter().map(|(i, (_, s))| (*i, (*s).clone())).collect();
    // A copy whose OSD now serves another shard is backfilled over as that shard.
    let moving: BTreeSet<u8> = holders
        .iter()
        .filter(|(shard, (osd, _))| acting.contains(osd) && acting.get(**shard as usize) != Some(osd))
        .map(|(shard, _)| *shard)
        .collect();
    // Any copy may show it, the ones that lost their shard's place above too.
    let emptied =
        recorded.is_some_and(|r| summaries.values().any(|s| peering::erasure::took_empty_history_since(s, r)));
    let decided = peering::erasure::plan(k, &by_shard, &moving, recorded, emptied)?;
    let (auth, auth_summary) = holders.get(&decided.auth).copied().ok_or(Blocked::Incomplete)?;
    let backfill = PeerPlan { keep_until: None, recovery: Recovery::Backfill };
    let mut peers: BTreeMap<OsdId, PeerPlan> = summaries.keys().map(|osd| (*osd, backfill.clone())).collect();
    let history = peering::erasure::History::new(auth_summary, decided.head);
    let mut older = Vec::new();
    for (shard, osd) in acting.iter().enumerate().filter(|(_, o)| **o != OsdId::NONE) {
        let shard_plan = match holders.get(&(shard as u8)).filter(|(holder, _)| holder == osd) {
            Some(_) => decided.shards.get(&(shard as u8)).cloned(),
            // An older copy of the OSD's own shard than the one peering counted (it came
            // back after another OSD stood in for it) catches up by log where its history
            // meets the authority's, as any copy: it is not emptied and refilled.
            None => summaries.get(osd).filter(|s| copy_shard(*osd, s, acting) == Some(shard)).map(|summary| {
                older.push(*osd);
                history.catch_up(summary)
            }),
        };
        peers.insert(*osd, shard_plan.unwrap_or_else(|| backfill.clone()));
    }
    // Unless that leaves an object lacking on too many shards: backfilled, their positions
    // may be served by strays instead (below).
    if check_decodable(k, &acting_serving(acting, &peers), recorded).is_err() {
        for osd in older {
            peers.insert(osd, backfill.clone());
        }
    }
    // At an empty head (nothing written, or all of it rolled back) there is nothing to
    // decode: backfilling is emptying.
    let empty = decided.head == EVersion::default();
    let stray_sources = match check_decodable(k, &acting_serving(acting, &peers), recorded) {
        Ok(()) => None,
        Err(_) if empty => Some(BTreeMap::new()),
        Err(blocked) => {
            // Strays holding the shards of backfilled positions can serve as sources, as
            // Ceph's pg_temp keeps such copies acting until the backfill is done.
            let sources = stray_sources(acting, &peers, &holders, &decided.shards, recorded);
            if sources.is_empty() {
                return Err(blocked);
            }
            let as_recovery: Vec<Recovery> = sources
                .values()
                .map(|s| if s.lacks.is_empty() { Recovery::None } else { Recovery::Log(s.lacks.clone()) })
                .collect();
            let mut serving = acting_serving(acting, &peers);
            serving.extend(&as_recovery);
            check_decodable(k, &serving, recorded)?;
            Some(sources)
        }
    };
    let serve_after_recovery = stray_sources.is_some();
    let stray_sources = stray_sources.unwrap_or_default();
    Ok((Plan { auth, peers, stray_sources, serve_after_recovery }, decided.head))
}

/// The shard `osd`'s copy is of: its position in the acting set it was last activated in
/// (one never activated holds nothing and stands for its position in `acting`).
fn copy_shard(osd: OsdId, summary: &PgSummary, acting: &[OsdId]) -> Option<usize> {
    let positions = if summary.info.last_acting.is_empty() { acting } else { &summary.info.last_acting };
    positions.iter().position(|o| *o == osd)
}

/// The positions whose acting OSD is backfilled while an OSD outside the acting set holds
/// that position's shard as peering can use it (activated in the recorded interval or
/// later, knowing what it lacks), with what it lacks of the authoritative head.
fn stray_sources(
    acting: &[OsdId],
    peers: &BTreeMap<OsdId, PeerPlan>,
    holders: &BTreeMap<u8, (OsdId, &PgSummary)>,
    shard_plans: &BTreeMap<u8, PeerPlan>,
    recorded: Option<&ActiveInterval>,
) -> BTreeMap<usize, StraySource> {
    let usable = |shard: u8| {
        let (osd, summary) = holders.get(&shard)?;
        let plan = shard_plans.get(&shard)?;
        let lacks = match &plan.recovery {
            Recovery::None => BTreeSet::new(),
            Recovery::Log(objects) => objects.clone(),
            Recovery::Backfill => return None,
        };
        let kept = plan.keep_until?;
        let roll_back_to = (summary.info.last_update > kept).then_some(kept);
        let usable = peering::erasure::usable(summary, recorded);
        (usable && !acting.contains(osd)).then_some(StraySource { osd: *osd, lacks, roll_back_to })
    };
    acting
        .iter()
        .enumerate()
        .filter(|(_, osd)| peers.get(osd).is_some_and(|plan| plan.recovery == Recovery::Backfill))
        .filter_map(|(shard, _)| Some((shard, usable(shard as u8)?)))
        .collect()
}

/// What each acting shard not being backfilled must recover.
fn acting_serving<'a>(acting: &[OsdId], peers: &'a BTreeMap<OsdId, PeerPlan>) -> Vec<&'a Recovery> {
    acting
        .iter()
        .filter_map(|osd| peers.get(osd))
        .map(|plan| &plan.recovery)
        .filter(|r| **r != Recovery::Backfill)
        .collect()
}

/// Checks that every object can be rebuilt from the shards that serve (what each must
/// recover): at least `k` of them, and for each object some shard lacks, `k` that do
/// not. Activating otherwise would leave rebuilds that cannot finish.
fn check_decodable(
    k: usize,
    serving: &[&Recovery],
    recorded: Option<&ActiveInterval>,
) -> std::result::Result<(), Blocked> {
    if serving.len() < k {
        return Err(Blocked::waiting_for(recorded));
    }
    let lacks = |r: &Recovery, object: &ObjectName| matches!(r, Recovery::Log(objects) if objects.contains(object));
    let lacked: BTreeSet<&ObjectName> = serving
        .iter()
        .flat_map(|r| if let Recovery::Log(objects) = r { objects.iter().collect() } else { Vec::new() })
        .collect();
    for object in lacked {
        let holders = serving.iter().filter(|r| !lacks(r, object)).count();
        if holders < k {
            return Err(Blocked::Unfound { object: object.clone(), holders });
        }
    }
    Ok(())
}

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
        self.adopt_locally(pg, keep_until, entries, log_tail)
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
            if ec.queued_ops() >= super::MAX_WAITING_OPS {
                let busy = format!("pg {pg}: {} operations wait for their objects already", super::MAX_WAITING_OPS);
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
    fn run_erasure(&mut self, pg: PgId, op: Op<R>, gathered: BTreeMap<u32, Bytes>) -> Option<Op<R>> {
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
            Ok(Some(ExecutedEc::Done(EcOutcome::Write { reply, txns, touched, .. }))) => {
                let Some(taking_whole) = self.shards_ready_for_write(pg, &op.op.object, &touched) else {
                    return Some(op);
                };
                let value = Ok(Reply::Op(reply.clone()));
                match self.write_erasure(pg, &op, reply, txns, touched, taking_whole) {
                    Ok(actions) => {
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
    fn shards_ready_for_write(&mut self, pg: PgId, object: &ObjectName, touched: &Touched) -> Option<BTreeSet<OsdId>> {
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
    fn writing(&self, pg: PgId, object: &ObjectName) -> bool {
        self.primaries.get(&pg).is_some_and(|p| p.inflight.values().any(|f| f.object == *object))
    }

    fn execute_erasure(&mut self, pg: PgId, op: &Op<R>, gathered: BTreeMap<u32, Bytes>) -> Result<Option<ExecutedEc>> {
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
    fn write_erasure(
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
        let kept = ec::rollback::keep(&store, &key, &op.op.object, &touched)?;
        let mut txn = std::mem::take(&mut txns[mine]);
        state.keep_rollback(&mut txn, at, Some(&kept), committed_to);
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
    fn start_gather(
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
    fn ask_more_shards(&mut self, pg: PgId, object: &ObjectName, exclude: Option<OsdId>) {
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
    fn gather_failed(&mut self, pg: PgId, object: &ObjectName, e: shoal_types::RadosError) {
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

    fn requeue_front(&mut self, pg: PgId, op: Op<R>) {
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
        self.schedule_retry(pg, super::PEERING_TIMEOUT);
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
    fn start_rebuild(&mut self, pg: PgId, target: OsdId, object: ObjectName, first: u32) {
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
    fn serve_own_shard_ready(&mut self, pg: PgId) {
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
        let targets: Vec<OsdId> =
            p.recovery.iter().filter(|(o, r)| r.has_work() && (!own_first || **o == me)).map(|(o, _)| *o).collect();
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
    fn part_end(&self, pg: PgId, first: u32) -> u32 {
        let chunk = self.primaries.get(&pg).and_then(|p| p.ec.as_ref()).map_or(1, |ec| ec.layout.logical_chunk());
        first + (REBUILD_PART_BYTES / chunk).max(1) as u32
    }

    /// The next object to rebuild on `target` that no operation or write holds, taken off
    /// its list (for a backfill, the next key after its cursor); `None` when there is none
    /// now.
    fn next_to_rebuild(&mut self, pg: PgId, pg_num: u32, target: OsdId) -> Result<Option<ObjectName>> {
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
    fn rebuilt(
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
                self.config.damage.remove(pg, &object);
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
enum ExecutedEc {
    /// A resent write already applied: its first reply.
    Repeat(shoal_types::msg::OpReply),
    /// Run now.
    Done(EcOutcome),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strays_stand_in_for_backfilled_positions_when_the_acting_set_cannot_decode() {
        use crate::peering::test_support::{at, summary};
        // 2+1: interval 5 (recorded) wrote "a" on OSDs 0, 1 and 2; "b" reached osd.2 only.
        // Now OSDs 3 and 4 hold positions 1 and 2: only osd.0's shard is in the acting set.
        let recorded = ActiveInterval { interval: 5, acting: vec![OsdId(0), OsdId(1), OsdId(2)] };
        let a = [(5, 1, "a")];
        let mut summaries = BTreeMap::from([
            (OsdId(0), summary(&a, true, 5, &[0, 1, 2])),
            (OsdId(1), summary(&a, true, 5, &[0, 1, 2])),
            (OsdId(2), summary(&[(5, 1, "a"), (5, 2, "b")], true, 5, &[0, 1, 2])),
            (OsdId(3), summary(&[], true, 0, &[])),
            (OsdId(4), summary(&[], true, 0, &[])),
        ]);
        let acting = [OsdId(0), OsdId(3), OsdId(4)];
        let (planned, head) = plan(2, &acting, &summaries, Some(&recorded)).unwrap();
        assert_eq!(head, at(5, 1));
        assert_eq!(planned.peers[&OsdId(3)].recovery, Recovery::Backfill);
        assert!(planned.serve_after_recovery);
        let stray = |osd, roll_back_to| StraySource { osd: OsdId(osd), lacks: BTreeSet::new(), roll_back_to };
        assert_eq!(planned.stray_sources, BTreeMap::from([(1, stray(1, None)), (2, stray(2, Some(at(5, 1))))]));
        // With osd.1 serving its own position, the acting set decodes: no strays are read.
        summaries.remove(&OsdId(3));
        let (decodable, _) = plan(2, &[OsdId(0), OsdId(1), OsdId(4)], &summaries, Some(&recorded)).unwrap();
        assert!(decodable.stray_sources.is_empty() && !decodable.serve_after_recovery);
    }

    #[test]
    fn a_returning_osd_catches_up_by_log_past_the_copy_that_stood_in_for_it() {
        use crate::peering::test_support::{at, summary};
        // 2+1: interval 5 wrote "a" on OSDs 0, 1 and 2. osd.2 went out; osd.3, backfilled
        // as position 2, went active in interval 9 (recorded), which wrote "b". osd.2 is
        // back at position 2 and osd.3 a stray holding the newer copy of that shard.
        let recorded = ActiveInterval { interval: 9, acting: vec![OsdId(0), OsdId(1), OsdId(3)] };
        let both = [(5, 1, "a"), (9, 1, "b")];
        let summaries = BTreeMap::from([
            (OsdId(0), summary(&both, true, 9, &[0, 1, 3])),
            (OsdId(1), summary(&both, true, 9, &[0, 1, 3])),
            (OsdId(2), summary(&both[..1], true, 5, &[0, 1, 2])),
            (OsdId(3), summary(&both, true, 9, &[0, 1, 3])),
        ]);
        let (planned, head) = plan(2, &[OsdId(0), OsdId(1), OsdId(2)], &summaries, Some(&recorded)).unwrap();
        assert_eq!(head, at(9, 1));
        let b = BTreeSet::from([ObjectName::new("", "b")]);
        assert_eq!(planned.peers[&OsdId(2)], PeerPlan { keep_until: Some(at(5, 1)), recovery: Recovery::Log(b) });
        assert!(planned.stray_sources.is_empty() && !planned.serve_after_recovery);
        // Without osd.1, "b" would have one holder in the acting set: osd.2 is backfilled
        // and the stray osd.3 serves its position meanwhile.
        let (planned, _) = plan(2, &[OsdId(0), OsdId::NONE, OsdId(2)], &summaries, Some(&recorded)).unwrap();
        assert_eq!(planned.peers[&OsdId(2)].recovery, Recovery::Backfill);
        assert_eq!(planned.stray_sources.get(&2).map(|s| s.osd), Some(OsdId(3)));
    }

    #[test]
    fn a_copy_activated_after_the_record_with_an_empty_history_shows_the_pg_is_empty() {
        use crate::peering::test_support::summary;
        // 2+1, the simulator's seed 8842: interval 22 (recorded) went active on osd.0 and
        // osd.3 at an empty head; its write (22, 1) reached osd.0 only. Interval 66 (never
        // recorded) took the empty head again, backfilling osd.3 as position 0 over its
        // copy of position 2: osd.0's copy, of position 0 too, takes that place.
        const NONE: u32 = u32::MAX;
        let recorded = ActiveInterval { interval: 22, acting: vec![OsdId(0), OsdId::NONE, OsdId(3)] };
        let mut summaries = BTreeMap::from([
            (OsdId(0), summary(&[(22, 1, "a")], true, 22, &[0, NONE, 3])),
            (OsdId(1), summary(&[], true, 9, &[0, 3, 1])),
            (OsdId(2), summary(&[], true, 0, &[])),
            (OsdId(3), summary(&[], false, 66, &[3, 2, NONE])),
        ]);
        let acting = [OsdId(0), OsdId(2), OsdId(1)];
        let (planned, head) = plan(2, &acting, &summaries, Some(&recorded)).unwrap();
        assert_eq!(head, EVersion::default());
        assert_eq!(planned.peers[&OsdId(0)].keep_until, Some(EVersion::default()), "(22, 1) is rolled back");
        // Had interval 66 taken (22, 1), it would show nothing: the PG waits for interval
        // 22's other copies.
        summaries.insert(OsdId(3), summary(&[(22, 1, "a")], false, 66, &[3, 2, NONE]));
        assert_eq!(
            plan(2, &acting, &summaries, Some(&recorded)).map(|(_, head)| head),
            Err(Blocked::Down { epoch: 22, acting: recorded.acting.clone() })
        );
    }

    #[test]
    fn activation_needs_k_acting_shards_holding_each_object() {
        let acting: Vec<OsdId> = (0..4).map(OsdId).collect();
        let lacking = |names: &[&str]| PeerPlan {
            keep_until: None,
            recovery: Recovery::Log(names.iter().map(|n| ObjectName::new("", *n)).collect()),
        };
        let whole = PeerPlan { keep_until: None, recovery: Recovery::None };
        let backfill = PeerPlan { keep_until: None, recovery: Recovery::Backfill };
        let recorded = ActiveInterval { interval: 4, acting: acting.clone() };
        // 2+2: "a" is lacked by two shards, held by two: enough.
        let mut peers: BTreeMap<OsdId, PeerPlan> =
            [(0, whole.clone()), (1, whole.clone()), (2, lacking(&["a"])), (3, lacking(&["a", "b"]))]
                .into_iter()
                .map(|(o, p)| (OsdId(o), p))
                .collect();
        assert_eq!(check_decodable(2, &acting_serving(&acting, &peers), Some(&recorded)), Ok(()));
        // A third shard lacking "a" leaves one holder.
        peers.insert(OsdId(1), lacking(&["a"]));
        let unfound = Blocked::Unfound { object: ObjectName::new("", "a"), holders: 1 };
        assert_eq!(check_decodable(2, &acting_serving(&acting, &peers), Some(&recorded)), Err(unfound));
        // Shards being backfilled, or out of the acting set, serve nothing.
        let peers: BTreeMap<OsdId, PeerPlan> = [(0, whole.clone()), (1, backfill.clone()), (2, backfill), (7, whole)]
            .into_iter()
            .map(|(o, p)| (OsdId(o), p))
            .collect();
        assert_eq!(
            check_decodable(2, &acting_serving(&acting, &peers), Some(&recorded)),
            Err(Blocked::Down { epoch: 4, acting: acting.clone() })
        );
        assert_eq!(check_decodable(2, &acting_serving(&acting, &peers), None), Err(Blocked::Incomplete));
    }
}
