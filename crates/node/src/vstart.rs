//! `shoal vstart`: a local multi-process cluster on loopback for development and tests.
//! Each daemon is its own process with its own data directory and log file under DIR;
//! `DIR/shoal.conf` tells clients where the monitors are (`shoal rados -c DIR/shoal.conf`).

use crate::gateway_cmd::EcShape;
use clap::Args;
use shoal_types::{Result, err};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Arguments of `shoal vstart`.
#[derive(Args, Debug)]
pub struct VstartArgs {
    /// Directory holding every daemon's data, logs, the secret and `shoal.conf`.
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// Monitors to start: 1, 3 or 5 (a Raft quorum).
    #[arg(long, default_value_t = 1)]
    mons: u32,
    /// OSDs to start.
    #[arg(long, default_value_t = 3)]
    osds: u32,
    /// Hosts (failure domains) the OSDs are spread over, round robin.
    #[arg(long, default_value_t = 1)]
    hosts: u32,
    /// S3 gateways to start (their endpoints go to DIR/gateways).
    #[arg(long, default_value_t = 0)]
    gateways: u32,
    /// Keep S3 object data in an erasure-coded pool of K data and M parity shards: creates
    /// profile `rgw-K-M` (failure domain host when there are K+M hosts, else osd) and sets
    /// `rgw_data_pool_erasure_profile` in DIR/shoal.conf for every gateway.
    #[arg(long, value_name = "K+M")]
    ec: Option<EcShape>,
    /// Run each host's OSDs in a network namespace of its own, joined to the others by a
    /// veth pair, so that a host can be cut off (`shoal bench thrash` partitions). Needs
    /// root and iproute2; monitors and gateways stay in this namespace.
    #[arg(long)]
    netns: bool,
    /// An option for every daemon (`ms_cluster_mode=crc`), written to DIR/shoal.conf;
    /// repeat for several.
    #[arg(short = 'o', long = "option", value_name = "KEY=VALUE")]
    options: Vec<String>,
    /// Stop the cluster running in DIR instead.
    #[arg(long)]
    stop: bool,
}

const PIDS: &str = "pids";
const GATEWAYS: &str = "gateways";
const NETNS: &str = "netns";
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

fn io(context: String) -> impl FnOnce(std::io::Error) -> shoal_types::RadosError {
    move |e| err::io(format!("{context}: {e}"))
}

/// Starts `program ARGS` as daemon `name` (inside network namespace `netns` if given),
/// its stdout and stderr going to DIR/NAME.log (appended to, or truncated when `fresh`).
fn launch(
    dir: &Path,
    name: &str,
    netns: Option<&str>,
    program: &std::ffi::OsStr,
    args: &[String],
    fresh: bool,
) -> Result<std::process::Child> {
    let log_path = dir.join(format!("{name}.log"));
    let log = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(!fresh)
        .truncate(fresh)
        .open(&log_path)
        .map_err(io(format!("opening {}", log_path.display())))?;
    let err_log = log.try_clone().map_err(io(format!("opening {}", log_path.display())))?;
    let mut command = match netns {
        // `ip netns exec` execs the daemon: the pid is the daemon's.
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(program);
            c
        }
        None => Command::new(program),
    };
    command.args(args).stdin(Stdio::null()).stdout(log).stderr(err_log).spawn().map_err(io(format!("starting {name}")))
}

