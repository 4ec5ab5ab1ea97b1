//! Users, access keys and bucket records, kept as JSON objects in the metadata pool and
//! cached in an LRU that every gateway keeps coherent through watch/notify on one control
//! object: a gateway that changes a record notifies the others, which drop their copy.

use crate::access::acl::Acl;
use crate::access::policy::Policy;
use crate::access::{BucketRules, Ownership, PublicAccessBlock};
use crate::layout::{
    CONTROL_OBJECT, NS_BUCKETS, NS_CONTROL, NS_KEYS, NS_TOPICS, NS_USER_BUCKETS, NS_USERS, SWIFT_TOKEN_KEY_OBJECT,
};
use bytes::Bytes;
use futures::future::BoxFuture;
use lru::LruCache;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use shoal_client::{IoCtx, OpBuilder, ReadOp, WatchEvent, WriteOp};
use shoal_notify::filter::NotificationConfig;
use shoal_notify::topic::Topic;
use shoal_types::{Errno, Result, StepOutput, err};
use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Reads and compare-and-swaps of one change of a record before giving up.
const MODIFY_ATTEMPTS: usize = 32;

/// One access key and its secret.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessKey {
    /// The public half (20 characters, like AWS).
    pub access_key: String,
    /// The secret half (40 characters).
    pub secret_key: String,
}

/// A user record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserInfo {
    /// The user id.
    pub uid: String,
    /// Name shown as the owner of buckets and objects.
    pub display_name: String,
    /// Contact address, may be empty.
    #[serde(default)]
    pub email: String,
    /// S3 credentials.
    pub keys: Vec<AccessKey>,
    /// A suspended user's requests are refused.
    #[serde(default)]
    pub suspended: bool,
    /// Subusers (`<uid>:<name>`): Swift identities acting on this user's account.
    #[serde(default)]
    pub subusers: Vec<Subuser>,
    /// Swift keys, one per subuser that has one.
    #[serde(default)]
    pub swift_keys: Vec<SwiftKey>,
    /// Swift account metadata (`X-Account-Meta-*`, names lower-case without the prefix;
    /// `temp-url-key` and `temp-url-key-2` sign temp URLs).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub account_meta: BTreeMap<String, String>,
}

impl UserInfo {
    /// A user with one S3 key and no subusers.
    pub fn new(uid: String, display_name: String, email: String, key: AccessKey) -> UserInfo {
        UserInfo {
            uid,
            display_name,
            email,
            keys: vec![key],
            suspended: false,
            subusers: Vec::new(),
            swift_keys: Vec::new(),
            account_meta: BTreeMap::new(),
        }
    }

    /// The subuser `id` (`<uid>:<name>`).
    pub fn subuser(&self, id: &str) -> Option<&Subuser> {
        self.subusers.iter().find(|s| s.id == id)
    }
}

/// A subuser: a Swift identity of its parent user, with an access level.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subuser {
    /// `<uid>:<name>`.
    pub id: String,
    /// What it may do in its parent's account.
    pub permissions: SubuserAccess,
}

/// How much a subuser may do with its parent's account (RGW's `--access`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum SubuserAccess {
    /// Read containers and objects.
    #[serde(rename = "read")]
    Read,
    /// Write containers and objects, not read them.
    #[serde(rename = "write")]
    Write,
    /// Read and write.
    #[serde(rename = "read-write")]
    ReadWrite,
    /// Everything the parent may, ACLs included.
    #[serde(rename = "full-control")]
    Full,
}

impl std::str::FromStr for SubuserAccess {
    type Err = shoal_types::RadosError;

    fn from_str(text: &str) -> Result<SubuserAccess> {
        match text {
            "read" => Ok(SubuserAccess::Read),
            "write" => Ok(SubuserAccess::Write),
            "readwrite" | "read-write" => Ok(SubuserAccess::ReadWrite),
            "full" | "full-control" => Ok(SubuserAccess::Full),
            other => Err(err::invalid(format!("access '{other}': use read, write, readwrite or full"))),
        }
    }
}

