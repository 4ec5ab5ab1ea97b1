//! The PG log: one entry per applied write, keyed by the PG's version, recording the
//! client's request id and the reply. A request resent after a lost connection (or, with
//! replication, after a primary change) is recognised by its request id and answered with
//! the recorded reply instead of being applied twice.
//!
//! Entries live in the store's `meta` column family next to the PG's version record and are
//! written in the same transaction as the change they describe. The newest
//! `osd_pg_log_entries` are kept; older ones are trimmed in batches so that trimming costs
//! one range delete per batch, not per write.

use crate::ec::rollback::{Rollback, Stash};
use serde::{Deserialize, Serialize};
use shoal_store::{
    ObjectKey, ObjectStore, Transaction, pg_damage_rows, pg_dup_key, pg_dup_rows, pg_log_key, pg_meta_key,
    pg_missing_key, pg_missing_object_key, pg_missing_objects, pg_rollback_key, pg_scrub_key,
};
use shoal_types::msg::{Activate, OpReply};
use shoal_types::pg::{EVersion, LogPoint, PgInfo, PgLogEntry, PgMissing, PgSummary};
use shoal_types::{ObjectName, PgId, ReqId, Result, StepOutput, Versioned, err};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

/// Outputs larger than this (encoded) are not kept; a resend then gets the version only.
pub const MAX_RETAINED_OUTPUT_BYTES: usize = 64 << 10;
/// Entries trimmed at once.
const TRIM_BATCH: usize = 128;

/// The record (`M` ‖ PG) that an incomplete copy keeps a missing set. Since version 2 the
/// objects are rows of their own ([`pg_missing_object_key`]), so that recovering one
/// rewrites no other (rewriting the whole set per recovered object took 2–4% of a
/// recovering cluster's CPU); `listed` stays empty. Version 1 listed every object here.
#[derive(Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct MissingRecord {
    listed: BTreeSet<ObjectName>,
}

impl Versioned for MissingRecord {
    const NAME: &'static str = "pg missing record";
    const VERSION: u8 = 2;

    fn decode_older(version: u8, body: &[u8]) -> Option<Result<Self>> {
        (version == 1).then(|| shoal_types::encoding::decode_body(Self::NAME, body))
    }
}

/// The `meta` row that lists `object` among what an incomplete copy of `pg` lacks.
fn missing_row(pg: PgId, object: &ObjectName) -> Result<Vec<u8>> {
    Ok(pg_missing_object_key(pg, &ObjectKey::new(pg.pool, object)?))
}

/// The `meta` rows of every object in `missing`.
fn missing_rows(pg: PgId, missing: &PgMissing) -> Result<Vec<Vec<u8>>> {
    missing.objects.iter().map(|object| missing_row(pg, object)).collect()
}

/// What an OSD keeps in memory about one PG: its record and its log.
pub struct PgState {
    pg: PgId,
    /// The persistent record (last update, log tail, completeness, last activation).
    pub info: PgInfo,
    replies: HashMap<ReqId, OpReply>,
    log: VecDeque<(LogPoint, ReqId)>,
    max_entries: usize,
    /// Versions of the writes this shard of an erasure-coded PG kept undo records for, with
    /// their stashes.
    rollbacks: BTreeMap<u64, Option<Stash>>,
    /// While the copy is incomplete after a recovery by log: the objects it lacks.
    missing: Option<PgMissing>,
    /// The requests remembered from logs a merge dropped ([`shoal_store::pg_dup_key`]).
    remembered: Vec<PgLogEntry>,
}

/// What rolling back a shard's newest write did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RolledBack {
    /// The write at this position was undone (or its object was lacked already).
    Undone(EVersion),
    /// The write at this position kept nothing to undo it with: the copy now lacks the
    /// object, and must be recovered before it serves it.
    Lacking(EVersion, ObjectName),
}

