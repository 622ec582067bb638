//! A relay run end to end through the threads placement, folded as `sockbench relay`
//! folds it: every byte the source sent crosses the relay to the sink.

use std::io;
use std::time::Duration;

use super::{Placement, RunError, Threads};
use crate::copy::Method;
use crate::scenario::Stop;
use crate::transport::TransportKind;
use crate::workload::relay::{Outcome, Setup, Shape};

/// One run through the runner's threads placement, folded as `sockbench relay` does.
fn run(s: &Setup) -> io::Result<Outcome> {
    let sc = s.scenario(Duration::ZERO, 1);
    let roles = Threads::new(None).run(&sc, sc.stop).map_err(|e| match e {
        RunError::Failed(e) => io::Error::other(format!("{e:#}")),
        RunError::Interrupted => io::ErrorKind::Interrupted.into(),
    })?;
    Outcome::of(&roles, true).map_err(io::Error::other)
}

#[test]
fn every_byte_arrives_and_the_three_counts_agree() {
    for (t, shape, size) in [
        (
            TransportKind::Tcp,
            Shape::Streams(Stop::Bytes(1 << 20)),
            65536,
        ),
        (
            TransportKind::Unix,
            Shape::Streams(Stop::Bytes(100_001)),
            4096,
        ),
        (TransportKind::Tcp, Shape::Connections(50), 10_000),
        (TransportKind::Unix, Shape::Connections(20), 1),
    ] {
        let s = Setup::new(Method::ReadWrite, t, size, shape);
        let o = run(&s).unwrap();
        let want = match shape {
            Shape::Streams(Stop::Bytes(b)) => b,
            Shape::Connections(n) => n * size as u64,
            _ => unreachable!(),
        };
        assert_eq!(
            (o.source.bytes, o.copied.bytes, o.sink.bytes),
            (want, want, want)
        );
        let conns = match shape {
            Shape::Connections(n) => n,
            _ => 1,
        };
        assert_eq!(
            (o.source.connections, o.relayed, o.sink.connections),
            (conns, conns, conns)
        );
        assert_eq!(o.sink.messages, o.source.messages);
        assert!(o.interval > Duration::ZERO);
        // A read and a write per chunk at least, and one read that sees the end.
        assert!(o.copied.syscalls >= 2 * want.div_ceil(65536) + conns);
    }
}

#[test]
fn timed_runs_last_their_time_and_no_longer() {
    for shape in [
        Shape::Streams(Stop::Duration(Duration::from_millis(300))),
        Shape::Pingpong(Stop::Duration(Duration::from_millis(300))),
    ] {
        let s = Setup::new(Method::ReadWrite, TransportKind::Unix, 1000, shape);
        let o = run(&s).unwrap();
        assert!(
            o.interval >= Duration::from_millis(300) && o.interval < Duration::from_secs(3),
            "{shape:?}: {:?}",
            o.interval
        );
        assert!(o.sink.messages > 20, "{shape:?}: {}", o.sink.messages);
        assert_eq!(o.sink.messages, o.source.messages);
    }
}

#[test]
fn pingpong_times_every_message_once() {
    let s = Setup::new(
        Method::ReadWrite,
        TransportKind::Tcp,
        100,
        Shape::Pingpong(Stop::Count(500)),
    );
    let o = run(&s).unwrap();
    let h = o.latency.unwrap();
    assert_eq!(h.len(), 500);
    assert_eq!((o.source.messages, o.sink.messages), (500, 500));
    assert_eq!(o.sink.bytes, 50_000);
    assert!(h.min() > 0);
}

#[test]
fn several_connections_at_once_each_carry_their_own_stream() {
    let mut s = Setup::new(
        Method::ReadWrite,
        TransportKind::Unix,
        1000,
        Shape::Streams(Stop::Bytes(300_000)),
    );
    s.parallel = 3;
    let o = run(&s).unwrap();
    assert_eq!(o.sink.bytes, 900_000);
    assert_eq!(o.sink.connections, 3);
    assert_eq!(o.sink.messages, 900);
}
