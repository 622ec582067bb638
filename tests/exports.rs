//! Exports never clobber what they name: a device, a FIFO or a pipe is written in place
//! (once, at the end), a symlink is followed, a regular file is replaced atomically with
//! its mode kept, the temporary file is unpredictable and never opened through a
//! symlink, every path is checked before the run, and an export that fails late still
//! leaves the report on stdout.

/// The report's schema version, as written.
const SCHEMA: u32 = sockbench::report::SCHEMA_VERSION;

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::process::{Command, Stdio};

use crate::common::Sandbox;
use predicates::prelude::*;

const QUICK: [&str; 7] = ["stream", "-t", "pipe", "-n", "20", "-w", "0"];

fn report(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).expect("a whole JSON report")
}

#[test]
fn a_device_is_written_in_place_and_never_replaced() {
    let sb = Sandbox::new();
    // The same device as /dev/null.
    let Some(dev) = own_device(&sb, "null", 3) else {
        return;
    };
    sb.cmd()
        .args(QUICK)
        .args(["-q", "--export-json"])
        .arg(&dev)
        .assert()
        .success();
    let meta = std::fs::metadata(&dev).unwrap();
    assert!(meta.file_type().is_char_device(), "the device was replaced");
    assert_eq!(meta.rdev(), nix::sys::stat::makedev(1, 3));
}

/// A device of our own in the sandbox, never the host's /dev: a broken build (or a
/// mutation test) that renamed over its target must not replace the machine's devices.
fn own_device(sb: &Sandbox, name: &str, minor: u64) -> Option<std::path::PathBuf> {
    let dev = sb.path().join(name);
    match nix::sys::stat::mknod(
        &dev,
        nix::sys::stat::SFlag::S_IFCHR,
        nix::sys::stat::Mode::from_bits_truncate(0o666),
        nix::sys::stat::makedev(1, minor),
    ) {
        Ok(()) => Some(dev),
        Err(_) => {
            eprintln!("skipped: mknod needs root (CAP_MKNOD)");
            None
        }
    }
}

#[test]
fn a_full_device_fails_the_run_but_the_report_still_reaches_stdout() {
    let sb = Sandbox::new();
    // The same device as /dev/full: every write fails with ENOSPC.
    let Some(full) = own_device(&sb, "full", 7) else {
        return;
    };
    let out = sb
        .cmd()
        .args(QUICK)
        .args(["-q", "--format", "json", "--export-json"])
        .arg(&full)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(report(&out.stdout)["schema_version"], SCHEMA);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/full") && err.contains("No space left"),
        "{err}"
    );
    assert!(std::fs::metadata(&full)
        .unwrap()
        .file_type()
        .is_char_device());
}

#[test]
fn a_fifo_reader_gets_one_whole_report() {
    let sb = Sandbox::new();
    let fifo = sb.path().join("f");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let reader = Command::new("cat")
        .arg(&fifo)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    sb.cmd()
        .args(["stream", "-t", "pipe,unix", "-n", "20", "-w", "0", "-q"])
        .arg("--export-json")
        .arg(&fifo)
        .timeout(std::time::Duration::from_secs(30))
        .assert()
        .success();
    let got = reader.wait_with_output().unwrap();
    let v = report(&got.stdout);
    assert_eq!(v["body"]["results"].as_array().unwrap().len(), 2);
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
}

#[test]
fn a_pipe_behind_dev_fd_gets_the_report_at_the_end() {
    // What `--export-json >(jq .)` passes: /dev/fd/N, a pipe to another process.
    let sb = Sandbox::new();
    let bin = assert_cmd::cargo::cargo_bin("sockbench");
    let script = format!(
        "{} stream -t pipe -n 20 -w 0 -q --export-json /dev/fd/3 3>&1 >/dev/null",
        bin.display()
    );
    let out = Command::new("bash")
        .args(["-c", &script])
        .env("TMPDIR", sb.path())
        .env("XDG_RUNTIME_DIR", sb.path())
        .output()
        .unwrap();
    crate::common::assert_success(&out);
    assert_eq!(
        report(&out.stdout)["body"]["results"][0]["transport"],
        "pipe"
    );
}