impl PgState {
    /// Loads a PG's record and log from the store (an unknown PG is empty and complete).
    pub fn load(store: &ObjectStore, pg: PgId, max_entries: usize) -> Result<PgState> {
        let corrupt = |what: String| err::io(format!("pg {pg}: corrupt {what}"));
        let info = match store.meta(&pg_meta_key(pg))? {
            Some(bytes) => match PgInfo::decode(&bytes) {
                Ok(info) => info,
                // Before replication the record was the version counter alone, big-endian:
                // its first byte, read as an encoding version, is 0, which no record has.
                // (Telling it by its length alone misread 8-byte records.)
                Err(e) => match <[u8; 8]>::try_from(bytes.as_slice()) {
                    Ok(counter) => PgInfo {
                        last_update: EVersion { epoch: 0, version: u64::from_be_bytes(counter) },
                        ..PgInfo::empty()
                    },
                    Err(_) => return Err(corrupt(e.message)),
                },
            },
            None => PgInfo::empty(),
        };
        let rollbacks = undo_records(store, pg)?
            .into_iter()
            .map(|(version, record)| Ok((version, record.stash_of(pg.pool)?)))
            .collect::<Result<_>>()?;
        let missing = match store.meta(&pg_missing_key(pg))? {
            Some(bytes) => {
                let record = MissingRecord::decode(&bytes).map_err(|e| corrupt(e.message))?;
                let mut objects = record.listed;
                let (from, to, prefix) = pg_missing_objects(pg);
                for (row, _) in store.meta_scan(&from, &to, usize::MAX)? {
                    let key = ObjectKey::from_bytes(row.get(prefix..).unwrap_or_default().to_vec());
                    objects.insert(key.and_then(|key| key.decode()).map_err(|e| corrupt(e.message))?.1);
                }
                Some(PgMissing { objects })
            }
            None => None,
        };
        let mut state = PgState {
            pg,
            info,
            replies: HashMap::new(),
            log: VecDeque::new(),
            max_entries: max_entries.max(1),
            rollbacks,
            missing,
            remembered: Vec::new(),
        };
        let (from, to) = pg_dup_rows(pg);
        for (_, bytes) in store.meta_scan(&from, &to, usize::MAX)? {
            let entry =
                PgLogEntry::decode(&bytes).map_err(|e| corrupt(format!("remembered request: {}", e.message)))?;
            state.replies.insert(entry.reqid, reply_of(&entry));
            state.remembered.push(entry);
        }
        for entry in state.entries_after(store, EVersion::default())? {
            state.remember(&entry);
        }
        Ok(state)
    }

    fn remember(&mut self, entry: &PgLogEntry) {
        self.replies.insert(entry.reqid, reply_of(entry));
        self.log.push_back((LogPoint { at: entry.at, object: entry.object.clone() }, entry.reqid));
    }

    /// The requests remembered from logs a merge dropped: an activation hands them on.
    pub fn remembered(&self) -> &[PgLogEntry] {
        &self.remembered
    }

    /// The recorded reply of an already applied request.
    pub fn applied(&self, reqid: &ReqId) -> Option<OpReply> {
        self.replies.get(reqid).cloned()
    }

    /// The log entry of a write, with the reply outputs kept only when they are small.
    pub fn entry(at: EVersion, reqid: ReqId, object: shoal_types::ObjectName, reply: &OpReply) -> PgLogEntry {
        let retained = postcard_len(&reply.outputs) <= MAX_RETAINED_OUTPUT_BYTES;
        PgLogEntry { at, reqid, object, outputs: retained.then(|| reply.outputs.clone()) }
    }

    /// Records a write in `txn` (log entry and PG record) and in memory, trimming old
    /// entries in batches.
    pub fn append(&mut self, txn: &mut Transaction, entry: &PgLogEntry) {
        txn.put_meta(&pg_log_key(self.pg, entry.at.version), entry.encode());
        self.info.last_update = entry.at;
        self.remember(entry);
        if self.log.len() >= self.max_entries + TRIM_BATCH {
            while self.log.len() > self.max_entries {
                if let Some((point, old)) = self.log.pop_front() {
                    self.replies.remove(&old);
                    self.info.log_tail = point.at;
                }
            }
            let oldest_kept = self.log.front().map_or(self.info.last_update.version, |(p, _)| p.at.version);
            txn.delete_meta_range(&pg_log_key(self.pg, 0), &pg_log_key(self.pg, oldest_kept));
        }
        self.put_info(txn);
    }

