//! `sockbench models`: each model in a child server, driven by the built-in load or by
//! ab, wrk and h2load; the driver's count checked against the server's own; bad flags;
//! Ctrl-C leaves no child behind.

use std::time::{Duration, Instant};

use crate::common::{have, Sandbox};
use serde_json::Value;

fn models(sb: &Sandbox, args: &[&str]) -> Value {
    let out = sb
        .cmd()
        .arg("models")
        .args(args)
        .args(["--format", "json", "-q"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "models {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["kind"], "models", "{doc}");
    doc["body"].clone()
}

/// Every row ran, without a failure, and the server answered exactly what the driver
/// counts (`exact`) or at least that (a timed driver does not count what was in flight).
fn check_rows(v: &Value, models: &[&str], exact: Option<u64>) {
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), models.len(), "{v}");
    for (row, model) in rows.iter().zip(models) {
        assert_eq!(row["model"], *model);
        assert!(row["error"].is_null() && row["skipped"].is_null(), "{row}");
        assert_eq!(row["requests_failed"], 0, "{row}");
        assert_eq!(row["non_2xx"], 0, "{row}");
        let done = row["requests_complete"].as_u64().unwrap();
        let server = row["server_requests"].as_u64().unwrap();
        match exact {
            Some(n) => {
                assert_eq!(done, n, "{row}");
                assert_eq!(server, n, "{row}");
            }
            None => assert!(server >= done && done > 0, "{row}"),
        }
        assert!(row["requests_per_second"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["server_cpu_seconds"].as_f64().is_some(), "{row}");
    }
}

#[test]
fn the_builtin_load_drives_each_model_and_both_sides_agree() {
    let sb = Sandbox::new();
    let v = models(
        &sb,
        &["--model", "thread,epoll,poll", "-n", "2000", "-c", "10"],
    );
    assert_eq!(v["driver"], "builtin");
    check_rows(&v, &["thread", "epoll", "poll"], Some(2000));
    for row in v["rows"].as_array().unwrap() {
        assert!(row["p50_ns"].as_u64().unwrap() <= row["p99_ns"].as_u64().unwrap());
    }
    let v = models(
        &sb,
        &["--model", "select", "-k", "--pipeline", "4", "-n", "4000"],
    );
    check_rows(&v, &["select"], Some(4000));
    assert_eq!(v["keepalive"], true);
}

#[test]
fn ab_wrk_and_h2load_drive_the_models_too() {
    let sb = Sandbox::new();
    if have("ab") {
        let v = models(
            &sb,
            &["--model", "epoll,pool", "--driver", "ab", "-n", "2000"],
        );
        check_rows(&v, &["epoll", "pool"], Some(2000));
        // The driver is pinned apart from the server when there are two CPUs to use
        // (under `taskset -c 0` there is one, and nothing to pin apart).
        let two = std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2);
        let first = if two { "taskset" } else { "ab" };
        assert_eq!(v["driver_command"][0], first);
    }
    if have("wrk") {
        let v = models(
            &sb,
            &["--model", "epoll", "--driver", "wrk", "-d", "1", "-c", "10"],
        );
        check_rows(&v, &["epoll"], None);
        assert_eq!(v["duration_seconds"], 1.0);
    }
    if have("h2load") {
        let v = models(
            &sb,
            &[
                "--model",
                "epoll-workers",
                "--driver",
                "h2load",
                "-n",
                "4000",
                "--pipeline",
                "8",
            ],
        );
        check_rows(&v, &["epoll-workers"], Some(4000));
        assert!(
            v["rows"][0]["p50_ns"].is_null(),
            "h2load has no percentiles"
        );
    }
}

