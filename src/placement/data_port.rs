//! A server's `--data-port`: every run's TCP connections and UDP datagrams on one fixed
//! port, so that one firewall or NetworkPolicy rule covers the server's data.
//!
//! TCP: the server keeps one listener on the port for its whole life. A dedicated thread
//! accepts, and a short-lived thread per connection reads the run's token, which every
//! TCP data connection sends first (see [`super::split::carries_token`]), and hands the
//! connection to the run registered under that token. A connection with an unknown token,
//! or that sends nothing within the step deadline, is dropped; it never holds up a run.
//!
//! UDP needs no thread: each run binds its own sockets to the port with `SO_REUSEPORT`
//! and connects them to the client's endpoints (`transport::listen_shared`), and Linux
//! hands each datagram to the socket connected to its sender.
//!
//! This module does not decide which runs use the port, nor set a connection up for its
//! run (buffers, `TCP_NODELAY`): `split::server_run` does.

use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use socket2::Socket;

use super::split::TOKEN_BYTES;
use crate::control::STEP_DEADLINE;
use crate::transport::canonical_ip;

/// Most connections that may be reading their token at once (each has a thread for at
/// most the step deadline); more are dropped as they come.
const MAX_PENDING: usize = 64;

/// A connection that came with a run's token, and where it came from.
pub type Arrival = (Socket, SocketAddr);

/// The runs waiting for connections, by token.
#[derive(Default)]
struct Registry {
    runs: Mutex<Vec<Entry>>,
    next: AtomicU64,
    /// Connections still reading their token.
    pending: AtomicUsize,
}

struct Entry {
    id: u64,
    token: Vec<u8>,
    tx: Sender<Arrival>,
    /// The address its data connections must come from (its control peer's), if known.
    peer: Option<IpAddr>,
}

impl Registry {
    /// Hand `conn` to the run whose token is `token`; false if none is (the connection
    /// is then dropped by the caller).
    fn route(&self, token: &[u8], conn: Arrival) -> bool {
        let runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        // Compared in constant time, one by one: a token is a secret of its run.
        match runs
            .iter()
            .find(|e| crate::vocab::same_token(&e.token, token))
        {
            Some(e) => e.tx.send(conn).is_ok(),
            None => false,
        }
    }

    /// Whether some run waits for connections from `ip`: a connection from anywhere else
    /// is dropped at once, before it may hold one of the token readers.
    fn expects_from(&self, ip: IpAddr) -> bool {
        let ip = canonical_ip(ip);
        self.runs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|e| {
                // A run of the other family over a loopback control connection comes
                // from the other family's loopback (see `split::bind_for`).
                e.peer.map_or(true, |p| {
                    let p = canonical_ip(p);
                    p == ip || (p.is_loopback() && ip.is_loopback())
                })
            })
    }

    fn remove(&self, id: u64) {
        self.runs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|e| e.id != id);
    }
}

/// The server's data port: its TCP listener and the runs that wait on it.
pub struct DataPort {
    port: u16,
    /// The address the TCP listener is bound to.
    ip: IpAddr,
    registry: Arc<Registry>,
}

impl DataPort {
    /// Listen for TCP on `port` at `listen` (default: every address, IPv6 and IPv4, as
    /// the control listener), and start the thread that accepts.
    ///
    /// # Errors
    /// The port is in use or not allowed; a thread cannot be started.
    pub fn open(listen: Option<IpAddr>, port: u16) -> anyhow::Result<DataPort> {
        let ip = listen.unwrap_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED));
        let sock = match crate::transport::listen_shared_tcp(SocketAddr::new(ip, port)) {
            Ok(s) => s,
            // No IPv6 on this host: every IPv4 address instead.
            Err(_) if listen.is_none() => crate::transport::listen_shared_tcp(SocketAddr::new(
                Ipv4Addr::UNSPECIFIED.into(),
                port,
            ))?,
            Err(e) => return Err(e),
        };
        let local = sock
            .local_addr()?
            .as_socket()
            .context("the data listener has no address")?;
        let registry = Arc::new(Registry::default());
        let shared = Arc::clone(&registry);
        std::thread::Builder::new()
            .name("sb-data-accept".into())
            .spawn(move || accept_loop(&sock, &shared))
            .context("cannot start the data port's thread")?;
        Ok(DataPort {
            port: local.port(),
            ip: local.ip(),
            registry,
        })
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Where a client dials a run's TCP data connections, given the address the run's
    /// listeners would bind (`bind_for`): that address at the data port.
    ///
    /// # Errors
    /// The data listener does not take connections at that address (the server listens
    /// on one address of the other family).
    pub fn tcp_endpoint(&self, bind: IpAddr) -> anyhow::Result<SocketAddr> {
        if covers(self.ip, bind) {
            Ok(SocketAddr::new(bind, self.port))
        } else {
            bail!(
                "the data port listens on {} only, so it cannot take a connection to {bind}: start the server without --listen, or reach it over IPv{}",
                self.ip,
                if self.ip.is_ipv6() { 6 } else { 4 }
            )
        }
    }

    /// Register a run's token: the TCP connections from `peer` (its control connection's
    /// address; `None`: from anywhere) that send it come to the returned [`Expected`]
    /// until it is dropped.
    pub fn expect(&self, token: &[u8], connections: usize, peer: Option<IpAddr>) -> Expected {
        let id = self.registry.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        self.registry
            .runs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Entry {
                id,
                token: token.to_vec(),
                tx,
                peer,
            });
        Expected {
            id,
            port: self.port,
            registry: Arc::clone(&self.registry),
            rx,
            waiting: Vec::new(),
            total: connections,
            taken: 0,
        }
    }
}

