//! A full disk and a pool quota, as S3 users meet them. `shoal server` on a small tmpfs is
//! filled with 4 MiB and 60 KB objects: writes then get 507 InsufficientStorage (never a
//! 500), `status` reports the full OSD as an error, deletes still work, and once the
//! garbage collector has freed their data writes resume without a restart; every
//! acknowledged object reads back. A quota on the data pool likewise: writes past it get
//! 507 naming the quota, deletes work, and raising the quota lets writes in again. The same
//! on a vstart cluster whose one small OSD fills: RADOS clients get ENOSPC for the pool on
//! it while other pools keep taking writes.
//!
//! Mounting the tmpfs needs root, as the README's test command runs.

use bytes::Bytes;
use http::{Method, StatusCode};
use shoal_bench::harness::{Daemon, Vstart, admin_client, ok, shoal, shoal_c, start_server, wait_all_clean, wait_for};
use shoal_bench::s3client::{S3Client, S3Response};
use shoal_client::IoCtx;
use shoal_types::Errno;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const DATA_POOL: &str = ".rgw.buckets.data";

/// A tmpfs of `mib` MiB mounted on a new directory, unmounted when dropped.
struct SmallFileSystem {
    dir: tempfile::TempDir,
}

impl SmallFileSystem {
    fn mount(mib: u64) -> SmallFileSystem {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs", dir.path().to_str().unwrap()])
            .status()
            .unwrap();
        assert!(status.success(), "mounting a tmpfs needs root (run the suite as root, as the README says)");
        SmallFileSystem { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallFileSystem {
    fn drop(&mut self) {
        let _ = Command::new("umount").args(["-l", self.dir.path().to_str().unwrap()]).status();
    }
}

/// Object `i`'s contents: 4 MiB for even `i`, 60 KB for odd, each byte telling `i`.
fn object(i: usize) -> Bytes {
    let len = if i.is_multiple_of(2) { 4 << 20 } else { 60_000 };
    Bytes::from(vec![(i % 251) as u8; len])
}

async fn put(s3: &S3Client, key: &str, body: Bytes) -> S3Response {
    s3.send(Method::PUT, &format!("/full/{key}"), &[], body).await.unwrap()
}

/// The S3 error code and message of a failed answer.
fn error_of(r: &S3Response) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

fn assert_insufficient_storage(r: &S3Response, what: &str) {
    assert_eq!(r.status, StatusCode::INSUFFICIENT_STORAGE, "{what}: {}", error_of(r));
    assert!(error_of(r).contains("<Code>InsufficientStorage</Code>"), "{what}: {}", error_of(r));
}

/// PUTs objects until `refusals` in a row were refused; every refusal must be a 507.
/// Returns the keys acknowledged.
async fn fill(s3: &S3Client, refusals: usize) -> Vec<usize> {
    let (mut acked, mut refused) = (Vec::new(), 0);
    for i in 0..1000 {
        let r = put(s3, &format!("k{i}"), object(i)).await;
        if r.status.is_success() {
            acked.push(i);
            refused = 0;
            continue;
        }
        assert_insufficient_storage(&r, &format!("PUT k{i}"));
        refused += 1;
        if refused == refusals {
            return acked;
        }
    }
    panic!("{} objects went in and none was refused", acked.len());
}

/// Waits until a 60 KB PUT of `key` succeeds; panics after two minutes.
async fn wait_until_writable(s3: &S3Client, key: &str, why: &str) {
    for _ in 0..120 {
        if put(s3, key, object(1)).await.status.is_success() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    panic!("writes did not resume {why}");
}

async fn read_back(s3: &S3Client, keys: &[usize]) {
    for &i in keys {
        let r = s3.send(Method::GET, &format!("/full/k{i}"), &[], Bytes::new()).await.unwrap();
        assert_eq!(r.status, StatusCode::OK, "k{i}: {}", error_of(&r));
        assert!(r.body == object(i), "k{i} read back other bytes ({} of {})", r.body.len(), object(i).len());
    }
}

fn conf(data: &Path) -> String {
    data.join("data/shoal.conf").to_str().unwrap().to_owned()
}

fn shoal_ok(conf: &str, args: &[&str]) -> String {
    let (success, out, err) = shoal_c(conf, args);
    assert!(success, "{args:?}: {err}");
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_disk_refuses_writes_keeps_deletes_and_recovers_once_space_is_freed() {
    let fs = SmallFileSystem::mount(320);
    let (_server, port, keys) = start_server(fs.path(), &["rgw_gc_processor_period=1"]);
    let s3 = admin_client(port, &keys);
    s3.expect_ok(Method::PUT, "/full", &[], Bytes::new()).await.unwrap();

    let acked = fill(&s3, 3).await;
    assert!(acked.len() > 40, "only {} objects fit in 320 MiB", acked.len());
    // The monitor marks the OSD full from its report: every write is refused, small ones
    // too, and status says why.
    let conf = conf(fs.path());
    let marked = wait_for(|| shoal_ok(&conf, &["status"]).contains("1 full osd(s): osd.0").then_some(()));
    assert!(marked.is_some(), "the OSD was not marked full:\n{}", shoal_ok(&conf, &["status"]));
    let status = shoal_ok(&conf, &["status"]);
    assert!(status.contains("HEALTH_ERR") && !status.contains("mons down"), "{status}");
    let tree = shoal_ok(&conf, &["osd", "tree"]);
    let used: f64 =
        tree.lines().find(|l| l.contains("osd.0")).and_then(|l| l.split_whitespace().last()?.parse().ok()).unwrap();
    assert!(used >= 95.0, "osd tree shows {used} % used:\n{tree}");
    assert!(shoal_ok(&conf, &["osd", "df"]).contains(" full"), "osd df names the state");
    let r = put(&s3, "small", Bytes::from_static(b"tiny")).await;
    assert_insufficient_storage(&r, "a small PUT on a full OSD");
    assert!(error_of(&r).contains("osd.0 is full"), "{}", error_of(&r));

    // Deletes work at full (plain and multi-object), and free the space once the garbage
    // collector ran: writes resume without a restart.
    let (deleted, kept) = acked.split_at(acked.len() / 3);
    for i in &deleted[1..] {
        let r = s3.send(Method::DELETE, &format!("/full/k{i}"), &[], Bytes::new()).await.unwrap();
        assert_eq!(r.status, StatusCode::NO_CONTENT, "DELETE k{i} at full: {}", error_of(&r));
    }
    let multi = format!("<Delete><Object><Key>k{}</Key></Object></Delete>", deleted[0]);
    let md5 = base64_md5(multi.as_bytes());
    let r = s3
        .send_with(Method::POST, "/full", &[("delete", "")], &[("content-md5", md5)], Bytes::from(multi))
        .await
        .unwrap();
    assert!(r.status.is_success() && !error_of(&r).contains("<Error>"), "multi-object delete: {}", error_of(&r));
    wait_until_writable(&s3, "after", "after a third of the objects were deleted").await;
    let healthy = wait_for(|| (!shoal_ok(&conf, &["status"]).contains("full osd")).then_some(()));
    assert!(healthy.is_some(), "the OSD stayed full:\n{}", shoal_ok(&conf, &["status"]));
    read_back(&s3, kept).await;
}

fn base64_md5(data: &[u8]) -> String {
    use base64::Engine;
    use md5::Digest;
    base64::engine::general_purpose::STANDARD.encode(md5::Md5::digest(data))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pool_quota_refuses_writes_past_it_and_lets_them_in_when_raised() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, port, keys) = start_server(dir.path(), &[]);
    let s3 = admin_client(port, &keys);
    s3.expect_ok(Method::PUT, "/full", &[], Bytes::new()).await.unwrap();
    let conf = conf(dir.path());
    let (success, _, err) = shoal_c(&conf, &["pool", "set-quota", DATA_POOL, "max_things", "5"]);
    assert!(!success && err.contains("'max_things' is not a quota"), "{err}");
    let (success, _, err) = shoal_c(&conf, &["pool", "set-quota", DATA_POOL, "max_bytes", "lots"]);
    assert!(!success && err.contains("'lots'"), "{err}");
    shoal_ok(&conf, &["pool", "set-quota", DATA_POOL, "max_bytes", "8M"]);

    // 60 KB objects go in until the PG reports reach 8 MiB, and a little past (the
    // monitor hears each second, while hundreds of PUTs go in): then 507, naming the quota.
    let mut acked = Vec::new();
    let mut refused = None;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    for i in (1..).step_by(2).take_while(|_| std::time::Instant::now() < deadline) {
        let r = put(&s3, &format!("k{i}"), object(i)).await;
        if !r.status.is_success() {
            refused = Some(r);
            break;
        }
        acked.push(i);
    }
    let refused = refused.expect("the quota never stopped a write");
    assert_insufficient_storage(&refused, "a PUT past the pool quota");
    assert!(error_of(&refused).contains("reached its quota"), "{}", error_of(&refused));
    let stored = acked.len() * 60_000;
    assert!(stored >= 8 << 20, "refused at {stored} bytes, below the quota");
    let quota = shoal_ok(&conf, &["pool", "get-quota", DATA_POOL]);
    assert!(quota.contains("max bytes  : 8388608") && quota.contains("writes get EDQUOT"), "{quota}");
    assert!(shoal_ok(&conf, &["status"]).contains("1 pool(s) at their quota: .rgw.buckets.data"));

    // Deletes work over the quota; raising it lets writes in.
    let r = s3.send(Method::DELETE, &format!("/full/k{}", acked[0]), &[], Bytes::new()).await.unwrap();
    assert_eq!(r.status, StatusCode::NO_CONTENT, "DELETE over quota: {}", error_of(&r));
    shoal_ok(&conf, &["pool", "set-quota", DATA_POOL, "max_bytes", "1G"]);
    wait_until_writable(&s3, "after", "after the quota was raised").await;
    read_back(&s3, &acked[1..]).await;
}

/// Writes objects to `io` until `refusals` in a row were refused; every refusal must be
/// ENOSPC. Returns the objects acknowledged.
async fn fill_pool(io: &IoCtx, refusals: usize) -> Vec<usize> {
    let (mut acked, mut refused) = (Vec::new(), 0);
    for i in 0..1000 {
        match io.write_full(&format!("k{i}"), object(i)).await {
            Ok(()) => {
                acked.push(i);
                refused = 0;
            }
            Err(e) => {
                assert_eq!(e.errno, Errno::NoSpace, "write k{i}: {e}");
                refused += 1;
                if refused == refusals {
                    return acked;
                }
            }
        }
    }
    panic!("{} objects went in and none was refused", acked.len());
}

/// Waits until a 60 KB write of `name` succeeds; panics after two minutes.
async fn wait_until_pool_writable(io: &IoCtx, name: &str, why: &str) {
    for _ in 0..120 {
        if io.write_full(name, object(1)).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("writes did not resume {why}");
}

/// A vstart cluster of two OSDs on the big disk and a third, alone in its device class, on
/// a small tmpfs: a pool placed on the small one fills it; writes there get ENOSPC, a pool
/// on the others keeps taking writes, deletes work at full and free space without a
/// restart, and every acknowledged object reads back.
#[tokio::test(flavor = "multi_thread")]
async fn a_full_vstart_osd_refuses_writes_to_its_pgs_and_recovers_once_space_is_freed() {
    let fs = SmallFileSystem::mount(320);
    let cluster = Vstart::start("2", "2");
    let conf = cluster.conf();
    let mut command = shoal();
    let data = fs.path().to_str().unwrap();
    command.args(["osd", "run", "--id", "2", "--host", "host9", "-c", &conf, "--data", data]);
    let _osd2 = Daemon::spawn(command, &cluster.path().join("osd.2.log"));
    let up = |tree: String| tree.lines().any(|l| l.contains("osd.2 ") && l.contains(" up "));
    let joined = wait_for(|| up(ok(&conf, &["osd", "tree"])).then_some(()));
    assert!(joined.is_some(), "osd.2 joins: {}", ok(&conf, &["osd", "tree"]));
    ok(&conf, &["osd", "crush", "set-device-class", "small", "osd.2"]);
    ok(&conf, &["osd", "crush", "rule", "create-replicated", "small", "default", "host", "small"]);
    // Autoscaling off: the pool's pg_num stays as made while it fills its one OSD.
    ok(&conf, &["pool", "create", "small", "--size", "1", "--pg-num", "8", "--autoscale-mode", "off"]);
    ok(&conf, &["pool", "set", "small", "crush_rule", "small"]);
    ok(&conf, &["pool", "create", "big", "--size", "2", "--pg-num", "8"]);
    wait_all_clean(&conf, "after the pools were created");

    let rados = cluster.rados(Duration::from_secs(60)).await;
    let small = rados.ioctx("small").await.unwrap();
    let big = rados.ioctx("big").await.unwrap();
    let acked = fill_pool(&small, 3).await;
    assert!(acked.len() > 40, "only {} objects fit in 320 MiB", acked.len());
    let marked = wait_for(|| shoal_ok(&conf, &["status"]).contains("1 full osd(s): osd.2").then_some(()));
    assert!(marked.is_some(), "osd.2 was not marked full:\n{}", shoal_ok(&conf, &["status"]));
    assert!(shoal_ok(&conf, &["status"]).contains("HEALTH_ERR"));
    let e = small.write_full("tiny", &b"tiny"[..]).await.unwrap_err();
    assert!(e.errno == Errno::NoSpace && e.message.contains("osd.2 is full"), "{e}");
    big.write_full("elsewhere", &b"fine"[..]).await.expect("a pool on the other OSDs takes writes");

    let (deleted, kept) = acked.split_at(acked.len() / 3);
    for i in deleted {
        small.remove(&format!("k{i}")).await.unwrap_or_else(|e| panic!("remove k{i} at full: {e}"));
    }
    wait_until_pool_writable(&small, "after", "after a third of the objects were deleted").await;
    let healthy = wait_for(|| (!shoal_ok(&conf, &["status"]).contains("full osd")).then_some(()));
    assert!(healthy.is_some(), "osd.2 stayed full:\n{}", shoal_ok(&conf, &["status"]));
    for &i in kept {
        let data = small.read_full(&format!("k{i}")).await.unwrap_or_else(|e| panic!("k{i}: {e}"));
        assert!(data == object(i), "k{i} read back other bytes ({} of {})", data.len(), object(i).len());
    }
    assert_eq!(big.read_full("elsewhere").await.unwrap(), &b"fine"[..]);
}