    /// Stores in `txn` what undoes the write at `at` to the object at `key` on this shard
    /// (`None`: nothing does, see [`PgState::roll_back_newest`]), and drops the records of
    /// writes up to `committed_to`, which every shard has.
    pub fn keep_rollback(
        &mut self,
        txn: &mut Transaction,
        at: EVersion,
        key: &ObjectKey,
        kept: Option<&Rollback>,
        committed_to: EVersion,
    ) {
        let done: Vec<u64> = self.rollbacks.range(..=committed_to.version).map(|(v, _)| *v).collect();
        for version in done {
            txn.delete_meta(&pg_rollback_key(self.pg, version));
            if let Some(Some(stash)) = self.rollbacks.remove(&version) {
                stash.drop_in(txn);
            }
        }
        if let Some(kept) = kept {
            txn.put_meta(&pg_rollback_key(self.pg, at.version), kept.encode());
            self.rollbacks.insert(at.version, kept.stash_at(key));
        }
    }

    /// Undoes the newest write of this shard of an erasure-coded PG from its undo record,
    /// in `txn` with the removal of its log entry and record: the log ends one write
    /// earlier. A write that kept no record (its object was rebuilt whole at that entry,
    /// or every shard had it) cannot be undone: the entry is dropped and the copy lacks
    /// the object from then on, to be rebuilt as the authority says. An incomplete copy
    /// that lacked the object already only drops the entry.
    pub fn roll_back_newest(&mut self, store: &ObjectStore, txn: &mut Transaction) -> Result<RolledBack> {
        let (point, reqid) =
            self.log.back().cloned().ok_or_else(|| err::invalid(format!("pg {}: no write to roll back", self.pg)))?;
        let version = point.at.version;
        let rolled_back = match store.meta(&pg_rollback_key(self.pg, version))? {
            Some(record) => {
                let rollback = Rollback::decode(&record)?;
                let key = shoal_store::ObjectKey::new(self.pg.pool, &rollback.object)?;
                crate::ec::rollback::undo(store, &key, &rollback, txn)?;
                txn.delete_meta(&pg_rollback_key(self.pg, version));
                RolledBack::Undone(point.at)
            }
            None if self.lacks(&point.object) => RolledBack::Undone(point.at),
            None => {
                self.mark_lacking(txn, &point.object)?;
                RolledBack::Lacking(point.at, point.object.clone())
            }
        };
        txn.delete_meta(&pg_log_key(self.pg, version));
        self.log.pop_back();
        self.replies.remove(&reqid);
        self.rollbacks.remove(&version);
        self.info.last_update = self.log.back().map_or(self.info.log_tail, |(p, _)| p.at);
        self.put_info(txn);
        Ok(rolled_back)
    }

    /// Marks the copy incomplete, lacking `object` besides what it lacked (in `txn`, with
    /// the record written by the caller). A copy being backfilled lacks anything already.
    fn mark_lacking(&mut self, txn: &mut Transaction, object: &ObjectName) -> Result<()> {
        let row = missing_row(self.pg, object)?;
        if self.info.complete {
            self.info.complete = false;
            self.missing = Some(PgMissing::default());
            txn.put_meta(&pg_missing_key(self.pg), MissingRecord::default().encode());
        }
        if let Some(missing) = self.missing.as_mut()
            && missing.objects.insert(object.clone())
        {
            txn.put_meta(&row, Vec::new());
        }
        Ok(())
    }