/// Issue 29: commands that rank must show their noise and never name a winner inside it.
/// From one run each the table says the noise is unknown and names no fastest model.
#[test]
fn the_table_names_every_model_and_ranks_none_from_a_single_run() {
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args([
            "models",
            "--model",
            "epoll,thread",
            "-n",
            "500",
            "-c",
            "5",
            "-q",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("500 requests over 5 connections"), "{text}");
    assert!(
        text.contains("│ epoll ") && text.contains("│ thread "),
        "{text}"
    );
    assert!(text.contains(" 1 run ┆"), "{text}");
    assert!(
        text.contains("ranking: single run, so the noise is unknown: no model is ranked fastest"),
        "{text}"
    );
    assert!(
        !text.contains("fastest: ") && !text.contains("fastest model"),
        "{text}"
    );
}

/// With runs, each row shows their spread, its cells are the document's values, and
/// the ranking names a winner only when the test says it beats the other beyond the
/// noise of their runs.
#[test]
fn with_runs_each_model_shows_its_spread_and_a_winner_only_beyond_the_noise() {
    use sockbench::measure::ranking::spread_cell;
    let sb = Sandbox::new();
    let out = sb
        .cmd()
        .args([
            "models",
            "--model",
            "epoll,thread",
            "-n",
            "500",
            "-c",
            "5",
            "--runs",
            "3",
        ])
        .args(["-q", "--export-json", "m.json"])
        .current_dir(sb.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(sb.path().join("m.json")).unwrap()).unwrap();
    let v = &doc["body"];
    assert_eq!(v["runs"], 3);
    check_rows(v, &["epoll", "thread"], Some(500));
    for row in v["rows"].as_array().unwrap() {
        let each: Vec<f64> = (row["runs_requests_per_second"].as_array().unwrap().iter())
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert_eq!(each.len(), 3, "{row}");
        let rps = row["requests_per_second"].as_f64().unwrap();
        assert!(each.contains(&rps), "the row is one of its runs: {row}");
        let model = row["model"].as_str().unwrap();
        let cells: Vec<&str> = (text.lines())
            .find(|l| l.starts_with(&format!("│ {model} ")))
            .unwrap_or_else(|| panic!("{text}"))
            .split(['│', '┆'])
            .map(str::trim)
            .collect();
        assert_eq!(cells[2], format!("{rps:.0}"), "{text}");
        assert_eq!(
            cells[3],
            spread_cell(&each, &|v| format!("{v:.0}")),
            "{text}"
        );
    }
    let rk = &v["ranking"];
    let line = (text.lines())
        .find(|l| l.starts_with("ranking: "))
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(rk["entries"].as_array().unwrap().len(), 2, "{rk}");
    match rk["winner"].as_str() {
        Some(w) => {
            assert_eq!(rk["entries"][1]["leader_is"], "faster", "{rk}");
            assert!(line.contains(&format!("fastest model {w} (")), "{line}");
        }
        None => {
            assert_ne!(rk["entries"][1]["leader_is"], "faster", "{rk}");
            assert!(line.contains("no fastest model"), "{line}");
        }
    }
}

#[test]
fn bad_flags_are_usage_errors_and_a_missing_driver_a_failure() {
    let sb = Sandbox::new();
    for (args, says) in [
        (vec!["--driver", "siege"], "unknown driver 'siege'"),
        (vec!["--model", "fork"], "unknown model 'fork'"),
        (
            vec!["--driver", "ab", "--pipeline", "4"],
            "does not pipeline",
        ),
        (vec!["--cpus", "0"], "two CPUs"),
        (vec!["-n", "5", "-c", "10"], "fewer than -c"),
        (vec!["-c", "0"], "--connections"),
    ] {
        let out = sb.cmd().arg("models").args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let out = sb
        .cmd()
        .args(["models", "--driver", "wrk"])
        .env("PATH", sb.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("wrk is not installed"));
}

#[test]
fn an_unwritable_export_is_refused_before_the_run_and_a_failed_write_exits_1() {
    let sb = Sandbox::new();
    let quick = ["models", "--model", "thread", "-n", "10", "-c", "1", "-q"];
    for flag in ["--export-html", "--export-json"] {
        let out = sb
            .cmd()
            .args(quick)
            .args([flag, "/nonexistent/x.html"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {err}");
        assert!(
            err.contains(&format!(
                "{flag} /nonexistent/x.html: the directory /nonexistent does not exist"
            )),
            "{flag}: {err}"
        );
        assert!(
            out.stdout.is_empty(),
            "{flag}: nothing ran, nothing printed"
        );
    }
    // /dev/full passes the check (a device one may write) and fails the write.
    let out = sb
        .cmd()
        .args(quick)
        .args(["--export-html", "/dev/full"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("not written: --export-html /dev/full")
            && err.contains("No space left on device"),
        "{err}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("│ thread "));
}

#[test]
fn the_page_alone_with_format_html_and_after_the_table_with_export_html_to_stdout() {
    let sb = Sandbox::new();
    let run = |extra: &[&str]| {
        let out = sb
            .cmd()
            .args(["models", "--model", "thread", "-n", "10", "-c", "1", "-q"])
            .args(extra)
            .current_dir(sb.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let page = run(&["--format", "html", "--export-json", "m.json"]);
    assert!(page.starts_with("<!DOCTYPE html>"), "{page}");
    assert!(
        page.ends_with("</html>\n"),
        "no table after the page: {page}"
    );
    assert!(!page.contains("fastest:"));
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(sb.path().join("m.json")).unwrap()).unwrap();
    assert_eq!(v["body"]["rows"][0]["model"], "thread");
    // As every command's export to `-`: after stdout's own format.
    let both = run(&["--export-html", "-"]);
    let at = both.find("<!DOCTYPE html>").expect("the page");
    assert!(both[..at].contains("│ thread "), "{both}");
    assert!(both.ends_with("</html>\n"));
}

/// Servers started by a `models` run with this body size (a mark no other test uses).
fn servers_marked(mark: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .filter(|c| {
            let c = String::from_utf8_lossy(c);
            c.contains("serve\0") && c.contains(&format!("--body-size\0{mark}\0"))
        })
        .count()
}

#[test]
fn ctrl_c_stops_the_run_and_leaves_no_server_behind() {
    let sb = Sandbox::new();
    let child = sb
        .sockbench()
        .args([
            "models",
            "-d",
            "5",
            "-c",
            "4",
            "--body-size",
            "4099",
            "--format",
            "json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while servers_marked("4099") == 0 {
        assert!(t.elapsed() < Duration::from_secs(5), "no server started");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "took {:?}",
        t.elapsed()
    );
    assert_eq!(out.status.code(), Some(130));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["interrupted"], true);
    assert!(v["body"]["rows"].as_array().unwrap().len() <= 1, "{v}");
    assert_eq!(servers_marked("4099"), 0, "a server is left running");
}
