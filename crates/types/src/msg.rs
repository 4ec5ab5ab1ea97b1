//! Messages between clients, OSDs and the map authority. The in-process messenger moves
//! them as values; a network transport carries their [`Versioned`] encoding.

use crate::encoding::Versioned;
use crate::error::RadosError;
use crate::ids::{ClientId, ObjectName, OsdId, PgId, PoolId, ReqId};
use crate::map::{OsdMap, Pool, PoolSpec};
use crate::op::{Step, StepOutput};
use crate::pg::{EVersion, PgLogEntry, PgStat, PgSummary};
use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// Everything that travels over a connection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Message {
    /// A request expecting exactly one [`Message::Reply`] with the same `tid`.
    Request {
        /// Matches the reply to the request, unique per connection.
        tid: u64,
        /// What is asked.
        request: Request,
    },
    /// The answer to the request with the same `tid`.
    Reply {
        /// The request's tid.
        tid: u64,
        /// The outcome.
        reply: Result<Reply, RadosError>,
    },
    /// A notification pushed to a watcher; the watcher answers with [`Message::NotifyAck`].
    Notify(NotifyEvent),
    /// A watcher's acknowledgement of a notification.
    NotifyAck(NotifyAck),
}

impl Versioned for Message {
    const NAME: &'static str = "message";
    const VERSION: u8 = 1;
}

/// A request to an OSD or to the map authority.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Request {
    /// Introduces the client on a new connection; watches and locks are held in its name.
    Hello(ClientId),
    /// A compound operation on one object.
    Op(OsdOp),
    /// List the objects of one PG.
    PgList(PgListRequest),
    /// Register a watch on an object.
    Watch(WatchRequest),
    /// Remove a watch.
    Unwatch(WatchRequest),
    /// Send a payload to every watcher of an object and collect their acks.
    Notify(NotifyRequest),
    /// Read or change the cluster map.
    Map(MapCommand),
    /// OSD to OSD: replication, peering, recovery and heartbeats.
    Peer(PeerRequest),
    /// Monitor to monitor: one consensus RPC, its body encoded by the consensus library.
    Raft {
        /// Which RPC.
        kind: RaftRpc,
        /// The encoded request.
        body: Bytes,
    },
    /// An administrative command for a daemon (`perf dump`, `config show`, `df`),
    /// answered with [`Reply::Tell`]. Appended last: the other encodings are unchanged.
    Tell(String),
}

/// The consensus RPCs between monitors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RaftRpc {
    /// Log replication and heartbeats.
    AppendEntries,
    /// Leader election.
    Vote,
    /// A chunk of a snapshot for a lagging monitor.
    InstallSnapshot,
}

/// The successful answer to a [`Request`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Reply {
    /// Outputs of a compound operation.
    Op(OpReply),
    /// A page of a PG listing.
    PgList(PgListReply),
    /// The request was done and returns nothing.
    Done,
    /// Acks and time-outs of a notify.
    Notify(NotifyReply),
    /// The cluster map.
    Map(Box<OsdMap>),
    /// A pool that was created or removed.
    Pool(Pool),
    /// A replica's PG record and log, for peering.
    Summary(PgSummary),
    /// PG log entries.
    Log(Vec<PgLogEntry>),
    /// Whole objects as an encoded store transaction, and where a paged copy resumes.
    Copies {
        /// The encoded transaction that recreates the objects.
        #[serde(with = "crate::encoding::shared_bytes")]
        txn: Bytes,
        /// The last object key included, when more may follow.
        next: Option<Bytes>,
    },
    /// PG states as primaries last reported them, and the client operation rate.
    PgStats {
        /// One per reported PG.
        stats: Vec<PgStat>,
        /// Client operations per second over the OSDs' last two reports.
        client_ops_per_sec: u64,
        /// How full each up OSD's store was at its last report.
        usage: Vec<(OsdId, crate::space::StoreUsage)>,
    },
    /// The encoded answer to a [`Request::Raft`].
    Raft(Bytes),
    /// The monitors (id, address) and the current leader.
    MonStatus {
        /// Members of the quorum.
        members: Vec<(u64, String)>,
        /// The leader, if one is elected.
        leader: Option<u64>,
    },
    /// The answer to a [`Request::Tell`]: a JSON document.
    Tell(String),
    /// Object keys of a PG in key order, and whether more follow. Appended.
    Keys {
        /// The store keys of the objects.
        keys: Vec<Bytes>,
        /// More objects follow the last key.
        more: bool,
    },
    /// What a [`PeerRequest::ScrubMap`] found, in key order, and whether more follow.
    /// Appended.
    ScrubMap {
        /// One entry per object.
        objects: Vec<ScrubObject>,
        /// More objects follow the last one.
        more: bool,
    },
    /// A shard's copy of an object, for [`PeerRequest::EcRead`]. Appended.
    Chunks {
        /// The encoded metadata; `None`: the shard has no copy.
        onode: Option<Bytes>,
        /// The store chunks asked for that hold data.
        chunks: Vec<(u32, Bytes)>,
    },
    /// PG log entries, for [`PeerRequest::Log`], with the requests the PG remembers from
    /// logs a merge dropped. Appended.
    LogRemembering {
        /// The entries asked for.
        entries: Vec<PgLogEntry>,
        /// The remembered requests.
        remembered: Vec<PgLogEntry>,
    },
}

/// One object as a scrub sees it on one OSD.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScrubObject {
    /// The object's store key.
    #[serde(with = "crate::encoding::shared_bytes")]
    pub key: Bytes,
    /// Data size in bytes.
    pub size: u64,
    /// User version (the PG version of its last change).
    pub version: u64,
    /// crc32c of its xattrs and omap header.
    pub attrs_digest: u32,
    /// crc32c of its omap entries.
    pub omap_digest: u32,
    /// crc32c of its data, for a deep scrub.
    pub data_digest: Option<u32>,
    /// Why its data could not be read (a stored checksum did not match), for a deep scrub.
    pub read_error: Option<String>,
}

