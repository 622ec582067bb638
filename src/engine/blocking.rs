//! The blocking engine: every send and receive is a plain blocking system call. Transports
//! open their descriptors blocking, so attaching is the identity.

use std::io;

use super::Engine;
use crate::transport::{Conn, TransportKind};

/// Plain blocking I/O.
pub struct Blocking;

impl Engine for Blocking {
    fn refuses(&self, _transport: TransportKind) -> Option<String> {
        None
    }

    fn attach(&self, conn: Box<dyn Conn>) -> io::Result<Box<dyn Conn>> {
        Ok(conn)
    }
}
