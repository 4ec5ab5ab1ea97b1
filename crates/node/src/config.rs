//! Configuration options: a fixed table of known keys with defaults, set on the command
//! line as `--option key=value`. Unknown keys and bad values are errors that name them.

use shoal_osd::{Limits, OsdConfig, ScrubLimits};
use shoal_transport::{FrameMode, FrameModes};
use shoal_types::{OsdId, Result, err};
use std::collections::BTreeMap;

/// One known option.
pub struct OptionSpec {
    /// The key, as Ceph names it where Ceph has it.
    pub name: &'static str,
    /// The default value.
    pub default: &'static str,
    /// What it does.
    pub help: &'static str,
}

/// Options a running daemon applies as soon as they change centrally; every other option
/// takes effect at the daemon's next start (`store_data_chunk_size`: when a store is
/// created).
pub const LIVE_OPTIONS: &[&str] = &[
    "osd_max_object_size",
    "osd_max_write_size",
    "osd_max_attr_name_len",
    "osd_max_attr_size",
    "osd_max_omap_key_len",
    "osd_max_omap_value_size",
    "osd_max_omap_entries_per_request",
    "osd_max_ops_per_request",
    "osd_recovery_max_active",
    "osd_recovery_max_active_with_clients",
    "osd_recovery_sleep",
    "osd_scrub_min_interval",
    "osd_scrub_max_interval",
    "osd_deep_scrub_interval",
    "osd_max_scrubs",
    "osd_scrub_chunk_max",
    "osd_scrub_sleep",
    "osd_scrub_load_threshold",
    "osd_heartbeat_interval",
    "osd_heartbeat_grace",
    "osd_fast_fail_on_connection_refused",
    "mon_osd_down_out_interval",
    "mon_osd_min_down_reporters",
    "mon_balancer_active",
    "mon_balancer_sleep_interval",
    "mon_balancer_max_optimizations",
    "mon_balancer_max_deviation",
    "target_max_misplaced_ratio",
    "osd_pool_default_pg_autoscale_mode",
    "mon_target_pg_per_osd",
    "mon_pg_autoscale_threshold",
    "mon_pg_autoscale_pg_num_min",
    "mon_pg_autoscale_sleep_interval",
];

/// When a change of option `name` takes effect, for `config help`.
pub fn takes_effect(name: &str) -> &'static str {
    match name {
        "store_data_chunk_size" => "when a store is created",
        _ if LIVE_OPTIONS.contains(&name) => "at once",
        _ => "at the daemon's next start",
    }
}

