//! Runs the boto3 / aws CLI suite in `tests/s3` against `shoal server` and against a
//! vstart cluster behind two gateways. The Python interpreter comes from `SHOAL_PYTHON`
//! (scripts/test.sh sets it to a venv with boto3, pytest and the aws CLI).

use shoal_bench::harness::{
    Daemon, Restarted, Vstart, admin_client, cmdline, exe, free_port, kill9, ok, sample, scrape_checked, shoal,
    start_server, wait_clean, wait_listening,
};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The files of the suite that run against every setup.
const FEATURES: &[&str] = &[
    "test_s3.py",
    "test_streaming.py",
    "test_versioning.py",
    "test_writes.py",
    "test_object_lock.py",
    "test_lifecycle.py",
    "test_access.py",
    "test_browser.py",
    "test_checksums.py",
    "test_swift.py",
];

fn suite_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/s3")
}

fn python() -> String {
    std::env::var("SHOAL_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Runs `shoal ARGS` logging to `log`.
fn spawn(args: &[&str], log: &Path) -> Daemon {
    let mut command = shoal();
    command.args(args);
    Daemon::spawn(command, log)
}

/// Runs the pytest `files` of `tests/s3` with `env`.
fn run_suite(files: &[&str], env: &[(&str, String)]) {
    let python = python();
    let bin_dir = Path::new(&python).parent().map(|p| p.to_path_buf()).unwrap_or_default();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let status = Command::new(&python)
        .args(["-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-x"])
        .args(files)
        .current_dir(suite_dir())
        .env("PATH", path)
        .env("SHOAL_BIN", exe())
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .status()
        .expect("cannot run python: run the suite through scripts/test.sh, which installs it");
    assert!(status.success(), "the S3 suite failed");
}

#[test]
fn s3_suite_against_shoal_server() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, port, keys) = start_server(dir.path(), S3_OPTIONS);
    let data = dir.path().join("data");
    // One gateway: everything but the two-gateway coherence tests.
    run_suite(
        &[FEATURES, &["test_bench.py"]].concat(),
        &[
            ("SHOAL_S3_ENDPOINT", format!("http://127.0.0.1:{port}")),
            ("SHOAL_S3_ACCESS_KEY", keys["access_key"].as_str().unwrap().to_owned()),
            ("SHOAL_S3_SECRET_KEY", keys["secret_key"].as_str().unwrap().to_owned()),
            ("SHOAL_CONF", data.join("shoal.conf").to_str().unwrap().to_owned()),
        ],
    );
}

#[test]
fn s3_suite_against_vstart_with_two_gateways() {
    let cluster = Vstart::start("3", "3");
    let conf = cluster.conf();
    let (p1, p2) = (free_port(), free_port());
    let gateways: Vec<Daemon> = [p1, p2]
        .iter()
        .enumerate()
        .map(|(i, port)| {
            let port = port.to_string();
            let mut args = vec!["gateway", "-c", &conf, "--port", &port, "--bind", "127.0.0.1"];
            args.extend(S3_OPTIONS.iter().flat_map(|o| ["-o", o]));
            spawn(&args, &cluster.path().join(format!("gateway.{i}.log")))
        })
        .collect();
    wait_listening(p1);
    wait_listening(p2);
    let out = ok(&conf, &["admin", "user", "create", "--uid", "tester", "--display-name", "Tester"]);
    let user: serde_json::Value = serde_json::from_str(&out).unwrap();
    run_suite(
        &[FEATURES, &["test_coherence.py"]].concat(),
        &[
            ("SHOAL_S3_ENDPOINT", format!("http://127.0.0.1:{p1}")),
            ("SHOAL_S3_ENDPOINT2", format!("http://127.0.0.1:{p2}")),
            ("SHOAL_S3_ACCESS_KEY", user["keys"][0]["access_key"].as_str().unwrap().to_owned()),
            ("SHOAL_S3_SECRET_KEY", user["keys"][0]["secret_key"].as_str().unwrap().to_owned()),
            ("SHOAL_CONF", conf.clone()),
        ],
    );
    drop(gateways);
}

