//! `2pc_queue`: a bounded queue in one object whose producers first reserve space, then
//! commit entries into the reservation (or abort it), as Ceph's; or `enqueue` entries at
//! once, as many as fit. Persistent notifications hold their topics' queues here; their
//! events arrive with `enqueue` from the bucket index logs (see `bucket_index`).
//!
//! Layout: the omap header holds the [`QueueHeader`] (capacity and exact accounting);
//! omap keys `r<id:u64 BE>` hold reservations and `p<last:u64 BE>` hold *rows*: the
//! entries one call appended (at most [`ROW_ENTRIES`] or [`ROW_BYTES`] each), consecutive
//! markers ending at `last`. A row is one key for many entries, so appending a batch costs
//! one store insert rather than one per entry; keyed by its last marker, the row holding
//! any marker is found with a forward seek, and a partly removed row keeps its key. Queues
//! written before rows existed hold one entry per key `e<marker:u64 BE>`; those sort before
//! every row and still list and remove. The header is cached in memory per object and
//! published only when a transaction commits, so a hot queue does not decode its header
//! per call.
//!
//! Accounting: `committed_bytes` is the sum of the lengths of live entries and
//! `reserved_bytes` the sum of live reservations; every path that removes an entry or a
//! reservation subtracts exactly what was added, so both return to zero when the queue
//! drains.

use crate::registry::versioned_v1;
use crate::{ClassRegistry, MethodContext, MethodFlags, decode_input, decode_stored};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use shoal_types::{Result, Versioned, err};
use std::sync::Arc;

/// The class name.
pub const CLASS: &str = "2pc_queue";
/// Key prefix of a single entry (the layout before rows).
const ENTRY: u8 = b'e';
/// Key prefix of a row of entries; sorts after every [`ENTRY`] and before [`RESERVATION`].
const ROW: u8 = b'p';
const RESERVATION: u8 = b'r';
/// Most entries one row holds.
pub const ROW_ENTRIES: usize = 256;
/// A row takes no entry that would make it larger than this (an entry larger on its own
/// is a row of its own).
pub const ROW_BYTES: usize = 64 << 10;
/// Rows read at a time (a row may hold up to [`ROW_BYTES`]).
const ROWS_PER_READ: usize = 64;
/// Most entries one `list_entries` call returns.
pub const MAX_LIST: u32 = 1000;

/// Capacity and accounting of a queue.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueHeader {
    /// Bytes of entries plus reservations the queue may hold.
    pub capacity_bytes: u64,
    /// Sum of the lengths of committed, not yet removed entries.
    pub committed_bytes: u64,
    /// Number of committed, not yet removed entries.
    pub committed_entries: u64,
    /// Sum of live reservations' bytes.
    pub reserved_bytes: u64,
    /// Sum of live reservations' entry counts.
    pub reserved_entries: u64,
    /// Number of live reservations.
    pub reservations: u64,
    /// Id of the next reservation.
    pub next_reservation: u64,
    /// Marker of the next committed entry.
    pub next_entry: u64,
}

/// A reservation: space promised to one producer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    /// Bytes reserved.
    pub bytes: u64,
    /// Entries reserved.
    pub entries: u64,
    /// When it was made, ns since the epoch.
    pub timestamp_ns: u64,
    /// Opaque data the producer attached (e.g. the event to commit if it dies).
    pub info: Bytes,
}

/// Input of `init`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InitRequest {
    /// Queue capacity in bytes.
    pub capacity_bytes: u64,
}

/// Input of `reserve`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReserveRequest {
    /// Bytes to reserve (at least 1).
    pub bytes: u64,
    /// Entries to reserve (at least 1).
    pub entries: u64,
    /// Opaque data stored with the reservation.
    pub info: Bytes,
}

/// Output of `reserve`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReserveReply {
    /// The reservation id to commit or abort.
    pub id: u64,
}

/// Input of `commit`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitRequest {
    /// The reservation.
    pub id: u64,
    /// Entries to append; together no larger than reserved.
    pub entries: Vec<Bytes>,
}

/// Input of `abort`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AbortRequest {
    /// The reservation; aborting an unknown one succeeds.
    pub id: u64,
}

