//! One object as a running operation sees it: its committed state ([`Committed`]: the
//! local store's copy, for a replicated PG) plus the operation's staged changes. Reads
//! merge both; nothing reaches the store until [`ObjectView::into_transaction`] turns the
//! staged changes into one transaction.

use bytes::Bytes;
use shoal_objclass::{ClassState, ObjectAccess};
use shoal_store::{ObjectKey, ObjectStore, Onode, Transaction};
use shoal_types::{ObjectStat, Result, err};
use std::collections::BTreeMap;

use crate::limits::Limits;

/// Where an operation's object keeps its committed state.
pub trait Committed {
    /// Bytes per data chunk.
    fn chunk_size(&self) -> u64;
    /// The committed metadata, if the object exists.
    fn onode(&self) -> Result<Option<Onode>>;
    /// The committed chunks in `first..end` that hold data.
    fn chunks(&self, first: u32, end: u32) -> Result<Vec<(u32, Bytes)>>;
    /// The same data as runs of adjacent chunks, as they are kept (fewer, larger buffers).
    fn runs(&self, first: u32, end: u32) -> Result<Vec<(u32, Bytes)>> {
        self.chunks(first, end)
    }
    /// A committed omap value.
    fn omap_get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Up to `max` committed omap entries from `from` on (after it if `exclusive`).
    fn omap_scan(&self, from: &[u8], exclusive: bool, max: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;
}

/// An object's copy in the local store.
pub struct StoreObject<'a> {
    store: &'a ObjectStore,
    key: ObjectKey,
}

impl<'a> StoreObject<'a> {
    /// The copy of `key` in `store`.
    pub fn new(store: &'a ObjectStore, key: ObjectKey) -> Self {
        StoreObject { store, key }
    }
}

impl Committed for StoreObject<'_> {
    fn chunk_size(&self) -> u64 {
        u64::from(self.store.chunk_size())
    }

    fn onode(&self) -> Result<Option<Onode>> {
        self.store.onode(&self.key)
    }

    fn chunks(&self, first: u32, end: u32) -> Result<Vec<(u32, Bytes)>> {
        self.store.chunks(&self.key, first, end)
    }

    fn runs(&self, first: u32, end: u32) -> Result<Vec<(u32, Bytes)>> {
        self.store.runs(&self.key, first, end)
    }

    fn omap_get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.store.omap_get(&self.key, key)
    }

    fn omap_scan(&self, from: &[u8], exclusive: bool, max: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.store.omap_scan(&self.key, from, exclusive, max)
    }
}

/// An operation's staged changes to one object, for a primary that lowers them to store
/// transactions itself (an erasure-coded PG's: [`crate::ec::shard_transactions`]).
pub struct Staged {
    /// The committed metadata when the operation started.
    pub base: Option<Onode>,
    /// The metadata after it, with its version and mtime; `None`: removed.
    pub current: Option<Onode>,
    /// The committed data is gone (the object was removed, maybe recreated).
    pub wiped: bool,
    /// Changed chunks, whole; `None`: a hole.
    pub chunks: BTreeMap<u32, Option<Vec<u8>>>,
    /// Committed chunks from this index on are gone.
    pub chunk_cut: Option<u32>,
    /// The omap or its header changed.
    pub omap_changed: bool,
    /// Class states to publish once the change commits.
    pub states: BTreeMap<String, ClassState>,
}

/// The staged state of one object during one operation.
pub struct ObjectView<'a> {
    committed: &'a dyn Committed,
    limits: &'a Limits,
    key: ObjectKey,
    chunk_size: u64,
    /// The object's committed metadata, if it existed when the operation started.
    base: Option<Onode>,
    /// The object's metadata as the operation has left it so far; `None` = absent.
    current: Option<Onode>,
    /// The committed data and omap are gone (the object was removed, maybe recreated).
    wiped: bool,
    /// Staged data chunks; `None` is a hole.
    chunks: BTreeMap<u32, Option<Vec<u8>>>,
    /// Committed chunks at or after this index are gone (truncated away).
    chunk_cut: Option<u32>,
    /// Staged omap entries; `None` is a deletion.
    omap: BTreeMap<Bytes, Option<Bytes>>,
    /// Committed omap entries are gone.
    omap_cleared: bool,
    /// Committed omap ranges `[start, end)` that are gone.
    omap_removed_ranges: Vec<(Bytes, Bytes)>,
    /// Number of changes staged; 0 means the operation is read-only.
    changes: u64,
    committed_states: BTreeMap<String, ClassState>,
    staged_states: BTreeMap<String, ClassState>,
}

