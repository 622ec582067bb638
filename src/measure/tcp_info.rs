//! TCP's own figures of a run, the ones an iperf3 user reads first: what `TCP_INFO` says
//! of each sending socket at the end of its run (segments retransmitted, congestion
//! window, smoothed round-trip time and its variation, path MTU), and their total or
//! spread over the streams.
//!
//! A sending role reads its socket once, after it has ended its data (shutdown) and
//! before it closes the socket: as soon as everything it queued, its FIN included, has
//! been acknowledged, so every retransmission the transfer needed is counted; or after
//! [`SETTLE_WAIT`] (a receiver that stopped reading, a peer gone), or at Ctrl-C, with
//! what the kernel knows then. Counts are the socket's since it opened (each measured run
//! has a connection of its own; the warm-up's is another), so a retransmitted SYN of the
//! dialling side is in them, as in iperf3's. For pingpong the sending role is the client:
//! its requests' retransmissions, not the replies'.
//!
//! The per-interval retransmissions of `--interval` are read as the run goes
//! (`live.rs`), up to the senders' last write; the figure here also has the ones of the
//! tail, while the receiver drained.
//!
//! The getsockopt(2) call itself is `crate::sys::tcp_info`.

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::sys::tcp_info::{self as sys, Snapshot};

/// How long a sender waits, after ending its data, for the kernel to have everything it
/// sent acknowledged before it reads `TCP_INFO` anyway. Shorter than the time a split
/// run gives its roles to end once it is abandoned (2 s), so an abandoned sender never
/// outlives it; on loopback or a LAN the wait is over in microseconds to milliseconds.
pub const SETTLE_WAIT: Duration = Duration::from_secs(1);

/// One sending socket's `TCP_INFO` at the end of its run.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct TcpInfo {
    /// Segments the socket retransmitted since it opened (`tcpi_total_retrans`), as the
    /// kernel's `TcpRetransSegs` counts them.
    pub retransmits: u64,
    /// The congestion window in segments (`tcpi_snd_cwnd`).
    pub snd_cwnd_segments: u64,
    /// The sending MSS (`tcpi_snd_mss`).
    pub snd_mss_bytes: u64,
    /// The congestion window in bytes: `snd_cwnd_segments` x `snd_mss_bytes`, as iperf3's
    /// `snd_cwnd`.
    pub snd_cwnd_bytes: u64,
    /// The smoothed round-trip time (`tcpi_rtt`), in microseconds.
    pub srtt_us: u64,
    /// Its mean deviation (`tcpi_rttvar`), in microseconds.
    pub rttvar_us: u64,
    /// The path MTU (`tcpi_pmtu`).
    pub pmtu_bytes: u64,
}

impl TcpInfo {
    /// The figures from what the kernel reported; the window in bytes is computed here,
    /// never taken from anyone.
    pub fn new(
        retransmits: u32,
        snd_cwnd_segments: u32,
        snd_mss_bytes: u32,
        srtt_us: u32,
        rttvar_us: u32,
        pmtu_bytes: u32,
    ) -> TcpInfo {
        TcpInfo {
            retransmits: u64::from(retransmits),
            snd_cwnd_segments: u64::from(snd_cwnd_segments),
            snd_mss_bytes: u64::from(snd_mss_bytes),
            snd_cwnd_bytes: u64::from(snd_cwnd_segments) * u64::from(snd_mss_bytes),
            srtt_us: u64::from(srtt_us),
            rttvar_us: u64::from(rttvar_us),
            pmtu_bytes: u64::from(pmtu_bytes),
        }
    }

    fn of(s: &Snapshot) -> TcpInfo {
        TcpInfo::new(
            s.total_retrans,
            s.snd_cwnd,
            s.snd_mss,
            s.rtt_us,
            s.rttvar_us,
            s.pmtu,
        )
    }
}

