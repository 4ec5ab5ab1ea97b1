//! A monitor and an OSD as separate processes over authenticated TCP, driven by the CLI.

use shoal_bench::harness::{
    Daemon, Restarted, Vstart, cmdline, conf_value, free_port, kill9, ok, shoal, shoal_c, wait_clean, wait_for,
    wait_listening,
};
use std::io::{BufRead, BufReader};
use std::process::Stdio;

/// Starts a daemon and returns it with the address it printed.
fn start(args: &[&str]) -> (Daemon, String) {
    let mut child = shoal().args(args).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.split_whitespace().last().unwrap_or_default().to_owned();
    assert!(addr.starts_with("127.0.0.1:"), "daemon printed {line:?}");
    (Daemon(child), addr)
}

fn rados(mon: &str, secret: &str, args: &[&str]) -> (bool, String, String) {
    let out = shoal().args(["rados", "--mon", mon, "--secret-file", secret]).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn separate_daemons_serve_the_cli_and_keep_acknowledged_data_across_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let path = |p: &str| dir.path().join(p).to_str().unwrap().to_owned();
    std::fs::write(path("secret"), "s3cret\n").unwrap();
    std::fs::write(path("wrong"), "guess\n").unwrap();
    std::fs::write(path("payload"), vec![9u8; 300_000]).unwrap();
    let (_mon, mon) =
        start(&["mon", "--data", &path("mon"), "--bind", "127.0.0.1:0", "--secret-file", &path("secret")]);
    let osd_args = [
        "osd",
        "run",
        "--id",
        "0",
        "--data",
        &path("osd0"),
        "--bind",
        "127.0.0.1:0",
        "--secret-file",
        &path("secret"),
        "--mon",
        &mon,
    ];
    let (mut osd, _) = start(&osd_args);

    let secret = path("secret");
    assert!(rados(&mon, &secret, &["mkpool", "data", "--pg-num", "8"]).0);
    let (ok, _, err) = rados(&mon, &secret, &["-p", "data", "put", "big", &path("payload")]);
    assert!(ok, "{err}");
    assert!(rados(&mon, &secret, &["-p", "data", "setomapval", "big", "k", "v"]).0);

    let (ok, _, err) = rados(&mon, &path("wrong"), &["lspools"]);
    assert!(!ok, "a client with the wrong secret must be refused");
    assert!(err.contains("authentication failed"), "{err}");
    let intruder = shoal()
        .args(["osd", "run", "--id", "7", "--data", &path("osd7"), "--bind", "127.0.0.1:0", "--mon", &mon])
        .args(["--secret-file", &path("wrong")])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&intruder.stderr);
    assert!(!intruder.status.success(), "an OSD with the wrong secret must not join");
    assert!(err.contains("authentication failed"), "{err}");

    // kill -9 the OSD, start it again: the acknowledged object is still there.
    let _ = osd.0.kill();
    let _ = osd.0.wait();
    let (restarted, _) = start(&osd_args);
    osd = restarted;
    let (ok, out, err) = rados(&mon, &secret, &["-p", "data", "stat", "big"]);
    assert!(ok, "{err}");
    assert!(out.contains("size 300000"), "{out}");
    assert_eq!(rados(&mon, &secret, &["-p", "data", "getomapval", "big", "k"]).1, "v\n");
    drop(osd);
}

#[test]
fn vstart_spreads_objects_over_osds_and_stops() {
    let cluster = Vstart::start("3", "3");
    let conf = cluster.conf();
    ok(&conf, &["rados", "mkpool", "spread", "--pg-num", "16"]);
    let payload = cluster.dir.path().join("payload");
    std::fs::write(&payload, b"hello").unwrap();
    let mut primaries = std::collections::BTreeSet::new();
    for i in 0..12 {
        let name = format!("obj{i}");
        ok(&conf, &["rados", "-p", "spread", "put", &name, payload.to_str().unwrap()]);
        let placed = ok(&conf, &["rados", "-p", "spread", "map", &name]);
        let up = placed.rsplit('[').next().unwrap().trim().trim_end_matches(']').to_owned();
        primaries.insert(up);
    }
    assert!(primaries.len() >= 2, "12 objects all landed on {primaries:?}");
    assert_eq!(ok(&conf, &["rados", "-p", "spread", "ls"]).lines().count(), 12, "listing spans every OSD");
    assert_eq!(ok(&conf, &["rados", "-p", "spread", "get", "obj7", "-"]), "hello");
    assert!(cluster.stop());
    assert!(!shoal_c(&conf, &["rados", "lspools"]).0, "the cluster is gone after --stop");
}

