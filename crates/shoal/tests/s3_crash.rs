//! Kill -9 of the gateway and of an OSD in the middle of a large PUT and of a multipart
//! completion: afterwards each object is wholly the old or wholly the new version, and
//! once the garbage collector has run no chunk object is left that no object uses. The
//! same during versioned overwrites and a lifecycle pass: every acknowledged version
//! exists, none exists that was neither acknowledged nor in flight, no locked version is
//! removed, and GC leaves no orphan tail. A gateway whose cluster is gone still stops on
//! SIGTERM. An overwrite, a delete marker or a multipart completion through a gateway
//! whose clock is minutes behind another's is not lost.

use bytes::Bytes;
use http::{Method, StatusCode};
use md5::Digest;
use shoal_bench::harness::{
    Daemon, Listed, Restarted, Vstart, all_versions, cmdline, kill9, ok, shoal, wait_for, xml_field,
};
use shoal_bench::s3client::S3Client;
use std::process::Command;
use std::time::Duration;

const MIB: usize = 1 << 20;

/// Gateway 0 of `cluster` with `options`, and a client of a new user `name` whose bucket
/// `name` is created.
async fn gateway_and_bucket(cluster: &Vstart, options: &[&str], name: &str) -> (Daemon, S3Client) {
    let (gateway, port) = cluster.start_gateway(0, options, shoal());
    let s3 = cluster.user_clients(name, &[port]).remove(0);
    s3.expect_ok(Method::PUT, &format!("/{name}"), &[], Bytes::new()).await.unwrap();
    (gateway, s3)
}

/// Sets the versioning of `bucket` (`Enabled`, `Suspended`).
async fn set_versioning(s3: &S3Client, bucket: &str, status: &str) {
    let body = Bytes::from(format!("<VersioningConfiguration><Status>{status}</Status></VersioningConfiguration>"));
    s3.expect_ok(Method::PUT, &format!("/{bucket}"), &[("versioning", "")], body).await.unwrap();
}

fn random(len: usize) -> Bytes {
    let mut data = vec![0u8; len];
    rand::fill(&mut data[..]);
    Bytes::from(data)
}

fn md5(data: &[u8]) -> [u8; 16] {
    md5::Md5::digest(data).into()
}

/// Two gateways, the second with its clock five minutes behind, and a client of user
/// `skew` for each; bucket `skew` is created.
async fn fast_and_slow_gateways(cluster: &Vstart) -> ([Daemon; 2], Vec<S3Client>) {
    let (fast, fast_port) = cluster.start_gateway(0, &[], shoal());
    let (slow, slow_port) = cluster.start_skewed_gateway(1, "-300");
    let clients = cluster.user_clients("skew", &[fast_port, slow_port]);
    clients[0].expect_ok(Method::PUT, "/skew", &[], Bytes::new()).await.unwrap();
    ([fast, slow], clients)
}

