//! Unit tests of the trust checks: a peer in this very process (its control connection
//! over loopback, so /proc/net and /proc/PID/fd name this process), another on a remote
//! address, and the files, sockets and names it might name.

use super::*;
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixListener;

/// A control connection within this process: the trust the server end has in its peer
/// (which is this process, on loopback).
struct Control {
    _listener: TcpListener,
    _client: TcpStream,
    _server: TcpStream,
    trust: PeerTrust,
}

fn local_peer() -> Control {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, from) = listener.accept().unwrap();
    let trust = PeerTrust::of(Some((from, server.local_addr().unwrap())));
    Control {
        _listener: listener,
        _client: client,
        _server: server,
        trust,
    }
}

fn remote_peer() -> PeerTrust {
    PeerTrust::of(Some((
        "192.0.2.7:40000".parse().unwrap(),
        "192.0.2.1:5290".parse().unwrap(),
    )))
}

/// A TCP listener on loopback held by another process (`python` under `wrapper`): the
/// process and the port, or None where it cannot be started.
fn listener_elsewhere(wrapper: &[&str], python: &str) -> Option<(std::process::Child, u16)> {
    let script = "import socket,time\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen()\nprint(s.getsockname()[1],flush=True)\ntime.sleep(30)";
    let mut cmd = match wrapper.split_first() {
        Some((first, rest)) => {
            let mut c = std::process::Command::new(first);
            c.args(rest).arg(python);
            c
        }
        None => std::process::Command::new(python),
    };
    let mut child = cmd
        .args(["-c", script])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .ok()?;
    let mut line = String::new();
    let _ = std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take()?),
        &mut line,
    );
    match line.trim().parse() {
        Ok(port) => Some((child, port)),
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            None
        }
    }
}

fn me() -> u32 {
    std::process::id()
}

/// A private directory (0700), as a run's own.
fn private_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("sbtrust")
        .tempdir()
        .unwrap()
}

fn err(r: anyhow::Result<Pinned>) -> String {
    format!("{:#}", r.expect_err("refused"))
}

#[test]
fn a_remote_peer_names_only_its_own_address_and_no_file_or_object() {
    let t = remote_peer();
    assert!(!t.trusted());
    let at = |a: &str| Endpoint::Address(a.parse().unwrap());
    let ok = t
        .check(TransportKind::Tcp, &at("192.0.2.7:5201"), "x")
        .unwrap();
    assert_eq!(ok.endpoint, at("192.0.2.7:5201"));
    assert_eq!(ok.owner, None);
    // The server's own loopback (SSRF), another host, port 0, the other family's form.
    let e = err(t.check(
        TransportKind::Tcp,
        &at("127.0.0.1:22"),
        "the client's listener",
    ));
    assert!(
        e.contains("refusing the client's listener 127.0.0.1:22") && e.contains("192.0.2.7"),
        "{e}"
    );
    assert!(err(t.check(TransportKind::Udp, &at("192.0.2.8:5201"), "x"))
        .contains("not at the peer's own address"));
    assert!(err(t.check(TransportKind::Tcp, &at("192.0.2.7:0"), "x")).contains("port 0"));
    assert!(t
        .check(TransportKind::Udp, &at("[::ffff:192.0.2.7]:9"), "x")
        .is_ok());
    let e = err(t.check(
        TransportKind::Fifo,
        &Endpoint::Path("/tmp/sb1-fifo-0".into()),
        "x",
    ));
    assert!(e.contains("names no paths"), "{e}");
    let e = err(t.check(
        TransportKind::Mq,
        &Endpoint::Name("/sockbench-1-0".into()),
        "x",
    ));
    assert!(e.contains("names no message queues"), "{e}");
    // An endpoint of another transport is refused whoever names it.
    let e = err(t.check(TransportKind::Tcp, &Endpoint::Name("/x".into()), "x"));
    assert!(e.contains("not an endpoint of tcp"), "{e}");
}

