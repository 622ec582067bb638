//! What one generator thread counted: requests by outcome, bytes, connections, the four
//! time distributions of ab's "Connection Times" table and the latency histograms. One
//! `Tally` per thread, written without locks and merged at the end.

use std::time::Instant;

use hdrhistogram::Histogram;

use crate::measure::cpu::ThreadCpu;

/// Highest value the histograms hold (an hour, in nanoseconds); longer ones saturate.
const MAX_NS: u64 = 3_600_000_000_000;

/// Why a request failed before it was fully answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// connect() was refused (nothing listens).
    ConnectRefused,
    /// connect() did not complete within --timeout.
    ConnectTimeout,
    /// connect() failed otherwise (unreachable, a Unix listener's full queue, ...).
    ConnectError,
    /// The connection was reset, or a write to it failed.
    ReadReset,
    /// The server closed the connection before the response was complete.
    ReadEof,
    /// No complete response within --timeout.
    ReadTimeout,
    /// Reading failed otherwise.
    ReadError,
    /// The response's status line or headers are not HTTP.
    Status,
}

/// One request's times, from its start to its answer's last byte.
#[derive(Clone, Copy, Debug)]
pub struct Times {
    /// connect() start → connected; 0 on a reused connection.
    pub connect_ns: u64,
    /// The start of `total`: connect start (a new connection), write start (a reused
    /// one) or, under --rate, when the request was due.
    pub start: Instant,
    /// The uncorrected start, under --rate: as `start` would be without it.
    pub sent: Instant,
    /// Connected (a new connection) or write start (a reused one): `processing` starts.
    pub processing_start: Instant,
    /// The request fully written: `waiting` starts.
    pub written: Instant,
}

/// Counts and distributions of one thread.
#[derive(Clone, Debug)]
pub struct Tally {
    /// Responses complete (non-2xx and length failures included, as ab counts them).
    pub complete: u64,
    /// Failed requests by cause.
    pub connect_refused: u64,
    /// See [`Cause::ConnectTimeout`].
    pub connect_timeout: u64,
    /// See [`Cause::ConnectError`].
    pub connect_error: u64,
    /// See [`Cause::ReadReset`].
    pub read_reset: u64,
    /// See [`Cause::ReadEof`].
    pub read_eof: u64,
    /// See [`Cause::ReadTimeout`].
    pub read_timeout: u64,
    /// See [`Cause::ReadError`].
    pub read_error: u64,
    /// See [`Cause::Status`].
    pub status_failed: u64,
    /// Complete responses whose body length differs from the first response's.
    pub length_failed: u64,
    /// Complete responses with a status outside 200..=299.
    pub non_2xx: u64,
    /// Complete responses by status code (index: the code; 0..=999).
    pub by_status: Vec<u64>,
    /// Every byte read.
    pub bytes_received: u64,
    /// Body bytes of complete responses.
    pub body_bytes: u64,
    /// Bytes written.
    pub bytes_sent: u64,
    /// Connections that connected.
    pub connections_opened: u64,
    /// Keep-alive connections the server closed (announced or not) that were reopened.
    pub reconnects: u64,
    /// Pipelined requests the server would not answer (it closed after an earlier
    /// response) that went again on a new connection.
    pub resent: u64,
    /// Bytes a server sent that answer no request (after a complete response, with none
    /// in flight); the connection is closed and reopened.
    pub stray_bytes: u64,
    /// Connections closed for such bytes.
    pub stray_closes: u64,
    /// ab's rows.
    pub connect: Histogram<u64>,
    /// Connected (or write start) → last byte.
    pub processing: Histogram<u64>,
    /// Written → first byte.
    pub waiting: Histogram<u64>,
    /// Start → last byte (corrected under --rate).
    pub total: Histogram<u64>,
    /// Under --rate: from the actual send → last byte.
    pub uncorrected: Option<Histogram<u64>>,
    /// The first connect's start.
    pub first_start: Option<Instant>,
    /// The last complete response's last byte.
    pub last_done: Option<Instant>,
    /// CPU time of the thread over its run.
    pub cpu: ThreadCpu,
    /// The thread stopped because no connection could be made.
    pub nothing_answered: bool,
}

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_NS, 3).expect("valid histogram bounds")
}

fn ns(a: Instant, b: Instant) -> u64 {
    u64::try_from(b.saturating_duration_since(a).as_nanos()).unwrap_or(u64::MAX)
}

impl Tally {
    /// Zero counts; `rate` adds the uncorrected histogram.
    pub fn new(rate: bool) -> Tally {
        Tally {
            complete: 0,
            connect_refused: 0,
            connect_timeout: 0,
            connect_error: 0,
            read_reset: 0,
            read_eof: 0,
            read_timeout: 0,
            read_error: 0,
            status_failed: 0,
            length_failed: 0,
            non_2xx: 0,
            by_status: vec![0; 1000],
            bytes_received: 0,
            body_bytes: 0,
            bytes_sent: 0,
            connections_opened: 0,
            reconnects: 0,
            resent: 0,
            stray_bytes: 0,
            stray_closes: 0,
            connect: hist(),
            processing: hist(),
            waiting: hist(),
            total: hist(),
            uncorrected: rate.then(hist),
            first_start: None,
            last_done: None,
            cpu: ThreadCpu::default(),
            nothing_answered: false,
        }
    }

