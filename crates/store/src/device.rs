//! Where large object data lives: a flat byte space written once per extent and read with
//! positioned reads, outside the key-value engine and its write-ahead log.
//!
//! [`FileDevice`] is one preallocated file grown in steps; [`MemDevice`] keeps the bytes
//! in memory for tests and models. Neither knows what is allocated: that is the
//! [`crate::alloc::Allocator`]'s job, rebuilt from the engine's extent records at start.

use bytes::Bytes;
use shoal_types::space::{StoreUsage, WHOLE};
use shoal_types::{Result, err};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// A byte-addressed space for extent data.
pub trait BlockDevice: Send + Sync + 'static {
    /// Bytes addressable now.
    fn size(&self) -> u64;
    /// Makes the space at least `size` bytes long (never shrinks it).
    fn grow(&self, size: u64) -> Result<()>;
    /// How much to grow by at least, when the space runs out.
    fn grow_step(&self) -> u64;
    /// Writes `data` at `addr`, which must lie inside the space.
    fn write_at(&self, addr: u64, data: &[u8]) -> Result<()>;
    /// Reads `len` bytes at `addr`, which must lie inside the space.
    fn read_at(&self, addr: u64, len: usize) -> Result<Bytes>;
    /// Makes every earlier write durable.
    fn sync(&self) -> Result<()>;
}

fn check_range(addr: u64, len: u64, size: u64) -> Result<()> {
    match addr.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(err::io(format!("extent {addr}+{len} lies outside the data device of {size} bytes"))),
    }
}

/// Alignment of direct IO: buffer address, file offset and length.
pub const DIRECT_ALIGN: usize = 4096;

/// A zeroed buffer of `len` bytes whose start is aligned for direct IO.
pub struct AlignedBuffer {
    bytes: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuffer {
    /// `len` zero bytes starting at a [`DIRECT_ALIGN`]-aligned address.
    pub fn zeroed(len: usize) -> Self {
        let bytes = vec![0u8; len + DIRECT_ALIGN];
        let start = bytes.as_ptr().align_offset(DIRECT_ALIGN);
        AlignedBuffer { bytes, start, len }
    }

    /// The buffer's bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[self.start..self.start + self.len]
    }

    /// The buffer's bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.bytes[self.start..self.start + self.len]
    }
}

/// A data device in one file, preallocated (`fallocate`) so that writes find their blocks
/// already reserved and ENOSPC shows up when the store grows, not in the middle of a write.
/// Aligned writes go through a second handle opened with `O_DIRECT` (no page-cache copy:
/// measured to matter for 4 MiB writes); reads use the page cache.
pub struct FileDevice {
    file: File,
    direct: Option<File>,
    path: PathBuf,
    size: AtomicU64,
    /// The share of the file system (basis points) the device does not grow past.
    failsafe_full: u16,
}

/// The size of the file system holding `path`, in bytes: what a new OSD there weighs.
pub fn file_system_bytes(path: &Path) -> Result<u64> {
    let stat = rustix::fs::statvfs(path)
        .map_err(|e| shoal_types::err::io(format!("file system size of {}: {e}", path.display())))?;
    Ok(stat.f_blocks.saturating_mul(stat.f_frsize))
}

/// How much space the store in `dir` (its key-value files and data device) takes and
/// could still take: the blocks its files hold, less the data device's free `device_free`
/// bytes (allocated to the file but unused), against what the file system has left plus
/// those free bytes.
pub fn store_usage(dir: &Path, device_free: u64) -> Result<StoreUsage> {
    let stat = rustix::fs::statvfs(dir)
        .map_err(|e| shoal_types::err::io(format!("file system space of {}: {e}", dir.display())))?;
    let held = allocated_bytes(dir)?;
    Ok(StoreUsage {
        used: held.saturating_sub(device_free),
        available: stat.f_bavail.saturating_mul(stat.f_frsize).saturating_add(device_free),
    })
}

/// The bytes of blocks the files under `dir` hold.
fn allocated_bytes(dir: &Path) -> Result<u64> {
    use std::os::unix::fs::MetadataExt;
    let entries = std::fs::read_dir(dir).map_err(|e| err::io(format!("listing {}: {e}", dir.display())))?;
    let mut total = 0u64;
    for entry in entries {
        let entry = entry.map_err(|e| err::io(format!("listing {}: {e}", dir.display())))?;
        // A file may go (a compaction's input) between listing and reading it.
        let Ok(meta) = entry.metadata() else { continue };
        total += match meta.is_dir() {
            true => allocated_bytes(&entry.path())?,
            false => meta.blocks() * 512,
        };
    }
    Ok(total)
}

