//! `rate`: message counts with sequence numbers: nothing lost, reordered or duplicated on
//! reliable transports; exact loss on UDP, explained by the kernel's own drop counter.

use crate::common::{f, json, u, Sandbox};

#[test]
fn reliable_transports_deliver_every_numbered_message_in_order() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "rate",
            "-t",
            "unix,unix-dgram,unix-seqpacket,tcp,pipe,mq,shm",
            "-s",
            "64",
            "-n",
            "5000",
            "-w",
            "0",
        ],
    );
    for r in v["body"]["results"].as_array().unwrap() {
        let t = r["transport"].as_str().unwrap();
        assert!(r["error"].is_null(), "{t}: {}", r["error"]);
        assert_eq!(u(r, "/messages_sent"), 5000, "{t}");
        assert_eq!(u(r, "/messages_received"), 5000, "{t}");
        assert_eq!(u(r, "/messages_reordered"), 0, "{t}");
        assert_eq!(u(r, "/messages_duplicated"), 0, "{t}");
        assert!(r["messages_lost"].is_null(), "{t}");
        assert!(f(r, "/messages_per_second") > 0.0);
        assert!(f(r, "/runs/0/sender/messages_per_second") > 0.0);
    }
}

#[test]
fn udp_overflowing_the_receiver_counts_loss_exactly_and_says_why() {
    let sb = Sandbox::new();
    // A 4 KiB receive buffer at full speed overflows; the books must still balance.
    let v = json(
        &sb,
        &[
            "rate", "-t", "udp", "-s", "64", "-n", "100000", "-w", "0", "--rcvbuf", "4K",
        ],
    );
    let r = &v["body"]["results"][0];
    let (sent, got, lost) = (
        u(r, "/messages_sent"),
        u(r, "/messages_received"),
        u(r, "/messages_lost"),
    );
    let dup = u(r, "/messages_duplicated");
    assert_eq!(sent, 100_000);
    assert_eq!(got - dup + lost, sent);
    let fraction = f(r, "/delivered_fraction");
    assert!((fraction - (sent - lost) as f64 / sent as f64).abs() < 1e-12);
    assert!(lost > 0, "a 4 KiB buffer at full speed should overflow");
    assert!(
        u(r, "/udp_receive_buffer_errors") >= lost,
        "the kernel saw the overflows"
    );
    let w = r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["kind"] == "datagram-loss")
        .unwrap();
    assert!(
        w["message"]
            .as_str()
            .unwrap()
            .contains("receive-buffer overflows"),
        "{w}"
    );
}

#[test]
fn messages_too_small_for_a_number_report_unknown_reordering() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "rate",
            "-t",
            "unix-dgram",
            "-s",
            "4",
            "-n",
            "1000",
            "-w",
            "0",
        ],
    );
    let r = &v["body"]["results"][0];
    assert_eq!(u(r, "/messages_received"), 1000);
    assert!(r["messages_reordered"].is_null() && r["messages_duplicated"].is_null());
}

#[test]
fn paced_sender_keeps_the_rate() {
    let sb = Sandbox::new();
    let v = json(
        &sb,
        &[
            "rate",
            "-t",
            "unix-dgram",
            "-s",
            "64",
            "--rate",
            "5k",
            "-d",
            "0.4",
            "-w",
            "0",
        ],
    );
    let sent = u(&v, "/body/results/0/messages_sent") as f64;
    assert!(
        (1700.0..=2200.0).contains(&sent),
        "{sent} messages in 0.4 s at 5000/s"
    );
    assert!(v["body"]["results"][0]["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|w| w["kind"] != "cpu-saturated"));
}