    /// Versions of the writes this shard keeps undo records for.
    pub fn rollbacks(&self) -> impl Iterator<Item = u64> + '_ {
        self.rollbacks.keys().copied()
    }

    /// Writes the PG record into `txn`.
    pub fn put_info(&self, txn: &mut Transaction) {
        txn.put_meta(&pg_meta_key(self.pg), self.info.encode());
    }

    /// The record and log positions, for peering.
    pub fn summary(&self) -> PgSummary {
        PgSummary {
            info: self.info.clone(),
            log: self.log.iter().map(|(p, _)| p.clone()).collect(),
            missing: self.missing.clone().filter(|_| !self.info.complete),
        }
    }

    /// Marks the copy complete (every object as its log says) in `txn`.
    pub fn mark_complete(&mut self, txn: &mut Transaction) -> Result<()> {
        self.drop_missing(txn)?;
        self.info.complete = true;
        self.put_info(txn);
        Ok(())
    }

    /// Drops the missing set, record and rows, in `txn`.
    fn drop_missing(&mut self, txn: &mut Transaction) -> Result<()> {
        let Some(missing) = &self.missing else { return Ok(()) };
        let rows = missing_rows(self.pg, missing)?;
        txn.delete_meta(&pg_missing_key(self.pg));
        for row in rows {
            txn.delete_meta(&row);
        }
        self.missing = None;
        Ok(())
    }

    /// Whether this copy is incomplete and lacks `object`.
    pub fn lacks(&self, object: &ObjectName) -> bool {
        !self.info.complete && self.missing.as_ref().is_some_and(|m| m.objects.contains(object))
    }

    /// `object` was rebuilt whole on this incomplete copy: drops it from what the copy
    /// lacks (in `txn`).
    pub fn recovered(&mut self, txn: &mut Transaction, object: &ObjectName) -> Result<()> {
        if self.lacks(object) {
            txn.delete_meta(&missing_row(self.pg, object)?);
            if let Some(missing) = self.missing.as_mut() {
                missing.objects.remove(object);
            }
        }
        Ok(())
    }

    /// The stored log entries strictly after `after`, oldest first.
    pub fn entries_after(&self, store: &ObjectStore, after: EVersion) -> Result<Vec<PgLogEntry>> {
        let (start, end) = (pg_log_key(self.pg, after.version), pg_log_key(self.pg, u64::MAX));
        let mut entries = Vec::new();
        for (_, value) in store.meta_scan(&start, &end, usize::MAX)? {
            let entry =
                PgLogEntry::decode(&value).map_err(|e| err::io(format!("pg {} log: {}", self.pg, e.message)))?;
            if entry.at > after {
                entries.push(entry);
            }
        }
        Ok(entries)
    }

    /// Rewrites the log and record as the primary's activation says (in `txn`; reload the
    /// state after committing it): keep entries up to `keep_until` (or none, and no
    /// objects, for a backfill), then append the authoritative entries. An incomplete copy
    /// kept by log records what it lacks: what it lacked already, the objects of its
    /// dropped entries and those of the entries it adopts.
    pub fn adopt(&mut self, txn: &mut Transaction, activate: &Activate, pg_num: u32) -> Result<()> {
        match activate.keep_until.filter(|_| !activate.complete) {
            Some(keep) => {
                let mut missing = self.missing.clone().filter(|_| !self.info.complete).unwrap_or_default();
                let dropped = self.log.iter().map(|(p, _)| p).filter(|p| p.at > keep);
                missing.objects.extend(dropped.map(|p| p.object.clone()));
                missing.objects.extend(activate.entries.iter().map(|e| e.object.clone()));
                // Every object gets its row, those a version 1 record listed too.
                let rows = missing_rows(self.pg, &missing)?;
                txn.put_meta(&pg_missing_key(self.pg), MissingRecord::default().encode());
                for row in rows {
                    txn.put_meta(&row, Vec::new());
                }
                self.missing = Some(missing);
            }
            None => self.drop_missing(txn)?,
        }
        let first_dropped = activate.keep_until.map_or(0, |k| k.version + 1);
        txn.delete_meta_range(&pg_log_key(self.pg, first_dropped), &pg_log_key(self.pg, u64::MAX));
        if activate.keep_until.is_none() {
            // The stashes go with the objects: they sort in the PG's ranges.
            delete_objects(txn, self.pg, pg_num);
            txn.delete_meta_range(&pg_rollback_key(self.pg, 0), &pg_rollback_key(self.pg, u64::MAX));
            self.rollbacks.clear();
        }
        for entry in &activate.entries {
            txn.put_meta(&pg_log_key(self.pg, entry.at.version), entry.encode());
        }
        for entry in &activate.remembered {
            txn.put_meta(&pg_dup_key(self.pg, entry.reqid), entry.encode());
        }
        let keep = activate.keep_until.unwrap_or(activate.log_tail);
        self.info = PgInfo {
            last_update: activate.entries.last().map_or(keep, |e| e.at),
            log_tail: if activate.keep_until.is_none() { activate.log_tail } else { self.info.log_tail },
            complete: activate.complete,
            last_epoch_started: activate.interval,
            last_acting: activate.acting.clone(),
        };
        self.put_info(txn);
        Ok(())
    }
}

/// The reply a logged request got. Detached: a replica's entry came in a frame, and kept
/// slices of it would pin one receive buffer per entry (gigabytes over a full log).
fn reply_of(entry: &PgLogEntry) -> OpReply {
    let outputs = entry.outputs.iter().flatten().map(StepOutput::detached).collect();
    OpReply { version: entry.at.version, outputs }
}

/// Deletes every object of a PG (it has `pg_num` siblings) in `txn`.
fn delete_objects(txn: &mut Transaction, pg: PgId, pg_num: u32) {
    txn.delete_hash_ranges(pg.pool, &shoal_placement::pg_reversed_hash_ranges(pg.seed, pg_num));
}