impl<'a> ObjectView<'a> {
    /// Loads the committed metadata of the object `key`; `cached_states` returns the class
    /// state cached for the object if it is valid at the given committed version.
    pub fn load(
        committed: &'a dyn Committed,
        limits: &'a Limits,
        key: ObjectKey,
        cached_states: impl FnOnce(u64) -> BTreeMap<String, ClassState>,
    ) -> Result<Self> {
        let base = committed.onode()?;
        let states = cached_states(base.as_ref().map_or(0, |o| o.version));
        Ok(ObjectView {
            committed,
            limits,
            chunk_size: committed.chunk_size(),
            current: base.clone(),
            base,
            key,
            wiped: false,
            chunks: BTreeMap::new(),
            chunk_cut: None,
            omap: BTreeMap::new(),
            omap_cleared: false,
            omap_removed_ranges: Vec::new(),
            changes: 0,
            committed_states: states,
            staged_states: BTreeMap::new(),
        })
    }

    /// The object's committed user version, 0 if it did not exist.
    pub fn base_version(&self) -> u64 {
        self.base.as_ref().map_or(0, |o| o.version)
    }

    /// What the staged changes do to the PG's object and byte counts.
    pub fn usage_delta(&self) -> crate::usage::UsageDelta {
        crate::usage::UsageDelta::between(self.base.as_ref(), self.current.as_ref())
    }

    /// How many changes were staged so far.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// The current (staged) metadata, or ENOENT.
    fn onode(&self) -> Result<&Onode> {
        self.current.as_ref().ok_or_else(|| err::not_found("no such object"))
    }

    /// Makes the object exist (writes create it) and counts a change.
    fn onode_mut(&mut self) -> &mut Onode {
        self.changes += 1;
        self.current.get_or_insert_with(Onode::default)
    }

    fn store_has_chunk(&self, index: u32) -> bool {
        !self.wiped && self.chunk_cut.is_none_or(|cut| index < cut)
    }

    /// Current contents of chunks `first..=last` (absent = hole).
    fn load_chunks(&self, first: u32, last: u32) -> Result<BTreeMap<u32, Bytes>> {
        let mut out = BTreeMap::new();
        if self.base.is_some() && (first..=last).any(|i| !self.chunks.contains_key(&i) && self.store_has_chunk(i)) {
            for (i, data) in self.committed.chunks(first, last.saturating_add(1))? {
                if self.store_has_chunk(i) {
                    out.insert(i, data);
                }
            }
        }
        for (&i, staged) in self.chunks.range(first..=last) {
            match staged {
                Some(data) => out.insert(i, Bytes::copy_from_slice(data)),
                None => out.remove(&i),
            };
        }
        Ok(out)
    }

    fn chunk_index(&self, offset: u64) -> Result<u32> {
        u32::try_from(offset / self.chunk_size).map_err(|_| err::file_too_big(format!("offset {offset} is too large")))
    }

    fn check_size(&self, end: u64) -> Result<()> {
        if end > self.limits.max_object_size {
            return Err(err::file_too_big(format!(
                "object would grow to {end} bytes; osd_max_object_size is {}",
                self.limits.max_object_size
            )));
        }
        Ok(())
    }

    fn check_write(&self, offset: u64, len: usize) -> Result<u64> {
        if len as u64 > self.limits.max_write_size {
            return Err(err::too_big(format!(
                "write of {len} bytes exceeds osd_max_write_size {}",
                self.limits.max_write_size
            )));
        }
        let end = offset.checked_add(len as u64).ok_or_else(|| err::invalid("offset + length overflows"))?;
        self.check_size(end)?;
        Ok(end)
    }

    /// Appends at the current end of the object.
    pub fn append(&mut self, data: &[u8]) -> Result<()> {
        let size = self.current.as_ref().map_or(0, |o| o.size);
        self.write(size, data)
    }

