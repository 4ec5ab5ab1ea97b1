//! Random compound operations against the real execution path (view → transaction →
//! store) and against a plain in-memory model must agree, step output by step output;
//! an operation that fails leaves every stored byte unchanged.

use bytes::Bytes;
use proptest::prelude::*;
use shoal_objclass::ClassRegistry;
use shoal_pg_core::Limits;
use shoal_pg_core::exec::{ExecEnv, execute};
use shoal_pg_core::view::{ObjectView, StoreObject};
use shoal_store::{Cf, KvEngine, MemDevice, MemKv, ObjectKey, ObjectStore, StoreFormat, StoreOptions};
use shoal_types::{ClientId, CmpMode, CmpOp, Errno, ObjectName, PoolId, Step, StepOutput, Versioned};
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Clone, Debug, Default, PartialEq)]
struct Model {
    exists: bool,
    data: Vec<u8>,
    xattrs: BTreeMap<String, Bytes>,
    omap: BTreeMap<Bytes, Bytes>,
    header: Bytes,
    version: u64,
    /// The version reads inside an operation report: the committed one, 0 if the object
    /// did not exist when the operation started.
    start_version: u64,
}

fn fail(errno: Errno) -> Result<StepOutput, Errno> {
    Err(errno)
}

impl Model {
    fn need(&self) -> Result<(), Errno> {
        if self.exists { Ok(()) } else { Err(Errno::NotFound) }
    }

    fn write(&mut self, offset: usize, data: &[u8]) {
        self.exists = true;
        if self.data.len() < offset + data.len() {
            self.data.resize(offset + data.len(), 0);
        }
        self.data[offset..offset + data.len()].copy_from_slice(data);
    }

    fn read(&self, offset: u64, length: u64) -> Vec<u8> {
        let start = (offset as usize).min(self.data.len());
        let end = if length == 0 { self.data.len() } else { (start + length as usize).min(self.data.len()) };
        self.data[start..end].to_vec()
    }

    fn step(&mut self, step: &Step) -> Result<StepOutput, Errno> {
        use StepOutput::None as Nothing;
        match step {
            Step::Create { exclusive } => {
                if *exclusive && self.exists {
                    return fail(Errno::Exists);
                }
                self.exists = true;
                Ok(Nothing)
            }
            Step::Write { offset, data } => {
                self.write(*offset as usize, data);
                Ok(Nothing)
            }
            Step::WriteFull { data } => {
                self.exists = true;
                self.data = data.to_vec();
                Ok(Nothing)
            }
            Step::Append { data } => {
                self.write(self.data.len(), data);
                Ok(Nothing)
            }
            Step::Truncate { size } => {
                self.exists = true;
                self.data.resize(*size as usize, 0);
                Ok(Nothing)
            }
            Step::Zero { offset, length } => {
                self.need()?;
                let end = (offset + length).min(self.data.len() as u64) as usize;
                if (*offset as usize) < end {
                    self.data[*offset as usize..end].fill(0);
                }
                Ok(Nothing)
            }
            Step::Remove => {
                self.need()?;
                *self = Model { version: self.version, start_version: self.start_version, ..Model::default() };
                Ok(Nothing)
            }
            Step::SetXattr { name, value } => {
                self.exists = true;
                self.xattrs.insert(name.clone(), value.clone());
                Ok(Nothing)
            }
            Step::RmXattr { name } => {
                self.need()?;
                self.xattrs.remove(name).map(|_| Nothing).ok_or(Errno::NoData)
            }
            Step::OmapSet { entries } => {
                self.exists = true;
                self.omap.extend(entries.clone());
                Ok(Nothing)
            }
            Step::OmapRmKeys { keys } => {
                self.need()?;
                keys.iter().for_each(|k| drop(self.omap.remove(k)));
                Ok(Nothing)
            }
            Step::OmapRmRange { start, end } => {
                self.need()?;
                self.omap.retain(|k, _| !(k >= start && k < end));
                Ok(Nothing)
            }
            Step::OmapClear => {
                self.need()?;
                self.omap.clear();
                Ok(Nothing)
            }
            Step::OmapSetHeader { header } => {
                self.exists = true;
                self.header = header.clone();
                Ok(Nothing)
            }
            Step::AssertExists => self.need().map(|()| Nothing),
            Step::CmpXattr { name, op, value, .. } => {
                self.need()?;
                let stored = self.xattrs.get(name).cloned().unwrap_or_default();
                if op.holds(stored.as_ref().cmp(value.as_ref())) { Ok(Nothing) } else { fail(Errno::Canceled) }
            }
            Step::OmapCmp { assertions } => {
                self.need()?;
                for (k, (op, _, v)) in assertions {
                    match self.omap.get(k) {
                        Some(stored) if op.holds(stored.as_ref().cmp(v.as_ref())) => {}
                        _ => return fail(Errno::Canceled),
                    }
                }
                Ok(Nothing)
            }
            Step::Read { offset, length } => {
                self.need()?;
                Ok(StepOutput::Data(Bytes::from(self.read(*offset, *length))))
            }
            Step::Stat => {
                self.need()?;
                Ok(StepOutput::Stat(shoal_types::ObjectStat {
                    size: self.data.len() as u64,
                    mtime_ns: 0,
                    version: self.start_version,
                }))
            }
            Step::AssertVersion { version } => {
                if *version == 0 {
                    return fail(Errno::InvalidArgument);
                }
                self.need()?;
                match self.start_version.cmp(version) {
                    std::cmp::Ordering::Equal => Ok(Nothing),
                    std::cmp::Ordering::Greater => fail(Errno::Range),
                    std::cmp::Ordering::Less => fail(Errno::Overflow),
                }
            }
            Step::GetXattr { name } => {
                self.need()?;
                self.xattrs.get(name).cloned().map(StepOutput::Data).ok_or(Errno::NoData)
            }
            Step::GetXattrs => {
                self.need()?;
                Ok(StepOutput::Xattrs(self.xattrs.clone()))
            }
            Step::OmapGetVals { start_after, filter_prefix, max_return } => {
                self.need()?;
                let mut matching = self
                    .omap
                    .iter()
                    .filter(|(k, _)| *k > start_after && k.starts_with(filter_prefix))
                    .map(|(k, v)| (k.clone(), v.clone()));
                let entries: Vec<_> = matching.by_ref().take(*max_return as usize).collect();
                Ok(StepOutput::OmapVals { entries, more: matching.next().is_some() })
            }
            Step::OmapGetHeader => {
                self.need()?;
                Ok(StepOutput::Data(self.header.clone()))
            }
            Step::Checksum { offset, length, init } => {
                self.need()?;
                Ok(StepOutput::Checksum(crc32c::crc32c_append(*init, &self.read(*offset, *length))))
            }
            other => panic!("the model does not cover {other:?}"),
        }
    }