/// Input of `list_entries`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListRequest {
    /// List entries after this marker; `None` starts at the head.
    pub after: Option<u64>,
    /// At most this many (capped at [`MAX_LIST`]).
    pub max: u32,
}

/// A committed entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueEntry {
    /// Position in the queue; increases with commit order.
    pub marker: u64,
    /// The entry's bytes.
    pub data: Bytes,
}

/// Output of `list_entries`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListReply {
    /// Entries in marker order.
    pub entries: Vec<QueueEntry>,
    /// More entries follow.
    pub truncated: bool,
}

/// Input of `remove_entries`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveRequest {
    /// Remove every entry with marker `<=` this.
    pub up_to: u64,
}

/// Input of `enqueue`: entries appended without a reservation, as many as fit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnqueueRequest {
    /// Entries in order.
    pub entries: Vec<Bytes>,
}

/// Output of `enqueue`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnqueueReply {
    /// How many of the entries (a prefix) were appended; the rest did not fit.
    pub appended: u64,
}

/// The stored form of a row: consecutive entries, the last one's marker in the key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct RowEntries {
    entries: Vec<Bytes>,
}

/// Output of `list_reservations`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReservationList {
    /// Live reservations by id.
    pub reservations: Vec<(u64, Reservation)>,
}

/// Input of `expire_reservations`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpireRequest {
    /// Abort reservations made before this time (ns since the epoch).
    pub older_than_ns: u64,
}

/// Output of `expire_reservations`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpireReply {
    /// How many were aborted.
    pub expired: u64,
}

versioned_v1! {
    QueueHeader => "2pc_queue header",
    Reservation => "2pc_queue reservation",
    InitRequest => "2pc_queue.init input",
    ReserveRequest => "2pc_queue.reserve input",
    ReserveReply => "2pc_queue.reserve output",
    CommitRequest => "2pc_queue.commit input",
    AbortRequest => "2pc_queue.abort input",
    ListRequest => "2pc_queue.list_entries input",
    ListReply => "2pc_queue.list_entries output",
    RemoveRequest => "2pc_queue.remove_entries input",
    ReservationList => "2pc_queue.list_reservations output",
    EnqueueRequest => "2pc_queue.enqueue input",
    EnqueueReply => "2pc_queue.enqueue output",
    ExpireRequest => "2pc_queue.expire_reservations input",
    ExpireReply => "2pc_queue.expire_reservations output",
    RowEntries => "2pc_queue row",
}

/// Registers the class's methods.
pub fn register(r: &mut ClassRegistry) {
    r.register(CLASS, "init", MethodFlags::RDWR, init);
    r.register(CLASS, "reserve", MethodFlags::RDWR, reserve);
    r.register(CLASS, "commit", MethodFlags::RDWR, commit);
    r.register(CLASS, "abort", MethodFlags::RDWR, abort);
    r.register(CLASS, "enqueue", MethodFlags::RDWR, enqueue);
    r.register(CLASS, "list_entries", MethodFlags::RD, list_entries);
    r.register(CLASS, "remove_entries", MethodFlags::RDWR, remove_entries);
    r.register(CLASS, "get_capacity", MethodFlags::RD, get_capacity);
    r.register(CLASS, "list_reservations", MethodFlags::RD, list_reservations);
    r.register(CLASS, "expire_reservations", MethodFlags::RDWR, expire_reservations);
}

fn key(kind: u8, n: u64) -> Bytes {
    let mut k = Vec::with_capacity(9);
    k.push(kind);
    k.extend_from_slice(&n.to_be_bytes());
    Bytes::from(k)
}

fn key_number(k: &[u8]) -> Result<u64> {
    k.get(1..9)
        .and_then(|s| <[u8; 8]>::try_from(s).ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| err::io(format!("corrupt 2pc_queue key {k:02x?}")))
}

fn load(ctx: &mut MethodContext<'_>) -> Result<QueueHeader> {
    if let Some(h) = ctx.cached::<QueueHeader>(CLASS) {
        return Ok((*h).clone());
    }
    if !ctx.object.exists()? {
        return Err(err::not_found("2pc_queue is not initialized (no such object)"));
    }
    let bytes = ctx.object.omap_get_header()?;
    if bytes.is_empty() {
        return Err(err::not_found("2pc_queue is not initialized"));
    }
    let header: QueueHeader = decode_stored("2pc_queue header", &bytes)?;
    ctx.object.stage_state(CLASS, Arc::new(header.clone()));
    Ok(header)
}