    /// `n` requests failed for `cause`.
    pub fn fail(&mut self, cause: Cause, n: u64) {
        let c = match cause {
            Cause::ConnectRefused => &mut self.connect_refused,
            Cause::ConnectTimeout => &mut self.connect_timeout,
            Cause::ConnectError => &mut self.connect_error,
            Cause::ReadReset => &mut self.read_reset,
            Cause::ReadEof => &mut self.read_eof,
            Cause::ReadTimeout => &mut self.read_timeout,
            Cause::ReadError => &mut self.read_error,
            Cause::Status => &mut self.status_failed,
        };
        *c += n;
    }

    /// A complete response: its times (`first_byte` and `done` as read), its status and
    /// whether its length differs from the first response's.
    pub fn complete(
        &mut self,
        t: &Times,
        first_byte: Instant,
        done: Instant,
        status: u16,
        body_bytes: u64,
        length_differs: bool,
    ) {
        self.complete += 1;
        self.body_bytes += body_bytes;
        if !(200..300).contains(&status) {
            self.non_2xx += 1;
        }
        if let Some(c) = self.by_status.get_mut(usize::from(status)) {
            *c += 1;
        }
        if length_differs {
            self.length_failed += 1;
        }
        self.connect.saturating_record(t.connect_ns);
        self.processing
            .saturating_record(ns(t.processing_start, done));
        self.waiting.saturating_record(ns(t.written, first_byte));
        self.total.saturating_record(ns(t.start, done));
        if let Some(u) = &mut self.uncorrected {
            u.saturating_record(ns(t.sent, done));
        }
        self.last_done = Some(done);
    }

    /// Failures of the connect kind.
    pub fn connect_failures(&self) -> u64 {
        self.connect_refused + self.connect_timeout + self.connect_error
    }

    /// Failures of the read kind.
    pub fn read_failures(&self) -> u64 {
        self.read_reset + self.read_eof + self.read_timeout + self.read_error
    }

    /// Add another thread's tally.
    pub fn merge(&mut self, o: &Tally) {
        self.complete += o.complete;
        self.connect_refused += o.connect_refused;
        self.connect_timeout += o.connect_timeout;
        self.connect_error += o.connect_error;
        self.read_reset += o.read_reset;
        self.read_eof += o.read_eof;
        self.read_timeout += o.read_timeout;
        self.read_error += o.read_error;
        self.status_failed += o.status_failed;
        self.length_failed += o.length_failed;
        self.non_2xx += o.non_2xx;
        for (a, b) in self.by_status.iter_mut().zip(&o.by_status) {
            *a += b;
        }
        self.bytes_received += o.bytes_received;
        self.body_bytes += o.body_bytes;
        self.bytes_sent += o.bytes_sent;
        self.connections_opened += o.connections_opened;
        self.reconnects += o.reconnects;
        self.resent += o.resent;
        self.stray_bytes += o.stray_bytes;
        self.stray_closes += o.stray_closes;
        crate::measure::histogram::merge(&mut self.connect, &o.connect);
        crate::measure::histogram::merge(&mut self.processing, &o.processing);
        crate::measure::histogram::merge(&mut self.waiting, &o.waiting);
        crate::measure::histogram::merge(&mut self.total, &o.total);
        if let (Some(a), Some(b)) = (&mut self.uncorrected, &o.uncorrected) {
            crate::measure::histogram::merge(a, b);
        }
        self.first_start = match (self.first_start, o.first_start) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_done = self.last_done.max(o.last_done);
        self.cpu = self.cpu.plus(&o.cpu);
        self.nothing_answered |= o.nothing_answered;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_reused_connection_records_a_zero_connect_time() {
        let mut t = Tally::new(true);
        let s = Instant::now();
        let times = Times {
            connect_ns: 0,
            start: s,
            sent: s + Duration::from_millis(5),
            processing_start: s,
            written: s + Duration::from_micros(10),
        };
        t.complete(
            &times,
            s + Duration::from_millis(6),
            s + Duration::from_millis(7),
            503,
            13,
            true,
        );
        assert_eq!(
            (t.complete, t.non_2xx, t.length_failed, t.by_status[503]),
            (1, 1, 1, 1)
        );
        assert_eq!(t.connect.max(), 0);
        assert!(t.total.max() >= 6_990_000);
        assert!(t.uncorrected.as_ref().unwrap().max() <= 2_010_000);
        let mut all = Tally::new(true);
        all.merge(&t);
        all.merge(&t);
        assert_eq!((all.complete, all.total.len()), (2, 2));
        assert_eq!(all.uncorrected.unwrap().len(), 2);
    }
}
