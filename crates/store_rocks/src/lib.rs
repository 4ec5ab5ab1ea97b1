//! RocksDB as Shoal's only storage engine: one column family per kind of key, one
//! `WriteBatch` per transaction, and WAL syncs shared by every writer (group commit).
//!
//! Configured by an options string in Ceph's `bluestore_rocksdb_options` format
//! (`key=value` pairs separated by commas); RocksDB's own parser wants semicolons, so
//! top-level commas are translated. This is the only crate that links RocksDB.

use rocksdb::statistics::{Histogram, Ticker};
use rocksdb::{ColumnFamilyDescriptor, DB, Options, WriteBatch, WriteOptions};
use shoal_store::{Batch, BatchOp, Cf, KvEngine, KvStats};
use shoal_types::{RadosError, Result, err};
use std::path::Path;
use std::sync::{RwLock, RwLockReadGuard};

/// The default `store_rocksdb_options`, after Ceph Squid's BlueStore tuning but sized for
/// a store that also keeps object data: 64 MiB memtables (4 at most) so 4 KiB writes are
/// absorbed before a flush, level-style compaction starting at 8 L0 files with a 1 GiB L1
/// and a ×8 multiplier (fewer levels, less rewrite), 4 background jobs, LZ4 (cheap, and
/// Ceph's measurements found it a net win), WAL bounded at 1 GiB so restart replay
/// stays short, and whole-key bloom filters in tables (as BlueStore's
/// `rocksdb_bloom_bits_per_key`) and memtables, so a point read skips the memtables and
/// files that lack its key.
pub const DEFAULT_OPTIONS: &str = "compression=kLZ4Compression,write_buffer_size=67108864,\
max_write_buffer_number=4,min_write_buffer_number_to_merge=1,max_background_jobs=4,\
level0_file_num_compaction_trigger=8,max_bytes_for_level_base=1073741824,\
max_bytes_for_level_multiplier=8,compaction_readahead_size=2097152,max_total_wal_size=1073741824,\
block_based_table_factory={filter_policy=bloomfilter:10:false},\
memtable_whole_key_filtering=true,memtable_prefix_bloom_size_ratio=0.02";

/// Object data chunks are large values: keep those of 16 KiB and more in blob files so
/// compaction moves pointers instead of rewriting them.
const DATA_MIN_BLOB_SIZE: u64 = 16 * 1024;

/// Translates Ceph's comma-separated options into RocksDB's semicolon syntax, leaving
/// commas inside `{…}` nested option groups alone and dropping empty entries.
pub fn ceph_options_to_rocksdb(options: &str) -> Result<String> {
    let mut out = String::with_capacity(options.len());
    let mut depth = 0i32;
    for c in options.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        if depth < 0 {
            return Err(err::invalid(format!("rocksdb options: unbalanced '}}' in {options:?}")));
        }
        out.push(if c == ',' && depth == 0 { ';' } else { c });
    }
    if depth != 0 {
        return Err(err::invalid(format!("rocksdb options: unbalanced '{{' in {options:?}")));
    }
    let parts: Vec<&str> = out.split(';').map(str::trim).filter(|s| !s.is_empty()).collect();
    for part in &parts {
        if !part.contains('=') {
            return Err(err::invalid(format!("rocksdb options: '{part}' is not key=value")));
        }
    }
    Ok(parts.join(";"))
}

fn rocks_err(context: &str, e: rocksdb::Error) -> RadosError {
    err::io(format!("rocksdb {context}: {e}"))
}

/// A RocksDB database holding the object store's column families.
pub struct RocksKv {
    /// `None` once closed: RocksDB must be closed before the process exits, or its
    /// background threads race the C++ static destructors.
    db: RwLock<Option<DB>>,
    options: Options,
    write_options: WriteOptions,
}