/// Whether a listener bound to `listening` takes connections to `to`.
fn covers(listening: IpAddr, to: IpAddr) -> bool {
    match listening {
        // Dual-stack (see `transport::listen_shared_tcp`).
        IpAddr::V6(v6) if v6.is_unspecified() => true,
        IpAddr::V4(v4) if v4.is_unspecified() => canonical_ip(to).is_ipv4(),
        ip => canonical_ip(ip) == canonical_ip(to),
    }
}

/// Accept for the server's whole life; each connection reads its token on a thread of
/// its own.
fn accept_loop(listener: &Socket, registry: &Arc<Registry>) {
    loop {
        let (sock, from) = match listener.accept() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => {
                // EMFILE and friends: the runs already connected go on.
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        let Some(from) = from.as_socket() else {
            continue;
        };
        if !registry.expects_from(from.ip()) {
            continue; // dropped: no run waits for this address
        }
        if registry.pending.load(Ordering::Relaxed) >= MAX_PENDING {
            continue; // dropped
        }
        registry.pending.fetch_add(1, Ordering::Relaxed);
        let shared = Arc::clone(registry);
        let spawned = std::thread::Builder::new()
            .name("sb-data-token".into())
            .spawn(move || {
                if let Some(token) = read_token(&sock, STEP_DEADLINE) {
                    shared.route(&token, (sock, from));
                }
                shared.pending.fetch_sub(1, Ordering::Relaxed);
            });
        if spawned.is_err() {
            registry.pending.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// The token a fresh connection sends first, or None if it sends less within `wait`.
fn read_token(sock: &Socket, wait: Duration) -> Option<[u8; TOKEN_BYTES]> {
    let mut token = [0u8; TOKEN_BYTES];
    sock.set_read_timeout(Some(wait)).ok()?;
    let mut reader = sock;
    let deadline = Instant::now() + wait;
    let mut off = 0;
    while off < TOKEN_BYTES {
        // Each read waits at most `wait`; a peer trickling bytes is bounded in total.
        if Instant::now() > deadline {
            return None;
        }
        match reader.read(&mut token[off..]) {
            Ok(0) => return None,
            Ok(n) => off += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    sock.set_read_timeout(None).ok()?;
    Some(token)
}

/// One run's registration: the connections that came with its token. Dropping it ends
/// the registration (a connection with its token that comes later is dropped).
pub struct Expected {
    id: u64,
    port: u16,
    registry: Arc<Registry>,
    rx: Receiver<Arrival>,
    /// Arrived, not yet taken by a channel.
    waiting: Vec<Arrival>,
    /// Connections the run expects.
    total: usize,
    taken: usize,
}

impl Expected {
    /// The connection that came from `from` (the client's own endpoint for the channel,
    /// from its Wired message), waiting until `until`. When every expected connection has
    /// come and none is from `from` (an address translated on the way), or `from` is
    /// unknown, the first to come.
    ///
    /// # Errors
    /// Not enough connections with the run's token came in time.
    pub fn take(&mut self, from: Option<SocketAddr>, until: Instant) -> anyhow::Result<Arrival> {
        loop {
            let same = |p: &SocketAddr| {
                from.is_some_and(|f| {
                    f.port() == p.port() && canonical_ip(f.ip()) == canonical_ip(p.ip())
                })
            };
            if let Some(i) = self.waiting.iter().position(|(_, p)| same(p)) {
                self.taken += 1;
                return Ok(self.waiting.remove(i));
            }
            let all_came = self.waiting.len() + self.taken >= self.total;
            if (from.is_none() || all_came) && !self.waiting.is_empty() {
                self.taken += 1;
                return Ok(self.waiting.remove(0));
            }
            let wait = until.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(wait) {
                Ok(a) => self.waiting.push(a),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                    return Err(anyhow!(
                        "no data connection with this run's token came on data port {} within {} s ({} of {} came)",
                        self.port,
                        STEP_DEADLINE.as_secs(),
                        self.taken + self.waiting.len(),
                        self.total
                    ));
                }
            }
        }
    }
}

impl Drop for Expected {
    fn drop(&mut self) {
        self.registry.remove(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpStream;

    fn open() -> DataPort {
        DataPort::open(Some(IpAddr::V4(Ipv4Addr::LOCALHOST)), 0).unwrap()
    }

    fn dial(dp: &DataPort, token: &[u8]) -> TcpStream {
        let mut s = TcpStream::connect((Ipv4Addr::LOCALHOST, dp.port())).unwrap();
        s.write_all(token).unwrap();
        s
    }

    #[test]
    fn connections_reach_the_run_whose_token_they_send() {
        let dp = open();
        let (a, b) = ([1u8; TOKEN_BYTES], [2u8; TOKEN_BYTES]);
        let mut ea = dp.expect(&a, 2, None);
        let mut eb = dp.expect(&b, 1, None);
        let b0 = dial(&dp, &b);
        let a0 = dial(&dp, &a);
        let a1 = dial(&dp, &a);
        let until = Instant::now() + Duration::from_secs(5);
        let want = a1.local_addr().unwrap();
        let (_, from) = ea.take(Some(want), until).unwrap();
        assert_eq!(
            from, want,
            "the channel gets the connection from its own endpoint"
        );
        let (_, from) = ea.take(Some(a0.local_addr().unwrap()), until).unwrap();
        assert_eq!(from, a0.local_addr().unwrap());
        let (_, from) = eb.take(None, until).unwrap();
        assert_eq!(from, b0.local_addr().unwrap());
    }

    #[test]
    fn a_connection_from_an_address_no_run_waits_for_is_closed_at_once() {
        let dp = open();
        let token = [5u8; TOKEN_BYTES];
        // The run's client is elsewhere: a connection from here, even with the token,
        // is not its own, and is closed before it may hold a token reader.
        let mut e = dp.expect(&token, 1, Some("192.0.2.7".parse().unwrap()));
        let mut c = dial(&dp, &token);
        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let began = Instant::now();
        let mut buf = [0u8; 1];
        let closed = matches!(std::io::Read::read(&mut c, &mut buf), Ok(0) | Err(_));
        assert!(
            closed && began.elapsed() < Duration::from_secs(1),
            "{:?}",
            began.elapsed()
        );
        assert!(e
            .take(None, Instant::now() + Duration::from_millis(200))
            .is_err());
        assert_eq!(dp.registry.pending.load(Ordering::Relaxed), 0);
        // From the run's own address it is taken, and from the other family's loopback
        // when the run's client is on a loopback address.
        let mut e = dp.expect(&[8u8; TOKEN_BYTES], 1, Some("::1".parse().unwrap()));
        let _v4 = dial(&dp, &[8u8; TOKEN_BYTES]);
        assert!(e
            .take(None, Instant::now() + Duration::from_secs(5))
            .is_ok());
        let mut e = dp.expect(&[6u8; TOKEN_BYTES], 1, Some(Ipv4Addr::LOCALHOST.into()));
        let _ok = dial(&dp, &[6u8; TOKEN_BYTES]);
        assert!(e
            .take(None, Instant::now() + Duration::from_secs(5))
            .is_ok());
    }

    #[test]
    fn a_connection_with_another_token_or_none_is_dropped_and_the_run_waits_on() {
        let dp = open();
        let token = [7u8; TOKEN_BYTES];
        let mut e = dp.expect(&token, 1, None);
        let _silent = TcpStream::connect((Ipv4Addr::LOCALHOST, dp.port())).unwrap();
        let mut wrong = dial(&dp, &[9u8; TOKEN_BYTES]);
        let short = Instant::now() + Duration::from_millis(200);
        assert!(e.take(None, short).is_err(), "no run's connection came yet");
        let mut buf = [0u8; 1];
        wrong
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        match std::io::Read::read(&mut wrong, &mut buf) {
            Ok(0) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            other => panic!("a wrong token's connection is closed, not {other:?}"),
        }
        let right = dial(&dp, &token);
        let (_, from) = e
            .take(None, Instant::now() + Duration::from_secs(5))
            .unwrap();
        assert_eq!(from, right.local_addr().unwrap());
    }

    #[test]
    fn a_translated_address_falls_back_to_arrival_order_once_all_came() {
        let dp = open();
        let token = [3u8; TOKEN_BYTES];
        let mut e = dp.expect(&token, 1, None);
        let c = dial(&dp, &token);
        let elsewhere: SocketAddr = "192.0.2.1:1".parse().unwrap();
        let (_, from) = e
            .take(Some(elsewhere), Instant::now() + Duration::from_secs(5))
            .unwrap();
        assert_eq!(from, c.local_addr().unwrap());
    }

    #[test]
    fn a_runs_token_is_refused_once_its_registration_is_dropped() {
        let dp = open();
        let token = [4u8; TOKEN_BYTES];
        drop(dp.expect(&token, 1, None));
        assert!(dp.registry.runs.lock().unwrap().is_empty());
        let mut late = dial(&dp, &token);
        late.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut buf = [0u8; 1];
        match std::io::Read::read(&mut late, &mut buf) {
            Ok(0) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            other => panic!("a late connection is closed, not {other:?}"),
        }
    }

    #[test]
    fn a_wildcard_listener_covers_its_families() {
        let any6 = IpAddr::V6(Ipv6Addr::UNSPECIFIED);
        let any4 = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
        let lo4 = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let lo6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
        assert!(covers(any6, lo4) && covers(any6, lo6));
        assert!(covers(any4, lo4) && !covers(any4, lo6));
        assert!(covers(lo4, lo4) && !covers(lo4, lo6));
        assert!(covers(lo4, "::ffff:127.0.0.1".parse().unwrap()));
    }
}
