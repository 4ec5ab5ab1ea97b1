//! The monitor quorum: map changes replicated through Raft (openraft 0.9). The Raft log,
//! vote and state machine live in the monitor's own RocksDB store (`meta` keys under
//! `raft/`), each write synced before it is acknowledged; the state machine is the
//! cluster map, applied by [`crate::change::apply`]. Monitors talk over the same
//! authenticated messenger as everything else, the Raft messages JSON-encoded inside.
//!
//! Why openraft rather than raft-rs: it is async on tokio like the rest of the daemons, it
//! brings the log/state-machine/network split we need (raft-rs leaves storage, snapshots
//! and the event loop to the caller), and its 0.9 line is maintained. Pinned exactly:
//! its API is not stable before 1.0.

// openraft fixes the storage error type; it is large, and every helper here returns it.
#![allow(clippy::result_large_err)]

use crate::change::{MapChange, apply};
use crate::{Authority, BoxFuture, MemberChange};
use bytes::Bytes;
use openraft::storage::{LogFlushed, LogState, RaftLogStorage, RaftStateMachine, Snapshot};
use openraft::{
    BasicNode, ChangeMembers, Entry, EntryPayload, ErrorSubject, ErrorVerb, LogId, OptionalSend, RaftLogReader,
    RaftNetwork, RaftNetworkFactory, RaftSnapshotBuilder, SnapshotMeta, StorageError, StoredMembership, Vote,
};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use shoal_store::{ObjectStore, Transaction};
use shoal_transport::{Network, Rpc};
use shoal_types::msg::{RaftRpc, Reply, Request};
use shoal_types::{ClientId, OsdMap, RadosError, Result, err};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::io::Cursor;
use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// The outcome of one applied change, returned to the client that proposed it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChangeOutcome(pub std::result::Result<Reply, RadosError>);

openraft::declare_raft_types!(
    /// The Raft types of the monitor quorum.
    pub TypeConfig:
        D = MapChange,
        R = ChangeOutcome,
);

/// The Raft handle of a monitor.
pub type MonRaft = openraft::Raft<TypeConfig>;

const VOTE_KEY: &[u8] = b"raft/vote";
const PURGED_KEY: &[u8] = b"raft/purged";
const STATE_KEY: &[u8] = b"raft/state";
const SNAPSHOT_KEY: &[u8] = b"raft/snapshot";
const LOG_PREFIX: &[u8] = b"raft/log/";

fn log_key(index: u64) -> Vec<u8> {
    [LOG_PREFIX, &index.to_be_bytes()].concat()
}

fn storage_error(e: impl std::fmt::Display) -> StorageError<u64> {
    StorageError::from_io_error(ErrorSubject::Store, ErrorVerb::Write, std::io::Error::other(e.to_string()))
}

fn to_json<T: Serialize>(value: &T) -> std::result::Result<Vec<u8>, StorageError<u64>> {
    serde_json::to_vec(value).map_err(storage_error)
}

fn from_json<T: DeserializeOwned>(bytes: &[u8]) -> std::result::Result<T, StorageError<u64>> {
    serde_json::from_slice(bytes).map_err(storage_error)
}

fn read<T: DeserializeOwned>(store: &ObjectStore, key: &[u8]) -> std::result::Result<Option<T>, StorageError<u64>> {
    store.meta(key).map_err(storage_error)?.map(|b| from_json(&b)).transpose()
}

/// Commits and syncs: nothing Raft writes is acknowledged before it is durable.
fn write(store: &ObjectStore, txn: Transaction) -> std::result::Result<(), StorageError<u64>> {
    store.commit(txn).map_err(storage_error)?;
    store.sync().map_err(storage_error)?;
    Ok(())
}

