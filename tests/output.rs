//! Output formats and exports: table, CSV, Markdown, JSON to stdout and to files, and the
//! suite's matrix layout.

use crate::common::Sandbox;
use predicates::prelude::*;

/// The rows of the Markdown tables in `text`, each a list of trimmed cells (the header,
/// the alignment line, then one row per scenario).
fn markdown_rows(text: &str) -> Vec<Vec<&str>> {
    text.lines()
        .filter(|l| l.starts_with('|'))
        .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
        .collect()
}

fn run(sb: &Sandbox, args: &[&str]) -> String {
    let out = sb.cmd().args(args).arg("-q").output().unwrap();
    crate::common::assert_success(&out);
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn table_reads_with_human_units() {
    let sb = Sandbox::new();
    let out = run(
        &sb,
        &[
            "stream", "-t", "tcp,pipe", "-s", "4K", "-n", "500", "-w", "0",
        ],
    );
    assert!(
        out.contains("transport") && out.contains("throughput"),
        "{out}"
    );
    assert!(out.contains("4 KiB"), "{out}");
    assert!(out.contains("bit/s"), "{out}");
    assert!(out.lines().any(|l| l.contains("tcp")) && out.lines().any(|l| l.contains("pipe")));
}

#[test]
fn csv_has_one_row_per_scenario_with_exact_values() {
    let sb = Sandbox::new();
    let out = run(
        &sb,
        &[
            "stream", "-t", "unix,shm", "-s", "1K,2K", "-n", "100", "-w", "0", "--format", "csv",
        ],
    );
    let mut rdr = csv::Reader::from_reader(out.as_bytes());
    let headers = rdr.headers().unwrap().clone();
    assert_eq!(&headers[0], "workload");
    let rows: Vec<_> = rdr.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 4);
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    for r in &rows {
        let size: u64 = r[col("size_bytes")].parse().unwrap();
        assert_eq!(r[col("bytes_sent")].parse::<u64>().unwrap(), 100 * size);
        assert!(r[col("bits_per_second")].parse::<f64>().unwrap() > 0.0);
    }
}

#[test]
fn markdown_is_a_pipe_table() {
    let sb = Sandbox::new();
    let out = run(
        &sb,
        &[
            "stream",
            "-t",
            "socketpair",
            "-n",
            "50",
            "-w",
            "0",
            "--format",
            "markdown",
        ],
    );
    let lines: Vec<_> = out.lines().collect();
    assert!(lines[0].starts_with("| transport |"), "{out}");
    assert!(lines[1].contains("---"));
    assert!(lines[2].starts_with("| socketpair |"));
}

#[test]
fn exports_write_every_format_to_files_and_json_to_stdout() {
    let sb = Sandbox::new();
    let (j, c, m) = (
        sb.path().join("r.json"),
        sb.path().join("r.csv"),
        sb.path().join("r.md"),
    );
    let out = sb
        .cmd()
        .args([
            "stream",
            "-t",
            "pipe",
            "-n",
            "50",
            "-w",
            "0",
            "-q",
            "--export-json",
        ])
        .arg(&j)
        .arg("--export-csv")
        .arg(&c)
        .arg("--export-markdown")
        .arg(&m)
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&j).unwrap()).unwrap();
    assert_eq!(v["body"]["results"][0]["transport"], "pipe");
    assert!(std::fs::read_to_string(&c).unwrap().lines().count() == 2);
    assert!(std::fs::read_to_string(&m).unwrap().contains("| pipe |"));
    // `-` sends an export to stdout after the table.
    sb.cmd()
        .args([
            "stream",
            "-t",
            "pipe",
            "-n",
            "50",
            "-w",
            "0",
            "-q",
            "--export-json",
            "-",
        ])
        .assert()
        .success()
        .stdout(
            predicate::str::contains(format!(
                "\"schema_version\": {}",
                sockbench::report::SCHEMA_VERSION
            ))
            .and(predicate::str::contains("throughput")),
        );
}

#[test]
fn export_to_a_missing_directory_is_refused_before_running() {
    let sb = Sandbox::new();
    sb.cmd()
        .args([
            "stream",
            "-t",
            "pipe",
            "-n",
            "10",
            "-w",
            "0",
            "-q",
            "--export-json",
            "/nonexistent/dir/r.json",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--export-json /nonexistent/dir/r.json: the directory /nonexistent/dir does not exist",
        ));
}