fn save(ctx: &mut MethodContext<'_>, header: QueueHeader) -> Result<()> {
    ctx.object.omap_set_header(Bytes::from(header.encode()))?;
    ctx.object.stage_state(CLASS, Arc::new(header));
    Ok(())
}

fn init(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let req: InitRequest = decode_input("2pc_queue.init", input)?;
    if req.capacity_bytes == 0 {
        return Err(err::invalid("2pc_queue.init: capacity must be positive"));
    }
    if ctx.object.exists()? && !ctx.object.omap_get_header()?.is_empty() {
        return Err(err::exists("2pc_queue is already initialized"));
    }
    save(ctx, QueueHeader { capacity_bytes: req.capacity_bytes, ..QueueHeader::default() })?;
    Ok(Vec::new())
}

fn reserve(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let req: ReserveRequest = decode_input("2pc_queue.reserve", input)?;
    if req.bytes == 0 || req.entries == 0 {
        return Err(err::invalid("2pc_queue.reserve: bytes and entries must be positive"));
    }
    let mut h = load(ctx)?;
    let used = h.committed_bytes + h.reserved_bytes;
    if used.saturating_add(req.bytes) > h.capacity_bytes {
        return Err(err::no_space(format!(
            "2pc_queue full: {} of {} bytes used, {} more requested",
            used, h.capacity_bytes, req.bytes
        )));
    }
    let id = h.next_reservation;
    let r = Reservation { bytes: req.bytes, entries: req.entries, timestamp_ns: ctx.now_ns, info: req.info };
    ctx.object.omap_set(vec![(key(RESERVATION, id), Bytes::from(r.encode()))])?;
    h.next_reservation += 1;
    h.reserved_bytes += r.bytes;
    h.reserved_entries += r.entries;
    h.reservations += 1;
    save(ctx, h)?;
    Ok(ReserveReply { id }.encode())
}

fn take_reservation(ctx: &mut MethodContext<'_>, h: &mut QueueHeader, id: u64) -> Result<Option<Reservation>> {
    let k = key(RESERVATION, id);
    let Some(bytes) = ctx.object.omap_get(&k)? else { return Ok(None) };
    let r: Reservation = decode_stored("2pc_queue reservation", &bytes)?;
    ctx.object.omap_rm_keys(&[k])?;
    h.reserved_bytes -= r.bytes;
    h.reserved_entries -= r.entries;
    h.reservations -= 1;
    Ok(Some(r))
}

fn commit(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let req: CommitRequest = decode_input("2pc_queue.commit", input)?;
    let mut h = load(ctx)?;
    let r = take_reservation(ctx, &mut h, req.id)?
        .ok_or_else(|| err::not_found(format!("2pc_queue.commit: no reservation {}", req.id)))?;
    let bytes = total_len(&req.entries);
    if bytes > r.bytes || req.entries.len() as u64 > r.entries {
        return Err(err::too_big(format!(
            "2pc_queue.commit: {} entries of {} bytes exceed reservation {} ({} entries, {} bytes)",
            req.entries.len(),
            bytes,
            req.id,
            r.entries,
            r.bytes
        )));
    }
    append(ctx, &mut h, req.entries)?;
    save(ctx, h)?;
    Ok(Vec::new())
}

/// Appends committed entries to the queue's tail, in as few rows as the row limits allow.
fn append(ctx: &mut MethodContext<'_>, h: &mut QueueHeader, entries: Vec<Bytes>) -> Result<()> {
    let mut rows = Vec::new();
    let mut row: Vec<Bytes> = Vec::new();
    let mut row_bytes = 0;
    for data in entries {
        if row.len() == ROW_ENTRIES || (!row.is_empty() && row_bytes + data.len() > ROW_BYTES) {
            rows.push(Row::stored(h.next_entry - 1, std::mem::take(&mut row)));
            row_bytes = 0;
        }
        h.committed_bytes += data.len() as u64;
        h.committed_entries += 1;
        h.next_entry += 1;
        row_bytes += data.len();
        row.push(data);
    }
    if !row.is_empty() {
        rows.push(Row::stored(h.next_entry - 1, row));
    }
    ctx.object.omap_set(rows)
}

