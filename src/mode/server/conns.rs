//! Every control connection of a server, to bound them in total and per address, and to
//! hang up on them (at Ctrl-C, or to make room). The limits hold before authentication:
//! a connection counts from its accept.
//!
//! - At most [`MAX_PENDING`] connections in their handshake, [`MAX_PENDING_PER_ADDR`] of
//!   them from one address. A full table makes room by hanging up on the oldest handshake
//!   of all (a client that speaks finishes its handshake in milliseconds; only a silent
//!   one grows old), so connections held open by an attacker are pushed out by every
//!   newcomer, and a real client still gets in.
//! - At most [`MAX_CONNS`] conversations in all, [`MAX_CONNS_PER_ADDR`] from one address
//!   (each has a thread). A full table makes room by hanging up on the conversation idle
//!   the longest between tests, if any has been idle [`IDLE_GRACE`]; else the newcomer is
//!   told the server is full.
//!
//! An address over its own limits is told so (a refusal frame, which a sockbench client
//! prints) and closed.

use std::net::{IpAddr, TcpStream};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Most connections in their handshake at once.
pub const MAX_PENDING: usize = 64;
/// Most connections in their handshake from one address.
pub const MAX_PENDING_PER_ADDR: usize = 8;
/// Most conversations (a thread each) at once.
pub const MAX_CONNS: usize = 256;
/// Most conversations from one address.
pub const MAX_CONNS_PER_ADDR: usize = 32;
/// How long a conversation must have been idle between tests before a newcomer may
/// take its place.
pub const IDLE_GRACE: Duration = Duration::from_secs(1);

/// Where a conversation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Stage {
    /// Accepted, handshake not done.
    Pending = 0,
    /// Handshake done, between tests.
    Idle = 1,
    /// Running a test.
    Busy = 2,
    /// Hung up on to make room; its thread is ending.
    Evicted = 3,
}

/// One conversation's stage, which its thread moves on.
#[derive(Clone, Debug)]
pub struct Ticket {
    /// Its number in the table.
    pub id: u64,
    stage: Arc<AtomicU8>,
    since: Arc<Mutex<Instant>>,
}

impl Ticket {
    /// Move to `stage` (an evicted conversation stays evicted). The time in a stage
    /// counts from entering it: frames that change nothing (a signal between tests) do
    /// not make an idle conversation young again.
    pub fn set(&self, stage: Stage) {
        let moved = self
            .stage
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                (s != Stage::Evicted as u8 && s != stage as u8).then_some(stage as u8)
            });
        if moved.is_ok() {
            *self.since.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        }
    }

    fn stage(&self) -> Stage {
        match self.stage.load(Ordering::Acquire) {
            0 => Stage::Pending,
            1 => Stage::Idle,
            2 => Stage::Busy,
            _ => Stage::Evicted,
        }
    }

    fn since(&self) -> Instant {
        *self.since.lock().unwrap_or_else(|e| e.into_inner())
    }
}

struct Entry {
    from: IpAddr,
    ticket: Ticket,
    stream: TcpStream,
}

/// The table.
#[derive(Default)]
pub struct Conns {
    list: Mutex<Vec<Entry>>,
    next: std::sync::atomic::AtomicU64,
}

/// What [`Conns::admit`] decided.
#[derive(Debug)]
pub enum Admission {
    /// In, with its ticket; `evicted` says whom it displaced, for the log.
    In {
        /// The newcomer's ticket.
        ticket: Ticket,
        /// A connection hung up on to make room (its address and stage).
        evicted: Option<(IpAddr, Stage)>,
    },
    /// Refused: the reason, for the newcomer.
    Out(String),
    /// No descriptor to keep a handle on it (the process is at its limit).
    Exhausted(std::io::Error),
}