#[test]
fn this_process_stdout_by_name_is_one_document_after_the_table() {
    // /proc/self/fd/1 is what /dev/stdout leads to (a path no rename can replace).
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args(QUICK)
        .args(["-q", "--format", "csv", "--export-json", "/proc/self/fd/1"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let json_at = text.find('{').expect("the JSON follows the CSV");
    assert!(text.starts_with("workload,"));
    assert_eq!(
        report(&text.as_bytes()[json_at..])["schema_version"],
        SCHEMA
    );
}

#[test]
fn a_symlink_is_followed_and_the_file_it_names_keeps_its_mode() {
    let sb = Sandbox::new();
    let real = sb.path().join("real.json");
    std::fs::write(&real, "old").unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
    let link = sb.path().join("link.json");
    std::os::unix::fs::symlink("real.json", &link).unwrap();
    sb.cmd()
        .args(QUICK)
        .args(["-q", "--export-json"])
        .arg(&link)
        .assert()
        .success();
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        report(&std::fs::read(&real).unwrap())["schema_version"],
        SCHEMA,
        "written through the link"
    );
    assert_eq!(
        std::fs::metadata(&real).unwrap().mode() & 0o777,
        0o600,
        "the mode was kept"
    );
}

#[test]
fn a_symlink_another_user_planted_in_a_shared_directory_is_not_followed() {
    // /tmp's rule (fs.protected_symlinks): in a sticky, world-writable directory a link is
    // followed only if it is the follower's or the directory owner's. The export replaces
    // its target by a rename, which the kernel does not check, so sockbench must.
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: planting another user's symlink needs root");
        return;
    }
    let sb = Sandbox::new();
    let shared = sb.path().join("tmp");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let victim = sb.path().join("shadow");
    std::fs::write(&victim, "precious").unwrap();
    let planted = shared.join("report.json");
    std::os::unix::fs::symlink(&victim, &planted).unwrap();
    std::os::unix::fs::lchown(&planted, Some(65534), Some(65534)).unwrap();
    let out = sb
        .cmd()
        .args(QUICK)
        .args(["-q", "--export-json"])
        .arg(&planted)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("fs.protected_symlinks"), "{err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    // The same link of this user's own is followed, as the shell would.
    std::os::unix::fs::lchown(&planted, Some(0), Some(0)).unwrap();
    sb.cmd()
        .args(QUICK)
        .args(["-q", "--export-json"])
        .arg(&planted)
        .assert()
        .success();
    assert_eq!(
        report(&std::fs::read(&victim).unwrap())["schema_version"],
        SCHEMA
    );
}

#[test]
fn a_new_export_gets_the_umask_mode_and_no_temporary_file_is_left() {
    let sb = Sandbox::new();
    let path = sb.path().join("r.csv");
    sb.cmd()
        .args(QUICK)
        .args(["-q", "--export-csv"])
        .arg(&path)
        .assert()
        .success();
    // The test runner's umask is sockbench's too.
    let umask = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Umask:"))
        .map(|v| u32::from_str_radix(v.trim(), 8).unwrap())
        .unwrap();
    assert_eq!(
        std::fs::metadata(&path).unwrap().mode() & 0o777,
        0o666 & !umask
    );
    let names: Vec<String> = std::fs::read_dir(sb.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["r.csv"]);
}

