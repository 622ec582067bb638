//! POSIX message queues. The queue is unlinked as soon as both ends are open; the end of
//! data is an empty message.
//!
//! Limits (see mq_overview(7)): a message may not exceed `fs.mqueue.msgsize_max` (8192 by
//! default) without CAP_SYS_RESOURCE, a queue holds at most `fs.mqueue.msg_max` messages,
//! and all queues of a user together may not exceed RLIMIT_MSGQUEUE bytes.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};

use anyhow::Context;
use nix::errno::Errno;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use nix::mqueue::{mq_open, mq_receive, mq_send, mq_unlink, MQ_OFlag, MqAttr, MqdT};
use nix::sys::resource::{getrlimit, setrlimit, Resource};
use nix::sys::stat::Mode;

use super::{Conn, Connected, Endpoint, LinkInfo, Listener, TransportOptions};

struct MqConn {
    q: Option<MqdT>,
    /// The receiving end's second descriptor of its queue (write-only, non-blocking), for
    /// the waker: an empty message (the end marker) wakes a blocked receive. The sending
    /// end's is read-only: the waker drains the queue, so a blocked send returns, and
    /// raises `abandoned`, so the next one fails.
    wake: Option<Arc<Queue>>,
    abandoned: Arc<AtomicBool>,
}

/// A queue descriptor that closes itself.
struct Queue(Option<MqdT>);

impl Drop for Queue {
    fn drop(&mut self) {
        if let Some(q) = self.0.take() {
            let _ = nix::mqueue::mq_close(q);
        }
    }
}

fn io_err(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

impl Drop for MqConn {
    fn drop(&mut self) {
        // MqdT does not close itself; an open descriptor keeps the (unlinked) queue
        // charged to RLIMIT_MSGQUEUE.
        if let Some(q) = self.q.take() {
            let _ = nix::mqueue::mq_close(q);
        }
    }
}

impl Conn for MqConn {
    fn waker(&self) -> Option<super::Waker> {
        let wake = Arc::clone(self.wake.as_ref()?);
        let abandoned = Arc::clone(&self.abandoned);
        Some(Box::new(move || {
            // First the flag, then the marker: a receive that misses the marker (the
            // queue was full, so the send below fails) finds a message waiting, returns,
            // and sees the flag before it waits again.
            abandoned.store(true, Ordering::Release);
            let Some(q) = &wake.0 else { return };
            if mq_send(q, &[], 0).is_err() {
                // The sending end's descriptor reads: make room for a blocked send.
                let mut buf = vec![0u8; 1 << 16];
                let mut prio = 0;
                while mq_receive(q, &mut buf, &mut prio).is_ok() {}
            }
        }))
    }
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.abandoned.load(Ordering::Acquire) {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        let q = self.q.as_ref().ok_or(io::ErrorKind::BrokenPipe)?;
        mq_send(q, buf, 0).map_err(io_err)?;
        Ok(buf.len())
    }
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.abandoned.load(Ordering::Acquire) {
            // As if the end marker had come: the run was abandoned.
            return Ok(0);
        }
        let q = self.q.as_ref().ok_or(io::ErrorKind::BrokenPipe)?;
        let mut prio = 0;
        mq_receive(q, buf, &mut prio).map_err(io_err)
    }
    fn finish(&mut self) -> io::Result<()> {
        self.send(&[]).map(drop)
    }
    fn raw_fd(&self) -> Option<RawFd> {
        self.q.as_ref().map(|q| q.as_fd().as_raw_fd())
    }
}

/// The deepest queue this process may create: `fs.mqueue.msg_max`, or the kernel's hard
/// limit with CAP_SYS_RESOURCE.
pub fn max_depth() -> u64 {
    if crate::environment::has_cap_sys_resource() {
        HARD_MSGMAX
    } else {
        crate::environment::read_sysctl_u64("fs/mqueue/msg_max").unwrap_or(10)
    }
}