impl Conns {
    /// Take `stream` from `from` in, within the limits (making room as the module doc
    /// says), or say why not.
    pub fn admit(&self, from: IpAddr, stream: &TcpStream) -> Admission {
        let mut list = self.list.lock().unwrap_or_else(|e| e.into_inner());
        let live = |e: &&Entry| e.ticket.stage() != Stage::Evicted;
        let pending = |e: &&Entry| e.ticket.stage() == Stage::Pending;
        let mine: Vec<&Entry> = list
            .iter()
            .filter(live)
            .filter(|e| e.from == from)
            .collect();
        if mine.iter().filter(|e| pending(e)).count() >= MAX_PENDING_PER_ADDR {
            return Admission::Out(format!(
                "{from} has {MAX_PENDING_PER_ADDR} connections in their handshake already: finish or close them first"
            ));
        }
        if mine.len() >= MAX_CONNS_PER_ADDR {
            return Admission::Out(format!(
                "{from} has {MAX_CONNS_PER_ADDR} connections open already: close some first"
            ));
        }
        let mut evicted = None;
        if list.iter().filter(live).filter(pending).count() >= MAX_PENDING {
            let oldest = list
                .iter()
                .filter(live)
                .filter(pending)
                .min_by_key(|e| e.ticket.since());
            if let Some(e) = oldest {
                evicted = Some(evict(e));
            }
        }
        if list.iter().filter(live).count() >= MAX_CONNS {
            let idle = list
                .iter()
                .filter(live)
                .filter(|e| {
                    e.ticket.stage() == Stage::Idle && e.ticket.since().elapsed() >= IDLE_GRACE
                })
                .min_by_key(|e| e.ticket.since());
            match idle {
                Some(e) => evicted = Some(evict(e)),
                None => {
                    return Admission::Out(format!(
                        "the server has {MAX_CONNS} conversations open, none of them idle: try again shortly"
                    ))
                }
            }
        }
        let clone = match stream.try_clone() {
            Ok(c) => c,
            Err(e) => return Admission::Exhausted(e),
        };
        let ticket = Ticket {
            id: self.next.fetch_add(1, Ordering::Relaxed),
            stage: Arc::new(AtomicU8::new(Stage::Pending as u8)),
            since: Arc::new(Mutex::new(Instant::now())),
        };
        list.push(Entry {
            from,
            ticket: ticket.clone(),
            stream: clone,
        });
        Admission::In { ticket, evicted }
    }

    /// The conversation `id` has ended.
    pub fn remove(&self, id: u64) {
        self.list
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|e| e.ticket.id != id);
    }

    /// Hang up on every conversation (their tests end at once).
    pub fn hang_up_all(&self) {
        for e in self.list.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let _ = e.stream.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Conversations in the table, by stage (pending, idle, busy), evicted ones left out.
    #[cfg(test)]
    pub fn counts(&self) -> (usize, usize, usize) {
        let list = self.list.lock().unwrap_or_else(|e| e.into_inner());
        let n = |s: Stage| list.iter().filter(|e| e.ticket.stage() == s).count();
        (n(Stage::Pending), n(Stage::Idle), n(Stage::Busy))
    }
}

