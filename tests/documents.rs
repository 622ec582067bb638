//! One sockbench (issue 30): each of the twelve commands that measure runs briefly with
//! `--format json`, and what it wrote is one document of its kind, valid against the
//! committed schema; `report` prints it again in all six formats (the HTML page, opened
//! in headless chromium, draws at least one chart with no console message; the
//! OpenMetrics passes promtool); and `compare` of the document with itself names no
//! winner on any row.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::{assert_success, Sandbox};
use serde_json::Value;

/// `sockbench ARGS --format json -q` in the sandbox, its document saved as `name.json`.
fn saved(sb: &Sandbox, name: &str, args: &[&str]) -> PathBuf {
    let out = sb
        .cmd()
        .args(args)
        .args(["--format", "json", "-q"])
        .output()
        .unwrap();
    assert_success(&out);
    let path = sb.path().join(format!("{name}.json"));
    std::fs::write(&path, &out.stdout).unwrap();
    path
}

/// `sockbench report FILE --format FORMAT`.
fn report(sb: &Sandbox, file: &Path, format: &str) -> Vec<u8> {
    let out = sb
        .cmd()
        .arg("report")
        .arg(file)
        .args(["--format", format])
        .output()
        .unwrap();
    assert_success(&out);
    assert!(!out.stdout.is_empty(), "{} as {format}", file.display());
    out.stdout
}