impl RocksKv {
    /// Opens (creating if needed) the database in `dir` with a Ceph-style options string.
    pub fn open(dir: &Path, ceph_options: &str) -> Result<Self> {
        let rocks_options = ceph_options_to_rocksdb(ceph_options)?;
        let mut base = Options::default();
        base.create_if_missing(true);
        base.create_missing_column_families(true);
        let mut options = base
            .get_options_from_string(&rocks_options)
            .map_err(|e| err::invalid(format!("rocksdb options {ceph_options:?}: {e}")))?;
        options.create_if_missing(true);
        options.create_missing_column_families(true);
        options.enable_statistics();
        let mut data_base = options.clone();
        data_base.set_enable_blob_files(true);
        data_base.set_min_blob_size(DATA_MIN_BLOB_SIZE);
        data_base.set_enable_blob_gc(true);
        let data_options = data_base
            .get_options_from_string(&rocks_options)
            .map_err(|e| err::invalid(format!("rocksdb options {ceph_options:?}: {e}")))?;
        let descriptors = Cf::ALL.iter().map(|&cf| {
            let cf_options = if cf == Cf::Data { data_options.clone() } else { options.clone() };
            ColumnFamilyDescriptor::new(cf.name(), cf_options)
        });
        let db = DB::open_cf_descriptors(&options, dir, descriptors).map_err(|e| rocks_err("open", e))?;
        let mut write_options = WriteOptions::default();
        write_options.set_sync(false);
        Ok(RocksKv { db: RwLock::new(Some(db)), options, write_options })
    }

    /// The open database, or EIO after [`RocksKv::close`].
    fn db(&self) -> Result<DbGuard<'_>> {
        let guard = self.db.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        if guard.is_none() {
            return Err(err::io("the store is closed"));
        }
        Ok(DbGuard(guard))
    }

    /// Closes the database, waiting for its background work; later calls fail with EIO.
    pub fn close(&self) {
        let db = self.db.write().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        drop(db);
    }

    /// The sum over every column family of the integer properties `names`.
    fn sum_of(&self, names: &[&str]) -> u64 {
        let Ok(db) = self.db() else { return 0 };
        let mut total = 0;
        for cf in Cf::ALL {
            let Ok(handle) = db.cf(cf) else { continue };
            for name in names {
                total += db.get().property_int_value_cf(handle, *name).ok().flatten().unwrap_or(0);
            }
        }
        total
    }

    /// RocksDB's own statistics report (`rocksdb.stats`), for operators.
    pub fn report(&self) -> String {
        self.db()
            .ok()
            .and_then(|db| db.get().property_value(rocksdb::properties::STATS).ok().flatten())
            .unwrap_or_default()
    }
}

/// A read lock on the open database.
struct DbGuard<'a>(RwLockReadGuard<'a, Option<DB>>);

impl DbGuard<'_> {
    fn get(&self) -> &DB {
        self.0.as_ref().expect("DbGuard is only made for an open database")
    }

    fn cf(&self, cf: Cf) -> Result<&rocksdb::ColumnFamily> {
        self.get().cf_handle(cf.name()).ok_or_else(|| err::io(format!("column family {} missing", cf.name())))
    }
}