#[test]
fn an_inherited_peer_is_this_program_and_is_not_checked() {
    let t = PeerTrust::of(None);
    assert!(t.trusted());
    let p = t
        .check(
            TransportKind::Fifo,
            &Endpoint::Path("/etc/passwd".into()),
            "x",
        )
        .unwrap();
    assert_eq!(p.endpoint, Endpoint::Path("/etc/passwd".into()));
}

#[test]
fn a_local_peer_names_only_sockets_its_own_process_holds() {
    let c = local_peer();
    let mine = TcpListener::bind("127.0.0.1:0").unwrap();
    let at = Endpoint::Address(mine.local_addr().unwrap());
    assert!(c.trust.check(TransportKind::Tcp, &at, "x").is_ok());
    // A port nobody holds, and a listener of another process (a service on loopback).
    let free = mine.local_addr().unwrap();
    drop(mine);
    let e = err(c
        .trust
        .check(TransportKind::Tcp, &Endpoint::Address(free), "x"));
    assert!(e.contains("belongs to the peer's process"), "{e}");
    let Some((mut other, port)) = listener_elsewhere(&[], "python3") else {
        eprintln!("skipped the other process's listener: no python3");
        return;
    };
    let theirs = Endpoint::Address(SocketAddr::from(([127, 0, 0, 1], port)));
    let e = err(c
        .trust
        .check(TransportKind::Tcp, &theirs, "the client's listener"));
    let _ = other.kill();
    let _ = other.wait();
    assert!(
        e.contains("no socket there belongs to the peer's process"),
        "{e}"
    );
    // A UDP socket of the peer's process is its own.
    let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let own = Endpoint::Address(u.local_addr().unwrap());
    assert!(c.trust.check(TransportKind::Udp, &own, "x").is_ok());
    assert!(
        c.trust.check(TransportKind::Tcp, &own, "x").is_err(),
        "not a TCP listener"
    );
}