    /// Zeroes `[offset, offset + length)` within the current size.
    pub fn zero(&mut self, offset: u64, length: u64) -> Result<()> {
        let size = self.onode()?.size;
        let end = offset.saturating_add(length).min(size);
        if offset >= end {
            self.onode_mut();
            return Ok(());
        }
        let (first, last) = (self.chunk_index(offset)?, self.chunk_index(end - 1)?);
        let mut current = self.load_chunks(first, last)?;
        for i in first..=last {
            let chunk_start = u64::from(i) * self.chunk_size;
            let (from, to) =
                (offset.max(chunk_start) - chunk_start, end.min(chunk_start + self.chunk_size) - chunk_start);
            if from == 0 && to == self.chunk_size {
                self.chunks.insert(i, None);
            } else if let Some(data) = current.remove(&i) {
                let mut data = data.to_vec();
                let stop = (to as usize).min(data.len());
                if (from as usize) < stop {
                    data[from as usize..stop].fill(0);
                }
                self.chunks.insert(i, Some(data));
            }
        }
        self.onode_mut();
        Ok(())
    }

    /// Sets the object's mtime and version and returns the transaction that applies every
    /// staged change, with the cached class states to publish once it commits.
    pub fn into_transaction(mut self, version: u64, mtime_ns: u64) -> (Transaction, BTreeMap<String, ClassState>) {
        let mut txn = Transaction::new();
        // Chunks of the stored object all lie before this index.
        let base_chunks = self.base.as_ref().map_or(0, |b| b.size.div_ceil(self.chunk_size) as u32);
        if self.wiped && self.base.is_some() {
            let has_omap = self.committed.omap_scan(&[], false, 1).map_or(true, |rows| !rows.is_empty());
            txn.remove_object_sized(&self.key, base_chunks, has_omap);
        }
        if let Some(mut onode) = self.current.take() {
            onode.version = version;
            onode.mtime_ns = mtime_ns;
            txn.put_onode(&self.key, &onode);
            if !self.wiped {
                if let Some(cut) = self.chunk_cut {
                    txn.delete_chunks_between(&self.key, cut, base_chunks);
                }
                if self.omap_cleared {
                    txn.omap_clear(&self.key);
                }
                for (start, end) in &self.omap_removed_ranges {
                    txn.omap_delete_range(&self.key, start, end);
                }
            }
            for (i, chunk) in std::mem::take(&mut self.chunks) {
                match chunk {
                    Some(data) => txn.put_chunk(&self.key, i, data),
                    None if self.store_has_chunk(i) => txn.delete_chunk(&self.key, i),
                    None => {}
                }
            }
            for (k, v) in std::mem::take(&mut self.omap) {
                match v {
                    Some(v) => txn.omap_put(&self.key, &k, &v),
                    None => txn.omap_delete(&self.key, &k),
                }
            }
        }
        (txn, self.staged_states)
    }

    /// Sets the object's mtime and version and hands over the staged changes.
    pub fn into_staged(mut self, version: u64, mtime_ns: u64) -> Staged {
        let header = |o: &Option<Onode>| o.as_ref().map(|o| o.omap_header.clone()).unwrap_or_default();
        let omap_changed = !self.omap.is_empty()
            || self.omap_cleared
            || !self.omap_removed_ranges.is_empty()
            || (self.current.is_some() && header(&self.current) != header(&self.base));
        if let Some(onode) = &mut self.current {
            onode.version = version;
            onode.mtime_ns = mtime_ns;
        }
        Staged {
            base: self.base,
            current: self.current,
            wiped: self.wiped,
            chunks: self.chunks,
            chunk_cut: self.chunk_cut,
            omap_changed,
            states: self.staged_states,
        }
    }

    /// Removes every omap entry (the header stays).
    pub fn omap_clear(&mut self) -> Result<()> {
        self.onode()?;
        self.changes += 1;
        self.omap.clear();
        self.omap_removed_ranges.clear();
        self.omap_cleared = true;
        Ok(())
    }

    fn omap_hidden(&self, key: &[u8]) -> bool {
        self.wiped
            || self.omap_cleared
            || self.omap_removed_ranges.iter().any(|(s, e)| key >= s.as_ref() && key < e.as_ref())
    }
}