#[test]
fn status_tree_and_marking_osds_out() {
    let cluster = Vstart::start("2", "2");
    let conf = cluster.conf();
    assert!(ok(&conf, &["status"]).contains("HEALTH_OK"));
    let tree = ok(&conf, &["osd", "tree"]);
    assert!(tree.contains("host host0") && tree.contains("host host1") && tree.contains("osd.1"), "{tree}");
    ok(&conf, &["pool", "create", "three", "--size", "3", "--pg-num", "8"]);
    let undersized = |pgs: &str| pgs.lines().filter(|l| l.contains("active+degraded+undersized")).count();
    let pgs = wait_for(|| Some(ok(&conf, &["pg", "dump"])).filter(|pgs| undersized(pgs) == 8));
    assert!(pgs.is_some(), "2 OSDs cannot hold 3 replicas: every PG is active but undersized");
    let status = ok(&conf, &["status"]);
    assert!(status.contains("HEALTH_WARN") && status.contains("wants 3 replicas"), "{status}");
    ok(&conf, &["osd", "out", "1"]);
    assert!(ok(&conf, &["osd", "tree"]).lines().any(|l| l.contains("osd.1") && l.contains(" up out ")), "osd.1 is out");
    assert!(ok(&conf, &["status"]).contains("1 osds out"));
    ok(&conf, &["osd", "in", "1"]);
    assert!(ok(&conf, &["osd", "crush", "reweight", "osd.1", "0.5"]).contains("reweighted osd.1 to 0.5000"));
    let tree = ok(&conf, &["osd", "tree"]);
    assert!(tree.lines().any(|l| l.contains(" 0.50000 ") && l.contains("osd.1 ")), "{tree}");
    let (success, _, err) = shoal_c(&conf, &["osd", "crush", "reweight", "osd.9", "1"]);
    assert!(!success && err.contains("osd.9 does not exist"), "{err}");
    assert_eq!(ok(&conf, &["pool", "ls"]).lines().count(), 1);
}

/// The rack each OSD sits in, as `osd tree` shows it.
fn racks_of_osds(tree: &str) -> std::collections::BTreeMap<String, String> {
    let mut rack = String::new();
    let mut racks = std::collections::BTreeMap::new();
    for line in tree.lines() {
        if let Some(name) = line.split("rack ").nth(1).and_then(|rest| rest.split_whitespace().next()) {
            rack = name.to_owned();
        } else if let Some(osd) = line.split_whitespace().find(|w| w.starts_with("osd.")) {
            racks.insert(osd.to_owned(), rack.clone());
        }
    }
    racks
}

#[test]
fn a_crush_hierarchy_rules_and_classes_through_the_cli() {
    let cluster = Vstart::start("4", "4");
    let conf = cluster.conf();
    let crush = |args: &[&str]| shoal_c(&conf, &[&["osd", "crush"][..], args].concat());
    for rack in ["rack0", "rack1"] {
        assert!(crush(&["add-bucket", rack, "rack", "root=default"]).0);
    }
    for (host, rack) in [("host0", "rack0"), ("host1", "rack0"), ("host2", "rack1"), ("host3", "rack1")] {
        let (moved, out, why) = crush(&["move", host, &format!("rack={rack}")]);
        assert!(moved && out.contains(&format!("moved {host} to {rack}")), "{why}");
    }
    let tree = ok(&conf, &["osd", "tree"]);
    let racks = racks_of_osds(&tree);
    assert_eq!(racks.values().filter(|r| *r == "rack0").count(), 2, "{tree}");
    assert_eq!(racks.values().filter(|r| *r == "rack1").count(), 2, "{tree}");
    assert!(tree.lines().any(|l| l.contains("        host host0")), "hosts indented under racks: {tree}");

    ok(&conf, &["pool", "create", "p", "--size", "2", "--pg-num", "8"]);
    for i in 0..6 {
        assert!(cluster.put("p", &format!("o{i}"), format!("data {i}").as_bytes()));
    }
    assert!(crush(&["rule", "create-replicated", "byrack", "default", "rack"]).0);
    assert!(ok(&conf, &["pool", "set", "p", "crush_rule", "byrack"]).contains("crush_rule to byrack"));
    assert!(ok(&conf, &["pool", "ls"]).contains("crush_rule byrack"));
    wait_clean(&conf, 8, "after moving the pool to rack placement");
    for seed in 0..8 {
        let up = cluster.up_set(&format!("1.{seed:x}"));
        let mut used: Vec<&String> = up.iter().map(|osd| &racks[osd]).collect();
        used.sort();
        assert_eq!(used, ["rack0", "rack1"], "pg 1.{seed:x} on {up:?}");
    }

    assert!(crush(&["set-device-class", "ssd", "osd.0", "2"]).0);
    assert!(ok(&conf, &["osd", "crush", "class-ls"]).contains("ssd: osd.0 osd.2"));
    assert!(crush(&["rule", "create-replicated", "fast", "default", "host", "ssd"]).0);
    ok(&conf, &["pool", "set", "p", "crush_rule", "fast"]);
    wait_clean(&conf, 8, "after moving the pool to the ssd class");
    for seed in 0..8 {
        let mut up = cluster.up_set(&format!("1.{seed:x}"));
        up.sort();
        assert_eq!(up, ["osd.0", "osd.2"], "pg 1.{seed:x}: only ssd OSDs");
    }
    for i in 0..6 {
        assert_eq!(cluster.get("p", &format!("o{i}")).unwrap(), format!("data {i}").as_bytes());
    }
    let dump = ok(&conf, &["osd", "crush", "rule", "dump", "fast"]);
    assert!(dump.contains("\"device_class\": \"ssd\"") && dump.contains("\"p\""), "{dump}");

    for (args, why) in [
        (&["rm", "rack0"][..], "not empty"),
        (&["rule", "rm", "fast"], "in use by pool 'p'"),
        (&["move", "rack0", "host=host1"], "holds only lower types"),
        (&["move", "rack0", "rack=host1"], "'host1' is a host, not a rack"),
        (&["add-bucket", "x", "shelf"], "not a CRUSH type"),
    ] {
        let (done, _, err) = crush(args);
        assert!(!done && err.contains(why), "{args:?}: {err}");
    }
    let (set, _, err) = shoal_c(&conf, &["pool", "set", "p", "crush_rule", "nope"]);
    assert!(!set && err.contains("CRUSH rule 'nope' does not exist"), "{err}");
    assert!(ok(&conf, &["osd", "reweight", "osd.1", "0.25"]).contains("override to 0.2500"));
    let tree = ok(&conf, &["osd", "tree"]);
    assert!(tree.lines().any(|l| l.contains("osd.1 ") && l.contains(" 0.25000 ")), "{tree}");
    let (set, _, err) = shoal_c(&conf, &["osd", "reweight", "1", "2"]);
    assert!(!set && err.contains("between 0 and 1"), "{err}");
}