/// `shoal server --ec 4+2`: six OSDs in the process, the data pool created erasure-coded
/// by the gateway (the other pools replicated 3 times), and objects of 0 bytes to 64 MiB
/// stored and read back through S3 (test_erasure.py, phase `write`).
#[test]
fn s3_on_shoal_server_with_an_erasure_coded_data_pool() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let data = dir.path().join("data");
    let port_text = port.to_string();
    let args = ["server", "--data", data.to_str().unwrap(), "--bind", "127.0.0.1", "--port", &port_text, "--ec", "4+2"];
    let _server = spawn(&args, &dir.path().join("server.log"));
    wait_listening(port);
    let conf = data.join("shoal.conf").to_str().unwrap().to_owned();
    let pools = ok(&conf, &["pool", "ls"]);
    let pool = |name: &str| pools.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_default().to_owned();
    assert!(pool(".rgw.buckets.data").contains("erasure profile rgw-4-2 (k 4, m 2"), "{pools}");
    assert!(pool(".rgw.buckets.index").contains("replicated size 3"), "{pools}");
    assert_eq!(ok(&conf, &["osd", "tree"]).matches(" up ").count(), 6);
    let keys: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("admin.json")).unwrap()).unwrap();
    run_suite(
        &["test_erasure.py"],
        &[
            ("SHOAL_S3_ENDPOINT", format!("http://127.0.0.1:{port}")),
            ("SHOAL_S3_ACCESS_KEY", keys["access_key"].as_str().unwrap().to_owned()),
            ("SHOAL_S3_SECRET_KEY", keys["secret_key"].as_str().unwrap().to_owned()),
            ("SHOAL_CONF", conf.clone()),
            ("SHOAL_EC_BUCKET", "ec-server".to_owned()),
            ("SHOAL_EC_PHASE", "write".to_owned()),
        ],
    );
}

/// S3 with object data in an erasure-coded 4+2 pool on six one-OSD hosts (`vstart --ec
/// 4+2`): the data pool made by the admin with min_size 4 (k), as a Ceph admin does for an
/// EC pool that must serve with m shards lost, and the index, metadata and log pools
/// replicated 4 times for the same reason; objects of 0 bytes to 64 MiB stored by PUT,
/// multipart upload and copy, read whole and by ranges (test_erasure.py, phase `write`);
/// two OSDs SIGKILLed and every object read again, decoded from the four shards left (phase
/// `read`); the OSDs restarted and every PG active+clean again.
#[test]
fn s3_on_an_erasure_coded_data_pool_reads_degraded_with_two_osds_down() {
    let cluster = Vstart::start_with(&["--osds", "6", "--hosts", "6", "--ec", "4+2"]);
    let conf = cluster.conf();
    ok(&conf, &["config", "set", "global", "osd_heartbeat_interval", "0.5"]);
    ok(&conf, &["config", "set", "global", "osd_heartbeat_grace", "3"]);
    let data_pool = [".rgw.buckets.data", "--erasure", "rgw-4-2", "--min-size", "4", "--pg-num", "32"];
    ok(&conf, &[&["pool", "create"][..], &data_pool].concat());
    let port = free_port();
    let port_text = port.to_string();
    let args = ["gateway", "-c", &conf, "--port", &port_text, "--bind", "127.0.0.1", "-o", "rgw_pool_size=4"];
    let _gateway = spawn(&args, &cluster.path().join("gateway.log"));
    wait_listening(port);
    let pools = ok(&conf, &["pool", "ls"]);
    let data_pool = pools.lines().find(|l| l.starts_with(".rgw.buckets.data ")).unwrap_or_default();
    assert!(data_pool.contains("erasure profile rgw-4-2 (k 4, m 2") && data_pool.contains("min_size 4"), "{pools}");
    let out = ok(&conf, &["admin", "user", "create", "--uid", "tester", "--display-name", "Tester"]);
    let user: serde_json::Value = serde_json::from_str(&out).unwrap();
    let env = |phase: &str| {
        vec![
            ("SHOAL_S3_ENDPOINT", format!("http://127.0.0.1:{port}")),
            ("SHOAL_S3_ACCESS_KEY", user["keys"][0]["access_key"].as_str().unwrap().to_owned()),
            ("SHOAL_S3_SECRET_KEY", user["keys"][0]["secret_key"].as_str().unwrap().to_owned()),
            ("SHOAL_CONF", conf.clone()),
            ("SHOAL_EC_BUCKET", "ec-data".to_owned()),
            ("SHOAL_EC_PHASE", phase.to_owned()),
        ]
    };
    run_suite(&["test_erasure.py"], &env("write"));
    let victims = ["osd.1", "osd.4"];
    let commands: Vec<Vec<String>> = victims.iter().map(|name| cmdline(cluster.pid(name))).collect();
    for name in victims {
        kill9(cluster.pid(name));
    }
    run_suite(&["test_erasure.py"], &env("read"));
    let mut restarted = Restarted::default();
    for (name, command) in victims.iter().zip(&commands) {
        restarted.restart(&cluster, name, command);
    }
    wait_clean(&conf, 128, "after the OSDs' restart");
}

