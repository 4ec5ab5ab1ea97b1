//! Keys with caps and the cluster secret's rotation, on vstart clusters: a gateway's own
//! key does what its caps allow and nothing else, changed caps and removed keys take
//! effect on connections already open, and the daemons move to a new cluster secret one
//! at a time while clients keep writing.

use bytes::Bytes;
use shoal_bench::harness::{
    Restarted, Vstart, cmdline, conf_value, kill9, ok, shoal, shoal_c, start_server, wait_clean, wait_for,
};
use std::collections::HashMap;
use std::path::Path;

/// `shoal ARGS -c CONF --keyring KEYRING`: success and stderr.
fn as_entity(conf: &str, keyring: &str, args: &[&str]) -> (bool, String) {
    let (done, _, err) = shoal_c(conf, &[args, &["--keyring", keyring]].concat());
    (done, err)
}

/// vstart's gateway authenticates as `client.rgw.0` with caps `mon 'allow r'` and `osd
/// 'allow rwx'` on the gateway's pools: it serves S3, but its key cannot create pools,
/// mark OSDs out or touch other pools. Caps narrowed by `auth caps` and the key removed by
/// `auth rm` apply to the running gateway at once, without a restart. The daemons talk
/// crc frames among themselves and take only sealed ones from clients: the gateway and the
/// CLI work, a client offering crc alone is refused and told why.
#[test]
fn a_gateway_key_is_held_to_its_caps_and_revoked_without_restarts() {
    let modes = ["-o", "ms_cluster_mode=crc secure", "-o", "ms_service_mode=secure"];
    let cluster = Vstart::start_with(&[&["--osds", "3", "--gateways", "1"][..], &modes].concat());
    let conf = cluster.conf();
    let (done, _, err) = shoal_c(&conf, &["status", "-o", "ms_client_mode=crc"]);
    assert!(!done && err.contains("offers frame modes 'crc', this side takes 'secure'"), "{err}");
    let keyring = cluster.path().join("client.rgw.0.keyring").to_string_lossy().into_owned();
    let endpoints = shoal_node::vstart::gateways(&cluster.path()).unwrap();
    let port: u16 = endpoints[0].1.rsplit(':').next().unwrap().parse().unwrap();
    let s3 = cluster.user_clients("keys", &[port]).remove(0);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let put = |name: &str, body: &'static [u8]| {
        runtime.block_on(s3.send(http::Method::PUT, name, &[], Bytes::from_static(body)))
    };
    let get = |name: &str| runtime.block_on(s3.send(http::Method::GET, name, &[], Bytes::new()));
    let created = put("/keys", b"").unwrap();
    assert!(
        created.status.is_success(),
        "the gateway creates a bucket with its own key: {} {:?}",
        created.status,
        created.body
    );
    assert!(put("/keys/a", b"held").unwrap().status.is_success());
    let listed = ok(&conf, &["auth", "ls"]);
    assert!(listed.contains("client.rgw.0\n\tcaps: mon 'allow r' osd 'allow rwx pool=.rgw.meta"), "{listed}");

    for (args, why) in [
        (&["pool", "create", "mine", "--pg-num", "8"][..], "do not allow this (w needed)"),
        (&["osd", "out", "1"], "do not allow this (w needed)"),
        (&["auth", "get-or-create", "client.more"], "do not allow this (* needed)"),
        (&["tell", "osd.0", "perf", "dump"], "do not allow this (* needed)"),
    ] {
        let (done, err) = as_entity(&conf, &keyring, args);
        assert!(!done && err.contains("EACCES") && err.contains(why), "{args:?}: {err}");
    }
    let status = ok(&conf, &["status"]);
    assert!(status.contains("3 up, 3 in"), "osd.1 stays in: {status}");
    ok(&conf, &["pool", "create", "other", "--pg-num", "8"]);
    let (done, err) = as_entity(&conf, &keyring, &["rados", "-p", "other", "put", "x", "/etc/hostname"]);
    assert!(!done && err.contains("w needed on pool other"), "{err}");
    let (done, err) = as_entity(&conf, &keyring, &["rados", "-p", ".rgw.log", "put", "x", "/etc/hostname"]);
    assert!(done, "its own pools take its writes: {err}");
    let (done, _, err) = shoal_c(&conf, &["auth", "get-or-create", "osd.9", "mon", "allow r"]);
    assert!(!done && err.contains("only clients have keys"), "{err}");

    // Read-only caps: the running gateway's writes are refused, its reads still served.
    ok(&conf, &["auth", "caps", "client.rgw.0", "mon", "allow r", "osd", "allow r"]);
    let refused = wait_for(|| put("/keys/b", b"refused").ok().filter(|r| !r.status.is_success()));
    assert!(refused.is_some(), "writes stop once the caps say read-only");
    let read = get("/keys/a").unwrap();
    assert!(read.status.is_success() && read.body == "held", "{:?}", read.status);
    // Removed: nothing is served with the key any more, open connections included.
    ok(&conf, &["auth", "rm", "client.rgw.0"]);
    let revoked = wait_for(|| get("/keys/a").ok().filter(|r| !r.status.is_success()));
    assert!(revoked.is_some(), "reads stop once the key is removed");
    let (done, err) = as_entity(&conf, &keyring, &["rados", "lspools"]);
    assert!(!done && err.contains("authentication failed"), "{err}");
    assert!(!ok(&conf, &["auth", "ls"]).contains("client.rgw.0"));
}