/// A subuser's Swift key (`X-Auth-Key` of v1 auth).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwiftKey {
    /// The subuser, `<uid>:<name>`.
    pub user: String,
    /// The secret.
    pub secret_key: String,
}

/// The canned ACL records written before grant ACLs held (object metadata version 2,
/// bucket records without grants); read, never written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum CannedAcl {
    /// Only the owner.
    #[default]
    Private,
    /// Anyone may read.
    PublicRead,
    /// Anyone may read and write.
    PublicReadWrite,
    /// Any authenticated user may read.
    AuthenticatedRead,
}

impl CannedAcl {
    /// The grants it stood for, on a resource owned by `owner`.
    pub fn grants(self, owner: &str) -> Acl {
        let name = match self {
            CannedAcl::Private => "private",
            CannedAcl::PublicRead => "public-read",
            CannedAcl::PublicReadWrite => "public-read-write",
            CannedAcl::AuthenticatedRead => "authenticated-read",
        };
        Acl::canned(name, owner, owner).unwrap_or_default()
    }
}

/// What [`Meta::modify_record`] did.
enum Modified<T, E> {
    /// The change left the record as it was.
    Unchanged(T),
    /// The record was changed from `old` to `new`.
    Stored { old: T, new: T },
    /// The change refused.
    Refused(E),
}

impl<T, E> Modified<T, E> {
    /// The record as it is now, or the refusal.
    fn outcome(self) -> std::result::Result<T, E> {
        match self {
            Modified::Unchanged(record) | Modified::Stored { new: record, .. } => Ok(record),
            Modified::Refused(e) => Err(e),
        }
    }
}

/// The bucket record `name` as stored (older forms upgraded).
fn bucket_of_record(name: &str, mut record: serde_json::Value) -> Result<BucketInfo> {
    upgrade_bucket_record(&mut record);
    serde_json::from_value(record).map_err(|e| err::io(format!("corrupt record {NS_BUCKETS}/{name}: {e}")))
}

/// A bucket record written before grant ACLs names its canned ACL as a string: turn it
/// into the grants it stood for.
fn upgrade_bucket_record(record: &mut serde_json::Value) {
    let legacy = record.get("acl").and_then(|acl| serde_json::from_value::<CannedAcl>(acl.clone()).ok());
    if let (Some(canned), Some(owner)) = (legacy, record.get("owner").and_then(|o| o.as_str())) {
        let grants = serde_json::to_value(canned.grants(owner)).unwrap_or_default();
        record["acl"] = grants;
    }
}

/// A bucket's versioning state; once versioned, a bucket is never unversioned again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Versioning {
    /// Never versioned: every write replaces the key's only (null) version.
    #[default]
    Off,
    /// Every write adds a version; a DELETE adds a delete marker.
    Enabled,
    /// Writes replace the null version; other versions stay.
    Suspended,
}

/// A bucket's object lock configuration (present: object lock is enabled, for good).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockConfig {
    /// Retention given to new versions that ask for none.
    pub default_retention: Option<DefaultRetention>,
}

/// A default retention: a mode and a period of days or years.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DefaultRetention {
    /// The mode.
    pub mode: shoal_objclass::bucket_index::LockMode,
    /// Days (0 when given in years).
    pub days: u32,
    /// Years (0 when given in days).
    pub years: u32,
}

impl DefaultRetention {
    /// The retention of a version written at `now_ns`.
    pub fn from(&self, now_ns: u64) -> shoal_objclass::bucket_index::Retention {
        const DAY_NS: u64 = 86_400 * 1_000_000_000;
        let days = u64::from(self.days) + 365 * u64::from(self.years);
        shoal_objclass::bucket_index::Retention { mode: self.mode, until_ns: now_ns.saturating_add(days * DAY_NS) }
    }
}

