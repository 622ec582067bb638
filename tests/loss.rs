//! Loss checked against loss the kernel was told to make. In a private network namespace
//! an iptables rule drops exactly every Nth UDP datagram that has a payload (the empty
//! end-of-data markers pass untouched), so the count is known before the run; the rule's
//! own packet counter and the namespace's UDP RcvbufErrors (/proc/net/snmp) are read
//! after it. Where the receiver's buffer also overflowed, the loss beyond the rule's is
//! bounded by RcvbufErrors, which may include refused end markers (counted by a rule too). (pingpong's split into lost requests and replies: tests/pingpong.rs.)

use crate::common::{json_in_netns, rule, snmp, u, Sandbox, RULE_COUNTS};

fn drop_every(n: u64) -> String {
    format!(
        "{}; {}",
        rule(
            "INPUT",
            &format!("-p udp -m length --length 29:65535 -m statistic --mode nth --every {n} --packet 0 -j DROP"),
            "dropped"
        ),
        rule("INPUT", "-p udp -m length --length 28 -j ACCEPT", "markers"),
    )
}

fn counters() -> String {
    format!(
        "{RULE_COUNTS}; {}",
        snmp("Udp", "RcvbufErrors", "rcvbuf_errors")
    )
}

/// Whether `lost` datagrams with data are what a full receive buffer explains: the
/// kernel's RcvbufErrors (`errors`), less any of the `markers` (empty end-of-data
/// datagrams, which the drop rule never touches) that the full buffer refused too.
fn overflow_explains(lost: u64, errors: u64, markers: u64) -> bool {
    (errors.saturating_sub(markers)..=errors).contains(&lost)
}

#[test]
fn rate_over_udp_reports_exactly_the_datagrams_the_firewall_dropped_in_every_run() {
    let sb = Sandbox::new();
    let Some((v, k)) = json_in_netns(
        &sb,
        &drop_every(10),
        &[
            "rate", "-t", "udp", "-n", "1000", "--runs", "2", "-w", "0", "--rate", "40k",
        ],
        &counters(),
    ) else {
        return;
    };
    let r = &v["body"]["results"][0];
    // Two runs of 1000 on fresh sockets: the rule's counter goes on, 1st, 11th, ... 1991st.
    assert_eq!(k["dropped"], 200, "{k:?}");
    let (overflow, markers) = (k["rcvbuf_errors"], k["markers"]);
    for run in 0..2 {
        let f = &r["runs"][run];
        assert_eq!(u(f, "/messages_sent"), 1000);
        let lost = u(f, "/messages_lost");
        let own_overflow = u(f, "/udp_receive_buffer_errors");
        assert!(lost >= 100, "run {run}: {f}");
        assert!(
            overflow_explains(lost - 100, own_overflow, markers),
            "run {run}: {f}"
        );
        assert_eq!(u(f, "/messages_received"), 1000 - lost, "run {run}");
        assert_eq!(u(f, "/bytes_received"), 64 * (1000 - lost));
    }
    // The scenario's figures are the total over both runs, not the first run's.
    assert_eq!(u(r, "/messages_sent"), 2000);
    let lost = u(r, "/messages_lost");
    assert!(
        lost >= 200 && overflow_explains(lost - 200, overflow, markers),
        "{r} {k:?}"
    );
    assert_eq!(u(r, "/messages_received"), 2000 - lost);
    assert_eq!(u(r, "/udp_receive_buffer_errors"), overflow);
    assert!(r["error"].is_null());
}

#[test]
fn stream_over_udp_loses_exactly_the_dropped_datagrams_plus_the_overflows() {
    let sb = Sandbox::new();
    let Some((v, k)) = json_in_netns(
        &sb,
        &drop_every(7),
        &["stream", "-t", "udp", "-n", "2000", "-w", "0"],
        &counters(),
    ) else {
        return;
    };
    let r = &v["body"]["results"][0];
    // The 1st, 8th, 15th ... of 2000: ceil(2000 / 7).
    assert_eq!(k["dropped"], 286, "{k:?}");
    let lost = u(r, "/messages_lost");
    assert!(
        lost >= 286 && overflow_explains(lost - 286, k["rcvbuf_errors"], k["markers"]),
        "{r} {k:?}"
    );
    assert_eq!(u(r, "/messages_sent"), 2000);
    assert_eq!(u(r, "/bytes_sent"), 2000 * 1472);
    assert_eq!(u(r, "/messages_received"), 2000 - lost);
    assert_eq!(u(r, "/bytes_received"), 1472 * (2000 - lost));
    assert_eq!(u(r, "/udp_receive_buffer_errors"), k["rcvbuf_errors"]);
}

#[test]
fn udp_runs_end_when_every_end_marker_is_lost() {
    // Every empty datagram (the end-of-data marker) is dropped: the receivers must end on
    // their own, after the sender said it is done and the line went quiet, and the quiet
    // wait is not part of the measured interval.
    for args in [
        &["stream", "-t", "udp", "-n", "500", "-s", "1K", "-w", "0"][..],
        &["rate", "-t", "udp", "-n", "500", "--rate", "50k", "-w", "0"],
    ] {
        let sb = Sandbox::new();
        let Some((v, k)) = json_in_netns(
            &sb,
            &rule("INPUT", "-p udp -m length --length 28 -j DROP", "markers"),
            args,
            RULE_COUNTS,
        ) else {
            return;
        };
        assert!(k["markers"] >= 1, "{args:?}: no end marker was sent: {k:?}");
        let r = &v["body"]["results"][0];
        assert_eq!(u(r, "/messages_sent"), 500, "{args:?}");
        assert_eq!(
            u(r, "/messages_received") + u(r, "/messages_lost"),
            500,
            "{args:?}"
        );
        // 500 datagrams take milliseconds; the quiet wait that ends the run is 50 ms.
        let secs = r["runs"][0]["duration_seconds"].as_f64().unwrap();
        assert!(secs < 0.04, "{args:?}: {secs} s measured");
    }
}