    /// Applies an operation all-or-nothing; returns the outputs or the first error.
    fn apply(&mut self, steps: &[Step]) -> Result<Vec<StepOutput>, Errno> {
        let mut next = self.clone();
        next.start_version = if self.exists { self.version } else { 0 };
        let outputs = steps.iter().map(|s| next.step(s)).collect::<Result<Vec<_>, _>>()?;
        if steps.iter().any(Step::is_mutation) {
            next.version = self.version + 1;
        }
        *self = next;
        Ok(outputs)
    }
}

fn small_bytes(max_len: usize) -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(1u8..4, 0..max_len).prop_map(Bytes::from)
}

fn omap_key() -> impl Strategy<Value = Bytes> {
    prop_oneof![Just("a"), Just("ab"), Just("b"), Just("ba"), Just("c"), Just("d")]
        .prop_map(|s: &'static str| Bytes::from_static(s.as_bytes()))
}

fn xattr_name() -> impl Strategy<Value = String> {
    prop_oneof![Just("x"), Just("y"), Just("z")].prop_map(str::to_owned)
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        any::<bool>().prop_map(|exclusive| Step::Create { exclusive }),
        (0u64..80, small_bytes(50)).prop_map(|(offset, data)| Step::Write { offset, data }),
        small_bytes(60).prop_map(|data| Step::WriteFull { data }),
        small_bytes(40).prop_map(|data| Step::Append { data }),
        (0u64..100).prop_map(|size| Step::Truncate { size }),
        (0u64..80, 0u64..60).prop_map(|(offset, length)| Step::Zero { offset, length }),
        Just(Step::Remove),
        (xattr_name(), small_bytes(4)).prop_map(|(name, value)| Step::SetXattr { name, value }),
        xattr_name().prop_map(|name| Step::RmXattr { name }),
        proptest::collection::btree_map(omap_key(), small_bytes(3), 0..4).prop_map(|entries| Step::OmapSet { entries }),
        proptest::collection::vec(omap_key(), 0..3).prop_map(|keys| Step::OmapRmKeys { keys }),
        (omap_key(), omap_key()).prop_map(|(start, end)| Step::OmapRmRange { start, end }),
        Just(Step::OmapClear),
        small_bytes(5).prop_map(|header| Step::OmapSetHeader { header }),
        Just(Step::AssertExists),
        Just(Step::Stat),
        (0u64..6).prop_map(|version| Step::AssertVersion { version }),
        (xattr_name(), small_bytes(3)).prop_map(|(name, value)| Step::CmpXattr {
            name,
            op: CmpOp::Eq,
            mode: CmpMode::Bytes,
            value
        }),
        (omap_key(), small_bytes(3), prop_oneof![Just(CmpOp::Eq), Just(CmpOp::Lt), Just(CmpOp::Gt)])
            .prop_map(|(k, v, op)| Step::OmapCmp { assertions: BTreeMap::from([(k, (op, CmpMode::Bytes, v))]) }),
        (0u64..100, 0u64..60).prop_map(|(offset, length)| Step::Read { offset, length }),
        xattr_name().prop_map(|name| Step::GetXattr { name }),
        Just(Step::GetXattrs),
        (prop_oneof![Just(""), Just("a"), Just("b")], prop_oneof![Just(""), Just("a"), Just("b")], 0u32..4).prop_map(
            |(s, p, max_return)| {
                Step::OmapGetVals {
                    start_after: Bytes::from_static(s.as_bytes()),
                    filter_prefix: Bytes::from_static(p.as_bytes()),
                    max_return,
                }
            }
        ),
        Just(Step::OmapGetHeader),
        (0u64..100, 0u64..60, any::<u32>()).prop_map(|(offset, length, init)| Step::Checksum { offset, length, init }),
    ]
}