/// Every option this build understands.
pub const OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        name: "store_rocksdb_options",
        default: shoal_store_rocks::DEFAULT_OPTIONS,
        help: "RocksDB options, Ceph's comma-separated format",
    },
    OptionSpec {
        name: "store_sync",
        default: "true",
        help: "acknowledge writes only after the WAL is synced; false is for benchmarks only",
    },
    OptionSpec {
        name: "store_data_chunk_size",
        default: "16384",
        help: "bytes per object data chunk and per checksummed block on the data device",
    },
    OptionSpec {
        name: "store_prefer_deferred_size",
        default: "65536",
        help: "writes of at least this many bytes go to the data device once, smaller ones through the WAL",
    },
    OptionSpec {
        name: "ms_cluster_mode",
        default: "secure crc",
        help: "frame modes between daemons, preferred first: secure (AES-256-GCM sealed) or crc (checksummed, for trusted networks)",
    },
    OptionSpec {
        name: "ms_service_mode",
        default: "secure crc",
        help: "frame modes a daemon accepts from clients (gateways, the CLI): secure, crc",
    },
    OptionSpec {
        name: "ms_client_mode",
        default: "secure crc",
        help: "frame modes a client offers the daemons, preferred first: secure, crc",
    },
    OptionSpec { name: "osd_op_num_shards", default: "0", help: "op shard threads; 0 = one per core, at least 2" },
    OptionSpec { name: "osd_max_object_size", default: "134217728", help: "largest object in bytes (EFBIG beyond)" },
    OptionSpec {
        name: "osd_max_write_size",
        default: "94371840",
        help: "largest single write in bytes (E2BIG beyond)",
    },
    OptionSpec { name: "osd_max_attr_name_len", default: "100", help: "longest xattr name (ENAMETOOLONG beyond)" },
    OptionSpec { name: "osd_max_attr_size", default: "65536", help: "largest xattr value in bytes (E2BIG beyond)" },
    OptionSpec { name: "osd_max_omap_key_len", default: "4096", help: "longest omap key (ENAMETOOLONG beyond)" },
    OptionSpec {
        name: "osd_max_omap_value_size",
        default: "16777216",
        help: "largest omap value or header (E2BIG beyond)",
    },
    OptionSpec {
        name: "osd_max_omap_entries_per_request",
        default: "1024",
        help: "most omap entries one read returns",
    },
    OptionSpec { name: "osd_max_ops_per_request", default: "256", help: "most steps in one compound operation" },
    OptionSpec {
        name: "osd_pg_log_entries",
        default: "3000",
        help: "PG log entries kept per PG to recognise resent requests",
    },
    OptionSpec {
        name: "osd_op_complaint_time",
        default: "30",
        help: "seconds after which an OSD logs a request it answers as slow and counts it (slow_requests)",
    },
    OptionSpec {
        name: "osd_client_message_cap",
        default: "256",
        help: "client operations an OSD admits and has not answered; beyond, clients wait (unread)",
    },
    OptionSpec {
        name: "osd_client_message_size_cap",
        default: "524288000",
        help: "bytes of client data an OSD admits and has not answered; beyond, clients wait (unread)",
    },
    OptionSpec {
        name: "osd_recovery_max_active",
        default: "10",
        help: "recovery operations (pushes, shard rebuilds) an OSD runs at once over all its PGs",
    },
    OptionSpec {
        name: "osd_recovery_max_active_with_clients",
        default: "3",
        help: "the same while the OSD serves clients (a client operation in the last second): recovery yields to them",
    },
    OptionSpec {
        name: "osd_recovery_sleep",
        default: "0",
        help: "seconds an OSD pauses after each recovery operation before the next takes its slot",
    },
    OptionSpec {
        name: "osd_scrub_min_interval",
        default: "86400",
        help: "seconds after its last scrub that a PG is scrubbed again, when the host's load allows",
    },
    OptionSpec {
        name: "osd_scrub_max_interval",
        default: "604800",
        help: "seconds after its last scrub that a PG is scrubbed whatever the load",
    },
    OptionSpec {
        name: "osd_deep_scrub_interval",
        default: "604800",
        help: "seconds after its last deep scrub that a scheduled scrub reads every byte",
    },
    OptionSpec { name: "osd_max_scrubs", default: "3", help: "scrubs an OSD runs at once as primary" },
    OptionSpec {
        name: "osd_scrub_chunk_max",
        default: "25",
        help: "objects a scrub compares per step; client operations run between steps",
    },
    OptionSpec { name: "osd_scrub_sleep", default: "0", help: "seconds a scrub pauses between steps" },
    OptionSpec {
        name: "osd_scrub_load_threshold",
        default: "0.5",
        help: "scheduled scrubs wait while the load average per CPU is above this",
    },
    OptionSpec { name: "osd_heartbeat_interval", default: "6", help: "seconds between pings to peer OSDs" },
    OptionSpec {
        name: "osd_heartbeat_grace",
        default: "20",
        help: "seconds without a ping reply before an OSD reports its peer failed; how long the monitor counts a report",
    },
    OptionSpec {
        name: "osd_fast_fail_on_connection_refused",
        default: "true",
        help: "a peer whose address refuses the connection (its process died) is reported at once, not after the grace",
    },
    OptionSpec {
        name: "osd_crush_initial_weight",
        default: "-1",
        help: "the CRUSH weight a new OSD joins with, in TiB as Ceph counts it; below 0: the size of the file system holding its data",
    },
    OptionSpec {
        name: "osd_failsafe_full_ratio",
        default: "0.97",
        help: "the share of its file system past which an OSD's data device does not grow, whatever the map says: the rest is kept for deletes and the key-value store",
    },
    OptionSpec {
        name: "mon_osd_down_out_interval",
        default: "600",
        help: "seconds an OSD stays down before the monitor marks it out (its data moves)",
    },
    OptionSpec {
        name: "mon_balancer_active",
        default: "false",
        help: "whether the leader monitor runs the balancer on its own (`balancer on|off`): upmap exceptions that even out copies per OSD, while every PG is active+clean",
    },
    OptionSpec { name: "mon_balancer_sleep_interval", default: "60", help: "seconds between two runs of the balancer" },
    OptionSpec {
        name: "mon_balancer_max_optimizations",
        default: "10",
        help: "copies the balancer moves at most per run",
    },
    OptionSpec {
        name: "mon_balancer_max_deviation",
        default: "1",
        help: "copies an OSD may hold above its fair share before the balancer moves some off it",
    },
    OptionSpec {
        name: "target_max_misplaced_ratio",
        default: "0.05",
        help: "the share of a pool's PGs one step of a pgp_num change may move (the leader raises or lowers pgp_num in such steps, each once every PG is active+clean)",
    },
    OptionSpec {
        name: "osd_pool_default_pg_autoscale_mode",
        default: "on",
        help: "the PG autoscaler mode new pools get: on (the leader monitor raises pg_num as a pool fills), warn (a health warning instead) or off",
    },
    OptionSpec {
        name: "mon_target_pg_per_osd",
        default: "100",
        help: "PG copies the autoscaler sizes pools for per OSD",
    },
    OptionSpec {
        name: "mon_pg_autoscale_threshold",
        default: "3",
        help: "how many times above or below its proposal a pool's pg_num must be before the autoscaler changes it or warns",
    },
    OptionSpec {
        name: "mon_pg_autoscale_pg_num_min",
        default: "8",
        help: "the fewest PGs the autoscaler proposes for a pool",
    },
    OptionSpec {
        name: "mon_pg_autoscale_sleep_interval",
        default: "60",
        help: "seconds between two runs of the PG autoscaler",
    },
    OptionSpec {
        name: "mon_osd_min_down_reporters",
        default: "2",
        help: "distinct OSDs that must report a peer failed before it is marked down",
    },
    OptionSpec {
        name: "osd_class_cache_entries",
        default: "65536",
        help: "objects whose object-class state each shard caches",
    },
    OptionSpec { name: "rgw_thread_pool_size", default: "512", help: "S3 requests a gateway processes at once" },
    OptionSpec {
        name: "rgw_max_concurrent_requests",
        default: "1024",
        help: "S3 requests a gateway admits at once (waiting included); beyond, 503 SlowDown",
    },
    OptionSpec { name: "rgw_num_rados_handles", default: "1", help: "cluster connections per gateway" },
    OptionSpec { name: "rgw_cache_enabled", default: "true", help: "cache users and bucket records in the gateway" },
    OptionSpec { name: "rgw_cache_lru_size", default: "10000", help: "records the gateway's metadata cache holds" },
    OptionSpec { name: "rgw_override_bucket_index_max_shards", default: "11", help: "index shards of new buckets" },
    OptionSpec {
        name: "rgw_obj_stripe_size",
        default: "4194304",
        help: "bytes per data chunk object, and the largest object kept in its head",
    },
    OptionSpec { name: "rgw_max_put_size", default: "5368709120", help: "largest single S3 PUT in bytes" },
    OptionSpec {
        name: "rgw_gc_obj_min_wait",
        default: "7200",
        help: "seconds replaced object data waits before garbage collection",
    },
    OptionSpec { name: "rgw_gc_processor_period", default: "60", help: "seconds between garbage collection passes" },
    OptionSpec {
        name: "rgw_debug_abort_at",
        default: "",
        help: "for crash tests only: where the gateway aborts: before_link (an object's head written, not linked in the index) or before_null_head_removal (a null version kept in the key's plain head unlinked, the head not removed)",
    },
    OptionSpec {
        name: "rgw_multipart_completion_keep",
        default: "3600",
        help: "seconds a completed multipart upload answers retries of its completion before its record is removed",
    },
    OptionSpec {
        name: "rgw_objexp_gc_interval",
        default: "600",
        help: "seconds between passes of the Swift object expirer (X-Delete-At)",
    },
    OptionSpec {
        name: "rgw_gc_max_concurrent_io",
        default: "10",
        help: "garbage collection queue entries deleted at once",
    },
    OptionSpec {
        name: "rgw_lc_debug_interval",
        default: "0",
        help: "seconds that count as one lifecycle day (0 = real days; for tests)",
    },
    OptionSpec {
        name: "rgw_lc_max_worker",
        default: "3",
        help: "buckets one gateway's lifecycle worker processes at once",
    },
    OptionSpec {
        name: "rgw_lc_max_wp_worker",
        default: "8",
        help: "keys of one bucket a lifecycle pass acts on at once",
    },
    OptionSpec {
        name: "rgw_pool_size",
        default: "0",
        help: "replicas of the gateway's pools when it creates them; 0 = min(3, OSDs)",
    },
    OptionSpec {
        name: "rgw_data_pool_erasure_profile",
        default: "",
        help: "erasure-code profile of the data pool (object data) when the gateway creates it; empty: replicated",
    },
    OptionSpec { name: "rgw_max_header_size", default: "16384", help: "largest S3 request header section in bytes" },
    OptionSpec {
        name: "rgw_s3_allow_sigv2",
        default: "false",
        help: "accept AWS signature version 2 (headers and presigned URLs); version 4 is always accepted",
    },
    OptionSpec {
        name: "rgw_anonymous_max_body",
        default: "65536",
        help: "largest body in bytes of an unsigned request that is read before it is authorized (anything but object data and form uploads)",
    },
    OptionSpec {
        name: "rgw_body_rate_grace",
        default: "20",
        help: "seconds a request body may take before it must keep up with rgw_body_min_rate",
    },
    OptionSpec {
        name: "rgw_body_min_rate",
        default: "500",
        help: "bytes a second a request body must average after rgw_body_rate_grace; a slower one is cut off",
    },
    OptionSpec { name: "rgw_tls_port", default: "0", help: "also serve S3 over HTTPS on this port (0: no HTTPS)" },
    OptionSpec {
        name: "rgw_tls_cert",
        default: "",
        help: "the HTTPS certificate chain (PEM file, leaf first); read again when it changes",
    },
    OptionSpec { name: "rgw_tls_key", default: "", help: "the HTTPS private key (PEM file)" },
    OptionSpec {
        name: "rgw_crypt_key_file",
        default: "",
        help: "file of master keys for SSE-S3 and SSE-KMS, one id=base64-of-32-bytes per line (shoal server makes DATA/sse.keys when unset)",
    },
    OptionSpec {
        name: "rgw_crypt_sse_s3_key_id",
        default: "sse-s3",
        help: "the key file's key that protects SSE-S3 objects (and SSE-KMS ones that name no key)",
    },
    OptionSpec {
        name: "rgw_crypt_require_ssl",
        default: "true",
        help: "refuse SSE-C (customer-provided keys) over plain HTTP",
    },
    OptionSpec {
        name: "rgw_swift_token_expiration",
        default: "86400",
        help: "seconds a Swift token from /auth/v1.0 is valid",
    },
    OptionSpec {
        name: "rgw_swift_url_prefix",
        default: "swift",
        help: "first path segment of the Swift API (storage URLs are http://HOST/PREFIX/v1)",
    },
    OptionSpec {
        name: "rgw_dns_name",
        default: "",
        help: "host names of the S3 endpoint, comma-separated: a request to <bucket>.<name> addresses the bucket (virtual-host style); path style always works",
    },
    OptionSpec {
        name: "rgw_max_connections",
        default: "16384",
        help: "client connections served at once (at most the open-file limit less 1024); more wait to be accepted",
    },
    OptionSpec {
        name: "rgw_header_read_timeout",
        default: "30",
        help: "seconds a client may take to send a request header or stay silent between requests",
    },
    OptionSpec {
        name: "rgw_request_timeout",
        default: "65",
        help: "seconds a connection may make no progress while a body is read or a response written",
    },
    OptionSpec {
        name: "rados_osd_op_timeout",
        default: "300",
        help: "seconds a client resends an operation (lost connections, primary changes, PGs peering) before ETIMEDOUT",
    },
    OptionSpec {
        name: "rgw_max_clock_skew",
        default: "900",
        help: "seconds a signed request's time may differ from the gateway's",
    },
    OptionSpec {
        name: "rgw_metrics_port",
        default: "0",
        help: "port of the gateway's Prometheus metrics listener (same bind address; 0 = none)",
    },
    OptionSpec { name: "rgw_zonegroup", default: "default", help: "zonegroup named in topic ARNs and events" },
    OptionSpec {
        name: "rgw_bucket_persistent_notif_num_shards",
        default: "11",
        help: "queue shards of a persistent topic, read when the topic is created",
    },
    OptionSpec {
        name: "rgw_topic_persistent_queue_size",
        default: "134217728",
        help: "bytes a persistent topic's queue holds over all shards unless the topic sets persistent_queue_size",
    },
    OptionSpec {
        name: "rgw_notify_reserve_wait",
        default: "5",
        help: "seconds a request waits for room in a full notification queue before 503 SlowDown",
    },
    OptionSpec { name: "rgw_notify_push_timeout", default: "5", help: "seconds one push to an endpoint may take" },
    OptionSpec {
        name: "rgw_allow_notification_secrets_in_cleartext",
        default: "false",
        help: "accept topic passwords over plain HTTP",
    },
    OptionSpec {
        name: "rgw_topic_persistency_time_to_live",
        default: "0",
        help: "seconds a queued event may wait unless its topic says (0 = forever)",
    },
    OptionSpec {
        name: "rgw_topic_persistency_max_retries",
        default: "0",
        help: "failed pushes before a queued event expires unless its topic says (0 = unlimited)",
    },
    OptionSpec {
        name: "rgw_topic_persistency_sleep_duration",
        default: "0",
        help: "least seconds between two pushes of one queued event unless its topic says",
    },
    OptionSpec {
        name: "rgw_notify_lock_duration",
        default: "90",
        help: "seconds a gateway's lease of a notification queue shard or bucket event log lasts",
    },
    OptionSpec {
        name: "rgw_notify_move_interval",
        default: "0.25",
        help: "seconds between a gateway's passes that move logged events from bucket index shards to topic queues",
    },
    OptionSpec {
        name: "rgw_notify_poll_interval",
        default: "30",
        help: "seconds between a gateway's passes that take, renew and give up queue shards and event logs",
    },
];