/// Bytes of `entries`, as the accounting counts them.
fn total_len(entries: &[Bytes]) -> u64 {
    entries.iter().map(|e| e.len() as u64).sum()
}

/// Consecutive committed entries under one omap key: a row, or a single entry of the
/// layout before rows.
struct Row {
    key: Bytes,
    first: u64,
    entries: Vec<Bytes>,
}

impl Row {
    /// The omap key and value of a row whose last entry has marker `last`.
    fn stored(last: u64, entries: Vec<Bytes>) -> (Bytes, Bytes) {
        (key(ROW, last), Bytes::from(RowEntries { entries }.encode()))
    }

    fn read(key: Bytes, value: Bytes) -> Result<Row> {
        let number = key_number(&key)?;
        if key.first() == Some(&ENTRY) {
            return Ok(Row { key, first: number, entries: vec![value] });
        }
        let RowEntries { entries } = decode_stored("2pc_queue row", &value)?;
        let first = number
            .checked_add(1)
            .and_then(|end| end.checked_sub(entries.len() as u64))
            .filter(|_| !entries.is_empty())
            .ok_or_else(|| err::io(format!("corrupt 2pc_queue row {key:02x?}: {} entries", entries.len())))?;
        Ok(Row { key, first, entries })
    }

    fn last(&self) -> u64 {
        self.first + self.entries.len() as u64 - 1
    }

    /// Entries with their markers.
    fn markers(self) -> impl Iterator<Item = (u64, Bytes)> {
        (self.first..).zip(self.entries)
    }
}

/// Up to `max` rows (single entries first) holding markers after `after` (all if `None`),
/// in marker order, and whether more follow.
fn rows_after(ctx: &mut MethodContext<'_>, after: Option<u64>, max: usize) -> Result<(Vec<Row>, bool)> {
    let mut rows = Vec::new();
    let mut more = false;
    for kind in [ENTRY, ROW] {
        let start_after = match after {
            Some(m) => key(kind, m),
            None => Bytes::copy_from_slice(&[kind]),
        };
        let wanted = max - rows.len();
        let (found, truncated) = ctx.object.omap_get_vals(&start_after, &[kind], wanted.max(1))?;
        if wanted == 0 {
            more = !found.is_empty();
            break;
        }
        more = truncated;
        for (k, v) in found {
            rows.push(Row::read(k, v)?);
        }
        if more {
            break;
        }
    }
    Ok((rows, more))
}

fn enqueue(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let req: EnqueueRequest = decode_input("2pc_queue.enqueue", input)?;
    let mut h = load(ctx)?;
    let mut room = h.capacity_bytes.saturating_sub(h.committed_bytes + h.reserved_bytes);
    let fitting = req
        .entries
        .iter()
        .take_while(|e| {
            let fits = e.len() as u64 <= room;
            room = room.saturating_sub(e.len() as u64);
            fits
        })
        .count();
    if fitting > 0 {
        append(ctx, &mut h, req.entries.into_iter().take(fitting).collect())?;
        save(ctx, h)?;
    }
    Ok(EnqueueReply { appended: fitting as u64 }.encode())
}

fn abort(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let req: AbortRequest = decode_input("2pc_queue.abort", input)?;
    let mut h = load(ctx)?;
    if take_reservation(ctx, &mut h, req.id)?.is_some() {
        save(ctx, h)?;
    }
    Ok(Vec::new())
}

fn list_entries(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let req: ListRequest = decode_input("2pc_queue.list_entries", input)?;
    load(ctx)?;
    let max = req.max.clamp(1, MAX_LIST) as usize;
    let mut entries = Vec::new();
    let mut after = req.after;
    loop {
        // Every row holds an entry after `after`: never read more rows than entries wanted.
        let wanted = (max - entries.len()).min(ROWS_PER_READ);
        let (rows, more) = rows_after(ctx, after, wanted)?;
        for row in rows {
            after = Some(row.last());
            for (marker, data) in row.markers().filter(|(m, _)| req.after.is_none_or(|a| *m > a)) {
                if entries.len() == max {
                    return Ok(ListReply { entries, truncated: true }.encode());
                }
                entries.push(QueueEntry { marker, data });
            }
        }
        if !more || entries.len() == max {
            return Ok(ListReply { entries, truncated: more }.encode());
        }
    }
}

