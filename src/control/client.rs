//! The client's side of a control connection: a server named HOST[:PORT] resolved,
//! dialled within a deadline (Ctrl-C noticed within 50 ms), and the handshake with its
//! key proofs both ways.

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};

use crate::control::auth::{self, Key, NONCE_BYTES};
use crate::control::frame::FrameType;
use crate::control::messages::{Auth, Hello, Welcome};
use crate::control::{Control, ControlError, DEFAULT_PORT, HANDSHAKE_DEADLINE, VERSION};

/// How long dialling the server may take.
const DIAL_TIMEOUT: Duration = Duration::from_secs(5);

/// `HOST`, `HOST:PORT`, `[V6]:PORT` or a bare IPv6 address, as socket addresses.
///
/// # Errors
/// A port that is not a number, a name that does not resolve.
pub fn resolve(target: &str) -> anyhow::Result<Vec<SocketAddr>> {
    let with_port = if target.parse::<std::net::Ipv6Addr>().is_ok() {
        format!("[{target}]:{DEFAULT_PORT}")
    } else if target.starts_with('[') && target.ends_with(']') || !target.contains(':') {
        format!("{target}:{DEFAULT_PORT}")
    } else {
        target.to_string()
    };
    let addrs: Vec<SocketAddr> = with_port
        .to_socket_addrs()
        .with_context(|| {
            format!("cannot resolve server {target:?}: give HOST, HOST:PORT or [IPV6]:PORT")
        })?
        .collect();
    if addrs.is_empty() {
        bail!("server {target:?} has no address");
    }
    Ok(addrs)
}

/// Run the client's side of the handshake on `ctl`: hello, welcome, and with a key both
/// proofs. Returns the server's welcome.
///
/// # Errors
/// Another protocol version, a key the server does not share, a server that asks for no
/// key when this side has one (it cannot prove itself), a deadline passing.
pub fn handshake(ctl: &mut Control, key: Option<&Key>) -> anyhow::Result<Welcome> {
    // Until the server has proved itself, only its handshake frames are taken (anything
    // else, an 8 MiB report or a result, is refused on its header).
    ctl.allow(&[FrameType::Welcome, FrameType::Auth, FrameType::Error]);
    let welcome = handshake_steps(ctl, key)?;
    ctl.allow(&FrameType::ALL);
    Ok(welcome)
}

fn handshake_steps(ctl: &mut Control, key: Option<&Key>) -> anyhow::Result<Welcome> {
    let nonce = auth::random(NONCE_BYTES)?;
    ctl.send(
        FrameType::Hello,
        &Hello {
            version: VERSION,
            tool: env!("CARGO_PKG_VERSION").to_string(),
            nonce: hex::encode(&nonce),
        },
    )?;
    let welcome: Welcome =
        ctl.expect(FrameType::Welcome, HANDSHAKE_DEADLINE)
            .map_err(|e| match e {
                ControlError::Refused(why) => anyhow!("the server refused: {why}"),
                e => anyhow!(e).context(
                    "no welcome from the server (is it a sockbench server of this release?)",
                ),
            })?;
    if welcome.version != VERSION {
        bail!(
            "the server speaks protocol version {}, this client {VERSION}",
            welcome.version
        );
    }
    let server_nonce =
        auth::nonce_bytes(&welcome.nonce).context("the server's nonce is not 32 bytes of hex")?;
    match (key, welcome.key_required) {
        (None, false) => {}
        (None, true) => bail!("the server requires a key: give the same --key-file as the server's"),
        (Some(_), false) => bail!(
            "the server does not ask for a key, so it cannot prove it holds yours: it is not the server you configured (or runs without --key-file)"
        ),
        (Some(key), true) => {
            ctl.send(
                FrameType::Auth,
                &Auth {
                    mac: key.client_proof(&nonce, &server_nonce),
                },
            )?;
            let answer: Auth = ctl.expect(FrameType::Auth, HANDSHAKE_DEADLINE).map_err(|e| match e {
                ControlError::Refused(why) => anyhow!("the server refused: {why}"),
                e => anyhow!(e),
            })?;
            if !key.check_server(&answer.mac, &server_nonce, &nonce) {
                bail!("the server's proof does not match the key: it is not the server you configured");
            }
        }
    }
    Ok(welcome)
}

/// Ctrl-C ended a dial: not the server's fault, and not a failure to report as one.
#[derive(Debug, thiserror::Error)]
#[error("interrupted (Ctrl-C) while connecting to the server")]
pub struct Interrupted;

/// A control connection to a server, handshake done.
///
/// # Errors
/// The server cannot be reached or refuses, with what to try.
pub fn dial(target: &str, key: Option<&Key>) -> anyhow::Result<(Control, Welcome)> {
    let mut last = None;
    for addr in resolve(target)? {
        // Ctrl-C is noticed within 50 ms, however long a host that drops SYNs keeps the
        // connect waiting.
        let connected = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )
        .and_then(|s| {
            crate::transport::connect_with_deadline(&s, &addr.into(), DIAL_TIMEOUT)?;
            Ok(TcpStream::from(s))
        });
        if crate::interrupt::requested() {
            bail!(Interrupted);
        }
        match connected {
            Ok(s) => {
                s.set_nodelay(true)
                    .context("cannot set TCP_NODELAY on the control connection")?;
                let mut ctl = Control::new(Box::new(s));
                let welcome = handshake(&mut ctl, key)?;
                return Ok((ctl, welcome));
            }
            Err(e) => last = Some((addr, e)),
        }
    }
    let (addr, e) = last.expect("at least one address");
    Err(anyhow!(e).context(format!(
        "cannot reach sockbench server at {addr}: is `sockbench server` running there, and is its port open?"
    )))
}