/// The Raft log and vote, in the monitor's store.
#[derive(Clone)]
pub struct LogStore {
    store: Arc<ObjectStore>,
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> std::result::Result<Vec<Entry<TypeConfig>>, StorageError<u64>> {
        let start = match range.start_bound() {
            Bound::Included(i) => *i,
            Bound::Excluded(i) => i + 1,
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(i) => log_key(i + 1),
            Bound::Excluded(i) => log_key(*i),
            Bound::Unbounded => [LOG_PREFIX, &[0xff; 9]].concat(),
        };
        let rows = self.store.meta_scan(&log_key(start), &end, usize::MAX).map_err(storage_error)?;
        rows.iter().map(|(_, v)| from_json(v)).collect()
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> std::result::Result<LogState<TypeConfig>, StorageError<u64>> {
        let purged: Option<LogId<u64>> = read(&self.store, PURGED_KEY)?;
        let end = [LOG_PREFIX, &[0xff; 9]].concat();
        let rows = self.store.meta_scan(&log_key(0), &end, usize::MAX).map_err(storage_error)?;
        let last = match rows.last() {
            Some((_, v)) => Some(from_json::<Entry<TypeConfig>>(v)?.log_id),
            None => purged,
        };
        Ok(LogState { last_purged_log_id: purged, last_log_id: last })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> std::result::Result<(), StorageError<u64>> {
        let mut txn = Transaction::new();
        txn.put_meta(VOTE_KEY, to_json(vote)?);
        write(&self.store, txn)
    }

    async fn read_vote(&mut self) -> std::result::Result<Option<Vote<u64>>, StorageError<u64>> {
        read(&self.store, VOTE_KEY)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> std::result::Result<(), StorageError<u64>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut txn = Transaction::new();
        for entry in entries {
            txn.put_meta(&log_key(entry.log_id.index), to_json(&entry)?);
        }
        let outcome = write(&self.store, txn);
        callback.log_io_completed(outcome.as_ref().map(|_| ()).map_err(|e| std::io::Error::other(e.to_string())));
        outcome
    }

    async fn truncate(&mut self, log_id: LogId<u64>) -> std::result::Result<(), StorageError<u64>> {
        let mut txn = Transaction::new();
        txn.delete_meta_range(&log_key(log_id.index), &[LOG_PREFIX, &[0xff; 9]].concat());
        write(&self.store, txn)
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> std::result::Result<(), StorageError<u64>> {
        let mut txn = Transaction::new();
        txn.put_meta(PURGED_KEY, to_json(&log_id)?);
        txn.delete_meta_range(&log_key(0), &log_key(log_id.index + 1));
        write(&self.store, txn)
    }
}

/// What the state machine holds: the map and how far the log was applied.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct MachineState {
    last_applied: Option<LogId<u64>>,
    membership: StoredMembership<u64, BasicNode>,
    #[serde(deserialize_with = "map_with_placement")]
    map: OsdMap,
}

/// A map from JSON, completed if it was written before CRUSH rules.
fn map_with_placement<'de, D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<OsdMap, D::Error> {
    let mut map = OsdMap::deserialize(deserializer)?;
    map.fill_placement();
    Ok(map)
}

#[derive(Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta<u64, BasicNode>,
    data: Vec<u8>,
}

/// The cluster map as a Raft state machine; publishes every new map.
pub struct MapMachine {
    store: Arc<ObjectStore>,
    state: Arc<Mutex<MachineState>>,
    publish: Arc<watch::Sender<Arc<OsdMap>>>,
}

impl MapMachine {
    fn state(&self) -> MachineState {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn save(&self, state: &MachineState) -> std::result::Result<(), StorageError<u64>> {
        let mut txn = Transaction::new();
        txn.put_meta(STATE_KEY, to_json(state)?);
        write(&self.store, txn)
    }

    fn snapshot_of(state: &MachineState) -> std::result::Result<StoredSnapshot, StorageError<u64>> {
        let id = state.last_applied.map_or("0-0".to_owned(), |l| format!("{}-{}", l.leader_id.term, l.index));
        let meta = SnapshotMeta {
            last_log_id: state.last_applied,
            last_membership: state.membership.clone(),
            snapshot_id: id,
        };
        Ok(StoredSnapshot { meta, data: to_json(state)? })
    }
}

impl RaftSnapshotBuilder<TypeConfig> for MapMachine {
    async fn build_snapshot(&mut self) -> std::result::Result<Snapshot<TypeConfig>, StorageError<u64>> {
        let snapshot = Self::snapshot_of(&self.state())?;
        let mut txn = Transaction::new();
        txn.put_meta(SNAPSHOT_KEY, to_json(&snapshot)?);
        write(&self.store, txn)?;
        Ok(Snapshot { meta: snapshot.meta, snapshot: Box::new(Cursor::new(snapshot.data)) })
    }
}

impl RaftStateMachine<TypeConfig> for MapMachine {
    type SnapshotBuilder = MapMachine;

