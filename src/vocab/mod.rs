//! The words every floor shares: what a command's output is asked to be ([`Format`],
//! [`View`], [`Units`]), how `stream` sends and receives ([`SendMethod`],
//! [`RecvMethod`]), how sizes, durations and rates are parsed and printed ([`units`]),
//! what an io-uring end used ([`uring_use`]), the two roles of a run ([`Role`]), who a server's peer is ([`Peer`]), the
//! warnings a workload declares ([`Diagnosis`]), how text sockbench did not write is made
//! safe to show ([`text`]), and how two secrets are compared ([`same_token`]).
//!
//! This room is on the ground floor: it uses nothing of the crate, and every room may use
//! it (tests/floors.rs holds the map).

mod diagnosis;
mod methods;
mod output;
mod peer;
mod role;
pub mod text;
pub mod units;
pub mod uring_use;

pub use diagnosis::Diagnosis;
pub use methods::{RecvMethod, SendMethod};
pub use output::{Format, Units, View};
pub use peer::Peer;
pub use role::Role;

/// Whether two tokens are equal, in time that does not depend on where they differ.
pub fn same_token(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::same_token;

    #[test]
    fn tokens_compare_whole() {
        assert!(same_token(b"abcd", b"abcd"));
        assert!(!same_token(b"abcd", b"abce"));
        assert!(!same_token(b"abcd", b"abc"));
        // Two differences whose XORs cancel must not compare equal.
        assert!(!same_token(&[1, 1], &[0, 0]));
    }
}
