//! `sockbench report FILE.json` prints a saved run again: the JSON reads back into the
//! report and writes out identical (JSON -> Report -> JSON), and every table it prints is
//! the one the run printed, for every workload and the suite.

use crate::common::{assert_success, Sandbox};

/// Run `args` with the table on stdout and the JSON report exported to a file; return
/// both.
fn run_and_save(sb: &Sandbox, name: &str, args: &[&str]) -> (String, std::path::PathBuf) {
    let path = sb.path().join(format!("{name}.json"));
    let out = sb
        .sockbench()
        .args(args)
        .args(["-q", "--export-json"])
        .arg(&path)
        .output()
        .unwrap();
    assert_success(&out);
    (String::from_utf8(out.stdout).unwrap(), path)
}

fn report(sb: &Sandbox, file: &std::path::Path, extra: &[&str]) -> std::process::Output {
    sb.sockbench()
        .arg("report")
        .arg(file)
        .args(extra)
        .output()
        .unwrap()
}

const RUNS: [(&str, &[&str]); 5] = [
    (
        "stream",
        &[
            "stream", "-t", "tcp,pipe", "-n", "2000", "-s", "4K", "-w", "0",
        ],
    ),
    (
        "pingpong",
        &[
            "pingpong", "-t", "udp,unix", "-n", "300", "-w", "0", "--runs", "2",
        ],
    ),
    ("rate", &["rate", "-t", "udp,mq", "-n", "2000", "-w", "0"]),
    (
        "connect",
        &["connect", "-t", "tcp,unix", "-n", "50", "-w", "0"],
    ),
    (
        "suite",
        &["suite", "-d", "0.02", "-w", "0", "-t", "unix,udp"],
    ),
];

#[test]
fn every_workloads_report_reads_back_to_the_same_json_and_the_same_tables() {
    let sb = Sandbox::new();
    for (name, args) in RUNS {
        let (table, saved) = run_and_save(&sb, name, args);
        let original = std::fs::read_to_string(&saved).unwrap();
        // JSON -> Report -> JSON: byte for byte.
        let out = report(&sb, &saved, &["--format", "json"]);
        assert_success(&out);
        let again = String::from_utf8(out.stdout).unwrap();
        let first_difference = again.lines().zip(original.lines()).find(|(a, b)| a != b);
        assert_eq!(
            first_difference, None,
            "{name}: the JSON changed on the way through the report"
        );
        assert_eq!(again, original, "{name}: same lines, different bytes");
        // The table of the saved run is the table the run printed.
        let out = report(&sb, &saved, &[]);
        assert_success(&out);
        let again = String::from_utf8(out.stdout).unwrap();
        assert_eq!(again, table, "{name}: the table differs from the run's");
        assert!(again.contains("tcp") || again.contains("unix") || again.contains("udp"));
        // And the other formats render from it.
        for format in ["markdown", "csv"] {
            let out = report(&sb, &saved, &["--format", format]);
            assert_success(&out);
            assert!(!out.stdout.is_empty(), "{name} as {format}");
        }
    }
}

#[test]
fn the_suite_is_shown_as_the_suite_and_a_list_as_a_list() {
    let sb = Sandbox::new();
    let (_, suite) = run_and_save(&sb, "suite", RUNS[4].1);
    let text = String::from_utf8(report(&sb, &suite, &[]).stdout).unwrap();
    assert!(text.contains("Throughput"), "{text}");
    // The suite ranks its transports per size (none from its single runs).
    assert!(text.contains("no transport is ranked fastest"), "{text}");
    let (_, list) = run_and_save(&sb, "stream", RUNS[0].1);
    let text = String::from_utf8(report(&sb, &list, &[]).stdout).unwrap();
    assert!(!text.contains("transport is ranked"), "{text}");
}

#[test]
fn stdin_and_exports_work_from_a_saved_report() {
    let sb = Sandbox::new();
    let (_, saved) = run_and_save(&sb, "rate", RUNS[2].1);
    let md = sb.path().join("again.md");
    let out = sb
        .sockbench()
        .args(["report", "-", "--format", "csv", "--export-markdown"])
        .arg(&md)
        .stdin(std::fs::File::open(&saved).unwrap())
        .output()
        .unwrap();
    assert_success(&out);
    let csv = String::from_utf8(out.stdout).unwrap();
    assert_eq!(csv.lines().count(), 3, "a header and two scenarios: {csv}");
    assert!(std::fs::read_to_string(&md).unwrap().contains("| udp"));
}

