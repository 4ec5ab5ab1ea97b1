//! The harness of the tests that run `shoal` daemons as separate processes: a vstart
//! cluster, gateways and servers killed when dropped, kill -9 and restart, CLI runs,
//! polling, metrics scrapes and S3 users. Made for tests: a failure panics, naming what
//! failed.

use crate::s3client::S3Client;
use bytes::Bytes;
use http::Method;
use shoal_client::Rados;
use shoal_transport::{Credentials, TcpNetwork};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::shoal_exe as exe;

/// A command running the `shoal` binary.
pub fn shoal() -> Command {
    Command::new(exe())
}

/// A child process killed when dropped.
pub struct Daemon(pub Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Daemon {
    /// Spawns `command` with its output going to the file `log`.
    pub fn spawn(mut command: Command, log: &Path) -> Daemon {
        let log = std::fs::File::create(log).unwrap();
        let child = command.stdout(log.try_clone().unwrap()).stderr(log).stdin(Stdio::null()).spawn().unwrap();
        Daemon(child)
    }
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Waits until something listens on `port` of 127.0.0.1.
pub fn wait_listening(port: u16) {
    let up = wait_for(|| std::net::TcpStream::connect(("127.0.0.1", port)).ok());
    assert!(up.is_some(), "nothing listens on port {port}");
}

/// A `shoal vstart` cluster in a temporary directory, stopped when dropped.
pub struct Vstart {
    /// The temporary directory holding the cluster (in `c/`).
    pub dir: tempfile::TempDir,
}

impl Vstart {
    /// Starts `osds` OSDs over `hosts` hosts.
    pub fn start(osds: &str, hosts: &str) -> Vstart {
        Self::start_with(&["--osds", osds, "--hosts", hosts])
    }

    /// Starts a cluster with these `vstart` arguments.
    pub fn start_with(args: &[&str]) -> Vstart {
        Self::try_start_with(args).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts a cluster with these `vstart` arguments, or says why it could not.
    pub fn try_start_with(args: &[&str]) -> Result<Vstart, String> {
        let dir = tempfile::tempdir().unwrap();
        let out = shoal().args(["vstart", "--dir"]).arg(dir.path().join("c")).args(args).output().unwrap();
        match out.status.success() {
            true => Ok(Vstart { dir }),
            false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
        }
    }

    /// The cluster's directory.
    pub fn path(&self) -> PathBuf {
        self.dir.path().join("c")
    }

    /// The client configuration file.
    pub fn conf(&self) -> String {
        self.path().join("shoal.conf").to_str().unwrap().to_owned()
    }

    /// Stores `data` as object `name` of `pool` with `shoal rados put`, retrying while the
    /// cluster settles (as long as [`wait_for`] waits); whether it was stored.
    pub fn put(&self, pool: &str, name: &str, data: &[u8]) -> bool {
        let file = self.path().join(format!("put.{pool}.{name}"));
        std::fs::write(&file, data).unwrap();
        let args = ["rados", "-p", pool, "put", name, file.to_str().unwrap()];
        wait_for(|| shoal_c(&self.conf(), &args).0.then_some(())).is_some()
    }

    /// Object `name` of `pool` read with `shoal rados get`, or the error it printed.
    pub fn get(&self, pool: &str, name: &str) -> Result<Vec<u8>, String> {
        let file = self.path().join(format!("get.{pool}.{name}"));
        let _ = std::fs::remove_file(&file);
        match shoal_c(&self.conf(), &["rados", "-p", pool, "get", name, file.to_str().unwrap()]) {
            (true, _, _) => std::fs::read(&file).map_err(|e| e.to_string()),
            (false, _, err) => Err(err),
        }
    }

    /// The up set of `pg` as `shoal pg dump` shows it (`osd.N` names).
    pub fn up_set(&self, pg: &str) -> Vec<String> {
        let dump = ok(&self.conf(), &["pg", "dump"]);
        let row = dump.lines().find(|l| l.starts_with(&format!("{pg} "))).unwrap_or_else(|| panic!("{dump}"));
        let set = row.split_whitespace().nth(1).unwrap().trim_matches(['[', ']']);
        set.split(',').map(|osd| format!("osd.{osd}")).collect()
    }

    /// `shoal status` once `until` holds for it (polled as [`wait_for`] polls), or the last
    /// one seen.
    pub fn wait_status(&self, until: impl Fn(&str) -> bool) -> Result<String, String> {
        let mut last = String::new();
        let status = wait_for(|| {
            last = ok(&self.conf(), &["status"]);
            until(&last).then(|| last.clone())
        });
        status.ok_or(last)
    }

    /// Stops the daemons vstart started.
    pub fn stop(&self) -> bool {
        shoal().args(["vstart", "--stop", "--dir"]).arg(self.path()).output().unwrap().status.success()
    }

    /// A RADOS client of the cluster whose operations give up after `timeout`.
    pub async fn rados(&self, timeout: Duration) -> Rados {
        let conf = self.path().join("shoal.conf");
        let secrets = shoal_node::daemon::read_secrets(Path::new(&conf_value(&conf, "secret_file"))).unwrap();
        let credentials = Credentials { entity: "client.admin".into(), keys: secrets };
        let network = Arc::new(TcpNetwork::new(credentials, 256 << 20));
        let rados = Rados::connect(network, &conf_value(&conf, "mon_host")).await.unwrap();
        rados.set_op_timeout(timeout);
        rados
    }

    /// Starts gateway `n` (logging to `gateway.N.log`) with GC passes left to `gc process`
    /// and `options` (`-o`), through `command` (a `shoal` command, perhaps with a changed
    /// environment); returns it with its port once it listens.
    pub fn start_gateway(&self, n: u32, options: &[&str], mut command: Command) -> (Daemon, u16) {
        let port = free_port();
        command
            .args(["gateway", "-c", &self.conf(), "--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["-o", "rgw_gc_processor_period=3600"])
            .args(options.iter().flat_map(|o| ["-o", o]));
        let gateway = Daemon::spawn(command, &self.path().join(format!("gateway.{n}.log")));
        wait_listening(port);
        (gateway, port)
    }

    /// Starts gateway `n` with its wall clock `offset` off (libfaketime's syntax: `-300` is
    /// five minutes behind). The library is preloaded into the gateway itself: with the
    /// `faketime` wrapper, the wrapper would be the child to kill, and the gateway would
    /// keep running.
    pub fn start_skewed_gateway(&self, n: u32, offset: &str) -> (Daemon, u16) {
        let library = ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib"]
            .iter()
            .map(|dir| Path::new(dir).join("faketime/libfaketime.so.1"))
            .find(|path| path.exists())
            .expect("libfaketime is missing: scripts/test-env.sh installs it (apt package faketime)");
        let mut command = shoal();
        // Only the wall clock moves: timers and timeouts keep the real monotonic clock.
        command.env("LD_PRELOAD", library).env("FAKETIME", offset).env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        self.start_gateway(n, &[], command)
    }

    /// The objects of the gateway's data pool (heads and chunks).
    pub fn data_objects(&self) -> Vec<String> {
        ok(&self.conf(), &["rados", "-p", ".rgw.buckets.data", "ls"]).lines().map(str::to_owned).collect()
    }

    /// One S3 client per gateway port, all signed with the keys of a new user `uid`.
    pub fn user_clients(&self, uid: &str, ports: &[u16]) -> Vec<S3Client> {
        let created = ok(&self.conf(), &["admin", "user", "create", "--uid", uid, "--display-name", uid]);
        let user: serde_json::Value = serde_json::from_str(&created).unwrap();
        let keys = &user["keys"][0];
        let (access, secret) = (keys["access_key"].as_str().unwrap(), keys["secret_key"].as_str().unwrap());
        ports.iter().map(|port| S3Client::new(&format!("http://127.0.0.1:{port}"), access, secret).unwrap()).collect()
    }

    /// The pid vstart recorded for a daemon (`osd.3`, `mon.0`).
    pub fn pid(&self, name: &str) -> u32 {
        let pids = std::fs::read_to_string(self.path().join("pids")).unwrap();
        pids.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("no pid for {name} in {pids}"))
    }
}

impl Drop for Vstart {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            self.keep_logs();
        }
    }
}

impl Vstart {
    /// After a failed test, copies the daemons' logs out of the directory about to be
    /// deleted, and says where: a failure that does not come back can still be read.
    fn keep_logs(&self) {
        let kept = std::env::temp_dir().join(format!("shoal-failed-test-{}", std::process::id()));
        let logs = std::fs::read_dir(self.path()).into_iter().flatten().flatten().map(|e| e.path());
        let copied = std::fs::create_dir_all(&kept).is_ok()
            && logs
                .filter(|p| p.extension().is_some_and(|e| e == "log"))
                .all(|p| p.file_name().is_some_and(|name| std::fs::copy(&p, kept.join(name)).is_ok()));
        eprintln!("the cluster's logs{} are in {}", if copied { "" } else { " (some not copied)" }, kept.display());
    }
}

/// The command line of a running process.
pub fn cmdline(pid: u32) -> Vec<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    raw.split(|b| *b == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into_owned()).collect()
}

/// Daemons a test restarted (vstart's pid file does not know them), killed when dropped.
#[derive(Default)]
pub struct Restarted(Vec<Child>);

impl Restarted {
    /// Starts daemon `name` of `cluster` again with its old command line (`args`, from
    /// [`cmdline`]), logging to `NAME.restarted.log` (with the primaries' peering and
    /// recovery steps, unless `RUST_LOG` says otherwise).
    pub fn restart(&mut self, cluster: &Vstart, name: &str, args: &[String]) {
        let log = std::fs::File::create(cluster.path().join(format!("{name}.restarted.log"))).unwrap();
        let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "warn,shoal_pg_core::shard::primary=info".into());
        let child = Command::new(&args[0])
            .args(&args[1..])
            .env("RUST_LOG", filter)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        self.0.push(child);
    }

    /// The pid of the daemon restarted last.
    pub fn last_pid(&self) -> u32 {
        self.0.last().expect("a daemon was restarted").id()
    }

    /// SIGKILLs the daemon restarted last and waits for it.
    pub fn kill9_last(&mut self) {
        let child = self.0.last_mut().expect("a daemon was restarted");
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Restarted {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Sends a signal (`-STOP`, `-CONT`, …) to a process.
pub fn signal(pid: u32, sig: &str) {
    assert!(Command::new("kill").args([sig, &pid.to_string()]).status().unwrap().success());
}

/// Starts `shoal server` on data directory `DIR/data` with `options` (`-o`), logging to
/// `DIR/server.log`; returns it with its port and the admin keys it wrote.
pub fn start_server(dir: &Path, options: &[&str]) -> (Daemon, u16, serde_json::Value) {
    let data = dir.join("data");
    // Port 0: the server takes a free port and prints it (a port picked here could be
    // taken by another test's daemons before the server binds it).
    let mut command = shoal();
    command.args(["server", "--data", data.to_str().unwrap(), "--bind", "127.0.0.1", "--port", "0"]);
    command.args(options.iter().flat_map(|o| ["-o", o]));
    let log = dir.join("server.log");
    let server = Daemon::spawn(command, &log);
    let port = wait_for(|| {
        let text = std::fs::read_to_string(&log).ok()?;
        let line = text.lines().find_map(|l| l.strip_prefix("S3 endpoint: http://"))?;
        line.rsplit(':').next()?.parse::<u16>().ok()
    });
    let port = port
        .unwrap_or_else(|| panic!("the server did not start: {}", std::fs::read_to_string(&log).unwrap_or_default()));
    let keys = serde_json::from_str(&std::fs::read_to_string(data.join("admin.json")).unwrap()).unwrap();
    (server, port, keys)
}

/// A client of `shoal server` on `port` with the admin `keys` it wrote.
pub fn admin_client(port: u16, keys: &serde_json::Value) -> S3Client {
    let key = |name: &str| keys[name].as_str().unwrap().to_owned();
    S3Client::new(&format!("http://127.0.0.1:{port}"), &key("access_key"), &key("secret_key")).unwrap()
}

/// SIGKILLs a process and waits until it is gone.
pub fn kill9(pid: u32) {
    assert!(Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap().success());
    // A zombie leader may still have threads exiting, holding its files (RocksDB's lock):
    // gone is reaped, or a zombie whose other threads are gone too.
    let gone = wait_for(|| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let threads = std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count());
        (stat.is_empty() || (stat.contains(") Z ") && threads <= 1)).then_some(())
    });
    assert!(gone.is_some(), "pid {pid} survived SIGKILL");
}

/// Runs `shoal ARGS -c CONF`: success, stdout, stderr.
pub fn shoal_c(conf: &str, args: &[&str]) -> (bool, String, String) {
    let out = shoal().args(args).args(["-c", conf]).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The first `osd.N` that `text` names.
pub fn first_osd(text: &str) -> String {
    text.split_whitespace().find(|w| w.starts_with("osd.")).unwrap_or_else(|| panic!("no OSD in {text}")).to_owned()
}

/// Runs `shoal ARGS -c CONF` and returns stdout, failing the test on an error.
pub fn ok(conf: &str, args: &[&str]) -> String {
    let (success, out, err) = shoal_c(conf, args);
    assert!(success, "{args:?}: {err}");
    out
}

/// `shoal tell OSD perf dump`'s `osd` section.
pub fn osd_counters(conf: &str, osd: &str) -> serde_json::Value {
    let dump: serde_json::Value = serde_json::from_str(&ok(conf, &["tell", osd, "perf", "dump"])).unwrap();
    dump["osd"].clone()
}

/// How many PGs `shoal pg dump` shows active+clean.
pub fn clean_pgs(conf: &str) -> usize {
    ok(conf, &["pg", "dump"]).lines().filter(|l| l.contains(" active+clean")).count()
}

/// Waits until `pgs` PGs are active+clean, failing the test (`when` says at which step)
/// with the PG dump after two minutes.
pub fn wait_clean(conf: &str, pgs: usize, when: &str) {
    let clean = wait_for(|| (clean_pgs(conf) == pgs).then_some(()));
    assert!(clean.is_some(), "{when}: PGs did not all become active+clean:\n{}", ok(conf, &["pg", "dump"]));
}

/// How many PGs the map has, from `shoal status` (`N pools, M pgs`).
pub fn all_pgs(conf: &str) -> Option<usize> {
    let status = ok(conf, &["status"]);
    let line = status.lines().find(|l| l.contains(" pools, "))?;
    line.split_whitespace().rev().nth(1)?.parse().ok()
}

/// Waits until every PG of the map is active+clean, the map's count read again at each
/// look (pools just made or resized), failing the test as [`wait_clean`] does.
pub fn wait_all_clean(conf: &str, when: &str) {
    let clean = wait_for(|| (all_pgs(conf).is_some_and(|all| all > 0 && clean_pgs(conf) == all)).then_some(()));
    assert!(clean.is_some(), "{when}: PGs did not all become active+clean:\n{}", ok(conf, &["pg", "dump"]));
}

/// Polls `check` every 200 ms for up to two minutes.
pub fn wait_for<T>(mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if let Some(v) = check() {
            return Some(v);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    None
}

/// A value of the `key = value` client configuration file.
pub fn conf_value(conf: &Path, key: &str) -> String {
    std::fs::read_to_string(conf)
        .unwrap()
        .lines()
        .find_map(|l| l.split_once('=').filter(|(k, _)| k.trim() == key).map(|(_, v)| v.trim().to_owned()))
        .unwrap_or_else(|| panic!("{key} missing from {}", conf.display()))
}

/// The body of `GET url` (a plain `http://host:port/path`), asking for no particular format.
pub fn http_get(url: &str) -> String {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap_or_else(|| panic!("not an http URL: {url}"));
    let (host, path) = rest.split_once('/').map_or((rest, String::from("/")), |(h, p)| (h, format!("/{p}")));
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no HTTP response: {response}"));
    assert!(head.starts_with("HTTP/1.1 200"), "GET {url}: {head}");
    body.to_owned()
}

/// Scrapes a Prometheus endpoint and checks the text with `promtool check metrics` (from
/// Debian's prometheus package, which scripts/test.sh installs); returns the text.
pub fn scrape_checked(url: &str) -> String {
    use std::io::Write;
    let text = http_get(url);
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus) is needed: run the suite through scripts/test.sh");
    promtool.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = promtool.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool rejects {url}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// The metrics URL a daemon of a vstart cluster printed in its log (`osd.0`, `mon.0`).
pub fn metrics_url(cluster: &Vstart, daemon: &str) -> String {
    let log = std::fs::read_to_string(cluster.path().join(format!("{daemon}.log"))).unwrap();
    log.lines()
        .find_map(|l| l.strip_prefix("metrics: "))
        .unwrap_or_else(|| panic!("{daemon} printed no metrics URL: {log}"))
        .to_owned()
}

/// The value of one sample line `series` (name and labels exactly as printed).
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// One entry of ListObjectVersions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    /// The object key.
    pub key: String,
    /// The version id.
    pub version: String,
    /// The size in bytes (0 for a delete marker).
    pub size: usize,
    /// Whether it is a delete marker.
    pub marker: bool,
    /// Whether it is the key's current version.
    pub latest: bool,
}

/// The text of the first `<tag>` element of `text`.
pub fn xml_field<'a>(text: &'a str, tag: &str) -> Option<&'a str> {
    text.split(&format!("<{tag}>")).nth(1)?.split(&format!("</{tag}>")).next()
}