/// An OSD on a new host joins a running cluster and takes data; another is drained, stopped
/// and purged only once no PG needs it; nothing is lost.
#[test]
fn a_new_host_joins_and_a_drained_osd_is_purged() {
    let cluster = Vstart::start("3", "3");
    let conf = cluster.conf();
    ok(&conf, &["pool", "create", "p", "--size", "2", "--pg-num", "16"]);
    for i in 0..8 {
        assert!(cluster.put("p", &format!("o{i}"), format!("data {i}").as_bytes()));
    }
    let mut command = shoal();
    command.args(["osd", "run", "--id", "3", "--host", "host9", "-c", &conf]);
    let _osd3 = Daemon::spawn(command, &cluster.path().join("osd.3.log"));
    let joined = wait_for(|| {
        let tree = ok(&conf, &["osd", "tree"]);
        (tree.contains("host host9") && tree.lines().any(|l| l.contains("osd.3 ") && l.contains(" up "))).then_some(())
    });
    assert!(joined.is_some(), "osd.3 joins: {}", ok(&conf, &["osd", "tree"]));
    wait_clean(&conf, 16, "after osd.3 joined");
    let dump = ok(&conf, &["pg", "dump"]);
    assert!(dump.lines().any(|l| l.split_whitespace().nth(1).is_some_and(|up| up.contains('3'))), "{dump}");

    let (safe, _, why) = shoal_c(&conf, &["osd", "safe-to-destroy", "0"]);
    assert!(!safe && why.contains("osd.0 still holds"), "{why}");
    ok(&conf, &["osd", "out", "0"]);
    wait_clean(&conf, 16, "after osd.0 went out");
    let (purged, _, why) = shoal_c(&conf, &["osd", "purge", "0"]);
    assert!(!purged && why.contains("--yes-i-really-mean-it"), "{why}");
    let (purged, _, why) = shoal_c(&conf, &["osd", "purge", "0", "--yes-i-really-mean-it"]);
    assert!(!purged && why.contains("osd.0 is up: stop it"), "{why}");
    kill9(cluster.pid("osd.0"));
    let down = wait_for(|| {
        ok(&conf, &["osd", "tree"]).lines().any(|l| l.contains("osd.0 ") && l.contains("down")).then_some(())
    });
    assert!(down.is_some(), "osd.0 is marked down");
    wait_clean(&conf, 16, "after osd.0 stopped");
    assert!(ok(&conf, &["osd", "safe-to-destroy", "0"]).contains("osd.0 is safe to destroy"));
    assert!(ok(&conf, &["osd", "purge", "0", "--yes-i-really-mean-it"]).contains("purged osd.0"));
    assert!(!ok(&conf, &["osd", "tree"]).contains("osd.0 "), "osd.0 is gone");
    let status = cluster.wait_status(|s| s.contains("HEALTH_OK"));
    assert!(status.is_ok(), "{status:?}");
    assert!(status.unwrap().contains("osd: 3 osds: 3 up, 3 in"));
    for i in 0..8 {
        assert_eq!(cluster.get("p", &format!("o{i}")).unwrap(), format!("data {i}").as_bytes());
    }
}

