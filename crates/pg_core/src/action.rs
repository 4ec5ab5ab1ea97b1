//! What a shard takes and gives: its inputs, the actions it asks of its driver, the
//! timers and counters, and what a primary waits for from its peers (its events).

use bytes::Bytes;
use shoal_store::Transaction;
use shoal_types::msg::{OsdOp, PeerRequest, PgListRequest, Reply, ScrubObject};
use shoal_types::pg::{EVersion, PgLogEntry, PgSummary};
use shoal_types::{ActiveInterval, ClientId, ObjectName, OsdId, OsdMap, PgId, Result, err};
use std::sync::Arc;
use std::time::Duration;

/// Something that happened to the shard.
pub enum Input<R> {
    /// A compound operation from a client.
    Op {
        /// The operation.
        op: OsdOp,
        /// The client it came from.
        caller: ClientId,
        /// Where the reply goes.
        reply: R,
    },
    /// A page of a PG listing.
    List {
        /// The request.
        req: PgListRequest,
        /// Where the reply goes.
        reply: R,
    },
    /// A request from another OSD about one of this shard's PGs.
    Peer {
        /// The request.
        request: PeerRequest,
        /// Where the reply goes.
        reply: R,
    },
    /// A newer cluster map.
    Map(Arc<OsdMap>),
    /// A peer answered (or failed to answer) a request of an [`Action::Send`].
    Answered {
        /// What the request was for.
        awaiting: Awaiting<R>,
        /// The answer.
        reply: Result<Reply>,
    },
    /// The store became durable up to an [`Action::WhenDurable`]'s sequence number (or
    /// could not).
    Durable {
        /// What was waiting.
        awaiting: Durable,
        /// The sync's outcome.
        result: Result<()>,
    },
    /// A timer of an [`Action::Timer`] fired.
    Timer(Timer),
    /// An operator asks for a scrub of a PG (`deep` reads every byte; `repair` is deep and
    /// fixes what it finds).
    Scrub {
        /// The PG.
        pg: PgId,
        /// Read every byte.
        deep: bool,
        /// Rewrite bad copies.
        repair: bool,
    },
    /// Time to start the scrubs that are due (the driver sends it every second or so).
    ScrubTick {
        /// The host's load average per CPU: scheduled scrubs wait while it is above
        /// `osd_scrub_load_threshold`.
        host_load: f64,
    },
    /// The monitor answered an [`Action::Register`]: whether its map records the
    /// activation (an error counts as not recorded).
    Registered {
        /// What was asked.
        registration: Registration,
        /// Recorded.
        recorded: bool,
    },
}

/// Something the driver must do.
pub enum Action<R> {
    /// Send a request to another OSD, and feed its answer back as [`Input::Answered`].
    Send {
        /// The peer.
        to: OsdId,
        /// The request.
        request: PeerRequest,
        /// What the answer is for.
        awaiting: Awaiting<R>,
    },
    /// Deliver a reply once the store is durable up to `after` (0: at once); if that sync
    /// fails, deliver its error instead.
    Reply {
        /// Where it goes.
        to: R,
        /// The store sequence number the reply depends on.
        after: u64,
        /// The reply.
        value: Result<Reply>,
    },
    /// Feed [`Input::Durable`] back once the store is durable up to `seq`.
    WhenDurable {
        /// The store sequence number.
        seq: u64,
        /// What waits for it.
        awaiting: Durable,
    },
    /// Feed [`Input::Timer`] back after `after`.
    Timer {
        /// How long from now.
        after: Duration,
        /// What fires.
        timer: Timer,
    },
    /// Ask the monitor to record an activation; feed its answer back as
    /// [`Input::Registered`].
    Register(Registration),
    /// Ask the monitor that `lead` lead the PG in place of placement's primary while that
    /// one is brought up to date (`None`: placement's primary again). The answer is a
    /// newer map, or none: the primary asks again when it peers again.
    PrimaryTemp {
        /// The PG.
        pg: PgId,
        /// Who should lead it.
        lead: Option<OsdId>,
    },
    /// Count something in the OSD's counters.
    Count(Counted),
}

/// Counters the core moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    /// A local copy failed its checksum.
    ChecksumError,
    /// A local copy was repaired from a replica.
    ReadRepaired,
    /// Recovery wrote `bytes` (keys and values of its store transactions) to copies that
    /// lacked objects and brought `objects` of them up to date (log recovery, backfill,
    /// shard rebuilds), as their primary saw it applied.
    Recovered {
        /// Objects completed.
        objects: u32,
        /// Bytes written.
        bytes: u64,
    },
}