    async fn applied_state(
        &mut self,
    ) -> std::result::Result<(Option<LogId<u64>>, StoredMembership<u64, BasicNode>), StorageError<u64>> {
        let state = self.state();
        Ok((state.last_applied, state.membership))
    }

    async fn apply<I>(&mut self, entries: I) -> std::result::Result<Vec<ChangeOutcome>, StorageError<u64>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut state = self.state();
        let mut outcomes = Vec::new();
        for entry in entries {
            state.last_applied = Some(entry.log_id);
            let outcome = match entry.payload {
                EntryPayload::Blank => Ok(Reply::Done),
                EntryPayload::Normal(change) => apply(&mut state.map, &change),
                EntryPayload::Membership(m) => {
                    state.membership = StoredMembership::new(Some(entry.log_id), m);
                    Ok(Reply::Done)
                }
            };
            outcomes.push(ChangeOutcome(outcome));
        }
        self.save(&state)?;
        let map = Arc::new(state.map.clone());
        *self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = state;
        self.publish.send_if_modified(|current| {
            let newer = map.epoch > current.epoch;
            if newer {
                *current = map;
            }
            newer
        });
        Ok(outcomes)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        MapMachine { store: self.store.clone(), state: self.state.clone(), publish: self.publish.clone() }
    }

    async fn begin_receiving_snapshot(&mut self) -> std::result::Result<Box<Cursor<Vec<u8>>>, StorageError<u64>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> std::result::Result<(), StorageError<u64>> {
        let mut state: MachineState = from_json(snapshot.get_ref())?;
        state.last_applied = meta.last_log_id;
        state.membership = meta.last_membership.clone();
        self.save(&state)?;
        let stored = StoredSnapshot { meta: meta.clone(), data: snapshot.into_inner() };
        let mut txn = Transaction::new();
        txn.put_meta(SNAPSHOT_KEY, to_json(&stored)?);
        write(&self.store, txn)?;
        self.publish.send_replace(Arc::new(state.map.clone()));
        *self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = state;
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> std::result::Result<Option<Snapshot<TypeConfig>>, StorageError<u64>> {
        let stored: Option<StoredSnapshot> = read(&self.store, SNAPSHOT_KEY)?;
        Ok(stored.map(|s| Snapshot { meta: s.meta, snapshot: Box::new(Cursor::new(s.data)) }))
    }
}

/// Connections from this monitor to the others.
pub struct MonNetwork {
    network: Arc<dyn Network>,
}

/// One monitor's link to another.
pub struct MonLink {
    network: Arc<dyn Network>,
    target: u64,
    addr: String,
    rpc: Option<Arc<Rpc>>,
}

type RpcError<E = openraft::error::Infallible> =
    openraft::error::RPCError<u64, BasicNode, openraft::error::RaftError<u64, E>>;

impl MonLink {
    async fn call<Req: Serialize, Resp: DeserializeOwned, E: std::error::Error + DeserializeOwned>(
        &mut self,
        kind: RaftRpc,
        request: &Req,
    ) -> std::result::Result<Resp, RpcError<E>> {
        let unreachable = |e: RadosError| openraft::error::RPCError::Unreachable(openraft::error::Unreachable::new(&e));
        if self.rpc.as_ref().is_none_or(|r| r.is_closed()) {
            let rpc = Rpc::open(self.network.as_ref(), &self.addr, ClientId(0), Box::new(|_, _| {}), Box::new(|| {}));
            self.rpc = Some(rpc.await.map_err(unreachable)?);
        }
        let rpc = self.rpc.clone().ok_or_else(|| unreachable(err::not_connected("no connection")))?;
        let body = serde_json::to_vec(request).map_err(|e| unreachable(err::invalid(e.to_string())))?;
        let reply = rpc.call(Request::Raft { kind, body: body.into() }).await.map_err(unreachable)?;
        let Reply::Raft(bytes) = reply else {
            return Err(unreachable(err::io(format!("unexpected reply {reply:?}"))));
        };
        let answer: std::result::Result<Resp, openraft::error::RaftError<u64, E>> =
            serde_json::from_slice(&bytes).map_err(|e| unreachable(err::invalid(e.to_string())))?;
        answer.map_err(|e| openraft::error::RPCError::RemoteError(openraft::error::RemoteError::new(self.target, e)))
    }
}

impl RaftNetworkFactory<TypeConfig> for MonNetwork {
    type Network = MonLink;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> MonLink {
        MonLink { network: self.network.clone(), target, addr: node.addr.clone(), rpc: None }
    }
}

impl RaftNetwork<TypeConfig> for MonLink {
    async fn append_entries(
        &mut self,
        rpc: openraft::raft::AppendEntriesRequest<TypeConfig>,
        _option: openraft::network::RPCOption,
    ) -> std::result::Result<openraft::raft::AppendEntriesResponse<u64>, RpcError> {
        self.call(RaftRpc::AppendEntries, &rpc).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: openraft::raft::InstallSnapshotRequest<TypeConfig>,
        _option: openraft::network::RPCOption,
    ) -> std::result::Result<
        openraft::raft::InstallSnapshotResponse<u64>,
        RpcError<openraft::error::InstallSnapshotError>,
    > {
        self.call(RaftRpc::InstallSnapshot, &rpc).await
    }