/// GETs `key` through gateway `port`, retrying while the cluster settles (an OSD is down).
async fn get_eventually(client: &S3Client, key: &str) -> Bytes {
    for _ in 0..600 {
        match client.send(Method::GET, &format!("/crash/{key}"), &[], Bytes::new()).await {
            Ok(r) if r.status.is_success() => return r.body,
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    panic!("GET {key} never succeeded");
}

/// Whether ListParts finds upload `id` of `key`, asking again while the cluster settles
/// (an answer other than 200 or 404 says nothing about the upload).
async fn upload_is_open(client: &S3Client, key: &str, id: &str) -> bool {
    for _ in 0..600 {
        match client.send(Method::GET, &format!("/crash/{key}"), &[("uploadId", id)], Bytes::new()).await {
            Ok(r) if r.status.is_success() => return true,
            Ok(r) if r.status == StatusCode::NOT_FOUND => return false,
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    panic!("ListParts of {key} never answered 200 or 404");
}

fn chunks(size: usize) -> usize {
    size.div_ceil(4 * MIB)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_and_osd_killed_mid_put_and_mid_complete() {
    let cluster = Vstart::start("3", "3");
    let conf = cluster.conf();
    ok(&conf, &["config", "set", "global", "osd_heartbeat_interval", "0.3"]);
    ok(&conf, &["config", "set", "global", "osd_heartbeat_grace", "2"]);
    let (mut gateway, port) = cluster.start_gateway(0, &[], shoal());
    let s3 = cluster.user_clients("crash", &[port]).remove(0);
    s3.expect_ok(Method::PUT, "/crash", &[], Bytes::new()).await.unwrap();

    // 1. A large PUT over an existing object; kill the gateway and osd.1 once the new
    //    object's first chunks are written.
    let old = random(12 * MIB);
    s3.expect_ok(Method::PUT, "/crash/big", &[], old.clone()).await.unwrap();
    let before = cluster.data_objects().len();
    let new = random(64 * MIB);
    let put = {
        let (s3, new) = (s3.clone(), new.clone());
        tokio::spawn(async move { s3.send(Method::PUT, "/crash/big", &[], new).await })
    };
    let started = tokio::task::spawn_blocking({
        let conf = conf.clone();
        let listed = move || ok(&conf, &["rados", "-p", ".rgw.buckets.data", "ls"]).lines().count();
        move || wait_for(|| (listed() >= before + 3).then_some(()))
    });
    assert!(started.await.unwrap().is_some(), "the new object's chunks never appeared");
    kill9(gateway.0.id());
    kill9(cluster.pid("osd.1"));
    let put_acknowledged = matches!(put.await.unwrap(), Ok(r) if r.status.is_success());
    let _ = gateway.0.wait();
    let (mut gateway1, port) = cluster.start_gateway(1, &[], shoal());
    let s3 = s3.at_port(port);
    let read = get_eventually(&s3, "big").await;
    let big_is_new = read.len() == new.len() && md5(&read) == md5(&new);
    let big_is_old = read.len() == old.len() && md5(&read) == md5(&old);
    assert!(big_is_new || big_is_old, "big is wholly the old or the new object ({} bytes read)", read.len());
    // An unacknowledged PUT may have landed: the gateway can die between linking and answering.
    assert!(big_is_new || !put_acknowledged, "an acknowledged PUT is durable");

    // 2. A multipart completion over an existing object, killed at a random moment.
    let old_mp = random(100);
    s3.expect_ok(Method::PUT, "/crash/mp", &[], old_mp.clone()).await.unwrap();
    let created = s3.expect_ok(Method::POST, "/crash/mp", &[("uploads", "")], Bytes::new()).await.unwrap();
    let text = String::from_utf8_lossy(&created.body).into_owned();
    let upload_id = text.split("<UploadId>").nth(1).unwrap().split("</UploadId>").next().unwrap().to_owned();
    let parts: Vec<Bytes> = (0..3).map(|_| random(5 * MIB)).collect();
    let mut listing = String::from("<CompleteMultipartUpload>");
    for (i, part) in parts.iter().enumerate() {
        let n = (i + 1).to_string();
        let query = [("partNumber", n.as_str()), ("uploadId", upload_id.as_str())];
        let r = s3.expect_ok(Method::PUT, "/crash/mp", &query, part.clone()).await.unwrap();
        let etag = r.headers["etag"].to_str().unwrap().to_owned();
        listing += &format!("<Part><PartNumber>{n}</PartNumber><ETag>{etag}</ETag></Part>");
    }
    listing += "</CompleteMultipartUpload>";
    let complete = {
        let (s3, body, id) = (s3.clone(), Bytes::from(listing.clone()), upload_id.clone());
        tokio::spawn(async move { s3.send(Method::POST, "/crash/mp", &[("uploadId", id.as_str())], body).await })
    };
    tokio::time::sleep(Duration::from_millis(rand::random_range(0..40))).await;
    kill9(gateway1.0.id());
    let completed = matches!(complete.await.unwrap(), Ok(r) if r.status.is_success());
    let _ = gateway1.0.wait();
    let (_gateway2, port) = cluster.start_gateway(2, &[], shoal());
    let s3 = s3.at_port(port);
    let whole: Vec<u8> = parts.iter().flat_map(|p| p.iter().copied()).collect();
    let read = get_eventually(&s3, "mp").await;
    let is_new = read.len() == whole.len() && md5(&read) == md5(&whole);
    assert!(is_new || read == old_mp, "mp is wholly the old or the new object");
    assert!(is_new || !completed, "an acknowledged completion is durable");
    // A client whose completion got no answer retries it (or aborts); retry, as SDKs do.
    if upload_is_open(&s3, "mp", &upload_id).await {
        let body = Bytes::from(listing);
        s3.expect_ok(Method::POST, "/crash/mp", &[("uploadId", upload_id.as_str())], body).await.unwrap();
    }
    let read = get_eventually(&s3, "mp").await;
    assert_eq!(md5(&read), md5(&whole), "mp is the completed upload ({} bytes read)", read.len());

    // 3. After garbage collection only the two heads and their chunks remain.
    let report = ok(&conf, &["admin", "gc", "process", "--include-all"]);
    let objects = cluster.data_objects();
    eprintln!("PUT acknowledged: {put_acknowledged}, completion acknowledged: {completed}, gc: {report}");
    let big_size = if big_is_new { new.len() } else { old.len() };
    let expected = 2 + chunks(big_size) + parts.iter().map(|p| chunks(p.len())).sum::<usize>();
    assert_eq!(objects.len(), expected, "orphaned chunks remain after GC ({report}): {objects:#?}");
}

/// A gateway delivering a persistent topic (its endpoint down, so it holds queue and log
/// leases) stops on SIGTERM after its cluster is gone: leases it cannot hand back expire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_without_its_cluster_stops_on_sigterm() {
    let cluster = Vstart::start("1", "1");
    let conf = cluster.conf();
    let (mut gateway, port) = cluster.start_gateway(0, &[], shoal());
    let s3 = cluster.user_clients("leases", &[port]).remove(0);
    let form = "Action=CreateTopic&Name=down&Attributes.entry.1.key=persistent&Attributes.entry.1.value=true\
                &Attributes.entry.2.key=push-endpoint&Attributes.entry.2.value=http%3A%2F%2F127.0.0.1%3A9";
    let content_type = [("content-type", "application/x-www-form-urlencoded".to_owned())];
    let created =
        s3.for_service("sns").expect_ok_with(Method::POST, "/", &[], &content_type, Bytes::from(form)).await.unwrap();
    let text = String::from_utf8_lossy(&created.body).into_owned();
    let arn = text.split("<TopicArn>").nth(1).unwrap().split("</TopicArn>").next().unwrap().to_owned();
    s3.expect_ok(Method::PUT, "/leases", &[], Bytes::new()).await.unwrap();
    let config = format!(
        "<NotificationConfiguration><TopicConfiguration><Id>all</Id><Topic>{arn}</Topic>\
         </TopicConfiguration></NotificationConfiguration>"
    );
    s3.expect_ok(Method::PUT, "/leases", &[("notification", "")], Bytes::from(config)).await.unwrap();
    s3.expect_ok(Method::PUT, "/leases/k", &[], Bytes::from_static(b"v")).await.unwrap();
    // Queued means the gateway moved the event from the bucket's log to the topic's queue.
    let stats = |conf: &str| {
        serde_json::from_str::<serde_json::Value>(&ok(conf, &["admin", "topic", "stats", "--topic", "down"]))
    };
    let queued = tokio::task::spawn_blocking(move || wait_for(|| (stats(&conf).ok()?["entries"] == 1).then_some(())));
    assert!(queued.await.unwrap().is_some(), "the event never reached the queue");

    assert!(cluster.stop());
    let pid = gateway.0.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let stopped = wait_for(|| gateway.0.try_wait().unwrap());
    assert!(stopped.is_some_and(|status| status.success()), "the gateway did not stop on SIGTERM: {stopped:?}");
}

/// GETs one version through the gateway, retrying while the cluster settles.
async fn get_version_eventually(s3: &S3Client, bucket: &str, key: &str, version: &str) -> Bytes {
    for _ in 0..600 {
        let r = s3.send(Method::GET, &format!("/{bucket}/{key}"), &[("versionId", version)], Bytes::new()).await;
        match r {
            Ok(r) if r.status.is_success() => return r.body,
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    panic!("GET {key} version {version} never succeeded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versioned_overwrites_and_a_lifecycle_pass_survive_kills() {
    let cluster = Vstart::start("3", "3");
    let conf = cluster.conf();
    ok(&conf, &["config", "set", "global", "osd_heartbeat_interval", "0.3"]);
    ok(&conf, &["config", "set", "global", "osd_heartbeat_grace", "2"]);
    let options = ["rgw_lc_debug_interval=1"];
    let (mut gateway, port) = cluster.start_gateway(0, &options, shoal());
    let s3 = cluster.user_clients("versions", &[port]).remove(0);
    s3.expect_ok(Method::PUT, "/ver", &[], Bytes::new()).await.unwrap();
    set_versioning(&s3, "ver", "Enabled").await;

    // 1. Versioned overwrites of six keys (every fourth with a tail), the gateway and
    //    osd.1 killed after the tenth acknowledgement; the writer carries on through a
    //    new gateway, and osd.1 comes back.
    let progress = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let writer = {
        let (s3, progress) = (s3.clone(), progress.clone());
        tokio::spawn(async move {
            let (mut acknowledged, mut in_flight) = (Vec::new(), Vec::new());
            let mut s3 = s3;
            for i in 0..60usize {
                let (key, body) = (format!("k{}", i % 6), random(if i % 4 == 0 { 5 * MIB } else { 1000 + i }));
                match s3.send(Method::PUT, &format!("/ver/{key}"), &[], body.clone()).await {
                    Ok(r) if r.status.is_success() => {
                        let version = r.headers["x-amz-version-id"].to_str().unwrap().to_owned();
                        acknowledged.push((key, version, md5(&body)));
                        progress.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    _ => {
                        in_flight.push((key, md5(&body)));
                        // Wait for the new gateway's port, published through the file below.
                        let port = wait_for_port().await;
                        s3 = s3.at_port(port);
                    }
                }
            }
            (acknowledged, in_flight)
        })
    };
    while progress.load(std::sync::atomic::Ordering::Relaxed) < 10 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(rand::random_range(0..300))).await;
    let osd1 = cmdline(cluster.pid("osd.1"));
    kill9(gateway.0.id());
    kill9(cluster.pid("osd.1"));
    let _ = gateway.0.wait();
    let mut restarted = Restarted::default();
    restarted.restart(&cluster, "osd.1", &osd1);
    let (mut gateway1, port) = cluster.start_gateway(1, &options, shoal());
    publish_port(port);
    let (acknowledged, in_flight) = writer.await.unwrap();
    let s3 = s3.at_port(port);
    let listed: Vec<Listed> = all_versions(&s3, "ver").await;
    for (key, version, sum) in &acknowledged {
        assert!(listed.iter().any(|l| l.key == *key && l.version == *version), "acknowledged {key} {version} is gone");
        assert_eq!(md5(&get_version_eventually(&s3, "ver", key, version).await), *sum, "{key} {version}");
    }
    for l in &listed {
        let acked = acknowledged.iter().any(|(k, v, _)| *k == l.key && *v == l.version);
        if !acked {
            let body = get_version_eventually(&s3, "ver", &l.key, &l.version).await;
            assert!(in_flight.contains(&(l.key.clone(), md5(&body))), "{l:?} was neither acknowledged nor in flight");
        }
    }
    eprintln!("versions: {} acknowledged, {} in flight, {} listed", acknowledged.len(), in_flight.len(), listed.len());

    // 2. A lifecycle pass over a bucket with object lock, killed with osd.2 once it has
    //    removed something: every second key's old version is under legal hold and must
    //    stay; the others' old versions go once a pass completes.
    const KEYS: usize = 100;
    let lock_header = [("x-amz-bucket-object-lock-enabled", "true".to_owned())];
    s3.expect_ok_with(Method::PUT, "/lcb", &[], &lock_header, Bytes::new()).await.unwrap();
    let mut held = Vec::new();
    for i in 0..KEYS {
        let hold = [("x-amz-object-lock-legal-hold", if i % 2 == 0 { "ON" } else { "OFF" }.to_owned())];
        let r = s3.expect_ok_with(Method::PUT, &format!("/lcb/o{i}"), &[], &hold, random(100)).await.unwrap();
        if i % 2 == 0 {
            held.push((format!("o{i}"), r.headers["x-amz-version-id"].to_str().unwrap().to_owned()));
        }
        s3.expect_ok(Method::PUT, &format!("/lcb/o{i}"), &[], random(100)).await.unwrap();
    }
    let rule = "<LifecycleConfiguration><Rule><ID>old</ID><Status>Enabled</Status><Filter><Prefix></Prefix></Filter>\
                <NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays></NoncurrentVersionExpiration></Rule>\
                </LifecycleConfiguration>";
    s3.expect_ok(Method::PUT, "/lcb", &[("lifecycle", "")], Bytes::from(rule)).await.unwrap();
    let mut remaining = 2 * KEYS;
    while remaining == 2 * KEYS {
        remaining = all_versions(&s3, "lcb").await.len();
    }
    kill9(gateway1.0.id());
    kill9(cluster.pid("osd.2"));
    let _ = gateway1.0.wait();
    eprintln!("lifecycle: killed with {remaining} of {} versions left", 2 * KEYS);
    let (_gateway2, port) = cluster.start_gateway(2, &options, shoal());
    let s3 = s3.at_port(port);
    let expected = KEYS + held.len();
    let mut versions = Vec::new();
    for _ in 0..600 {
        versions = all_versions(&s3, "lcb").await;
        if versions.len() == expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(versions.len(), expected, "every current and every held version remains: {versions:#?}");
    for (key, version) in &held {
        assert!(versions.iter().any(|l| l.key == *key && l.version == *version), "held {key} {version} was removed");
    }
    assert!(versions.iter().filter(|l| l.latest).count() == KEYS, "every key keeps its current version");

    // 3. After GC, the chunks of the versions that exist are all that is left of tails.
    let report = ok(&conf, &["admin", "gc", "process", "--include-all"]);
    let listed = all_versions(&s3, "ver").await;
    let tails =
        cluster.data_objects().into_iter().filter(|o| o.contains("__shadow_") || o.contains("__multipart_")).count();
    let expected: usize = listed.iter().filter(|l| !l.marker && l.size > 4 * MIB).map(|l| chunks(l.size)).sum();
    eprintln!("gc: {report}");
    assert_eq!(tails, expected, "orphaned tail chunks remain after GC ({report})");
}

/// Where the writer of the versioned crash test learns the new gateway's port.
static NEW_PORT: std::sync::OnceLock<u16> = std::sync::OnceLock::new();

fn publish_port(port: u16) {
    let _ = NEW_PORT.set(port);
}

async fn wait_for_port() -> u16 {
    loop {
        if let Some(port) = NEW_PORT.get() {
            return *port;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Two gateways, one with its clock five minutes behind: each PUT through the slow one,
/// made after the fast one's PUT of the same key was acknowledged, is the object both
/// then serve. Ordering writes by each gateway's wall clock acknowledged the slow one's
/// and kept the fast one's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overwrite_through_a_gateway_whose_clock_is_behind_is_not_lost() {
    let cluster = Vstart::start("3", "3");
    let (_gateways, clients) = fast_and_slow_gateways(&cluster).await;
    let (fast, slow) = (&clients[0], &clients[1]);
    for round in 0..3 {
        for (writer, name) in [(fast, "fast"), (slow, "slow"), (fast, "fast again")] {
            let body = Bytes::from(format!("{name} {round}"));
            writer.expect_ok(Method::PUT, "/skew/k", &[], body.clone()).await.unwrap();
            for reader in [fast, slow] {
                let got = reader.expect_ok(Method::GET, "/skew/k", &[], Bytes::new()).await.unwrap();
                assert_eq!(got.body, body, "round {round}: after the {name} gateway's PUT");
            }
        }
    }
}

/// In a versioned bucket, PUTs, a DELETE (its marker) and a multipart completion through a
/// gateway whose clock is five minutes behind the other's are ordered after the writes
/// acknowledged before them: each becomes the current version, version ids sort newest
/// first, and a DELETE of a never-versioned key through it removes the key.
#[tokio::test(flavor = "multi_thread")]
async fn versioned_writes_through_a_gateway_whose_clock_is_behind_keep_their_order() {
    let cluster = Vstart::start("3", "3");
    let (_gateways, clients) = fast_and_slow_gateways(&cluster).await;
    let (fast, slow) = (&clients[0], &clients[1]);
    set_versioning(fast, "skew", "Enabled").await;
    let current = async |expected: Option<&Bytes>, after: &str| {
        for reader in [fast, slow] {
            let got = reader.send(Method::GET, "/skew/k", &[], Bytes::new()).await.unwrap();
            match expected {
                Some(body) => assert_eq!((got.status, &got.body), (StatusCode::OK, body), "after {after}"),
                None => assert_eq!(got.status, StatusCode::NOT_FOUND, "after {after}"),
            }
        }
    };
    // Version ids in the order their writes were acknowledged.
    let mut written = Vec::new();
    for (writer, name) in [(fast, "fast"), (slow, "slow"), (fast, "fast again"), (slow, "slow again")] {
        let body = Bytes::from(name);
        let r = writer.expect_ok(Method::PUT, "/skew/k", &[], body.clone()).await.unwrap();
        written.push(r.headers["x-amz-version-id"].to_str().unwrap().to_owned());
        current(Some(&body), &format!("the {name} gateway's PUT")).await;
    }
    let fast_body = Bytes::from_static(b"fast before the marker");
    let r = fast.expect_ok(Method::PUT, "/skew/k", &[], fast_body).await.unwrap();
    written.push(r.headers["x-amz-version-id"].to_str().unwrap().to_owned());
    let r = slow.expect_ok(Method::DELETE, "/skew/k", &[], Bytes::new()).await.unwrap();
    assert_eq!(r.headers.get("x-amz-delete-marker").map(|v| v.to_str().unwrap()), Some("true"));
    written.push(r.headers["x-amz-version-id"].to_str().unwrap().to_owned());
    current(None, "the slow gateway's DELETE").await;
    let r = fast.expect_ok(Method::PUT, "/skew/k", &[], Bytes::from_static(b"fast again")).await.unwrap();
    written.push(r.headers["x-amz-version-id"].to_str().unwrap().to_owned());
    // A multipart upload completed through the slow gateway.
    let created = slow.expect_ok(Method::POST, "/skew/k", &[("uploads", "")], Bytes::new()).await.unwrap();
    let text = String::from_utf8_lossy(&created.body).into_owned();
    let upload_id = xml_field(&text, "UploadId").unwrap().to_owned();
    let part = Bytes::from_static(b"one part, completed through the slow gateway");
    let query = [("partNumber", "1"), ("uploadId", upload_id.as_str())];
    let r = slow.expect_ok(Method::PUT, "/skew/k", &query, part.clone()).await.unwrap();
    let etag = r.headers["etag"].to_str().unwrap().to_owned();
    let listing = format!(
        "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>{etag}</ETag></Part></CompleteMultipartUpload>"
    );
    let r = slow
        .expect_ok(Method::POST, "/skew/k", &[("uploadId", upload_id.as_str())], Bytes::from(listing))
        .await
        .unwrap();
    written.push(r.headers["x-amz-version-id"].to_str().unwrap().to_owned());
    current(Some(&part), "the slow gateway's multipart completion").await;
    // Version ids sort newest first: in the reverse of the order of acknowledgement.
    let versions = all_versions(fast, "skew").await;
    let mut listed: Vec<String> = versions.iter().map(|v| v.version.clone()).collect();
    listed.sort();
    let newest_first: Vec<String> = written.iter().rev().cloned().collect();
    assert_eq!(listed, newest_first, "version ids sort in the order their writes were acknowledged, newest first");
    let latest: Vec<&str> = versions.iter().filter(|v| v.latest).map(|v| v.version.as_str()).collect();
    assert_eq!(latest, [written.last().unwrap().as_str()], "the last write is the latest version");

    // A never-versioned key deleted through the slow gateway.
    fast.expect_ok(Method::PUT, "/plain", &[], Bytes::new()).await.unwrap();
    fast.expect_ok(Method::PUT, "/plain/k", &[], Bytes::from_static(b"fast")).await.unwrap();
    slow.expect_ok(Method::DELETE, "/plain/k", &[], Bytes::new()).await.unwrap();
    for reader in [fast, slow] {
        let got = reader.send(Method::GET, "/plain/k", &[], Bytes::new()).await.unwrap();
        assert_eq!(got.status, StatusCode::NOT_FOUND, "after the slow gateway's DELETE");
    }
}

/// A large object's plain head written by a gateway that dies before linking it (RGW's
/// `dir_suggest` case): GET already returns it while the listing still shows the object it
/// replaced, until garbage collection handles the writer's intent, links the head and
/// collects the replaced tail.
#[tokio::test(flavor = "multi_thread")]
async fn a_plain_head_never_linked_is_linked_by_gc() {
    let cluster = Vstart::start("3", "3");
    let conf = cluster.conf();
    let (_gateway, s3) = gateway_and_bucket(&cluster, &[], "suggest").await;
    let (old, new) = (random(5 * MIB), random(9 * MIB));
    s3.expect_ok(Method::PUT, "/suggest/big", &[], old).await.unwrap();
    let (mut dying, dying_port) = cluster.start_gateway(1, &["rgw_debug_abort_at=before_link"], shoal());
    let put = s3.at_port(dying_port).send(Method::PUT, "/suggest/big", &[], new.clone()).await;
    assert!(!matches!(put, Ok(r) if r.status.is_success()), "the gateway died before answering");
    let _ = dying.0.wait();
    let listed_size = async || {
        let listed = s3.expect_ok(Method::GET, "/suggest", &[], Bytes::new()).await.unwrap();
        xml_field(&String::from_utf8_lossy(&listed.body), "Size").unwrap().parse::<usize>().unwrap()
    };
    let read = s3.expect_ok(Method::GET, "/suggest/big", &[], Bytes::new()).await.unwrap();
    assert_eq!(md5(&read.body), md5(&new), "the head holds the new object");
    assert_eq!(listed_size().await, 5 * MIB, "not linked yet");
    ok(&conf, &["admin", "gc", "process", "--include-all"]);
    ok(&conf, &["admin", "gc", "process", "--include-all"]);
    assert_eq!(listed_size().await, 9 * MIB, "GC linked the head");
    assert_eq!(cluster.data_objects().len(), 1 + chunks(9 * MIB), "and collected the replaced tail");
}

/// A small object's version head written by a gateway that dies before linking it (the
/// test option `rgw_debug_abort_at=before_link` aborts the gateway there) is unreachable;
/// garbage collection removes it.
#[tokio::test(flavor = "multi_thread")]
async fn a_version_head_never_linked_is_collected() {
    let cluster = Vstart::start("3", "3");
    let conf = cluster.conf();
    let (mut gateway, s3) = gateway_and_bucket(&cluster, &["rgw_debug_abort_at=before_link"], "leak").await;
    set_versioning(&s3, "leak", "Enabled").await;
    let before = cluster.data_objects();
    let put = s3.send(Method::PUT, "/leak/small", &[], random(1000)).await;
    assert!(!matches!(put, Ok(r) if r.status.is_success()), "the gateway died before answering");
    let _ = gateway.0.wait();
    let leaked: Vec<String> = cluster.data_objects().into_iter().filter(|o| !before.contains(o)).collect();
    assert_eq!(leaked.len(), 1, "the version's head was written: {leaked:?}");
    let (_gateway, port) = cluster.start_gateway(1, &[], shoal());
    let s3 = s3.at_port(port);
    let listed = s3.expect_ok(Method::GET, "/leak", &[("versions", "")], Bytes::new()).await.unwrap();
    assert!(!String::from_utf8_lossy(&listed.body).contains("<Key>small</Key>"), "never linked, never listed");
    ok(&conf, &["admin", "gc", "process", "--include-all"]);
    assert_eq!(cluster.data_objects(), before, "the unlinked head is collected");
}

/// Null versions kept in their keys' plain heads (written before versioning was enabled)
/// whose removal or replacement a gateway linked in the index and then died before
/// removing the plain head (`rgw_debug_abort_at=before_null_head_removal`): garbage
/// collection removes the heads and their tails. Before, both stayed forever.
#[tokio::test(flavor = "multi_thread")]
async fn a_null_version_unlinked_by_a_dying_gateway_is_collected() {
    let cluster = Vstart::start("3", "3");
    let conf = cluster.conf();
    let (_gateway, s3) = gateway_and_bucket(&cluster, &[], "nulls").await;
    s3.expect_ok(Method::PUT, "/nulls/big", &[], random(5 * MIB)).await.unwrap();
    s3.expect_ok(Method::PUT, "/nulls/small", &[], random(1000)).await.unwrap();
    let plain = cluster.data_objects();
    assert_eq!(plain.len(), 2 + chunks(5 * MIB), "two plain heads and a tail: {plain:?}");
    set_versioning(&s3, "nulls", "Enabled").await;

    // DELETE of the null version of 'big'; then, versioning suspended, a PUT that replaces
    // the null version of 'small'. Each through a gateway that dies after the index change.
    let dying_request = async |n: u32, method: Method, path: &str, query: &[(&str, &str)], body: Bytes| {
        let (mut dying, dying_port) =
            cluster.start_gateway(n, &["rgw_debug_abort_at=before_null_head_removal"], shoal());
        let sent = s3.at_port(dying_port).send(method, path, query, body).await;
        assert!(!matches!(sent, Ok(r) if r.status.is_success()), "the gateway died before answering");
        let _ = dying.0.wait();
    };
    dying_request(1, Method::DELETE, "/nulls/big", &[("versionId", "null")], Bytes::new()).await;
    set_versioning(&s3, "nulls", "Suspended").await;
    dying_request(2, Method::PUT, "/nulls/small", &[], random(2000)).await;

    let listed = all_versions(&s3, "nulls").await;
    assert_eq!(listed.len(), 1, "only the new null version of 'small': {listed:?}");
    assert_eq!((listed[0].key.as_str(), listed[0].version.as_str(), listed[0].size), ("small", "null", 2000));
    assert!(plain.iter().all(|o| cluster.data_objects().contains(o)), "the crashes left the plain heads and tail");
    ok(&conf, &["admin", "gc", "process", "--include-all"]);
    let left = cluster.data_objects();
    assert_eq!(left.len(), 1, "the new version's head alone: {left:?}");
    assert!(!plain.contains(&left[0]), "{left:?}");
}