/// Makes a test CA and a certificate it signed for 127.0.0.1 and localhost (`<name>.pem`,
/// `<name>.key`) in `dir` with the openssl command.
fn issue_certificate(dir: &Path, name: &str) {
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl (scripts/test-env.sh installs it)");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
    if !dir.join("ca.pem").exists() {
        run(&[
            &["req", "-x509"][..],
            &ec,
            &["-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=Shoal test CA"],
        ]
        .concat());
    }
    std::fs::write(dir.join("ext.cnf"), "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
        .unwrap();
    let (key, csr, pem) = (format!("{name}.key"), format!("{name}.csr"), format!("{name}.pem"));
    run(&[&["req"][..], &ec, &["-keyout", &key, "-out", &csr, "-subj", &format!("/CN={name}")]].concat());
    run(&[
        "x509",
        "-req",
        "-in",
        &csr,
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        &pem,
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
    ]);
}

/// Master keys of the encryption tests (test keys: never use them for data).
const TEST_SSE_KEYS: &str = "sse-s3=6hggYNczAwfY9p2COrhMf7VVJBjOw1LhK1FuskWhkBc=\n\
                             kms-a=l/0WWKUuxjGsdOjSGZ2uUVmndVo6smT3Xg0pYVvHmNU=\n\
                             kms-b=H3/zz+u/QOkLgqGtLt9SQhqbX78CiTRpGjgHrcYE3ec=\n";

/// `shoal server` serving S3 over HTTP and HTTPS at once, with a test CA: boto3 and the
/// aws CLI over HTTPS, aws:SecureTransport in policies, trailing checksums (what SDKs
/// send over TLS), and a renewed certificate served without a restart (test_tls.py); and
/// server-side encryption with a key file, SSE-C over HTTPS (test_encryption.py).
#[test]
fn s3_over_https_with_a_test_ca() {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    issue_certificate(&certs, "server");
    let tls_port = free_port().to_string();
    let (cert, key) = (certs.join("server.pem"), certs.join("server.key"));
    let key_file = dir.path().join("sse.keys");
    std::fs::write(&key_file, TEST_SSE_KEYS).unwrap();
    let options = [
        &["rgw_tls_port=", tls_port.as_str()].concat(),
        &format!("rgw_tls_cert={}", cert.display()),
        &format!("rgw_tls_key={}", key.display()),
        &format!("rgw_crypt_key_file={}", key_file.display()),
    ];
    let options: Vec<&str> = options.iter().map(|o| o.as_str()).collect();
    let (_server, port, keys) = start_server(dir.path(), &options);
    wait_listening(tls_port.parse().unwrap());
    let data = dir.path().join("data");
    run_suite(
        &["test_tls.py", "test_encryption.py"],
        &[
            ("SHOAL_S3_ENDPOINT", format!("http://127.0.0.1:{port}")),
            ("SHOAL_S3_HTTPS_ENDPOINT", format!("https://127.0.0.1:{tls_port}")),
            ("SHOAL_TLS_CA", certs.join("ca.pem").to_str().unwrap().to_owned()),
            ("SHOAL_TLS_DIR", certs.to_str().unwrap().to_owned()),
            ("SHOAL_S3_ACCESS_KEY", keys["access_key"].as_str().unwrap().to_owned()),
            ("SHOAL_S3_SECRET_KEY", keys["secret_key"].as_str().unwrap().to_owned()),
            ("SHOAL_CONF", data.join("shoal.conf").to_str().unwrap().to_owned()),
        ],
    );
}

/// Gateway options for the S3 suite: a lifecycle day lasts two seconds.
const S3_OPTIONS: &[&str] =
    &["rgw_lc_debug_interval=2", "rgw_objexp_gc_interval=1", "rgw_multipart_completion_keep=3", "rgw_dns_name=s3.test"];

/// Gateway options for the notification suite: short leases and polls so
/// takeovers and crash recovery happen within seconds.
const NOTIFY_OPTIONS: &[&str] = &[
    "rgw_lc_debug_interval=2",
    "rgw_notify_lock_duration=3",
    "rgw_notify_poll_interval=0.5",
    "rgw_notify_reserve_wait=1",
    "rgw_notify_push_timeout=2",
];

/// The test brokers' ports, which scripts/test.sh exports after starting them.
fn broker_env() -> Vec<(&'static str, String)> {
    ["SHOAL_AMQP_PORT", "SHOAL_KAFKA_PORT"]
        .into_iter()
        .map(|name| {
            let port = std::env::var(name).unwrap_or_else(|_| {
                panic!("{name} is not set: run the suite through scripts/test.sh, which starts the brokers")
            });
            (name, port)
        })
        .collect()
}

#[test]
fn notification_suite_against_shoal_server() {
    let dir = tempfile::tempdir().unwrap();
    let metrics_port = free_port();
    let metrics_option = format!("rgw_metrics_port={metrics_port}");
    let options: Vec<&str> = NOTIFY_OPTIONS.iter().copied().chain([metrics_option.as_str()]).collect();
    let (_server, port, keys) = start_server(dir.path(), &options);
    let data = dir.path().join("data");
    let mut env = vec![
        ("SHOAL_S3_ENDPOINT", format!("http://127.0.0.1:{port}")),
        ("SHOAL_S3_ACCESS_KEY", keys["access_key"].as_str().unwrap().to_owned()),
        ("SHOAL_S3_SECRET_KEY", keys["secret_key"].as_str().unwrap().to_owned()),
        ("SHOAL_CONF", data.join("shoal.conf").to_str().unwrap().to_owned()),
        ("SHOAL_METRICS_URLS", format!("http://127.0.0.1:{metrics_port}/metrics")),
    ];
    env.extend(broker_env());
    run_suite(&["test_notify.py"], &env);
    // The Prometheus listener shows the requests and the per-topic counters the suite made,
    // with the embedded monitor's and OSD's, in a text promtool accepts.
    let text = scrape_checked(&format!("http://127.0.0.1:{metrics_port}/metrics"));
    let total = |series: &str| -> u64 {
        let prefix = format!("{series}{{topic=");
        text.lines().filter(|l| l.starts_with(&prefix)).filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok()).sum()
    };
    assert!(
        total("shoal_notify_delivered_total") >= 512,
        "per-topic delivery counters on the metrics endpoint: {text}"
    );
    assert!(total("shoal_notify_moved_total") > 0, "events moved from the bucket index logs: {text}");
    assert!(text.contains("\nshoal_notify_owned_event_logs "), "{text}");
    assert!(text.contains("shoal_notify_expired_total{topic=") && text.contains("shoal_rgw_requests_total"), "{text}");
    assert!(
        text.contains("shoal_notify_pending{topic=") && text.contains("shoal_notify_delivery_latency_seconds_bucket")
    );
    assert_eq!(sample(&text, "shoal_mon_osds_up"), Some(1.0), "{text}");
    let writes = sample(&text, "shoal_osd_op_latency_seconds_count{daemon=\"osd.0\",op=\"write\"}");
    assert!(writes.is_some_and(|n| n > 0.0), "{text}");
}