/// What OSDs ask each other. Every request names the PG's interval (the map epoch since
/// which its acting set is unchanged); a replica refuses requests of an older interval
/// than the one it was activated in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum PeerRequest {
    /// A liveness probe; answered with [`Reply::Done`].
    Ping {
        /// The probing OSD.
        from: OsdId,
    },
    /// Asks for the replica's PG record and log.
    Query {
        /// The PG.
        pg: PgId,
        /// The querying primary's interval: from now on the replica refuses writes of
        /// older intervals (an old primary that has not seen the new map yet).
        interval: u64,
    },
    /// Asks for the full log entries after `after`.
    Log {
        /// The PG.
        pg: PgId,
        /// Entries strictly after this position.
        after: EVersion,
    },
    /// Asks for whole copies of named objects.
    Pull {
        /// The PG.
        pg: PgId,
        /// The objects (absent ones come back as deletions).
        objects: Vec<ObjectName>,
    },
    /// Asks for whole copies of the PG's objects in key order, after `after`.
    PullRange {
        /// The PG.
        pg: PgId,
        /// Resume after this object key.
        after: Option<Bytes>,
        /// At most this many objects.
        max: u32,
    },
    /// The primary's verdict after peering: adopt this log, and (unless `complete`)
    /// expect the missing objects to be pushed.
    Activate(Activate),
    /// Whole objects pushed by the primary during recovery or backfill.
    Push {
        /// The PG.
        pg: PgId,
        /// The interval.
        interval: u64,
        /// Encoded store transaction recreating the objects.
        #[serde(with = "crate::encoding::shared_bytes")]
        txn: Bytes,
    },
    /// Every missing object was pushed: the replica is complete again.
    RecoveryDone {
        /// The PG.
        pg: PgId,
        /// The interval.
        interval: u64,
    },
    /// A write to apply, exactly as the primary applied it.
    RepOp(RepOp),
    /// The PG is clean elsewhere: delete this OSD's leftover (stray) copy of it.
    RemovePg {
        /// The PG.
        pg: PgId,
        /// The interval of the primary asking.
        interval: u64,
    },
    /// Asks for one part of an object's copy (about 8 MiB), answered with
    /// [`Reply::Copies`] whose `next` says where the following part resumes. Appended:
    /// the earlier variants keep their encodings.
    PullPart {
        /// The PG.
        pg: PgId,
        /// The object (absent, it comes back as its deletion).
        object: ObjectName,
        /// `None` for the first part, else the `next` of the previous part's reply.
        resume: Option<Bytes>,
    },
    /// Asks for the keys of the PG's objects in key order after `after`, answered with
    /// [`Reply::Keys`]. Appended.
    ListRange {
        /// The PG.
        pg: PgId,
        /// Resume after this object key.
        after: Option<Bytes>,
        /// At most this many keys.
        max: u32,
    },
    /// A [`PeerRequest::Push`] that says how far the primary's log reached when it read
    /// the copies: a replica whose log is behind refuses it, since the copies would carry
    /// a write whose replication it missed. Appended.
    PushAt {
        /// The PG.
        pg: PgId,
        /// The interval.
        interval: u64,
        /// The primary's `last_update` when it read the copies.
        at: EVersion,
        /// Encoded store transaction recreating the objects.
        #[serde(with = "crate::encoding::shared_bytes")]
        txn: Bytes,
    },
    /// Asks for the scrub entries of the PG's objects in key order after `after`, answered
    /// with [`Reply::ScrubMap`]; `deep` reads and checks every byte. Appended.
    ScrubMap {
        /// The PG.
        pg: PgId,
        /// The scrubbing primary's interval.
        interval: u64,
        /// Resume after this object key.
        after: Option<Bytes>,
        /// At most this many objects.
        max: u32,
        /// Read the data too.
        deep: bool,
    },
    /// A write to a shard of an erasure-coded PG. Appended.
    EcWrite(EcWrite),
    /// Asks a shard of an erasure-coded PG for its copy of an object: the metadata and the
    /// store chunks `first..end`, answered with [`Reply::Chunks`]. Appended.
    EcRead {
        /// The PG.
        pg: PgId,
        /// The primary's interval.
        interval: u64,
        /// The object.
        object: ObjectName,
        /// The first store chunk.
        first: u32,
        /// The store chunk after the last.
        end: u32,
    },
    /// Undoes a stray copy's writes after `to`, newest first, answered with
    /// [`Reply::Done`]: the primary that queried it in `interval` reads it in place of a
    /// shard being backfilled, and those writes are divergent. Appended.
    RollBack {
        /// The PG.
        pg: PgId,
        /// The primary's interval.
        interval: u64,
        /// The last write to keep.
        to: EVersion,
    },
    /// A [`PeerRequest::PushAt`] of the last part of a shard rebuilt for `object`: the
    /// shard holds the object whole again and drops it from what it lacks. Appended.
    PushRebuilt {
        /// The PG.
        pg: PgId,
        /// The interval.
        interval: u64,
        /// The primary's `last_update` when it read the chunks.
        at: EVersion,
        /// The object rebuilt.
        object: ObjectName,
        /// Encoded store transaction writing the shard's last part.
        #[serde(with = "crate::encoding::shared_bytes")]
        txn: Bytes,
    },
}

/// A write to one shard of an erasure-coded PG: that shard's store transaction and the log
/// entry, with what the shard must keep to undo it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EcWrite {
    /// The write as a replica would take it, with this shard's store transaction.
    pub write: RepOp,
    /// What of the shard's copy the write replaces: kept until every shard has the write.
    pub touched: crate::erasure::Touched,
    /// Every shard has every write up to here: what they kept for those can go.
    pub committed_to: EVersion,
}

/// The activation message of a peered PG.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Activate {
    /// The PG.
    pub pg: PgId,
    /// The interval being activated.
    pub interval: u64,
    /// The acting set, primary first.
    pub acting: Vec<OsdId>,
    /// Keep the replica's log up to here and drop later (divergent) entries; `None`
    /// discards the replica's objects and log altogether (backfill).
    pub keep_until: Option<EVersion>,
    /// The authoritative entries after that point.
    pub entries: Vec<PgLogEntry>,
    /// The authoritative log tail.
    pub log_tail: EVersion,
    /// Whether the replica already has every object.
    pub complete: bool,
    /// The requests the PG remembers from the logs a merge dropped, for the replica to
    /// remember too (appended; empty unless the PG merged).
    pub remembered: Vec<PgLogEntry>,
}