/// Every version and delete marker of `bucket`, paging through ListObjectVersions.
pub async fn all_versions(s3: &S3Client, bucket: &str) -> Vec<Listed> {
    let mut out = Vec::new();
    let (mut key_marker, mut version_marker) = (String::new(), String::new());
    loop {
        let mut query = vec![("versions", ""), ("max-keys", "100")];
        if !key_marker.is_empty() {
            query.push(("key-marker", key_marker.as_str()));
            query.push(("version-id-marker", version_marker.as_str()));
        }
        let r = s3.expect_ok(Method::GET, &format!("/{bucket}"), &query, Bytes::new()).await.unwrap();
        let text = String::from_utf8_lossy(&r.body).into_owned();
        for (tag, marker) in [("Version", false), ("DeleteMarker", true)] {
            for item in text.split(&format!("<{tag}>")).skip(1) {
                let item = item.split(&format!("</{tag}>")).next().unwrap();
                out.push(Listed {
                    key: xml_field(item, "Key").unwrap().to_owned(),
                    version: xml_field(item, "VersionId").unwrap().to_owned(),
                    size: xml_field(item, "Size").map_or(0, |s| s.parse().unwrap()),
                    marker,
                    latest: xml_field(item, "IsLatest") == Some("true"),
                });
            }
        }
        if xml_field(&text, "IsTruncated") != Some("true") {
            return out;
        }
        key_marker = xml_field(&text, "NextKeyMarker").unwrap().to_owned();
        version_marker = xml_field(&text, "NextVersionIdMarker").unwrap_or("").to_owned();
    }
}