impl KvEngine for RocksKv {
    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let db = self.db()?;
        db.get().get_cf(db.cf(cf)?, key).map_err(|e| rocks_err("get", e))
    }

    fn scan(&self, cf: Cf, start: &[u8], end: &[u8], limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        if start >= end || limit == 0 {
            return Ok(Vec::new());
        }
        let mut read_options = rocksdb::ReadOptions::default();
        read_options.set_iterate_upper_bound(end.to_vec());
        let db = self.db()?;
        let mut it = db.get().raw_iterator_cf_opt(db.cf(cf)?, read_options);
        it.seek(start);
        let mut rows = Vec::new();
        while it.valid() && rows.len() < limit {
            if let (Some(k), Some(v)) = (it.key(), it.value()) {
                rows.push((k.to_vec(), v.to_vec()));
            }
            it.next();
        }
        it.status().map_err(|e| rocks_err("scan", e))?;
        Ok(rows)
    }

    fn write(&self, batch: Batch) -> Result<()> {
        let db = self.db()?;
        let mut wb = WriteBatch::default();
        for op in &batch {
            match op {
                BatchOp::Put(cf, k, v) => wb.put_cf(db.cf(*cf)?, k, v),
                BatchOp::Delete(cf, k) => wb.delete_cf(db.cf(*cf)?, k),
                BatchOp::DeleteRange(cf, start, end) => {
                    if start < end {
                        wb.delete_range_cf(db.cf(*cf)?, start, end)
                    }
                }
                BatchOp::Move(..) => return Err(BatchOp::unlowered()),
            }
        }
        db.get().write_opt(wb, &self.write_options).map_err(|e| rocks_err("write", e))
    }

    fn sync(&self) -> Result<()> {
        self.db()?.get().flush_wal(true).map_err(|e| rocks_err("wal sync", e))
    }

    fn stats(&self) -> KvStats {
        let o = &self.options;
        let flush = o.get_histogram_data(Histogram::FlushTime);
        let compaction = o.get_histogram_data(Histogram::CompactionTime);
        KvStats {
            user_bytes_written: o.get_ticker_count(Ticker::BytesWritten),
            wal_bytes: o.get_ticker_count(Ticker::WalFileBytes),
            wal_syncs: o.get_ticker_count(Ticker::WalFileSynced),
            flush_bytes: o.get_ticker_count(Ticker::FlushWriteBytes),
            flushes: flush.count(),
            flush_micros: flush.sum(),
            compaction_bytes: o.get_ticker_count(Ticker::CompactWriteBytes),
            compactions: compaction.count(),
            compaction_micros: compaction.sum(),
            stall_micros: o.get_ticker_count(Ticker::StallMicros),
            block_cache_hits: o.get_ticker_count(Ticker::BlockCacheHit),
            block_cache_misses: o.get_ticker_count(Ticker::BlockCacheMiss),
            memtable_hits: o.get_ticker_count(Ticker::MemtableHit),
            memtable_misses: o.get_ticker_count(Ticker::MemtableMiss),
            live_bytes: self.sum_of(&["rocksdb.live-sst-files-size", "rocksdb.live-blob-file-size"]),
            memtable_bytes: self.sum_of(&["rocksdb.size-all-mem-tables"]),
            table_reader_bytes: self.sum_of(&["rocksdb.estimate-table-readers-mem"]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn passes_the_store_conformance_suite() {
        let dirs = std::sync::Mutex::new(Vec::new());
        shoal_store::conformance::run_all(&|| {
            let dir = tempfile::tempdir().unwrap();
            let kv = RocksKv::open(dir.path(), DEFAULT_OPTIONS).unwrap();
            dirs.lock().unwrap().push(dir);
            Arc::new(kv)
        });
    }

    #[test]
    fn ceph_commas_become_semicolons() {
        assert_eq!(ceph_options_to_rocksdb("a=1, b=2,,").unwrap(), "a=1;b=2");
        assert_eq!(
            ceph_options_to_rocksdb("x=1,block_based_table_factory={block_size=4096;a=b},y=2").unwrap(),
            "x=1;block_based_table_factory={block_size=4096;a=b};y=2"
        );
        assert!(ceph_options_to_rocksdb("a=1,{").is_err());
        assert!(ceph_options_to_rocksdb("novalue").unwrap_err().message.contains("novalue"));
    }

    #[test]
    fn bad_options_name_the_problem() {
        let dir = tempfile::tempdir().unwrap();
        let e = RocksKv::open(dir.path(), "compression=kNoSuchCompression").err().unwrap();
        assert_eq!(e.errno, shoal_types::Errno::InvalidArgument);
        assert!(e.message.contains("compression"), "{e}");
        let e = RocksKv::open(dir.path(), "not_an_option=1").err().unwrap();
        assert!(e.message.contains("not_an_option"), "{e}");
    }

    #[test]
    fn statistics_count_writes_and_syncs() {
        let dir = tempfile::tempdir().unwrap();
        let kv = RocksKv::open(dir.path(), "compression=kNoCompression,write_buffer_size=1048576").unwrap();
        for i in 0..100u32 {
            kv.write(vec![BatchOp::Put(Cf::Data, i.to_be_bytes().to_vec(), vec![7; 4096])]).unwrap();
            kv.sync().unwrap();
        }
        let s = kv.stats();
        assert!(s.user_bytes_written >= 100 * 4096, "{s:?}");
        assert!(s.wal_bytes >= s.user_bytes_written, "{s:?}");
        assert!(s.wal_syncs >= 100, "{s:?}");
        assert!(s.write_amplification() >= 1.0);
        assert!(s.memtable_bytes >= 100 * 4096, "the writes sit in a memtable: {s:?}");
        kv.close();
        assert_eq!(kv.get(Cf::Data, b"x").unwrap_err().errno, shoal_types::Errno::Io, "closed stores refuse work");
        let reopened = RocksKv::open(dir.path(), DEFAULT_OPTIONS).unwrap();
        assert_eq!(reopened.get(Cf::Data, &7u32.to_be_bytes()).unwrap(), Some(vec![7; 4096]));
    }
}
