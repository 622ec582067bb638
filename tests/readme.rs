//! The README's examples run exactly as written, and its test command is the one CI runs.

use crate::common::{u, Sandbox};
use serde_json::Value;

const README: &str = include_str!("../README.md");
const CI: &str = include_str!("../.ci/run");

/// The README's examples in groups: each `$ ` line of a code block is a group of its own,
/// except in a block opened with ```` ```console session ````, whose lines run one after
/// another in one directory (a later line reads what an earlier one wrote).
fn example_groups(readme: &str) -> Vec<Vec<&str>> {
    let mut groups: Vec<Vec<&str>> = Vec::new();
    let mut session: Option<Vec<&str>> = None;
    for l in readme.lines() {
        if l.starts_with("```console session") {
            session = Some(Vec::new());
        } else if l.starts_with("```") {
            groups.extend(session.take().filter(|s| !s.is_empty()));
        } else if let Some(line) = l.strip_prefix("$ ") {
            match &mut session {
                Some(s) => s.push(line),
                None => groups.push(vec![line]),
            }
        }
    }
    groups
}

#[test]
fn examples_group_by_session_block() {
    let text = "```console\n$ sockbench a\n$ sockbench b\n```\n```console session\n$ sockbench c\n$ sockbench d\n```\n$ sockbench e\n";
    assert_eq!(
        example_groups(text),
        [
            vec!["sockbench a"],
            vec!["sockbench b"],
            vec!["sockbench c", "sockbench d"],
            vec!["sockbench e"]
        ]
    );
}

#[test]
fn every_readme_example_runs_as_written() {
    let groups = example_groups(README);
    assert!(groups.len() >= 5, "the README has examples");
    // Run the groups side by side: each checks its own output and leftovers.
    std::thread::scope(|scope| {
        for group in groups {
            scope.spawn(move || {
                let sb = Sandbox::new();
                for line in group {
                    run_example(&sb, line);
                }
            });
        }
    });
}