fn evict(e: &Entry) -> (IpAddr, Stage) {
    let was = e.ticket.stage();
    e.ticket
        .stage
        .store(Stage::Evicted as u8, Ordering::Release);
    let _ = e.stream.shutdown(std::net::Shutdown::Both);
    (e.from, was)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// `n` connected server-side streams (and their clients, kept open).
    fn streams(n: usize) -> (Vec<TcpStream>, Vec<TcpStream>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        let mut clients = Vec::new();
        let mut servers = Vec::new();
        for _ in 0..n {
            clients.push(TcpStream::connect(a).unwrap());
            servers.push(l.accept().unwrap().0);
        }
        (servers, clients)
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn admitted(a: Admission) -> (Ticket, Option<(IpAddr, Stage)>) {
        match a {
            Admission::In { ticket, evicted } => (ticket, evicted),
            Admission::Out(why) => panic!("refused: {why}"),
            Admission::Exhausted(e) => panic!("{e}"),
        }
    }

    #[test]
    fn one_address_gets_its_share_of_handshakes_and_no_more() {
        let conns = Conns::default();
        let (s, _c) = streams(MAX_PENDING_PER_ADDR + 1);
        for st in &s[..MAX_PENDING_PER_ADDR] {
            admitted(conns.admit(ip("192.0.2.9"), st));
        }
        match conns.admit(ip("192.0.2.9"), &s[MAX_PENDING_PER_ADDR]) {
            Admission::Out(why) => assert!(why.contains("in their handshake already"), "{why}"),
            other => panic!("admitted over its share: {other:?}"),
        }
        // Another address still gets in.
        admitted(conns.admit(ip("192.0.2.10"), &s[MAX_PENDING_PER_ADDR]));
        assert_eq!(conns.counts(), (MAX_PENDING_PER_ADDR + 1, 0, 0));
    }

    #[test]
    fn a_full_handshake_table_makes_room_by_hanging_up_on_the_oldest() {
        let conns = Conns::default();
        let (s, mut c) = streams(MAX_PENDING + 1);
        // Silent connections from many addresses fill the table.
        let mut first = None;
        for (i, st) in s[..MAX_PENDING].iter().enumerate() {
            let (t, ev) = admitted(conns.admit(ip(&format!("10.0.{}.{}", i / 8, i % 8 + 1)), st));
            assert!(ev.is_none());
            first.get_or_insert(t);
            std::thread::sleep(Duration::from_millis(1));
        }
        // A newcomer gets in; the oldest is hung up on (its client sees the end).
        let (_, ev) = admitted(conns.admit(ip("203.0.113.5"), &s[MAX_PENDING]));
        assert_eq!(ev, Some((ip("10.0.0.1"), Stage::Pending)));
        c[0].set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut b = [0u8; 1];
        assert_eq!(std::io::Read::read(&mut c[0], &mut b).unwrap(), 0);
        assert_eq!(conns.counts(), (MAX_PENDING, 0, 0));
        // Its thread then leaves the table; a finished handshake no longer counts.
        conns.remove(first.unwrap().id);
        assert_eq!(conns.counts(), (MAX_PENDING, 0, 0));
    }

    #[test]
    fn a_full_table_makes_room_from_the_longest_idle_and_never_from_a_test() {
        let conns = Conns::default();
        let (s, _c) = streams(MAX_CONNS + 2);
        let mut tickets = Vec::new();
        for (i, st) in s[..MAX_CONNS].iter().enumerate() {
            let (t, _) = admitted(conns.admit(ip(&format!("10.1.{}.{}", i / 30, i % 30 + 1)), st));
            t.set(Stage::Busy);
            tickets.push(t);
        }
        // Every one running a test: nobody is pushed out.
        match conns.admit(ip("203.0.113.5"), &s[MAX_CONNS]) {
            Admission::Out(why) => assert!(why.contains("none of them idle"), "{why}"),
            other => panic!("admitted over the limit: {other:?}"),
        }
        // One idle, but only just: still not pushed out.
        tickets[7].set(Stage::Idle);
        assert!(matches!(
            conns.admit(ip("203.0.113.5"), &s[MAX_CONNS]),
            Admission::Out(_)
        ));
        // Idle past the grace: it makes room.
        *tickets[7].since.lock().unwrap() = Instant::now() - IDLE_GRACE;
        let (_, ev) = admitted(conns.admit(ip("203.0.113.5"), &s[MAX_CONNS]));
        assert_eq!(ev, Some((ip("10.1.0.8"), Stage::Idle)));
        // An evicted conversation stays evicted whatever its thread says next.
        tickets[7].set(Stage::Busy);
        assert_eq!(tickets[7].stage(), Stage::Evicted);
        assert_eq!(conns.counts(), (1, 0, MAX_CONNS - 1));
    }

    #[test]
    fn one_address_holds_at_most_its_share_of_conversations() {
        let conns = Conns::default();
        let (s, _c) = streams(MAX_CONNS_PER_ADDR + 1);
        for st in &s[..MAX_CONNS_PER_ADDR] {
            let (t, _) = admitted(conns.admit(ip("192.0.2.9"), st));
            t.set(Stage::Idle);
        }
        match conns.admit(ip("192.0.2.9"), &s[MAX_CONNS_PER_ADDR]) {
            Admission::Out(why) => assert!(why.contains("connections open already"), "{why}"),
            other => panic!("admitted over its share: {other:?}"),
        }
    }
}
