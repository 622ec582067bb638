//! What a stream's sides counted of their calls: the sender's `--send` method (calls, and
//! zero-copy completions), the receiver's `--recv` method, and the phases of a run.

use crate::vocab::{RecvMethod, SendMethod};

/// What a stream sender's `--send` method did, counted as it went.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
pub struct SendCounts {
    /// The method: write, sendfile, splice or zerocopy.
    pub method: SendMethod,
    /// System calls made to hand over payload, failed ones included: sendfile(2) calls
    /// (sendfile), vmsplice(2) and splice(2) calls (splice), send(2) calls with
    /// MSG_ZEROCOPY (zerocopy); null for write, whose calls are the engine's.
    pub calls: Option<u64>,
    /// zerocopy only: what the kernel reported of the sends (null for the other methods).
    pub zerocopy: Option<ZerocopyCounts>,
}

/// What the kernel reported of MSG_ZEROCOPY sends on the socket's error queue.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
pub struct ZerocopyCounts {
    /// Sends the kernel took with MSG_ZEROCOPY (each is numbered and gets a completion).
    pub sends: u64,
    /// Sends whose completion was read from the error queue (by the end of the wait of
    /// up to 1 s after the last send).
    pub completed: u64,
    /// Of the completed sends, those the kernel reported it copied after all
    /// (SO_EE_CODE_ZEROCOPY_COPIED): always all of them when the data is delivered to a
    /// socket on this host (loopback, a veth to another namespace), whose receive path
    /// copies it. The kernel reports a range of consecutive sends with one flag.
    pub copied: u64,
    /// Sends the kernel refused with ENOBUFS (its notifications filled the socket's
    /// option memory, net.core.optmem_max) and that were made again after reading them.
    pub enobufs: u64,
    /// recvmsg(MSG_ERRQUEUE) calls that read a notification.
    pub notifications: u64,
}

impl ZerocopyCounts {
    /// The sum of two counts.
    pub fn plus(self, o: ZerocopyCounts) -> ZerocopyCounts {
        ZerocopyCounts {
            sends: self.sends + o.sends,
            completed: self.completed + o.completed,
            copied: self.copied + o.copied,
            enobufs: self.enobufs + o.enobufs,
            notifications: self.notifications + o.notifications,
        }
    }
}

fn plus_opt<T>(a: Option<T>, b: Option<T>, f: fn(T, T) -> T) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(f(a, b)),
        (a, b) => a.or(b),
    }
}

impl SendCounts {
    /// The sum of two counts of the same method.
    pub fn plus(self, o: SendCounts) -> SendCounts {
        SendCounts {
            method: self.method,
            calls: plus_opt(self.calls, o.calls, |a, b| a + b),
            zerocopy: plus_opt(self.zerocopy, o.zerocopy, ZerocopyCounts::plus),
        }
    }

    /// The total over reports (`None` if none has counts).
    pub fn total<'a>(of: impl IntoIterator<Item = &'a Option<SendCounts>>) -> Option<SendCounts> {
        of.into_iter().flatten().copied().reduce(SendCounts::plus)
    }
}

/// What a stream receiver's `--recv` method did.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
pub struct RecvCounts {
    /// The method: read or zerocopy.
    pub method: RecvMethod,
    /// Bytes the kernel mapped into the receiver as whole pages (TCP_ZEROCOPY_RECEIVE),
    /// not copied; 0 for read.
    pub bytes_mapped: u64,
    /// Bytes copied into the receiver's buffer by recv(2)/read(2): all of them for read;
    /// for zerocopy, what could not be mapped (partial pages).
    pub bytes_copied: u64,
    /// zerocopy: getsockopt(TCP_ZEROCOPY_RECEIVE) calls; null for read.
    pub map_calls: Option<u64>,
}

impl RecvCounts {
    /// The sum of two counts of the same method.
    pub fn plus(self, o: RecvCounts) -> RecvCounts {
        RecvCounts {
            method: self.method,
            bytes_mapped: self.bytes_mapped + o.bytes_mapped,
            bytes_copied: self.bytes_copied + o.bytes_copied,
            map_calls: plus_opt(self.map_calls, o.map_calls, |a, b| a + b),
        }
    }

    /// The total over reports (`None` if none has counts).
    pub fn total<'a>(of: impl IntoIterator<Item = &'a Option<RecvCounts>>) -> Option<RecvCounts> {
        of.into_iter().flatten().copied().reduce(RecvCounts::plus)
    }
}

/// The phases of a stream run, as the classic client/server benchmark reports them.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Phases {
    /// Setting up the connection (bind, listen, connect, accept; or creating the pipe,
    /// FIFO, queue or ring), per stream.
    pub connect_seconds: f64,
    /// Moving the data: the receiver's measured interval.
    pub transfer_seconds: f64,
    /// Ending the data and closing the sender's end (slowest stream).
    pub close_seconds: f64,
}
