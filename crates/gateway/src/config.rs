//! The gateway's options, named after RGW's where RGW has them.

use std::time::Duration;

/// How a gateway runs.
#[derive(Clone, Debug)]
pub struct GatewayConfig {
    /// Requests processed at once (`rgw_thread_pool_size`); more wait for a slot.
    pub thread_pool_size: usize,
    /// Requests admitted at once, waiting ones included (`rgw_max_concurrent_requests`);
    /// beyond it a request is answered 503 SlowDown.
    pub max_concurrent_requests: usize,
    /// Client connections to the cluster, used in turn (`rgw_num_rados_handles`).
    pub num_rados_handles: usize,
    /// Cache users and bucket records (`rgw_cache_enabled`).
    pub cache_enabled: bool,
    /// Most cached records (`rgw_cache_lru_size`).
    pub cache_lru_size: usize,
    /// Index shards of new buckets (`rgw_override_bucket_index_max_shards`; 0 = 11).
    pub bucket_index_shards: u32,
    /// Bytes per data chunk object, and the largest object kept in its head (`rgw_obj_stripe_size`).
    pub stripe_size: u64,
    /// Largest single PUT in bytes (`rgw_max_put_size`).
    pub max_put_size: u64,
    /// Replaced data waits this long before deletion, for readers still on it (`rgw_gc_obj_min_wait`).
    pub gc_min_wait: Duration,
    /// How often the garbage collector runs (`rgw_gc_processor_period`).
    pub gc_period: Duration,
    /// Replicas of the gateway's pools when it creates them; 0 = min(3, OSDs in the map).
    pub pool_size: u32,
    /// Largest request header section in bytes (`rgw_max_header_size`-like).
    pub max_header_size: usize,
    /// Largest XML request body in bytes.
    pub max_xml_size: usize,
    /// Greatest allowed difference between a request's time and ours.
    pub max_clock_skew: Duration,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            thread_pool_size: 512,
            max_concurrent_requests: 1024,
            num_rados_handles: 1,
            cache_enabled: true,
            cache_lru_size: 10_000,
            bucket_index_shards: 11,
            stripe_size: 4 << 20,
            max_put_size: 5 << 30,
            gc_min_wait: Duration::from_secs(7200),
            gc_period: Duration::from_secs(60),
            pool_size: 0,
            max_header_size: 16 << 10,
            max_xml_size: 20 << 20,
            max_clock_skew: Duration::from_secs(900),
        }
    }
}