impl FileDevice {
    /// Opens (creating if needed) the device file at `path`.
    pub fn open(path: &Path) -> Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| err::io(format!("opening data device {}: {e}", path.display())))?;
        let size = file.metadata().map_err(|e| err::io(format!("stat {}: {e}", path.display())))?.len();
        // Some file systems (tmpfs) refuse O_DIRECT: then every write is buffered.
        let direct =
            OpenOptions::new().write(true).custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32).open(path).ok();
        Ok(FileDevice { file, direct, path: path.to_owned(), size: AtomicU64::new(size), failsafe_full: WHOLE })
    }

    /// The device will not grow into the last `1 - ratio` (basis points) of its file
    /// system: that space is left for deletes and the key-value store (Ceph's
    /// `osd_failsafe_full_ratio`, 0.97), whatever the map says of the OSD's state.
    pub fn with_failsafe_full_ratio(mut self, basis_points: u16) -> Self {
        self.failsafe_full = basis_points.min(WHOLE);
        self
    }

    /// ENOSPC if growing by `by` bytes leaves the file system fuller than the failsafe ratio.
    fn check_failsafe(&self, by: u64) -> Result<()> {
        if self.failsafe_full >= WHOLE {
            return Ok(());
        }
        let stat = rustix::fs::statvfs(&self.path).map_err(|e| self.io_error("file system space of", e))?;
        let total = u128::from(stat.f_blocks) * u128::from(stat.f_frsize);
        let available = u128::from(stat.f_bavail) * u128::from(stat.f_frsize);
        let reserve = total * u128::from(WHOLE - self.failsafe_full) / u128::from(WHOLE);
        match available < reserve + u128::from(by) {
            true => Err(err::no_space(format!(
                "the file system of {} is past the failsafe full ratio {} (osd_failsafe_full_ratio)",
                self.path.display(),
                f64::from(self.failsafe_full) / f64::from(WHOLE)
            ))),
            false => Ok(()),
        }
    }

    fn io_error(&self, what: &str, e: impl std::fmt::Display) -> shoal_types::RadosError {
        err::io(format!("{what} {}: {e}", self.path.display()))
    }

    /// ENOSPC for a full file system, EIO for anything else.
    fn write_error(&self, what: &str, e: std::io::Error) -> shoal_types::RadosError {
        match e.raw_os_error() == Some(rustix::io::Errno::NOSPC.raw_os_error()) {
            true => err::no_space(format!("{what} {}: the file system is full", self.path.display())),
            false => self.io_error(what, e),
        }
    }
}

impl BlockDevice for FileDevice {
    fn size(&self) -> u64 {
        self.size.load(Ordering::Acquire)
    }

    fn grow(&self, size: u64) -> Result<()> {
        let old = self.size();
        if size <= old {
            return Ok(());
        }
        self.check_failsafe(size - old)?;
        match rustix::fs::fallocate(&self.file, rustix::fs::FallocateFlags::empty(), old, size - old) {
            Ok(()) => {}
            // A file system without fallocate gets a sparse file: blocks are found at write.
            Err(rustix::io::Errno::OPNOTSUPP) => {
                self.file.set_len(size).map_err(|e| self.write_error("growing data device", e))?
            }
            Err(e) => return Err(self.write_error("growing data device", e.into())),
        }
        // The new length must be durable before extents past the old end are referenced.
        self.file.sync_all().map_err(|e| self.write_error("syncing data device", e))?;
        self.size.fetch_max(size, Ordering::AcqRel);
        Ok(())
    }

    /// 1 GiB: a preallocation (and its sync) per GiB written keeps growth off the write path.
    fn grow_step(&self) -> u64 {
        1 << 30
    }

