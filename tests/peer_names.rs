//! A peer names nothing that is used unchecked (issue 28, defects 1 to 3). A test build
//! plays the hostile peer: `SOCKBENCH_TEST_FORGE_ENDPOINT` makes a client (or a server)
//! announce a chosen endpoint in place of its own. The victims are the files, FIFOs,
//! sockets, queues, rings and listeners a local user could name: each must be left
//! untouched (same content, nothing received, no connection), and the run refused with a
//! message naming the endpoint.

use std::io::Read;
use std::net::TcpListener;
use std::os::unix::net::UnixDatagram;
use std::process::Output;

use crate::common::{Sandbox, Server};

/// A keyless server on loopback, told by the test build to forge `forge` (JSON) as the
/// endpoint it names, when given.
fn start(sb: &Sandbox, forge: Option<&str>) -> Server {
    let mut cmd = sb.sockbench();
    cmd.args(["server", "--listen", "127.0.0.1", "--port", "0"]);
    if let Some(f) = forge {
        cmd.env("SOCKBENCH_TEST_FORGE_ENDPOINT", f);
    }
    Server::from_command(&mut cmd)
}

/// A client run against `server`, naming `forge` (JSON) for its data when given.
fn client(sb: &Sandbox, server: &Server, forge: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = sb.sockbench();
    cmd.args(args)
        .args(["-n", "50", "-w", "0", "-q", "--server", &server.addr()]);
    if let Some(f) = forge {
        cmd.env("SOCKBENCH_TEST_FORGE_ENDPOINT", f);
    }
    cmd.output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn path_json(p: &std::path::Path) -> String {
    serde_json::json!({ "path": p }).to_string()
}

/// The run failed, and said which endpoint it refused and why.
fn refused(o: &Output, what: &str, endpoint: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("refusing {what} {endpoint}")),
        "expected a refusal of {what} {endpoint}: {err}"
    );
}