/// Starts one daemon (`shoal ARGS`, inside network namespace `netns` if given) with
/// stdout and stderr in DIR/NAME.log; returns its pid and the address and metrics URL it
/// printed.
fn spawn(dir: &Path, name: &str, netns: Option<&str>, args: &[String]) -> Result<(u32, String, Option<String>)> {
    let log_path = dir.join(format!("{name}.log"));
    let exe = std::env::current_exe().map_err(io("locating the shoal binary".into()))?;
    let child = launch(dir, name, netns, exe.as_os_str(), args, true)?;
    let started = Instant::now();
    while started.elapsed() < STARTUP_TIMEOUT {
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.contains(" listening on ") || l.starts_with("S3 endpoint: ")) {
            let addr = line.rsplit(' ').next().unwrap_or_default().to_owned();
            let metrics = text.lines().find_map(|l| l.strip_prefix("metrics: ")).map(str::to_owned);
            return Ok((child.id(), addr, metrics));
        }
        if !Path::new(&format!("/proc/{}", child.id())).exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(err::io(format!("{name} did not start; see {}", log_path.display())))
}

/// Stops the daemons started so far, after one failed to start.
fn abandon(dir: &Path, pids: &[String]) {
    if std::fs::write(dir.join(PIDS), pids.join("\n") + "\n").is_ok() {
        let _ = stop(dir);
    }
}

/// A loopback address with a port that was free a moment ago.
pub fn free_port() -> Result<String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(io("finding a free port".into()))?;
    Ok(listener.local_addr().map_err(io("finding a free port".into()))?.to_string())
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

