//! The S3 gateway, in the spirit of Ceph's RGW: users, buckets with sharded indexes and
//! objects stored in the object layer, served over HTTP with s3s doing the S3 protocol
//! (routing, XML, SigV4 in headers, presigned URLs and aws-chunked streams).
//!
//! Layers, each using only those below it: [`server`] (HTTP, limits) → front ends ([`s3`],
//! [`swift`], [`sns`]) → services ([`service`], [`notifications`], [`lifecycle`], [`gc`]) →
//! data path ([`objects`], [`multipart`], [`events`]) → records ([`meta`], [`head`],
//! [`layout`]) → foundations ([`clock`], [`config`], [`error`], [`request`], …). See
//! docs/ARCHITECTURE.md, "The gateway's layers".

pub mod access;
pub mod checksum;
pub mod clock;
pub mod config;
pub mod cors;
pub mod crypt;
pub mod error;
pub mod events;
pub mod expirer;
pub mod form;
pub mod gc;
pub mod head;
pub mod integrity;
pub mod layout;
pub mod lifecycle;
pub mod meta;
pub mod multipart;
pub mod notifications;
pub mod objects;
pub mod objexp;
pub mod request;
pub mod s3;
pub mod server;
pub mod service;
pub mod sigv4;
pub mod sns;
pub mod stall;
pub mod swift;
pub mod tls;
pub mod xml;

use crate::config::GatewayConfig;
use crate::gc::Gc;
use crate::meta::Meta;
use crate::notifications::{Notifier, Topics};
use crate::objects::{Objects, Pools};
use crate::s3::ShoalS3;
use crate::service::Service;
use crate::sns::Routes;
use s3s::auth::{S3Auth, SecretKey};
use s3s::{S3Result, s3_error};
use shoal_client::Rados;
use shoal_notify::endpoint::Pusher;
use shoal_notify::eventlog::EventLogs;
use shoal_notify::manager::Manager;
use shoal_notify::metrics::Metrics;
use shoal_notify::publish::Publisher;
use shoal_notify::queue::Queues;
use shoal_types::erasure::ErasurePoolSpec;
use shoal_types::{Errno, PoolSpec, Result, err};
use std::sync::Arc;

pub use server::{Front, VirtualHosts};

/// The gateway's state, shared by the HTTP front, the admin commands and background tasks.
#[derive(Clone)]
pub struct Gateway {
    /// The S3 operations.
    pub s3: Arc<ShoalS3>,
    /// The garbage collector.
    pub gc: Arc<Gc>,
    /// The topic API and notification configurations.
    pub routes: Arc<Routes>,
    /// Delivery of persistent topics.
    pub manager: Arc<Manager>,
    /// The lifecycle worker.
    pub lifecycle: Arc<lifecycle::worker::Lifecycle>,
    /// The Swift object expirer.
    pub expirer: Arc<expirer::Expirer>,
    /// Options.
    pub config: GatewayConfig,
}