impl ObjectAccess for ObjectView<'_> {
    fn exists(&mut self) -> Result<bool> {
        Ok(self.current.is_some())
    }

    fn stat(&mut self) -> Result<ObjectStat> {
        // The version is the committed one: this operation's own comes at commit.
        let o = self.onode()?;
        Ok(ObjectStat { size: o.size, mtime_ns: o.mtime_ns, version: self.base_version() })
    }

    fn create(&mut self, exclusive: bool) -> Result<()> {
        if exclusive && self.current.is_some() {
            return Err(err::exists("object already exists"));
        }
        self.onode_mut();
        Ok(())
    }

    fn remove(&mut self) -> Result<()> {
        self.onode()?;
        self.current = None;
        self.wiped = true;
        self.chunks.clear();
        self.chunk_cut = None;
        self.omap.clear();
        self.omap_cleared = false;
        self.omap_removed_ranges.clear();
        self.changes += 1;
        Ok(())
    }

    fn read(&mut self, offset: u64, length: u64) -> Result<Bytes> {
        let size = self.onode()?.size;
        if offset >= size {
            return Ok(Bytes::new());
        }
        let end = if length == 0 { size } else { offset.saturating_add(length).min(size) };
        let (first, last) = (self.chunk_index(offset)?, self.chunk_index(end - 1)?);
        let untouched = (first..=last).all(|i| !self.chunks.contains_key(&i) && self.store_has_chunk(i));
        let pieces: Vec<(u32, Bytes)> = if self.base.is_some() && untouched {
            // Only committed data: read it as the store keeps it, in runs.
            self.committed.runs(first, last.saturating_add(1))?
        } else {
            self.load_chunks(first, last)?.into_iter().collect()
        };
        let piece_start = |i: u32| u64::from(i) * self.chunk_size;
        if let [(i, bytes)] = pieces.as_slice()
            && piece_start(*i) <= offset
            && end <= piece_start(*i) + bytes.len() as u64
        {
            // One stored buffer covers the range: hand out a slice of it, not a copy.
            return Ok(bytes.slice((offset - piece_start(*i)) as usize..(end - piece_start(*i)) as usize));
        }
        let mut out = vec![0u8; (end - offset) as usize];
        for (i, data) in pieces {
            let start = piece_start(i);
            let from = offset.max(start);
            let to = end.min(start + data.len() as u64);
            if from < to {
                let src = &data[(from - start) as usize..(to - start) as usize];
                out[(from - offset) as usize..(to - offset) as usize].copy_from_slice(src);
            }
        }
        Ok(Bytes::from(out))
    }

    fn write(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        let end = self.check_write(offset, data.len())?;
        if !data.is_empty() {
            let (first, last) = (self.chunk_index(offset)?, self.chunk_index(end - 1)?);
            let partial = |i: u32| {
                let chunk_start = u64::from(i) * self.chunk_size;
                offset > chunk_start || end < chunk_start + self.chunk_size
            };
            let needs_load: Vec<u32> = [first, last].into_iter().filter(|&i| partial(i)).collect();
            let mut current = match (needs_load.first(), needs_load.last()) {
                (Some(&a), Some(&b)) => self.load_chunks(a, b)?,
                _ => BTreeMap::new(),
            };
            for i in first..=last {
                let chunk_start = u64::from(i) * self.chunk_size;
                let from = (offset.max(chunk_start) - chunk_start) as usize;
                let to = (end.min(chunk_start + self.chunk_size) - chunk_start) as usize;
                let mut chunk = match current.remove(&i) {
                    Some(stored) if partial(i) => stored.to_vec(),
                    _ => Vec::new(),
                };
                if chunk.len() < to {
                    chunk.resize(to, 0);
                }
                let src_start = (chunk_start + from as u64 - offset) as usize;
                chunk[from..to].copy_from_slice(&data[src_start..src_start + (to - from)]);
                self.chunks.insert(i, Some(chunk));
            }
        }
        let onode = self.onode_mut();
        onode.size = onode.size.max(end);
        Ok(())
    }

    fn write_full(&mut self, data: &[u8]) -> Result<()> {
        self.check_write(0, data.len())?;
        self.truncate(0)?;
        self.write(0, data)
    }

    fn truncate(&mut self, size: u64) -> Result<()> {
        self.check_size(size)?;
        let old = self.current.as_ref().map_or(0, |o| o.size);
        if size < old {
            let cut = self.chunk_index(size.div_ceil(self.chunk_size) * self.chunk_size)?;
            let boundary = (!size.is_multiple_of(self.chunk_size)).then(|| self.chunk_index(size)).transpose()?;
            let boundary_data = match boundary {
                Some(i) => self.load_chunks(i, i)?.remove(&i),
                None => None,
            };
            self.chunks.retain(|&i, _| i < cut);
            self.chunk_cut = Some(self.chunk_cut.map_or(cut, |c| c.min(cut)));
            if let (Some(i), Some(data)) = (boundary, boundary_data) {
                let keep = ((size % self.chunk_size) as usize).min(data.len());
                self.chunks.insert(i, Some(data[..keep].to_vec()));
            }
        }
        self.onode_mut().size = size;
        Ok(())
    }

    fn get_xattr(&mut self, name: &str) -> Result<Option<Bytes>> {
        Ok(self.onode()?.xattrs.get(name).cloned())
    }

    fn get_xattrs(&mut self) -> Result<BTreeMap<String, Bytes>> {
        Ok(self.onode()?.xattrs.clone())
    }

    fn set_xattr(&mut self, name: &str, value: Bytes) -> Result<()> {
        self.limits.check_xattr(name, &value)?;
        self.onode_mut().xattrs.insert(name.to_owned(), value);
        Ok(())
    }

    fn rm_xattr(&mut self, name: &str) -> Result<()> {
        if !self.onode()?.xattrs.contains_key(name) {
            return Err(err::no_data(format!("no xattr '{name}'")));
        }
        self.onode_mut().xattrs.remove(name);
        Ok(())
    }

    fn omap_get(&mut self, key: &[u8]) -> Result<Option<Bytes>> {
        self.onode()?;
        if let Some(staged) = self.omap.get(key) {
            return Ok(staged.clone());
        }
        if self.omap_hidden(key) {
            return Ok(None);
        }
        Ok(self.committed.omap_get(key)?.map(Bytes::from))
    }

    fn omap_get_vals(&mut self, start_after: &[u8], prefix: &[u8], max: usize) -> Result<(Vec<(Bytes, Bytes)>, bool)> {
        self.onode()?;
        // Merge the committed entries (in pages) with the staged ones, staged winning.
        let (mut from, mut exclusive) =
            if start_after >= prefix { (start_after.to_vec(), true) } else { (prefix.to_vec(), false) };
        let page = (max + 1).clamp(16, 1024);
        let read_store = self.base.is_some() && !self.wiped && !self.omap_cleared;
        let mut merged: Vec<(Bytes, Bytes)> = Vec::with_capacity(max + 1);
        let in_scope = |k: &[u8]| k > start_after && k.starts_with(prefix);
        let mut store_done = !read_store;
        let mut pending: std::collections::VecDeque<(Vec<u8>, Vec<u8>)> = Default::default();
        let mut staged = self
            .omap
            .range::<[u8], _>((std::ops::Bound::Excluded(start_after), std::ops::Bound::Unbounded))
            .filter(|(k, _)| k.as_ref() >= prefix)
            .take_while(|(k, _)| k.starts_with(prefix))
            .peekable();
        while merged.len() <= max {
            if pending.is_empty() && !store_done {
                let rows = self.committed.omap_scan(&from, exclusive, page)?;
                store_done = rows.len() < page;
                if let Some((k, _)) = rows.last() {
                    from = k.clone();
                    exclusive = true;
                }
                // Past the prefix, no later row is in scope: read no further (a prefix
                // with no rows once read the rest of the object's omap, page by page).
                if rows_left_scope(&from, prefix) {
                    store_done = true;
                }
                pending.extend(rows.into_iter().filter(|(k, _)| in_scope(k)));
                if pending.is_empty() && !store_done {
                    continue;
                }
            }
            let next_store = pending.front().map(|(k, _)| k.as_slice());
            let next_staged = staged.peek().map(|(k, _)| k.as_ref());
            match (next_store, next_staged) {
                (None, None) => break,
                (Some(s), Some(t)) if t <= s => {
                    if t == s {
                        pending.pop_front();
                    }
                    let (k, v) = staged.next().expect("peeked");
                    if let Some(v) = v {
                        merged.push((k.clone(), v.clone()));
                    }
                }
                (None, Some(_)) => {
                    let (k, v) = staged.next().expect("peeked");
                    if let Some(v) = v {
                        merged.push((k.clone(), v.clone()));
                    }
                }
                (Some(_), _) => {
                    let (k, v) = pending.pop_front().expect("peeked");
                    if !self
                        .omap_removed_ranges
                        .iter()
                        .any(|(s, e)| k.as_slice() >= s.as_ref() && k.as_slice() < e.as_ref())
                    {
                        merged.push((Bytes::from(k), Bytes::from(v)));
                    }
                }
            }
        }
        let more = merged.len() > max;
        merged.truncate(max);
        Ok((merged, more))
    }

    fn omap_set(&mut self, entries: Vec<(Bytes, Bytes)>) -> Result<()> {
        for (k, v) in &entries {
            self.limits.check_omap_entry(k, v)?;
        }
        self.onode_mut();
        self.omap.extend(entries.into_iter().map(|(k, v)| (k, Some(v))));
        Ok(())
    }

    fn omap_rm_keys(&mut self, keys: &[Bytes]) -> Result<()> {
        self.onode()?;
        self.changes += 1;
        for k in keys {
            self.omap.insert(k.clone(), None);
        }
        Ok(())
    }

    fn omap_rm_range(&mut self, start: &[u8], end: &[u8]) -> Result<()> {
        self.onode()?;
        self.changes += 1;
        if start >= end {
            return Ok(());
        }
        self.omap.retain(|k, _| !(k.as_ref() >= start && k.as_ref() < end));
        self.omap_removed_ranges.push((Bytes::copy_from_slice(start), Bytes::copy_from_slice(end)));
        Ok(())
    }

    fn omap_get_header(&mut self) -> Result<Bytes> {
        Ok(self.onode()?.omap_header.clone())
    }

    fn omap_set_header(&mut self, header: Bytes) -> Result<()> {
        self.limits.check_omap_entry(b"", &header)?;
        self.onode_mut().omap_header = header;
        Ok(())
    }

    fn cached_state(&mut self, class: &str) -> Option<ClassState> {
        self.staged_states.get(class).or_else(|| self.committed_states.get(class)).cloned()
    }

    fn stage_state(&mut self, class: &str, state: ClassState) {
        self.staged_states.insert(class.to_owned(), state);
    }
}