    async fn vote(
        &mut self,
        rpc: openraft::raft::VoteRequest<u64>,
        _option: openraft::network::RPCOption,
    ) -> std::result::Result<openraft::raft::VoteResponse<u64>, RpcError> {
        self.call(RaftRpc::Vote, &rpc).await
    }
}

/// How long a joining monitor may take to catch up with the leader's log.
const JOIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// A member of the monitor quorum.
pub struct RaftAuthority {
    raft: MonRaft,
    maps: watch::Receiver<Arc<OsdMap>>,
}

impl RaftAuthority {
    /// Starts monitor `id` on its store; with `initial_members` (id → address) and an
    /// uninitialised store, the lowest id bootstraps the quorum.
    pub async fn start(
        id: u64,
        store: Arc<ObjectStore>,
        network: Arc<dyn Network>,
        initial_members: &BTreeMap<u64, String>,
    ) -> Result<Arc<RaftAuthority>> {
        let config = openraft::Config {
            cluster_name: "shoal-mon".into(),
            heartbeat_interval: 200,
            election_timeout_min: 1000,
            election_timeout_max: 2000,
            ..Default::default()
        };
        let config = Arc::new(config.validate().map_err(|e| err::invalid(format!("raft config: {e}")))?);
        let state: MachineState = read(&store, STATE_KEY).map_err(|e| err::io(e.to_string()))?.unwrap_or_default();
        let (publish, maps) = watch::channel(Arc::new(state.map.clone()));
        let machine =
            MapMachine { store: store.clone(), state: Arc::new(Mutex::new(state)), publish: Arc::new(publish) };
        let log = LogStore { store };
        let raft = openraft::Raft::new(id, config, MonNetwork { network }, log, machine)
            .await
            .map_err(|e| err::io(format!("starting raft: {e}")))?;
        let bootstrap = initial_members.keys().next() == Some(&id);
        if bootstrap && !raft.is_initialized().await.map_err(|e| err::io(e.to_string()))? {
            let members: BTreeMap<u64, BasicNode> =
                initial_members.iter().map(|(id, addr)| (*id, BasicNode { addr: addr.clone() })).collect();
            tracing::info!(?members, "initialising the monitor quorum");
            raft.initialize(members).await.map_err(|e| err::io(format!("initialising raft: {e}")))?;
        }
        Ok(Arc::new(RaftAuthority { raft, maps }))
    }