/// The request an answer belongs to (opaque to the driver).
pub struct Awaiting<R> {
    pub(crate) pg: PgId,
    pub(crate) interval: u64,
    pub(crate) expect: Expect<R>,
}

/// What of a primary waits for durability.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Durable {
    pub(crate) pg: PgId,
    pub(crate) interval: u64,
    /// The write at this position; `None`: the primary's own activation record.
    pub(crate) at: Option<EVersion>,
}

/// A primary's request to record that it activated a PG in an interval, before it serves
/// writes there (carried to the monitor by the driver, answered with [`Input::Registered`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    /// The PG.
    pub pg: PgId,
    /// The interval it was activated in, and its acting set.
    pub active: ActiveInterval,
}

/// A primary's retry timer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timer {
    pub(crate) pg: PgId,
    pub(crate) interval: u64,
    pub(crate) round: u64,
    pub(crate) kind: TimerKind,
}

/// What a [`Timer`] is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TimerKind {
    /// Peering again, unless it restarted or completed since.
    Retry,
    /// A scrub's pause between pages.
    ScrubStep,
    /// Asking again that placement's primary lead the PG.
    HandBack,
    /// The pause after a recovery operation (`osd_recovery_sleep`) before its slot is
    /// free again.
    RecoverySleep,
}

/// What a recovery push carries: the objects it completes (an object sent in parts counts
/// with its last) and the bytes of its store transaction.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PushSize {
    pub(crate) objects: u32,
    pub(crate) bytes: u64,
}

/// The outcome of something a primary started.
pub(crate) enum Event<R> {
    /// A peer's PG summary.
    Summary(OsdId, Result<PgSummary>),
    /// The authority's log entries, for the primary's own recovery.
    AuthLog(Result<(Vec<PgLogEntry>, Vec<PgLogEntry>)>),
    /// A part of an object pulled from the authority, and where its next part starts.
    Pulled(Result<(Bytes, Option<Bytes>)>),
    /// Keys of the authority's objects, and whether more follow.
    Listed(Result<(Vec<Bytes>, bool)>),
    /// A replica applied (or failed) the write at this position.
    Acked(OsdId, EVersion, Result<()>),
    /// The local store made the write at this position durable.
    LocalDurable(EVersion, Result<()>),
    /// The local store made the primary's activation record durable.
    ActivationDurable(Result<()>),
    /// The monitor recorded the activation (or did not).
    Registered(bool),
    /// A replica applied an activation.
    Activated(OsdId, Result<()>),
    /// A replica applied a push.
    Pushed(OsdId, PushSize, Result<()>),
    /// A shard applied the last push of its copy of an object, rebuilt (of this many bytes).
    Rebuilt(OsdId, ObjectName, u64, Result<()>),
    /// A replica is complete again.
    Recovered(OsdId, Result<()>),
    /// A stray copy was deleted (or could not be).
    StrayRemoved(OsdId, Result<()>),
    /// Time to peer again, unless peering restarted since (the round it was set in).
    Retry(u64),
    /// Time to ask again that placement's primary lead, if the map still names this one
    /// (the round it was set in): the request or the map that answers it may be lost.
    HandBack(u64),
    /// A recovery operation's `osd_recovery_sleep` is over: its slot is free (the round
    /// it was set in).
    RecoverySlept(u64),
    /// A part of a replica's copy (an encoded store transaction, and where the next
    /// part starts) of an object whose local copy failed its checksum.
    RepairCopy(Box<Repair<R>>, Result<(Bytes, Option<Bytes>)>),
    /// A replica's scrub entries for the page, and whether it has more.
    ScrubMap(OsdId, Result<(Vec<ScrubObject>, bool)>),
    /// The authority's copy for a scrub repair, pulled when the log was at this position.
    ScrubPulled(EVersion, Result<Bytes>),
    /// A bad replica took a scrub repair's push (or did not).
    ScrubPushed(Result<()>),
    /// Time for the scrub's next page (the peering round it was set in).
    ScrubStep(u64),
    /// A shard's chunks of an object being gathered (the gather's id, the shard): its
    /// copy's metadata and the store chunks asked for.
    Chunks(ObjectName, u64, usize, Result<crate::ec::ShardRead>),
}