/// The notification suite against two gateways of a 3-OSD cluster, plus SIGKILLs of a
/// gateway during PUTs and during delivery (`test_notify_crash.py`, which restarts it).
#[test]
fn notification_suite_against_vstart_with_two_gateways() {
    let cluster = Vstart::start("3", "3");
    let conf = cluster.conf();
    let (p1, p2) = (free_port(), free_port());
    let (m1, m2) = (free_port(), free_port());
    let gateway_args = |port: u16, metrics: u16| {
        let mut args: Vec<String> = ["gateway", "-c", &conf, "--port", &port.to_string(), "--bind", "127.0.0.1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(["--metrics-port".to_string(), metrics.to_string()]);
        for option in NOTIFY_OPTIONS {
            args.extend(["-o".to_string(), option.to_string()]);
        }
        args
    };
    let args1 = gateway_args(p1, m1);
    let first = spawn(&args1.iter().map(String::as_str).collect::<Vec<_>>(), &cluster.path().join("gateway.0.log"));
    let args2 = gateway_args(p2, m2);
    let second = spawn(&args2.iter().map(String::as_str).collect::<Vec<_>>(), &cluster.path().join("gateway.1.log"));
    wait_listening(p1);
    wait_listening(p2);
    let out = ok(&conf, &["admin", "user", "create", "--uid", "tester", "--display-name", "Tester"]);
    let user: serde_json::Value = serde_json::from_str(&out).unwrap();
    let mut env = vec![
        ("SHOAL_S3_ENDPOINT", format!("http://127.0.0.1:{p1}")),
        ("SHOAL_S3_ENDPOINT2", format!("http://127.0.0.1:{p2}")),
        ("SHOAL_S3_ACCESS_KEY", user["keys"][0]["access_key"].as_str().unwrap().to_owned()),
        ("SHOAL_S3_SECRET_KEY", user["keys"][0]["secret_key"].as_str().unwrap().to_owned()),
        ("SHOAL_CONF", conf.clone()),
        ("SHOAL_METRICS_URLS", format!("http://127.0.0.1:{m1}/metrics,http://127.0.0.1:{m2}/metrics")),
        ("SHOAL_GATEWAY2_PID", second.0.id().to_string()),
        ("SHOAL_GATEWAY2_ARGS", serde_json::to_string(&args2).unwrap()),
        ("SHOAL_GATEWAY2_LOG", cluster.path().join("gateway.1.restarted.log").to_str().unwrap().to_owned()),
    ];
    env.extend(broker_env());
    run_suite(&["test_notify.py", "test_notify_crash.py"], &env);
    // The second gateway's last incarnation belonged to the crash suite, which ended it.
    let text = scrape_checked(&format!("http://127.0.0.1:{m1}/metrics"));
    assert!(text.contains("shoal_rgw_requests_total ") && text.contains("shoal_notify_owned_shards "), "{text}");
    drop((first, second));
}

/// Requests beyond `rgw_max_concurrent_requests` get 503 SlowDown at once; a body over
/// `rgw_max_put_size` gets EntityTooLarge; several cluster handles serve requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_answer_slow_down_and_entity_too_large() {
    use bytes::Bytes;
    use http::Method;
    let dir = tempfile::tempdir().unwrap();
    let options = [
        "rgw_max_concurrent_requests=4",
        "rgw_thread_pool_size=2",
        "rgw_max_put_size=100000",
        "rgw_num_rados_handles=3",
    ];
    let (_server, port, keys) = start_server(dir.path(), &options);
    let s3 = admin_client(port, &keys);
    s3.expect_ok(Method::PUT, "/limits", &[], Bytes::new()).await.unwrap();
    let big = s3.send(Method::PUT, "/limits/big", &[], Bytes::from(vec![7u8; 100_001])).await.unwrap();
    assert_eq!(big.status.as_u16(), 400);
    assert!(String::from_utf8_lossy(&big.body).contains("<Code>EntityTooLarge</Code>"));
    // Four requests whose bodies never come fill the admission limit; the next is refused.
    use std::io::{Read, Write};
    let raw = |path: &str, hash: &str, extra: &str| {
        let (target, headers) = s3.sign(&Method::PUT, path, &[], hash);
        let mut head = format!("PUT {target} HTTP/1.1\r\nContent-Length: 1\r\n{extra}");
        for (name, value) in headers {
            head += &format!("{name}: {value}\r\n");
        }
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
        stream.write_all(format!("{head}\r\n").as_bytes()).unwrap();
        stream
    };
    // Signed for a one-byte body that is never sent.
    let stalled: Vec<_> = (0..4).map(|i| raw(&format!("/limits/stalled{i}"), &format!("{:064x}", i + 1), "")).collect();
    // Let the server admit all four before probing: a probe admitted first would take a
    // stalled request's place (that one gets the 503) and leave a free slot behind.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let mut refused = None;
    for _ in 0..100 {
        let one_byte_hash = "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb";
        let mut probe = raw("/limits/probe", one_byte_hash, "Connection: close\r\n");
        probe.write_all(b"a").unwrap();
        let mut response = String::new();
        let _ = probe.read_to_string(&mut response);
        if response.starts_with("HTTP/1.1 503") {
            refused = Some(response);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    if refused.is_none() {
        for mut stream in stalled {
            stream.set_read_timeout(Some(std::time::Duration::from_millis(200))).unwrap();
            let mut buf = [0u8; 400];
            let n = stream.read(&mut buf).unwrap_or(0);
            eprintln!("a stalled request was answered: {:?}", String::from_utf8_lossy(&buf[..n]));
        }
        panic!("a request beyond rgw_max_concurrent_requests was admitted");
    }
    let body = refused.unwrap();
    assert!(body.contains("<Code>SlowDown</Code>") && body.contains("<RequestId>"), "{body}");
    drop(stalled);
    // Once the stalled requests end, requests are admitted again (served by three cluster handles).
    let mut ok = 0;
    for _ in 0..100 {
        let response =
            s3.send(Method::PUT, &format!("/limits/k{ok}"), &[], Bytes::from(vec![1u8; 50_000])).await.unwrap();
        if response.status.is_success() {
            ok += 1;
            if ok == 8 {
                break;
            }
        } else {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    assert_eq!(ok, 8, "requests are admitted again after the stalled ones end");
    // Only the `k` keys: a probe that raced ahead of the stalled requests may be stored too.
    let query = [("list-type", "2"), ("prefix", "k")];
    let listed = s3.expect_ok(Method::GET, "/limits", &query, Bytes::new()).await.unwrap();
    let count = String::from_utf8_lossy(&listed.body).matches("<Key>").count();
    assert_eq!(count, ok, "exactly the acknowledged PUTs are stored");
}

/// A body that trickles in (ten bytes a second against a minimum of 1,000 after 2 s) is
/// cut off instead of holding its connection, and nothing is stored.
#[tokio::test]
async fn a_trickling_body_is_cut_off_at_the_minimum_rate() {
    use bytes::Bytes;
    use http::Method;
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let options = ["rgw_body_rate_grace=2", "rgw_body_min_rate=1000"];
    let (_server, port, keys) = start_server(dir.path(), &options);
    let s3 = admin_client(port, &keys);
    s3.expect_ok(Method::PUT, "/trickle", &[], Bytes::new()).await.expect("creating the bucket");
    let (path, headers) = s3.sign(&Method::PUT, "/trickle/k", &[], "UNSIGNED-PAYLOAD");
    let outcome = tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connecting to the server");
        let mut head = format!("PUT {path} HTTP/1.1\r\ncontent-length: 100000\r\n");
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        stream.write_all(format!("{head}\r\n").as_bytes()).expect("sending the request header");
        // Ten bytes a second, far below 1,000: cut off about when the 2 s grace runs out.
        stream.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        let started = Instant::now();
        let mut answer = Vec::new();
        while started.elapsed() < Duration::from_secs(20) {
            if stream.write_all(b"0123456789").is_err() {
                break;
            }
            let mut buf = [0u8; 1024];
            match stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
                Err(_) => {}
            }
            std::thread::sleep(Duration::from_millis(900));
        }
        (started.elapsed(), String::from_utf8_lossy(&answer).into_owned())
    })
    .await
    .unwrap();
    let (elapsed, answer) = outcome;
    println!("cut off after {elapsed:?}: {}", answer.lines().next().unwrap_or("(connection closed)"));
    assert!(elapsed < Duration::from_secs(10), "the trickling body held its connection for {elapsed:?}");
    let missing = s3.send(Method::GET, "/trickle/k", &[], Bytes::new()).await.expect("reading the key back");
    assert_eq!(missing.status, http::StatusCode::NOT_FOUND, "nothing was stored");
    // A body at a normal rate is not affected.
    s3.expect_ok(Method::PUT, "/trickle/k", &[], Bytes::from(vec![7u8; 1 << 20])).await.expect("a normal PUT");
}

/// Hostile clients do not stop service: 2,000 idle connections (more than the connection
/// cap of 1,500; the rest wait in the listen backlog) and 200 clients trickling a request header, while a normal client keeps writing and
/// reading. The idle and slow ones are closed after the header timeout, the normal client
/// gets every answer, and the server is still up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_slow_header_floods_do_not_stop_service() {
    use bytes::Bytes;
    use http::Method;
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let options = ["rgw_max_connections=1500", "rgw_header_read_timeout=2", "rgw_request_timeout=3"];
    let (mut server, port, keys) = start_server(dir.path(), &options);
    let s3 = admin_client(port, &keys);
    s3.expect_ok(Method::PUT, "/flood", &[], Bytes::new()).await.unwrap();
    let attack = std::thread::spawn(move || {
        let connect = || std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(3));
        let idle: Vec<_> = (0..2000).filter_map(|_| connect().ok()).collect();
        let mut slow: Vec<_> = (0..200).filter_map(|_| connect().ok()).collect();
        for stream in &mut slow {
            let _ = stream.write_all(b"GET /flood HTTP/1.1\r\nHost: x\r\n");
        }
        // One more header byte every half second: each request header never ends.
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(6) {
            std::thread::sleep(Duration::from_millis(500));
            for stream in &mut slow {
                let _ = stream.write_all(b"X");
            }
        }
        // By now the server has closed what it accepted of both floods.
        let closed = |s: &mut std::net::TcpStream| {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut buf = [0u8; 256];
            loop {
                match s.read(&mut buf) {
                    Ok(0) => return true,
                    Ok(_) => continue,
                    Err(e) => {
                        return !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut);
                    }
                }
            }
        };
        let slow_closed = slow.iter_mut().map(closed).filter(|c| *c).count();
        (idle.len(), slow.len(), slow_closed)
    });
    let mut latencies = Vec::new();
    let started = Instant::now();
    let mut i = 0u64;
    while started.elapsed() < Duration::from_secs(8) {
        let t = Instant::now();
        let path = format!("/flood/k{}", i % 16);
        s3.expect_ok(Method::PUT, &path, &[], Bytes::from(vec![i as u8; 4096])).await.unwrap();
        let got = s3.expect_ok(Method::GET, &path, &[], Bytes::new()).await.unwrap();
        assert_eq!(got.body, Bytes::from(vec![i as u8; 4096]));
        latencies.push(t.elapsed());
        i += 1;
    }
    let (idle, slow, slow_closed) = tokio::task::spawn_blocking(move || attack.join().unwrap()).await.unwrap();
    latencies.sort();
    let p99 = latencies[(latencies.len() * 99 / 100).min(latencies.len() - 1)];
    println!("{idle} idle and {slow} slow-header connections; {} PUT+GET pairs, p99 {p99:?}", latencies.len());
    assert!(idle >= 1900 && slow >= 190, "the floods connected: {idle} idle, {slow} slow");
    assert_eq!(slow_closed, slow, "every slow-header client was cut off");
    assert!(latencies.len() >= 10, "the normal client kept getting answers");
    assert!(server.0.try_wait().unwrap().is_none(), "the server is still up");
    s3.expect_ok(Method::GET, "/flood/k0", &[], Bytes::new()).await.unwrap();
}

