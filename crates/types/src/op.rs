//! Compound operations: ordered steps applied to one object atomically, and their outputs.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How a guard compares a stored value with the given one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CmpOp {
    /// stored == given
    Eq,
    /// stored != given
    Ne,
    /// stored > given
    Gt,
    /// stored >= given
    Ge,
    /// stored < given
    Lt,
    /// stored <= given
    Le,
}

impl CmpOp {
    /// Whether `stored OP given` holds for this ordering of stored against given.
    pub fn holds(self, ordering: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        match self {
            CmpOp::Eq => ordering == Equal,
            CmpOp::Ne => ordering != Equal,
            CmpOp::Gt => ordering == Greater,
            CmpOp::Ge => ordering != Less,
            CmpOp::Lt => ordering == Less,
            CmpOp::Le => ordering != Greater,
        }
    }
}

/// How compared bytes are interpreted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CmpMode {
    /// Lexicographic comparison of the raw bytes.
    Bytes,
    /// Both sides are decimal ASCII numbers and compare as u64; a non-number is EINVAL.
    U64,
}

/// One step of a compound operation. Steps run in order against one object; reads and
/// guards see the effects of the steps before them; any failing step cancels the whole
/// operation and nothing is applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Step {
    // ---- writes ----
    /// Create the object; with `exclusive`, fail with EEXIST if it exists.
    Create {
        /// Fail if the object already exists.
        exclusive: bool,
    },
    /// Write bytes at an offset, extending the object (holes read as zeros).
    Write {
        /// Byte offset.
        offset: u64,
        /// Bytes to write.
        #[serde(with = "crate::encoding::shared_bytes")]
        data: Bytes,
    },
    /// Replace the whole data payload.
    WriteFull {
        /// The new contents.
        #[serde(with = "crate::encoding::shared_bytes")]
        data: Bytes,
    },
    /// Write at the current end of the object.
    Append {
        /// Bytes to append.
        #[serde(with = "crate::encoding::shared_bytes")]
        data: Bytes,
    },
    /// Set the object's size, dropping or zero-extending data.
    Truncate {
        /// New size in bytes.
        size: u64,
    },
    /// Zero a byte range without changing the size beyond it.
    Zero {
        /// Byte offset.
        offset: u64,
        /// Length in bytes.
        length: u64,
    },
    /// Delete the object with its data, xattrs and omap (ENOENT if missing).
    Remove,
    /// Set an extended attribute.
    SetXattr {
        /// Attribute name.
        name: String,
        /// Attribute value.
        value: Bytes,
    },
    /// Remove an extended attribute (ENODATA if missing).
    RmXattr {
        /// Attribute name.
        name: String,
    },
    /// Upsert omap entries.
    OmapSet {
        /// Keys and values to store.
        entries: BTreeMap<Bytes, Bytes>,
    },
    /// Remove omap keys; missing keys are ignored.
    OmapRmKeys {
        /// Keys to delete.
        keys: Vec<Bytes>,
    },
    /// Remove omap keys in `[start, end)`.
    OmapRmRange {
        /// First key removed.
        start: Bytes,
        /// First key kept.
        end: Bytes,
    },
    /// Remove every omap key (the header stays).
    OmapClear,
    /// Set the omap header.
    OmapSetHeader {
        /// The new header.
        header: Bytes,
    },
    // ---- guards ----
    /// Fail with ENOENT unless the object exists.
    AssertExists,
    /// Fail unless the object's user version equals `version` (ERANGE if it is newer, EOVERFLOW if older).
    AssertVersion {
        /// The expected user version.
        version: u64,
    },
    /// Fail with ECANCELED unless `xattr OP value` holds; a missing xattr is empty in
    /// `Bytes` mode and fails the guard in `U64` mode.
    CmpXattr {
        /// Attribute name.
        name: String,
        /// Comparison.
        op: CmpOp,
        /// Interpretation of both sides.
        mode: CmpMode,
        /// Value to compare with.
        value: Bytes,
    },
    /// Fail with ECANCELED unless every `omap[key] OP value` holds (a missing key fails).
    OmapCmp {
        /// Key → (comparison, interpretation, value).
        assertions: BTreeMap<Bytes, (CmpOp, CmpMode, Bytes)>,
    },
    // ---- reads ----
    /// Read `length` bytes at `offset` (length 0 reads to the end).
    Read {
        /// Byte offset.
        offset: u64,
        /// Byte count; 0 means to the end of the object.
        length: u64,
    },
    /// Size, mtime and version.
    Stat,
    /// One xattr (ENODATA if missing).
    GetXattr {
        /// Attribute name.
        name: String,
    },
    /// All xattrs.
    GetXattrs,
    /// Up to `max_return` keys greater than `start_after` that start with `filter_prefix`.
    OmapGetKeys {
        /// Return only keys after this one.
        start_after: Bytes,
        /// Return only keys with this prefix.
        filter_prefix: Bytes,
        /// At most this many keys (capped by the OSD's limit).
        max_return: u32,
    },
    /// Like [`Step::OmapGetKeys`] but with values.
    OmapGetVals {
        /// Return only keys after this one.
        start_after: Bytes,
        /// Return only keys with this prefix.
        filter_prefix: Bytes,
        /// At most this many entries (capped by the OSD's limit).
        max_return: u32,
    },
    /// The entries for the given keys that exist.
    OmapGetValsByKeys {
        /// Keys to look up.
        keys: Vec<Bytes>,
    },
    /// The omap header.
    OmapGetHeader,
    /// CRC32C of a byte range (length 0 = to the end), seeded with `init`.
    Checksum {
        /// Byte offset.
        offset: u64,
        /// Byte count; 0 means to the end.
        length: u64,
        /// Initial CRC value.
        init: u32,
    },
    // ---- object classes ----
    /// Run `class.method` inside the operation's transaction.
    Exec {
        /// Class name, e.g. `lock`.
        class: String,
        /// Method name, e.g. `lock`.
        method: String,
        /// Method input, encoded as the method expects.
        input: Bytes,
    },
    /// Lets the operation write even when its pool is at its quota or an OSD of its PG is
    /// full (Ceph's `FULL_TRY`): for the bookkeeping of deletes, which must free space.
    FullTry,
}

