//! Every transport carries a short stream end to end, and both sides' counts agree
//! (exactly for reliable transports; sent = received + lost for UDP).

use crate::common::{f, json, shm_left_by_exited, u, Sandbox};

const ALL: [&str; 12] = [
    "unix",
    "unix-dgram",
    "unix-seqpacket",
    "socketpair",
    "tcp",
    "tcp6",
    "udp",
    "udp6",
    "pipe",
    "fifo",
    "mq",
    "shm",
];

fn ipv6_available() -> bool {
    std::net::TcpListener::bind("[::1]:0").is_ok()
}

#[test]
fn every_transport_delivers_an_exact_count_and_both_sides_agree() {
    let sb = Sandbox::new();
    let list: Vec<&str> = ALL
        .iter()
        .copied()
        .filter(|t| ipv6_available() || !t.ends_with('6'))
        .collect();
    // 1000 messages of 1000 bytes: not a power of two, so partial reads would show.
    let v = json(
        &sb,
        &[
            "stream",
            "-t",
            &list.join(","),
            "-s",
            "1000",
            "-n",
            "1000",
            "-w",
            "0",
        ],
    );
    let results = v["body"]["results"].as_array().unwrap();
    assert_eq!(results.len(), list.len());
    for r in results {
        let t = r["transport"].as_str().unwrap();
        assert!(r["error"].is_null(), "{t}: {}", r["error"]);
        assert_eq!(u(r, "/messages_sent"), 1000, "{t}");
        assert_eq!(u(r, "/bytes_sent"), 1_000_000, "{t}");
        let lost = r["messages_lost"].as_u64();
        if t.starts_with("udp") {
            let lost = lost.expect("udp counts loss");
            assert_eq!(u(r, "/messages_received") + lost, 1000, "{t}");
            assert_eq!(
                u(r, "/bytes_received"),
                u(r, "/messages_received") * 1000,
                "{t}"
            );
        } else {
            assert!(
                r["messages_lost"].is_null(),
                "{t}: loss is null where nothing can be lost"
            );
            assert_eq!(u(r, "/bytes_received"), 1_000_000, "{t}");
            assert_eq!(u(r, "/messages_received"), 1000, "{t}");
        }
        assert!(f(r, "/bits_per_second") > 0.0, "{t}");
        assert!(
            (f(r, "/bits_per_second") - 8.0 * f(r, "/bytes_per_second")).abs()
                < 1e-6 * f(r, "/bits_per_second")
        );
        let run = &r["runs"][0];
        assert!(f(run, "/duration_seconds") > 0.0, "{t}");
        assert!(f(run, "/sender/cpu_seconds") > 0.0, "{t}");
        assert!(f(run, "/receiver/cpu_seconds") > 0.0, "{t}");
    }
    assert!(
        sb.leftovers().is_empty(),
        "left behind: {:?}",
        sb.leftovers()
    );
    // (Other tests of this binary run shm beside this one: only rings whose maker has
    // exited are left behind.)
    assert!(
        shm_left_by_exited().is_empty(),
        "left in /dev/shm: {:?}",
        shm_left_by_exited()
    );
}

#[test]
fn bytes_mode_sends_exactly_that_many_bytes_with_a_short_last_message() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "stream",
            "-t",
            "tcp,pipe,shm",
            "-s",
            "4K",
            "--bytes",
            "10000",
            "-w",
            "0",
        ],
    );
    for r in v["body"]["results"].as_array().unwrap() {
        assert_eq!(u(r, "/bytes_sent"), 10_000);
        assert_eq!(u(r, "/bytes_received"), 10_000);
        assert_eq!(u(r, "/messages_sent"), 3);
        assert_eq!(r["options"]["bytes"], 10_000);
    }
}

#[test]
fn timed_run_lasts_about_the_duration_and_reports_each_side() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "stream",
            "-t",
            "socketpair",
            "-s",
            "16K",
            "-d",
            "0.3",
            "-w",
            "0",
        ],
    );
    let r = &v["body"]["results"][0];
    let secs = f(r, "/runs/0/duration_seconds");
    assert!((0.29..1.0).contains(&secs), "receiver interval {secs}");
    let snd = f(r, "/runs/0/sender/duration_seconds");
    assert!((0.29..0.6).contains(&snd), "sender interval {snd}");
    assert_eq!(r["options"]["duration_seconds"], 0.3);
    assert!(r["runs"][0]["sndbuf_bytes"].as_u64().unwrap() > 0);
    assert!(r["runs"][0]["system"]["utilization"].as_f64().unwrap() >= 0.0);
}

#[test]
fn repeated_runs_get_statistics_and_totals() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "stream", "-t", "unix", "-s", "8K", "-n", "2000", "--runs", "3", "-w", "0",
        ],
    );
    let r = &v["body"]["results"][0];
    assert_eq!(r["runs"].as_array().unwrap().len(), 3);
    assert_eq!(u(r, "/messages_sent"), 6000, "totals add up over runs");
    let s = &r["statistics"]["bits_per_second"];
    assert_eq!(s["runs"], 3);
    assert!(f(s, "/min") <= f(s, "/median") && f(s, "/median") <= f(s, "/max"));
    assert!(f(s, "/ci95_low") <= f(s, "/mean") && f(s, "/mean") <= f(s, "/ci95_high"));
    assert!(s["cv"].as_f64().is_some());
    assert_eq!(f(r, "/bits_per_second"), f(s, "/median"));
}

#[test]
fn parallel_streams_add_up() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "stream", "-t", "tcp", "-s", "4K", "-n", "500", "-P", "3", "-w", "0",
        ],
    );
    let r = &v["body"]["results"][0];
    assert_eq!(u(r, "/messages_sent"), 1500);
    assert_eq!(u(r, "/bytes_received"), 1500 * 4096);
    assert_eq!(r["options"]["parallel"], 3);
}