/// Out of file descriptors (the server's limit lowered under it with prlimit), `accept`
/// fails with EMFILE: the server logs it, retries after a pause, keeps serving the
/// connections it has, and serves new ones once descriptors are free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_out_of_file_descriptors_is_survived() {
    use bytes::Bytes;
    use http::Method;
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let (mut server, port, keys) = start_server(dir.path(), &[]);
    let s3 = admin_client(port, &keys);
    s3.expect_ok(Method::PUT, "/fds", &[], Bytes::new()).await.unwrap();
    let pid = server.0.id().to_string();
    let open = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count();
    let prlimit = |limit: &str| {
        let status = Command::new("prlimit").args(["--pid", &pid, &format!("--nofile={limit}")]).status().unwrap();
        assert!(status.success(), "prlimit --nofile={limit}");
    };
    let original = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let limits: Vec<&str> =
        original.lines().find(|l| l.starts_with("Max open files")).unwrap().split_whitespace().skip(3).collect();
    let (soft, hard) = (limits[0], limits[1]);
    prlimit(&format!("{}:{hard}", open + 10));
    let connect = || std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(3));
    // The first ten or so are accepted; the rest wait in the backlog while accept fails.
    let idle: Vec<_> = (0..40).filter_map(|_| connect().ok()).collect();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(server.0.try_wait().unwrap().is_none(), "the server is still up");
    let answered = s3.expect_ok(Method::GET, "/fds", &[], Bytes::new()).await;
    assert!(answered.is_ok(), "a kept-alive connection is still served: {:?}", answered.err());
    drop(idle);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let fresh = admin_client(port, &keys);
    fresh.expect_ok(Method::PUT, "/fds/k", &[], Bytes::from_static(b"x")).await.unwrap();
    prlimit(&format!("{soft}:{hard}"));
    assert!(server.0.try_wait().unwrap().is_none(), "the server is still up");
    let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap();
    assert!(log.contains("accepting a connection failed; retrying") && log.contains("Too many open files"), "{log}");
}

/// Keys and the cluster secret are written readable by their owner only, and the admin
/// secret key never reaches the server's console output.
#[test]
fn key_files_are_private_and_the_secret_stays_out_of_the_log() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let (server, _port, keys) = start_server(dir.path(), &[]);
    for file in ["admin.json", "secret"] {
        let mode = std::fs::metadata(dir.path().join("data").join(file)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{file}");
    }
    drop(server);
    let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap();
    let secret = keys["secret_key"].as_str().unwrap();
    assert!(log.contains(keys["access_key"].as_str().unwrap()) && !log.contains(secret), "{log}");
}
