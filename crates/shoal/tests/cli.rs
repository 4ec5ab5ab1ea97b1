//! The command line: errors name the problem and exit non-zero; a round trip works.

use shoal_bench::harness::shoal as shoal_command;

fn shoal(dir: &str, args: &[&str]) -> (bool, String, String) {
    let out = shoal_command().args(["rados", "--data", dir]).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn round_trip_and_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let file = dir.path().join("in.txt");
    std::fs::write(&file, b"hello shoal").unwrap();
    assert!(shoal(d, &["mkpool", "data"]).0);
    let (ok, _, err) = shoal(d, &["-p", "data", "put", "greeting", file.to_str().unwrap()]);
    assert!(ok, "{err}");
    let (ok, out, _) = shoal(d, &["-p", "data", "get", "greeting", "-"]);
    assert!(ok);
    assert_eq!(out, "hello shoal");
    assert!(shoal(d, &["-p", "data", "setomapval", "greeting", "k1", "v1"]).0);
    assert_eq!(shoal(d, &["-p", "data", "listomapvals", "greeting"]).1, "k1\tv1\n");
    let (_, out, _) = shoal(d, &["-p", "data", "stat", "greeting"]);
    assert!(out.contains("size 11"), "{out}");
    assert_eq!(shoal(d, &["-p", "data", "ls"]).1, "greeting\n");

    let (ok, _, err) = shoal(d, &["-p", "nosuchpool", "ls"]);
    assert!(!ok);
    assert!(err.contains("pool 'nosuchpool' does not exist"), "{err}");
    let (ok, _, err) = shoal(d, &["-p", "data", "getxattr", "greeting", "missing"]);
    assert!(!ok);
    assert!(err.contains("ENODATA"), "{err}");
    let (ok, _, err) = shoal(d, &["-p", "data", "stat", "nothing"]);
    assert!(!ok);
    assert!(err.contains("ENOENT"), "{err}");
    let (ok, _, err) = shoal(d, &["-o", "osd_bogus=1", "lspools"]);
    assert!(!ok);
    assert!(err.contains("osd_bogus"), "{err}");
    let (ok, _, err) = shoal(d, &["-o", "store_rocksdb_options=compression=kBogus", "lspools"]);
    assert!(!ok);
    assert!(err.contains("compression"), "{err}");
}

#[test]
fn config_help_lists_every_option_with_its_default() {
    let out = shoal_command().args(["config", "help"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for option in ["osd_op_complaint_time", "osd_client_message_cap", "rgw_gc_obj_min_wait"] {
        assert!(text.contains(option), "{option} missing from:\n{text}");
    }
    assert!(text.contains("default: 30; takes effect at the daemon's next start"), "{text}");
}

/// `shoal … | head` ends as `ls | head` does: killed by SIGPIPE, without a panic on stderr.
#[test]
fn a_closed_pipe_ends_a_command_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = shoal_command().args(["config", "help"]).stdout(writer).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.signal(), Some(13), "{:?}: {err}", out.status);
}