#[test]
fn a_local_peers_fifo_is_pinned_and_anything_else_refused() {
    let c = local_peer();
    let dir = private_dir();
    let fifo = dir.path().join(format!("sb{}-fifo-0", me()));
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let p = c
        .trust
        .check(TransportKind::Fifo, &Endpoint::Path(fifo.clone()), "x")
        .unwrap();
    let Endpoint::Path(pinned) = &p.endpoint else {
        panic!("{p:?}")
    };
    assert!(pinned.starts_with("/proc/self/fd/"), "{pinned:?}");
    // The pinned path is the FIFO checked, even once the name is replaced.
    let moved = dir.path().join("moved");
    std::fs::rename(&fifo, &moved).unwrap();
    std::fs::write(&fifo, b"a regular file now").unwrap();
    assert!(std::fs::metadata(pinned).unwrap().file_type().is_fifo());
    let e = err(c
        .trust
        .check(TransportKind::Fifo, &Endpoint::Path(fifo.clone()), "x"));
    assert!(e.contains("not a FIFO"), "{e}");
    std::fs::remove_file(&fifo).unwrap();

    // A symbolic link with the right name, to a FIFO or to a file elsewhere.
    std::os::unix::fs::symlink(&moved, &fifo).unwrap();
    let e = err(c
        .trust
        .check(TransportKind::Fifo, &Endpoint::Path(fifo.clone()), "x"));
    assert!(e.contains("not a FIFO"), "{e}");
    std::fs::remove_file(&fifo).unwrap();
    // Another process's name, a name sockbench does not make, a relative path, `..`.
    let other = dir.path().join("sb1-fifo-0");
    nix::unistd::mkfifo(&other, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    for p in [
        other.clone(),
        moved.clone(),
        PathBuf::from(format!("sb{}-fifo-0", me())),
        dir.path()
            .join("..")
            .join(dir.path().file_name().unwrap())
            .join(format!("sb{}-fifo-9", me())),
    ] {
        let e = err(c
            .trust
            .check(TransportKind::Fifo, &Endpoint::Path(p.clone()), "x"));
        assert!(
            e.contains("not a name sockbench made") || e.contains("not absolute"),
            "{p:?}: {e}"
        );
    }
    // A directory anyone may write (not sticky), and a socket where a FIFO belongs.
    let open = tempfile::Builder::new()
        .prefix("sbtrust")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(open.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let there = open.path().join(format!("sb{}-fifo-0", me()));
    nix::unistd::mkfifo(&there, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let e = err(c
        .trust
        .check(TransportKind::Fifo, &Endpoint::Path(there.clone()), "x"));
    assert!(e.contains("may be written by others"), "{e}");
    std::fs::set_permissions(open.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    assert!(c
        .trust
        .check(TransportKind::Fifo, &Endpoint::Path(there), "x")
        .is_ok());
    let sock = dir.path().join(format!("sb{}-unix-0.sock", me()));
    let _l = UnixListener::bind(&sock).unwrap();
    let e = err(c
        .trust
        .check(TransportKind::Fifo, &Endpoint::Path(sock.clone()), "x"));
    assert!(e.contains("not a FIFO"), "{e}");
    let ok = c
        .trust
        .check(TransportKind::Unix, &Endpoint::Path(sock), "x")
        .unwrap();
    // Connecting through the pinned path reaches the listener checked.
    let Endpoint::Path(pinned) = &ok.endpoint else {
        panic!()
    };
    assert!(std::os::unix::net::UnixStream::connect(pinned).is_ok());
}

#[test]
fn a_directory_reached_through_a_link_is_refused() {
    let c = local_peer();
    let dir = private_dir();
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let f = real.join(format!("sb{}-fifo-0", me()));
    nix::unistd::mkfifo(&f, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let via = link.join(format!("sb{}-fifo-0", me()));
    let e = err(c
        .trust
        .check(TransportKind::Fifo, &Endpoint::Path(via), "x"));
    assert!(e.contains("symbolic link"), "{e}");
    assert!(c
        .trust
        .check(TransportKind::Fifo, &Endpoint::Path(f), "x")
        .is_ok());
}

#[test]
fn a_local_peers_queue_or_ring_name_carries_its_pid_and_the_owner_to_check() {
    let c = local_peer();
    let mine = format!("/sockbench-{}-3", me());
    let p = c
        .trust
        .check(TransportKind::Mq, &Endpoint::Name(mine.clone()), "x")
        .unwrap();
    assert_eq!(p.owner, Some(nix::unistd::geteuid().as_raw()));
    assert!(c
        .trust
        .check(TransportKind::Shm, &Endpoint::Name(mine), "x")
        .is_ok());
    for bad in [
        "/sockbench-1-3".to_string(),
        format!("/sockbench-{}-", me()),
        format!("/sockbench-{}-x", me()),
        "/other".to_string(),
    ] {
        let e = err(c
            .trust
            .check(TransportKind::Mq, &Endpoint::Name(bad.clone()), "x"));
        assert!(e.contains("not a name sockbench made"), "{bad}: {e}");
    }
}

#[test]
fn a_queue_or_ring_of_another_uid_is_not_written() {
    // The owner check itself, through the transport (a uid that is not ours).
    let uid = nix::unistd::geteuid().as_raw();
    let opts = crate::transport::TransportOptions {
        message_bytes: 64,
        ..Default::default()
    };
    for kind in [TransportKind::Mq, TransportKind::Shm] {
        let l = crate::transport::listen(kind, &opts, 7).unwrap();
        let ep = l.endpoint().clone();
        let mut wrong = opts.clone();
        wrong.peer_uid = Some(uid + 1);
        let e = format!(
            "{:#}",
            crate::transport::connect(kind, &ep, &wrong).err().unwrap()
        );
        assert!(e.contains("peer's uid"), "{kind}: {e}");
        let mut right = opts.clone();
        right.peer_uid = Some(uid);
        assert!(
            crate::transport::connect(kind, &ep, &right).is_ok(),
            "{kind}"
        );
    }
}

mod fuzz {
    //! Whatever a peer on another host names, only an address at its own control
    //! address, on a port, passes.
    use super::*;
    use proptest::prelude::*;

    fn any_endpoint() -> impl Strategy<Value = Endpoint> {
        prop_oneof![
            (any::<[u8; 4]>(), any::<u16>())
                .prop_map(|(ip, port)| { Endpoint::Address(SocketAddr::from((ip, port))) }),
            (
                proptest::sample::select(vec![[192u8, 0, 2, 7], [127, 0, 0, 1], [0, 0, 0, 0]]),
                any::<u16>()
            )
                .prop_map(|(ip, port)| Endpoint::Address(SocketAddr::from((ip, port)))),
            (any::<[u8; 16]>(), any::<u16>()).prop_map(|(ip, port)| {
                Endpoint::Address(SocketAddr::from((std::net::Ipv6Addr::from(ip), port)))
            }),
            "[ -~]{0,40}".prop_map(|p| Endpoint::Path(PathBuf::from(p))),
            "/[a-z0-9/._-]{0,40}".prop_map(|p| Endpoint::Path(PathBuf::from(p))),
            "[ -~]{0,40}".prop_map(Endpoint::Name),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(500),
            failure_persistence: None,
            .. ProptestConfig::default()
        })]
        #[test]
        fn a_remote_peer_passes_only_with_an_address_of_its_own(
            ep in any_endpoint(),
            kind in proptest::sample::select(vec![
                TransportKind::Tcp, TransportKind::Udp, TransportKind::Tcp6, TransportKind::Udp6,
                TransportKind::Unix, TransportKind::UnixDgram, TransportKind::UnixSeqpacket,
                TransportKind::Fifo, TransportKind::Mq, TransportKind::Shm, TransportKind::Pipe,
            ]),
        ) {
            let t = remote_peer();
            let own = matches!(&ep, Endpoint::Address(a)
                if crate::transport::canonical_ip(a.ip()) == IpAddr::from([192, 0, 2, 7])
                    && a.port() != 0);
            let passed = t.check(kind, &ep, "x").is_ok();
            prop_assert_eq!(passed, own && kind.is_ip(), "{:?} {:?}", kind, ep);
            let end = t.check_own_end(kind, &ep, "x", None).is_ok();
            prop_assert_eq!(end, own && kind.is_ip(), "{:?} {:?}", kind, ep);
        }
    }
}

#[test]
fn a_peer_whose_process_is_out_of_sight_is_judged_by_its_uid() {
    // As when this side is not root and the peer is another user's process: no pids,
    // only the uid the kernel gives its control socket.
    let c = local_peer();
    let uid = nix::unistd::geteuid().as_raw();
    c.trust
        .local
        .set(Ok(Local {
            uid,
            pids: Vec::new(),
        }))
        .unwrap();
    let mine = TcpListener::bind("127.0.0.1:0").unwrap();
    assert!(c
        .trust
        .check(
            TransportKind::Tcp,
            &Endpoint::Address(mine.local_addr().unwrap()),
            "x"
        )
        .is_ok());
    // A name with any pid passes the name check; its object's uid is still checked.
    let p = c
        .trust
        .check(
            TransportKind::Mq,
            &Endpoint::Name("/sockbench-1-0".into()),
            "x",
        )
        .unwrap();
    assert_eq!(p.owner, Some(uid));
    // Another user's listener is refused.
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped the other user's listener: needs root");
        return;
    }
    let wrapper = [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
    ];
    let Some((mut other, port)) = listener_elsewhere(&wrapper, "/usr/bin/python3") else {
        eprintln!("skipped the other user's listener: /usr/bin/python3 did not start as uid 65534");
        return;
    };
    let theirs = Endpoint::Address(SocketAddr::from(([127, 0, 0, 1], port)));
    let e = c.trust.check(TransportKind::Tcp, &theirs, "x");
    let _ = other.kill();
    let _ = other.wait();
    assert!(e.is_err(), "another user's listener passed");
}