/// Starts or stops a local cluster.
pub fn run(args: VstartArgs) -> Result<()> {
    if args.stop {
        return stop(&args.dir);
    }
    if ![1, 3, 5].contains(&args.mons) {
        return Err(err::invalid(format!("--mons must be 1, 3 or 5 (a quorum needs a majority), got {}", args.mons)));
    }
    if args.osds == 0 || args.hosts == 0 {
        return Err(err::invalid("vstart needs at least one OSD and one host"));
    }
    let failure_domain = match args.ec {
        Some(ec) => Some(ec_failure_domain(ec, args.osds, args.hosts)?),
        None => None,
    };
    crate::config::Config::from_settings(&args.options)?;
    let dir = &args.dir;
    if dir.join(PIDS).exists() {
        return Err(err::exists(format!("a cluster already runs in {} (use --stop first)", dir.display())));
    }
    std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
    let secret_path = dir.join("secret");
    let secret: [u8; 24] = rand::random();
    let secret_hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
    crate::daemon::write_private(&secret_path, format!("{secret_hex}\n").as_bytes())?;
    let path = |p: PathBuf| p.to_string_lossy().into_owned();
    let net = if args.netns { Some(Namespaces::create(dir, args.hosts)?) } else { None };
    let public_ip = net.as_ref().map_or("127.0.0.1".to_owned(), Namespaces::root_ip);
    // Monitors must know each other's addresses before they start: pick free ports. Every
    // daemon then starts from the configuration file, as on a real deployment.
    let mon_addr = (0..args.mons)
        .map(|_| free_port().map(|a| a.replace("127.0.0.1", &public_ip)))
        .collect::<Result<Vec<_>>>()?
        .join(",");
    let conf = dir.join("shoal.conf");
    let mut conf_text = format!(
        "mon_host = {mon_addr}\nsecret_file = {}\nmon_data = {}\nosd_data = {}\npublic_addr = {public_ip}\n",
        path(secret_path),
        path(dir.join("mon.$id")),
        path(dir.join("osd.$id")),
    );
    if let Some(ec) = args.ec {
        conf_text += &format!("rgw_data_pool_erasure_profile = {}\n", ec.profile_name());
    }
    for (key, value) in args.options.iter().filter_map(|o| o.split_once('=')) {
        conf_text += &format!("{} = {}\n", key.trim(), value.trim());
    }
    std::fs::write(&conf, conf_text).map_err(io(format!("writing {}", conf.display())))?;
    let conf_arg = path(conf.clone());
    let mut pids = Vec::new();
    let daemons = (0..args.mons).map(|id| (format!("mon.{id}"), vec!["mon".to_owned(), "--id".into(), id.to_string()]));
    let daemons = daemons.map(|(name, args)| (name, None, args));
    let osds = (0..args.osds).map(|id| {
        let host = id % args.hosts;
        let mut command = vec!["osd".to_owned(), "run".into(), "--id".into(), id.to_string()];
        command.extend(["--host".to_owned(), format!("host{host}")]);
        if let Some(net) = &net {
            command.extend(["--bind".to_owned(), format!("{}:0", net.host_ip(host))]);
        }
        (format!("osd.{id}"), net.as_ref().map(|n| n.namespace(host)), command)
    });
    let gateway_ports = (0..args.gateways).map(|_| free_port()).collect::<Result<Vec<_>>>()?;
    let gateways = gateway_ports.iter().enumerate().map(|(n, addr)| {
        let port = addr.rsplit(':').next().unwrap_or_default().to_owned();
        let mut args = vec!["gateway".to_owned(), "--port".into(), port, "--bind".into(), "127.0.0.1".into()];
        args.extend(["--keyring".to_owned(), path(gateway_keyring(dir, n))]);
        (format!("gateway.{n}"), None, args)
    });
    let (mut metrics, mut endpoints) = (Vec::new(), Vec::new());
    // The profile is set once the OSDs run, before any gateway creates the data pool with it.
    let last_osd = format!("osd.{}", args.osds - 1);
    for (name, netns, mut daemon_args) in daemons.chain(osds).chain(gateways) {
        daemon_args.extend(["-c".to_owned(), conf_arg.clone(), "--metrics-port".into(), "0".into()]);
        let (pid, addr, url) =
            spawn(dir, &name, netns.as_deref(), &daemon_args).inspect_err(|_| abandon(dir, &pids))?;
        pids.push(format!("{name} {pid}"));
        metrics.push(format!("{name:<9} {}", url.unwrap_or_else(|| "(none)".into())));
        if name.starts_with("gateway.") {
            endpoints.push(format!("{name} {addr}"));
        }
        if let (Some(ec), Some(domain), true) = (args.ec, failure_domain, name == last_osd) {
            set_profile(&conf_arg, ec, domain).inspect_err(|_| abandon(dir, &pids))?;
        }
        if name == last_osd && args.gateways > 0 {
            gateway_keys(dir, &conf_arg, args.gateways).inspect_err(|_| abandon(dir, &pids))?;
        }
    }
    std::fs::write(dir.join(PIDS), pids.join("\n") + "\n").map_err(io("writing the pid file".into()))?;
    if let Some(net) = &net {
        let osd_hosts: Vec<(String, u32)> = (0..args.osds).map(|id| (format!("osd.{id}"), id % args.hosts)).collect();
        net.record(dir, &osd_hosts)?;
    }
    std::fs::write(dir.join(GATEWAYS), endpoints.iter().map(|e| e.clone() + "\n").collect::<String>())
        .map_err(io("writing the gateway list".into()))?;
    println!("cluster running: {} monitors at {mon_addr}, {} OSDs on {} hosts", args.mons, args.osds, args.hosts);
    println!("reach it with:   shoal rados -c {} lspools", conf.display());
    println!("stop it with:    shoal vstart --stop --dir {}", dir.display());
    if !endpoints.is_empty() {
        println!("S3 endpoints:\n  {}", endpoints.join("\n  "));
    }
    println!("prometheus metrics:\n  {}", metrics.join("\n  "));
    Ok(())
}

/// Where the shards of a `--ec` data pool must differ: hosts when there are enough, else OSDs.
fn ec_failure_domain(ec: EcShape, osds: u32, hosts: u32) -> Result<&'static str> {
    let shards = ec.k + ec.m;
    if hosts >= shards {
        Ok("host")
    } else if osds >= shards {
        Ok("osd")
    } else {
        Err(err::invalid(format!("--ec {}+{} needs at least {shards} OSDs, got {osds}", ec.k, ec.m)))
    }
}