/// The kernel's limit on a queue's depth whatever the sysctl says (ipc/mqueue.c).
const HARD_MSGMAX: u64 = 65_536;

/// The queue depth asked for: enough for `--sndbuf` bytes, else `fs.mqueue.msg_max` (the
/// plan has checked, and warned, that it fits [`max_depth`]).
pub(super) fn depth(opts: &TransportOptions) -> i64 {
    if crate::testhooks::fault("shallow-queue") {
        // A machine whose fs.mqueue.msg_max is 2 (a server's lower limit than the client's).
        return 2;
    }
    let msg_max = crate::environment::read_sysctl_u64("fs/mqueue/msg_max").unwrap_or(10) as i64;
    match opts.sndbuf {
        Some(n) => ((n / opts.message_bytes.max(1)) as i64).clamp(1, max_depth() as i64),
        None => msg_max.max(1),
    }
}

/// Make room in RLIMIT_MSGQUEUE for another queue of `bytes`: raise the soft limit by that
/// much, up to the hard limit (or beyond it with CAP_SYS_RESOURCE). Parallel streams each
/// add a queue, so the limit grows with them.
fn ensure_rlimit(bytes: u64) {
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_MSGQUEUE) {
        let want = soft.saturating_add(bytes);
        if setrlimit(Resource::RLIMIT_MSGQUEUE, want, want.max(hard)).is_err() {
            let _ = setrlimit(Resource::RLIMIT_MSGQUEUE, hard.min(want), hard);
        }
    }
}

/// A created queue, open for reading, waiting for its writer; the name goes when the
/// listener does.
struct MqListener {
    receiver: Option<MqdT>,
    wake: Option<Arc<Queue>>,
    cname: CString,
    endpoint: Endpoint,
    bytes: u64,
}

impl Drop for MqListener {
    fn drop(&mut self) {
        let _ = mq_unlink(self.cname.as_c_str());
        if let Some(q) = self.receiver.take() {
            let _ = nix::mqueue::mq_close(q);
        }
    }
}

/// The receiving half: create the queue (sized for the messages and `--sndbuf`) and open
/// it for reading.
pub fn listen(opts: &TransportOptions, id: usize) -> anyhow::Result<Box<dyn Listener>> {
    let name = format!("/sockbench-{}-{id}", std::process::id());
    let cname = CString::new(name.clone())?;
    let msgsize = opts.message_bytes.max(1) as i64;
    let maxmsg = depth(opts);
    // Kernel accounting per queue: messages plus a pointer each (mq_overview(7)).
    ensure_rlimit((maxmsg * (msgsize + 64)) as u64 + 4096);
    let attr = MqAttr::new(0, maxmsg, msgsize, 0);
    let receiver = mq_open(
        cname.as_c_str(),
        MQ_OFlag::O_CREAT | MQ_OFlag::O_EXCL | MQ_OFlag::O_RDONLY | MQ_OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o600),
        Some(&attr),
    )
    .map_err(|e| create_error(e, &name, msgsize, maxmsg))?;
    // A second, write-only descriptor while the queue still has its name (see MqConn).
    let wake = mq_open(
        cname.as_c_str(),
        MQ_OFlag::O_WRONLY | MQ_OFlag::O_NONBLOCK | MQ_OFlag::O_CLOEXEC,
        Mode::empty(),
        None,
    )
    .ok()
    .map(|q| Arc::new(Queue(Some(q))));
    let listener = MqListener {
        receiver: Some(receiver),
        wake,
        cname,
        endpoint: Endpoint::Name(name),
        bytes: (maxmsg * msgsize) as u64,
    };
    crate::testhooks::hold("mq");
    Ok(Box::new(listener))
}