/// Option values: defaults overridden by `key=value` settings.
#[derive(Clone, Debug)]
pub struct Config {
    values: BTreeMap<&'static str, String>,
    settings: Vec<String>,
}

impl Config {
    /// Defaults with `settings` (`key=value` strings) applied.
    pub fn from_settings(settings: &[String]) -> Result<Config> {
        let mut values: BTreeMap<&'static str, String> =
            OPTIONS.iter().map(|o| (o.name, o.default.to_owned())).collect();
        for setting in settings {
            let (key, value) =
                setting.split_once('=').ok_or_else(|| err::invalid(format!("option '{setting}' is not key=value")))?;
            let spec = OPTIONS
                .iter()
                .find(|o| o.name == key.trim())
                .ok_or_else(|| err::invalid(format!("unknown option '{}' (see `shoal config help`)", key.trim())))?;
            values.insert(spec.name, value.trim().to_owned());
        }
        let config = Config { values, settings: settings.to_vec() };
        config.osd(OsdId(0))?;
        config.bool("store_sync")?;
        config.u64("store_data_chunk_size")?;
        config.u64("store_prefer_deferred_size")?;
        config.initial_weight(0)?;
        config.heartbeat()?;
        config.failure_policy()?;
        config.balancer_policy()?;
        config.gateway()?;
        config.frame_modes()?;
        Ok(config)
    }