#[test]
fn the_old_predictable_temporary_name_is_not_used() {
    // Someone who may write the directory plants the name the old code wrote to, as a
    // symlink to a file the victim owns: it must stay untouched.
    let sb = Sandbox::new();
    let victim = sb.path().join("victim");
    std::fs::write(&victim, "precious").unwrap();
    std::os::unix::fs::symlink(&victim, sb.path().join(".r.json.sockbench-tmp")).unwrap();
    sb.cmd()
        .args(QUICK)
        .args(["-q", "--export-json"])
        .arg(sb.path().join("r.json"))
        .assert()
        .success();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert_eq!(
        report(&std::fs::read(sb.path().join("r.json")).unwrap())["schema_version"],
        SCHEMA
    );
}

#[test]
fn two_exports_naming_one_file_are_refused_before_running() {
    let sb = Sandbox::new();
    let p = sb.path().join("same");
    sb.cmd()
        .args(QUICK)
        .arg("--export-json")
        .arg(&p)
        .arg("--export-csv")
        .arg(sb.path().join(".").join("same"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--export-json and --export-csv both name",
        ));
    let sb = Sandbox::new();
    sb.cmd()
        .args(["pingpong", "-t", "unix", "-n", "5", "-w", "0"])
        .arg("--export-json")
        .arg(sb.path().join("h.json"))
        .arg("--histogram")
        .arg(sb.path().join("h.json"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--histogram both name"));
}

#[test]
fn an_unwritable_export_directory_is_refused_before_running() {
    let sb = Sandbox::new();
    // A directory even root cannot make files in.
    sb.cmd()
        .args(QUICK)
        .args(["--export-json", "/proc/r.json"])
        .assert()
        .code(2)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains(
            "--export-json /proc/r.json: cannot create a file in /proc",
        ));
    assert!(sb.leftovers().is_empty());
}

#[test]
fn an_export_that_fails_during_the_run_still_prints_the_report() {
    let sb = Sandbox::new();
    let dir = sb.path().join("d");
    std::fs::create_dir(&dir).unwrap();
    let target = dir.join("r.json");
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("sockbench"))
        .args([
            "stream",
            "-t",
            "pipe,unix,tcp",
            "-d",
            "0.4",
            "-w",
            "0",
            "-q",
            "--format",
            "json",
        ])
        .arg("--export-json")
        .arg(&target)
        .env("TMPDIR", sb.path())
        .env("XDG_RUNTIME_DIR", sb.path())
        // Each measured run waits 200 ms at its start, after the checks and before the
        // first write, and says so.
        .env("SOCKBENCH_TEST_HOLD", "run:200")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The directory disappears under the run: once the first run holds (after the
    // checks, before the first write), not after a guessed sleep.
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut err = String::new();
    loop {
        let mut line = String::new();
        let n = std::io::BufRead::read_line(&mut stderr, &mut line).unwrap();
        assert!(n > 0, "it never reached its first run: {err}");
        err.push_str(&line);
        if line.contains("holding run") {
            break;
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    std::io::Read::read_to_string(&mut stderr, &mut err).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert_eq!(report(&out)["body"]["results"].as_array().unwrap().len(), 3);
    assert!(err.contains("not written: --export-json"), "{err}");
}

#[test]
fn a_block_device_a_socket_or_a_kernel_file_is_refused_before_running() {
    let sb = Sandbox::new();
    let sysctl = "/proc/sys/net/core/rmem_max";
    let before = std::fs::read_to_string(sysctl).unwrap();
    sb.cmd()
        .args(QUICK)
        .args(["--export-json", sysctl])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("it is a kernel file"));
    assert_eq!(std::fs::read_to_string(sysctl).unwrap(), before);
    let sock = sb.path().join("s.sock");
    let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    sb.cmd()
        .args(QUICK)
        .arg("--export-csv")
        .arg(&sock)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("it is a socket"));
    let blk = sb.path().join("blk");
    if nix::sys::stat::mknod(
        &blk,
        nix::sys::stat::SFlag::S_IFBLK,
        nix::sys::stat::Mode::from_bits_truncate(0o600),
        nix::sys::stat::makedev(7, 0),
    )
    .is_err()
    {
        eprintln!("skipped the block device: mknod needs root (CAP_MKNOD)");
        return;
    }
    sb.cmd()
        .args(QUICK)
        .arg("--export-json")
        .arg(&blk)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("it is a block device"));
}