fn remove_entries(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let req: RemoveRequest = decode_input("2pc_queue.remove_entries", input)?;
    let mut h = load(ctx)?;
    let (mut bytes, mut count) = (0u64, 0u64);
    // Rows wholly removed are the keys before `end`: the first row that keeps an entry,
    // rewritten without the removed ones, or the end of the entries.
    let mut end = Bytes::from_static(&[ROW + 1]);
    let mut after = None;
    'scan: loop {
        let (rows, more) = rows_after(ctx, after, ROWS_PER_READ)?;
        for row in rows {
            after = Some(row.last());
            if row.last() <= req.up_to {
                bytes += total_len(&row.entries);
                count += row.entries.len() as u64;
                continue;
            }
            end = row.key.clone();
            if row.first <= req.up_to {
                let last = row.last();
                let mut gone = row.entries;
                let kept = gone.split_off((req.up_to + 1 - row.first) as usize);
                bytes += total_len(&gone);
                count += gone.len() as u64;
                ctx.object.omap_set(vec![Row::stored(last, kept)])?;
            }
            break 'scan;
        }
        if !more {
            break;
        }
    }
    if count > 0 {
        ctx.object.omap_rm_range(&[ENTRY], &end)?;
        h.committed_bytes -= bytes;
        h.committed_entries -= count;
        save(ctx, h)?;
    }
    Ok(Vec::new())
}

fn get_capacity(ctx: &mut MethodContext<'_>, _input: &[u8]) -> Result<Vec<u8>> {
    Ok(load(ctx)?.encode())
}

fn reservations(ctx: &mut MethodContext<'_>) -> Result<Vec<(u64, Reservation)>> {
    let mut out = Vec::new();
    let mut after = Bytes::from_static(&[RESERVATION]);
    loop {
        let (rows, more) = ctx.object.omap_get_vals(&after, &[RESERVATION], MAX_LIST as usize)?;
        for (k, v) in &rows {
            out.push((key_number(k)?, decode_stored("2pc_queue reservation", v)?));
        }
        match rows.last() {
            Some((k, _)) if more => after = k.clone(),
            _ => return Ok(out),
        }
    }
}

fn list_reservations(ctx: &mut MethodContext<'_>, _input: &[u8]) -> Result<Vec<u8>> {
    load(ctx)?;
    Ok(ReservationList { reservations: reservations(ctx)? }.encode())
}

