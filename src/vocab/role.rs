//! The two roles of every run.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The two roles of a run: the sender (the client, for request/response workloads) and
/// the receiver (the server).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Sends the data or starts each exchange.
    Sender,
    /// Receives the data or answers.
    Receiver,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Sender => "sender",
            Role::Receiver => "receiver",
        })
    }
}