fn dump(kv: &MemKv) -> Vec<(Cf, Vec<u8>, Vec<u8>)> {
    Cf::ALL
        .iter()
        .flat_map(|&cf| kv.scan(cf, &[], &[0xff; 64], usize::MAX).unwrap().into_iter().map(move |(k, v)| (cf, k, v)))
        .collect()
}

/// Runs one operation the way a shard does; returns outputs or the errno.
fn run(store: &ObjectStore, key: &ObjectKey, steps: &[Step], version: &mut u64) -> Result<Vec<StepOutput>, Errno> {
    let limits = Limits::default();
    let classes = ClassRegistry::builtin();
    let committed = StoreObject::new(store, key.clone());
    let mut view = ObjectView::load(&committed, &limits, key.clone(), |_| BTreeMap::new()).unwrap();
    let env = ExecEnv { classes: &classes, limits: &limits, caller: ClientId(1), now_ns: 7 };
    let outputs = execute(&mut view, steps, &env).map_err(|e| e.errno)?;
    if view.changes() > 0 {
        *version += 1;
        let (txn, _) = view.into_transaction(*version, 7);
        store.commit(txn).unwrap();
    }
    Ok(outputs)
}

fn mask_mtime(outputs: Vec<StepOutput>) -> Vec<StepOutput> {
    outputs
        .into_iter()
        .map(|o| match o {
            StepOutput::Stat(mut s) => {
                s.mtime_ns = 0;
                StepOutput::Stat(s)
            }
            o => o,
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn store_agrees_with_model(ops in proptest::collection::vec(proptest::collection::vec(step(), 1..5), 1..25)) {
        let kv = Arc::new(MemKv::new());
        // Tiny chunks so that every write crosses chunk boundaries, and writes of two
        // chunks or more on the data device, so objects mix both layouts.
        let format = StoreFormat { chunk_size: 16 };
        let options = StoreOptions { prefer_deferred_size: 32 };
        let store = ObjectStore::open(kv.clone(), Arc::new(MemDevice::new()), format, options).unwrap();
        let key = ObjectKey::new(PoolId(1), &ObjectName::new("", "obj")).unwrap();
        let mut model = Model::default();
        let mut version = 0;
        for steps in &ops {
            let before = dump(&kv);
            let expected = model.apply(steps);
            let got = run(&store, &key, steps, &mut version);
            prop_assert_eq!(got.clone().map(mask_mtime), expected.clone(), "op {:?}", steps);
            if got.is_err() {
                prop_assert_eq!(dump(&kv), before, "a failed operation changed stored bytes");
            }
            // The whole state, read back through a fresh operation.
            let probe = [Step::Stat, Step::Read { offset: 0, length: 0 }, Step::GetXattrs,
                Step::OmapGetVals { start_after: Bytes::new(), filter_prefix: Bytes::new(), max_return: 100 }, Step::OmapGetHeader];
            let state = run(&store, &key, &probe, &mut version).map(mask_mtime);
            let expected_state = model.clone().apply(&probe);
            prop_assert_eq!(state, expected_state);
            // The data device's books: what extent records reference, nothing else, once synced.
            store.sync().unwrap();
            let extents: u64 = kv.scan(Cf::Extent, &[], &[0xff; 64], usize::MAX).unwrap().iter()
                .map(|(_, v)| u64::from(shoal_store::Extent::decode(v).unwrap().len).next_multiple_of(16)).sum();
            let space = store.space();
            prop_assert_eq!((space.referenced, space.unreferenced), (extents, 0), "{:?}", space);
        }
    }
}