/// Creates the gateway's pools if they are missing: replicated with `size` replicas (0 =
/// up to 3, as many as there are OSDs), except the data pool, which is erasure-coded with
/// `data_profile` when one is named (the index, metadata and log pools need omap, which
/// erasure-coded pools refuse). An existing data pool is kept as it is.
pub async fn ensure_pools(rados: &Rados, size: u32, data_profile: Option<&str>) -> Result<()> {
    let size = if size == 0 { (rados.map().osds.len() as u32).clamp(1, 3) } else { size };
    let existing = rados.pool_list().await?;
    for name in layout::POOLS {
        if let Some(pool) = existing.iter().find(|p| p.name == name) {
            if name == layout::DATA_POOL && pool.erasure.is_none() && data_profile.is_some() {
                tracing::warn!(
                    pool = name,
                    "the data pool exists and is replicated: rgw_data_pool_erasure_profile only applies to a new one"
                );
            }
            continue;
        }
        let created = match data_profile.filter(|_| name == layout::DATA_POOL) {
            Some(profile) => rados.pool_create_erasure(data_pool_spec(profile)).await,
            None => rados.pool_create(PoolSpec::named(name, size)).await,
        };
        match created {
            Err(e) if e.errno == Errno::AccessDenied => {
                return Err(err::access(format!(
                    "pool {name} is missing and this gateway's key may not create pools: create the gateway's pools with `shoal admin pools` as the cluster's administrator ({})",
                    e.message
                )));
            }
            Err(e) if e.errno != Errno::Exists => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// An erasure-coded data pool of `profile`: whole-object writes only (the gateway never
/// rewrites part of a data object), so no overwrites.
fn data_pool_spec(profile: &str) -> ErasurePoolSpec {
    ErasurePoolSpec {
        name: layout::DATA_POOL.into(),
        pg_num: 32,
        profile: profile.into(),
        min_size: None,
        allow_overwrites: false,
    }
}

impl Gateway {
    /// Opens the gateway's state over `handles` (at least one cluster connection),
    /// creating its pools if needed. Starts no background work.
    pub async fn open(handles: Vec<Rados>, config: GatewayConfig) -> Result<Gateway> {
        let first = handles.first().ok_or_else(|| err::invalid("the gateway needs a cluster connection"))?;
        ensure_pools(first, config.pool_size, config.data_pool_erasure_profile.as_deref()).await?;
        let mut pools = Vec::new();
        for rados in &handles {
            pools.push((rados.ioctx(layout::INDEX_POOL).await?, rados.ioctx(layout::DATA_POOL).await?));
        }
        let meta_pool = first.ioctx(layout::META_POOL).await?;
        let data_pool = first.ioctx(layout::DATA_POOL).await?;
        let index_pool = first.ioctx(layout::INDEX_POOL).await?;
        let gc = Arc::new(Gc::new(meta_pool.clone(), index_pool, data_pool, &config));
        let objects = Arc::new(Objects {
            pools: Arc::new(Pools::new(pools)),
            gc: gc.clone(),
            stripe: config.stripe_size,
            max_size: config.max_put_size,
            clock: Default::default(),
            completion_keep: config.multipart_completion_keep,
            abort_at: config.debug_abort_at,
        });
        let mut uploads = meta_pool.clone();
        uploads.set_namespace(layout::NS_UPLOADS);
        let meta = Meta::new(meta_pool, config.cache_enabled, config.cache_lru_size);
        let log_pool = first.ioctx(layout::LOG_POOL).await?;
        let queues = Queues::new(log_pool.clone());
        let logs = EventLogs::new(first.ioctx(layout::INDEX_POOL).await?, log_pool.clone());
        let publisher = Arc::new(Publisher::new(
            queues.clone(),
            logs.clone(),
            Arc::new(Pusher::new(config.notify.push_timeout)),
            Arc::new(Metrics::default()),
            config.notify.reserve_wait,
        ));
        let notifier = Arc::new(Notifier::new(publisher.clone(), meta.clone(), config.notify.zonegroup.clone()));
        let manager = Manager::new(publisher, Arc::new(Topics(meta.clone())), config.notify.manager.clone());
        let routes =
            Arc::new(Routes { meta: meta.clone(), queues, logs, manager: manager.clone(), config: config.clone() });
        let lifecycle = lifecycle::registry::Registry::new(first.ioctx(layout::LOG_POOL).await?);
        let keyring = match &config.crypt_key_file {
            Some(path) => Some(crypt::Keyring::load(path).map_err(|e| err::invalid(e.to_string()))?),
            None => None,
        };
        let expiry_hints = objexp::Hints::new(log_pool.clone());
        let service = Arc::new(Service {
            meta,
            objects,
            uploads,
            notifier,
            lifecycle,
            expiry_hints,
            keyring,
            config: config.clone(),
        });
        let lifecycle = lifecycle::worker::Lifecycle::new(service.clone(), config.lifecycle.clone());
        let expirer = expirer::Expirer::new(service.clone(), config.objexp_period);
        let s3 = Arc::new(ShoalS3 { service });
        Ok(Gateway { s3, gc, routes, manager, lifecycle, expirer, config })
    }

    /// Starts the background work (cache coherence, garbage collection) and returns the
    /// HTTP front to serve.
    pub fn start(&self) -> Arc<Front> {
        tokio::spawn(self.s3.meta.clone().follow_invalidations());
        tokio::spawn(self.gc.clone().run(self.config.gc_period));
        tokio::spawn(self.manager.clone().run());
        tokio::spawn(self.lifecycle.clone().run());
        tokio::spawn(self.expirer.clone().run());
        let mut builder = s3s::service::S3ServiceBuilder::new((*self.s3).clone());
        builder.set_route(RouteHandle(self.routes.clone()));
        builder.set_auth(Auth(self.s3.meta.clone()));
        builder.set_access(AllowAll);
        if !self.config.dns_names.is_empty() {
            builder.set_host(VirtualHosts(self.config.dns_names.clone()));
        }
        let mut s3_config = s3s::config::S3Config::default();
        s3_config.xml_max_body_size = self.config.max_xml_size;
        s3_config.presigned_url_max_skew_time_secs = self.config.max_clock_skew.as_secs() as u32;
        builder.set_config(Arc::new(s3s::config::StaticConfigProvider::new(Arc::new(s3_config))));
        Front::new(builder.build(), self.routes.clone(), swift::Swift::new(self.s3.clone()), &self.config)
    }
}

impl Gateway {
    /// Registers the gateway's metrics: requests and throttling under `rgw_`, the metadata
    /// cache, and under `notify_` the queue shards and event logs it owns and the
    /// per-topic notification counters and lag.
    pub fn register_metrics(&self, front: Arc<Front>, registry: &mut prometheus_client::registry::Registry) {
        let collector = GatewayCollector { front, meta: self.s3.meta.clone(), manager: self.manager.clone() };
        registry.register_collector(Box::new(collector));
        let notify = registry.sub_registry_with_prefix("notify");
        notify.register_collector(Box::new(self.s3.notifier.publisher.metrics.clone()));
    }
}

/// The gateway's own counters, read when Prometheus scrapes.
struct GatewayCollector {
    front: Arc<Front>,
    meta: Arc<Meta>,
    manager: Arc<Manager>,
}

impl std::fmt::Debug for GatewayCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayCollector").finish_non_exhaustive()
    }
}

impl prometheus_client::collector::Collector for GatewayCollector {
    fn encode(&self, mut encoder: prometheus_client::encoding::DescriptorEncoder) -> std::fmt::Result {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::{counter::ConstCounter, gauge::ConstGauge};
        use std::sync::atomic::Ordering::Relaxed;
        let cache = &self.meta.stats;
        for (name, help, value) in [
            ("rgw_requests", "Requests answered", self.front.stats.requests.load(Relaxed)),
            ("rgw_throttled", "Requests refused with 503 SlowDown", self.front.stats.throttled.load(Relaxed)),
            ("rgw_get", "GET and HEAD requests answered", self.front.stats.gets.load(Relaxed)),
            ("rgw_put", "PUT, POST and COPY requests answered", self.front.stats.puts.load(Relaxed)),
            ("rgw_delete", "DELETE requests answered", self.front.stats.deletes.load(Relaxed)),
            ("rgw_failed_req", "Requests answered with a 5xx status", self.front.stats.failed.load(Relaxed)),
            ("rgw_cache_hits", "Metadata lookups answered from the cache", cache.hits.load(Relaxed)),
            ("rgw_cache_misses", "Metadata lookups that read the object layer", cache.misses.load(Relaxed)),
            (
                "rgw_cache_invalidations",
                "Metadata cache entries dropped on a change",
                cache.invalidations.load(Relaxed),
            ),
        ] {
            let counter = ConstCounter::new(value);
            counter.encode(encoder.encode_descriptor(name, help, None, counter.metric_type())?)?;
        }
        for (name, help, value) in [
            (
                "notify_owned_shards",
                "Notification queue shards this gateway delivers",
                self.manager.owned_shards().len(),
            ),
            ("notify_owned_event_logs", "Bucket index event logs this gateway moves", self.manager.owned_logs().len()),
        ] {
            let gauge = ConstGauge::new(value as i64);
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
        Ok(())
    }
}

/// Looks up secret keys for s3s's signature checks.
struct Auth(Arc<Meta>);

#[async_trait::async_trait]
impl S3Auth for Auth {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        let user = self.0.user_by_access_key(access_key).await.map_err(error::rados_error)?;
        let key = user.as_ref().and_then(|u| u.keys.iter().find(|k| k.access_key == access_key));
        key.map(|k| SecretKey::from(k.secret_key.as_str())).ok_or_else(|| s3_error!(InvalidAccessKeyId))
    }
}

/// Lets anonymous requests through to the operations, which check ACLs themselves.
struct AllowAll;

#[async_trait::async_trait]
impl s3s::access::S3Access for AllowAll {
    async fn check(&self, _cx: &mut s3s::access::S3AccessContext<'_>) -> S3Result<()> {
        Ok(())
    }
}

/// The custom routes as s3s takes them (by value).
struct RouteHandle(Arc<Routes>);

#[async_trait::async_trait]
impl s3s::route::S3Route for RouteHandle {
    fn is_match(
        &self,
        method: &http::Method,
        uri: &http::Uri,
        headers: &http::HeaderMap,
        extensions: &mut http::Extensions,
    ) -> bool {
        self.0.is_match(method, uri, headers, extensions)
    }

    async fn check_access(&self, req: &mut s3s::S3Request<s3s::Body>) -> S3Result<()> {
        self.0.check_access(req).await
    }

    async fn call(&self, req: s3s::S3Request<s3s::Body>) -> S3Result<s3s::S3Response<s3s::Body>> {
        self.0.call(req).await
    }
}