#[test]
fn json_on_stdout_twice_is_printed_once() {
    let sb = Sandbox::new();
    let out = run(
        &sb,
        &[
            "stream",
            "-t",
            "pipe",
            "-n",
            "10",
            "-w",
            "0",
            "--format",
            "json",
            "--export-json",
            "-",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(&out).expect("exactly one JSON document");
    assert_eq!(v["body"]["results"][0]["transport"], "pipe");
}

/// The suite's matrix, its n/a cells explained, and (issue 29) no transport named the
/// fastest from its single run per cell.
#[test]
fn suite_is_a_matrix_that_ranks_no_transport_from_one_run() {
    let sb = Sandbox::new();
    let out = run(
        &sb,
        &["suite", "-d", "0.05", "-w", "0", "-t", "unix,udp,shm"],
    );
    assert_eq!(out.lines().next(), Some("Throughput: one-way stream"));
    let header = out.lines().nth(2).unwrap();
    for size in ["64 B", "4 KiB", "64 KiB", "1 MiB"] {
        assert!(header.contains(size), "{out}");
    }
    let udp = out.lines().find(|l| l.contains("│ udp")).unwrap();
    assert_eq!(
        udp.matches("n/a").count(),
        2,
        "udp cannot carry 64 KiB or 1 MiB: {udp}"
    );
    assert!(!out.contains("Fastest"), "{out}");
    assert!(
        out.contains(
            "ranking: single run, so the noise is unknown: no transport is ranked fastest"
        ),
        "{out}"
    );
    assert!(out.contains("65507"), "the n/a cells are explained: {out}");
    assert!(out.contains("Round-trip latency: pingpong"), "{out}");
    assert!(out.contains("Message rate: message transports"), "{out}");
    let rate_table = out.split("Message rate").nth(1).unwrap();
    assert!(
        rate_table.contains("│ udp") && !rate_table.contains("│ shm"),
        "rate only for datagram transports"
    );
}

#[test]
fn suite_json_has_every_cell_or_a_skip_reason() {
    let sb = Sandbox::new();
    let v = crate::common::json(&sb, &["suite", "-d", "0.05", "-w", "0", "-t", "pipe,udp6"]);
    let results = v["body"]["results"].as_array().unwrap();
    let count = |w: &str| results.iter().filter(|r| r["workload"] == w).count();
    let skipped = v["body"]["skipped"].as_array().unwrap().len();
    assert_eq!(count("stream") + skipped, 8, "two transports at four sizes");
    assert_eq!(count("pingpong"), 2, "latency of every transport");
    assert_eq!(count("rate"), 1, "message rate of the datagram transport");
    assert!(v["body"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["bytes_sent"] == r["bytes_received"] || r["transport"] == "udp6"));
}

#[test]
fn an_export_path_that_is_a_directory_is_refused_before_running() {
    let sb = Sandbox::new();
    sb.cmd()
        .args(["pingpong", "-n", "10", "--histogram"])
        .arg(sb.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is a directory"));
}

#[test]
fn every_cell_sits_under_its_own_header_when_a_scenario_fails() {
    // tcp cannot bind an address that is on no interface; unix runs: the phase columns
    // must hold phases, and nothing else may appear.
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args([
            "stream",
            "-t",
            "tcp,unix",
            "--bind",
            "203.0.113.1",
            "-n",
            "100",
            "-w",
            "0",
            "-q",
            "--format",
            "markdown",
            "--wide",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    let rows = markdown_rows(&text);
    let (header, body) = (&rows[0], &rows[2..]);
    assert!(!header.contains(&"reordered/dup"), "{header:?}");
    assert!(!header.contains(&"engine"), "one engine: no engine column");
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    for row in body {
        assert_eq!(row.len(), header.len(), "{row:?}");
    }
    let (tcp, unix) = (&body[0], &body[1]);
    assert_eq!(tcp[col("throughput")], "failed");
    assert_eq!(tcp[col("transfer")], "-");
    for phase in ["connect", "transfer", "close"] {
        let cell = &unix[col(phase)];
        assert!(cell.ends_with('s'), "{phase}: {cell}");
    }
    assert!(unix[col("CPU snd/rcv")].ends_with('%'));
}

#[test]
fn a_failed_scenario_reports_unknown_counts_as_null_in_every_format() {
    let sb = Sandbox::new();
    for args in [
        &["rate", "-t", "udp", "--bind", "203.0.113.1", "-n", "100"][..],
        &["stream", "-t", "tcp", "--bind", "203.0.113.1", "-n", "100"],
        &[
            "pingpong",
            "-t",
            "udp",
            "--bind",
            "203.0.113.1",
            "-n",
            "100",
        ],
        &["connect", "-t", "tcp", "--bind", "203.0.113.1", "-n", "100"],
    ] {
        let out = sb
            .cmd()
            .args(args)
            .args(["-w", "0", "-q", "--format", "json"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let r = &v["body"]["results"][0];
        assert!(r["error"].is_string());
        for key in [
            "messages_lost",
            "delivered_fraction",
            "messages_reordered",
            "messages_duplicated",
            "udp_receive_buffer_errors",
            "requests_lost",
            "replies_lost",
            "bits_per_second",
            "messages_per_second",
        ] {
            assert!(r[key].is_null(), "{args:?}: {key} = {}", r[key]);
        }
        let csv = sb
            .cmd()
            .args(args)
            .args(["-w", "0", "-q", "--format", "csv"])
            .output()
            .unwrap();
        let text = String::from_utf8(csv.stdout).unwrap();
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let row: Vec<&str> = lines.next().unwrap().split(',').collect();
        let lost = header.iter().position(|h| *h == "messages_lost").unwrap();
        assert_eq!(row[lost], "", "{args:?}");
    }
}

#[test]
fn usage_errors_under_format_json_still_print_a_json_document() {
    let sb = Sandbox::new();
    for args in [
        &["stream", "-s", "abc", "--format", "json"][..],
        &["stream", "--no-such-flag", "--format", "json"],
        &["--format=json", "stream", "-t", "carrier-pigeon"],
    ] {
        let out = sb.cmd().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
        assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{v}");
        assert_eq!(v["body"]["results"].as_array().unwrap().len(), 0);
        assert_eq!(v["kind"], "stream", "{v}");
        assert!(!String::from_utf8_lossy(&out.stderr).is_empty());
    }
    // Plain `sockbench` is the suite; a command that writes no document of its own
    // (`server` logs, `report` prints another's) prints no made-up one.
    let out = sb
        .cmd()
        .args(["--format", "json", "--bogus"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(v["kind"], "suite", "{v}");
    for args in [
        &["server", "--format", "json"][..],
        &["report", "--format", "json", "--bogus", "x.json"],
    ] {
        let out = sb.cmd().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            out.stdout.is_empty(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(!out.stderr.is_empty(), "{args:?}");
    }
}

#[test]
fn every_command_prints_a_json_document_for_a_usage_error_it_finds_itself() {
    // Values clap takes and the command refuses: each command's own check, not clap's.
    let sb = Sandbox::new();
    for args in [
        &["serve", "-d", "abc", "--format", "json"][..],
        &[
            "load",
            "http://127.0.0.1:9/",
            "-d",
            "abc",
            "--format",
            "json",
        ],
        &["swarm", "--size", "0", "--format", "json"],
        &["relay", "-d", "abc", "--format", "json"],
        &["models", "-d", "abc", "--format", "json"],
        &[
            "listen",
            "--port",
            "0",
            "--duration",
            "abc",
            "--format",
            "json",
        ],
        &[
            "mesh",
            "--hosts",
            "127.0.0.1:9,127.0.0.2:9",
            "-d",
            "0",
            "--format=json",
        ],
    ] {
        let out = sb.cmd().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: no JSON on stdout ({e}): {:?}", out.stdout));
        let error = v["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("--duration") || error.contains("--size"),
            "{args:?}: {v}"
        );
        // A document of the command's own kind, with an empty body.
        assert_eq!(v["kind"], args[0], "{args:?}: {v}");
        assert!(v["body"].is_object(), "{args:?}: {v}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(error), "{args:?}: {stderr}");
        // Without --format json, stdout stays empty.
        let plain: Vec<&str> = (args.iter().copied())
            .filter(|a| !["--format", "json", "--format=json"].contains(a))
            .collect();
        let out = sb.cmd().args(&plain).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{plain:?}");
        assert!(out.stdout.is_empty(), "{plain:?}");
    }
}

#[test]
fn the_engine_skip_note_names_each_engine_once() {
    let sb = Sandbox::new();
    let out = run(
        &sb,
        &[
            "stream", "-t", "shm,pipe", "-e", "all", "-s", "4K", "-n", "50", "-w", "0",
        ],
    );
    let note = out
        .lines()
        .find(|l| l.starts_with("n/a: shm with nonblocking"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(!note.contains("4 KiB"), "{note}");
    assert!(
        note.contains("shm with nonblocking, poll, epoll, async:"),
        "one line names the transport once and every engine it rules out: {note}"
    );
    let notes: String = out.lines().filter(|l| l.starts_with("n/a:")).collect();
    assert_eq!(notes.matches("shm 4 KiB").count(), 0, "{out}");
}

#[test]
fn the_progress_bar_stays_off_on_a_dumb_terminal() {
    // A pseudo-terminal from script(1): the bar is drawn for TERM=xterm, not TERM=dumb.
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: script(1) from util-linux is not installed");
        return;
    }
    let bin = assert_cmd::cargo::cargo_bin("sockbench");
    let stderr_on_tty = |term: &str| {
        let out = std::process::Command::new("script")
            .args([
                "-qec",
                &format!("{} stream -t pipe -d 1.5 -w 0 >/dev/null", bin.display()),
                "/dev/null",
            ])
            .env("TERM", term)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(stderr_on_tty("xterm").contains("[00:00:0"));
    assert!(!stderr_on_tty("dumb").contains("[00:00:0"));
}

#[test]
fn the_progress_bar_shows_the_time_the_plan_has_left_and_interval_lines_above_it() {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: script(1) from util-linux is not installed");
        return;
    }
    let bin = assert_cmd::cargo::cargo_bin("sockbench");
    // Two scenarios of 1 s and no warm-up: the bar starts from about 2 s left.
    let out = std::process::Command::new("script")
        .args([
            "-qec",
            &format!(
                "{} stream -t pipe,unix -d 1 -w 0 -i 0.5 >/dev/null",
                bin.display()
            ),
            "/dev/null",
        ])
        .env("TERM", "xterm")
        .output()
        .unwrap();
    let tty = String::from_utf8_lossy(&out.stdout);
    assert!(tty.contains(" ETA 2s") || tty.contains(" ETA 1s"), "{tty}");
    assert!(tty.contains(" ETA 0s"), "it counts down: {tty}");
    for t in ["pipe", "unix"] {
        assert_eq!(
            tty.matches(&format!("stream {t} 64 KiB run 1 ")).count(),
            2,
            "two interval lines each, printed once above the bar: {tty}"
        );
    }
}

#[test]
fn several_engines_get_an_engine_column_in_every_table() {
    let sb = Sandbox::new();
    for workload in ["stream", "pingpong", "rate"] {
        let out = run(
            &sb,
            &[
                workload,
                "-t",
                "tcp",
                "-e",
                "blocking,poll",
                "-n",
                "20",
                "-w",
                "0",
            ],
        );
        let header = out.lines().nth(1).unwrap();
        assert!(header.contains("engine"), "{workload}: {out}");
        assert!(out.contains("poll"), "{out}");
    }
}

#[test]
fn the_lost_column_shows_the_count_and_share_the_json_has() {
    let sb = Sandbox::new();
    for workload in ["rate", "pingpong"] {
        let json = sb.path().join(format!("{workload}.json"));
        let out = sb
            .cmd()
            .args([workload, "-t", "udp,unix", "-n", "2000", "-w", "0", "-q"])
            .args(["--wide", "--format", "markdown", "--export-json"])
            .arg(&json)
            .output()
            .unwrap();
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let rows = markdown_rows(&text);
        let col = |name: &str| rows[0].iter().position(|h| *h == name).unwrap();
        let udp = &v["body"]["results"][0];
        let (lost, sent) = (
            crate::common::u(udp, "/messages_lost"),
            crate::common::u(udp, "/messages_sent"),
        );
        let want = format!("{lost} ({:.2}%)", 100.0 * lost as f64 / sent as f64);
        assert_eq!(rows[2][col("lost")], want, "{text}");
        assert_eq!(rows[3][col("lost")], "-", "unix loses nothing: no figure");
        if workload == "pingpong" {
            let per_op = crate::common::f(udp, "/cpu_seconds_per_round_trip");
            assert_eq!(
                rows[2][col("CPU/op")],
                sockbench::vocab::units::format_ns((per_op * 1e9) as u64)
            );
            let split = format!(
                "{}/{}/{}",
                udp["requests_lost"], udp["replies_lost"], udp["replies_late"]
            );
            assert_eq!(rows[2][col("req/reply/late")], split);
            assert_eq!(rows[3][col("req/reply/late")], "-");
        } else {
            let unix = &v["body"]["results"][1];
            assert_eq!(
                rows[3][col("reordered/dup")],
                format!(
                    "{}/{}",
                    unix["messages_reordered"], unix["messages_duplicated"]
                )
            );
            let cpu = crate::common::f(unix, "/sender_cpu_seconds_per_gb")
                + crate::common::f(unix, "/receiver_cpu_seconds_per_gb");
            assert_eq!(rows[3][col("CPU s/GB snd+rcv")], format!("{cpu:.3}"));
        }
    }
}

#[test]
fn streams_and_variation_columns_appear_only_when_asked_for() {
    let sb = Sandbox::new();
    let header = |args: &[&str]| -> String {
        let out = run(&sb, args);
        out.lines().nth(1).unwrap().to_string()
    };
    let plain = header(&["stream", "-t", "pipe", "-n", "50", "-w", "0"]);
    assert!(
        !plain.contains("streams") && !plain.contains("±CV"),
        "{plain}"
    );
    let both = header(&[
        "stream", "-t", "pipe", "-n", "50", "-w", "0", "-P", "2", "--runs", "2",
    ]);
    assert!(both.contains("streams") && both.contains("±CV"), "{both}");
}

#[test]
fn a_failed_latency_scenario_says_failed_under_every_percentile() {
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args([
            "pingpong",
            "-t",
            "tcp,unix",
            "--bind",
            "203.0.113.1",
            "-n",
            "50",
            "-w",
            "0",
            "-q",
            "--format",
            "markdown",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    let rows = markdown_rows(&text);
    let p50 = rows[0].iter().position(|h| *h == "RTT p50").unwrap();
    assert_eq!(rows[2][p50], "failed", "{text}");
    assert!(rows[3][p50].ends_with('s'), "unix ran: {text}");
}

/// Run sockbench with stderr (or stdout) going nowhere writable: `/dev/full`, or a pipe
/// whose reader is gone.
fn with_broken(sb: &Sandbox, args: &[&str], stream: &str, how: &str) -> Option<i32> {
    use std::process::Stdio;
    let target = || -> Stdio {
        match how {
            "full" => std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap()
                .into(),
            _ => Stdio::piped(),
        }
    };
    let mut cmd = sb.sockbench();
    cmd.args(args).stdin(Stdio::null());
    match stream {
        "stderr" => cmd.stderr(target()).stdout(Stdio::null()),
        _ => cmd.stdout(target()).stderr(Stdio::null()),
    };
    let mut child = cmd.spawn().unwrap();
    // A closed pipe: its reader goes before anything is written.
    drop(child.stderr.take());
    drop(child.stdout.take());
    child.wait().unwrap().code()
}

#[test]
fn no_command_panics_when_stderr_or_stdout_is_closed_or_full() {
    let sb = Sandbox::new();
    let commands: [&[&str]; 10] = [
        // A failed run says why on stderr.
        &["stream", "-t", "tcp", "--bind", "203.0.113.1", "-d", "0.2"],
        &["stream", "-t", "unix", "-n", "100", "-w", "0"],
        &["pingpong", "-t", "udp", "-n", "100", "-w", "0"],
        &["compare", "missing.json", "other.json"],
        &["report", "missing.json"],
        &["load", "http://127.0.0.1:1/", "-n", "1"],
        &["swarm", "-n", "2", "-d", "0.1"],
        &["relay", "-t", "tcp", "-m", "read-write", "-d", "0.1"],
        &["serve", "--port", "0", "-d", "0.2"],
        &["stream", "--transport", "nope"],
    ];
    for args in commands {
        for stream in ["stderr", "stdout"] {
            for how in ["full", "closed"] {
                let code = with_broken(&sb, args, stream, how);
                assert!(
                    matches!(code, Some(0..=2)),
                    "{args:?} with {stream} {how}: exit {code:?} (101 is a panic)"
                );
            }
        }
    }
    assert!(sb.leftovers().is_empty(), "{:?}", sb.leftovers());
}

/// Issue 29: engines side by side (`-e`) must show their noise and never name a winner
/// inside it. With runs, each row shows its runs' spread (the cells are the document's
/// values) and the ranking names the fastest engine only when the test says so; from one
/// run each, nothing is ranked and the table says why.
#[test]
fn engines_are_ranked_only_beyond_the_noise_and_each_shows_its_runs() {
    use sockbench::measure::ranking::spread_cell;
    use sockbench::vocab::units::format_ns;
    let sb = Sandbox::new();
    for runs in ["1", "3"] {
        let out = sb
            .cmd()
            .args([
                "pingpong",
                "-t",
                "unix",
                "-e",
                "blocking,epoll",
                "-n",
                "300",
                "-w",
                "0",
            ])
            .args(["--runs", runs, "-q", "--export-json", "r.json"])
            .current_dir(sb.path())
            .output()
            .unwrap();
        crate::common::assert_success(&out);
        let text = String::from_utf8_lossy(&out.stdout);
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(sb.path().join("r.json")).unwrap())
                .unwrap();
        let rk = &v["body"]["rankings"][0];
        assert_eq!(rk["group"], "unix 64 B", "{rk}");
        assert_eq!(rk["among"], "engines");
        assert_eq!(rk["figure"], "round_trip_p50_ns");
        let line = (text.lines())
            .find(|l| l.starts_with("ranking: "))
            .unwrap_or_else(|| panic!("{text}"));
        if runs == "1" {
            assert_eq!(rk["outcome"], "single run", "{rk}");
            assert!(rk["winner"].is_null());
            assert!(line.contains("no engine is ranked fastest"), "{line}");
            assert!(!text.contains("p50 min-max"), "{text}");
            continue;
        }
        let header: Vec<&str> = (text.lines())
            .find(|l| l.contains("RTT p50"))
            .unwrap()
            .split(['│', '┆'])
            .map(str::trim)
            .collect();
        let col = header.iter().position(|h| *h == "p50 min-max").unwrap();
        for r in v["body"]["results"].as_array().unwrap() {
            let engine = r["engine"].as_str().unwrap();
            let each: Vec<f64> = (r["runs"].as_array().unwrap().iter())
                .map(|run| run["latencies"]["round_trip"]["p50_ns"].as_f64().unwrap())
                .collect();
            let cells: Vec<&str> = (text.lines())
                .find(|l| l.contains(&format!(" {engine} ")))
                .unwrap()
                .split(['│', '┆'])
                .map(str::trim)
                .collect();
            let want = spread_cell(&each, &|v| format_ns(v.round() as u64));
            assert_eq!(cells[col], want, "{engine}: {text}");
            let e = (rk["entries"].as_array().unwrap().iter())
                .find(|e| e["name"] == engine)
                .unwrap();
            let min = each.iter().copied().fold(f64::INFINITY, f64::min);
            assert_eq!(e["min"].as_f64(), Some(min), "{e}");
            assert_eq!(e["runs"], 3);
        }
        match rk["winner"].as_str() {
            Some(w) => {
                assert_eq!(rk["entries"][1]["leader_is"], "faster", "{rk}");
                assert!(line.contains(&format!("fastest engine {w} (")), "{line}");
            }
            None => {
                assert_ne!(rk["entries"][1]["leader_is"], "faster", "{rk}");
                assert!(line.contains("no fastest engine"), "{line}");
            }
        }
    }
}
