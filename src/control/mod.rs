//! The control protocol between a sockbench client and a `sockbench server` (issue 10):
//! versioned, typed frames with a size cap per type. So far, the framing ([`frame`]);
//! the messages, states, authentication and timeouts build on it.

pub mod frame;

/// The protocol version a hello carries; a peer of another version is refused.
pub const VERSION: u16 = 1;