#[test]
fn a_client_naming_a_file_or_another_fifo_for_the_servers_writes_gets_nothing_written() {
    let sb = Sandbox::new();
    let server = start(&sb, None);
    // A plain file (as root, any file on the host), and a FIFO someone else reads (as
    // /run/initctl is).
    let file = sb.path().join("victim.conf");
    std::fs::write(&file, "precious\n").unwrap();
    let fifo = sb.path().join("initctl");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let mut reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    for victim in [&file, &fifo] {
        // --reverse: the server sends, so it opens the client's FIFO for writing.
        let o = client(
            &sb,
            &server,
            Some(&path_json(victim)),
            &["stream", "-t", "fifo", "--reverse"],
        );
        refused(&o, "the client's endpoint", &victim.display().to_string());
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "precious\n");
    let mut got = Vec::new();
    let n = reader.read_to_end(&mut got);
    assert!(got.is_empty(), "the FIFO got {} bytes ({n:?})", got.len());
    let log = server.logged();
    assert!(log.contains("refusing the client's endpoint"), "{log}");
    // The same runs, honest, still work.
    let o = client(&sb, &server, None, &["stream", "-t", "fifo", "--reverse"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn a_client_naming_a_queue_or_ring_it_did_not_make_gets_nothing_written() {
    let sb = Sandbox::new();
    let server = start(&sb, None);
    // Somebody's message queue.
    let qname = format!("/sbvictim-{}", std::process::id());
    let cq = std::ffi::CString::new(qname.clone()).unwrap();
    let attr = nix::mqueue::MqAttr::new(0, 10, 64, 0);
    let q = nix::mqueue::mq_open(
        cq.as_c_str(),
        nix::mqueue::MQ_OFlag::O_CREAT | nix::mqueue::MQ_OFlag::O_RDONLY,
        nix::sys::stat::Mode::from_bits_truncate(0o600),
        Some(&attr),
    )
    .unwrap();
    let o = client(
        &sb,
        &server,
        Some(&serde_json::json!({ "name": qname }).to_string()),
        &["stream", "-t", "mq", "-s", "64", "--reverse"],
    );
    let waiting = nix::mqueue::mq_getattr(&q).unwrap().curmsgs();
    let _ = nix::mqueue::mq_close(q);
    let _ = nix::mqueue::mq_unlink(cq.as_c_str());
    refused(&o, "the client's endpoint", &qname);
    assert_eq!(waiting, 0, "the queue got messages");
    // Somebody's shared-memory object.
    let ring = format!("sbvictim-ring-{}", std::process::id());
    let shm = std::path::Path::new("/dev/shm").join(&ring);
    if std::fs::write(&shm, vec![7u8; 8192]).is_ok() {
        let o = client(
            &sb,
            &server,
            Some(&serde_json::json!({ "name": format!("/{ring}") }).to_string()),
            &["stream", "-t", "shm", "--reverse"],
        );
        let after = std::fs::read(&shm).unwrap();
        let _ = std::fs::remove_file(&shm);
        refused(&o, "the client's endpoint", &format!("/{ring}"));
        assert!(after.iter().all(|&b| b == 7), "the ring was written");
    }
}

#[test]
fn a_client_naming_another_datagram_socket_gets_no_datagram_sent_and_the_file_kept() {
    let sb = Sandbox::new();
    let server = start(&sb, None);
    // A log socket (as /dev/log is): the server would answer it, and remove its name.
    let log = sb.path().join("log");
    let victim = UnixDatagram::bind(&log).unwrap();
    victim.set_nonblocking(true).unwrap();
    let o = client(
        &sb,
        &server,
        Some(&path_json(&log)),
        &["pingpong", "-t", "unix-dgram"],
    );
    refused(&o, "the client's own socket", &log.display().to_string());
    let mut buf = [0u8; 256];
    assert!(
        victim.recv(&mut buf).is_err(),
        "the log socket got a datagram"
    );
    assert!(log.exists(), "the log socket's name was removed");
}

#[test]
fn a_local_client_cannot_make_the_server_dial_a_service_on_its_loopback() {
    let sb = Sandbox::new();
    let server = start(&sb, None);
    // A service bound only to loopback, held by this test (not by the client).
    let service = TcpListener::bind("127.0.0.1:0").unwrap();
    service.set_nonblocking(true).unwrap();
    let at = service.local_addr().unwrap();
    // connect --reverse: the server is the dialler.
    let o = client(
        &sb,
        &server,
        Some(&serde_json::json!({ "address": at }).to_string()),
        &["connect", "-t", "tcp", "--reverse"],
    );
    refused(&o, "the client's listener", &at.to_string());
    assert!(service.accept().is_err(), "the service got a connection");
    let o = client(&sb, &server, None, &["connect", "-t", "tcp", "--reverse"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn a_client_does_not_trust_the_endpoints_a_server_names() {
    let sb = Sandbox::new();
    // The client writes the server's FIFO (stream: the server receives).
    let file = sb.path().join("victim.conf");
    std::fs::write(&file, "precious\n").unwrap();
    let server = start(&sb, Some(&path_json(&file)));
    let o = client(&sb, &server, None, &["stream", "-t", "fifo"]);
    refused(&o, "the server's endpoint", &file.display().to_string());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "precious\n");
    drop(server);
    // The client dials the server's data listener and sends it the run's token.
    let service = TcpListener::bind("127.0.0.1:0").unwrap();
    service.set_nonblocking(true).unwrap();
    let at = service.local_addr().unwrap();
    let server = start(&sb, Some(&serde_json::json!({ "address": at }).to_string()));
    let o = client(&sb, &server, None, &["stream", "-t", "tcp"]);
    refused(&o, "the server's endpoint", &at.to_string());
    assert!(
        service.accept().is_err(),
        "the client connected to the service"
    );
    // An address on another host than the server's.
    drop(server);
    let server = start(&sb, Some(r#"{"address": "192.0.2.1:9"}"#));
    let o = client(&sb, &server, None, &["stream", "-t", "udp"]);
    refused(&o, "the server's endpoint", "192.0.2.1:9");
    assert!(
        stderr(&o).contains("not at the peer's own address"),
        "{}",
        stderr(&o)
    );
}

use std::os::unix::fs::OpenOptionsExt;