/// What a request to a peer was for: turns its answer into an [`Event`].
pub(crate) enum Expect<R> {
    Summary(OsdId),
    AuthLog,
    Pulled,
    Listed,
    Acked(OsdId, EVersion),
    Activated(OsdId),
    Pushed(OsdId, PushSize),
    /// The last push of a shard rebuilt for an object, of this many bytes.
    Rebuilt(OsdId, ObjectName, u64),
    Recovered(OsdId),
    StrayRemoved(OsdId),
    /// A part of a replica's copy for a repair.
    RepairCopy(Box<Repair<R>>),
    ScrubMap(OsdId),
    ScrubPulled(EVersion),
    ScrubPushed,
    Chunks(ObjectName, u64, usize),
}

impl<R> Expect<R> {
    pub(crate) fn into_event(self, reply: Result<Reply>) -> Event<R> {
        let unexpected = |other: Reply| err::io(format!("unexpected reply {other:?}"));
        let done = |r: Result<Reply>| r.map(|_| ());
        match self {
            Expect::Summary(osd) => Event::Summary(
                osd,
                reply.and_then(|r| match r {
                    Reply::Summary(s) => Ok(s),
                    other => Err(unexpected(other)),
                }),
            ),
            Expect::AuthLog => Event::AuthLog(reply.and_then(|r| match r {
                Reply::LogRemembering { entries, remembered } => Ok((entries, remembered)),
                Reply::Log(entries) => Ok((entries, Vec::new())),
                other => Err(unexpected(other)),
            })),
            Expect::Pulled => Event::Pulled(reply.and_then(copies)),
            Expect::Listed => Event::Listed(reply.and_then(|r| match r {
                Reply::Keys { keys, more } => Ok((keys, more)),
                other => Err(unexpected(other)),
            })),
            Expect::Acked(osd, at) => Event::Acked(osd, at, done(reply)),
            Expect::Activated(osd) => Event::Activated(osd, done(reply)),
            Expect::Pushed(osd, size) => Event::Pushed(osd, size, done(reply)),
            Expect::Rebuilt(osd, object, bytes) => Event::Rebuilt(osd, object, bytes, done(reply)),
            Expect::Recovered(osd) => Event::Recovered(osd, done(reply)),
            Expect::StrayRemoved(osd) => Event::StrayRemoved(osd, done(reply)),
            Expect::RepairCopy(repair) => Event::RepairCopy(repair, reply.and_then(copies)),
            Expect::ScrubMap(osd) => Event::ScrubMap(
                osd,
                reply.and_then(|r| match r {
                    Reply::ScrubMap { objects, more } => Ok((objects, more)),
                    other => Err(unexpected(other)),
                }),
            ),
            Expect::ScrubPulled(at) => Event::ScrubPulled(at, reply.and_then(copies).map(|(txn, _)| txn)),
            Expect::ScrubPushed => Event::ScrubPushed(done(reply)),
            Expect::Chunks(object, gather, shard) => Event::Chunks(
                object,
                gather,
                shard,
                reply.and_then(|r| match r {
                    Reply::Chunks { onode, chunks } => Ok((onode, chunks)),
                    other => Err(unexpected(other)),
                }),
            ),
        }
    }
}

/// The repair of an object's local copy from a replica's, pulled in parts (as recovery
/// pulls) and applied at once when the last is here.
pub(crate) struct Repair<R> {
    /// What waits for it.
    pub(crate) waiting: Repairing<R>,
    /// The replica the copy comes from.
    pub(crate) source: OsdId,
    /// The parts received so far.
    pub(crate) received: Transaction,
}

/// What waits for an object's local copy to be repaired from a replica.
pub(crate) enum Repairing<R> {
    /// A client operation, run again once the copy is repaired.
    Op { op: OsdOp, caller: ClientId, reply: R },
    /// The recovery of `osd`, which needs the object pushed from this copy.
    Recovery { osd: OsdId, object: ObjectName },
}

impl<R> Repairing<R> {
    /// The object being repaired.
    pub(crate) fn object(&self) -> &ObjectName {
        match self {
            Repairing::Op { op, .. } => &op.object,
            Repairing::Recovery { object, .. } => object,
        }
    }
}

/// The transaction and resume point of a [`Reply::Copies`].
pub(crate) fn copies(reply: Reply) -> Result<(Bytes, Option<Bytes>)> {
    match reply {
        Reply::Copies { txn, next } => Ok((txn, next)),
        other => Err(err::io(format!("unexpected reply {other:?}"))),
    }
}
