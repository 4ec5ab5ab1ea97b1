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
    /// How long a completed upload's record answers retries of its completion
    /// (`rgw_multipart_completion_keep`).
    pub multipart_completion_keep: Duration,
    /// Test only: where the gateway aborts the process (`rgw_debug_abort_at`), to test
    /// what a crash there leaves.
    pub debug_abort_at: Option<CrashPoint>,
    /// How often the Swift object expirer runs (`rgw_objexp_gc_interval`).
    pub objexp_period: Duration,
    /// Queue entries the garbage collector deletes at once (`rgw_gc_max_concurrent_io`).
    pub gc_max_concurrent_io: usize,
    /// Replicas of the gateway's pools when it creates them; 0 = min(3, OSDs in the map).
    pub pool_size: u32,
    /// The erasure-code profile of the data pool when the gateway creates it
    /// (`rgw_data_pool_erasure_profile`; none: replicated like the other pools).
    pub data_pool_erasure_profile: Option<String>,
    /// Largest request header section in bytes (`rgw_max_header_size`-like).
    pub max_header_size: usize,
    /// Client connections served at once (`rgw_max_connections`); more wait to be accepted.
    pub max_connections: usize,
    /// Longest a client may take to send a request's header, or stay silent between
    /// requests on a kept-alive connection (`rgw_header_read_timeout`).
    pub header_read_timeout: Duration,
    /// Longest a connection may make no progress while the gateway waits to read a body or
    /// to write a response (`rgw_request_timeout`).
    pub request_timeout: Duration,
    /// Accept AWS signature version 2 (`rgw_s3_allow_sigv2`); refused by default, as AWS
    /// does in regions opened since 2014.
    pub allow_sigv2: bool,
    /// Largest body of an unsigned request read before authorization
    /// (`rgw_anonymous_max_body`); larger ones get 400 MaxMessageLengthExceeded.
    pub anonymous_max_body: usize,
    /// How long a request body may take before it must keep up with `body_min_rate`
    /// (`rgw_body_rate_grace`).
    pub body_rate_grace: Duration,
    /// Bytes a second a request body must average after the grace (`rgw_body_min_rate`).
    pub body_min_rate: u64,
    /// Port of the HTTPS endpoint (`rgw_tls_port`; 0: none).
    pub tls_port: u16,
    /// Its certificate chain (`rgw_tls_cert`).
    pub tls_cert: Option<std::path::PathBuf>,
    /// Its private key (`rgw_tls_key`).
    pub tls_key: Option<std::path::PathBuf>,
    /// The key file of SSE-S3 and SSE-KMS master keys (`rgw_crypt_key_file`; none: no
    /// SSE-S3 or SSE-KMS).
    pub crypt_key_file: Option<std::path::PathBuf>,
    /// The key file's key that protects SSE-S3 objects (`rgw_crypt_sse_s3_key_id`).
    pub crypt_sse_s3_key_id: String,
    /// Refuse SSE-C keys over plain HTTP (`rgw_crypt_require_ssl`).
    pub crypt_require_ssl: bool,
    /// Host names of the endpoint (`rgw_dns_name`): `<bucket>.<name>` addresses the bucket.
    pub dns_names: Vec<String>,
    /// Largest XML request body in bytes.
    pub max_xml_size: usize,
    /// Greatest allowed difference between a request's time and ours.
    pub max_clock_skew: Duration,
    /// Bucket notifications and topics.
    pub notify: NotifyConfig,
    /// Port of the Prometheus metrics listener (`rgw_metrics_port`; 0 = none).
    pub metrics_port: u16,
    /// The lifecycle worker.
    pub lifecycle: LcConfig,
    /// How long a Swift token is valid (`rgw_swift_token_expiration`).
    pub swift_token_expiration: Duration,
    /// The first path segment of Swift storage URLs (`rgw_swift_url_prefix`).
    pub swift_url_prefix: String,
}

/// Options of topics and bucket notifications.
#[derive(Clone, Debug)]
pub struct NotifyConfig {
    /// The zonegroup named in ARNs and events (`rgw_zonegroup`).
    pub zonegroup: String,
    /// Queue shards of new persistent topics (`rgw_bucket_persistent_notif_num_shards`).
    pub num_shards: u32,
    /// Bytes a persistent topic's queue holds when the topic does not say (`rgw_topic_persistent_queue_size`).
    pub queue_size: u64,
    /// How long a request waits for room in a full queue before 503 SlowDown (`rgw_notify_reserve_wait`).
    pub reserve_wait: Duration,
    /// Longest a push may take (`rgw_notify_push_timeout`).
    pub push_timeout: Duration,
    /// Accept and store topic passwords over plain HTTP (`rgw_allow_notification_secrets_in_cleartext`).
    pub secrets_in_cleartext: bool,
    /// Delivery timing and defaults.
    pub manager: shoal_notify::manager::ManagerConfig,
}

impl Default for NotifyConfig {
    fn default() -> Self {
        NotifyConfig {
            zonegroup: "default".into(),
            num_shards: 11,
            queue_size: 128 << 20,
            reserve_wait: Duration::from_secs(5),
            push_timeout: Duration::from_secs(5),
            secrets_in_cleartext: false,
            manager: shoal_notify::manager::ManagerConfig::default(),
        }
    }
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
            gc_max_concurrent_io: 10,
            objexp_period: Duration::from_secs(600),
            debug_abort_at: None,
            multipart_completion_keep: Duration::from_secs(3600),
            pool_size: 0,
            data_pool_erasure_profile: None,
            max_header_size: 16 << 10,
            max_connections: 16_384,
            header_read_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(65),
            allow_sigv2: false,
            dns_names: Vec::new(),
            crypt_key_file: None,
            crypt_sse_s3_key_id: "sse-s3".into(),
            crypt_require_ssl: true,
            anonymous_max_body: 64 << 10,
            body_rate_grace: Duration::from_secs(20),
            body_min_rate: 500,
            tls_port: 0,
            tls_cert: None,
            tls_key: None,
            max_xml_size: 20 << 20,
            max_clock_skew: Duration::from_secs(900),
            notify: NotifyConfig::default(),
            metrics_port: 0,
            lifecycle: LcConfig::default(),
            swift_token_expiration: Duration::from_secs(86_400),
            swift_url_prefix: "swift".into(),
        }
    }
}

/// How the lifecycle worker runs.
#[derive(Clone, Debug)]
pub struct LcConfig {
    /// Seconds that count as one day (`rgw_lc_debug_interval`; `None`: real days, counted
    /// from midnight UTC, buckets passed once a day).
    pub debug_interval: Option<Duration>,
    /// Buckets processed at once by one gateway (`rgw_lc_max_worker`).
    pub max_workers: usize,
    /// Keys of one bucket acted on at once (`rgw_lc_max_wp_worker`).
    pub key_workers: usize,
}

impl Default for LcConfig {
    fn default() -> Self {
        LcConfig { debug_interval: None, max_workers: 3, key_workers: 8 }
    }
}

/// A point of the write path where a crash test has the gateway abort.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashPoint {
    /// After writing an object's head, before linking it in the index (`before_link`).
    BeforeLink,
    /// After the index replaced or removed a null version kept in the key's plain head,
    /// before that head is removed (`before_null_head_removal`).
    BeforeNullHeadRemoval,
}

impl std::str::FromStr for CrashPoint {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "before_link" => Ok(CrashPoint::BeforeLink),
            "before_null_head_removal" => Ok(CrashPoint::BeforeNullHeadRemoval),
            other => Err(format!("'{other}' is not before_link or before_null_head_removal")),
        }
    }
}
