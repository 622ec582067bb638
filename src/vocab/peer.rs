//! Who is on the other end of a control connection, as far as a server can tell.

/// Who the peer is, as far as the server can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// Another host: only IP transports.
    Remote,
    /// This host (a loopback or local address): file-system and IPC transports too.
    Local,
    /// The parent sockbench of a `--placement processes` child: everything, pinning and
    /// inherited descriptors included.
    Parent,
}