impl Listener for MqListener {
    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn accept(
        mut self: Box<Self>,
        _peer: Option<&Endpoint>,
    ) -> anyhow::Result<(Box<dyn Conn>, LinkInfo)> {
        let info = LinkInfo {
            sndbuf_bytes: Some(self.bytes),
            ..LinkInfo::default()
        };
        Ok((
            Box::new(MqConn {
                q: self.receiver.take(),
                wake: self.wake.take(),
                abandoned: Arc::default(),
            }),
            info,
        ))
    }
}

/// The sending half: open the queue named `name` for writing. With `owner` (a queue a
/// peer named), the queue must belong to that uid, checked before anything is sent.
pub fn connect(name: &str, owner: Option<u32>) -> anyhow::Result<Connected> {
    let cname = CString::new(name)?;
    let sender = mq_open(
        cname.as_c_str(),
        MQ_OFlag::O_WRONLY | MQ_OFlag::O_CLOEXEC,
        Mode::empty(),
        None,
    )
    .map_err(io_err)
    .with_context(|| format!("cannot open message queue {name}"))?;
    if let Some(uid) = owner {
        use std::os::fd::AsRawFd;
        let st = nix::sys::stat::fstat(sender.as_raw_fd()).map_err(io_err);
        let owned = st.as_ref().is_ok_and(|st| st.st_uid == uid);
        if !owned {
            let _ = nix::mqueue::mq_close(sender);
            anyhow::bail!(
                "message queue {name} does not belong to the peer's uid {uid}: not written"
            );
        }
    }
    // A second, read-only descriptor while the queue still has its name (see MqConn).
    let wake = mq_open(
        cname.as_c_str(),
        MQ_OFlag::O_RDONLY | MQ_OFlag::O_NONBLOCK | MQ_OFlag::O_CLOEXEC,
        Mode::empty(),
        None,
    )
    .ok()
    .map(|q| Arc::new(Queue(Some(q))));
    // Both ends are open now (the receiver made it): the name has done its work. The
    // receiver removes it too, but only once it accepts; if its process is killed before
    // that, this is what keeps the queue from outliving both (a queue without a name goes
    // with its last descriptor, a named one stays charged to RLIMIT_MSGQUEUE until reboot).
    let _ = mq_unlink(cname.as_c_str());
    Ok(Connected {
        conn: Box::new(MqConn {
            q: Some(sender),
            wake,
            abandoned: Arc::default(),
        }),
        local: None,
    })
}