/// Rotating the cluster secret (README, "Rotating the cluster secret"): every daemon is restarted with the
/// new secret first and the old one after it, then again with the new one alone. A client
/// writes throughout, including while each daemon is down; afterwards the old secret
/// opens nothing and every object reads back.
#[test]
fn the_cluster_secret_rotates_while_clients_write() {
    let cluster = Vstart::start_with(&["--mons", "3", "--osds", "3"]);
    let conf = cluster.conf();
    ok(&conf, &["pool", "create", "p", "--size", "3", "--min-size", "2", "--pg-num", "8"]);
    let secret_file = conf_value(Path::new(&conf), "secret_file");
    let old = std::fs::read_to_string(&secret_file).unwrap().trim().to_owned();
    let new = "a-new-cluster-secret-4f1c9e07b2";
    let daemons = ["mon.0", "mon.1", "mon.2", "osd.0", "osd.1", "osd.2"];
    let mut pids: HashMap<&str, u32> = daemons.iter().map(|d| (*d, cluster.pid(d))).collect();
    let mut restarted = Restarted::default();
    let mut written = Vec::new();
    for (phase, secrets) in [format!("{new}\n{old}\n"), format!("{new}\n")].iter().enumerate() {
        std::fs::write(&secret_file, secrets).unwrap();
        for daemon in daemons {
            let args = cmdline(pids[daemon]);
            kill9(pids[daemon]);
            let name = format!("o-{phase}-{daemon}");
            assert!(cluster.put("p", &name, name.as_bytes()), "a write while {daemon} is down in phase {phase}");
            written.push(name);
            restarted.restart(&cluster, daemon, &args);
            pids.insert(daemon, restarted.last_pid());
            wait_clean(&conf, 8, &format!("after {daemon} restarted in phase {phase}"));
        }
    }
    let healthy = wait_for(|| ok(&conf, &["status"]).contains("HEALTH_OK").then_some(()));
    assert!(healthy.is_some(), "{}", ok(&conf, &["status"]));
    for name in &written {
        assert_eq!(cluster.get("p", name).unwrap(), name.as_bytes());
    }
    let old_file = cluster.path().join("old-secret");
    std::fs::write(&old_file, &old).unwrap();
    let mon = conf_value(Path::new(&conf), "mon_host");
    let out = shoal().args(["rados", "lspools", "--mon", &mon, "--secret-file"]).arg(&old_file).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("authentication failed"), "{err}");
}

/// `shoal server` takes client keys too: one made with `auth get-or-create` against its
/// configuration file reaches its object layer within its caps.
#[test]
fn shoal_server_takes_entity_keys() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, _, _) = start_server(dir.path(), &[]);
    let conf = dir.path().join("data/shoal.conf").to_string_lossy().into_owned();
    let keyring = dir.path().join("reader.keyring").to_string_lossy().into_owned();
    ok(&conf, &["pool", "create", "p", "--size", "1", "--pg-num", "8"]);
    ok(&conf, &["rados", "-p", "p", "put", "x", "/etc/hostname"]);
    ok(&conf, &["auth", "get-or-create", "client.reader", "mon", "allow r", "osd", "allow r pool=p", "-o", &keyring]);
    let (done, err) = as_entity(&conf, &keyring, &["rados", "-p", "p", "stat", "x"]);
    assert!(done, "its caps allow reading pool p: {err}");
    let (done, err) = as_entity(&conf, &keyring, &["rados", "-p", "p", "put", "y", "/etc/hostname"]);
    assert!(!done && err.contains("w needed on pool p"), "{err}");
}