fn run_example(sb: &Sandbox, line: &str) {
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words[0], "sockbench", "{line}");
    // An example pinned to CPUs this process may not use (under `taskset -c 0`, as the
    // soak runs it) cannot run as written here: say so and move on.
    if let Some(i) = words.iter().position(|w| *w == "--cpus") {
        let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).unwrap();
        let allowed = |c: &str| {
            c.parse()
                .is_ok_and(|c: usize| set.is_set(c).unwrap_or(false))
        };
        if !words[i + 1].split(',').all(allowed) {
            eprintln!("skipped `{line}`: its CPUs are outside this process's affinity");
            return;
        }
    }
    // As written, plus a JSON copy of the report to check what the example promises (the
    // example's own when it writes one).
    let own = words
        .iter()
        .position(|w| *w == "--export-json")
        .map(|i| sb.path().join(words[i + 1]));
    let report = own
        .clone()
        .unwrap_or_else(|| sb.path().join("promise.json"));
    let mut cmd = sb.cmd();
    cmd.args(&words[1..]).arg("-q");
    if own.is_none() {
        cmd.arg("--export-json").arg(&report);
    }
    let out = cmd.current_dir(sb.path()).output().unwrap();
    assert!(
        out.status.success(),
        "README example `{line}` failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.stdout.is_empty(), "`{line}` printed nothing");
    assert!(
        sb.leftovers().is_empty(),
        "`{line}` left {:?}",
        sb.leftovers()
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert!(v["error"].is_null(), "`{line}`: {}", v["error"]);
    if v["kind"] == "swarm" {
        assert_eq!(v["body"]["errors"], serde_json::json!({}), "`{line}`");
    } else if v["kind"] == "models" {
        for r in v["body"]["rows"].as_array().unwrap() {
            assert!(r["error"].is_null(), "`{line}`: {r}");
        }
    } else if v["kind"] == "compare" {
        assert!(v["error"].is_null(), "`{line}`: {}", v["error"]);
    } else {
        for r in results(&v) {
            assert!(r["error"].is_null(), "`{line}`: {}", r["error"]);
        }
    }
    keeps_its_promise(line, &v, &out.stdout, sb.path());
}

/// A report's results (none in a swarm's or a models document, which have their own
/// figures).
fn results(v: &Value) -> &Vec<Value> {
    static NONE: Vec<Value> = Vec::new();
    if ["models", "compare", "swarm"].contains(&v["kind"].as_str().unwrap_or("")) {
        return &NONE;
    }
    // The one document's body (a command's own document: its top level).
    v.get("body").unwrap_or(v)["results"].as_array().unwrap()
}

/// The (transport, engine, size) of every result, in order.
fn cells(v: &Value) -> Vec<(String, String, u64)> {
    results(v)
        .iter()
        .map(|r| {
            (
                r["transport"].as_str().unwrap().to_string(),
                r["engine"].as_str().unwrap().to_string(),
                u(r, "/size_bytes"),
            )
        })
        .collect()
}

fn transports(v: &Value) -> Vec<String> {
    cells(v).into_iter().map(|c| c.0).collect()
}

fn every(v: &Value, ptr: &str) -> Vec<u64> {
    results(v).iter().map(|r| u(r, ptr)).collect()
}

fn near(got: f64, want: f64, within: f64) -> bool {
    (got - want).abs() <= within * want
}

/// What each README example says it does, checked on its report. An example without an
/// entry here fails: a new example comes with its promise.
fn keeps_its_promise(line: &str, v: &Value, stdout: &[u8], dir: &std::path::Path) {
    let rs = results(v);
    let ran_for = |r: &Value| r["runs"][0]["duration_seconds"].as_f64().unwrap();
    match line {
        "sockbench pingpong -t udp,tcp --timestamps -d 0.5" => {
            assert_eq!(transports(v), ["udp", "tcp"]);
            for r in rs {
                let t = &r["timestamps"];
                assert_eq!(t["device"], "lo", "{t}");
                let dirs = t["directions"].as_array().unwrap();
                assert_eq!(dirs.len(), 2, "{t}");
                let mean = |d: &Value, p: &str| d[p]["mean_ns"].as_f64().unwrap();
                let parts: f64 = dirs
                    .iter()
                    .flat_map(|d| {
                        ["user_to_kernel", "kernel_to_kernel", "kernel_to_user"].map(|p| mean(d, p))
                    })
                    .sum::<f64>()
                    + mean(t, "turnaround");
                // The strict 5% check, with its retry rule, is tests/timestamps.rs's.
                let rtt = mean(&r["latencies"], "round_trip");
                assert!(
                    near(parts, rtt, 0.10),
                    "parts {parts} against round trip {rtt}"
                );
            }
            for r in rs {
                // What the breakdown covers, of every round trip the client made.
                let t = &r["timestamps"];
                assert_eq!(
                    t["directions"][0]["messages_sent"], r["messages_sent"],
                    "{t}"
                );
            }
            let table = String::from_utf8_lossy(stdout);
            assert!(table.contains("Kernel timestamps"), "{table}");
            assert!(table.contains("round trips"), "{table}");
        }
        "sockbench pingpong -t unix -e blocking,epoll -n 2000 --runs 3" => {
            assert!(rs.iter().all(|r| r["runs"].as_array().unwrap().len() == 3));
            let rk = &v["body"]["rankings"][0];
            assert_eq!(
                (rk["group"].as_str(), rk["among"].as_str()),
                (Some("unix 64 B"), Some("engines"))
            );
            // A winner only where the test found the leader faster than the other.
            assert_eq!(
                rk["winner"].is_null(),
                rk["entries"][1]["leader_is"] != "faster",
                "{rk}"
            );
            let table = String::from_utf8_lossy(stdout);
            assert!(
                table.contains("p50 min-max") && table.contains("ranking: unix 64 B: "),
                "{table}"
            );
        }
        "sockbench relay --connections 500 -s 10K -m read-write,vectored --runs 3" => {
            assert_eq!(rs.len(), 2);
            for r in rs {
                assert_eq!(
                    r["runs_bits_per_second"].as_array().unwrap().len(),
                    3,
                    "{r}"
                );
            }
            let rk = &v["body"]["rankings"][0];
            assert_eq!(rk["group"], "tcp 10 KiB");
            assert_eq!(
                rk["winner"].is_null(),
                rk["entries"][1]["leader_is"] != "faster",
                "{rk}"
            );
            let table = String::from_utf8_lossy(stdout);
            assert!(
                table.contains("runs min-max") && table.contains("ranking: tcp 10 KiB: "),
                "{table}"
            );
        }
        "sockbench stream -t tcp,pipe -s 1M -d 0.5 --placement processes" => {
            assert_eq!(transports(v), ["tcp", "pipe"]);
            assert_eq!(v["body"]["placement"]["name"], "processes");
            assert_eq!(v["body"]["placement"]["other_role"], "receiver");
            for r in rs {
                assert_eq!(u(r, "/bytes_sent"), u(r, "/bytes_received"));
            }
        }
        "sockbench stream -t tcp,unix -s 64K -d 0.3 --runs 5 --export-json base.json"
        | "sockbench stream -t tcp,unix -s 64K -d 0.3 --runs 5 --export-json new.json" => {
            assert_eq!(transports(v), ["tcp", "unix"]);
            assert!(rs.iter().all(|r| r["runs"].as_array().unwrap().len() == 5));
        }
        "sockbench stream -t tcp -s 64K -d 0.3 --runs 5 --sndbuf 4K --export-json small.json" => {
            assert_eq!(every(v, "/options/sndbuf_bytes"), [4096]);
        }
        "sockbench pingpong -t tcp -d 0.5 --runs 5 --by-placement" => {
            let runs = rs[0]["runs"].as_array().unwrap();
            assert_eq!(runs.len(), 5);
            for run in runs {
                let class = run["placement"]["class"].as_str().unwrap();
                assert!(
                    ["same-cpu", "across-cpus", "mixed"].contains(&class),
                    "{run}"
                );
            }
            assert!(String::from_utf8_lossy(stdout).contains("placement"));
        }
        "sockbench pingpong -t tcp -d 0.5 --counters" => {
            let run = &rs[0]["runs"][0];
            for side in ["sender", "receiver"] {
                let c = &run[side]["counters"];
                assert!(c.is_object(), "{run}");
                // Hardware figures: counted, or null with the reason; never a zero.
                assert_eq!(
                    c["cycles_per_message"].is_null(),
                    c["hardware_unavailable"].is_string(),
                    "{c}"
                );
            }
        }
        "sockbench compare base.json new.json" => {
            assert_eq!(v["kind"], "compare");
            let c = v["body"]["comparisons"].as_array().unwrap();
            assert_eq!(c.len(), 2, "{v}");
            let tests = [
                "welch-log",
                "welch",
                "mann-whitney-exact",
                "mann-whitney-normal",
            ];
            assert!(
                c.iter()
                    .all(|c| tests.contains(&c["test"].as_str().unwrap_or(""))),
                "{v}"
            );
            let table = String::from_utf8_lossy(stdout);
            assert!(
                table.contains("stream unix 64 KiB") && table.contains("95% CI"),
                "{table}"
            );
        }
        "sockbench compare base.json small.json --ignore-option sndbuf --format markdown" => {
            let c = v["body"]["comparisons"].as_array().unwrap();
            // tcp matched across the buffer change; unix is in BASE only.
            assert_eq!(c.len(), 1, "{v}");
            assert_eq!(c[0]["transport"], "tcp");
            assert_eq!(
                v["body"]["only_in_base"].as_array().unwrap().len(),
                1,
                "{v}"
            );
            assert!(String::from_utf8_lossy(stdout).contains("| "));
        }
        "sockbench stream -t tcp,unix -s 64,4K,64K,1M -d 0.5 --export-html stream.html" => {
            assert_eq!(rs.len(), 8);
            let page = std::fs::read_to_string(dir.join("stream.html")).unwrap();
            assert!(
                page.contains("data-chart=\"throughput-size\""),
                "no throughput chart"
            );
            assert!(!page.contains("<script src"), "self-contained");
        }
        "sockbench pingpong -t tcp,udp,unix -d 0.5 --export-json pingpong.json" => {
            assert_eq!(transports(v), ["tcp", "udp", "unix"]);
            assert!(rs
                .iter()
                .all(|r| r["latency_buckets"]["round_trip"].is_array()));
        }
        "sockbench report pingpong.json --export-html pingpong.html" => {
            let page = std::fs::read_to_string(dir.join("pingpong.html")).unwrap();
            for chart in ["round_trip-percentiles", "round_trip-histogram"] {
                assert!(
                    page.contains(&format!("data-chart=\"pingpong-{chart}\"")),
                    "{chart}"
                );
            }
        }
        "sockbench pingpong -t tcp,udp -d 0.5 --format openmetrics" => {
            assert_eq!(transports(v), ["tcp", "udp"]);
            let text = String::from_utf8_lossy(stdout);
            assert!(text.ends_with("\n# EOF\n"), "{text}");
            for r in rs {
                let line = format!(
                    "sockbench_round_trip_latency_seconds_count{{workload=\"pingpong\",transport=\"{}\",\
                     engine=\"blocking\",size_bytes=\"64\",parallel=\"1\"}} {}\n",
                    r["transport"].as_str().unwrap(),
                    u(r, "/latencies/round_trip/count")
                );
                assert!(text.contains(&line), "{text}");
            }
        }
        "sockbench stream -t tcp -s 128K -d 2 -i 0.5" => {
            let run = &rs[0]["runs"][0];
            let iv = run["intervals"].as_array().unwrap();
            assert_eq!(iv.len(), 4, "{iv:?}");
            let bytes: u64 = iv.iter().map(|i| u(i, "/bytes")).sum();
            assert_eq!(bytes, u(run, "/bytes_received"));
            assert!(iv.iter().all(|i| i["retransmits"].is_u64()));
        }
        "sockbench stream -t tcp -s 128K -d 1" => {
            assert_eq!(cells(v), [("tcp".into(), "blocking".into(), 131072)]);
            assert!(near(ran_for(&rs[0]), 1.0, 0.3), "{}", ran_for(&rs[0]));
            assert_eq!(u(&rs[0], "/bytes_sent"), u(&rs[0], "/bytes_received"));
        }
        "sockbench stream -t unix,shm -s 1M -d 0.3 --runs 3"
        | "sockbench stream -t tcp,unix -s 1M -d 0.5 --runs 3" => {
            assert_eq!(rs.len(), 2);
            assert!(rs.iter().all(|r| r["runs"].as_array().unwrap().len() == 3
                && u(r, "/statistics/bits_per_second/runs") == 3
                && r["statistics"]["bits_per_second"]["ci95_low"].is_f64()));
        }
        "sockbench stream -t all -s 4K -d 0.2 -w 0.05" => {
            assert_eq!(rs.len(), 12, "{:?}", transports(v));
            assert!(every(v, "/size_bytes").iter().all(|&s| s == 4096));
        }
        "sockbench stream -t unix,tcp -s 64K --rcvbuf 1,4K..4M -d 0.2 -w 0.05" => {
            // 1 B, then 4 KiB doubling to 4 MiB: twelve buffers per transport.
            assert_eq!(rs.len(), 24);
            let asked = every(v, "/options/rcvbuf_bytes");
            assert_eq!(asked[..12], asked[12..]);
            assert_eq!(asked[0], 1);
            assert_eq!(asked[11], 4 << 20);
            let table = String::from_utf8_lossy(stdout);
            assert!(table.contains("tcp granted"), "{table}");
        }
        "sockbench relay -m read-write,splice -s 64K --bytes 16M" => {
            assert_eq!(v["kind"], "relay");
            assert_eq!(rs.len(), 2);
            for r in rs {
                assert_eq!(u(r, "/bytes_received"), 16 << 20);
                assert_eq!(u(r, "/bytes_relayed"), 16 << 20);
            }
            assert!(u(&rs[1], "/pipe_size_bytes") >= 65536);
        }
        "sockbench relay --connections 1000 -s 10K -m read-write,splice,async" => {
            assert_eq!(rs.len(), 3);
            for r in rs {
                assert_eq!(u(r, "/connections"), 1000);
                assert_eq!(u(r, "/bytes_received"), 1000 * 10240);
            }
        }
        "sockbench relay -m splice,read-write -t unix -s 4K,1M --bytes 8M" => {
            assert_eq!(rs.len(), 4);
            assert_eq!(v["body"]["crossovers"][0]["transport"], "unix");
            let table = String::from_utf8_lossy(stdout);
            assert!(table.contains("crossover: unix: splice"), "{table}");
        }
        "sockbench relay -m read-write,splice -t unix --placement processes -i 0.5 -d 1" => {
            assert_eq!(v["body"]["placement"], "processes");
            assert_eq!(rs.len(), 2);
            for r in rs {
                assert!(r["error"].is_null(), "{r}");
                let runs = r["intervals"].as_array().expect("intervals");
                assert_eq!(runs.len(), 1, "{r}");
                let sum: u64 = runs[0]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|l| l["bytes"].as_u64().unwrap())
                    .sum();
                assert_eq!(sum, u(r, "/bytes_received"), "{r}");
                assert_eq!(u(r, "/bytes_sent"), u(r, "/bytes_received"), "{r}");
            }
            let table = String::from_utf8_lossy(stdout);
            assert!(
                table.contains("placement: the relay and the sink ran in a child process"),
                "{table}"
            );
        }
        "sockbench relay --mode pingpong -m read-write,splice -s 64 -n 2000" => {
            for r in rs {
                assert_eq!(u(r, "/messages"), 2000);
                assert!(u(r, "/latency_ns/p50") > 0);
            }
        }
        "sockbench swarm -n 1000 -t tcp -d 1" => {
            // The swarm has its own document; its table went to stdout.
            let table = String::from_utf8_lossy(stdout);
            assert!(table.contains("1000 tcp pairs"), "{table}");
            assert!(
                table.contains("errors") && table.contains("none"),
                "{table}"
            );
        }
        "sockbench stream -t udp -s 1K -d 0.5 --rcvbuf 4M" => {
            assert_eq!(u(&rs[0], "/options/rcvbuf_bytes"), 4 << 20);
            assert!(rs[0]["messages_lost"].is_u64());
        }
        "sockbench stream -t tcp --nodelay -s 64 -d 0.5 --cpus 0,1" => {
            assert_eq!(rs[0]["options"]["nodelay"], true);
            assert_eq!(rs[0]["options"]["cpus"], serde_json::json!([0, 1]));
        }
        "sockbench stream -t tcp -P 2 -s 1M --bytes 256M" => {
            assert_eq!(u(&rs[0], "/options/parallel"), 2);
            // --bytes is per stream.
            assert_eq!(u(&rs[0], "/bytes_received"), 2 * (256 << 20));
        }
        "sockbench stream -t unix,tcp -s 1K -n 100000" => {
            assert_eq!(transports(v), ["unix", "tcp"]);
            assert_eq!(every(v, "/messages_sent"), [100_000, 100_000]);
            assert_eq!(every(v, "/bytes_received"), [102_400_000, 102_400_000]);
        }
        "sockbench stream -t unix-seqpacket -s 16..64K -n 2000 -w 0.05 --format csv" => {
            let sizes: Vec<u64> = (4..=16).map(|p| 1 << p).collect();
            assert_eq!(every(v, "/size_bytes"), sizes);
            assert!(every(v, "/messages_received").iter().all(|&m| m == 2000));
            let csv = String::from_utf8_lossy(stdout);
            assert_eq!(csv.lines().count(), 1 + sizes.len(), "{csv}");
        }
        "sockbench stream -t mq -s 4K -d 0.5 --format json --export-markdown mq.md" => {
            let printed: Value = serde_json::from_slice(stdout).unwrap();
            assert_eq!(printed["body"]["results"], v["body"]["results"]);
            let md = std::fs::read_to_string(dir.join("mq.md")).unwrap();
            assert!(md.lines().any(|l| l.starts_with("| mq ")), "{md}");
        }
        "sockbench pingpong -t tcp,udp,unix,shm -s 64 -d 0.5" => {
            assert_eq!(transports(v), ["tcp", "udp", "unix", "shm"]);
            assert!(every(v, "/latencies/round_trip/p50_ns")
                .iter()
                .all(|&p| p > 0));
        }
        "sockbench pingpong -t tcp -s 1K --rate 20k -d 0.5 --histogram rtt.csv" => {
            // Open loop: 20k requests a second for half a second, never more (a sender
            // starved of CPU sends fewer, late, and their delay counts against them).
            let sent = u(&rs[0], "/messages_sent");
            assert!((1..=10_050).contains(&sent), "{sent}");
            let text = std::fs::read_to_string(dir.join("rtt.csv")).unwrap();
            let total: u64 = text
                .lines()
                .skip(1)
                .filter_map(|l| l.rsplit(',').next()?.parse::<u64>().ok())
                .sum();
            assert_eq!(total, u(&rs[0], "/latencies/round_trip/count"));
        }
        "sockbench pingpong -t tcp -s 64 --writes 2 -n 20" => {
            assert_eq!(u(&rs[0], "/latencies/round_trip/count"), 20);
        }
        "sockbench rate -t udp,unix-dgram,mq -s 64 -d 0.5" => {
            assert_eq!(transports(v), ["udp", "unix-dgram", "mq"]);
            assert!(rs
                .iter()
                .all(|r| r["messages_per_second"].as_f64().unwrap() > 0.0));
        }
        "sockbench rate -t udp -s 64 --rate 100k -d 0.5" => {
            // Paced at 100k/s for half a second: never faster.
            let sent = u(&rs[0], "/messages_sent");
            assert!((1..=50_500).contains(&sent), "{sent}");
            assert!(rs[0]["messages_per_second"].as_f64().unwrap() <= 101_000.0);
        }
        "sockbench rate -t udp,unix-dgram -s 64 --batch 32 -d 0.5" => {
            assert_eq!(transports(v), ["udp", "unix-dgram"]);
            for r in rs {
                assert_eq!(r["options"]["batch"], 32);
                let run = &r["runs"][0];
                // A timed run sends whole batches, each in one sendmmsg.
                assert_eq!(run["sender"]["messages_per_call"], 32.0, "{run}");
                let rcv = run["receiver"]["messages_per_call"].as_f64().unwrap();
                assert!((1.0..=32.0).contains(&rcv), "{run}");
            }
            assert!(String::from_utf8_lossy(stdout).contains("msgs/call snd/rcv"));
        }
        "sockbench connect -t tcp,unix -n 2000" => {
            assert_eq!(every(v, "/messages_sent"), [2000, 2000]);
        }
        "sockbench connect -t tcp --linger0 --open 16 -d 0.5" => {
            assert!(u(&rs[0], "/messages_sent") > 16);
        }
        "sockbench stream -t unix,tcp,pipe -e all -s 64K -d 0.2 -w 0.05" => {
            for t in ["unix", "tcp", "pipe"] {
                let engines: Vec<String> = cells(v)
                    .into_iter()
                    .filter(|c| c.0 == t)
                    .map(|c| c.1)
                    .collect();
                let skipped = v["body"]["skipped"].as_array().map_or(0, |s| s.len());
                assert!(engines.len() + skipped >= 6, "{t}: {engines:?}");
            }
        }
        "sockbench pingpong -t tcp -e blocking,nonblocking,epoll -n 5000" => {
            let engines: Vec<String> = cells(v).into_iter().map(|c| c.1).collect();
            assert_eq!(engines, ["blocking", "nonblocking", "epoll"]);
            assert!(every(v, "/latencies/round_trip/count")
                .iter()
                .all(|&c| c == 5000));
        }
        "sockbench suite -d 0.1 -t unix,tcp,shm" => {
            assert!(transports(v)
                .iter()
                .all(|t| ["unix", "tcp", "shm"].contains(&t.as_str())));
            let workloads: std::collections::BTreeSet<&str> =
                rs.iter().map(|r| r["workload"].as_str().unwrap()).collect();
            assert!(workloads.len() >= 2, "{workloads:?}");
        }
        "sockbench models -n 5000 -c 20" => {
            // The D benchmark's run: every model, each answering exactly what was asked.
            let rows = v["body"]["rows"].as_array().unwrap();
            assert_eq!(rows.len(), 8);
            for r in rows.iter().filter(|r| r["skipped"].is_null()) {
                assert_eq!(u(r, "/requests_complete"), 5000, "{r}");
                assert_eq!(u(r, "/server_requests"), 5000, "{r}");
                assert_eq!(u(r, "/requests_failed"), 0, "{r}");
            }
            assert_eq!(v["body"]["keepalive"], false);
        }
        "sockbench models --model epoll,io-uring,async -k -n 20000 -c 20" => {
            let rows = v["body"]["rows"].as_array().unwrap();
            let names: Vec<&str> = rows.iter().map(|r| r["model"].as_str().unwrap()).collect();
            assert_eq!(names, ["epoll", "io-uring", "async"]);
            for r in rows.iter().filter(|r| r["skipped"].is_null()) {
                assert_eq!(u(r, "/server_requests"), 20000, "{r}");
            }
            assert_eq!(v["body"]["keepalive"], true);
        }
        "sockbench stream -t tcp,unix,pipe -s 64K -d 0.3 -w 0.05 --send splice" => {
            assert_eq!(transports(v), ["tcp", "unix", "pipe"]);
            for r in rs {
                assert_eq!(r["options"]["send"], "splice");
                assert_eq!(u(r, "/bytes_sent"), u(r, "/bytes_received"));
                assert!(
                    u(r, "/send/calls") >= 2 * u(r, "/messages_sent"),
                    "{}",
                    r["send"]
                );
            }
        }
        "sockbench stream -t tcp -s 64K -d 0.5 -w 0.05 --send zerocopy" => {
            let z = &rs[0]["send"]["zerocopy"];
            assert!(
                u(z, "/sends") > 0 && u(z, "/sends") == u(z, "/completed"),
                "{z}"
            );
            // On loopback the kernel copies every one, and the report says so.
            assert_eq!(u(z, "/copied"), u(z, "/completed"), "{z}");
            let table = String::from_utf8_lossy(stdout);
            assert!(table.contains("zero-copy sends"), "{table}");
            assert!(rs[0]["warnings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|w| w["kind"] == "zerocopy-copied"));
        }
        other => panic!("README example `{other}` has no promise in tests/readme.rs: add one"),
    }
}

#[test]
fn readme_test_command_is_what_ci_runs() {
    let command = "cargo fmt --check && cargo clippy --locked --all-targets --all-features -- -D warnings && cargo check --locked --no-default-features && cargo test --locked --features test-hooks --no-fail-fast";
    assert!(README.contains(command));
    assert!(CI.lines().any(|l| l.trim() == command));
}