    fn write_at(&self, addr: u64, data: &[u8]) -> Result<()> {
        check_range(addr, data.len() as u64, self.size())?;
        let aligned = |n: usize| n.is_multiple_of(DIRECT_ALIGN);
        let file = match &self.direct {
            Some(direct) if aligned(addr as usize) && aligned(data.len()) && aligned(data.as_ptr() as usize) => direct,
            _ => &self.file,
        };
        file.write_all_at(data, addr).map_err(|e| self.write_error("writing", e))
    }

    fn read_at(&self, addr: u64, len: usize) -> Result<Bytes> {
        check_range(addr, len as u64, self.size())?;
        // Read into spare capacity: zeroing the buffer first cost 4 % of a large GET.
        let mut buffer = Vec::with_capacity(len);
        while buffer.len() < len {
            let at = addr + buffer.len() as u64;
            let n = rustix::io::pread(&self.file, rustix::buffer::spare_capacity(&mut buffer), at)
                .map_err(|e| self.io_error("reading", e))?;
            if n == 0 {
                return Err(self.io_error("reading", format!("end of file at {at}")));
            }
        }
        Ok(Bytes::from(buffer))
    }

    fn sync(&self) -> Result<()> {
        self.file.sync_data().map_err(|e| self.write_error("syncing", e))
    }
}

/// A data device in memory: nothing survives the process.
#[derive(Default)]
pub struct MemDevice {
    bytes: RwLock<Vec<u8>>,
    /// The most it grows to, like a file system's size (`None`: memory is the limit).
    capacity: Option<u64>,
}

impl MemDevice {
    /// An empty device.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty device that refuses (ENOSPC) to grow past `capacity` bytes.
    pub fn with_capacity(capacity: u64) -> Self {
        MemDevice { capacity: Some(capacity), ..Self::default() }
    }
}

impl BlockDevice for MemDevice {
    fn size(&self) -> u64 {
        self.bytes.read().expect("mem device lock poisoned").len() as u64
    }

    fn grow(&self, size: u64) -> Result<()> {
        let mut bytes = self.bytes.write().expect("mem device lock poisoned");
        let too_far = || err::no_space("the memory device cannot grow that far");
        if self.capacity.is_some_and(|capacity| size > capacity) {
            return Err(too_far());
        }
        let size = usize::try_from(size).map_err(|_| too_far())?;
        if size > bytes.len() {
            bytes.resize(size, 0);
        }
        Ok(())
    }

    fn grow_step(&self) -> u64 {
        1 << 20
    }

    fn write_at(&self, addr: u64, data: &[u8]) -> Result<()> {
        let mut bytes = self.bytes.write().expect("mem device lock poisoned");
        check_range(addr, data.len() as u64, bytes.len() as u64)?;
        bytes[addr as usize..addr as usize + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn read_at(&self, addr: u64, len: usize) -> Result<Bytes> {
        let bytes = self.bytes.read().expect("mem device lock poisoned");
        check_range(addr, len as u64, bytes.len() as u64)?;
        Ok(Bytes::copy_from_slice(&bytes[addr as usize..addr as usize + len]))
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exercise(device: &dyn BlockDevice) {
        assert!(device.write_at(0, b"x").is_err(), "an empty device has no space");
        device.grow(8192).unwrap();
        device.grow(4096).unwrap();
        assert_eq!(device.size(), 8192, "grow never shrinks");
        device.write_at(4000, b"hello").unwrap();
        device.sync().unwrap();
        assert_eq!(&device.read_at(4000, 5).unwrap()[..], b"hello");
        assert_eq!(&device.read_at(0, 4).unwrap()[..], [0; 4]);
        let e = device.read_at(8190, 4).unwrap_err();
        assert!(e.message.contains("outside"), "{e}");
        assert!(device.write_at(u64::MAX, b"x").is_err());
    }

    #[test]
    fn memory_and_file_devices_behave_alike() {
        exercise(&MemDevice::new());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("block");
        exercise(&FileDevice::open(&path).unwrap());
        let reopened = FileDevice::open(&path).unwrap();
        assert_eq!(reopened.size(), 8192);
        assert_eq!(&reopened.read_at(4000, 5).unwrap()[..], b"hello");
        let mut block = AlignedBuffer::zeroed(4096);
        block.as_mut_slice().fill(3);
        reopened.write_at(4096, block.as_slice()).unwrap();
        assert_eq!(reopened.read_at(4095, 3).unwrap()[..], [0, 3, 3], "an aligned (direct) write reads back");
    }
}