/// Bytes of keys and values in `entries`.
fn pair_bytes<'a>(entries: impl IntoIterator<Item = (&'a Bytes, &'a Bytes)>) -> usize {
    entries.into_iter().map(|(k, v)| k.len() + v.len()).sum()
}

impl Step {
    /// Bytes of data the step carries (object bytes, xattr values, omap keys and values,
    /// a method's input): what its message grows by, less the fixed fields.
    pub fn carried_bytes(&self) -> usize {
        match self {
            Step::Write { data, .. } | Step::WriteFull { data } | Step::Append { data } => data.len(),
            Step::SetXattr { name, value } => name.len() + value.len(),
            Step::CmpXattr { name, value, .. } => name.len() + value.len(),
            Step::OmapSet { entries } => pair_bytes(entries),
            Step::OmapRmKeys { keys } | Step::OmapGetValsByKeys { keys } => keys.iter().map(Bytes::len).sum(),
            Step::OmapRmRange { start, end } => start.len() + end.len(),
            Step::OmapSetHeader { header } => header.len(),
            Step::OmapCmp { assertions } => assertions.iter().map(|(k, (_, _, v))| k.len() + v.len()).sum(),
            Step::Exec { class, method, input } => class.len() + method.len() + input.len(),
            _ => 0,
        }
    }

    /// Whether `steps` only take space away (removes, truncates, deletions of attributes
    /// and omap entries, reads and guards) or carry [`Step::FullTry`]: such an operation
    /// runs when its pool or an OSD is full.
    pub fn may_run_when_full(steps: &[Step]) -> bool {
        steps.contains(&Step::FullTry)
            || steps.iter().all(|step| {
                !step.is_mutation() && !matches!(step, Step::Exec { .. })
                    || matches!(
                        step,
                        Step::Remove
                            | Step::Truncate { .. }
                            | Step::Zero { .. }
                            | Step::RmXattr { .. }
                            | Step::OmapRmKeys { .. }
                            | Step::OmapRmRange { .. }
                            | Step::OmapClear
                    )
            })
    }

    /// Whether the step changes the object (Exec is decided by the method's flags).
    pub fn is_mutation(&self) -> bool {
        matches!(
            self,
            Step::Create { .. }
                | Step::Write { .. }
                | Step::WriteFull { .. }
                | Step::Append { .. }
                | Step::Truncate { .. }
                | Step::Zero { .. }
                | Step::Remove
                | Step::SetXattr { .. }
                | Step::RmXattr { .. }
                | Step::OmapSet { .. }
                | Step::OmapRmKeys { .. }
                | Step::OmapRmRange { .. }
                | Step::OmapClear
                | Step::OmapSetHeader { .. }
        )
    }
}

/// An object's size, modification time and version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectStat {
    /// Data size in bytes.
    pub size: u64,
    /// Last modification, nanoseconds since the Unix epoch.
    pub mtime_ns: u64,
    /// User version: increases on every modifying operation.
    pub version: u64,
}

/// What one step returned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StepOutput {
    /// The step returns nothing.
    None,
    /// Bytes: read data, an xattr value, the omap header or a class method's output.
    Data(#[serde(with = "crate::encoding::shared_bytes")] Bytes),
    /// The object's stat.
    Stat(ObjectStat),
    /// All xattrs.
    Xattrs(BTreeMap<String, Bytes>),
    /// Omap keys, and whether more match after them.
    OmapKeys {
        /// The keys, in order.
        keys: Vec<Bytes>,
        /// More keys match after the last one.
        more: bool,
    },
    /// Omap entries, and whether more match after them.
    OmapVals {
        /// The entries, in key order.
        entries: Vec<(Bytes, Bytes)>,
        /// More entries match after the last one.
        more: bool,
    },
    /// A CRC32C checksum.
    Checksum(u32),
}

impl StepOutput {
    /// Bytes of data the output carries, as [`Step::carried_bytes`] counts them.
    pub fn carried_bytes(&self) -> usize {
        match self {
            StepOutput::Data(bytes) => bytes.len(),
            StepOutput::Xattrs(xattrs) => xattrs.iter().map(|(name, value)| name.len() + value.len()).sum(),
            StepOutput::OmapKeys { keys, .. } => keys.iter().map(Bytes::len).sum(),
            StepOutput::OmapVals { entries, .. } => pair_bytes(entries.iter().map(|(k, v)| (k, v))),
            StepOutput::None | StepOutput::Stat(_) | StepOutput::Checksum(_) => 0,
        }
    }

    /// This output with its bytes in an allocation of their own. A `Data` decoded from a
    /// received frame is a slice of it (see [`crate::encoding::shared_bytes`]) and keeps the
    /// whole read buffer alive: what is kept long after its message (a PG log's replies)
    /// must hold a detached copy.
    pub fn detached(&self) -> StepOutput {
        match self {
            StepOutput::Data(bytes) => StepOutput::Data(Bytes::copy_from_slice(bytes)),
            other => other.clone(),
        }
    }
}