/// Deletes a PG's objects, log and record in `txn`: this OSD no longer holds it.
pub fn delete_pg(txn: &mut Transaction, pg: PgId, pg_num: u32) {
    delete_objects(txn, pg, pg_num);
    delete_pg_records(txn, pg);
}

/// The undo records of an erasure-coded PG's shard, by version.
fn undo_records(store: &ObjectStore, pg: PgId) -> Result<Vec<(u64, Rollback)>> {
    let rows = store.meta_scan(&pg_rollback_key(pg, 0), &pg_rollback_key(pg, u64::MAX), usize::MAX)?;
    rows.into_iter()
        .map(|(key, record)| {
            let version = key.get(key.len().saturating_sub(8)..).and_then(|v| <[u8; 8]>::try_from(v).ok());
            let version = version.ok_or_else(|| err::io(format!("pg {pg}: corrupt undo record key {key:02x?}")))?;
            Ok((u64::from_be_bytes(version), Rollback::decode(&record)?))
        })
        .collect()
}

/// Deletes a PG's undo records and their stashes in `txn`, keeping its objects.
pub fn forget_rollbacks(store: &ObjectStore, txn: &mut Transaction, pg: PgId) -> Result<()> {
    for (_, record) in undo_records(store, pg)? {
        if let Some(stash) = record.stash_of(pg.pool)? {
            stash.drop_in(txn);
        }
    }
    txn.delete_meta_range(&pg_rollback_key(pg, 0), &pg_rollback_key(pg, u64::MAX));
    Ok(())
}

/// Deletes a PG's log, remembered requests, undo records, missing set, damage and scrub
/// rows and its record in `txn`, keeping its objects (a merge hands them to the target,
/// after [`forget_rollbacks`]).
pub fn delete_pg_records(txn: &mut Transaction, pg: PgId) {
    let (from, to) = pg_dup_rows(pg);
    txn.delete_meta_range(&from, &to);
    txn.delete_meta_range(&pg_log_key(pg, 0), &pg_log_key(pg, u64::MAX));
    txn.delete_meta_range(&pg_rollback_key(pg, 0), &pg_rollback_key(pg, u64::MAX));
    txn.delete_meta(&pg_missing_key(pg));
    let (from, to, _) = pg_missing_objects(pg);
    txn.delete_meta_range(&from, &to);
    let (from, to) = pg_damage_rows(Some(pg));
    txn.delete_meta_range(&from, &to);
    txn.delete_meta(&pg_scrub_key(pg));
    let record = pg_meta_key(pg);
    txn.delete_meta_range(&record, &[record.as_slice(), &[0]].concat());
}