/// Sets the erasure-code profile of the gateways' data pool (`shoal osd
/// erasure-code-profile set`, against the cluster just started).
fn set_profile(conf: &str, ec: EcShape, failure_domain: &str) -> Result<()> {
    let mut args = vec!["osd".to_owned(), "erasure-code-profile".into(), "-c".into(), conf.into(), "set".into()];
    args.push(ec.profile_name());
    args.extend(ec.profile_settings(failure_domain));
    shoal(&args, &format!("setting erasure-code profile {}", ec.profile_name()))
}

/// Where gateway `n`'s keyring is.
pub fn gateway_keyring(dir: &Path, n: usize) -> PathBuf {
    dir.join(format!("client.rgw.{n}.keyring"))
}

/// Creates the gateways' pools as the administrator, then a key for each gateway
/// (`client.rgw.N`) in its keyring, whose caps let it read the map and work in its own
/// pools only: it may not create pools or change the cluster.
fn gateway_keys(dir: &Path, conf: &str, gateways: u32) -> Result<()> {
    shoal(&["admin".into(), "-c".into(), conf.into(), "pools".into()], "creating the gateways' pools")?;
    let pools: Vec<String> = shoal_gateway::layout::POOLS.iter().map(|p| format!("allow rwx pool={p}")).collect();
    for n in 0..gateways as usize {
        let entity = format!("client.rgw.{n}");
        let mut args = vec!["auth".to_owned(), "-c".into(), conf.into(), "get-or-create".into(), entity.clone()];
        args.extend(["mon".to_owned(), "allow r".into(), "osd".into(), pools.join(", ")]);
        args.extend(["-o".to_owned(), gateway_keyring(dir, n).to_string_lossy().into_owned()]);
        shoal(&args, &format!("creating {entity}'s key"))?;
    }
    Ok(())
}

/// Runs `shoal ARGS` to its end; an error says `what` failed and why.
fn shoal(args: &[String], what: &str) -> Result<()> {
    let exe = std::env::current_exe().map_err(io("locating the shoal binary".into()))?;
    let output = Command::new(exe).args(args).output().map_err(io(what.to_owned()))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(err::io(format!("{what}: {}", String::from_utf8_lossy(&output.stderr))))
    }
}

/// The S3 gateways of the cluster in `dir` and their endpoints (`http://…`), as
/// `DIR/gateways` records them.
pub fn gateways(dir: &Path) -> Result<Vec<(String, String)>> {
    let text = std::fs::read_to_string(dir.join(GATEWAYS)).unwrap_or_default();
    Ok(text.lines().filter_map(|l| l.split_once(' ').map(|(n, a)| (n.to_owned(), a.trim().to_owned()))).collect())
}

/// SIGKILLs daemon `name` of the cluster in `dir`; returns the command line that
/// restarts it ([`restart`]).
pub fn kill(dir: &Path, name: &str) -> Result<Vec<String>> {
    let pid = daemon_pid(dir, name)?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).map_err(io(format!("{name} (pid {pid})")))?;
    let command =
        cmdline.split(|b| *b == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into_owned()).collect();
    signal(pid, "-KILL")?;
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(command)
}

/// Sends `sig` (`-STOP`, `-CONT`, `-KILL`) to a process.
pub fn signal(pid: u32, sig: &str) -> Result<()> {
    let status =
        Command::new("kill").args([sig, &pid.to_string()]).status().map_err(io(format!("kill {sig} {pid}")))?;
    if status.success() { Ok(()) } else { Err(err::io(format!("kill {sig} {pid} failed"))) }
}

/// Starts daemon `name` again with `command` (from [`kill`]), its output appended to its
/// log, and records its pid.
pub fn restart(dir: &Path, name: &str, command: &[String]) -> Result<u32> {
    let (program, args) = command.split_first().ok_or_else(|| err::invalid(format!("no command to restart {name}")))?;
    let netns = Namespaces::of_daemon(dir, name)?;
    let child = launch(dir, name, netns.as_deref(), program.as_ref(), args, false)?;
    record_pid(dir, name, child.id())?;
    Ok(child.id())
}