/// A size-1 PG whose only OSD dies waits: writes acknowledged there exist nowhere else.
/// `osd lost` is refused without `--yes-i-really-mean-it`; with it, the PG goes on empty
/// on another OSD and says what it lost, and every other object reads back.
#[test]
fn a_pg_whose_only_holder_is_declared_lost_goes_on_and_says_what_it_lost() {
    let cluster = Vstart::start("3", "3");
    let conf = cluster.conf();
    ok(&conf, &["pool", "create", "p", "--size", "1", "--min-size", "1", "--pg-num", "8"]);
    let names: Vec<String> = (0..32).map(|i| format!("o{i}")).collect();
    for name in &names {
        assert!(cluster.put("p", name, name.as_bytes()));
    }
    wait_clean(&conf, 8, "after the writes");
    // `... -> pg 1.3 -> up [2]`: the objects and PGs osd.2 alone holds.
    let placed: Vec<(String, String, String)> = names
        .iter()
        .map(|name| {
            let line = ok(&conf, &["rados", "-p", "p", "map", name]);
            let mut parts = line.trim().rsplit(" -> ");
            let up = parts.next().unwrap().to_owned();
            let pg = parts.next().unwrap().trim_start_matches("pg ").to_owned();
            (name.clone(), pg, up)
        })
        .collect();
    let (lost, kept): (Vec<_>, Vec<_>) = placed.into_iter().partition(|(_, _, up)| up == "up [2]");
    assert!(!lost.is_empty() && !kept.is_empty(), "osd.2 holds some objects and not all: {lost:?}");

    kill9(cluster.pid("osd.2"));
    assert!(wait_for(|| ok(&conf, &["status"]).contains("1 osds down").then_some(())).is_some());
    ok(&conf, &["osd", "out", "2"]);
    let pg = &lost[0].1;
    let waits = wait_for(|| {
        let dump = ok(&conf, &["pg", "dump"]);
        dump.lines().any(|l| l.starts_with(&format!("{pg} ")) && l.contains("incomplete")).then_some(())
    });
    assert!(waits.is_some(), "the PG waits for osd.2's writes: {}", ok(&conf, &["pg", "dump"]));
    let file = cluster.path().join("read");
    let get = ["rados", "-o", "rados_osd_op_timeout=3", "-p", "p", "get", &lost[0].0, file.to_str().unwrap()];
    let (read, _, why) = shoal_c(&conf, &get);
    assert!(!read && why.contains("ETIMEDOUT"), "a read of the waiting PG waits: {why}");

    let (declared, _, why) = shoal_c(&conf, &["osd", "lost", "2"]);
    assert!(!declared && why.contains("--yes-i-really-mean-it"), "{why}");
    let (declared, _, why) = shoal_c(&conf, &["osd", "lost", "1", "--yes-i-really-mean-it"]);
    assert!(!declared && why.contains("osd.1 is up"), "only a down OSD can be lost: {why}");
    let out = ok(&conf, &["osd", "lost", "2", "--yes-i-really-mean-it"]);
    assert!(out.contains("marked osd.2 lost") && out.contains(&format!("  {pg}: osd.2")), "{out}");
    assert!(ok(&conf, &["osd", "tree"]).lines().any(|l| l.contains("osd.2 ") && l.contains("lost out")));
    wait_clean(&conf, 8, "after osd.2 was declared lost");
    let dump = ok(&conf, &["pg", "dump"]);
    let line = dump.lines().find(|l| l.starts_with(&format!("{pg} "))).unwrap_or_default();
    assert!(line.contains("lost: the writes of interval") && line.contains("goes on empty"), "{dump}");
    for (name, _, _) in &lost {
        let (read, _, why) = shoal_c(&conf, &["rados", "-p", "p", "get", name, file.to_str().unwrap()]);
        assert!(!read && why.contains("ENOENT"), "{name} was only on osd.2: {why}");
    }
    for (name, _, _) in &kept {
        assert_eq!(cluster.get("p", name), Ok(name.as_bytes().to_vec()));
    }
    assert!(cluster.put("p", &lost[0].0, b"again"), "the PG takes writes again");
    assert_eq!(cluster.get("p", &lost[0].0), Ok(b"again".to_vec()));
}

/// The PG's up set as `pg dump` prints it.
fn up_of(conf: &str, pg: &str) -> String {
    let dump = ok(conf, &["pg", "dump"]);
    let line = dump.lines().find(|l| l.starts_with(&format!("{pg} "))).unwrap_or_default().to_owned();
    line.split_whitespace().nth(1).unwrap_or_default().to_owned()
}