    /// The `key=value` settings this configuration was built from.
    pub fn settings(&self) -> &[String] {
        &self.settings
    }

    /// Checks that `who` names a daemon or client class: `global`, `mon`, `osd`, `client`,
    /// or one of them with an id (`osd.3`, `client.gw1`).
    pub fn check_who(who: &str) -> Result<()> {
        let (kind, id) = who.split_once('.').map_or((who, None), |(k, i)| (k, Some(i)));
        let kind_ok = matches!(kind, "global" | "mon" | "osd" | "client");
        let id_ok = match (kind, id) {
            (_, None) => true,
            ("osd", Some(n)) => n.parse::<u32>().is_ok(),
            ("mon" | "client", Some(name)) => {
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            }
            _ => false,
        };
        if kind_ok && id_ok {
            Ok(())
        } else {
            Err(err::invalid(format!("'{who}' is not global, mon, osd, client, osd.N, mon.NAME or client.NAME")))
        }
    }

    /// The frame modes of `ms_cluster_mode`, `ms_service_mode` and `ms_client_mode`.
    pub fn frame_modes(&self) -> Result<FrameModes> {
        let modes = |name: &str| {
            FrameMode::parse_list(self.get(name)).map_err(|e| err::invalid(format!("option {name}: {}", e.message)))
        };
        Ok(FrameModes {
            cluster: modes("ms_cluster_mode")?,
            service: modes("ms_service_mode")?,
            client: modes("ms_client_mode")?,
        })
    }

