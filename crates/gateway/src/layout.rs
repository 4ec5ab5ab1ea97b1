//! Where the gateway keeps things in the object layer, as RGW does in RADOS: pools,
//! namespaces and object names. `docs/format/gateway.md` describes the same layout.

use shoal_placement::hash::str_hash;

/// Users, access keys, bucket records, upload records, the GC queue and the cache control object.
pub const META_POOL: &str = ".rgw.meta";
/// The bucket index shards.
pub const INDEX_POOL: &str = ".rgw.buckets.index";
/// Head objects, tail chunks and multipart parts.
pub const DATA_POOL: &str = ".rgw.buckets.data";
/// Persistent notification queues (namespace `notif`, see `shoal_notify::queue`).
pub const LOG_POOL: &str = ".rgw.log";
/// Every pool of the gateway.
pub const POOLS: [&str; 4] = [META_POOL, INDEX_POOL, DATA_POOL, LOG_POOL];

/// Namespace of user records (`<uid>` → JSON).
pub const NS_USERS: &str = "users";
/// Namespace of access keys (`<access key>` → uid).
pub const NS_KEYS: &str = "users.keys";
/// Namespace of each user's bucket list (object `<uid>`, omap bucket name → creation time).
pub const NS_USER_BUCKETS: &str = "users.buckets";
/// Namespace of bucket records (`<bucket name>` → JSON).
pub const NS_BUCKETS: &str = "buckets";
/// Namespace of multipart upload records (object `<bucket id>`, omap).
pub const NS_UPLOADS: &str = "uploads";
/// Namespace of the garbage-collection queue.
pub const NS_GC: &str = "gc";
/// Namespace of topic records (`<topic key>` → JSON).
pub const NS_TOPICS: &str = "topics";
/// Namespace of the Swift expirer's hint objects (in the log pool).
pub const NS_OBJEXP: &str = "objexp";
/// Namespace of the cache control object that gateways watch.
pub const NS_CONTROL: &str = "control";

/// Objects the GC queue is spread over (`gc.0` … `gc.7`), so that writers queueing and
/// dropping intents do not all wait on one object.
pub const GC_SHARDS: u32 = 8;

/// GC queue object `shard`.
pub fn gc_object(shard: u32) -> String {
    format!("gc.{shard}")
}
/// The object every gateway watches for cache invalidations.
pub const CONTROL_OBJECT: &str = "notify.0";
/// The key Swift tokens are signed with (namespace `control`, 32 bytes).
pub const SWIFT_TOKEN_KEY_OBJECT: &str = "swift.token_key";

/// Hint object `shard` of the Swift expirer.
pub fn objexp_hint_object(shard: u32) -> String {
    format!("obj_delete_at_hint.{shard}")
}

/// The index shard object `shard` of bucket `bucket_id`.
pub fn index_shard(bucket_id: &str, shard: u32) -> String {
    format!(".dir.{bucket_id}.{shard}")
}

/// The index shard holding `key`: Ceph's `rjenkins` string hash of the key modulo the
/// shard count.
pub fn shard_of(key: &str, shards: u32) -> u32 {
    str_hash(key.as_bytes()) % shards.max(1)
}

/// The head object of `key`: metadata in an xattr, and either the data (small objects) or
/// nothing (the data is in tail segments).
pub fn head_object(bucket_id: &str, key: &str) -> String {
    format!("{bucket_id}_{key}")
}

/// The head object of version `version_id` of `key` in a versioning-enabled bucket (the
/// null version's head is [`head_object`]).
pub fn version_head(bucket_id: &str, key: &str, version_id: &str) -> String {
    format!("{bucket_id}__:{version_id}_{key}")
}

/// The chunk prefix of a plain upload's tail, unique per upload by `tag`.
pub fn tail_prefix(bucket_id: &str, key: &str, tag: &str) -> String {
    format!("{bucket_id}__shadow_{key}.{tag}")
}

/// The chunk prefix of one multipart part, unique per part upload by `tag`.
pub fn part_prefix(bucket_id: &str, key: &str, upload_id: &str, part: u32, tag: &str) -> String {
    format!("{bucket_id}__multipart_{key}.{upload_id}.{part}.{tag}")
}

/// Chunk `index` of a segment.
pub fn chunk_object(prefix: &str, index: u64) -> String {
    format!("{prefix}_{index}")
}

/// The omap key of an upload in its bucket's upload object: key, NUL, upload id.
pub fn upload_key(key: &str, upload_id: &str) -> String {
    format!("{key}\0{upload_id}")
}

/// The omap key that lists a completed upload's record (`upload_key`) for removal once
/// `rgw_multipart_completion_keep` has passed since `done_ns`: `0xff` (which starts no
/// UTF-8 key, so these sort after every upload), `completed`, NUL, the time (20 digits),
/// NUL, the upload's key.
pub fn completed_upload_key(done_ns: u64, key: &str, upload_id: &str) -> Vec<u8> {
    let mut out = COMPLETED_UPLOADS.to_vec();
    out.extend_from_slice(format!("{done_ns:020}\0{}", upload_key(key, upload_id)).as_bytes());
    out
}

/// The start of every [`completed_upload_key`].
pub const COMPLETED_UPLOADS: &[u8] = b"\xffcompleted\0";

/// The start of the omap keys of an upload's part records.
pub fn parts_prefix(key: &str, upload_id: &str) -> String {
    format!("{}\0", upload_key(key, upload_id))
}

/// The omap key of a part record: the upload's key, NUL, the part number (5 digits, so
/// parts list in order).
pub fn part_key(key: &str, upload_id: &str, part: u32) -> String {
    format!("{key}\0{upload_id}\0{part:05}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_spread_keys_and_are_stable() {
        let mut counts = [0u32; 11];
        for i in 0..11_000 {
            counts[shard_of(&format!("obj-{i}"), 11) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (800..1200).contains(&c)), "{counts:?}");
        assert_eq!(shard_of("photos/2026/a.jpg", 11), shard_of("photos/2026/a.jpg", 11));
        assert_eq!(shard_of("x", 1), 0);
    }

    #[test]
    fn part_keys_sort_by_upload_then_number() {
        assert!(part_key("k", "u", 2) < part_key("k", "u", 10));
        assert!(upload_key("k", "u") < part_key("k", "u", 1));
    }
}