/// A bucket record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketInfo {
    /// The bucket name.
    pub name: String,
    /// Unique id of this incarnation of the bucket; names its index shards and data objects.
    pub id: String,
    /// Owner's uid.
    pub owner: String,
    /// Creation time, nanoseconds since the Unix epoch.
    pub created_ns: u64,
    /// Index shards, fixed at creation.
    pub num_shards: u32,
    /// The bucket's ACL.
    pub acl: Acl,
    /// Notification configurations, by Id.
    #[serde(default)]
    pub notifications: Vec<NotificationConfig>,
    /// Versioning state.
    #[serde(default)]
    pub versioning: Versioning,
    /// Bucket tags.
    #[serde(default)]
    pub tags: Vec<(String, String)>,
    /// Object lock, if enabled.
    #[serde(default)]
    pub object_lock: Option<LockConfig>,
    /// Lifecycle rules (none: no lifecycle configuration).
    #[serde(default)]
    pub lifecycle: Vec<crate::lifecycle::rules::Rule>,
    /// The bucket policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Policy>,
    /// The public access block, if one was put.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_access_block: Option<PublicAccessBlock>,
    /// The object ownership control, if one was put.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ownership: Option<Ownership>,
    /// CORS rules (none: no CORS configuration).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cors: Vec<crate::cors::CorsRule>,
    /// Default encryption of new objects, if configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<crate::crypt::DefaultEncryption>,
    /// What Swift keeps about the container: its metadata and ACLs.
    #[serde(default, skip_serializing_if = "SwiftContainer::is_empty")]
    pub swift: SwiftContainer,
}

/// A container's Swift metadata and ACLs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwiftContainer {
    /// `X-Container-Meta-*`, names lower-case without the prefix.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub meta: BTreeMap<String, String>,
    /// `X-Container-Read`: who else may read (and, with `.rlistings`, list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_acl: Option<String>,
    /// `X-Container-Write`: who else may write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_acl: Option<String>,
}

impl SwiftContainer {
    /// Whether nothing was set.
    pub fn is_empty(&self) -> bool {
        *self == SwiftContainer::default()
    }
}

impl BucketInfo {
    /// What the bucket says about access.
    pub fn rules(&self) -> BucketRules<'_> {
        BucketRules {
            name: &self.name,
            owner: &self.owner,
            acl: &self.acl,
            policy: self.policy.as_ref(),
            public_access_block: self.public_access_block.unwrap_or_default(),
            ownership: self.ownership.unwrap_or_default(),
        }
    }
}

#[derive(Clone)]
enum Cached {
    User(Arc<UserInfo>),
    Uid(String),
    Bucket(Arc<BucketInfo>),
    Topic(Arc<Topic>),
}

/// Counters of the metadata cache.
#[derive(Debug, Default)]
pub struct CacheStats {
    /// Lookups answered from the cache.
    pub hits: AtomicU64,
    /// Lookups that read the object layer.
    pub misses: AtomicU64,
    /// Entries dropped because another gateway (or this one) changed the record.
    pub invalidations: AtomicU64,
}

/// Reads and writes metadata records through the cache.
pub struct Meta {
    pool: IoCtx,
    cache: Option<Mutex<LruCache<String, Cached>>>,
    /// The cluster's Swift token key, once read.
    token_key: tokio::sync::OnceCell<Bytes>,
    /// Cache counters.
    pub stats: CacheStats,
}

fn user_key(uid: &str) -> String {
    format!("user:{uid}")
}
fn access_key_key(access_key: &str) -> String {
    format!("key:{access_key}")
}
fn bucket_key(name: &str) -> String {
    format!("bucket:{name}")
}
fn topic_cache_key(key: &str) -> String {
    format!("topic:{key}")
}

impl Meta {
    /// Metadata in `pool` (the metadata pool), cached up to `lru_size` records unless `cache` is false.
    pub fn new(pool: IoCtx, cache: bool, lru_size: usize) -> Arc<Meta> {
        let cache = NonZeroUsize::new(lru_size).filter(|_| cache).map(|n| Mutex::new(LruCache::new(n)));
        Arc::new(Meta { pool, cache, token_key: tokio::sync::OnceCell::new(), stats: CacheStats::default() })
    }

    fn ns(&self, namespace: &str) -> IoCtx {
        let mut io = self.pool.clone();
        io.set_namespace(namespace);
        io
    }

