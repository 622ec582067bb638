//! `sockbench mesh` across hosts made on this machine: four network namespaces on a
//! bridge, an agent (`sockbench server`) in each, the coordinator in the bridge's own
//! namespace. The full matrix, the rounds (from the times the agents recorded), a host
//! killed mid-mesh, the key, and bad flags.

use std::collections::{BTreeMap, BTreeSet};

use crate::common::Sandbox;
use serde_json::Value;

/// Agents in this many namespaces.
const HOSTS: usize = 4;

/// The outcome of a mesh run in the lab: its exit status, stdout and stderr. `None`
/// (with the reason printed) where namespaces cannot be made.
struct Lab {
    status: i32,
    stdout: String,
    stderr: String,
}

/// Build the lab (namespaces `sbm<pid>-hN` on a bridge, 10.77.0.N+1/24, an agent in each
/// with `agent_args`), run `before` (may use $AGENT0..3 pids), then `sockbench
/// mesh_args` in the bridge's namespace, and take everything down.
fn lab(sb: &Sandbox, agent_args: &str, before: &str, mesh_args: &str) -> Option<Lab> {
    let ok = std::process::Command::new("unshare")
        .args(["-n", "ip", "link", "add", "name", "br0", "type", "bridge"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!(
            "skipped: cannot make network namespaces with a bridge here (needs root and iproute2)"
        );
        return None;
    }
    let bin = assert_cmd::cargo::cargo_bin("sockbench");
    let dir = sb.path().display().to_string();
    let script = format!(
        r#"
set -u
BIN='{bin}'; DIR='{dir}'; P=sbm$$
cleanup() {{
  for i in $(seq 0 {last}); do kill "$(cat $DIR/agent$i.pid 2>/dev/null)" 2>/dev/null; done
  sleep 0.2
  for i in $(seq 0 {last}); do ip netns del $P-h$i 2>/dev/null; done
}}
trap cleanup EXIT
set -e
ip link set lo up
ip link add br0 type bridge
ip addr add 10.77.0.100/24 dev br0
ip link set br0 up
for i in $(seq 0 {last}); do
  ip netns add $P-h$i
  ip link add v$i type veth peer name e$i
  ip link set e$i netns $P-h$i
  ip link set v$i master br0
  ip link set v$i up
  ip netns exec $P-h$i ip link set lo up
  ip netns exec $P-h$i ip addr add 10.77.0.$((i+1))/24 dev e$i
  ip netns exec $P-h$i ip link set e$i up
done
for i in $(seq 0 {last}); do
  ip netns exec $P-h$i $BIN server --listen 10.77.0.$((i+1)) --port 5290 {agent_args} 2>$DIR/agent$i.log &
  echo $! > $DIR/agent$i.pid
done
for i in $(seq 0 {last}); do
  for t in $(seq 100); do grep -q listening $DIR/agent$i.log 2>/dev/null && break; sleep 0.05; done
done
set +e
{before}
$BIN mesh --hosts 10.77.0.1,10.77.0.2,10.77.0.3,10.77.0.4 {mesh_args}
"#,
        bin = bin.display(),
        last = HOSTS - 1,
    );
    let out = std::process::Command::new("unshare")
        .args(["-n", "bash", "-c", &script])
        .env("TMPDIR", sb.path())
        .env("XDG_RUNTIME_DIR", sb.path())
        .output()
        .unwrap();
    Some(Lab {
        status: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

fn key(sb: &Sandbox) -> String {
    let path = sb.path().join("mesh.key");
    std::fs::write(&path, "mesh-test-key-0123456789abcdef0123456789\n").unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    path.display().to_string()
}

fn tests_of(doc: &Value) -> &Vec<Value> {
    doc["body"]["tests"].as_array().expect("tests")
}

fn pair(t: &Value) -> (u64, u64) {
    (
        t["source"].as_u64().unwrap(),
        t["destination"].as_u64().unwrap(),
    )
}

#[test]
fn every_ordered_pair_is_measured_once_per_test_and_no_host_is_in_two_tests_at_once() {
    let sb = Sandbox::new();
    let k = key(&sb);
    // The agents as the Kubernetes DaemonSet runs them: control on 5290, every test's
    // data on 5291 (TCP and UDP), its --max-clients and --max-memory.
    let Some(lab) = lab(
        &sb,
        &format!("--key-file {k} --max-clients 4 --data-port 5291 --max-memory 192M"),
        "",
        &format!(
            "--key-file {k} --tests tcp-stream,udp-pingpong -d 0.3s -w 0s -P 2 --format json -q"
        ),
    ) else {
        return;
    };
    assert_eq!(lab.status, 0, "{}", lab.stderr);
    let doc: Value = serde_json::from_str(&lab.stdout).expect("JSON");
    let tests = tests_of(&doc);
    // 4 hosts: 12 ordered pairs, 2 tests each, all measured.
    assert_eq!(tests.len(), 24, "{}", lab.stdout);
    let mut seen: BTreeMap<(u64, u64, String), usize> = BTreeMap::new();
    for t in tests {
        assert_eq!(t["outcome"]["status"], "measured", "{t}");
        let (s, d) = pair(t);
        assert_ne!(s, d);
        *seen
            .entry((s, d, t["test"].as_str().unwrap().to_string()))
            .or_default() += 1;
    }
    assert_eq!(seen.len(), 24);
    assert!(seen.values().all(|&n| n == 1));
    // The rounds: 3 of 2 disjoint pairs (the circle method for 4 hosts).
    assert_eq!(doc["body"]["settings"]["rounds"], 3);
    let mut by_round: BTreeMap<u64, BTreeSet<(u64, u64)>> = BTreeMap::new();
    for t in tests {
        let (s, d) = pair(t);
        by_round
            .entry(t["round"].as_u64().unwrap())
            .or_default()
            .insert((s.min(d), s.max(d)));
    }
    assert_eq!(by_round.len(), 3);
    for pairs in by_round.values() {
        assert_eq!(pairs.len(), 2);
        let hosts: BTreeSet<u64> = pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
        assert_eq!(
            hosts.len(),
            4,
            "a host in two pairs of one round: {pairs:?}"
        );
    }
    // From the times the agents recorded (one clock: one machine): no host's tests
    // overlap, and no round starts before the last one ended.
    for h in 0..HOSTS as u64 {
        let mut spans: Vec<(u64, u64)> = tests
            .iter()
            .filter(|t| {
                let (s, d) = pair(t);
                s == h || d == h
            })
            .map(|t| {
                (
                    t["started_unix_ns"].as_u64().unwrap(),
                    t["ended_unix_ns"].as_u64().unwrap(),
                )
            })
            .collect();
        spans.sort_unstable();
        assert_eq!(
            spans.len(),
            12,
            "host {h}: 3 partners x 2 directions x 2 tests"
        );
        for w in spans.windows(2) {
            assert!(w[0].1 <= w[1].0, "host {h} was in two tests at once: {w:?}");
        }
    }
    for r in 1..3u64 {
        let end_before = tests
            .iter()
            .filter(|t| t["round"] == r - 1)
            .map(|t| t["ended_unix_ns"].as_u64().unwrap())
            .max();
        let start = tests
            .iter()
            .filter(|t| t["round"] == r)
            .map(|t| t["started_unix_ns"].as_u64().unwrap())
            .min();
        assert!(
            end_before <= start,
            "round {r} began before round {} ended",
            r - 1
        );
    }
    // Figures from the pairs' own reports: streams have throughput, pingpongs round
    // trips, and the hosts say where their route goes.
    for t in tests {
        let o = &t["outcome"];
        match t["test"].as_str().unwrap() {
            "tcp-stream" => assert!(o["bits_per_second"].as_f64().unwrap() > 1e6, "{t}"),
            _ => {
                let p50 = o["round_trip_p50_ns"].as_u64().unwrap();
                assert!(
                    p50 > 0 && p50 <= o["round_trip_p99_ns"].as_u64().unwrap(),
                    "{t}"
                );
                let n: u64 = o["round_trip_buckets"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|b| b["count"].as_u64().unwrap())
                    .sum();
                assert!(n > 100, "{t}");
            }
        }
    }
    for (i, h) in doc["body"]["hosts"].as_array().unwrap().iter().enumerate() {
        assert_eq!(h["error"], Value::Null);
        assert_eq!(h["address"], format!("10.77.0.{}:5290", i + 1));
        assert_eq!(h["meta"]["route_device"], format!("e{i}"), "{h}");
        assert_eq!(h["meta"]["mtu"], 1500);
        assert!(
            h["meta"]["offloads"]["generic-receive-offload"].is_boolean(),
            "{h}"
        );
    }
}

#[test]
fn a_host_killed_mid_mesh_fails_its_pairs_with_the_reason_and_the_others_complete() {
    let sb = Sandbox::new();
    let k = key(&sb);
    // Agent 3 dies about a second in (each test takes about half a second).
    let Some(lab) = lab(
        &sb,
        &format!("--key-file {k}"),
        "(sleep 1.2; kill -9 \"$(cat $DIR/agent3.pid)\") &",
        &format!("--key-file {k} --tests tcp-pingpong -d 0.3s -w 0s --format json -q"),
    ) else {
        return;
    };
    assert_eq!(lab.status, 0, "the mesh goes on: {}", lab.stderr);
    let doc: Value = serde_json::from_str(&lab.stdout).expect("JSON");
    let tests = tests_of(&doc);
    assert_eq!(tests.len(), 12, "every ordered pair is accounted for");
    let mut failed_with_3 = 0;
    for t in tests {
        let (s, d) = pair(t);
        let status = t["outcome"]["status"].as_str().unwrap();
        if s != 3 && d != 3 {
            assert_eq!(status, "measured", "{t}");
        } else if status == "failed" {
            failed_with_3 += 1;
            let reason = t["outcome"]["reason"].as_str().unwrap();
            assert!(!reason.is_empty());
        }
    }
    assert!(
        failed_with_3 >= 2,
        "agent 3's later pairs fail: {}",
        lab.stdout
    );
    // Once found down, its later tests fail at once, naming it.
    assert!(
        tests.iter().any(|t| t["outcome"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("agent 10.77.0.4 is down"))),
        "{}",
        lab.stdout
    );
}

#[test]
fn without_the_agents_key_no_test_runs_and_each_host_says_why() {
    let sb = Sandbox::new();
    let k = key(&sb);
    let Some(lab) = lab(
        &sb,
        &format!("--key-file {k}"),
        "",
        "--tests tcp-pingpong -d 0.2s -w 0s --format json -q",
    ) else {
        return;
    };
    assert_eq!(lab.status, 1, "{}", lab.stderr);
    let doc: Value = serde_json::from_str(&lab.stdout).expect("JSON");
    for h in doc["body"]["hosts"].as_array().unwrap() {
        assert!(
            h["error"].as_str().unwrap().contains("requires a key"),
            "{h}"
        );
    }
    assert!(tests_of(&doc)
        .iter()
        .all(|t| t["outcome"]["status"] == "failed"));
}

#[test]
fn bad_flags_are_usage_errors_that_say_what_to_do() {
    let sb = Sandbox::new();
    for (args, want) in [
        (vec!["--hosts", "127.0.0.1"], "at least two agents"),
        // One agent under two spellings is one agent.
        (
            vec!["--hosts", "127.0.0.1:9,localhost:9,[::ffff:127.0.0.1]:9"],
            "note: localhost:9 is the same agent as 127.0.0.1:9 (both reach 127.0.0.1:9): \
             it is in the mesh once, as 127.0.0.1:9\n\
             sockbench: note: [::ffff:127.0.0.1]:9 is the same agent as 127.0.0.1:9 (both \
             reach 127.0.0.1:9): it is in the mesh once, as 127.0.0.1:9\n\
             sockbench: error: a mesh needs at least two agents, and 1 was given",
        ),
        (
            vec!["--hosts", "a,b", "--tests", "sctp"],
            "unknown test 'sctp'",
        ),
        (vec!["--hosts", "a,b", "--pairs", "random"], "needs a count"),
        (
            vec!["--hosts", "a,b", "--pairs", "star"],
            "all, ring or random N",
        ),
        (vec!["--hosts", "a:99999,b"], "bad port"),
        (
            vec!["--hosts", "a,b", "-d", "0"],
            "--duration must be above 0",
        ),
        (
            vec!["--hosts", "a,b", "--key-file", "/nonexistent/key"],
            "/nonexistent/key",
        ),
    ] {
        let out = sb.sockbench().arg("mesh").args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn ctrl_c_stops_the_mesh_promptly_and_prints_what_was_measured() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let sb = Sandbox::new();
    let mut agents = crate::common::Agents::start(&sb, 3, &[]);
    let (hosts, logs) = (agents.list(), &agents.logs);
    let mesh = sb
        .sockbench()
        .args([
            "mesh",
            "--hosts",
            &hosts,
            "--tests",
            "tcp-pingpong",
            "-d",
            "0.5s",
            "-w",
            "0s",
            "--format",
            "json",
            "-q",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Three rounds of two tests: stop once the first round's two are done (the agents
    // log each test they drove), during the second.
    let mut done = 0;
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while done < 2 && std::time::Instant::now() < until {
        for l in logs {
            while let Ok(line) = l.try_recv() {
                done += usize::from(line.contains("mesh test for") && line.ends_with("done"));
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(done, 2, "the first round did not finish");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let signalled = std::time::Instant::now();
    kill(Pid::from_raw(mesh.id() as i32), Signal::SIGINT).unwrap();
    let out = mesh.wait_with_output().unwrap();
    let took = signalled.elapsed();
    // The test under way was abandoned: its agent sees the coordinator gone and stops
    // its client instead of measuring on beside the next mesh.
    let mut stopped = false;
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !stopped && std::time::Instant::now() < until {
        for l in logs {
            while let Ok(line) = l.try_recv() {
                stopped |= line.contains("the coordinator hung up, so the test was stopped");
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    agents.stop();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        took < std::time::Duration::from_secs(2),
        "took {took:?} to stop"
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["interrupted"], true);
    let tests = tests_of(&doc);
    let measured = tests
        .iter()
        .filter(|t| t["outcome"]["status"] == "measured")
        .count();
    assert!(
        measured >= 2,
        "the first round's tests are in the report: {doc}"
    );
    assert!(tests.len() < 6, "no round began after Ctrl-C: {doc}");
    assert!(stopped, "no agent stopped the test under way");
}

#[test]
fn concurrent_runs_every_pair_at_once_and_says_so() {
    let sb = Sandbox::new();
    let mut agents = crate::common::Agents::start(&sb, 3, &["--max-clients", "8"]);
    let hosts = agents.list();
    let run = |format: &str| {
        sb.sockbench()
            .args([
                "mesh",
                "--hosts",
                &hosts,
                "--tests",
                "tcp-pingpong",
                "-d",
                "0.3s",
                "-w",
                "0s",
                "--concurrent",
                "-q",
            ])
            .args(["--format", format])
            .output()
            .unwrap()
    };
    let json = run("json");
    let table = run("table");
    agents.stop();
    assert_eq!(
        json.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&json.stderr)
    );
    let doc: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(doc["body"]["settings"]["concurrent"], true);
    assert_eq!(doc["body"]["settings"]["rounds"], 1);
    let tests = tests_of(&doc);
    assert_eq!(tests.len(), 6);
    assert!(
        tests
            .iter()
            .all(|t| t["round"] == 0 && t["outcome"]["status"] == "measured"),
        "{doc}"
    );
    // Pairs ran at once: some two tests of different pairs overlap in time.
    let span = |t: &Value| {
        (
            t["started_unix_ns"].as_u64().unwrap(),
            t["ended_unix_ns"].as_u64().unwrap(),
        )
    };
    let overlap = tests.iter().any(|a| {
        tests.iter().any(|b| {
            let (pa, pb) = (pair(a), pair(b));
            (pa.0.min(pa.1), pa.0.max(pa.1)) != (pb.0.min(pb.1), pb.0.max(pb.1))
                && span(a).0 < span(b).1
                && span(b).0 < span(a).1
        })
    });
    assert!(overlap, "no two pairs ran at once: {doc}");
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("--concurrent: every pair ran at once"),
        "{text}"
    );
}

#[test]
fn a_hosts_file_that_is_a_fifo_a_device_or_over_1_mib_is_refused_at_once() {
    let sb = Sandbox::new();
    // No writer ever opens this FIFO: opening it for reading would block for ever.
    let fifo = sb.path().join("hosts.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let big = sb.path().join("hosts.txt");
    std::fs::File::create(&big)
        .unwrap()
        .set_len((1 << 20) + 1)
        .unwrap();
    for (file, says) in [
        (fifo.as_path(), "hosts.fifo is a FIFO, not a regular file"),
        (
            std::path::Path::new("/dev/zero"),
            "/dev/zero is a character device, not a regular file",
        ),
        (big.as_path(), "hosts.txt is over 1 MiB: not a hosts file"),
    ] {
        // A minute is a hang, not a slow machine: a refusal takes no time.
        let out = sb
            .cmd()
            .args(["mesh", "--hosts-file"])
            .arg(file)
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{file:?}: {err}");
        assert!(err.contains(says), "{file:?}: {err}");
    }
}

#[test]
fn a_slow_link_out_of_one_host_shows_in_its_row_of_the_matrix_not_its_column() {
    // An asymmetric lab: host 0 sends through a token bucket of 20 Mbit/s, every other
    // direction is unshaped. Whatever sockbench says about direction is checked against
    // what the kernel was told: streams from host 0 are at most the bucket's rate, those
    // into it are not held by it. A matrix transposed anywhere (the document, the table)
    // reads the other way.
    let sb = Sandbox::new();
    let json = sb.path().join("mesh.json");
    let k = key(&sb);
    let Some(lab) = lab(
        &sb,
        &format!("--key-file {k}"),
        "ip netns exec $P-h0 tc qdisc add dev e0 root tbf rate 20mbit burst 20kb latency 100ms",
        &format!(
            "--key-file {k} --tests tcp-stream -d 0.5s -w 0.2s --export-json {}",
            json.display()
        ),
    ) else {
        return;
    };
    assert_eq!(lab.status, 0, "{}\n{}", lab.stderr, lab.stdout);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).expect("JSON");
    let tests = tests_of(&doc);
    assert_eq!(tests.len(), 12, "{}", lab.stdout);
    let mut rate = BTreeMap::new();
    for t in tests {
        let bps = t["outcome"]["bits_per_second"].as_f64().unwrap();
        rate.insert(pair(t), bps);
    }
    for (&(s, d), &bps) in &rate {
        if s == 0 {
            assert!(
                bps <= 21e6,
                "{s}->{d}: {bps} bit/s through a 20 Mbit/s bucket"
            );
            assert!(
                bps >= 5e6,
                "{s}->{d}: {bps} bit/s, the bucket allows 20 Mbit/s"
            );
        } else {
            assert!(bps > 60e6, "{s}->{d}: {bps} bit/s on an unshaped link");
        }
    }
    // The table shows the same figures where it says: a row per source, a column per
    // destination, hosts by their hN label.
    let table = &lab.stdout;
    // The matrix's table (the hosts' table comes first).
    let matrix = table
        .split("tcp-stream: throughput")
        .nth(1)
        .unwrap_or_else(|| panic!("no matrix in {table}"));
    let rows: Vec<Vec<String>> = matrix
        .lines()
        .filter(|l| l.starts_with('│'))
        .map(|l| {
            l.trim_matches('│')
                .split('┆')
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect();
    assert_eq!(rows.len(), 5, "{table}");
    let host = |label: &str| -> Option<u64> {
        label
            .split_whitespace()
            .next()?
            .strip_prefix('h')?
            .parse()
            .ok()
    };
    let mut cells = 0;
    for row in &rows[1..] {
        let s = host(&row[0]).unwrap_or_else(|| panic!("no source host in {row:?}"));
        for (col, cell) in row.iter().enumerate().skip(1) {
            let d = host(&rows[0][col]).unwrap_or_else(|| panic!("header {:?}", rows[0]));
            if d == s {
                assert_eq!(cell, "-");
                continue;
            }
            let shown = cell_bits(cell).unwrap_or_else(|| panic!("{s}->{d}: cell {cell:?}"));
            let want = rate[&(s, d)];
            // Three significant digits.
            assert!(
                (shown - want).abs() <= want * 0.01,
                "{s}->{d}: the table shows {cell} ({shown} bit/s), the document {want}\n{table}"
            );
            cells += 1;
        }
    }
    assert_eq!(cells, 12, "{table}");
}

/// "19.6 Mbit/s" or "1.23 Gbit/s" in bits/s.
fn cell_bits(cell: &str) -> Option<f64> {
    let mut it = cell.split_whitespace();
    let n: f64 = it.next()?.parse().ok()?;
    let scale = match it.next()? {
        "bit/s" => 1.0,
        "kbit/s" => 1e3,
        "Mbit/s" => 1e6,
        "Gbit/s" => 1e9,
        _ => return None,
    };
    Some(n * scale)
}