/// A replicated write.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RepOp {
    /// The PG.
    pub pg: PgId,
    /// The primary's interval.
    pub interval: u64,
    /// The replica must be at this position before applying.
    pub prev: EVersion,
    /// The write's log entry (its position included).
    pub entry: PgLogEntry,
    /// The encoded store transaction of the object changes.
    #[serde(with = "crate::encoding::shared_bytes")]
    pub txn: Bytes,
}

/// A compound operation addressed to one object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OsdOp {
    /// Identifies the request across resends.
    pub reqid: ReqId,
    /// The pool holding the object.
    pub pool: PoolId,
    /// The object.
    pub object: ObjectName,
    /// The pool-map epoch the client computed the target with.
    pub map_epoch: u64,
    /// The steps, applied in order and atomically.
    pub steps: Vec<Step>,
}

/// What a compound operation returned.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpReply {
    /// The object's user version after the operation.
    pub version: u64,
    /// One output per step.
    pub outputs: Vec<StepOutput>,
}

/// The largest message the daemons' messengers take: a frame beyond it is refused and its
/// connection dropped.
pub const MAX_MESSAGE_BYTES: usize = 128 << 20;

/// The most data (as [`Step::carried_bytes`] counts it) an operation or its reply may
/// carry, leaving a MiB of its message for everything else. Beyond it the client or the
/// OSD answers E2BIG at once, where the message would be refused and resent until the
/// operation timed out.
pub const MAX_CARRIED_BYTES: usize = MAX_MESSAGE_BYTES - (1 << 20);

/// E2BIG unless `carried` bytes of `what` fit one message.
pub fn check_carried(what: impl std::fmt::Display, carried: usize) -> Result<(), RadosError> {
    match carried > MAX_CARRIED_BYTES {
        true => Err(crate::error::err::too_big(format!(
            "{what} carries {carried} bytes, more than one message may ({MAX_CARRIED_BYTES}); split it into parts"
        ))),
        false => Ok(()),
    }
}

/// Lists the objects of one PG, a page at a time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PgListRequest {
    /// The pool.
    pub pool: PoolId,
    /// The PG's seed.
    pub seed: u32,
    /// Only this namespace; `None` lists every namespace.
    pub namespace: Option<String>,
    /// Resume after this position (from a previous reply's `next`).
    pub after: Option<Bytes>,
    /// At most this many objects.
    pub max: u32,
}

/// A page of a PG listing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PgListReply {
    /// The objects, in the store's order.
    pub objects: Vec<ObjectName>,
    /// Where to resume; `None` when the PG is exhausted.
    pub next: Option<Bytes>,
}

/// Registers or removes a watch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WatchRequest {
    /// The pool.
    pub pool: PoolId,
    /// The watched object.
    pub object: ObjectName,
    /// Chosen by the client; identifies the watch in notifications.
    pub cookie: u64,
}

/// Asks the OSD to notify every watcher of an object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NotifyRequest {
    /// The pool.
    pub pool: PoolId,
    /// The watched object.
    pub object: ObjectName,
    /// Delivered to every watcher.
    pub payload: Bytes,
    /// How long to wait for acks.
    pub timeout_ms: u64,
}

/// A notification as a watcher receives it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NotifyEvent {
    /// Identifies the notify; echoed in the ack.
    pub notify_id: u64,
    /// The watch this notification is for.
    pub cookie: u64,
    /// Who sent the notify.
    pub notifier: ClientId,
    /// The notifier's payload.
    pub payload: Bytes,
}

/// A watcher's answer to a notification.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NotifyAck {
    /// The notify being acknowledged.
    pub notify_id: u64,
    /// The watch acknowledging.
    pub cookie: u64,
    /// Optional reply bytes for the notifier.
    pub reply: Bytes,
}

/// One watcher, as the notifier sees it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct WatcherRef {
    /// The watching client.
    pub client: ClientId,
    /// Its watch cookie.
    pub cookie: u64,
}

/// The outcome of a notify.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NotifyReply {
    /// Watchers that acknowledged, with their replies.
    pub acks: Vec<(WatcherRef, Bytes)>,
    /// Watchers that did not acknowledge in time.
    pub timed_out: Vec<WatcherRef>,
}