fn expire_reservations(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let req: ExpireRequest = decode_input("2pc_queue.expire_reservations", input)?;
    let mut h = load(ctx)?;
    let mut expired = 0;
    for (id, r) in reservations(ctx)? {
        if r.timestamp_ns < req.older_than_ns {
            take_reservation(ctx, &mut h, id)?;
            expired += 1;
        }
    }
    if expired > 0 {
        save(ctx, h)?;
    }
    Ok(ExpireReply { expired }.encode())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MemObject;
    use proptest::prelude::*;
    use shoal_types::Errno;

    fn call<T: Versioned>(o: &mut MemObject, method: &str, now: u64, input: &T) -> Result<Vec<u8>> {
        o.call(CLASS, method, 1, now, &input.encode())
    }

    fn header(o: &mut MemObject) -> QueueHeader {
        QueueHeader::decode(&o.call(CLASS, "get_capacity", 1, 0, &[]).unwrap()).unwrap()
    }

    fn reserve_id(o: &mut MemObject, bytes: u64, entries: u64, now: u64) -> Result<u64> {
        let out = call(o, "reserve", now, &ReserveRequest { bytes, entries, info: Bytes::new() })?;
        Ok(ReserveReply::decode(&out).unwrap().id)
    }

    #[test]
    fn reserve_commit_list_remove() {
        let mut o = MemObject::default();
        assert_eq!(reserve_id(&mut o, 1, 1, 0).unwrap_err().errno, Errno::NotFound, "uninitialized");
        call(&mut o, "init", 0, &InitRequest { capacity_bytes: 100 }).unwrap();
        assert_eq!(call(&mut o, "init", 0, &InitRequest { capacity_bytes: 100 }).unwrap_err().errno, Errno::Exists);
        let a = reserve_id(&mut o, 60, 2, 0).unwrap();
        assert_eq!(reserve_id(&mut o, 41, 1, 0).unwrap_err().errno, Errno::NoSpace, "full");
        let b = reserve_id(&mut o, 40, 1, 0).unwrap();
        let too_big = CommitRequest { id: b, entries: vec![Bytes::from(vec![0; 41])] };
        assert_eq!(call(&mut o, "commit", 0, &too_big).unwrap_err().errno, Errno::TooBig);
        call(
            &mut o,
            "commit",
            0,
            &CommitRequest { id: a, entries: vec![Bytes::from_static(b"one"), Bytes::from_static(b"two")] },
        )
        .unwrap();
        let unknown = CommitRequest { id: a, entries: vec![] };
        assert_eq!(call(&mut o, "commit", 0, &unknown).unwrap_err().errno, Errno::NotFound, "committed twice");
        call(&mut o, "commit", 0, &CommitRequest { id: b, entries: vec![Bytes::from_static(b"three")] }).unwrap();
        let h = header(&mut o);
        assert_eq!((h.committed_bytes, h.committed_entries, h.reserved_bytes), (11, 3, 0));
        let page =
            ListReply::decode(&call(&mut o, "list_entries", 0, &ListRequest { after: None, max: 2 }).unwrap()).unwrap();
        assert!(page.truncated);
        assert_eq!(page.entries.iter().map(|e| e.data.as_ref()).collect::<Vec<_>>(), vec![&b"one"[..], b"two"]);
        let rest = ListReply::decode(
            &call(&mut o, "list_entries", 0, &ListRequest { after: Some(page.entries[1].marker), max: 2 }).unwrap(),
        )
        .unwrap();
        assert!(!rest.truncated);
        assert_eq!(rest.entries[0].data.as_ref(), b"three");
        call(&mut o, "remove_entries", 0, &RemoveRequest { up_to: page.entries[1].marker }).unwrap();
        assert_eq!((header(&mut o).committed_bytes, header(&mut o).committed_entries), (5, 1));
        call(&mut o, "remove_entries", 0, &RemoveRequest { up_to: u64::MAX }).unwrap();
        assert_eq!(
            header(&mut o),
            QueueHeader { capacity_bytes: 100, next_reservation: 2, next_entry: 3, ..QueueHeader::default() }
        );
    }

    #[test]
    fn abort_is_idempotent_and_expiry_frees_space() {
        let mut o = MemObject::default();
        call(&mut o, "init", 0, &InitRequest { capacity_bytes: 10 }).unwrap();
        let a = reserve_id(&mut o, 5, 1, 100).unwrap();
        call(&mut o, "abort", 0, &AbortRequest { id: a }).unwrap();
        call(&mut o, "abort", 0, &AbortRequest { id: a }).unwrap();
        assert_eq!(header(&mut o).reserved_bytes, 0);
        reserve_id(&mut o, 5, 1, 100).unwrap();
        reserve_id(&mut o, 5, 1, 200).unwrap();
        let list = ReservationList::decode(&o.call(CLASS, "list_reservations", 1, 0, &[]).unwrap()).unwrap();
        assert_eq!(list.reservations.len(), 2);
        let out = ExpireReply::decode(
            &call(&mut o, "expire_reservations", 0, &ExpireRequest { older_than_ns: 150 }).unwrap(),
        )
        .unwrap();
        assert_eq!(out.expired, 1);
        let h = header(&mut o);
        assert_eq!((h.reserved_bytes, h.reservations), (5, 1));
    }

    #[derive(Debug, Clone)]
    enum Action {
        Reserve(u64, u64),
        Commit(usize, Vec<u8>),
        Abort(usize),
        Remove(usize),
        Expire(u64),
        Enqueue(Vec<u8>),
    }

    fn action() -> impl Strategy<Value = Action> {
        prop_oneof![
            (1u64..40, 1u64..4).prop_map(|(b, e)| Action::Reserve(b, e)),
            (0usize..8, proptest::collection::vec(0u8..30, 0..4)).prop_map(|(i, lens)| Action::Commit(i, lens)),
            (0usize..8).prop_map(Action::Abort),
            (0usize..8).prop_map(Action::Remove),
            (0u64..50).prop_map(Action::Expire),
            proptest::collection::vec(0u8..30, 0..4).prop_map(Action::Enqueue),
        ]
    }

    /// Every entry the queue lists, paging `page` at a time.
    fn list_all(o: &mut MemObject, mut after: Option<u64>, page: u32) -> Vec<(u64, Bytes)> {
        let mut out = Vec::new();
        loop {
            let reply =
                ListReply::decode(&call(o, "list_entries", 0, &ListRequest { after, max: page }).unwrap()).unwrap();
            assert!(reply.entries.len() <= page as usize);
            out.extend(reply.entries.iter().map(|e| (e.marker, e.data.clone())));
            after = reply.entries.last().map(|e| e.marker).or(after);
            if !reply.truncated {
                return out;
            }
            assert!(!reply.entries.is_empty(), "truncated but empty");
        }
    }

    /// A queue written before rows existed: `n` single entries `e<marker>`.
    fn legacy_queue(n: u8) -> MemObject {
        let mut o = MemObject::default();
        o.exists = true;
        let mut h = QueueHeader { capacity_bytes: 100_000, ..QueueHeader::default() };
        for m in 0..u64::from(n) {
            let data = Bytes::from(vec![m as u8; 3]);
            h.committed_bytes += data.len() as u64;
            h.committed_entries += 1;
            o.omap.insert(key(ENTRY, m), data);
        }
        h.next_entry = u64::from(n);
        o.header = Bytes::from(h.encode());
        o
    }

    #[test]
    fn a_batch_is_one_row_within_the_limits() {
        let mut o = MemObject::default();
        call(&mut o, "init", 0, &InitRequest { capacity_bytes: 10 << 20 }).unwrap();
        let entries: Vec<Bytes> = (0..ROW_ENTRIES as u32 + 10).map(|i| Bytes::from(i.to_be_bytes().to_vec())).collect();
        call(&mut o, "enqueue", 0, &EnqueueRequest { entries: entries.clone() }).unwrap();
        let keys: Vec<u64> = o.omap.keys().map(|k| key_number(k).unwrap()).collect();
        assert_eq!(keys, vec![ROW_ENTRIES as u64 - 1, ROW_ENTRIES as u64 + 9], "rows keyed by their last marker");
        let big = vec![Bytes::from(vec![1; ROW_BYTES]), Bytes::from_static(b"x"), Bytes::from_static(b"y")];
        call(&mut o, "enqueue", 0, &EnqueueRequest { entries: big }).unwrap();
        assert_eq!(o.omap.len(), 4, "a row takes no entry that would make it exceed ROW_BYTES");
        let listed = list_all(&mut o, None, 100);
        assert_eq!(listed.len(), entries.len() + 3);
        assert!(listed.iter().zip(&entries).all(|((_, a), b)| a == b));
    }

    #[derive(Debug, Clone)]
    enum Step {
        Enqueue(Vec<u8>),
        Remove(usize),
        List(usize, u32),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            3 => proptest::collection::vec(0u8..30, 0..300).prop_map(Step::Enqueue),
            1 => (0usize..400).prop_map(Step::Remove),
            1 => (0usize..400, 1u32..40).prop_map(|(i, p)| Step::List(i, p)),
        ]
    }

    proptest! {
        /// Whatever was appended in whatever batches, to a queue of rows or of older
        /// single entries: the queue lists exactly the entries not removed, in order with
        /// their markers, from any marker and in pages of any size; removal counts
        /// exactly what it removes.
        #[test]
        fn rows_list_and_remove_like_a_plain_queue(legacy in 0u8..5, steps in proptest::collection::vec(step(), 1..20)) {
            let mut o = legacy_queue(legacy);
            let mut model: Vec<(u64, Bytes)> = (0..u64::from(legacy)).map(|m| (m, Bytes::from(vec![m as u8; 3]))).collect();
            let mut next = u64::from(legacy);
            for s in steps {
                match s {
                    Step::Enqueue(lens) => {
                        let entries: Vec<Bytes> = lens.iter().enumerate().map(|(i, &n)| Bytes::from(vec![i as u8; n as usize])).collect();
                        let out = EnqueueReply::decode(&call(&mut o, "enqueue", 0, &EnqueueRequest { entries: entries.clone() }).unwrap()).unwrap();
                        prop_assert_eq!(out.appended as usize, entries.len());
                        for e in entries {
                            model.push((next, e));
                            next += 1;
                        }
                    }
                    Step::Remove(i) => {
                        let up_to = model.get(i).map_or(next + 3, |(m, _)| *m);
                        call(&mut o, "remove_entries", 0, &RemoveRequest { up_to }).unwrap();
                        model.retain(|(m, _)| *m > up_to);
                    }
                    Step::List(i, page) => {
                        let after = model.get(i).map(|(m, _)| *m);
                        let expected: Vec<_> = model.iter().filter(|(m, _)| after.is_none_or(|a| *m > a)).cloned().collect();
                        prop_assert_eq!(list_all(&mut o, after, page), expected);
                    }
                }
                let h = header(&mut o);
                prop_assert_eq!(h.committed_entries, model.len() as u64);
                prop_assert_eq!(h.committed_bytes, total_len(&model.iter().map(|(_, e)| e.clone()).collect::<Vec<_>>()));
                prop_assert_eq!(list_all(&mut o, None, 1000), model.clone());
            }
        }

        /// Ceph shipped an accounting leak here: after any mix of calls, draining every
        /// reservation and entry must bring the counters back to exactly zero.
        #[test]
        fn accounting_returns_to_zero(actions in proptest::collection::vec(action(), 1..60)) {
            let mut o = MemObject::default();
            call(&mut o, "init", 0, &InitRequest { capacity_bytes: 200 }).unwrap();
            let mut ids: Vec<u64> = Vec::new();
            for (t, a) in actions.into_iter().enumerate() {
                let now = t as u64;
                match a {
                    Action::Reserve(b, e) => if let Ok(id) = reserve_id(&mut o, b, e, now) { ids.push(id) },
                    Action::Commit(i, lens) => if let Some(&id) = ids.get(i) {
                        let entries = lens.iter().map(|&n| Bytes::from(vec![7u8; n as usize])).collect();
                        let _ = call(&mut o, "commit", now, &CommitRequest { id, entries });
                    },
                    Action::Abort(i) => if let Some(&id) = ids.get(i) { call(&mut o, "abort", now, &AbortRequest { id }).unwrap(); },
                    Action::Remove(i) => {
                        let page = ListReply::decode(&call(&mut o, "list_entries", now, &ListRequest { after: None, max: 100 }).unwrap()).unwrap();
                        if let Some(m) = page.entries.get(i).map(|e| e.marker) { call(&mut o, "remove_entries", now, &RemoveRequest { up_to: m }).unwrap(); }
                    }
                    Action::Expire(t) => { call(&mut o, "expire_reservations", now, &ExpireRequest { older_than_ns: t }).unwrap(); }
                    Action::Enqueue(lens) => {
                        let before = header(&mut o);
                        let entries: Vec<Bytes> = lens.iter().map(|&n| Bytes::from(vec![7u8; n as usize])).collect();
                        let out = EnqueueReply::decode(&call(&mut o, "enqueue", now, &EnqueueRequest { entries: entries.clone() }).unwrap()).unwrap();
                        let n = out.appended as usize;
                        let added = total_len(&entries[..n]);
                        let after = header(&mut o);
                        prop_assert_eq!(after.committed_bytes, before.committed_bytes + added);
                        let room = before.capacity_bytes - before.committed_bytes - before.reserved_bytes;
                        // Appends stop only at the first entry that does not fit.
                        prop_assert!(n == entries.len() || added + entries[n].len() as u64 > room);
                    }
                }
                let h = header(&mut o);
                prop_assert!(h.committed_bytes + h.reserved_bytes <= h.capacity_bytes, "{:?}", h);
            }
            call(&mut o, "expire_reservations", 0, &ExpireRequest { older_than_ns: u64::MAX }).unwrap();
            call(&mut o, "remove_entries", 0, &RemoveRequest { up_to: u64::MAX }).unwrap();
            let h = header(&mut o);
            prop_assert_eq!((h.committed_bytes, h.committed_entries, h.reserved_bytes, h.reserved_entries, h.reservations), (0, 0, 0, 0, 0));
            prop_assert!(o.omap.is_empty(), "leftover keys: {:?}", o.omap.keys().collect::<Vec<_>>());
        }
    }
}