/// Upmap exceptions by hand (one within a host is taken, one that would put two copies
/// on a host is refused), kept by the monitor under `norebalance`, and by the balancer:
/// data moves, every object reads back, and the score does not get worse.
#[test]
fn upmap_items_and_the_balancer_move_copies_within_the_rules() {
    let cluster = Vstart::start("6", "2");
    let conf = cluster.conf();
    ok(&conf, &["pool", "create", "p", "--size", "2", "--pg-num", "32"]);
    for i in 0..32 {
        assert!(cluster.put("p", &format!("o{i}"), format!("data {i}").as_bytes()));
    }
    wait_clean(&conf, 32, "after the writes");
    let before = up_of(&conf, "1.0");
    let up: Vec<u32> = before.trim_matches(['[', ']']).split(',').map(|o| o.parse().unwrap()).collect();
    let (mut taken, mut refused) = (None, 0);
    for to in (0..6).filter(|o| !up.contains(o)) {
        let (set, _, why) = shoal_c(&conf, &["osd", "pg-upmap-items", "1.0", &up[0].to_string(), &to.to_string()]);
        match set {
            true => taken = Some(to),
            false => {
                assert!(why.contains("two copies in one of its failure domains"), "{why}");
                refused += 1;
            }
        }
        if taken.is_some() {
            break;
        }
    }
    let to = taken.expect("an OSD of the same host takes the copy");
    assert!(refused <= 3, "only the other host's OSDs are refused");
    let moved = wait_for(|| (up_of(&conf, "1.0") == format!("[{to},{}]", up[1])).then_some(()));
    assert!(moved.is_some(), "pg 1.0 moved from {before} to osd.{to}: {}", up_of(&conf, "1.0"));
    let (odd, _, why) = shoal_c(&conf, &["osd", "pg-upmap-items", "1.0", "1"]);
    assert!(!odd && why.contains("2 values"), "{why}");
    wait_clean(&conf, 32, "after the upmap");
    assert!(ok(&conf, &["balancer", "status"]).contains("upmap exceptions: 1 in 1 PGs"));
    ok(&conf, &["osd", "rm-pg-upmap-items", "1.0"]);
    assert!(wait_for(|| (up_of(&conf, "1.0") == before).then_some(())).is_some(), "pg 1.0 is back on {before}");
    wait_clean(&conf, 32, "after the upmap was removed");

    // With norebalance an override weight moves no copy: exceptions keep each in place.
    let placed = |conf: &str| -> Vec<(String, Vec<u32>)> {
        let dump = ok(conf, &["pg", "dump"]);
        let row = |l: &str| {
            let (pg, up) = (l.split_whitespace().next()?, l.split_whitespace().nth(1)?);
            let mut osds: Vec<u32> = up.trim_matches(['[', ']']).split(',').filter_map(|o| o.parse().ok()).collect();
            osds.sort();
            Some((pg.to_owned(), osds))
        };
        dump.lines().filter(|l| l.starts_with("1.")).filter_map(row).collect()
    };
    let placement = placed(&conf);
    assert_eq!(placement.len(), 32, "{placement:?}");
    ok(&conf, &["osd", "set", "norebalance"]);
    ok(&conf, &["osd", "reweight", "0", "0.5"]);
    let status = ok(&conf, &["balancer", "status"]);
    assert!(!status.contains("upmap exceptions: 0 "), "the monitor kept osd.0's copies: {status}");
    wait_clean(&conf, 32, "after the override weight under norebalance");
    assert_eq!(placed(&conf), placement, "no copy moved");
    ok(&conf, &["osd", "unset", "norebalance"]);

    let score = |text: &str| -> f64 {
        let tail = text.lines().rev().find_map(|l| l.strip_prefix("score: ")).unwrap_or_else(|| panic!("{text}"));
        tail.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let eval = ok(&conf, &["balancer", "eval", "p"]);
    assert!(eval.contains("pool 'p': copies per OSD over fair share max"), "{eval}");
    let optimized = ok(&conf, &["balancer", "optimize", "--max-deviation", "0"]);
    assert!(optimized.contains("changed the upmap exceptions"), "{optimized}");
    assert!(score(&optimized) < score(&eval), "{eval}\n{optimized}");
    wait_clean(&conf, 32, "after the balancer");
    for i in 0..32 {
        assert_eq!(cluster.get("p", &format!("o{i}")), Ok(format!("data {i}").into_bytes()));
    }
}

/// `balancer on`: the leader monitor sets upmap exceptions by itself while every PG is
/// clean, a few moves per run, until no OSD is more than the deviation over its share.
#[test]
fn the_balancer_on_moves_copies_by_itself() {
    let cluster = Vstart::start("6", "2");
    let conf = cluster.conf();
    ok(&conf, &["pool", "create", "p", "--size", "2", "--pg-num", "32"]);
    wait_clean(&conf, 32, "after the pool was made");
    assert!(ok(&conf, &["balancer", "status"]).contains("inactive"));
    ok(&conf, &["config", "set", "mon", "mon_balancer_sleep_interval", "1"]);
    ok(&conf, &["config", "set", "mon", "mon_balancer_max_deviation", "0"]);
    ok(&conf, &["config", "set", "mon", "mon_balancer_max_optimizations", "2"]);
    assert!(ok(&conf, &["balancer", "on"]).contains("the balancer is on"));
    let status = ok(&conf, &["balancer", "status"]);
    assert!(status.contains("active: the leader monitor moves up to 2 copies every 1s"), "{status}");
    let done = wait_for(|| {
        let status = ok(&conf, &["balancer", "status"]);
        (status.contains("would still change: 0") && !status.contains("upmap exceptions: 0 ")).then_some(status)
    });
    assert!(done.is_some(), "the balancer did not finish: {}", ok(&conf, &["balancer", "status"]));
    ok(&conf, &["balancer", "off"]);
    wait_clean(&conf, 32, "after the balancer");
}

/// `conf` with `mon_host` replaced by `addrs`, written next to it as `name`.
fn conf_with_mons(conf: &str, addrs: &[&str], name: &str) -> String {
    let text = std::fs::read_to_string(conf).unwrap();
    let lines: Vec<String> = text
        .lines()
        .map(|l| if l.starts_with("mon_host") { format!("mon_host = {}", addrs.join(",")) } else { l.to_owned() })
        .collect();
    let path = std::path::Path::new(conf).with_file_name(name);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path.to_str().unwrap().to_owned()
}

/// A dead monitor is replaced without downtime: a new one started with `--join` is added
/// (`mon add`) and the dead one removed (`mon rm`); the quorum of two old monitors and the
/// new one then survives another old one's death, and the new one holds the whole map.
#[test]
fn a_dead_monitor_is_replaced_while_the_quorum_serves() {
    let cluster = Vstart::start_with(&["--mons", "3", "--osds", "1"]);
    let conf = cluster.conf();
    let old: Vec<String> = conf_value(std::path::Path::new(&conf), "mon_host").split(',').map(str::to_owned).collect();
    ok(&conf, &["pool", "create", "before", "--size", "1", "--pg-num", "4"]);
    kill9(cluster.pid("mon.2"));

    let addr = format!("127.0.0.1:{}", free_port());
    let secret = conf_value(std::path::Path::new(&conf), "secret_file");
    let data = cluster.path().join("mon.3");
    let mut command = shoal();
    command.args(["mon", "--id", "3", "--join", "--bind", &addr, "--secret-file", &secret, "--data"]).arg(&data);
    let _mon3 = Daemon::spawn(command, &cluster.path().join("mon.3.log"));
    wait_listening(addr.rsplit(':').next().unwrap().parse().unwrap());
    for (args, why) in [
        (&["mon", "add", "1", addr.as_str()][..], "mon.1 is already a member"),
        (&["mon", "rm", "7"], "mon.7 is not a member"),
    ] {
        let (done, _, err) = shoal_c(&conf, args);
        assert!(!done && err.contains(why), "{args:?}: {err}");
    }
    assert!(ok(&conf, &["mon", "add", "3", &addr]).contains("added mon.3"));
    let quorum = ok(&conf, &["mon", "rm", "2"]);
    let expected = format!("3 monitors: mon.0 {}, mon.1 {}, mon.3 {addr}", old[0], old[1]);
    assert!(quorum.contains(&expected), "{quorum}");

    let conf = conf_with_mons(&conf, &[&old[0], &old[1], &addr], "replaced.conf");
    kill9(cluster.pid("mon.0"));
    let created =
        wait_for(|| shoal_c(&conf, &["pool", "create", "after", "--size", "1", "--pg-num", "4"]).0.then_some(()));
    assert!(created.is_some(), "mon.1 and mon.3 commit changes");
    let status = ok(&conf, &["status"]);
    assert!(status.contains("quorum 1,3") && status.contains("1/3 mons down: mon.0"), "{status}");
    let only_new = conf_with_mons(&conf, &[&addr], "new.conf");
    let pools = ok(&only_new, &["pool", "ls"]);
    assert!(pools.contains("before ") && pools.contains("after "), "mon.3 holds the whole map: {pools}");
}

/// The PG autoscaler: a pool in mode `warn` sized for half the cluster by
/// `target_size_ratio` shows its proposal and a health warning, but keeps its pg_num;
/// switched to `on`, the leader monitor splits it to the proposal and placement follows.
#[test]
fn the_autoscaler_warns_and_then_raises_pg_num() {
    let cluster = Vstart::start("3", "3");
    let conf = cluster.conf();
    ok(&conf, &["config", "set", "mon", "mon_pg_autoscale_sleep_interval", "1"]);
    ok(&conf, &["pool", "create", "p", "--size", "3", "--pg-num", "8", "--autoscale-mode", "warn"]);
    assert!(ok(&conf, &["pool", "ls"]).contains("pg_num 8 crush_rule replicated_rule autoscale_mode warn"));
    wait_clean(&conf, 8, "after the pool was made");
    // Pool p's row of autoscale-status, split at blanks (empty columns vanish).
    let row = || {
        let status = ok(&conf, &["osd", "pool", "autoscale-status"]);
        let line = status.lines().find(|l| l.starts_with("p ")).unwrap_or_else(|| panic!("{status}"));
        line.split_whitespace().map(str::to_owned).collect::<Vec<String>>()
    };
    let columns = row();
    assert_eq!([&columns[1..3], &columns[6..]].concat(), ["0", "3.0", "8", "warn"], "{columns:?}");
    assert!(cluster.wait_status(|s| s.contains("HEALTH_OK")).is_ok());

    for (key, value, why) in [
        ("pg_autoscale_mode", "auto", "'auto' is not an autoscale mode"),
        ("target_size_ratio", "2", "between 0 and 1"),
        ("size", "2", "cannot be set"),
    ] {
        let (set, _, err) = shoal_c(&conf, &["osd", "pool", "set", "p", key, value]);
        assert!(!set && err.contains(why), "{key} {value}: {err}");
    }
    // Half of 3 OSDs × 100 PG copies, over 3 copies: 50, nearest power of two 64.
    ok(&conf, &["osd", "pool", "set", "p", "target_size_ratio", "0.5"]);
    let warned = cluster.wait_status(|s| s.contains("1 pool(s) have too few placement groups: p (8, should have 64)"));
    assert!(warned.as_ref().is_ok_and(|s| s.contains("HEALTH_WARN")), "{warned:?}");
    let columns = row();
    assert_eq!([&columns[5..6], &columns[7..]].concat(), ["0.5000", "8", "64", "warn"], "{columns:?}");
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(ok(&conf, &["pool", "ls"]).contains("pg_num 8 "), "warn mode changes nothing");

    ok(&conf, &["osd", "pool", "set", "p", "pg_autoscale_mode", "on"]);
    let split = wait_for(|| ok(&conf, &["pool", "ls"]).contains("pg_num 64 crush_rule").then_some(()));
    assert!(split.is_some(), "the autoscaler did not split the pool: {}", ok(&conf, &["pool", "ls"]));
    wait_clean(&conf, 64, "after the autoscaler split the pool");
    let status = cluster.wait_status(|s| s.contains("HEALTH_OK"));
    assert!(status.is_ok(), "{status:?}");
    let columns = row();
    assert_eq!(&columns[7..], ["64", "on"], "no proposal left: {columns:?}");
}

/// `noout` keeps a down OSD in (maintenance without data moving); unset, the monitor marks
/// it out after `mon_osd_down_out_interval`.
#[test]
fn noout_keeps_a_down_osd_in_until_it_is_unset() {
    let cluster = Vstart::start("2", "2");
    let conf = cluster.conf();
    ok(&conf, &["config", "set", "global", "mon_osd_down_out_interval", "2"]);
    assert!(ok(&conf, &["osd", "set", "noout"]).contains("noout is set"));
    let (set, _, why) = shoal_c(&conf, &["osd", "set", "nodown"]);
    assert!(!set && why.contains("'nodown' is not a cluster flag"), "{why}");
    assert!(ok(&conf, &["status"]).contains("noout flag(s) set"));
    kill9(cluster.pid("osd.1"));
    let osd1 = || ok(&conf, &["osd", "tree"]).lines().find(|l| l.contains("osd.1 ")).unwrap_or_default().to_owned();
    assert!(wait_for(|| osd1().contains(" down ").then_some(())).is_some(), "osd.1 is marked down: {}", osd1());
    std::thread::sleep(std::time::Duration::from_secs(6));
    assert!(!osd1().contains("down out"), "noout: still in three intervals later: {}", osd1());
    ok(&conf, &["osd", "unset", "noout"]);
    assert!(wait_for(|| osd1().contains("down out").then_some(())).is_some(), "marked out once unset: {}", osd1());
    assert!(!ok(&conf, &["status"]).contains("flag(s) set"));
}

#[test]
fn norecover_holds_a_returning_osds_recovery_and_pause_holds_client_operations() {
    let cluster = Vstart::start("3", "3");
    let conf = cluster.conf();
    ok(&conf, &["pool", "create", "p", "--size", "3", "--pg-num", "8"]);
    assert!(cluster.put("p", "before", b"one"));
    assert!(ok(&conf, &["osd", "set", "norecover"]).contains("norecover is set"));
    let args = cmdline(cluster.pid("osd.2"));
    kill9(cluster.pid("osd.2"));
    let down = wait_for(|| ok(&conf, &["status"]).contains("1 osds down").then_some(()));
    assert!(down.is_some(), "osd.2 was not marked down");
    // Written while osd.2 is down: its copies need recovery by log when it returns.
    for i in 0..16 {
        assert!(cluster.put("p", &format!("o{i}"), format!("data {i}").as_bytes()));
    }
    let mut restarted = Restarted::default();
    restarted.restart(&cluster, "osd.2", &args);
    assert!(wait_for(|| (!ok(&conf, &["status"]).contains("osds down")).then_some(())).is_some());
    std::thread::sleep(std::time::Duration::from_secs(5));
    let status = ok(&conf, &["status"]);
    assert!(status.contains("norecover flag(s) set") && !status.contains("8 active+clean"), "{status}");
    assert_eq!(cluster.get("p", "o3"), Ok(b"data 3".to_vec()), "PGs serve while their recovery is held");
    ok(&conf, &["osd", "unset", "norecover"]);
    wait_clean(&conf, 8, "norecover unset");

    // Paused, an operation waits and times out; unpaused, it goes through.
    ok(&conf, &["osd", "set", "pause"]);
    let file = cluster.path().join("paused");
    std::fs::write(&file, b"two").unwrap();
    let put = ["rados", "-o", "rados_osd_op_timeout=3", "-p", "p", "put", "paused", file.to_str().unwrap()];
    let (stored, _, why) = shoal_c(&conf, &put);
    assert!(!stored && why.contains("ETIMEDOUT"), "a paused cluster took a write: {why}");
    ok(&conf, &["osd", "unset", "pause"]);
    ok(&conf, &put);
    assert_eq!(cluster.get("p", "paused"), Ok(b"two".to_vec()));
}

#[test]
fn erasure_code_profiles_and_pools_through_the_cli() {
    let cluster = Vstart::start("1", "1");
    let conf = cluster.conf();
    let profile = |args: &[&str]| shoal_c(&conf, &[&["osd", "erasure-code-profile"][..], args].concat());
    assert_eq!(profile(&["ls"]).1, "default\n");
    assert!(profile(&["get", "default"]).1.contains("k=2\nm=2\n"));
    let set = profile(&["set", "ec42", "k=4", "m=2", "crush-failure-domain=osd", "stripe_unit=8K"]);
    assert!(set.0, "{}", set.2);
    let got = profile(&["get", "ec42"]).1;
    let placed = "crush-device-class=\ncrush-failure-domain=osd\ncrush-root=default\nk=4\nm=2\n";
    assert!(got.contains(placed) && got.contains("stripe_unit=8192"), "{got}");
    let (changed, _, why) = profile(&["set", "ec42", "k=3", "m=2"]);
    assert!(!changed && why.contains("--force"), "changing a profile needs --force: {why}");
    let (bad, _, why) = profile(&["set", "x", "k=4", "m=2", "plugin=clay"]);
    assert!(!bad && why.contains("plugin 'clay'"), "{why}");

    ok(&conf, &["pool", "create", "ecpool", "--erasure", "ec42", "--allow-ec-overwrites", "--pg-num", "4"]);
    let pools = ok(&conf, &["pool", "ls"]);
    assert!(
        pools.contains(
            "ecpool id 1 erasure profile ec42 (k 4, m 2, stripe_unit 8192) allow_ec_overwrites size 6 min_size 5"
        ),
        "{pools}"
    );
    let (removed, _, why) = profile(&["rm", "ec42"]);
    assert!(!removed && why.contains("in use by pool 'ecpool'"), "{why}");
    let (too_small, _, why) = shoal_c(&conf, &["pool", "create", "e2", "--erasure", "ec42", "--min-size", "3"]);
    assert!(!too_small && why.contains("min_size of a 4+2 pool must be in 4..=6"), "{why}");
    ok(&conf, &["pool", "rm", "ecpool"]);
    assert!(profile(&["rm", "ec42"]).0);
    assert_eq!(profile(&["ls"]).1, "default\n");
}

#[test]
fn central_config_changes_reach_running_osds() {
    let cluster = Vstart::start("1", "1");
    let conf = cluster.conf();
    ok(&conf, &["rados", "mkpool", "p"]);
    let value = "v".repeat(20);
    ok(&conf, &["rados", "-p", "p", "setxattr", "o", "a", &value]);
    ok(&conf, &["config", "set", "osd", "osd_max_attr_size", "10"]);
    assert_eq!(ok(&conf, &["config", "get", "osd.0", "osd_max_attr_size"]), "10\n");
    assert!(ok(&conf, &["config", "dump"]).contains("osd_max_attr_size"));
    let (success, _, err) = shoal_c(&conf, &["rados", "-p", "p", "setxattr", "o", "b", &value]);
    assert!(!success && err.contains("osd_max_attr_size is 10"), "the running OSD applies the new limit: {err}");
    ok(&conf, &["config", "rm", "osd", "osd_max_attr_size"]);
    ok(&conf, &["rados", "-p", "p", "setxattr", "o", "b", &value]);
    for (args, needle) in [
        (["config", "set", "osd", "osd_max_attr_size", "lots"], "osd_max_attr_size"),
        (["config", "set", "osd.x", "osd_max_attr_size", "5"], "osd.x"),
        (["config", "set", "osd", "no_such_option", "5"], "no_such_option"),
    ] {
        let (success, _, err) = shoal_c(&conf, &args);
        assert!(!success && err.contains(needle), "{args:?}: {err}");
    }
}

/// The options a running OSD ignores until its next start: set centrally, they are in
/// effect after a restart (`tell osd.N config show`), and they act: with
/// `store_prefer_deferred_size` above a write's size, the write stays off the data device.
#[test]
fn store_options_set_centrally_take_effect_at_the_next_start() {
    let cluster = Vstart::start("1", "1");
    let conf = cluster.conf();
    let show =
        || -> serde_json::Value { serde_json::from_str(&ok(&conf, &["tell", "osd.0", "config", "show"])).unwrap() };
    assert_eq!(show()["store_prefer_deferred_size"], "65536", "the default before");
    let settings = [
        ("store_rocksdb_options", "compression=kNoCompression,write_buffer_size=33554432"),
        ("store_sync", "false"),
        ("store_prefer_deferred_size", "1048576"),
        ("osd_op_num_shards", "3"),
        ("osd_pg_log_entries", "500"),
        ("osd_class_cache_entries", "1000"),
    ];
    for (key, value) in settings {
        ok(&conf, &["config", "set", "osd.0", key, value]);
    }
    assert_eq!(show()["osd_pg_log_entries"], "3000", "not live: the running OSD keeps its start value");
    ok(&conf, &["config", "set", "osd", "osd_max_attr_size", "77"]);
    let live = wait_for(|| (show()["osd_max_attr_size"] == "77").then_some(()));
    assert!(live.is_some(), "a live option shows at once: {}", show());
    // Restart osd.0 with its own command line.
    let args = cmdline(cluster.pid("osd.0"));
    kill9(cluster.pid("osd.0"));
    let mut restarted = Restarted::default();
    restarted.restart(&cluster, "osd.0", &args);
    let shown = wait_for(|| {
        let (success, out, _) = shoal_c(&conf, &["tell", "osd.0", "config", "show"]);
        success.then(|| serde_json::from_str::<serde_json::Value>(&out).unwrap()).filter(|v| v["store_sync"] == "false")
    });
    let shown = shown.expect("the restarted OSD answers with the central options");
    for (key, value) in settings {
        assert_eq!(shown[key], value, "{key}");
    }
    ok(&conf, &["rados", "mkpool", "p"]);
    let file = cluster.path().join("obj");
    std::fs::write(&file, vec![5u8; 512 * 1024]).unwrap();
    ok(&conf, &["rados", "-p", "p", "put", "o", file.to_str().unwrap()]);
    let perf: serde_json::Value = serde_json::from_str(&ok(&conf, &["tell", "osd.0", "perf", "dump"])).unwrap();
    assert_eq!(perf["data_device"]["bytes_written"], 0, "512 KiB < 1 MiB stays in the WAL: {perf}");
    assert!(perf["store"]["wal_bytes"].as_u64().unwrap() > 512 * 1024, "{perf}");
    let df = ok(&conf, &["osd", "df"]);
    assert!(df.contains("used_bytes") && df.lines().nth(1).is_some_and(|l| l.contains("osd.0")), "{df}");
    let (success, _, err) = shoal_c(&conf, &["tell", "osd.0", "frobnicate"]);
    assert!(!success && err.contains("unknown command 'frobnicate'"), "{err}");
    let (success, _, err) = shoal_c(&conf, &["tell", "mon.0", "df"]);
    assert!(!success && err.contains("give osd.N"), "{err}");
}