/// Starts a new OSD `id` on host `host` for the cluster in `dir`, logging to
/// `DIR/osd.ID.log`, so that `vstart --stop` stops it too; returns its pid. It joins the
/// map when it boots: a new host joins the CRUSH tree under the default root. On a host
/// of a `--netns` cluster it runs in the host's namespace, at the host's address.
pub fn add_osd(dir: &Path, id: u32, host: &str) -> Result<u32> {
    let exe = std::env::current_exe().map_err(io("locating the shoal binary".into()))?;
    let conf = dir.join("shoal.conf").to_string_lossy().into_owned();
    let mut args: Vec<String> =
        ["osd", "run", "--id", &id.to_string(), "--host", host, "-c", &conf].iter().map(|a| a.to_string()).collect();
    let name = format!("osd.{id}");
    let netns = Namespaces::of_host(dir, host);
    if let Some(ns) = &netns {
        args.extend(["--bind".to_owned(), format!("{}:0", Namespaces::address_in(dir, ns)?)]);
        Namespaces::add_daemon(dir, &name, ns)?;
    }
    let child = launch(dir, &name, netns.as_deref(), exe.as_os_str(), &args, true)?;
    record_pid(dir, &name, child.id())?;
    Ok(child.id())
}

/// The daemons of the cluster in `dir` and their pids, as `DIR/pids` records them.
pub fn read_pids(dir: &Path) -> Result<Vec<(String, u32)>> {
    let text = std::fs::read_to_string(dir.join(PIDS))
        .map_err(|_| err::not_found(format!("no cluster runs in {}", dir.display())))?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_once(' ').and_then(|(n, p)| Some((n.to_owned(), p.trim().parse().ok()?))))
        .collect())
}

/// The pid of one daemon (`osd.3`) of the cluster in `dir`.
pub fn daemon_pid(dir: &Path, name: &str) -> Result<u32> {
    read_pids(dir)?
        .into_iter()
        .find_map(|(n, pid)| (n == name).then_some(pid))
        .ok_or_else(|| err::not_found(format!("{name} is not in {}", dir.join(PIDS).display())))
}

/// Records a restarted or added daemon's pid, so that `vstart --stop` stops it.
pub fn record_pid(dir: &Path, name: &str, pid: u32) -> Result<()> {
    let mut pids = read_pids(dir)?;
    match pids.iter_mut().find(|(n, _)| n == name) {
        Some(entry) => entry.1 = pid,
        None => pids.push((name.to_owned(), pid)),
    }
    let lines: Vec<String> = pids.into_iter().map(|(n, pid)| format!("{n} {pid}")).collect();
    std::fs::write(dir.join(PIDS), lines.join("\n") + "\n").map_err(io("writing the pid file".into()))
}