#[test]
fn a_file_beside_a_redirected_stdout_is_still_a_file_of_its_own() {
    // stdout goes to a file on the same file system as the export: only the very same
    // file counts as stdout.
    let sb = Sandbox::new();
    let table = std::fs::File::create(sb.path().join("table.txt")).unwrap();
    let status = Command::new(assert_cmd::cargo::cargo_bin("sockbench"))
        .args(QUICK)
        .arg("-q")
        .arg("--export-json")
        .arg(sb.path().join("r.json"))
        .stdout(table)
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(
        report(&std::fs::read(sb.path().join("r.json")).unwrap())["schema_version"],
        SCHEMA
    );
    let table = std::fs::read_to_string(sb.path().join("table.txt")).unwrap();
    assert!(table.contains("throughput") && !table.contains("schema_version"));
}

/// The commands that write one document of their own, each with a quick run.
fn own_document_commands() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        // A load against a port nobody listens on: one failed request, a document.
        ("load", vec!["load", "http://127.0.0.1:1/", "-n", "1"]),
        ("swarm", vec!["swarm", "-n", "2", "-d", "0.1"]),
        (
            "relay",
            vec!["relay", "-t", "tcp", "-m", "read-write", "-d", "0.1"],
        ),
    ]
}

#[test]
fn commands_with_their_own_document_check_exports_before_running_and_write_every_one() {
    let sb = Sandbox::new();
    for (name, args) in own_document_commands() {
        // A directory that does not exist: refused before anything runs (exit 2).
        let t = std::time::Instant::now();
        let out = sb
            .cmd()
            .args(&args)
            .args(["-q", "--export-json"])
            .arg(sb.path().join("no/such/dir.json"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{name}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("does not exist"), "{name}: {err}");
        assert!(
            t.elapsed() < std::time::Duration::from_secs(2),
            "{name} ran first"
        );
        // Every export is written, as every command's (issue 30).
        for flag in ["--export-html", "--export-openmetrics", "--export-csv"] {
            let path = sb.path().join("x");
            let out = sb
                .cmd()
                .args(&args)
                .args(["-q", flag])
                .arg(&path)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_ne!(out.status.code(), Some(2), "{name} {flag}: {err}");
            assert!(path.exists(), "{name} {flag}: {err}");
            std::fs::remove_file(&path).unwrap();
        }
    }
    let out = sb
        .cmd()
        .args(["server", "--port", "0", "--export-json"])
        .arg(sb.path().join("s.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("export from the client"));
}

#[test]
fn commands_with_their_own_document_write_a_fifo_without_a_reader_in_bounded_time() {
    let sb = Sandbox::new();
    for (name, args) in own_document_commands() {
        let fifo = sb.path().join(format!("{name}.fifo"));
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let mut child = sb
            .sockbench()
            .args(&args)
            .args(["-q", "--format", "json", "--export-json"])
            .arg(&fifo)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Nobody reads: it gives up after a few seconds (once, it blocked for ever).
        let until = std::time::Instant::now() + std::time::Duration::from_secs(15);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(
                std::time::Instant::now() < until,
                "{name} hangs on the FIFO"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        let out = child.wait_with_output().unwrap();
        assert_eq!(status.code(), Some(1), "{name}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("nobody read the FIFO"),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The document still reached stdout.
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(v.is_object(), "{name}");
        // With a reader, the reader gets the one whole document.
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(&fifo).unwrap())
        };
        let out = sb
            .cmd()
            .args(&args)
            .args(["-q", "--export-json"])
            .arg(&fifo)
            .output()
            .unwrap();
        let got = reader.join().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&got).unwrap();
        assert_eq!(v["command"][1], name, "{name}");
        assert!(
            matches!(out.status.code(), Some(0) | Some(1)),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
