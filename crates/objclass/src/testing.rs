//! A plain in-memory object for unit tests of classes, with the OSD's all-or-nothing rule.

use crate::access::{ClassState, ObjectAccess};
use crate::{ClassRegistry, MethodContext};
use bytes::Bytes;
use shoal_types::{ClientId, ObjectStat, Result, err};
use std::collections::BTreeMap;

#[derive(Clone, Default)]
pub struct MemObject {
    pub exists: bool,
    pub data: Vec<u8>,
    pub xattrs: BTreeMap<String, Bytes>,
    pub omap: BTreeMap<Bytes, Bytes>,
    pub header: Bytes,
    pub version: u64,
    changed: bool,
    states: BTreeMap<String, ClassState>,
    staged: BTreeMap<String, ClassState>,
}

impl MemObject {
    fn touch(&mut self) {
        self.exists = true;
        self.changed = true;
    }

    fn need(&self) -> Result<()> {
        if self.exists { Ok(()) } else { Err(err::not_found("no such object")) }
    }

    /// Calls a method the way the OSD does: on error every change is undone.
    pub fn call(&mut self, class: &str, method: &str, caller: u64, now_ns: u64, input: &[u8]) -> Result<Vec<u8>> {
        let m = ClassRegistry::builtin().lookup(class, method)?;
        let before = self.clone();
        self.changed = false;
        let mut ctx = MethodContext { object: self, caller: ClientId(caller), now_ns };
        match (m.func)(&mut ctx, input) {
            Ok(out) => {
                if self.changed {
                    assert!(m.flags.write, "{class}.{method} is read-only but changed the object");
                    self.version += 1;
                }
                let staged = std::mem::take(&mut self.staged);
                self.states.extend(staged);
                Ok(out)
            }
            Err(e) => {
                *self = before;
                Err(e)
            }
        }
    }
}

impl ObjectAccess for MemObject {
    fn exists(&mut self) -> Result<bool> {
        Ok(self.exists)
    }
    fn stat(&mut self) -> Result<ObjectStat> {
        self.need()?;
        Ok(ObjectStat { size: self.data.len() as u64, mtime_ns: 0, version: self.version })
    }
    fn create(&mut self, exclusive: bool) -> Result<()> {
        if exclusive && self.exists {
            return Err(err::exists("object exists"));
        }
        self.touch();
        Ok(())
    }
    fn remove(&mut self) -> Result<()> {
        self.need()?;
        *self = MemObject { version: self.version, changed: true, ..MemObject::default() };
        Ok(())
    }
    fn read(&mut self, offset: u64, length: u64) -> Result<Bytes> {
        self.need()?;
        let start = (offset as usize).min(self.data.len());
        let end = if length == 0 { self.data.len() } else { (start + length as usize).min(self.data.len()) };
        Ok(Bytes::copy_from_slice(&self.data[start..end]))
    }
    fn write(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        self.touch();
        let end = offset as usize + data.len();
        if self.data.len() < end {
            self.data.resize(end, 0);
        }
        self.data[offset as usize..end].copy_from_slice(data);
        Ok(())
    }
    fn write_full(&mut self, data: &[u8]) -> Result<()> {
        self.touch();
        self.data = data.to_vec();
        Ok(())
    }
    fn truncate(&mut self, size: u64) -> Result<()> {
        self.touch();
        self.data.resize(size as usize, 0);
        Ok(())
    }
    fn get_xattr(&mut self, name: &str) -> Result<Option<Bytes>> {
        self.need()?;
        Ok(self.xattrs.get(name).cloned())
    }
    fn get_xattrs(&mut self) -> Result<BTreeMap<String, Bytes>> {
        self.need()?;
        Ok(self.xattrs.clone())
    }
    fn set_xattr(&mut self, name: &str, value: Bytes) -> Result<()> {
        self.touch();
        self.xattrs.insert(name.to_owned(), value);
        Ok(())
    }
    fn rm_xattr(&mut self, name: &str) -> Result<()> {
        self.need()?;
        self.changed = true;
        self.xattrs.remove(name).map(|_| ()).ok_or_else(|| err::no_data(name.to_owned()))
    }
    fn omap_get(&mut self, key: &[u8]) -> Result<Option<Bytes>> {
        self.need()?;
        Ok(self.omap.get(key).cloned())
    }
    fn omap_get_vals(&mut self, start_after: &[u8], prefix: &[u8], max: usize) -> Result<(Vec<(Bytes, Bytes)>, bool)> {
        self.need()?;
        let mut matching = self
            .omap
            .iter()
            .filter(|(k, _)| k.as_ref() > start_after && k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()));
        let out: Vec<_> = matching.by_ref().take(max).collect();
        Ok((out, matching.next().is_some()))
    }
    fn omap_set(&mut self, entries: Vec<(Bytes, Bytes)>) -> Result<()> {
        self.touch();
        self.omap.extend(entries);
        Ok(())
    }
    fn omap_rm_keys(&mut self, keys: &[Bytes]) -> Result<()> {
        self.need()?;
        self.changed = true;
        for k in keys {
            self.omap.remove(k);
        }
        Ok(())
    }
    fn omap_rm_range(&mut self, start: &[u8], end: &[u8]) -> Result<()> {
        self.need()?;
        self.changed = true;
        self.omap.retain(|k, _| !(k.as_ref() >= start && k.as_ref() < end));
        Ok(())
    }
    fn omap_get_header(&mut self) -> Result<Bytes> {
        self.need()?;
        Ok(self.header.clone())
    }
    fn omap_set_header(&mut self, header: Bytes) -> Result<()> {
        self.touch();
        self.header = header;
        Ok(())
    }
    fn cached_state(&mut self, class: &str) -> Option<ClassState> {
        self.staged.get(class).or_else(|| self.states.get(class)).cloned()
    }
    fn stage_state(&mut self, class: &str, state: ClassState) {
        self.staged.insert(class.to_owned(), state);
    }
}