/// Reads or changes the pool map.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum MapCommand {
    /// Return the current map.
    Get,
    /// Create a pool.
    CreatePool(PoolSpec),
    /// Delete a pool and all its objects.
    DeletePool(String),
    /// Return the map as soon as its epoch is above `newer_than` (or the current one after
    /// `timeout_ms`): how daemons and clients follow map changes.
    WaitNewer {
        /// The epoch the caller already has.
        newer_than: u64,
        /// How long to wait for a newer one.
        timeout_ms: u64,
    },
    /// An OSD announces where it listens; the monitor records it up and in.
    OsdBoot {
        /// The OSD's id.
        id: crate::ids::OsdId,
        /// Its address, host and weight.
        entry: crate::map::OsdEntry,
    },
    /// Sets a central configuration option for `who` (`global`, `osd`, `osd.3`, …).
    ConfigSet {
        /// Whom it applies to.
        who: String,
        /// The option.
        key: String,
        /// Its value.
        value: String,
    },
    /// Removes a central configuration option.
    ConfigRm {
        /// Whom it applied to.
        who: String,
        /// The option.
        key: String,
    },
    /// An OSD reports that a peer stopped answering heartbeats.
    OsdFailure {
        /// The silent OSD.
        target: OsdId,
        /// The reporting OSD.
        reporter: OsdId,
    },
    /// A primary reports the states of its PGs.
    PgStats {
        /// The reporting OSD.
        osd: OsdId,
        /// One entry per PG it is primary of.
        stats: Vec<PgStat>,
        /// How full its store is.
        usage: crate::space::StoreUsage,
    },
    /// Returns the PG states the monitor has collected.
    GetPgStats,
    /// Returns the monitors in the quorum and the leader.
    MonStatus,
    /// Marks an OSD in (eligible for data) or out.
    SetOsdIn {
        /// The OSD's id.
        id: crate::ids::OsdId,
        /// In (true) or out (false).
        is_in: bool,
    },
    /// A primary activated these PGs and asks to record it before serving writes; the
    /// reply is the map, which shows each one recorded or not.
    PgsActivated {
        /// The primary.
        osd: OsdId,
        /// The PGs and the intervals they were activated in.
        pgs: Vec<(PgId, crate::map::ActiveInterval)>,
    },
    /// Create an erasure-coded pool.
    CreateErasurePool(crate::erasure::ErasurePoolSpec),
    /// Set an erasure-code profile.
    SetErasureProfile {
        /// Its name.
        name: String,
        /// The code and layout.
        profile: crate::erasure::ErasureProfile,
        /// Replace an existing profile with other settings.
        force: bool,
    },
    /// Remove an erasure-code profile no pool uses.
    RemoveErasureProfile(String),
    /// An OSD reports that a peer's address refused its connection: the peer's process
    /// is gone, and one report marks it down (if the address is still the peer's).
    OsdRefused {
        /// The OSD whose address refused.
        target: OsdId,
        /// The reporting OSD.
        reporter: OsdId,
        /// The address that refused.
        addr: String,
    },
    /// Primaries ask that these PGs be led by another OSD of their acting set while
    /// placement's primary is brought up to date, or (`None`) by placement's primary again.
    PrimaryTemp {
        /// The asking primary.
        osd: OsdId,
        /// The PGs and who should lead each.
        pgs: Vec<(PgId, Option<OsdId>)>,
    },
    /// Sets an OSD's CRUSH weight (its capacity share, 16.16 fixed point); it keeps it
    /// across restarts (`osd crush reweight`).
    SetOsdWeight {
        /// The OSD.
        id: OsdId,
        /// The weight, 0x10000 = 1.0; 0 takes no data.
        weight: u32,
    },
    /// Changes the CRUSH hierarchy, device classes, rules, a pool's rule or an OSD's
    /// override weight.
    Crush(crate::crush::CrushChange),
    /// Removes a down OSD from the map for good (`osd purge`): refused while any PG may
    /// need its copies unless `force`.
    OsdPurge {
        /// The OSD.
        id: OsdId,
        /// Purge even if PGs may need its data.
        force: bool,
    },
    /// Sets or clears a cluster flag (`osd set noout`, `osd unset noout`).
    SetFlag {
        /// The flag, one of [`crate::CLUSTER_FLAGS`].
        flag: String,
        /// Set (true) or clear.
        on: bool,
    },
    /// Changes the full ratios, an OSD's space state or a pool's quota.
    Space(crate::space::SpaceChange),
    /// Declares a down OSD's data gone for good (`osd lost`): PGs whose last active
    /// interval only lost OSDs served stop waiting for them and go on from what remains.
    OsdLost(OsdId),
    /// Sets PGs' upmap exceptions (`osd pg-upmap-items`, the balancer): per PG the
    /// `(from, to)` moves of its copies; an empty list removes the PG's.
    PgUpmapItems(Vec<(PgId, Vec<(OsdId, OsdId)>)>),
    /// Sets a pool's PG count (`osd pool set POOL pg_num N`): raising it splits every PG
    /// in place; its placement (`pgp_num`) then follows in steps.
    SetPgNum {
        /// The pool.
        pool: String,
        /// The new count.
        pg_num: u32,
    },
    /// Sets where a pool's `pgp_num` goes (`osd pool set POOL pgp_num N`); the leader
    /// moves it there in steps.
    SetPgpNum {
        /// The pool.
        pool: String,
        /// The target, `1..=pg_num`.
        pgp_num: u32,
    },
    /// Changes a pool's autoscaler settings (`osd pool set POOL pg_autoscale_mode on`).
    PoolAutoscale(crate::autoscale::AutoscaleChange),
    /// Adds a monitor to the quorum (`mon add`): the leader replicates the map to it until
    /// it has caught up, then makes it a voter.
    MonAdd {
        /// Its id, unused by any member.
        id: u64,
        /// Where it listens (it runs with `--join`).
        addr: String,
    },
    /// Removes a monitor from the quorum (`mon rm`), running or dead.
    MonRemove(u64),
    /// Changes the auth table (`auth get-or-create|caps|rm`); answered with the map.
    Auth(crate::auth::AuthChange),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_beyond_one_message_is_refused() {
        assert!(check_carried("an operation", MAX_CARRIED_BYTES).is_ok());
        let e = check_carried("the reply", MAX_CARRIED_BYTES + 1).unwrap_err();
        assert_eq!(e.errno, crate::Errno::TooBig);
        assert!(e.message.starts_with("the reply carries"), "{e}");
        let steps = [
            Step::WriteFull { data: Bytes::from(vec![0; 10]) },
            Step::SetXattr { name: "ab".into(), value: Bytes::from_static(b"cde") },
            Step::Stat,
        ];
        assert_eq!(steps.iter().map(Step::carried_bytes).sum::<usize>(), 15);
        let outputs = [
            StepOutput::Data(Bytes::from(vec![0; 7])),
            StepOutput::OmapKeys { keys: vec![Bytes::from_static(b"k")], more: false },
        ];
        assert_eq!(outputs.iter().map(StepOutput::carried_bytes).sum::<usize>(), 8);
    }
    use crate::op::CmpOp;

    #[test]
    fn message_round_trip() {
        let msg = Message::Request {
            tid: 7,
            request: Request::Op(OsdOp {
                reqid: ReqId { client: ClientId(9), tid: 7 },
                pool: PoolId(1),
                object: ObjectName::new("ns", "obj"),
                map_epoch: 3,
                steps: vec![
                    Step::Append { data: Bytes::from_static(b"abc") },
                    Step::CmpXattr {
                        name: "x".into(),
                        op: CmpOp::Eq,
                        mode: crate::op::CmpMode::U64,
                        value: Bytes::from_static(b"5"),
                    },
                ],
            }),
        };
        assert_eq!(Message::decode(&msg.encode()).unwrap(), msg);
        let reply = Message::Reply { tid: 7, reply: Err(crate::err::canceled("guard")) };
        assert_eq!(Message::decode(&reply.encode()).unwrap(), reply);
    }

    #[test]
    fn tell_has_golden_bytes() {
        // Message version 1, Request (0), tid 2, Request::Tell (variant 9), "df".
        let msg = Message::Request { tid: 2, request: Request::Tell("df".into()) };
        assert_eq!(msg.encode(), [1, 0, 2, 9, 2, b'd', b'f']);
        // Reply (1), tid 2, Ok (0), Reply::Tell (variant 12), "{}".
        let reply = Message::Reply { tid: 2, reply: Ok(Reply::Tell("{}".into())) };
        assert_eq!(reply.encode(), [1, 1, 2, 0, 12, 2, b'{', b'}']);
    }

    #[test]
    fn erasure_commands_have_golden_bytes() {
        use crate::crush::BucketType;
        use crate::erasure::{ErasurePoolSpec, ErasureProfile};
        let map = |command| Message::Request { tid: 4, request: Request::Map(command) };
        // Request (0), tid 4, Request::Map (6), CreateErasurePool (13), "e", 8 PGs, profile
        // "p", no min_size, overwrites allowed.
        let spec = ErasurePoolSpec {
            name: "e".into(),
            pg_num: 8,
            profile: "p".into(),
            min_size: None,
            allow_overwrites: true,
        };
        assert_eq!(map(MapCommand::CreateErasurePool(spec)).encode(), [1, 0, 4, 6, 13, 1, b'e', 8, 1, b'p', 0, 1]);
        // SetErasureProfile (14), "p", k 4, m 2, stripe unit 4096 (varint), Rack (2), root
        // "dc", class Some("ssd"), no force.
        let profile = ErasureProfile {
            k: 4,
            m: 2,
            stripe_unit: 4096,
            failure_domain: BucketType::Rack,
            crush_root: "dc".into(),
            crush_device_class: Some("ssd".into()),
        };
        let set = MapCommand::SetErasureProfile { name: "p".into(), profile, force: false };
        let expected = [1, 0, 4, 6, 14, 1, b'p', 4, 2, 0x80, 0x20, 2, 2, b'd', b'c', 1, 3, b's', b's', b'd', 0];
        assert_eq!(map(set).encode(), expected);
        // RemoveErasureProfile (15), "p".
        assert_eq!(map(MapCommand::RemoveErasureProfile("p".into())).encode(), [1, 0, 4, 6, 15, 1, b'p']);
    }

    #[test]
    fn a_refused_connection_report_has_golden_bytes() {
        // Request (0), tid 4, Request::Map (6), OsdRefused (16), target 2, reporter 3, "a:1".
        let report = MapCommand::OsdRefused { target: OsdId(2), reporter: OsdId(3), addr: "a:1".into() };
        let msg = Message::Request { tid: 4, request: Request::Map(report) };
        assert_eq!(msg.encode(), [1, 0, 4, 6, 16, 2, 3, 3, b'a', b':', b'1']);
        // Reply (1), tid 4, Err (1), Errno::ConnectionRefused (19, appended), "x".
        let refused = Message::Reply { tid: 4, reply: Err(crate::err::connection_refused("x")) };
        assert_eq!(refused.encode(), [1, 1, 4, 1, 19, 1, b'x']);
    }

    #[test]
    fn a_primary_temp_request_has_golden_bytes() {
        // Request (0), tid 4, Request::Map (6), PrimaryTemp (17), osd 5, two PGs: 1.2 led
        // by osd.3, 1.4 by placement's primary again.
        let pgs = vec![
            (PgId { pool: crate::PoolId(1), seed: 2 }, Some(OsdId(3))),
            (PgId { pool: crate::PoolId(1), seed: 4 }, None),
        ];
        let msg = Message::Request { tid: 4, request: Request::Map(MapCommand::PrimaryTemp { osd: OsdId(5), pgs }) };
        assert_eq!(msg.encode(), [1, 0, 4, 6, 17, 5, 2, 1, 2, 1, 3, 1, 4, 0]);
    }

    #[test]
    fn an_osd_weight_change_has_golden_bytes() {
        // Request (0), tid 4, Request::Map (6), SetOsdWeight (18), osd 3, weight 0x8000
        // (0.5, a varint: 0x80 0x80 0x02).
        let msg = Message::Request {
            tid: 4,
            request: Request::Map(MapCommand::SetOsdWeight { id: OsdId(3), weight: 0x8000 }),
        };
        assert_eq!(msg.encode(), [1, 0, 4, 6, 18, 3, 0x80, 0x80, 0x02]);
    }

    #[test]
    fn an_osd_purge_has_golden_bytes() {
        // Request (0), tid 4, Request::Map (6), OsdPurge (20), osd 3, force.
        let msg =
            Message::Request { tid: 4, request: Request::Map(MapCommand::OsdPurge { id: OsdId(3), force: true }) };
        assert_eq!(msg.encode(), [1, 0, 4, 6, 20, 3, 1]);
    }

    #[test]
    fn an_osd_lost_has_golden_bytes() {
        // Request (0), tid 4, Request::Map (6), OsdLost (23), osd 3.
        let msg = Message::Request { tid: 4, request: Request::Map(MapCommand::OsdLost(OsdId(3))) };
        assert_eq!(msg.encode(), [1, 0, 4, 6, 23, 3]);
    }

    #[test]
    fn upmap_items_have_golden_bytes() {
        // Request (0), tid 4, Request::Map (6), PgUpmapItems (24), one PG: 1.2, one item
        // osd.3 → osd.4.
        let items =
            MapCommand::PgUpmapItems(vec![(PgId { pool: crate::PoolId(1), seed: 2 }, vec![(OsdId(3), OsdId(4))])]);
        let msg = Message::Request { tid: 4, request: Request::Map(items) };
        assert_eq!(msg.encode(), [1, 0, 4, 6, 24, 1, 1, 2, 1, 3, 4]);
    }

    #[test]
    fn pg_count_changes_have_golden_bytes() {
        // Request (0), tid 4, Request::Map (6), SetPgNum (25) "p" 300 (varint 0xac 0x02);
        // SetPgpNum (26) "p" 2.
        let pg_num = MapCommand::SetPgNum { pool: "p".into(), pg_num: 300 };
        let msg = Message::Request { tid: 4, request: Request::Map(pg_num) };
        assert_eq!(msg.encode(), [1, 0, 4, 6, 25, 1, b'p', 0xac, 0x02]);
        let pgp_num = MapCommand::SetPgpNum { pool: "p".into(), pgp_num: 2 };
        let msg = Message::Request { tid: 4, request: Request::Map(pgp_num) };
        assert_eq!(msg.encode(), [1, 0, 4, 6, 26, 1, b'p', 2]);
    }

    #[test]
    fn monitor_membership_changes_have_golden_bytes() {
        // Request (0), tid 4, Request::Map (6), MonAdd (28) id 3 "a:1"; MonRemove (29) 2.
        let add = MapCommand::MonAdd { id: 3, addr: "a:1".into() };
        let msg = Message::Request { tid: 4, request: Request::Map(add) };
        assert_eq!(msg.encode(), [1, 0, 4, 6, 28, 3, 3, b'a', b':', b'1']);
        let msg = Message::Request { tid: 4, request: Request::Map(MapCommand::MonRemove(2)) };
        assert_eq!(msg.encode(), [1, 0, 4, 6, 29, 2]);
    }

    #[test]
    fn auth_changes_have_golden_bytes() {
        use crate::auth::{AuthChange, Cap, Caps};
        // Request (0), tid 4, Request::Map (6), Auth (30): GetOrCreate (0) "client.a" with
        // mon 'allow w' (one grant: w, no pool or namespace) and no OSD grants; SetCaps (1)
        // with no caps; Remove (2).
        let caps = Caps { mon: Cap::parse("allow w", false).unwrap(), osd: Cap::default() };
        let create = AuthChange::GetOrCreate { entity: "client.a".into(), caps };
        let msg = Message::Request { tid: 4, request: Request::Map(MapCommand::Auth(create)) };
        let name = [&[8][..], b"client.a"].concat();
        assert_eq!(msg.encode(), [&[1, 0, 4, 6, 30, 0][..], &name, &[1, 0, 1, 0, 0, 0, 0, 0]].concat());
        let set = AuthChange::SetCaps { entity: "client.a".into(), caps: Caps::default() };
        let msg = Message::Request { tid: 4, request: Request::Map(MapCommand::Auth(set)) };
        assert_eq!(msg.encode(), [&[1, 0, 4, 6, 30, 1][..], &name, &[0, 0]].concat());
        let msg =
            Message::Request { tid: 4, request: Request::Map(MapCommand::Auth(AuthChange::Remove("client.a".into()))) };
        assert_eq!(msg.encode(), [&[1, 0, 4, 6, 30, 2][..], &name].concat());
    }

    #[test]
    fn autoscale_changes_have_golden_bytes() {
        use crate::autoscale::{AutoscaleChange, AutoscaleMode};
        // Request (0), tid 4, Request::Map (6), PoolAutoscale (27) "p", mode Some(warn: 1),
        // target ratio Some(2,500: varint 0xc4 0x13).
        let change =
            AutoscaleChange { pool: "p".into(), mode: Some(AutoscaleMode::Warn), target_size_ratio: Some(2_500) };
        let msg = Message::Request { tid: 4, request: Request::Map(MapCommand::PoolAutoscale(change)) };
        assert_eq!(msg.encode(), [1, 0, 4, 6, 27, 1, b'p', 1, 1, 1, 0xc4, 0x13]);
    }

    #[test]
    fn a_cluster_flag_has_golden_bytes() {
        // Request (0), tid 4, Request::Map (6), SetFlag (21), "noin", on.
        let flag = MapCommand::SetFlag { flag: "noin".into(), on: true };
        let msg = Message::Request { tid: 4, request: Request::Map(flag) };
        assert_eq!(msg.encode(), [1, 0, 4, 6, 21, 4, b'n', b'o', b'i', b'n', 1]);
    }

    #[test]
    fn space_changes_have_golden_bytes() {
        use crate::space::{SpaceChange, SpaceState};
        let map = |change| Message::Request { tid: 4, request: Request::Map(MapCommand::Space(change)) };
        // Request (0), tid 4, Request::Map (6), Space (22), then the change:
        let prefix = [1, 0, 4, 6, 22];
        // SetRatio (0), Full (2), 9,700 basis points (varint 0xe4 0x4b).
        let ratio = SpaceChange::SetRatio { state: SpaceState::Full, basis_points: 9_700 };
        assert_eq!(map(ratio).encode(), [&prefix[..], &[0, 2, 0xe4, 0x4b]].concat());
        // OsdState (1), osd 3, Some(NearFull (0)).
        let osd = SpaceChange::OsdState { osd: OsdId(3), state: Some(SpaceState::NearFull) };
        assert_eq!(map(osd).encode(), [&prefix[..], &[1, 3, 1, 0]].concat());
        // PoolQuota (2), "p", Some(10), None.
        let quota = SpaceChange::PoolQuota { pool: "p".into(), max_objects: Some(10), max_bytes: None };
        assert_eq!(map(quota).encode(), [&prefix[..], &[2, 1, b'p', 1, 10, 0]].concat());
        // PoolFull (3), pool 1, full.
        let full = SpaceChange::PoolFull { pool: crate::PoolId(1), full: true };
        assert_eq!(map(full).encode(), [&prefix[..], &[3, 1, 1]].concat());
        // Reply (1), tid 4, Err (1), Errno::QuotaExceeded (20, appended), "x".
        let over = Message::Reply { tid: 4, reply: Err(crate::err::quota_exceeded("x")) };
        assert_eq!(over.encode(), [1, 1, 4, 1, 20, 1, b'x']);
        // Step::FullTry is appended to the steps (28).
        assert_eq!(postcard::to_allocvec(&Step::FullTry).unwrap(), [28]);
    }

    #[test]
    fn crush_changes_have_golden_bytes() {
        use crate::crush::{BucketType, CrushChange, CrushRule};
        let map = |change| Message::Request { tid: 4, request: Request::Map(MapCommand::Crush(change)) };
        // Request (0), tid 4, Request::Map (6), Crush (19), then the change:
        let prefix = [1, 0, 4, 6, 19];
        let add = CrushChange::AddBucket { name: "r1".into(), kind: BucketType::Rack, parent: Some("d".into()) };
        // AddBucket (0), "r1", Rack (2), Some("d").
        assert_eq!(map(add).encode(), [&prefix[..], &[0, 2, b'r', b'1', 2, 1, 1, b'd']].concat());
        // Move (1) "h" to "r"; Link (2); Unlink (3); Remove (4) "r".
        let moved = CrushChange::Move { name: "h".into(), parent: "r".into() };
        assert_eq!(map(moved).encode(), [&prefix[..], &[1, 1, b'h', 1, b'r']].concat());
        let unlink = CrushChange::Unlink { name: "h".into(), parent: "r".into() };
        assert_eq!(map(unlink).encode(), [&prefix[..], &[3, 1, b'h', 1, b'r']].concat());
        assert_eq!(map(CrushChange::Remove("r".into())).encode(), [&prefix[..], &[4, 1, b'r']].concat());
        // SetDeviceClass (5) [osd.1] "ssd"; RemoveDeviceClass (6) [osd.1].
        let class = CrushChange::SetDeviceClass { osds: vec![OsdId(1)], class: "ssd".into() };
        assert_eq!(map(class).encode(), [&prefix[..], &[5, 1, 1, 3, b's', b's', b'd']].concat());
        let classless = CrushChange::RemoveDeviceClass(vec![OsdId(1)]);
        assert_eq!(map(classless).encode(), [&prefix[..], &[6, 1, 1]].concat());
        // CreateRule (7) "f": root "d", Host (0), class None; RemoveRule (8) "f".
        let rule = CrushRule { root: "d".into(), failure_domain: BucketType::Host, device_class: None };
        let create = CrushChange::CreateRule { name: "f".into(), rule };
        assert_eq!(map(create).encode(), [&prefix[..], &[7, 1, b'f', 1, b'd', 0, 0]].concat());
        assert_eq!(map(CrushChange::RemoveRule("f".into())).encode(), [&prefix[..], &[8, 1, b'f']].concat());
        // SetPoolRule (9) pool "p" rule "f"; Reweight (10) osd.3 to 0x8000 (varint).
        let pool_rule = CrushChange::SetPoolRule { pool: "p".into(), rule: "f".into() };
        assert_eq!(map(pool_rule).encode(), [&prefix[..], &[9, 1, b'p', 1, b'f']].concat());
        let reweight = CrushChange::Reweight { osd: OsdId(3), reweight: 0x8000 };
        assert_eq!(map(reweight).encode(), [&prefix[..], &[10, 3, 0x80, 0x80, 0x02]].concat());
    }

    #[test]
    fn paged_recovery_messages_have_golden_bytes() {
        // Request (0), tid 3, Request::Peer (7), PeerRequest::PullPart (10), pool 1, seed 2,
        // namespace "", name "o", resume Some(1 byte 9).
        let pg = PgId { pool: crate::PoolId(1), seed: 2 };
        let object = crate::ObjectName::new("", "o");
        let pull = PeerRequest::PullPart { pg, object, resume: Some(Bytes::from_static(&[9])) };
        let msg = Message::Request { tid: 3, request: Request::Peer(pull) };
        assert_eq!(msg.encode(), [1, 0, 3, 7, 10, 1, 2, 0, 1, b'o', 1, 1, 9]);
        // PeerRequest::ListRange (11), no cursor, max 8.
        let list =
            Message::Request { tid: 3, request: Request::Peer(PeerRequest::ListRange { pg, after: None, max: 8 }) };
        assert_eq!(list.encode(), [1, 0, 3, 7, 11, 1, 2, 0, 8]);
        // Reply (1), tid 3, Ok (0), Reply::Keys (13), one key "k", more.
        let keys = Reply::Keys { keys: vec![Bytes::from_static(b"k")], more: true };
        assert_eq!(Message::Reply { tid: 3, reply: Ok(keys) }.encode(), [1, 1, 3, 0, 13, 1, 1, b'k', 1]);
    }

    #[test]
    fn push_at_has_golden_bytes() {
        // Request (0), tid 5, Request::Peer (7), PeerRequest::PushAt (12), pool 1, seed 2,
        // interval 9, at 9'4, txn of 2 bytes.
        let pg = PgId { pool: crate::PoolId(1), seed: 2 };
        let at = EVersion { epoch: 9, version: 4 };
        let push = PeerRequest::PushAt { pg, interval: 9, at, txn: Bytes::from_static(&[7, 8]) };
        let msg = Message::Request { tid: 5, request: Request::Peer(push) };
        assert_eq!(msg.encode(), [1, 0, 5, 7, 12, 1, 2, 9, 9, 4, 2, 7, 8]);
        // PeerRequest::PushRebuilt (17): the same, then object "o" (empty namespace).
        let object = ObjectName { namespace: String::new(), name: "o".into() };
        let push = PeerRequest::PushRebuilt { pg, interval: 9, at, object, txn: Bytes::from_static(&[7, 8]) };
        let msg = Message::Request { tid: 5, request: Request::Peer(push) };
        assert_eq!(msg.encode(), [1, 0, 5, 7, 17, 1, 2, 9, 9, 4, 0, 1, b'o', 2, 7, 8]);
    }

    #[test]
    fn scrub_messages_have_golden_bytes() {
        // Request (0), tid 6, Request::Peer (7), PeerRequest::ScrubMap (13), pool 1, seed 2,
        // interval 9, after Some("k"), max 25, deep.
        let pg = PgId { pool: crate::PoolId(1), seed: 2 };
        let after = Some(Bytes::from_static(b"k"));
        let request = PeerRequest::ScrubMap { pg, interval: 9, after, max: 25, deep: true };
        let msg = Message::Request { tid: 6, request: Request::Peer(request) };
        assert_eq!(msg.encode(), [1, 0, 6, 7, 13, 1, 2, 9, 1, 1, b'k', 25, 1]);
        // Reply (1), tid 6, Ok (0), Reply::ScrubMap (14), one object: key "k", size 3,
        // version 4, digests 5 and 6, data digest Some(7), no read error; no more.
        let object = ScrubObject {
            key: Bytes::from_static(b"k"),
            size: 3,
            version: 4,
            attrs_digest: 5,
            omap_digest: 6,
            data_digest: Some(7),
            read_error: None,
        };
        let reply = Reply::ScrubMap { objects: vec![object], more: false };
        assert_eq!(
            Message::Reply { tid: 6, reply: Ok(reply) }.encode(),
            [1, 1, 6, 0, 14, 1, 1, b'k', 3, 4, 5, 6, 1, 7, 0, 0]
        );
    }

    #[test]
    fn erasure_shard_messages_have_golden_bytes() {
        let pg = PgId { pool: crate::PoolId(1), seed: 2 };
        let peer = |request| Message::Request { tid: 8, request: Request::Peer(request) };
        // Request (0), tid 8, Request::Peer (7), PeerRequest::EcWrite (14): pool 1, seed 2,
        // interval 3, prev (3, 4), entry at (3, 5) by client 6 tid 7 on "" "o" with no
        // outputs, txn "t", touched Chunks([(0, 4)]), committed to (3, 4).
        let entry = PgLogEntry {
            at: EVersion { epoch: 3, version: 5 },
            reqid: ReqId { client: ClientId(6), tid: 7 },
            object: ObjectName::new("", "o"),
            outputs: None,
        };
        let write = EcWrite {
            write: RepOp {
                pg,
                interval: 3,
                prev: EVersion { epoch: 3, version: 4 },
                entry,
                txn: Bytes::from_static(b"t"),
            },
            touched: crate::erasure::Touched::Chunks(vec![(0, 4)]),
            committed_to: EVersion { epoch: 3, version: 4 },
        };
        assert_eq!(
            peer(PeerRequest::EcWrite(write)).encode(),
            [1, 0, 8, 7, 14, 1, 2, 3, 3, 4, 3, 5, 6, 7, 0, 1, b'o', 0, 1, b't', 1, 1, 0, 4, 3, 4]
        );
        // PeerRequest::EcRead (15): pool 1, seed 2, interval 3, "" "o", chunks 0..4.
        let read = PeerRequest::EcRead { pg, interval: 3, object: ObjectName::new("", "o"), first: 0, end: 4 };
        assert_eq!(peer(read).encode(), [1, 0, 8, 7, 15, 1, 2, 3, 0, 1, b'o', 0, 4]);
        // PeerRequest::RollBack (16): pool 1, seed 2, interval 3, to (3, 4).
        let roll_back = PeerRequest::RollBack { pg, interval: 3, to: EVersion { epoch: 3, version: 4 } };
        assert_eq!(peer(roll_back).encode(), [1, 0, 8, 7, 16, 1, 2, 3, 3, 4]);
        // Reply (1), tid 8, Ok (0), Reply::Chunks (15): onode Some("n"), chunk 2 "d".
        let chunks =
            Reply::Chunks { onode: Some(Bytes::from_static(b"n")), chunks: vec![(2, Bytes::from_static(b"d"))] };
        assert_eq!(Message::Reply { tid: 8, reply: Ok(chunks) }.encode(), [1, 1, 8, 0, 15, 1, 1, b'n', 1, 2, 1, b'd']);
    }

    #[test]
    fn pgs_activated_has_golden_bytes() {
        // Request (0), tid 4, Request::Map (variant 6), MapCommand::PgsActivated (12), osd 5,
        // one PG (pool 1, seed 2) activated in interval 7 on [5, 6].
        let active = crate::map::ActiveInterval { interval: 7, acting: vec![OsdId(5), OsdId(6)] };
        let command =
            MapCommand::PgsActivated { osd: OsdId(5), pgs: vec![(PgId { pool: crate::PoolId(1), seed: 2 }, active)] };
        let msg = Message::Request { tid: 4, request: Request::Map(command) };
        assert_eq!(msg.encode(), [1, 0, 4, 6, 12, 5, 1, 1, 2, 7, 2, 5, 6]);
    }

    #[test]
    fn summaries_with_missing_sets_have_golden_bytes() {
        use crate::pg::{LogPoint, PgInfo, PgMissing};
        let object = ObjectName::new("", "o");
        let summary = PgSummary {
            info: PgInfo {
                last_update: EVersion { epoch: 3, version: 4 },
                log_tail: EVersion::default(),
                complete: false,
                last_epoch_started: 3,
                last_acting: vec![OsdId(5)],
            },
            log: vec![LogPoint { at: EVersion { epoch: 3, version: 4 }, object: object.clone() }],
            missing: Some(PgMissing { objects: [object].into() }),
        };
        // Reply (1), tid 2, Ok (0), Reply::Summary (variant 6): last update (3, 4), tail
        // (0, 0), incomplete, les 3, acting [5]; log [(3, 4) "" "o"]; missing Some(["" "o"]).
        let reply = Message::Reply { tid: 2, reply: Ok(Reply::Summary(summary.clone())) };
        assert_eq!(reply.encode(), [1, 1, 2, 0, 6, 3, 4, 0, 0, 0, 3, 1, 5, 1, 3, 4, 0, 1, b'o', 1, 1, 0, 1, b'o']);
        // Stored on its own: version 1, one object.
        assert_eq!(summary.missing.unwrap().encode(), [1, 1, 0, 1, b'o']);
    }

    #[test]
    fn the_inconsistent_pg_state_is_appended() {
        // postcard writes a unit variant as its index: the earlier flags keep theirs.
        let flags = [crate::PgStateFlag::Active, crate::PgStateFlag::Incomplete, crate::PgStateFlag::Inconsistent];
        assert_eq!(postcard::to_allocvec(&flags).unwrap(), [0, 8, 9]);
        assert_eq!(postcard::to_allocvec(&[crate::PgStateFlag::Remapped]).unwrap(), [12], "remapped, appended");
        assert_eq!(postcard::to_allocvec(&[crate::PgStateFlag::Premerge]).unwrap(), [13], "premerge, appended");
    }

    proptest::proptest! {
        #[test]
        fn decoding_garbage_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
            let _ = Message::decode(&bytes);
        }
    }
}