/// A sending role's `TCP_INFO` at its end, read on `fd` (its sending descriptor) after it
/// ended its data and before it closes: once everything it sent is acknowledged, or after
/// [`SETTLE_WAIT`], or at Ctrl-C. `None` when `fd` is not a TCP socket (or none).
pub fn at_end(fd: Option<RawFd>) -> Option<TcpInfo> {
    let fd = fd?;
    let mut now = sys::read(fd).ok()?;
    let until = Instant::now() + SETTLE_WAIT;
    let mut pause = Duration::from_micros(50);
    while !now.settled() && Instant::now() < until && !crate::interrupt::requested() {
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(5));
        match sys::read(fd) {
            Ok(s) => now = s,
            Err(_) => break,
        }
    }
    Some(TcpInfo::of(&now))
}

/// The TCP figures of one run: each stream's sending socket, and over the streams the
/// total of retransmissions, the largest window and the spread of smoothed RTTs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TcpFigures {
    /// Segments retransmitted, all streams (the sum of `streams[].retransmits`); null if
    /// a stream's socket could not be read.
    pub retransmits: Option<u64>,
    /// The largest congestion window of the streams, in bytes (a window is per
    /// connection: their sum is not one window); null if a stream could not be read.
    pub snd_cwnd_bytes_max: Option<u64>,
    /// The smallest smoothed RTT of the streams, in microseconds; null as above.
    pub srtt_us_min: Option<u64>,
    /// The mean of the streams' smoothed RTTs, each stream counted once (not weighted by
    /// the bytes it carried), rounded to the microsecond; null as above.
    pub srtt_us_mean: Option<u64>,
    /// The largest smoothed RTT of the streams, in microseconds; null as above.
    pub srtt_us_max: Option<u64>,
    /// Per stream, in the order the senders ended: its socket's figures, null where it
    /// could not be read (a peer that does not report them).
    pub streams: Vec<Option<TcpInfo>>,
}