fn postcard_len(outputs: &[StepOutput]) -> usize {
    outputs
        .iter()
        .map(|o| match o {
            StepOutput::Data(d) => d.len(),
            StepOutput::Xattrs(x) => x.iter().map(|(k, v)| k.len() + v.len()).sum(),
            StepOutput::OmapKeys { keys, .. } => keys.iter().map(|k| k.len()).sum(),
            StepOutput::OmapVals { entries, .. } => entries.iter().map(|(k, v)| k.len() + v.len()).sum(),
            StepOutput::None | StepOutput::Stat(_) | StepOutput::Checksum(_) => 16,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use shoal_store::{StoreFormat, StoreOptions};
    use shoal_types::{ClientId, ObjectName, PoolId};

    /// An in-memory store, a PG, and its state (empty, keeping 10 log entries).
    fn empty_pg() -> (ObjectStore, PgId, PgState) {
        let store = ObjectStore::in_memory(StoreFormat::default(), StoreOptions::default()).unwrap();
        let pg = PgId { pool: PoolId(1), seed: 0 };
        let state = PgState::load(&store, pg, 10).unwrap();
        (store, pg, state)
    }

    #[test]
    fn missing_sets_are_a_record_and_a_row_per_object_and_version_1_records_still_load() {
        assert_eq!(MissingRecord::default().encode(), [2, 0]);
        let (store, pg, _) = empty_pg();
        let (old, new) = (ObjectName::new("", "old"), ObjectName::new("", "new"));
        let row = missing_row(pg, &new).unwrap();
        // `M` ‖ pool ‖ seed, then the object key.
        assert_eq!(row[..13], [b'M', 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0]);
        assert_eq!(row[13..], *ObjectKey::new(pg.pool, &new).unwrap().as_bytes());
        // A version 1 record listed its objects itself.
        let mut txn = Transaction::new();
        txn.put_meta(&pg_missing_key(pg), PgMissing { objects: BTreeSet::from([old.clone()]) }.encode());
        txn.put_meta(&row, Vec::new());
        store.commit(txn).unwrap();
        let state = PgState::load(&store, pg, 10).unwrap();
        assert_eq!(state.missing, Some(PgMissing { objects: BTreeSet::from([new, old]) }));
    }

    #[test]
    fn log_survives_reload_and_trims_in_batches() {
        let (store, pg, mut state) = empty_pg();
        let reqid = |tid| ReqId { client: ClientId(7), tid };
        for tid in 1..=200u64 {
            let mut txn = Transaction::new();
            let reply = OpReply { version: tid, outputs: vec![StepOutput::Checksum(tid as u32)] };
            let at = EVersion { epoch: 3, version: tid };
            state.append(&mut txn, &PgState::entry(at, reqid(tid), ObjectName::new("", "o"), &reply));
            store.commit(txn).unwrap();
            assert!(state.log.len() < 10 + TRIM_BATCH, "trimmed in batches");
        }
        let reloaded = PgState::load(&store, pg, 10).unwrap();
        assert_eq!(reloaded.info.last_update, EVersion { epoch: 3, version: 200 });
        assert_eq!(reloaded.summary(), state.summary(), "memory and store agree after trims");
        assert!(reloaded.info.log_tail.version > 0, "the tail moved with the trim");
        assert_eq!(reloaded.applied(&reqid(200)).unwrap().outputs, vec![StepOutput::Checksum(200)]);
        assert!(reloaded.applied(&reqid(1)).is_none(), "old entries are trimmed");
    }

    #[test]
    fn a_remembered_reply_does_not_keep_the_received_frame_alive() {
        let (_, _, mut state) = empty_pg();
        let reqid = ReqId { client: ClientId(7), tid: 1 };
        let reply = OpReply { version: 1, outputs: vec![StepOutput::Data(Bytes::from_static(b"class output"))] };
        let sent = PgState::entry(EVersion { epoch: 1, version: 1 }, reqid, ObjectName::new("", "o"), &reply);
        let frame = Bytes::from(sent.encode());
        let received = PgLogEntry::decode_shared(&frame).unwrap();
        let Some([StepOutput::Data(data)]) = received.outputs.as_deref() else { panic!("one data output") };
        assert!(frame.as_ptr_range().contains(&data.as_ptr()), "decoded as a slice of the frame");

        state.append(&mut Transaction::new(), &received);
        drop(received);
        assert!(frame.is_unique(), "the log holds no slice of the frame");
        assert_eq!(state.applied(&reqid).unwrap().outputs, reply.outputs);
    }

    #[test]
    fn an_eight_byte_record_is_not_taken_for_the_old_counter() {
        let (store, pg, mut state) = empty_pg();
        state.info = PgInfo { complete: false, ..PgInfo::empty() };
        assert_eq!(state.info.encode().len(), 8, "the case the simulator found (seed 56)");
        let mut txn = Transaction::new();
        state.put_info(&mut txn);
        store.commit(txn).unwrap();
        assert_eq!(PgState::load(&store, pg, 10).unwrap().info, state.info);
        // The record as it was before replication: a big-endian version counter.
        let mut txn = Transaction::new();
        txn.put_meta(&pg_meta_key(pg), 42u64.to_be_bytes().to_vec());
        store.commit(txn).unwrap();
        assert_eq!(PgState::load(&store, pg, 10).unwrap().info.last_update, EVersion { epoch: 0, version: 42 });
    }

    #[test]
    fn a_copy_recovered_by_log_keeps_what_it_lacks_until_complete() {
        let (store, pg, mut state) = empty_pg();
        let reply = OpReply { version: 1, outputs: Vec::new() };
        let write = |tid: u64, object: &str| {
            let at = EVersion { epoch: 3, version: tid };
            PgState::entry(at, ReqId { client: ClientId(7), tid }, ObjectName::new("", object), &reply)
        };
        let mut txn = Transaction::new();
        state.append(&mut txn, &write(1, "a"));
        state.append(&mut txn, &write(2, "divergent"));
        store.commit(txn).unwrap();
        let activate = |keep_until, entries, complete| Activate {
            pg,
            interval: 5,
            acting: Vec::new(),
            keep_until,
            entries,
            log_tail: EVersion::default(),
            complete,
            remembered: Vec::new(),
        };
        let adopt = |state: &mut PgState, activate: &Activate| {
            let mut txn = Transaction::new();
            state.adopt(&mut txn, activate, 1).unwrap();
            store.commit(txn).unwrap();
            PgState::load(&store, pg, 10).unwrap()
        };
        let names = |s: &PgState| -> Vec<String> {
            s.summary().missing.map(|m| m.objects.iter().map(|o| o.name.clone()).collect()).unwrap_or_default()
        };
        // Kept to (3, 1): it lacks the object of its dropped entry and the adopted one's.
        let kept = Some(EVersion { epoch: 3, version: 1 });
        let mut state = adopt(&mut state, &activate(kept, vec![write(2, "b")], false));
        assert_eq!(names(&state), ["b", "divergent"]);
        // A later activation adds to what it lacked.
        let kept = Some(EVersion { epoch: 3, version: 2 });
        let mut state = adopt(&mut state, &activate(kept, vec![write(3, "c")], false));
        assert_eq!(names(&state), ["b", "c", "divergent"]);
        // Its adopted entries kept no undo records: rolling them back drops the entries
        // and the objects stay listed.
        let mut txn = Transaction::new();
        let undone = [state.roll_back_newest(&store, &mut txn), state.roll_back_newest(&store, &mut txn)];
        store.commit(txn).unwrap();
        let at = |version| EVersion { epoch: 3, version };
        assert_eq!(undone.map(Result::unwrap), [RolledBack::Undone(at(3)), RolledBack::Undone(at(2))]);
        assert_eq!(state.info.last_update.version, 1);
        assert_eq!(names(&state), ["b", "c", "divergent"]);
        // An object rebuilt whole is no longer listed, after a reload too.
        let mut txn = Transaction::new();
        state.recovered(&mut txn, &ObjectName::new("", "c")).unwrap();
        store.commit(txn).unwrap();
        assert_eq!(names(&state), ["b", "divergent"]);
        let mut state = PgState::load(&store, pg, 10).unwrap();
        assert_eq!(names(&state), ["b", "divergent"]);
        // Complete again: nothing is listed, in memory or after a reload.
        let mut txn = Transaction::new();
        state.mark_complete(&mut txn).unwrap();
        store.commit(txn).unwrap();
        assert_eq!(state.summary().missing, None);
        assert_eq!(PgState::load(&store, pg, 10).unwrap().summary().missing, None);
        // A backfill (nothing kept) knows nothing of what it lacks.
        let state = adopt(&mut state, &activate(None, vec![write(3, "c")], false));
        assert!(!state.info.complete);
        assert_eq!(state.summary().missing, None);
    }

    #[test]
    fn a_write_without_an_undo_record_rolls_back_to_a_copy_that_lacks_its_object() {
        // A complete copy rebuilt "a" whole at (3, 2): nothing on it undoes that write
        // (the simulator's seed 7880 rolled such a write back).
        let (store, pg, mut state) = empty_pg();
        let reply = OpReply { version: 1, outputs: Vec::new() };
        let mut txn = Transaction::new();
        for (version, object) in [(1, "b"), (2, "a")] {
            let at = EVersion { epoch: 3, version };
            let reqid = ReqId { client: ClientId(7), tid: version };
            state.append(&mut txn, &PgState::entry(at, reqid, ObjectName::new("", object), &reply));
        }
        store.commit(txn).unwrap();
        assert!(state.info.complete);
        let mut txn = Transaction::new();
        let rolled_back = state.roll_back_newest(&store, &mut txn).unwrap();
        store.commit(txn).unwrap();
        let a = ObjectName::new("", "a");
        assert_eq!(rolled_back, RolledBack::Lacking(EVersion { epoch: 3, version: 2 }, a.clone()));
        for copy in [state.summary(), PgState::load(&store, pg, 10).unwrap().summary()] {
            assert_eq!(copy.info.last_update, EVersion { epoch: 3, version: 1 });
            assert!(!copy.info.complete, "it must be recovered before it serves \"a\"");
            assert_eq!(copy.missing, Some(PgMissing { objects: BTreeSet::from([a.clone()]) }));
        }
    }
}