    /// Stops the Raft tasks.
    pub async fn shutdown(&self) {
        let _ = self.raft.shutdown().await;
    }
}

fn json<T: Serialize>(value: &T) -> Result<Bytes> {
    serde_json::to_vec(value).map(Bytes::from).map_err(|e| err::io(e.to_string()))
}

fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T> {
    serde_json::from_slice(body).map_err(|e| err::invalid(format!("malformed raft message: {e}")))
}

impl Authority for RaftAuthority {
    fn subscribe(&self) -> watch::Receiver<Arc<OsdMap>> {
        self.maps.clone()
    }

    fn leader(&self) -> Option<Option<String>> {
        let metrics = self.raft.metrics().borrow().clone();
        if metrics.current_leader == Some(metrics.id) {
            return None;
        }
        let addr = metrics
            .current_leader
            .and_then(|l| metrics.membership_config.nodes().find(|(id, _)| **id == l).map(|(_, n)| n.addr.clone()));
        Some(addr)
    }

    fn commit(&self, change: MapChange) -> BoxFuture<'_, Result<Reply>> {
        Box::pin(async move {
            match self.raft.client_write(change).await {
                Ok(response) => response.data.0,
                Err(e) => Err(err::again(format!("the monitors could not agree on the change: {e}"))),
            }
        })
    }

    fn quorum(&self) -> (Vec<(u64, String)>, Option<u64>) {
        let metrics = self.raft.metrics().borrow().clone();
        let members = metrics.membership_config.nodes().map(|(id, n)| (*id, n.addr.clone())).collect();
        (members, metrics.current_leader)
    }

    fn raft_rpc(&self, kind: RaftRpc, body: Bytes) -> BoxFuture<'_, Result<Bytes>> {
        Box::pin(async move {
            match kind {
                RaftRpc::AppendEntries => json(&self.raft.append_entries(parse(&body)?).await),
                RaftRpc::Vote => json(&self.raft.vote(parse(&body)?).await),
                RaftRpc::InstallSnapshot => json(&self.raft.install_snapshot(parse(&body)?).await),
            }
        })
    }

    fn change_members(&self, change: MemberChange) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            let metrics = self.raft.metrics().borrow().clone();
            let voters: BTreeSet<u64> = metrics.membership_config.membership().voter_ids().collect();
            let refused = |e: &dyn std::fmt::Display| err::again(format!("the membership change failed: {e}"));
            match change {
                MemberChange::Add { id, addr } => {
                    if voters.contains(&id) {
                        return Err(err::exists(format!("mon.{id} is already a member")));
                    }
                    let node = BasicNode { addr: addr.clone() };
                    let caught_up = tokio::time::timeout(JOIN_TIMEOUT, self.raft.add_learner(id, node, true)).await;
                    match caught_up {
                        Err(_) => {
                            return Err(err::timed_out(format!(
                                "mon.{id} at {addr} did not catch up within {JOIN_TIMEOUT:?}: is it running with --join?"
                            )));
                        }
                        Ok(result) => result.map_err(|e| refused(&e))?,
                    };
                    let voters = ChangeMembers::AddVoterIds(BTreeSet::from([id]));
                    self.raft.change_membership(voters, false).await.map_err(|e| refused(&e))?;
                }
                MemberChange::Remove(id) => {
                    if !voters.contains(&id) {
                        return Err(err::not_found(format!("mon.{id} is not a member")));
                    }
                    if voters.len() == 1 {
                        return Err(err::busy(format!("mon.{id} is the last monitor")));
                    }
                    let voters = ChangeMembers::RemoveVoters(BTreeSet::from([id]));
                    self.raft.change_membership(voters, false).await.map_err(|e| refused(&e))?;
                }
            }
            Ok(())
        })
    }
}