fn stop(dir: &Path) -> Result<()> {
    let pid_file = dir.join(PIDS);
    let pids = read_pids(dir)?;
    for (_, pid) in &pids {
        let _ = Command::new("kill").arg("-TERM").arg(pid.to_string()).status();
    }
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    for (name, pid) in &pids {
        while alive(*pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if alive(*pid) {
            let _ = Command::new("kill").arg("-KILL").arg(pid.to_string()).status();
            eprintln!("{name} (pid {pid}) ignored SIGTERM and was killed");
        }
    }
    std::fs::remove_file(&pid_file).map_err(io(format!("removing {}", pid_file.display())))?;
    Namespaces::remove(dir);
    println!("stopped {} daemons", pids.len());
    Ok(())
}

/// The network namespaces of a `--netns` cluster: host N's OSDs live in namespace
/// `shoal<tag>h<N>` at 10.<net>.N.2, joined by a veth pair to this namespace's
/// 10.<net>.N.1; monitors and gateways listen at 10.<net>.255.1, added to this
/// namespace's loopback; this namespace forwards between the hosts (turned on if it was
/// off, and off again once the last such cluster stops). DIR/netns records every name,
/// for restarts, partitions and `--stop`.
pub struct Namespaces {
    tag: String,
    net: u8,
    hosts: u32,
    /// IPv4 forwarding was off before this cluster turned it on.
    forwarding_was_off: bool,
}

const IP_FORWARD: &str = "/proc/sys/net/ipv4/ip_forward";
/// Every vstart namespace's name starts so.
const NAMESPACE_PREFIX: &str = "shoal";

impl Namespaces {
    /// Creates the namespaces, links and addresses of `hosts` hosts.
    fn create(dir: &Path, hosts: u32) -> Result<Namespaces> {
        let forwarding_was_off = std::fs::read_to_string(IP_FORWARD).is_ok_and(|v| v.trim() == "0");
        let net = Namespaces {
            tag: format!("{:04x}", rand::random::<u16>()),
            net: rand::random_range(16..250),
            hosts,
            forwarding_was_off,
        };
        // Recorded first, so that `--stop` removes whatever was made if a step fails.
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        net.record(dir, &[])?;
        net.build().inspect_err(|_| Self::remove(dir))?;
        Ok(net)
    }

    fn build(&self) -> Result<()> {
        let net = self;
        ip(&["addr", "add", &net.root_cidr(), "dev", "lo"])?;
        std::fs::write(IP_FORWARD, "1").map_err(io("enabling IPv4 forwarding".into()))?;
        for host in 0..net.hosts {
            let (ns, link) = (net.namespace(host), net.link(host));
            ip(&["netns", "add", &ns])?;
            ip(&["link", "add", &link, "type", "veth", "peer", "name", "eth0", "netns", &ns])?;
            ip(&["addr", "add", &format!("10.{}.{host}.1/24", net.net), "dev", &link])?;
            ip(&["link", "set", &link, "up"])?;
            ip(&["-n", &ns, "addr", "add", &format!("{}/24", net.host_ip(host)), "dev", "eth0"])?;
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            ip(&["-n", &ns, "route", "add", "default", "via", &format!("10.{}.{host}.1", net.net)])?;
        }
        Ok(())
    }

    /// The monitors' and gateways' address, added to this namespace's loopback.
    fn root_cidr(&self) -> String {
        format!("{}/32", self.root_ip())
    }

    /// Host `host`'s namespace.
    pub fn namespace(&self, host: u32) -> String {
        format!("{NAMESPACE_PREFIX}{}h{host}", self.tag)
    }

    /// This namespace's end of host `host`'s link: down, the host is cut off.
    fn link(&self, host: u32) -> String {
        format!("s{}h{host}", self.tag)
    }

    /// Where host `host`'s OSDs listen.
    fn host_ip(&self, host: u32) -> String {
        format!("10.{}.{host}.2", self.net)
    }

    /// Where the monitors and gateways listen.
    fn root_ip(&self) -> String {
        format!("10.{}.255.1", self.net)
    }

    /// Writes DIR/netns: the loopback address, each host's namespace and link, and the
    /// namespace of each daemon in `daemons` (name, host).
    fn record(&self, dir: &Path, daemons: &[(String, u32)]) -> Result<()> {
        let mut lines = vec![format!("address {}", self.root_cidr())];
        if self.forwarding_was_off {
            lines.push("forwarding was-off".to_owned());
        }
        lines.extend((0..self.hosts).map(|h| format!("host host{h} {} {}", self.namespace(h), self.link(h))));
        lines.extend(daemons.iter().map(|(name, h)| format!("daemon {name} {}", self.namespace(*h))));
        std::fs::write(dir.join(NETNS), lines.join("\n") + "\n").map_err(io("writing the namespace list".into()))
    }

    fn entries(dir: &Path) -> Vec<Vec<String>> {
        let text = std::fs::read_to_string(dir.join(NETNS)).unwrap_or_default();
        text.lines().map(|l| l.split_whitespace().map(str::to_owned).collect()).collect()
    }

    /// The namespace daemon `name` of the cluster in `dir` runs in, if any.
    pub fn of_daemon(dir: &Path, name: &str) -> Result<Option<String>> {
        Ok(Self::entries(dir)
            .into_iter()
            .find(|e| e.len() == 3 && e[0] == "daemon" && e[1] == name)
            .map(|e| e[2].clone()))
    }

    /// The namespace of host `host` of the cluster in `dir`, if it has one.
    fn of_host(dir: &Path, host: &str) -> Option<String> {
        Self::entries(dir).into_iter().find(|e| e.len() == 4 && e[0] == "host" && e[1] == host).map(|e| e[2].clone())
    }

    /// The address the daemons in namespace `ns` listen at, from a running one's command
    /// line (`--bind IP:0`).
    fn address_in(dir: &Path, ns: &str) -> Result<String> {
        let in_ns = |name: &str| Self::of_daemon(dir, name).ok().flatten().is_some_and(|n| n == ns);
        read_pids(dir)?
            .into_iter()
            .filter(|(name, _)| in_ns(name))
            .find_map(|(_, pid)| {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
                let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
                let bind = args.iter().position(|a| *a == b"--bind").and_then(|i| args.get(i + 1))?;
                let bind = String::from_utf8_lossy(bind).into_owned();
                Some(bind.rsplit_once(':').map_or(bind.clone(), |(ip, _)| ip.to_owned()))
            })
            .ok_or_else(|| err::not_found(format!("no running daemon tells the address of namespace {ns}")))
    }

    /// Records that daemon `name` runs in namespace `ns`.
    fn add_daemon(dir: &Path, name: &str, ns: &str) -> Result<()> {
        let mut text = std::fs::read_to_string(dir.join(NETNS)).unwrap_or_default();
        text.push_str(&format!("daemon {name} {ns}\n"));
        std::fs::write(dir.join(NETNS), text).map_err(io("writing the namespace list".into()))
    }

    /// The hosts of the cluster in `dir` that can be cut off, with their links.
    pub fn links(dir: &Path) -> Vec<(String, String)> {
        Self::entries(dir)
            .into_iter()
            .filter(|e| e.len() == 4 && e[0] == "host")
            .map(|e| (e[1].clone(), e[3].clone()))
            .collect()
    }

    /// Cuts host `host` off (`up` false) or joins it again, by its link.
    pub fn set_link(link: &str, up: bool) -> Result<()> {
        ip(&["link", "set", link, if up { "up" } else { "down" }])
    }

    /// Removes what DIR/netns records (errors ignored: some may never have been made).
    fn remove(dir: &Path) {
        for entry in Self::entries(dir) {
            let _ = match entry.as_slice() {
                [kind, cidr] if kind == "address" => ip(&["addr", "del", cidr, "dev", "lo"]),
                [kind, _, ns, _] if kind == "host" => ip(&["netns", "del", ns]),
                _ => Ok(()),
            };
        }
        let was_off = Self::entries(dir).iter().any(|e| e.first().is_some_and(|k| k == "forwarding"));
        let others = Command::new("ip")
            .args(["netns", "list"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).lines().any(|l| l.starts_with(NAMESPACE_PREFIX)));
        if was_off && matches!(others, Ok(false)) {
            let _ = std::fs::write(IP_FORWARD, "0");
        }
        let _ = std::fs::remove_file(dir.join(NETNS));
    }
}

/// Runs `ip ARGS` (iproute2), failing with what it printed.
fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip").args(args).output().map_err(io(format!("running ip {}", args.join(" "))))?;
    if out.status.success() {
        return Ok(());
    }
    Err(err::io(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim())))
}
