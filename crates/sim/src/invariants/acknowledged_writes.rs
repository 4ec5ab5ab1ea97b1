//! An acknowledged write is never lost or rolled back, and a read returns the latest
//! acknowledged state. Each client keeps one operation outstanding per object and resends
//! it (same request id) until it is answered, so the object's expected state after every
//! acknowledgement is exact: a read must return precisely that.

use super::Violation;
use bytes::Bytes;
use shoal_types::ObjectName;
use std::collections::BTreeMap;

/// What a client asks of one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Work {
    /// Replace the data.
    WriteFull(Bytes),
    /// Append to the data.
    Append(Bytes),
    /// Write bytes at an offset (a partial overwrite, or past the end).
    Write(u64, Bytes),
    /// Set one omap key.
    OmapSet(Bytes, Bytes),
    /// Read the data and the omap.
    Read,
}

/// An object's acknowledged state; `None` data = the object does not exist.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Expected {
    /// The data, if the object exists.
    pub data: Option<Vec<u8>>,
    /// The omap.
    pub omap: BTreeMap<Bytes, Bytes>,
}

/// The oracle: every object's state as the acknowledgements so far define it.
#[derive(Default)]
pub struct Oracle {
    objects: BTreeMap<ObjectName, Expected>,
}

impl Oracle {
    /// A write to `object` was acknowledged.
    pub fn acknowledged(&mut self, object: &ObjectName, work: &Work) {
        let expected = self.objects.entry(object.clone()).or_default();
        match work {
            Work::WriteFull(data) => expected.data = Some(data.to_vec()),
            Work::Append(data) => expected.data.get_or_insert_with(Vec::new).extend_from_slice(data),
            Work::Write(offset, data) => {
                let bytes = expected.data.get_or_insert_with(Vec::new);
                let (start, end) = (*offset as usize, *offset as usize + data.len());
                if bytes.len() < end {
                    bytes.resize(end, 0);
                }
                bytes[start..end].copy_from_slice(data);
            }
            Work::OmapSet(k, v) => {
                expected.data.get_or_insert_with(Vec::new);
                expected.omap.insert(k.clone(), v.clone());
            }
            Work::Read => {}
        }
    }

    /// A read of `object` returned `seen` (`None`: the object does not exist).
    pub fn check_read(&self, object: &ObjectName, seen: &Expected, at: &str) -> Result<(), Violation> {
        let expected = self.objects.get(object).cloned().unwrap_or_default();
        if expected == *seen {
            return Ok(());
        }
        Err(Violation {
            invariant: "acknowledged_writes",
            detail: format!(
                "{at}: read of {object} returned {} data bytes and {} omap keys; the acknowledged state has {} and {}{}",
                seen.data.as_ref().map_or("no object /".into(), |d| d.len().to_string()),
                seen.omap.len(),
                expected.data.as_ref().map_or("no object /".into(), |d| d.len().to_string()),
                expected.omap.len(),
                if expected.data.as_ref().map(Vec::len) == seen.data.as_ref().map(Vec::len) {
                    " (same length, other bytes)"
                } else {
                    ""
                },
            ),
        })
    }

    /// Every object the oracle knows.
    pub fn objects(&self) -> impl Iterator<Item = &ObjectName> {
        self.objects.keys()
    }
}