impl TcpFigures {
    /// The figures of a run whose senders reported `streams` (one per stream); `None`
    /// when no stream has any (not TCP): unknown, never zero.
    pub fn of(streams: Vec<Option<TcpInfo>>) -> Option<TcpFigures> {
        if streams.iter().all(Option::is_none) {
            return None;
        }
        let Some(all) = streams.iter().copied().collect::<Option<Vec<TcpInfo>>>() else {
            return Some(TcpFigures {
                streams,
                ..TcpFigures::default()
            });
        };
        let srtt = all.iter().map(|t| t.srtt_us);
        let n = all.len() as u64;
        let sum: u64 = srtt.clone().sum();
        Some(TcpFigures {
            retransmits: Some(all.iter().map(|t| t.retransmits).sum()),
            snd_cwnd_bytes_max: all.iter().map(|t| t.snd_cwnd_bytes).max(),
            srtt_us_min: srtt.clone().min(),
            srtt_us_mean: Some((sum + n / 2) / n),
            srtt_us_max: srtt.max(),
            streams,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(retransmits: u32, cwnd: u32, srtt: u32) -> TcpInfo {
        TcpInfo::new(retransmits, cwnd, 1000, srtt, srtt / 2, 1500)
    }

    #[test]
    fn the_window_in_bytes_is_segments_times_the_mss() {
        let t = TcpInfo::new(3, 10, 1448, 120, 30, 1500);
        assert_eq!(t.snd_cwnd_bytes, 14_480);
        // Both at their 32-bit limits: no overflow.
        let big = TcpInfo::new(0, u32::MAX, u32::MAX, 0, 0, 0);
        assert_eq!(
            big.snd_cwnd_bytes,
            u64::from(u32::MAX) * u64::from(u32::MAX)
        );
    }

    #[test]
    fn streams_add_their_retransmits_and_spread_their_rtts() {
        let f = TcpFigures::of(vec![
            Some(info(4, 10, 100)),
            Some(info(0, 30, 301)),
            Some(info(7, 20, 200)),
        ])
        .unwrap();
        assert_eq!(f.retransmits, Some(11));
        assert_eq!(f.snd_cwnd_bytes_max, Some(30_000));
        assert_eq!(
            (f.srtt_us_min, f.srtt_us_mean, f.srtt_us_max),
            (Some(100), Some(200), Some(301))
        );
        assert_eq!(f.streams.len(), 3);
        // The mean rounds to the nearest microsecond: (100 + 101) / 2 = 100.5.
        let f = TcpFigures::of(vec![Some(info(0, 1, 100)), Some(info(0, 1, 101))]).unwrap();
        assert_eq!(f.srtt_us_mean, Some(101));
        // One stream: every aggregate is its own figure.
        let one = TcpFigures::of(vec![Some(info(2, 5, 42))]).unwrap();
        assert_eq!(
            (one.retransmits, one.snd_cwnd_bytes_max, one.srtt_us_mean),
            (Some(2), Some(5000), Some(42))
        );
    }

    #[test]
    fn nothing_read_is_unknown_and_a_stream_missing_makes_the_totals_unknown() {
        assert_eq!(TcpFigures::of(vec![]), None);
        assert_eq!(TcpFigures::of(vec![None, None]), None);
        let part = TcpFigures::of(vec![Some(info(5, 10, 100)), None]).unwrap();
        assert_eq!(part.retransmits, None, "never a total of some streams only");
        assert_eq!(part.snd_cwnd_bytes_max, None);
        assert_eq!(part.srtt_us_mean, None);
        assert_eq!(part.streams, vec![Some(info(5, 10, 100)), None]);
    }

    #[test]
    fn the_reading_waits_until_the_receiver_has_taken_everything() {
        use std::io::{Read, Write};
        use std::os::fd::AsRawFd;
        // A receive buffer too small for what is sent, and a receiver that starts
        // reading only after 150 ms: until then the rest waits unsent in the sender's
        // buffer (128 KiB fit in the send buffer even at the default net.core.wmem_max),
        // so the sender's socket cannot settle before the receiver has read.
        let l = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        l.set_recv_buffer_size(4096).unwrap();
        l.bind(&std::net::SocketAddr::from(([127, 0, 0, 1], 0)).into())
            .unwrap();
        l.listen(1).unwrap();
        let addr = l.local_addr().unwrap().as_socket().unwrap();
        let c = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        c.set_send_buffer_size(4 << 20).unwrap();
        c.connect(&addr.into()).unwrap();
        let (s, _) = l.accept().unwrap();
        const DELAY: Duration = Duration::from_millis(150);
        let reader = std::thread::spawn(move || {
            std::thread::sleep(DELAY);
            let mut got = Vec::new();
            std::net::TcpStream::from(s).read_to_end(&mut got).unwrap();
            got.len()
        });
        let begun = Instant::now();
        let mut c = std::net::TcpStream::from(c);
        c.write_all(&[3u8; 128 << 10]).unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        assert!(
            begun.elapsed() < DELAY,
            "the send buffer took it all at once"
        );
        let info = at_end(Some(c.as_raw_fd())).unwrap();
        let waited = begun.elapsed();
        assert!(
            waited >= DELAY && waited < SETTLE_WAIT,
            "read after {waited:?}: {info:?}"
        );
        assert!(sys::read(c.as_raw_fd()).unwrap().settled());
        assert_eq!(reader.join().unwrap(), 128 << 10);
    }

    #[test]
    fn a_socket_that_is_not_tcp_has_no_figures_and_a_tcp_one_settles_at_once() {
        use std::io::{Read, Write};
        use std::os::fd::AsRawFd;
        assert_eq!(at_end(None), None);
        let (u, _peer) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(at_end(Some(u.as_raw_fd())), None);
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        c.write_all(&[1u8; 100_000]).unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap();
        assert_eq!(got.len(), 100_000);
        // Everything was read and the FIN came, so the wait ends long before its limit.
        let t = Instant::now();
        let info = at_end(Some(c.as_raw_fd())).unwrap();
        assert!(t.elapsed() < SETTLE_WAIT / 2, "{:?}", t.elapsed());
        assert_eq!(info.retransmits, 0);
        // Loopback's round trip is microseconds (under 1 us it reads 0).
        assert!(
            info.srtt_us < 1_000_000 && info.snd_cwnd_segments > 0,
            "{info:?}"
        );
        assert_eq!(
            info.snd_cwnd_bytes,
            info.snd_cwnd_segments * info.snd_mss_bytes
        );
        assert!((1280..=65536).contains(&info.pmtu_bytes), "{info:?}");
    }
}