    /// The raw value of a known option.
    pub fn get(&self, name: &str) -> &str {
        self.values.get(name).map(String::as_str).unwrap_or_default()
    }

    /// The values of `names` (every option when `None`), defaults included.
    pub fn values(&self, names: Option<&[&str]>) -> BTreeMap<String, String> {
        let all: Vec<&str> = OPTIONS.iter().map(|o| o.name).collect();
        names.unwrap_or(&all).iter().map(|&n| (n.to_owned(), self.get(n).to_owned())).collect()
    }

    /// `osd_failsafe_full_ratio` in basis points.
    pub fn failsafe_full_ratio(&self) -> Result<u16> {
        let ratio = self.ratio("osd_failsafe_full_ratio")?;
        Ok((ratio * f64::from(shoal_types::space::WHOLE)).round() as u16)
    }

    /// The CRUSH weight (16.16, TiB) a new OSD joins with: `osd_crush_initial_weight`, or
    /// if that is negative, `capacity` bytes (at least the smallest weight, 16 MiB).
    pub fn initial_weight(&self, capacity: u64) -> Result<u32> {
        let text = self.get("osd_crush_initial_weight");
        let weight: f64 = text
            .parse()
            .map_err(|_| err::invalid(format!("osd_crush_initial_weight must be a number, got '{text}'")))?;
        if weight < 0.0 {
            return Ok(u32::try_from(capacity >> 24).unwrap_or(u32::MAX).max(1));
        }
        if weight >= 65536.0 {
            return Err(err::invalid(format!("osd_crush_initial_weight must be below 65536, got {text}")));
        }
        Ok((weight * 65536.0).round() as u32)
    }

    fn u64(&self, name: &str) -> Result<u64> {
        self.get(name).parse().map_err(|_| err::invalid(format!("option {name}: '{}' is not a number", self.get(name))))
    }

    fn bool(&self, name: &str) -> Result<bool> {
        match self.get(name) {
            "true" | "1" | "yes" => Ok(true),
            "false" | "0" | "no" => Ok(false),
            other => Err(err::invalid(format!("option {name}: '{other}' is not true or false"))),
        }
    }