/// Whether a scan position is already past every key with `prefix`.
fn rows_left_scope(position: &[u8], prefix: &[u8]) -> bool {
    !prefix.is_empty() && position > prefix && !position.starts_with(prefix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// An object with `rows` committed omap rows `k00000…`, counting the scans.
    struct Counted {
        rows: usize,
        scans: Cell<usize>,
    }

    impl Committed for Counted {
        fn chunk_size(&self) -> u64 {
            4096
        }
        fn onode(&self) -> Result<Option<Onode>> {
            Ok(Some(Onode::default()))
        }
        fn chunks(&self, _: u32, _: u32) -> Result<Vec<(u32, Bytes)>> {
            Ok(Vec::new())
        }
        fn omap_get(&self, _: &[u8]) -> Result<Option<Vec<u8>>> {
            Ok(None)
        }
        fn omap_scan(&self, from: &[u8], exclusive: bool, max: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
            self.scans.set(self.scans.get() + 1);
            let keys = (0..self.rows).map(|i| format!("k{i:05}").into_bytes());
            let after = |k: &Vec<u8>| if exclusive { k.as_slice() > from } else { k.as_slice() >= from };
            Ok(keys.filter(after).take(max).map(|k| (k, b"v".to_vec())).collect())
        }
    }

    #[test]
    fn a_prefix_without_rows_reads_one_page_not_the_rest_of_the_omap() {
        let object = Counted { rows: 20_000, scans: Cell::new(0) };
        let limits = Limits::default();
        let key = ObjectKey::from_bytes(vec![0; 16]).unwrap();
        let mut view = ObjectView::load(&object, &limits, key, |_| BTreeMap::new()).unwrap();
        let (rows, more) = view.omap_get_vals(b"k00100x", b"k00100x", 1).unwrap();
        assert!(rows.is_empty() && !more);
        assert_eq!(object.scans.get(), 1, "the first page already left the prefix");
        let (rows, more) = view.omap_get_vals(b"", b"k0010", 3).unwrap();
        let keys: Vec<&[u8]> = rows.iter().map(|(k, _)| k.as_ref()).collect();
        assert_eq!((keys, more), (vec![&b"k00100"[..], b"k00101", b"k00102"], true));
    }
}
