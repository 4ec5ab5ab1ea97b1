//! Builders for compound operations.

use bytes::Bytes;
use shoal_types::{CmpMode, CmpOp, Step};
use std::collections::BTreeMap;

/// Steps both reads and writes may contain: guards and object-class calls.
pub trait OpBuilder: Sized {
    /// Appends a step.
    fn push(self, step: Step) -> Self;

    /// Fails the operation with ENOENT unless the object exists.
    fn assert_exists(self) -> Self {
        self.push(Step::AssertExists)
    }
    /// Fails unless the object is at exactly this user version.
    fn assert_version(self, version: u64) -> Self {
        self.push(Step::AssertVersion { version })
    }
    /// Fails with ECANCELED unless `xattr OP value` holds.
    fn cmp_xattr(self, name: &str, op: CmpOp, mode: CmpMode, value: impl Into<Bytes>) -> Self {
        self.push(Step::CmpXattr { name: name.to_owned(), op, mode, value: value.into() })
    }
    /// Fails with ECANCELED unless `omap[key] OP value` holds for every assertion.
    fn omap_cmp(self, assertions: BTreeMap<Bytes, (CmpOp, CmpMode, Bytes)>) -> Self {
        self.push(Step::OmapCmp { assertions })
    }
    /// Runs `class.method` inside the operation.
    fn exec(self, class: &str, method: &str, input: impl Into<Bytes>) -> Self {
        self.push(Step::Exec { class: class.to_owned(), method: method.to_owned(), input: input.into() })
    }
}

/// A write operation: its steps apply atomically or not at all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteOp {
    /// The steps, in order.
    pub steps: Vec<Step>,
}

impl OpBuilder for WriteOp {
    fn push(mut self, step: Step) -> Self {
        self.steps.push(step);
        self
    }
}

impl WriteOp {
    /// An empty operation.
    pub fn new() -> Self {
        Self::default()
    }
    /// Creates the object (EEXIST if `exclusive` and it exists).
    pub fn create(self, exclusive: bool) -> Self {
        self.push(Step::Create { exclusive })
    }
    /// Writes at an offset.
    pub fn write(self, offset: u64, data: impl Into<Bytes>) -> Self {
        self.push(Step::Write { offset, data: data.into() })
    }
    /// Replaces the data.
    pub fn write_full(self, data: impl Into<Bytes>) -> Self {
        self.push(Step::WriteFull { data: data.into() })
    }
    /// Appends at the end.
    pub fn append(self, data: impl Into<Bytes>) -> Self {
        self.push(Step::Append { data: data.into() })
    }
    /// Sets the size.
    pub fn truncate(self, size: u64) -> Self {
        self.push(Step::Truncate { size })
    }
    /// Zeroes a range.
    pub fn zero(self, offset: u64, length: u64) -> Self {
        self.push(Step::Zero { offset, length })
    }
    /// Removes the object.
    pub fn remove(self) -> Self {
        self.push(Step::Remove)
    }
    /// Sets an xattr.
    pub fn set_xattr(self, name: &str, value: impl Into<Bytes>) -> Self {
        self.push(Step::SetXattr { name: name.to_owned(), value: value.into() })
    }
    /// Removes an xattr.
    pub fn rm_xattr(self, name: &str) -> Self {
        self.push(Step::RmXattr { name: name.to_owned() })
    }
    /// Sets omap entries.
    pub fn omap_set(self, entries: impl IntoIterator<Item = (Bytes, Bytes)>) -> Self {
        self.push(Step::OmapSet { entries: entries.into_iter().collect() })
    }
    /// Removes omap keys.
    pub fn omap_rm_keys(self, keys: impl IntoIterator<Item = Bytes>) -> Self {
        self.push(Step::OmapRmKeys { keys: keys.into_iter().collect() })
    }
    /// Removes omap keys in `[start, end)`.
    pub fn omap_rm_range(self, start: impl Into<Bytes>, end: impl Into<Bytes>) -> Self {
        self.push(Step::OmapRmRange { start: start.into(), end: end.into() })
    }
    /// Removes every omap key.
    pub fn omap_clear(self) -> Self {
        self.push(Step::OmapClear)
    }
    /// Sets the omap header.
    pub fn omap_set_header(self, header: impl Into<Bytes>) -> Self {
        self.push(Step::OmapSetHeader { header: header.into() })
    }
}

/// A read operation: it never changes the object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadOp {
    /// The steps, in order.
    pub steps: Vec<Step>,
}

impl OpBuilder for ReadOp {
    fn push(mut self, step: Step) -> Self {
        self.steps.push(step);
        self
    }
}

impl ReadOp {
    /// An empty operation.
    pub fn new() -> Self {
        Self::default()
    }
    /// Reads `length` bytes at `offset` (0 = to the end).
    pub fn read(self, offset: u64, length: u64) -> Self {
        self.push(Step::Read { offset, length })
    }
    /// Size, mtime and version.
    pub fn stat(self) -> Self {
        self.push(Step::Stat)
    }
    /// One xattr.
    pub fn get_xattr(self, name: &str) -> Self {
        self.push(Step::GetXattr { name: name.to_owned() })
    }
    /// All xattrs.
    pub fn get_xattrs(self) -> Self {
        self.push(Step::GetXattrs)
    }
    /// Omap keys after `start_after` with `prefix`, at most `max`.
    pub fn omap_get_keys(self, start_after: impl Into<Bytes>, prefix: impl Into<Bytes>, max: u32) -> Self {
        self.push(Step::OmapGetKeys { start_after: start_after.into(), filter_prefix: prefix.into(), max_return: max })
    }
    /// Omap entries after `start_after` with `prefix`, at most `max`.
    pub fn omap_get_vals(self, start_after: impl Into<Bytes>, prefix: impl Into<Bytes>, max: u32) -> Self {
        self.push(Step::OmapGetVals { start_after: start_after.into(), filter_prefix: prefix.into(), max_return: max })
    }
    /// The entries of the given keys that exist.
    pub fn omap_get_vals_by_keys(self, keys: impl IntoIterator<Item = Bytes>) -> Self {
        self.push(Step::OmapGetValsByKeys { keys: keys.into_iter().collect() })
    }
    /// The omap header.
    pub fn omap_get_header(self) -> Self {
        self.push(Step::OmapGetHeader)
    }
    /// CRC32C of a range.
    pub fn checksum(self, offset: u64, length: u64, init: u32) -> Self {
        self.push(Step::Checksum { offset, length, init })
    }
}