#[test]
fn tcp_reports_granted_buffers_mss_and_warns_when_a_buffer_is_clamped() {
    let sb = Sandbox::new();
    let wmem_max: u64 = std::fs::read_to_string("/proc/sys/net/core/wmem_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let ask = (wmem_max * 4).to_string();
    let v = json(
        &sb,
        &[
            "stream",
            "-t",
            "tcp",
            "-s",
            "4K",
            "-n",
            "100",
            "-w",
            "0",
            "--sndbuf",
            &ask,
            "--nodelay",
        ],
    );
    let r = &v["body"]["results"][0];
    assert_eq!(
        u(r, "/runs/0/sndbuf_bytes"),
        2 * wmem_max,
        "the kernel doubles and caps at wmem_max"
    );
    assert!(u(r, "/runs/0/mss_bytes") > 0);
    let kinds: Vec<_> = r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"buffer-clamped"), "{kinds:?}");
    assert_eq!(r["options"]["nodelay"], true);
}

#[test]
fn pinning_and_a_fixed_port_work() {
    let sb = Sandbox::new();
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    let bind = format!("127.0.0.1:{port}");
    let v = json(
        &sb,
        &[
            "stream", "-t", "tcp", "-n", "100", "-w", "0", "--cpus", "0,0", "--bind", &bind,
        ],
    );
    assert_eq!(
        v["body"]["results"][0]["options"]["cpus"],
        serde_json::json!([0, 0])
    );
    assert_eq!(u(&v, "/body/results/0/bytes_received"), 100 * 65536);
}

#[test]
fn udp_at_full_speed_counts_loss_exactly() {
    let sb = Sandbox::new();
    // A tiny receive buffer makes loss likely; whatever happens, the books must balance.
    let v = json(
        &sb,
        &[
            "stream", "-t", "udp", "-s", "1K", "-n", "20000", "-w", "0", "--rcvbuf", "4K",
        ],
    );
    let r = &v["body"]["results"][0];
    assert_eq!(u(r, "/messages_sent"), 20000);
    assert_eq!(u(r, "/messages_received") + u(r, "/messages_lost"), 20000);
    if u(r, "/messages_lost") > 0 {
        let kinds: Vec<_> = r["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["kind"].as_str().unwrap())
            .collect();
        assert!(kinds.contains(&"datagram-loss"));
    }
}

#[test]
fn user_path_directory_is_used_and_left_clean() {
    let sb = Sandbox::new();
    let dir = sb.path().join("socks");
    std::fs::create_dir(&dir).unwrap();
    let v = json(
        &sb,
        &[
            "stream",
            "-t",
            "unix,fifo",
            "-n",
            "10",
            "-w",
            "0",
            "--path",
            dir.to_str().unwrap(),
        ],
    );
    assert_eq!(v["body"]["results"].as_array().unwrap().len(), 2);
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "socket files and FIFOs are removed"
    );
}

#[test]
fn connect_reaches_the_receiver_through_another_local_address() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "stream",
            "-t",
            "tcp,udp",
            "-s",
            "1K",
            "-n",
            "100",
            "-w",
            "0",
            "--bind",
            "0.0.0.0",
            "--connect",
            "127.0.0.2",
        ],
    );
    for r in v["body"]["results"].as_array().unwrap() {
        let endpoint = r["runs"][0]["endpoint"].as_str().unwrap();
        assert!(endpoint.starts_with("127.0.0.2:"), "{endpoint}");
    }
}

#[test]
fn unix_receive_buffer_is_applied_to_the_accepted_socket() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "stream",
            "-t",
            "unix,unix-seqpacket",
            "-s",
            "1K",
            "-n",
            "10",
            "-w",
            "0",
            "--rcvbuf",
            "64K",
        ],
    );
    for r in v["body"]["results"].as_array().unwrap() {
        assert_eq!(
            u(r, "/runs/0/rcvbuf_bytes"),
            2 * 65536,
            "{}",
            r["transport"]
        );
        assert!(r["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|w| w["kind"] != "buffer-clamped"));
    }
}

#[test]
fn message_queues_are_closed_so_many_runs_and_streams_fit_the_rlimit() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "stream", "-t", "mq", "-s", "8K", "-n", "20", "-w", "0", "--runs", "15",
        ],
    );
    assert_eq!(
        v["body"]["results"][0]["runs"].as_array().unwrap().len(),
        15
    );
    let v = json(
        &sb,
        &[
            "stream", "-t", "mq", "-s", "1K", "-n", "20", "-w", "0", "-P", "4",
        ],
    );
    assert_eq!(u(&v, "/body/results/0/messages_received"), 80);
}

#[test]
fn a_fixed_workload_reports_connect_transfer_and_close_times() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "stream",
            "-t",
            "tcp,unix,pipe",
            "-s",
            "1K",
            "-n",
            "2000",
            "-w",
            "0",
        ],
    );
    for r in v["body"]["results"].as_array().unwrap() {
        let p = &r["runs"][0]["phases"];
        assert!(f(p, "/connect_seconds") > 0.0, "{p}");
        assert!(f(p, "/close_seconds") > 0.0, "{p}");
        assert_eq!(f(p, "/transfer_seconds"), f(r, "/runs/0/duration_seconds"));
    }
    let out = sb
        .cmd()
        .args([
            "stream", "-t", "tcp", "-s", "1K", "-n", "2000", "-w", "0", "-q",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("connect") && text.contains("transfer") && text.contains("close"),
        "{text}"
    );
}
