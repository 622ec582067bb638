//! A hostile machine: a small /dev/shm, an address-space limit, no threads to spare,
//! arguments that are not UTF-8, runs too short to judge. sockbench never crashes or
//! panics: it exits 1 or 2 with a message that names the limit, and leaves nothing.

use std::os::unix::ffi::OsStrExt;
use std::process::Command;

use crate::common::{shm_leftovers, Sandbox};
use predicates::prelude::*;

fn sockbench() -> String {
    assert_cmd::cargo::cargo_bin("sockbench")
        .display()
        .to_string()
}

/// Whether this process may make namespaces and mounts (root, outside a locked-down
/// container); tests that need them skip otherwise, saying why.
fn can_unshare() -> bool {
    let ok = Command::new("unshare")
        .args(["-m", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: `unshare -m` is not permitted here (needs root)");
    }
    ok
}

#[test]
fn a_full_dev_shm_is_an_error_naming_its_free_space_not_a_bus_error() {
    if !can_unshare() {
        return;
    }
    let sb = Sandbox::new();
    let script = format!(
        "mount -t tmpfs -o size=512k tmpfs /dev/shm && exec {} stream -t shm -d 0.2 -w 0 -q --format json",
        sockbench()
    );
    let out = Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .env("TMPDIR", sb.path())
        .env("XDG_RUNTIME_DIR", sb.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    let e = v["body"]["results"][0]["error"].as_str().unwrap();
    assert!(e.contains("/dev/shm has 512 KiB free"), "{e}");
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
    assert!(shm_leftovers().is_empty());
}

#[test]
fn an_address_space_limit_is_checked_before_running_not_aborted_on() {
    let sb = Sandbox::new();
    let out = Command::new("prlimit")
        .args(["--as=300000000", &sockbench()])
        // 600 MB of buffers: over the 300 MB address space, and well under half of any
        // machine's free memory, so the limit is what refuses it (not the memory check,
        // which comes first and would refuse 1 GiB messages on a small machine).
        .args(["stream", "-s", "200M", "-n", "1", "-w", "0"])
        .env("TMPDIR", sb.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("address space (ulimit -v)"), "{err}");
}

#[test]
fn no_thread_to_spare_is_an_error_for_every_engine_not_a_panic() {
    // As an unprivileged user limited to one thread: neither the side threads nor the
    // async runtime's worker can start.
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: switching to an unprivileged user needs root");
        return;
    }
    for engine in [
        &["-e", "blocking"][..],
        &["-e", "async", "--runtime", "multi"],
    ] {
        let out = Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "prlimit",
                "--nproc=1",
                &sockbench(),
            ])
            .args(["stream", "-t", "tcp", "-n", "10", "-w", "0", "-q"])
            .args(engine)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{engine:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(err.contains("out of threads"), "{err}");
    }
}

#[test]
fn an_argument_that_is_not_utf8_is_a_usage_error_not_a_panic() {
    let sb = Sandbox::new();
    let bad = std::ffi::OsStr::from_bytes(b"/tmp/\xff");
    sb.cmd()
        .args(["stream", "-t", "unix", "--path"])
        .arg(bad)
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("no such directory")
                .and(predicate::str::contains("panicked").not()),
        );
    // A valid but non-UTF-8 directory works, and the report records the command line.
    let dir = std::path::PathBuf::from(std::ffi::OsStr::from_bytes(
        &[sb.path().as_os_str().as_bytes(), b"/\xff"].concat(),
    ));
    std::fs::create_dir(&dir).unwrap();
    let out = sb
        .cmd()
        .args([
            "stream", "-t", "unix", "-n", "10", "-w", "0", "-q", "--format", "json",
        ])
        .arg("--path")
        .arg(&dir)
        .output()
        .unwrap();
    crate::common::assert_success(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let argv = v["command"].as_array().unwrap();
    assert!(argv
        .last()
        .unwrap()
        .as_str()
        .unwrap()
        .ends_with("/\u{fffd}"));
    assert_eq!(v["body"]["results"][0]["messages_received"], 10);
}

#[test]
fn cpu_never_exceeds_a_core_per_thread_and_short_runs_are_not_judged() {
    let sb = Sandbox::new();
    for _ in 0..5 {
        let v = crate::common::json(
            &sb,
            &["stream", "-t", "tcp,unix,pipe", "-n", "1", "-w", "0"],
        );
        for r in v["body"]["results"].as_array().unwrap() {
            for side in ["sender", "receiver"] {
                let f = &r["runs"][0][side];
                let (cpu, secs) = (
                    crate::common::f(f, "/cpu_seconds"),
                    crate::common::f(f, "/duration_seconds"),
                );
                assert!(cpu <= secs + 1e-12, "{side}: {cpu} s of CPU in {secs} s");
                assert!(crate::common::f(f, "/cpu_utilization") <= 1.0);
            }
            // One message takes microseconds: too short for a CPU-bound verdict, and for
            // /proc/stat's 10 ms ticks, so the machine-wide figure is unknown.
            assert!(r["warnings"]
                .as_array()
                .unwrap()
                .iter()
                .all(|w| w["kind"] != "cpu-saturated"));
            if crate::common::f(&r["runs"][0], "/duration_seconds") < 0.05 {
                assert!(
                    r["runs"][0]["system"].is_null(),
                    "{}",
                    r["runs"][0]["system"]
                );
            }
        }
    }
}