    /// A (possibly fractional) number option.
    fn number(&self, name: &str) -> Result<f64> {
        self.get(name)
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite())
            .ok_or_else(|| err::invalid(format!("option {name}: '{}' is not a number", self.get(name))))
    }

    /// A number option between 0 and 1.
    fn ratio(&self, name: &str) -> Result<f64> {
        let ratio = self.number(name)?;
        if !(0.0..=1.0).contains(&ratio) {
            return Err(err::invalid(format!("{name} must be between 0 and 1, got {ratio}")));
        }
        Ok(ratio)
    }

    /// A duration option given in (possibly fractional) seconds.
    fn seconds(&self, name: &str) -> Result<std::time::Duration> {
        self.get(name)
            .parse::<f64>()
            .ok()
            .and_then(|s| std::time::Duration::try_from_secs_f64(s).ok())
            .ok_or_else(|| err::invalid(format!("option {name}: '{}' is not a number of seconds", self.get(name))))
    }

    /// How long a client resends an operation before it fails with ETIMEDOUT.
    pub fn op_timeout(&self) -> Result<std::time::Duration> {
        Ok(self.seconds("rados_osd_op_timeout")?.max(std::time::Duration::from_secs(1)))
    }

    /// How OSDs ping each other.
    pub fn heartbeat(&self) -> Result<shoal_osd::heartbeat::HeartbeatOptions> {
        Ok(shoal_osd::heartbeat::HeartbeatOptions {
            interval: self.seconds("osd_heartbeat_interval")?.max(std::time::Duration::from_millis(50)),
            grace: self.seconds("osd_heartbeat_grace")?,
            fast_fail: self.bool("osd_fast_fail_on_connection_refused")?,
        })
    }

    /// How the monitor turns failure reports into down and out.
    pub fn failure_policy(&self) -> Result<shoal_mon::FailurePolicy> {
        Ok(shoal_mon::FailurePolicy {
            down_out_interval: self.seconds("mon_osd_down_out_interval")?,
            min_down_reporters: self.u64("mon_osd_min_down_reporters")?.max(1) as usize,
            report_lifetime: self.seconds("osd_heartbeat_grace")?,
        })
    }

    /// When and how far the leader monitor runs the balancer.
    pub fn balancer_policy(&self) -> Result<shoal_mon::BalancerPolicy> {
        let max_deviation = self.number("mon_balancer_max_deviation")?;
        if max_deviation < 0.0 {
            return Err(err::invalid(format!("mon_balancer_max_deviation must be 0 or more, got {max_deviation}")));
        }
        Ok(shoal_mon::BalancerPolicy {
            active: self.bool("mon_balancer_active")?,
            interval: self.seconds("mon_balancer_sleep_interval")?,
            max_changes: self.u64("mon_balancer_max_optimizations")? as usize,
            max_deviation,
            max_misplaced: self.ratio("target_max_misplaced_ratio")?,
        })
    }

    /// When the leader monitor runs the PG autoscaler and what it proposes by.
    pub fn autoscaler_policy(&self) -> Result<shoal_mon::AutoscalerPolicy> {
        let threshold = self.number("mon_pg_autoscale_threshold")?;
        if threshold < 1.0 {
            return Err(err::invalid(format!("mon_pg_autoscale_threshold must be 1 or more, got {threshold}")));
        }
        shoal_types::autoscale::AutoscaleMode::parse(self.get("osd_pool_default_pg_autoscale_mode"))
            .map_err(|e| err::invalid(format!("option osd_pool_default_pg_autoscale_mode: {}", e.message)))?;
        Ok(shoal_mon::AutoscalerPolicy {
            interval: self.seconds("mon_pg_autoscale_sleep_interval")?,
            proposal: shoal_placement::autoscale::AutoscalePolicy {
                target_pg_per_osd: self.u64("mon_target_pg_per_osd")?.clamp(1, 100_000) as u32,
                threshold,
                pg_num_min: self.u64("mon_pg_autoscale_pg_num_min")?.clamp(1, u64::from(shoal_types::map::MAX_PG_NUM))
                    as u32,
            },
        })
    }

    /// The S3 gateway's options.
    pub fn gateway(&self) -> Result<shoal_gateway::config::GatewayConfig> {
        let usize_of = |name: &str| self.u64(name).map(|v| v as usize);
        Ok(shoal_gateway::config::GatewayConfig {
            thread_pool_size: usize_of("rgw_thread_pool_size")?.max(1),
            max_concurrent_requests: usize_of("rgw_max_concurrent_requests")?.max(1),
            num_rados_handles: usize_of("rgw_num_rados_handles")?.clamp(1, 128),
            cache_enabled: self.bool("rgw_cache_enabled")?,
            cache_lru_size: usize_of("rgw_cache_lru_size")?,
            bucket_index_shards: self.u64("rgw_override_bucket_index_max_shards")?.clamp(1, 65_521) as u32,
            stripe_size: self.u64("rgw_obj_stripe_size")?.clamp(64 << 10, 64 << 20),
            max_put_size: self.u64("rgw_max_put_size")?,
            gc_min_wait: self.seconds("rgw_gc_obj_min_wait")?,
            gc_period: self.seconds("rgw_gc_processor_period")?.max(std::time::Duration::from_millis(100)),
            gc_max_concurrent_io: usize_of("rgw_gc_max_concurrent_io")?.clamp(1, 256),
            multipart_completion_keep: self.seconds("rgw_multipart_completion_keep")?,
            debug_abort_at: match self.get("rgw_debug_abort_at") {
                "" => None,
                point => Some(point.parse().map_err(|e| err::invalid(format!("option rgw_debug_abort_at: {e}")))?),
            },
            objexp_period: self.seconds("rgw_objexp_gc_interval")?.max(std::time::Duration::from_millis(100)),
            pool_size: self.u64("rgw_pool_size")?.min(16) as u32,
            data_pool_erasure_profile: Some(self.get("rgw_data_pool_erasure_profile"))
                .filter(|p| !p.is_empty())
                .map(str::to_owned),
            max_header_size: usize_of("rgw_max_header_size")?,
            max_connections: usize_of("rgw_max_connections")?.max(1),
            allow_sigv2: self.bool("rgw_s3_allow_sigv2")?,
            anonymous_max_body: usize_of("rgw_anonymous_max_body")?.max(1024),
            body_rate_grace: self.seconds("rgw_body_rate_grace")?,
            body_min_rate: self.u64("rgw_body_min_rate")?.max(1),
            tls_port: u16::try_from(self.u64("rgw_tls_port")?)
                .map_err(|_| err::invalid("rgw_tls_port must be a port number"))?,
            tls_cert: Some(self.get("rgw_tls_cert")).filter(|p| !p.is_empty()).map(std::path::PathBuf::from),
            tls_key: Some(self.get("rgw_tls_key")).filter(|p| !p.is_empty()).map(std::path::PathBuf::from),
            crypt_key_file: Some(self.get("rgw_crypt_key_file"))
                .filter(|p| !p.is_empty())
                .map(std::path::PathBuf::from),
            crypt_sse_s3_key_id: self.get("rgw_crypt_sse_s3_key_id").to_owned(),
            crypt_require_ssl: self.bool("rgw_crypt_require_ssl")?,
            dns_names: self
                .get("rgw_dns_name")
                .split(',')
                .map(|name| name.trim().to_ascii_lowercase())
                .filter(|name| !name.is_empty())
                .collect(),
            header_read_timeout: self.seconds("rgw_header_read_timeout")?.max(std::time::Duration::from_millis(100)),
            request_timeout: self.seconds("rgw_request_timeout")?.max(std::time::Duration::from_millis(100)),
            max_clock_skew: self.seconds("rgw_max_clock_skew")?,
            swift_token_expiration: self.seconds("rgw_swift_token_expiration")?,
            swift_url_prefix: match self.get("rgw_swift_url_prefix").trim_matches('/') {
                "" => return Err(err::invalid("rgw_swift_url_prefix must not be empty")),
                prefix => prefix.to_owned(),
            },
            metrics_port: u16::try_from(self.u64("rgw_metrics_port")?)
                .map_err(|_| err::invalid("rgw_metrics_port must be a port number"))?,
            lifecycle: shoal_gateway::config::LcConfig {
                debug_interval: Some(self.seconds("rgw_lc_debug_interval")?).filter(|d| !d.is_zero()),
                max_workers: usize_of("rgw_lc_max_worker")?.clamp(1, 64),
                key_workers: usize_of("rgw_lc_max_wp_worker")?.clamp(1, 256),
            },
            notify: shoal_gateway::config::NotifyConfig {
                zonegroup: self.get("rgw_zonegroup").to_owned(),
                num_shards: self.u64("rgw_bucket_persistent_notif_num_shards")?.clamp(1, 1024) as u32,
                queue_size: self.u64("rgw_topic_persistent_queue_size")?.max(4096),
                reserve_wait: self.seconds("rgw_notify_reserve_wait")?,
                push_timeout: self.seconds("rgw_notify_push_timeout")?.max(std::time::Duration::from_millis(10)),
                secrets_in_cleartext: self.bool("rgw_allow_notification_secrets_in_cleartext")?,
                manager: shoal_notify::manager::ManagerConfig {
                    lease: self.seconds("rgw_notify_lock_duration")?.max(std::time::Duration::from_secs(1)),
                    poll: self.seconds("rgw_notify_poll_interval")?.max(std::time::Duration::from_millis(100)),
                    move_interval: self.seconds("rgw_notify_move_interval")?.max(std::time::Duration::from_millis(10)),
                    time_to_live: self.u64("rgw_topic_persistency_time_to_live")?,
                    max_retries: self.u64("rgw_topic_persistency_max_retries")?,
                    retry_sleep: self.u64("rgw_topic_persistency_sleep_duration")?,
                    ..Default::default()
                },
            },
            ..Default::default()
        })
    }

    /// The store's chunk size.
    pub fn chunk_size(&self) -> Result<u32> {
        u32::try_from(self.u64("store_data_chunk_size")?)
            .map_err(|_| err::invalid("store_data_chunk_size is too large"))
    }

    /// The store's settings for this start.
    pub fn store_options(&self) -> Result<shoal_store::StoreOptions> {
        Ok(shoal_store::StoreOptions { prefer_deferred_size: self.u64("store_prefer_deferred_size")? })
    }

    /// The OSD configuration these options describe.
    pub fn osd(&self, id: OsdId) -> Result<OsdConfig> {
        let usize_of = |name: &str| self.u64(name).map(|v| v as usize);
        let mut osd = OsdConfig::new(id);
        osd.options = self.values(None);
        osd.sync = self.bool("store_sync")?;
        let shards = usize_of("osd_op_num_shards")?;
        if shards > 0 {
            osd.op_shards = shards;
        }
        osd.class_cache_entries = usize_of("osd_class_cache_entries")?.max(1);
        osd.pg_log_entries = usize_of("osd_pg_log_entries")?.max(1);
        osd.client_message_cap = usize_of("osd_client_message_cap")?.max(1);
        osd.client_message_size_cap = usize_of("osd_client_message_size_cap")?.max(1 << 20);
        osd.op_complaint_time = self.seconds("osd_op_complaint_time")?;
        osd.limits = Limits {
            max_object_size: self.u64("osd_max_object_size")?,
            max_write_size: self.u64("osd_max_write_size")?,
            max_attr_name_len: usize_of("osd_max_attr_name_len")?,
            max_attr_size: usize_of("osd_max_attr_size")?,
            max_omap_key_len: usize_of("osd_max_omap_key_len")?,
            max_omap_value_size: usize_of("osd_max_omap_value_size")?,
            max_omap_entries_per_request: self.u64("osd_max_omap_entries_per_request")?.clamp(1, u64::from(u32::MAX))
                as u32,
            max_ops_per_request: usize_of("osd_max_ops_per_request")?,
            recovery_max_active: usize_of("osd_recovery_max_active")?.max(1),
            recovery_max_active_with_clients: usize_of("osd_recovery_max_active_with_clients")?.max(1),
            recovery_sleep: self.seconds("osd_recovery_sleep")?,
            scrub: ScrubLimits {
                min_interval: self.seconds("osd_scrub_min_interval")?,
                max_interval: self.seconds("osd_scrub_max_interval")?,
                deep_interval: self.seconds("osd_deep_scrub_interval")?,
                max_scrubs: usize_of("osd_max_scrubs")?.max(1),
                chunk_max: self.u64("osd_scrub_chunk_max")?.clamp(1, 1024) as u32,
                sleep: self.seconds("osd_scrub_sleep")?,
                load_threshold: self.number("osd_scrub_load_threshold")?,
            },
        };
        Ok(osd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_and_bad_values_are_named() {
        let e = Config::from_settings(&["osd_nonsense=1".into()]).unwrap_err();
        assert!(e.message.contains("osd_nonsense"), "{e}");
        let e = Config::from_settings(&["osd_max_attr_size=big".into()]).unwrap_err();
        assert!(e.message.contains("osd_max_attr_size"), "{e}");
        let e = Config::from_settings(&["store_sync=maybe".into()]).unwrap_err();
        assert!(e.message.contains("store_sync"), "{e}");
        let c = Config::from_settings(&["osd_max_attr_size = 10".into()]).unwrap();
        assert_eq!(c.osd(OsdId(0)).unwrap().limits.max_attr_size, 10);
    }

    #[test]
    fn a_new_osd_weighs_its_file_system_in_tib_unless_told() {
        let sized = Config::from_settings(&[]).unwrap();
        assert_eq!(sized.initial_weight(3 << 40).unwrap(), 3 << 16, "3 TiB weigh 3.0");
        assert_eq!(sized.initial_weight(1 << 30).unwrap(), 64, "1 GiB weighs 1/1024");
        assert_eq!(sized.initial_weight(0).unwrap(), 1, "never nothing");
        let given = Config::from_settings(&["osd_crush_initial_weight=0.5".into()]).unwrap();
        assert_eq!(given.initial_weight(3 << 40).unwrap(), 0x8000);
        for bad in ["osd_crush_initial_weight=heavy", "osd_crush_initial_weight=70000"] {
            let e = Config::from_settings(&[bad.into()]).unwrap_err();
            assert!(e.message.contains("osd_crush_initial_weight"), "{e}");
        }
    }
}
