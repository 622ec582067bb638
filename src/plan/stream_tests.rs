//! The stream workload's methods and batches as the plan checks them: what a named
//! combination is refused for, what `all` skips, and what a peer's server still accepts.

use clap::Parser;

use super::{first_scenario, Plan};
use crate::cli::Args;
use crate::engine::EngineKind;
use crate::error::PlanError;
use crate::scenario::Scenario;
use crate::transport::TransportKind;
use crate::vocab::{RecvMethod, SendMethod};
use crate::workload::stream::loopback_recv_refusal;

fn plan(argv: &[&str]) -> Result<Plan, PlanError> {
    let mut v = vec!["sockbench", "stream"];
    v.extend_from_slice(argv);
    Plan::from_args(&Args::try_parse_from(v).unwrap())
}

fn refused(argv: &[&str]) -> String {
    match plan(argv) {
        Err(PlanError::Unsupported(why)) => why,
        other => panic!("{argv:?}: {:?}", other.map(|p| p.scenarios.len())),
    }
}

#[test]
fn the_methods_reach_the_scenario_and_the_defaults_are_write_and_read() {
    let p = plan(&["-t", "tcp", "--send", "splice"]).unwrap();
    assert_eq!(p.scenarios[0].extras.send, SendMethod::Splice);
    assert_eq!(p.scenarios[0].extras.recv, RecvMethod::Read);
    let p = plan(&["-t", "tcp"]).unwrap();
    assert_eq!(p.scenarios[0].extras.send, SendMethod::Write);
    // A scenario from a peer that knows neither field: write and read.
    let mut json = serde_json::to_value(&p.scenarios[0]).unwrap();
    let extras = json["extras"].as_object_mut().unwrap();
    assert_eq!(extras.remove("send"), Some("write".into()));
    assert_eq!(extras.remove("recv"), Some("read".into()));
    let back: Scenario = serde_json::from_value(json).unwrap();
    assert_eq!(back.extras, p.scenarios[0].extras);
}

#[test]
fn a_named_combination_a_method_cannot_serve_is_refused_with_the_reason() {
    let why = refused(&["-t", "shm", "--send", "sendfile"]);
    assert!(
        why.contains("a socket or a pipe") && why.contains("shm has none"),
        "{why}"
    );
    let why = refused(&["-t", "mq", "--send", "splice"]);
    assert!(why.contains("mq_send"), "{why}");
    let why = refused(&["-t", "unix", "--send", "zerocopy"]);
    assert!(why.contains("SO_ZEROCOPY on Unix sockets"), "{why}");
    let why = refused(&["-t", "fifo", "--send", "zerocopy"]);
    assert!(why.contains("--send splice"), "{why}");
    let why = refused(&["-t", "unix", "--recv", "zerocopy"]);
    assert!(why.contains("TCP_ZEROCOPY_RECEIVE is TCP's alone"), "{why}");
    let why = refused(&["-t", "tcp", "-e", "epoll", "--send", "sendfile"]);
    assert!(why.contains("use --engine blocking"), "{why}");
    let why = refused(&[
        "-t",
        "unix-dgram",
        "-s",
        "100K",
        "--send",
        "splice",
        "--sndbuf",
        "1M",
    ]);
    assert!(why.contains("several datagrams"), "{why}");
    // The largest datagram one sendmsg of 16 pages carries is fine.
    assert!(plan(&[
        "-t",
        "unix-dgram",
        "-s",
        "64K",
        "--send",
        "splice",
        "--sndbuf",
        "1M"
    ])
    .is_ok());
    for ok in [
        &["-t", "pipe,fifo,unix,tcp", "--send", "sendfile"][..],
        &["-t", "pipe,fifo,socketpair,udp", "--send", "splice"],
        &["-t", "tcp,tcp6,udp,udp6", "--send", "zerocopy"],
    ] {
        assert!(plan(ok).is_ok(), "{ok:?}");
    }
}

#[test]
fn a_batch_needs_datagrams_or_io_uring_and_the_engines_own_calls() {
    let why = refused(&["-t", "unix", "-e", "epoll", "--batch", "4"]);
    assert!(
        why.contains("--batch 4 over unix with the epoll engine")
            && why.contains("--engine io-uring"),
        "{why}"
    );
    let why = refused(&["-t", "udp", "--batch", "4", "--send", "sendfile"]);
    assert!(why.contains("--batch 4 with --send sendfile"), "{why}");
    for ok in [
        &[
            "-t",
            "udp,unix-dgram",
            "-e",
            "blocking,epoll",
            "--batch",
            "32",
        ][..],
        &["-t", "tcp,unix,pipe,udp", "-e", "io-uring", "--batch", "8"],
        &["-t", "tcp", "-e", "blocking", "--batch", "1"],
    ] {
        let p = plan(ok).unwrap_or_else(|e| panic!("{ok:?}: {e:?}"));
        assert!(p.scenarios.iter().all(|s| s.extras.batch >= 1));
    }
}

#[test]
fn under_all_a_refused_combination_is_a_skip_with_the_reason() {
    let p = plan(&["-t", "all", "--send", "zerocopy"]).unwrap();
    let ran: Vec<_> = p.scenarios.iter().map(|s| s.transport).collect();
    assert_eq!(
        ran,
        [
            TransportKind::Tcp,
            TransportKind::Tcp6,
            TransportKind::Udp,
            TransportKind::Udp6
        ]
    );
    assert!(p
        .skipped
        .iter()
        .any(|s| s.transport == TransportKind::Shm && s.reason.contains("shared-memory ring")));
    let p = plan(&["-t", "tcp", "-e", "all", "--send", "sendfile"]).unwrap();
    assert!(p.scenarios.iter().all(|s| s.engine == EngineKind::Blocking));
    assert_eq!(p.skipped.len(), EngineKind::ALL.len() - 1);
}

#[test]
fn a_zero_copy_receiver_on_this_host_is_refused_where_los_mtu_cannot_give_pages() {
    let sc = first_scenario(&["stream", "-t", "tcp"]);
    let mut zc = sc.clone();
    zc.extras.recv = RecvMethod::Zerocopy;
    assert_eq!(loopback_recv_refusal(&sc), None, "read needs no pages");
    let mtu: u64 = std::fs::read_to_string("/sys/class/net/lo/mtu")
        .map_or(65536, |m| m.trim().parse().unwrap());
    let why = loopback_recv_refusal(&zc);
    if mtu == 65536 {
        let why = why.expect("65483-byte segments");
        assert!(why.contains("65483-byte segments"), "{why}");
        assert!(why.contains("ip link set lo mtu 61492"), "{why}");
        // Named: a usage error; the server's own check does not know lo's MTU.
        assert!(matches!(
            plan(&["-t", "tcp", "--recv", "zerocopy"]),
            Err(PlanError::Unsupported(_))
        ));
    }
    let limits = crate::control::messages::Limits::default();
    use crate::control::session::check_scenario;
    use crate::vocab::Peer;
    assert!(check_scenario(zc, &limits, Peer::Local).is_ok());
    let mut shm = sc;
    shm.transport = TransportKind::Shm;
    shm.extras.send = SendMethod::Sendfile;
    let why = check_scenario(shm, &limits, Peer::Local).unwrap_err();
    assert!(why.contains("shm has none"), "{why}");
}
