//! `sockbench listen`'s end-of-run summary: where it listened and what each peer sent.

use serde::{Deserialize, Serialize};

use crate::report::envelope::{Envelope, Kind, Written};

/// What `listen` saw: the body of its end-of-run summary, a document (kind `listen`)
/// like every command's; under `--format json` it is the log's last line, with
/// `"event": "summary"`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ListenBody {
    /// The transport it listened on.
    pub transport: String,
    /// Where it listened (the address, or the socket file).
    pub address: String,
    /// One entry per peer (a connection, or a datagram sender), by id.
    pub connections: Vec<PeerSummary>,
}

/// One peer's counts at the end.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PeerSummary {
    /// Its number in the log (`#1` is the first).
    pub id: u64,
    /// Who it was (address, or its own name for an unnamed Unix peer).
    pub peer: String,
    /// Bytes read from it.
    pub bytes: u64,
    /// Reads that returned data.
    pub reads: u64,
    /// From accept (or its first datagram) to close (or the end).
    pub duration_seconds: f64,
    /// `bytes` over `duration_seconds`, in bits per second (0 for no time).
    pub bits_per_second: f64,
}

/// `listen`'s summary as it is made: the envelope and what it saw.
#[derive(Clone, Debug)]
pub struct ListenReport {
    /// What every document says of itself.
    pub envelope: Envelope,
    /// What it saw.
    pub body: ListenBody,
}

impl ListenReport {
    /// The document to write.
    pub fn document(&self) -> Written<'_, ListenBody> {
        Written {
            envelope: &self.envelope,
            kind: Kind::Listen,
            body: &self.body,
        }
    }
}
