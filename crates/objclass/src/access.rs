//! What a method may do to its object: the OSD's view of the object inside the running
//! transaction, where every change is staged and applied atomically at the end.

use bytes::Bytes;
use shoal_types::{ObjectStat, Result};
use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Arc;

/// In-memory state a class keeps per object between calls (e.g. the current epoch).
pub type ClassState = Arc<dyn Any + Send + Sync>;

/// The object as the running transaction sees it: reads reflect earlier changes of the
/// same operation; nothing is durable until the whole operation commits.
pub trait ObjectAccess {
    /// Whether the object exists.
    fn exists(&mut self) -> Result<bool>;
    /// Size, mtime and version (ENOENT if missing).
    fn stat(&mut self) -> Result<ObjectStat>;
    /// Creates the object; EEXIST if `exclusive` and it exists.
    fn create(&mut self, exclusive: bool) -> Result<()>;
    /// Removes the object (ENOENT if missing).
    fn remove(&mut self) -> Result<()>;
    /// Reads up to `length` bytes at `offset` (0 = to the end; ENOENT if missing).
    fn read(&mut self, offset: u64, length: u64) -> Result<Bytes>;
    /// Writes at `offset`, creating the object if needed.
    fn write(&mut self, offset: u64, data: &[u8]) -> Result<()>;
    /// Replaces the data.
    fn write_full(&mut self, data: &[u8]) -> Result<()>;
    /// Sets the size.
    fn truncate(&mut self, size: u64) -> Result<()>;
    /// One xattr (`None` if missing; ENOENT if the object is missing).
    fn get_xattr(&mut self, name: &str) -> Result<Option<Bytes>>;
    /// All xattrs.
    fn get_xattrs(&mut self) -> Result<BTreeMap<String, Bytes>>;
    /// Sets an xattr, creating the object if needed.
    fn set_xattr(&mut self, name: &str, value: Bytes) -> Result<()>;
    /// Removes an xattr (ENODATA if missing).
    fn rm_xattr(&mut self, name: &str) -> Result<()>;
    /// One omap value.
    fn omap_get(&mut self, key: &[u8]) -> Result<Option<Bytes>>;
    /// Up to `max` omap entries after `start_after` with `prefix`, and whether more match.
    fn omap_get_vals(&mut self, start_after: &[u8], prefix: &[u8], max: usize) -> Result<(Vec<(Bytes, Bytes)>, bool)>;
    /// Sets omap entries, creating the object if needed.
    fn omap_set(&mut self, entries: Vec<(Bytes, Bytes)>) -> Result<()>;
    /// Removes omap keys.
    fn omap_rm_keys(&mut self, keys: &[Bytes]) -> Result<()>;
    /// Removes omap keys in `[start, end)`.
    fn omap_rm_range(&mut self, start: &[u8], end: &[u8]) -> Result<()>;
    /// The omap header (empty if unset).
    fn omap_get_header(&mut self) -> Result<Bytes>;
    /// Sets the omap header, creating the object if needed.
    fn omap_set_header(&mut self, header: Bytes) -> Result<()>;
    /// The state this class cached for the object, if still valid for its committed version.
    fn cached_state(&mut self, class: &str) -> Option<ClassState>;
    /// Stages new cached state; the OSD publishes it only when the transaction commits
    /// and drops it if the operation fails.
    fn stage_state(&mut self, class: &str, state: ClassState);
}