    fn cache_get(&self, key: &str) -> Option<Cached> {
        let cache = self.cache.as_ref()?;
        let hit = cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(key).cloned();
        let counter = if hit.is_some() { &self.stats.hits } else { &self.stats.misses };
        counter.fetch_add(1, Ordering::Relaxed);
        hit
    }

    fn cache_put(&self, key: String, value: Cached) {
        if let Some(cache) = &self.cache {
            cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner).put(key, value);
        }
    }

    fn cache_drop(&self, keys: &[String]) {
        if let Some(cache) = &self.cache {
            let mut cache = cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            for key in keys {
                if cache.pop(key).is_some() {
                    self.stats.invalidations.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    fn cache_clear(&self) {
        if let Some(cache) = &self.cache {
            cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
        }
    }

    /// Drops `keys` here and tells every other gateway to drop them.
    async fn invalidate(&self, keys: Vec<String>) {
        self.cache_drop(&keys);
        // Notify even without a cache of our own: admin commands change records too.
        let payload = serde_json::to_vec(&keys).unwrap_or_default();
        if let Err(e) = self.ns(NS_CONTROL).notify(CONTROL_OBJECT, payload, Duration::from_secs(5)).await {
            tracing::warn!(error = %e, "cache invalidation notify failed");
        }
    }

    /// Keeps the cache coherent: watches the control object and drops what others changed.
    /// Runs until the process ends; a lost watch empties the cache and watches again.
    pub async fn follow_invalidations(self: Arc<Self>) {
        let control = self.ns(NS_CONTROL);
        loop {
            let watch = match control.operate(CONTROL_OBJECT, WriteOp::new().create(false)).await {
                Ok(_) => control.watch(CONTROL_OBJECT).await,
                Err(e) => Err(e),
            };
            let mut watch = match watch {
                Ok(w) => w,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot watch the cache control object; retrying");
                    self.cache_clear();
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            // Anything cached before the watch was in place may have been missed.
            self.cache_clear();
            while let Some(event) = watch.next().await {
                match event {
                    WatchEvent::Notify(n) => {
                        let keys: Vec<String> = serde_json::from_slice(&n.event.payload).unwrap_or_default();
                        self.cache_drop(&keys);
                        let _ = n.ack(Bytes::new()).await;
                    }
                    WatchEvent::Lost => break,
                }
            }
            self.cache_clear();
        }
    }

    async fn read_json<T: DeserializeOwned>(&self, namespace: &str, name: &str) -> Result<Option<T>> {
        match self.ns(namespace).read_full(name).await {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| err::io(format!("corrupt record {namespace}/{name}: {e}"))),
            Err(e) if e.errno == Errno::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn write_json<T: Serialize>(&self, namespace: &str, name: &str, value: &T, exclusive: bool) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(value).map_err(|e| err::invalid(e.to_string()))?;
        let op =
            if exclusive { WriteOp::new().create(true).write_full(bytes) } else { WriteOp::new().write_full(bytes) };
        self.ns(namespace).operate(name, op).await.map(|_| ())
    }

    /// The key every gateway of the cluster signs and checks Swift tokens with: 32 random
    /// bytes made by the first gateway that needs it (an exclusive create, so all agree).
    pub async fn swift_token_key(&self) -> Result<Bytes> {
        let key = self
            .token_key
            .get_or_try_init(|| async {
                let io = self.ns(NS_CONTROL);
                let fresh: [u8; 32] = rand::random();
                match io.operate(SWIFT_TOKEN_KEY_OBJECT, WriteOp::new().create(true).write_full(fresh.to_vec())).await {
                    Ok(_) => Ok(Bytes::copy_from_slice(&fresh)),
                    Err(e) if e.errno == Errno::Exists => io.read_full(SWIFT_TOKEN_KEY_OBJECT).await,
                    Err(e) => Err(e),
                }
            })
            .await?;
        match key.len() {
            32 => Ok(key.clone()),
            n => Err(err::io(format!("the Swift token key is {n} bytes, not 32"))),
        }
    }

    // ---- users ----

    /// The user `uid`.
    pub async fn user(&self, uid: &str) -> Result<Option<Arc<UserInfo>>> {
        if let Some(Cached::User(u)) = self.cache_get(&user_key(uid)) {
            return Ok(Some(u));
        }
        let user = self.read_json::<UserInfo>(NS_USERS, uid).await?.map(Arc::new);
        if let Some(u) = &user {
            self.cache_put(user_key(uid), Cached::User(u.clone()));
        }
        Ok(user)
    }

    /// The user owning `access_key`.
    pub async fn user_by_access_key(&self, access_key: &str) -> Result<Option<Arc<UserInfo>>> {
        let uid = match self.cache_get(&access_key_key(access_key)) {
            Some(Cached::Uid(uid)) => uid,
            _ => match self.ns(NS_KEYS).read_full(access_key).await {
                Ok(uid) => {
                    let uid = String::from_utf8_lossy(&uid).into_owned();
                    self.cache_put(access_key_key(access_key), Cached::Uid(uid.clone()));
                    uid
                }
                Err(e) if e.errno == Errno::NotFound => return Ok(None),
                Err(e) => return Err(e),
            },
        };
        Ok(self.user(&uid).await?.filter(|u| u.keys.iter().any(|k| k.access_key == access_key)))
    }

    /// Creates a user; EEXIST if the uid or an access key is taken.
    pub async fn create_user(&self, user: &UserInfo) -> Result<()> {
        validate_uid(&user.uid)?;
        let mut claimed = Vec::new();
        let mut result = Ok(());
        for key in &user.keys {
            result = self.claim_key(&user.uid, key).await;
            if result.is_err() {
                break;
            }
            claimed.push(key.access_key.as_str());
        }
        if result.is_ok() {
            result = self.write_json(NS_USERS, &user.uid, user, true).await.map_err(|e| match e.errno {
                Errno::Exists => err::exists(format!("user '{}' exists", user.uid)),
                _ => e,
            });
        }
        if result.is_err() {
            // Leave no key claimed for a user that was not created.
            for access_key in claimed {
                remove_ignoring_missing(&self.ns(NS_KEYS), access_key).await?;
            }
        }
        result
    }

    async fn claim_key(&self, uid: &str, key: &AccessKey) -> Result<()> {
        let op = WriteOp::new().create(true).write_full(uid.as_bytes().to_vec());
        self.ns(NS_KEYS).operate(&key.access_key, op).await.map(|_| ()).map_err(|e| match e.errno {
            Errno::Exists => err::exists(format!("access key '{}' is in use", key.access_key)),
            _ => e,
        })
    }

    /// Applies `change` to user `uid`'s stored record and stores it if that changed it,
    /// without undoing concurrent changes ([`Meta::modify_record`]): keys it adds are
    /// claimed first (EEXIST if another user holds one), keys it drops released after.
    /// Returns the record as it is now, or the change's refusal; ENOENT without the user.
    pub async fn modify_user<E>(
        &self,
        uid: &str,
        change: impl Fn(&mut UserInfo) -> std::result::Result<(), E>,
    ) -> Result<std::result::Result<UserInfo, E>> {
        let parse = |record| {
            serde_json::from_value(record).map_err(|e| err::io(format!("corrupt record {NS_USERS}/{uid}: {e}")))
        };
        let claim_new_keys = |old: &UserInfo, new: &UserInfo| -> BoxFuture<'_, Result<()>> {
            let added: Vec<AccessKey> = new.keys.iter().filter(|k| !old.keys.contains(k)).cloned().collect();
            Box::pin(async move {
                for key in &added {
                    match self.claim_key(uid, key).await {
                        // Claimed by an earlier attempt of this change.
                        Err(e)
                            if e.errno == Errno::Exists
                                && self.ns(NS_KEYS).read_full(&key.access_key).await? == uid => {}
                        other => other?,
                    }
                }
                Ok(())
            })
        };
        let modified = self.modify_record(NS_USERS, uid, parse, |user| Ok(change(user)), claim_new_keys).await?;
        if let Modified::Stored { old, new } = &modified {
            let mut stale = vec![user_key(uid)];
            for key in old.keys.iter().filter(|k| !new.keys.contains(k)) {
                remove_ignoring_missing(&self.ns(NS_KEYS), &key.access_key).await?;
                stale.push(access_key_key(&key.access_key));
            }
            self.invalidate(stale).await;
        }
        Ok(modified.outcome())
    }

    /// Removes a user and its keys; refused while it owns buckets.
    pub async fn remove_user(&self, uid: &str) -> Result<()> {
        let user = self.user(uid).await?.ok_or_else(|| err::not_found(format!("no user '{uid}'")))?;
        if !self.user_buckets(uid).await?.is_empty() {
            return Err(err::busy(format!("user '{uid}' still owns buckets; remove them first")));
        }
        let mut stale = vec![user_key(uid)];
        for key in &user.keys {
            remove_ignoring_missing(&self.ns(NS_KEYS), &key.access_key).await?;
            stale.push(access_key_key(&key.access_key));
        }
        remove_ignoring_missing(&self.ns(NS_USERS), uid).await?;
        remove_ignoring_missing(&self.ns(NS_USER_BUCKETS), uid).await?;
        self.invalidate(stale).await;
        Ok(())
    }

    /// Every user id.
    pub async fn list_users(&self) -> Result<Vec<String>> {
        let mut uids: Vec<String> = self.ns(NS_USERS).list_all(false).await?.into_iter().map(|o| o.name).collect();
        uids.sort();
        Ok(uids)
    }

    // ---- buckets ----

    /// The bucket record of `name`.
    pub async fn bucket(&self, name: &str) -> Result<Option<Arc<BucketInfo>>> {
        if let Some(Cached::Bucket(b)) = self.cache_get(&bucket_key(name)) {
            return Ok(Some(b));
        }
        let bucket = match self.read_json::<serde_json::Value>(NS_BUCKETS, name).await? {
            Some(record) => Some(Arc::new(bucket_of_record(name, record)?)),
            None => None,
        };
        if let Some(b) = &bucket {
            self.cache_put(bucket_key(name), Cached::Bucket(b.clone()));
        }
        Ok(bucket)
    }

    /// Stores a new bucket record; EEXIST if the name is taken.
    pub async fn create_bucket(&self, bucket: &BucketInfo) -> Result<()> {
        self.write_json(NS_BUCKETS, &bucket.name, bucket, true).await?;
        let entry = (Bytes::from(bucket.name.clone()), Bytes::from(bucket.created_ns.to_string()));
        let op = WriteOp::new().create(false).omap_set([entry]);
        self.ns(NS_USER_BUCKETS).operate(&bucket.owner, op).await?;
        self.invalidate(vec![bucket_key(&bucket.name)]).await;
        Ok(())
    }

    /// Applies `change` to the stored record of bucket `name`, incarnation `id`, and
    /// stores it if that changed it, without undoing concurrent changes (see
    /// [`Meta::modify_record`]). `Ok(Err(e))`: `change` refused with `e`; ENOENT: that
    /// incarnation of the bucket is gone.
    pub async fn modify_bucket<E>(
        &self,
        name: &str,
        id: &str,
        change: impl Fn(&mut BucketInfo) -> std::result::Result<(), E>,
    ) -> Result<std::result::Result<(), E>> {
        let parse = |record| bucket_of_record(name, record);
        let apply = |bucket: &mut BucketInfo| match bucket.id == id {
            true => Ok(change(bucket)),
            false => Err(err::not_found(format!("bucket '{name}' was removed and created again"))),
        };
        let modified = self.modify_record(NS_BUCKETS, name, parse, apply, |_, _| Box::pin(async { Ok(()) })).await?;
        if let Modified::Stored { .. } = modified {
            self.invalidate(vec![bucket_key(name)]).await;
        }
        Ok(modified.outcome().map(|_| ()))
    }

    /// Reads record `namespace/name`, applies `change` to a copy and, if that changed it,
    /// runs `before_store` (old, new) and stores the copy guarded by the record object's
    /// version: when another writer got there first the record is read and changed again,
    /// so concurrent changes of different fields all survive. ENOENT without a record,
    /// EAGAIN when others kept winning.
    async fn modify_record<'a, T: Clone + PartialEq + Serialize, E>(
        &'a self,
        namespace: &str,
        name: &str,
        parse: impl Fn(serde_json::Value) -> Result<T>,
        change: impl Fn(&mut T) -> Result<std::result::Result<(), E>>,
        before_store: impl Fn(&T, &T) -> BoxFuture<'a, Result<()>>,
    ) -> Result<Modified<T, E>> {
        let io = self.ns(namespace);
        for _ in 0..MODIFY_ATTEMPTS {
            let reply = match io.read(name, ReadOp::new().read(0, 0)).await {
                Err(e) if e.errno == Errno::NotFound => return Err(err::not_found(format!("no record '{name}'"))),
                other => other?,
            };
            let Some(StepOutput::Data(bytes)) = reply.outputs.into_iter().next() else {
                return Err(err::io(format!("no data read from {namespace}/{name}")));
            };
            let record = serde_json::from_slice(&bytes)
                .map_err(|e| err::io(format!("corrupt record {namespace}/{name}: {e}")))?;
            let old = parse(record)?;
            let mut new = old.clone();
            if let Err(refused) = change(&mut new)? {
                return Ok(Modified::Refused(refused));
            }
            if new == old {
                return Ok(Modified::Unchanged(old));
            }
            before_store(&old, &new).await?;
            let bytes = serde_json::to_vec_pretty(&new).map_err(|e| err::invalid(e.to_string()))?;
            match io.operate(name, WriteOp::new().assert_version(reply.version).write_full(bytes)).await {
                Err(e) if matches!(e.errno, Errno::Range | Errno::Overflow) => continue,
                other => other?,
            };
            return Ok(Modified::Stored { old, new });
        }
        Err(err::again(format!("{namespace}/{name} kept changing while it was being changed")))
    }

    /// Removes a bucket record and its entry in the owner's list.
    pub async fn remove_bucket(&self, bucket: &BucketInfo) -> Result<()> {
        remove_ignoring_missing(&self.ns(NS_BUCKETS), &bucket.name).await?;
        let op = WriteOp::new().omap_rm_keys([Bytes::from(bucket.name.clone())]);
        match self.ns(NS_USER_BUCKETS).operate(&bucket.owner, op).await {
            Err(e) if e.errno != Errno::NotFound => return Err(e),
            _ => {}
        }
        self.invalidate(vec![bucket_key(&bucket.name)]).await;
        Ok(())
    }

    /// Names of the buckets `uid` owns, in order.
    pub async fn user_buckets(&self, uid: &str) -> Result<Vec<String>> {
        let entries = absent_as_empty(self.ns(NS_USER_BUCKETS).omap_vals_all(uid, b"").await)?;
        Ok(entries.into_iter().map(|(k, _)| String::from_utf8_lossy(&k).into_owned()).collect())
    }

    /// Every bucket name.
    pub async fn list_buckets(&self) -> Result<Vec<String>> {
        let mut names: Vec<String> = self.ns(NS_BUCKETS).list_all(false).await?.into_iter().map(|o| o.name).collect();
        names.sort();
        Ok(names)
    }

    // ---- topics ----

    /// The topic with `key` (`Topic::key(tenant, name)`).
    pub async fn topic(&self, key: &str) -> Result<Option<Arc<Topic>>> {
        if let Some(Cached::Topic(t)) = self.cache_get(&topic_cache_key(key)) {
            return Ok(Some(t));
        }
        let topic = self.read_json::<Topic>(NS_TOPICS, key).await?.map(Arc::new);
        if let Some(t) = &topic {
            self.cache_put(topic_cache_key(key), Cached::Topic(t.clone()));
        }
        Ok(topic)
    }

    /// Stores a topic record (new or changed).
    pub async fn put_topic(&self, topic: &Topic) -> Result<()> {
        let key = topic.own_key();
        self.write_json(NS_TOPICS, &key, topic, false).await?;
        self.invalidate(vec![topic_cache_key(&key)]).await;
        Ok(())
    }

    /// Removes a topic record; a missing one is fine.
    pub async fn remove_topic(&self, key: &str) -> Result<()> {
        remove_ignoring_missing(&self.ns(NS_TOPICS), key).await?;
        self.invalidate(vec![topic_cache_key(key)]).await;
        Ok(())
    }

    /// Every topic key, in order.
    pub async fn list_topics(&self) -> Result<Vec<String>> {
        let mut names: Vec<String> = self.ns(NS_TOPICS).list_all(false).await?.into_iter().map(|o| o.name).collect();
        names.sort();
        Ok(names)
    }
}

/// A read of an object that may not exist yet: ENOENT reads as empty.
pub fn absent_as_empty<T: Default>(result: Result<T>) -> Result<T> {
    match result {
        Err(e) if e.errno == Errno::NotFound => Ok(T::default()),
        other => other,
    }
}

/// Removes an object; a missing one is fine.
pub async fn remove_ignoring_missing(io: &IoCtx, name: &str) -> Result<()> {
    match io.remove(name).await {
        Err(e) if e.errno != Errno::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Subuser ids: `<uid>:<name>`, the name 1..=64 letters, digits and `-_.`.
pub fn validate_subuser(uid: &str, id: &str) -> Result<()> {
    let name = id.strip_prefix(uid).and_then(|rest| rest.strip_prefix(':'));
    let ok = name.is_some_and(|n| {
        !n.is_empty() && n.len() <= 64 && n.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    });
    if ok {
        Ok(())
    } else {
        Err(err::invalid(format!("bad subuser '{id}': use {uid}:NAME, NAME 1..=64 letters, digits, - _ .")))
    }
}

/// User ids: 1..=64 characters of letters, digits and `-_.@`.
pub fn validate_uid(uid: &str) -> Result<()> {
    let ok = !uid.is_empty() && uid.len() <= 64 && uid.chars().all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c));
    if ok { Ok(()) } else { Err(err::invalid(format!("bad user id '{uid}': use 1..=64 letters, digits, - _ . @"))) }
}

/// A fresh key pair: 20 upper-case alphanumerics and 40 base64-alphabet characters, like AWS.
pub fn generate_key() -> AccessKey {
    use rand::Rng;
    const UPPER: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    const SECRET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut rng = rand::rng();
    let mut pick = |alphabet: &[u8], n: usize| -> String {
        (0..n).map(|_| alphabet[rng.random_range(0..alphabet.len())] as char).collect()
    };
    AccessKey { access_key: pick(UPPER, 20), secret_key: pick(SECRET, 40) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::acl::{Grant, Grantee, Group, Permission};

    #[test]
    fn a_bucket_record_with_a_canned_acl_reads_as_its_grants_and_new_records_round_trip() {
        let legacy = r#"{"name":"b","id":"i","owner":"o","created_ns":1,"num_shards":11,"acl":"PublicRead"}"#;
        let mut record: serde_json::Value = serde_json::from_str(legacy).unwrap();
        upgrade_bucket_record(&mut record);
        let info: BucketInfo = serde_json::from_value(record).unwrap();
        let grants = vec![
            Grant { grantee: Grantee::User("o".into()), permission: Permission::FullControl },
            Grant { grantee: Grantee::Group(Group::AllUsers), permission: Permission::Read },
        ];
        assert_eq!(info.acl, Acl { grants });
        assert_eq!((info.policy.as_ref(), info.public_access_block, info.ownership), (None, None, None));
        let policy =
            r#"{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}}"#;
        let full = BucketInfo {
            policy: Some(Policy::parse(policy, "b").unwrap()),
            public_access_block: Some(PublicAccessBlock { ignore_public_acls: true, ..Default::default() }),
            ownership: Some(Ownership::BucketOwnerEnforced),
            ..info
        };
        let json = serde_json::to_value(&full).unwrap();
        assert_eq!(json["policy"], policy, "the policy is kept as its text");
        assert_eq!(
            json["acl"]["grants"][1],
            serde_json::json!({"grantee": {"Group": "AllUsers"}, "permission": "Read"})
        );
        let mut again = json.clone();
        upgrade_bucket_record(&mut again);
        assert_eq!(serde_json::from_value::<BucketInfo>(again).unwrap(), full);
    }
}