#[test]
fn a_file_that_is_not_a_report_of_this_version_is_a_clear_error() {
    let sb = Sandbox::new();
    let missing = sb.path().join("nope.json");
    let out = report(&sb, &missing, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read"));

    let garbage = sb.path().join("garbage.json");
    std::fs::write(&garbage, "not json").unwrap();
    let out = report(&sb, &garbage, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not JSON"));

    let (_, saved) = run_and_save(&sb, "stream", RUNS[0].1);
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    doc["schema_version"] = 1.into();
    let old = sb.path().join("old.json");
    std::fs::write(&old, doc.to_string()).unwrap();
    let out = report(&sb, &old, &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        err.contains("schema version 1") && err.contains("reads versions"),
        "{err}"
    );
    // Every version of the one document since the first is read (later ones only added
    // optional fields); one from a later sockbench is not.
    for version in sockbench::report::OLDEST_DOCUMENT..=sockbench::report::SCHEMA_VERSION {
        doc["schema_version"] = version.into();
        std::fs::write(&old, doc.to_string()).unwrap();
        let out = report(&sb, &old, &[]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "version {version}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    doc["schema_version"] = (sockbench::report::SCHEMA_VERSION + 1).into();
    std::fs::write(&old, doc.to_string()).unwrap();
    let out = report(&sb, &old, &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        err.contains(&format!(
            "reads versions {} to {}",
            sockbench::report::OLDEST_DOCUMENT,
            sockbench::report::SCHEMA_VERSION
        )),
        "{err}"
    );

    doc["schema_version"] = sockbench::report::SCHEMA_VERSION.into();
    doc["body"]["results"] = serde_json::json!([{"workload": "stream"}]);
    std::fs::write(&old, doc.to_string()).unwrap();
    let out = report(&sb, &old, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a complete sockbench document"));
    assert!(out.stdout.is_empty(), "nothing half-printed");
}

/// What a hostile report file can say: terminal sequences (colour, title, a one-character
/// CSI, a bell, a carriage return) and markup, in every free-text field.
const ESCAPES: &str = "\u{1b}[31mred\u{1b}]0;owned\u{7}\u{9b}2J\r\n";
const MARKUP: &str = "<script>alert(1)</script><img src=x onerror=alert(1)>";

/// A real report with `text` in its environment, command, warnings, error, a result's
/// error and warning, and the server placement's name and environment.
fn hostile(sb: &Sandbox, saved: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(saved).unwrap()).unwrap();
    let t = serde_json::Value::from(text);
    for field in ["kernel", "hostname", "cpu_model", "governor"] {
        v["environment"][field] = t.clone();
    }
    v["command"] = serde_json::json!(["sockbench", text]);
    v["warnings"] = serde_json::json!([text]);
    v["error"] = t.clone();
    v["body"]["results"][0]["error"] = t.clone();
    v["body"]["results"][0]["warnings"] =
        serde_json::json!([{"kind": "cpu-bound", "message": text}]);
    v["body"]["placement"]["name"] = "server".into();
    v["body"]["placement"]["server"] = t.clone();
    v["body"]["placement"]["server_environment"] = v["environment"].clone();
    let path = sb.path().join(name);
    std::fs::write(&path, v.to_string()).unwrap();
    path
}

#[test]
fn no_control_character_of_a_report_file_reaches_the_terminal_in_any_format() {
    let sb = Sandbox::new();
    let (_, saved) = run_and_save(&sb, "stream", RUNS[0].1);
    let file = hostile(&sb, &saved, "escapes.json", ESCAPES);
    for format in ["table", "markdown", "csv", "html", "openmetrics"] {
        let out = report(&sb, &file, &["--format", format]);
        assert_success(&out);
        let stdout = String::from_utf8(out.stdout).unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        for text in [&stdout, &stderr] {
            assert!(
                !text.contains(['\u{1b}', '\u{7}', '\u{9b}', '\r']),
                "{format}: a control character reached the terminal: {text:?}"
            );
        }
        if format == "table" {
            // Shown, visibly: the warning, the failed scenario and the server's kernel.
            for said in [
                "warning: \\x1b[31mred\\x1b]0;owned\\x07\\u{9b}2J\\r\\n",
                "error: tcp 4 KiB: \\x1b[31mred",
                "ran on sockbench server \\x1b[31mred",
            ] {
                assert!(stdout.contains(said), "{said}: {stdout}");
            }
        }
    }
    // A file the parser refuses is quoted in the error: escaped as well.
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    v["body"]["results"][0]["transport"] = ESCAPES.into();
    std::fs::write(&file, v.to_string()).unwrap();
    let out = report(&sb, &file, &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("\\x1b[31mred"), "{stderr}");
    assert!(
        !stderr.contains(['\u{1b}', '\u{7}', '\u{9b}', '\r']),
        "{stderr:?}"
    );
}

#[test]
fn markdown_from_a_report_file_carries_no_markup_and_no_broken_table() {
    let sb = Sandbox::new();
    let (_, saved) = run_and_save(&sb, "stream", RUNS[0].1);
    let file = hostile(&sb, &saved, "markup.json", &format!("{MARKUP} | `x`\nnext"));
    let md = sb.path().join("out.md");
    let out = report(
        &sb,
        &file,
        &[
            "--format",
            "markdown",
            "--export-markdown",
            md.to_str().unwrap(),
        ],
    );
    assert_success(&out);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(std::fs::read_to_string(&md).unwrap(), stdout);
    assert!(
        !stdout.contains("<script") && !stdout.contains("<img"),
        "{stdout}"
    );
    assert!(
        stdout.contains("- warning: &lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt; \\| \\`x\\`\\\\nnext\n"),
        "{stdout}"
    );
    // Every table row still has its columns: no cell break and no line break got in.
    let rows: Vec<&str> = stdout.lines().filter(|l| l.starts_with('|')).collect();
    let cells = |l: &str| l.replace("\\|", "").matches('|').count();
    assert!(rows.iter().all(|l| cells(l) == cells(rows[0])), "{stdout}");
}

#[test]
fn a_fifo_a_device_or_an_oversized_file_is_refused_without_waiting_or_reading_it() {
    let sb = Sandbox::new();
    // No writer ever opens this FIFO: opening it for reading would block for ever.
    let fifo = sb.path().join("fifo.json");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    // Over 256 MiB, and sparse: refused by its size before any byte is read.
    let big = sb.path().join("big.json");
    std::fs::File::create(&big)
        .unwrap()
        .set_len((256 << 20) + 1)
        .unwrap();
    for (file, says) in [
        (fifo.as_path(), "fifo.json is a FIFO, not a regular file"),
        (
            std::path::Path::new("/dev/zero"),
            "/dev/zero is a character device, not a regular file",
        ),
        (
            big.as_path(),
            "big.json is over 256 MiB: not a sockbench report",
        ),
    ] {
        // A minute is a hang, not a slow machine: a refusal takes no time.
        let out = sb
            .cmd()
            .arg("report")
            .arg(file)
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{file:?}: {err}");
        assert!(err.contains(says), "{file:?}: {err}");
        assert!(
            err.contains("`-`") || file == big,
            "says how to pipe it: {err}"
        );
    }
    // Standard input is read through the same bound.
    let out = sb
        .sockbench()
        .args(["report", "-"])
        .stdin(std::fs::File::open(&big).unwrap())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("standard input is over 256 MiB: not a sockbench report"),
        "{err}"
    );
}

/// Every other command's document an earlier sockbench wrote (relay, swarm, load and
/// models version 1, serve and compare version 2, the mesh's version 1, listen's JSON
/// log) opens as this version's document of its kind, in every format; compared with
/// itself, every row it has has a ratio of 1 and names no winner (issue 30).
#[test]
fn every_kind_an_earlier_sockbench_wrote_still_opens_in_every_format_and_compare() {
    let sb = Sandbox::new();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/documents");
    for (file, kind) in [
        ("relay.json", "relay"),
        ("swarm.json", "swarm"),
        ("load.json", "load"),
        ("serve.json", "serve"),
        ("models.json", "models"),
        ("mesh.json", "mesh"),
        ("compare.json", "compare"),
        ("listen.ndjson", "listen"),
    ] {
        let file = dir.join(file);
        for format in ["table", "json", "csv", "markdown", "html", "openmetrics"] {
            let out = report(&sb, &file, &["--format", format]);
            assert_success(&out);
            assert!(
                !out.stdout.is_empty(),
                "{kind} as {format}: nothing printed"
            );
        }
        let read: serde_json::Value =
            serde_json::from_slice(&report(&sb, &file, &["--format", "json"]).stdout).unwrap();
        assert_eq!(read["kind"], kind, "{read}");
        assert_eq!(read["schema_version"], sockbench::report::SCHEMA_VERSION);
        let out = sb
            .sockbench()
            .args(["compare", "--format", "json"])
            .arg(&file)
            .arg(&file)
            .output()
            .unwrap();
        assert_success(&out);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        for row in v["body"]["comparisons"].as_array().unwrap() {
            if row["verdict"] == "failed" {
                continue; // a row that failed in the file fails on both sides
            }
            assert_eq!(row["ratio"], 1.0, "{kind}: {row}");
            assert!(
                [
                    "no significant difference",
                    "too noisy to tell",
                    "too few runs"
                ]
                .contains(&row["verdict"].as_str().unwrap()),
                "{kind}: {row}"
            );
        }
    }
}

/// Whether `read` holds everything `kept` does: every field of every object with the
/// same value (fields `read` has beyond them are those a later version added), arrays
/// element by element. Where not, the path to the first difference.
fn holds(kept: &serde_json::Value, read: &serde_json::Value, at: &str) -> Result<(), String> {
    use serde_json::Value;
    match (kept, read) {
        (Value::Object(k), Value::Object(r)) => k.iter().try_for_each(|(key, v)| {
            let there = r.get(key).ok_or_else(|| format!("{at}.{key} is gone"))?;
            holds(v, there, &format!("{at}.{key}"))
        }),
        (Value::Array(k), Value::Array(r)) if k.len() == r.len() => (k.iter().zip(r))
            .enumerate()
            .try_for_each(|(i, (a, b))| holds(a, b, &format!("{at}[{i}]"))),
        _ if kept == read => Ok(()),
        _ => Err(format!("{at}: {kept} became {read}")),
    }
}

/// The documents an earlier sockbench wrote (tests/fixtures/documents) still open: every
/// bench report, of each schema version from 4 to 8, prints in every format, reads back
/// with every figure it held unchanged, and compared with itself every row has a ratio
/// of 1 and names no winner.
#[test]
fn documents_an_earlier_sockbench_wrote_still_open_in_every_format_and_compare() {
    let sb = Sandbox::new();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/documents");
    let fixtures = ["stream", "pingpong", "rate", "connect"]
        .map(|name| (format!("{name}.json"), name, 8))
        .into_iter()
        .chain((4..=7).flat_map(|v| {
            ["stream", "pingpong"].map(|name| (format!("{name}-v{v}.json"), name, v))
        }));
    for (file, name, version) in fixtures {
        let file = dir.join(file);
        for format in ["table", "json", "csv", "markdown", "html", "openmetrics"] {
            let out = report(&sb, &file, &["--format", format]);
            assert_success(&out);
            assert!(
                !out.stdout.is_empty(),
                "{name} as {format}: nothing printed"
            );
        }
        let again = report(&sb, &file, &["--format", "json"]);
        let read: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
        let kept: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        // The fixture is of its version (its results at the top); read back, of this
        // version (in the body), every figure it held the same.
        assert_eq!(kept["schema_version"], version, "{}", file.display());
        assert_eq!(read["schema_version"], sockbench::report::SCHEMA_VERSION);
        assert_eq!(read["kind"], name);
        let results = &read["body"]["results"];
        assert!(
            results.as_array().is_some_and(|r| !r.is_empty()),
            "{name} v{version}: {read}"
        );
        if let Err(e) = holds(&kept["results"], results, "results") {
            panic!("{name} v{version}: the figures read back changed: {e}");
        }
        let out = sb
            .sockbench()
            .args(["compare", "--format", "json"])
            .arg(&file)
            .arg(&file)
            .output()
            .unwrap();
        assert_success(&out);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let rows = v["body"]["comparisons"]
            .as_array()
            .unwrap_or_else(|| panic!("{name}: {v}"));
        let kept_rows = kept["results"].as_array().unwrap().len();
        assert_eq!(rows.len(), kept_rows, "{name}: every scenario matched: {v}");
        for row in rows {
            assert_eq!(row["ratio"], 1.0, "{name}: {row}");
            let verdict = row["verdict"].as_str().unwrap();
            assert!(
                [
                    "no significant difference",
                    "too noisy to tell",
                    "too few runs"
                ]
                .contains(&verdict),
                "{name}: {row}"
            );
        }
    }
}

/// A document of a run that failed prints as it is, and `report` says on stderr that
/// the run failed and why: its figures (none, or zeros) must not pass for a measurement.
#[test]
fn a_failed_runs_document_is_printed_with_its_error_said() {
    let sb = Sandbox::new();
    let out = sb
        .sockbench()
        .args(["load", "-n", "1", "--format", "json", "http://127.0.0.1:1/"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let error = v["error"]
        .as_str()
        .expect("the document records the failure")
        .to_string();
    let file = sb.path().join("failed.json");
    std::fs::write(&file, &out.stdout).unwrap();
    for format in ["table", "csv"] {
        let out = report(&sb, &file, &["--format", format]);
        assert_success(&out);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("records failed:") && err.contains(&error),
            "{format}: {err}"
        );
    }
}
