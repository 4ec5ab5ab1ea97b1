//! Runs the boto3 / aws CLI suite in `tests/s3` against `shoal server` and against a
//! vstart cluster behind two gateways. The Python interpreter comes from `SHOAL_PYTHON`
//! (scripts/test.sh sets it to a venv with boto3, pytest and the aws CLI).

mod common;

use common::{SHOAL, Vstart, wait_for};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A child process killed when dropped.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn suite_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/s3")
}

fn python() -> String {
    std::env::var("SHOAL_PYTHON").unwrap_or_else(|_| "python3".into())
}

fn spawn(args: &[&str], log: &Path) -> Daemon {
    let log = std::fs::File::create(log).unwrap();
    let child = Command::new(SHOAL)
        .args(args)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    Daemon(child)
}

fn wait_listening(port: u16) {
    let up = wait_for(|| std::net::TcpStream::connect(("127.0.0.1", port)).ok());
    assert!(up.is_some(), "nothing listens on port {port}");
}

fn run_suite(env: &[(&str, String)]) {
    let python = python();
    let bin_dir = Path::new(&python).parent().map(|p| p.to_path_buf()).unwrap_or_default();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let status = Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "-x"])
        .current_dir(suite_dir())
        .env("PATH", path)
        .env("SHOAL_BIN", SHOAL)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .status()
        .expect("cannot run python: run the suite through scripts/test.sh, which installs it");
    assert!(status.success(), "the S3 suite failed");
}

#[test]
fn s3_suite_against_shoal_server() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let data = dir.path().join("data");
    let _server = spawn(
        &["server", "--data", data.to_str().unwrap(), "--port", &port.to_string(), "--bind", "127.0.0.1"],
        &dir.path().join("server.log"),
    );
    wait_listening(port);
    let keys: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("admin.json")).unwrap()).unwrap();
    run_suite(&[
        ("SHOAL_S3_ENDPOINT", format!("http://127.0.0.1:{port}")),
        ("SHOAL_S3_ACCESS_KEY", keys["access_key"].as_str().unwrap().to_owned()),
        ("SHOAL_S3_SECRET_KEY", keys["secret_key"].as_str().unwrap().to_owned()),
        ("SHOAL_CONF", data.join("shoal.conf").to_str().unwrap().to_owned()),
    ]);
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
            let args = ["gateway", "-c", &conf, "--port", &port.to_string(), "--bind", "127.0.0.1"];
            spawn(&args, &cluster.path().join(format!("gateway.{i}.log")))
        })
        .collect();
    wait_listening(p1);
    wait_listening(p2);
    let out = common::ok(&conf, &["admin", "user", "create", "--uid", "tester", "--display-name", "Tester"]);
    let user: serde_json::Value = serde_json::from_str(&out).unwrap();
    run_suite(&[
        ("SHOAL_S3_ENDPOINT", format!("http://127.0.0.1:{p1}")),
        ("SHOAL_S3_ENDPOINT2", format!("http://127.0.0.1:{p2}")),
        ("SHOAL_S3_ACCESS_KEY", user["keys"][0]["access_key"].as_str().unwrap().to_owned()),
        ("SHOAL_S3_SECRET_KEY", user["keys"][0]["secret_key"].as_str().unwrap().to_owned()),
        ("SHOAL_CONF", conf.clone()),
    ]);
    drop(gateways);
}