/// Why a queue could not be created, with what to do about it.
fn create_error(e: Errno, name: &str, msgsize: i64, maxmsg: i64) -> anyhow::Error {
    let hint = match e {
        Errno::EINVAL => format!(
            " (message size {msgsize} B or depth {maxmsg} exceeds fs.mqueue.msgsize_max / fs.mqueue.msg_max)"
        ),
        // EMFILE is both the descriptor limit and RLIMIT_MSGQUEUE: name the one hit.
        Errno::EMFILE if !super::at_descriptor_limit() => format!(
            " (the queues of this user no longer fit RLIMIT_MSGQUEUE, {}: raise it with `ulimit -q`)",
            getrlimit(Resource::RLIMIT_MSGQUEUE)
                .map(|(soft, _)| format!("{soft} bytes"))
                .unwrap_or_else(|_| "unknown".into())
        ),
        Errno::EMFILE => " (out of file descriptors: raise `ulimit -n` or use fewer --parallel streams)".into(),
        Errno::ENOSPC => format!(
            " (the system-wide number of message queues, fs.mqueue.queues_max = {}, is reached: remove \
             unused queues (ls /dev/mqueue) or raise it with `sysctl -w fs.mqueue.queues_max=...`)",
            crate::environment::read_sysctl("fs/mqueue/queues_max").unwrap_or_else(|| "?".into())
        ),
        Errno::ENOSYS => " (this kernel has no POSIX message queues)".into(),
        _ => String::new(),
    };
    anyhow::Error::new(io_err(e)).context(format!("cannot create message queue {name}{hint}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_loses_its_name_once_its_writer_has_opened_it() {
        // The receiver may be killed before it accepts: the name must not outlive the
        // moment both ends are open, or the queue stays charged to RLIMIT_MSGQUEUE.
        let opts = TransportOptions {
            message_bytes: 64,
            ..TransportOptions::default()
        };
        let listener = listen(&opts, 900).unwrap();
        let Endpoint::Name(name) = listener.endpoint().clone() else {
            panic!("a queue is named")
        };
        let named = || {
            let c = CString::new(name.clone()).unwrap();
            match mq_open(c.as_c_str(), MQ_OFlag::O_RDONLY, Mode::empty(), None) {
                Ok(q) => {
                    let _ = nix::mqueue::mq_close(q);
                    true
                }
                Err(e) => {
                    assert_eq!(e, Errno::ENOENT);
                    false
                }
            }
        };
        assert!(named(), "the listener's queue has no name to be opened by");
        let mut w = connect(&name, None).unwrap().conn;
        assert!(!named(), "{name} is still named after both ends opened it");
        // The unnamed queue still carries the data.
        let (mut r, _) = listener.accept(None).unwrap();
        assert_eq!(w.send(b"ping").unwrap(), 4);
        let mut buf = [0u8; 64];
        assert_eq!(r.recv(&mut buf).unwrap(), 4);
        assert_eq!(&buf[..4], b"ping");
    }

    #[test]
    fn an_abandoned_receiver_ends_even_when_the_queue_was_too_full_for_the_end_marker() {
        // The server's receiver lags, the queue is full, the client is killed: the waker
        // cannot add its end marker. The receiver must still end, not drain the queue and
        // then wait for good (found by tests/server.rs under load).
        let opts = TransportOptions {
            message_bytes: 64,
            ..TransportOptions::default()
        };
        let listener = listen(&opts, 901).unwrap();
        let Endpoint::Name(name) = listener.endpoint().clone() else {
            panic!("a queue is named")
        };
        let mut w = connect(&name, None).unwrap().conn;
        let (mut r, _) = listener.accept(None).unwrap();
        for _ in 0..depth(&opts) {
            assert_eq!(w.send(&[7u8; 64]).unwrap(), 64);
        }
        let wake = r.waker().expect("a receiving queue has a waker");
        wake();
        let mut buf = [0u8; 64];
        assert_eq!(r.recv(&mut buf).unwrap(), 0, "the abandoned run went on");

        // An empty queue: a receive already waiting is woken by the marker.
        let listener = listen(&opts, 902).unwrap();
        let Endpoint::Name(name) = listener.endpoint().clone() else {
            panic!("a queue is named")
        };
        let _w = connect(&name, None).unwrap().conn;
        let (mut r, _) = listener.accept(None).unwrap();
        let wake = r.waker().expect("a receiving queue has a waker");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            let _ = tx.send(r.recv(&mut buf).map_err(|e| e.kind()));
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        wake();
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("a waiting receive was not woken");
        assert_eq!(got, Ok(0));
    }

    #[test]
    fn a_queue_that_cannot_be_created_says_which_limit_and_what_to_do() {
        let says = |e: Errno| create_error(e, "/q", 65_536, 20).to_string();
        assert!(
            says(Errno::EINVAL)
                .contains("message size 65536 B or depth 20 exceeds fs.mqueue.msgsize_max"),
            "{}",
            says(Errno::EINVAL)
        );
        // Far from the descriptor limit: EMFILE is the queue-bytes limit.
        assert!(
            says(Errno::EMFILE).contains("RLIMIT_MSGQUEUE"),
            "{}",
            says(Errno::EMFILE)
        );
        assert!(says(Errno::ENOSPC).contains("fs.mqueue.queues_max"));
        assert!(says(Errno::ENOSYS).contains("no POSIX message queues"));
        assert_eq!(says(Errno::EACCES), "cannot create message queue /q");
    }
}