/// `promtool check metrics` with `text` on stdin. Not skipped: without promtool this
/// test cannot say what it exists to say (.ci/run installs it).
fn promtool(name: &str, text: &[u8]) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs (apt-get install prometheus)");
    child.stdin.take().unwrap().write_all(text).unwrap();
    let out = child.wait_with_output().unwrap();
    // Exit 1 is a parse error, 3 a lint finding (a counter read in the 0.0.4 format has
    // no help text on its `_total` name: advice, not an error).
    assert!(
        matches!(out.status.code(), Some(0 | 3)),
        "{name}: promtool could not parse it: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The strict OpenMetrics parser (prometheus_client's) reads `text`: at least one
/// family, each sample a number. Not skipped either.
fn openmetrics_parser(name: &str, text: &[u8]) {
    let py = crate::common::openmetrics_python()
        .expect("a Python with prometheus_client (apt-get install python3-prometheus-client)");
    let text = String::from_utf8(text.to_vec()).unwrap();
    let families = crate::common::openmetrics_families(&py, &text)
        .unwrap_or_else(|e| panic!("{name}: the OpenMetrics parser rejected it: {e}\n{text}"));
    assert!(!families.is_empty(), "{name}: no metric family\n{text}");
    for f in &families {
        for s in f["samples"].as_array().unwrap() {
            assert!(s["value"].is_number(), "{name}: {s}");
        }
    }
}

/// The HTML page in headless chromium: no console message, and at least one chart drawn.
fn in_browser(sb: &Sandbox, name: &str, page: &[u8]) {
    // Not skipped: .ci/run installs it.
    let tool = crate::common::chromium().expect("chromium runs (apt-get install chromium)");
    let path = sb.path().join(format!("{name}.html"));
    std::fs::write(&path, page).unwrap();
    let out = crate::common::browser(sb, tool, &format!("profile-{name}"))
        .args(["--enable-logging=stderr", "--v=0", "--dump-dom"])
        .arg(format!("file://{}", path.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let console: Vec<String> = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(String::from)
        .collect();
    assert!(console.is_empty(), "{name}: {console:?}");
    let dom = String::from_utf8_lossy(&out.stdout);
    // An SVG chart, or the mesh's heat maps.
    assert!(
        dom.contains("<svg") || dom.contains("<table class=\"heat\""),
        "{name}: no chart in the page"
    );
}

/// Everything the issue asks of one document.
fn check(sb: &Sandbox, name: &str, kind: &str, file: &Path) {
    let doc: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    assert_eq!(doc["kind"], kind, "{name}: {doc}");
    assert!(
        doc["tool"]["version"].is_string() && doc["started_at"].is_string(),
        "{name}"
    );
    crate::common::assert_valid(&doc);
    for format in ["table", "json", "csv", "markdown"] {
        report(sb, file, format);
    }
    // Read back, the same document.
    let again: Value = serde_json::from_slice(&report(sb, file, "json")).unwrap();
    assert_eq!(again["body"], doc["body"], "{name}: read back");
    in_browser(sb, name, &report(sb, file, "html"));
    let metrics = report(sb, file, "openmetrics");
    promtool(name, &metrics);
    openmetrics_parser(name, &metrics);
    let out = sb
        .cmd()
        .args(["compare", "--format", "json"])
        .arg(file)
        .arg(file)
        .output()
        .unwrap();
    assert_success(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v["body"]["comparisons"].as_array().unwrap();
    assert!(
        !rows.is_empty() || kind == "listen",
        "{name}: no row matched: {v}"
    );
    for row in rows {
        assert_eq!(row["ratio"], 1.0, "{name}: {row}");
        // The same runs on both sides: a test, where there is one, finds nothing (p = 1),
        // and the verdict is no difference unless the document's own runs spread wider
        // than the ±5% a change must be ruled out within; then it says so, with the
        // interval. Never a winner.
        if let Some(p) = row["p_value"].as_f64() {
            assert!(p > 0.999, "{name}: identical runs, p = {p}: {row}");
        }
        let interval = (row["ratio_ci_low"].as_f64(), row["ratio_ci_high"].as_f64());
        let expected = match interval {
            (Some(lo), Some(hi)) if lo >= 0.95 && hi <= 1.05 => "no significant difference",
            (Some(_), Some(_)) => "too noisy to tell",
            _ => "too few runs",
        };
        assert_eq!(row["verdict"], expected, "{name}: {row}");
        if expected == "too noisy to tell" {
            let note = row["note"].as_str().unwrap_or_default();
            assert!(
                note.contains("the ratio lies anywhere from"),
                "{name}: {row}"
            );
        }
    }
}

#[test]
fn every_command_writes_one_document_that_reads_in_every_format_and_compares_with_itself() {
    let sb = Sandbox::new();
    let quick = ["-w", "0", "--runs", "3"];
    let bench: [(&str, Vec<&str>); 5] = [
        ("stream", vec!["stream", "-t", "unix", "-d", "0.1"]),
        ("pingpong", vec!["pingpong", "-t", "unix", "-d", "0.1"]),
        ("rate", vec!["rate", "-t", "udp", "-d", "0.1"]),
        ("connect", vec!["connect", "-t", "tcp", "-n", "200"]),
        ("suite", vec!["suite", "-d", "0.05", "-t", "unix"]),
    ];
    for (kind, args) in bench {
        let mut all = args.clone();
        if kind != "suite" {
            all.extend(quick);
        }
        check(&sb, kind, kind, &saved(&sb, kind, &all));
    }
    let relay = saved(
        &sb,
        "relay",
        &["relay", "-m", "read-write", "-d", "0.2", "--runs", "3"],
    );
    check(&sb, "relay", "relay", &relay);
    let swarm = saved(&sb, "swarm", &["swarm", "-n", "4", "-d", "0.2"]);
    check(&sb, "swarm", "swarm", &swarm);
    // A server, driven by the load, then stopped by its duration.
    let mut server = sb
        .sockbench()
        .args([
            "serve", "--port", "0", "-d", "3", "-v", "0", "--format", "json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(server.stderr.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .to_string();
    let load = saved(&sb, "load", &["load", "-n", "300", "-c", "2", &url]);
    check(&sb, "load", "load", &load);
    let out = server.wait_with_output().unwrap();
    assert_success(&out);
    let serve = sb.path().join("serve.json");
    std::fs::write(&serve, &out.stdout).unwrap();
    check(&sb, "serve", "serve", &serve);
    let models = saved(
        &sb,
        "models",
        &["models", "--model", "epoll,thread", "-n", "300", "-c", "2"],
    );
    check(&sb, "models", "models", &models);
    let mut agents = crate::common::Agents::start(&sb, 2, &[]);
    let hosts = agents.list();
    let mesh = saved(
        &sb,
        "mesh",
        &[
            "mesh",
            "--hosts",
            &hosts,
            "--tests",
            "tcp-stream",
            "-d",
            "0.2s",
            "-w",
            "0s",
        ],
    );
    agents.stop();
    check(&sb, "mesh", "mesh", &mesh);
    // listen: one peer sends 12 bytes; the JSON log's last line is the summary document.
    let mut listen = sb
        .sockbench()
        .args([
            "listen", "-p", "0", "-d", "1", "--format", "json", "-v", "0",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(listen.stdout.take().unwrap()).lines();
    let listening: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    let address = listening["address"].as_str().unwrap().to_string();
    let mut peer = std::net::TcpStream::connect(&address).unwrap();
    peer.write_all(b"hello, world").unwrap();
    drop(peer);
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(listen.wait().unwrap().success());
    let summary: Value = serde_json::from_str(rest.last().unwrap()).unwrap();
    assert_eq!(summary["event"], "summary");
    assert_eq!(summary["body"]["connections"][0]["bytes"], 12, "{summary}");
    let file = sb.path().join("listen.json");
    std::fs::write(&file, serde_json::to_vec(&summary).unwrap()).unwrap();
    check(&sb, "listen", "listen", &file);
}
