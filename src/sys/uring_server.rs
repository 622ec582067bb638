//! The io_uring plumbing of the `io-uring` server model (`crate::model::uring`): one ring,
//! onto which the model pushes accepts, receives, sends and cancellations, and from which
//! it takes their completions back as plain values.
//!
//! The ring owns every byte the kernel may read or write for an operation in flight: the
//! copy a send reads from, the buffer a single-shot receive fills, the provided buffers a
//! multishot receive picks from, the timer's timespec. It lets go of each only when the
//! operation's last completion has arrived, and when it is dropped with operations still
//! in flight it cancels them, waits a moment, and leaks what the kernel may still touch
//! rather than free it. So nothing the caller does through this interface can make the
//! kernel use freed memory. What the ring does not own is the descriptors: the caller
//! closes a socket only once no operation on it is in flight (were it closed earlier, the
//! kernel would keep the socket open until the operation ends, and a reused descriptor
//! number could send an operation still queued to the wrong socket).
//!
//! Kernel features, each probed or tried, each with a fallback:
//! - multishot accept (Linux 5.19), else one accept per submission (the caller sees
//!   `EINVAL` from the first multishot one and calls
//!   [`ServerRing::disable_multishot_accept`]);
//! - a ring of provided buffers (5.19) for multishot receives (6.0), else one receive per
//!   submission into a buffer of its own (`EINVAL` again, then
//!   [`ServerRing::disable_multishot_recv`]);
//! - waiting with a timeout argument (`IORING_FEAT_EXT_ARG`, 5.11), else a timeout
//!   submission;
//! - a single submitter with deferred task work (6.1), else cooperative task work (5.19),
//!   else neither.

use std::alloc::{self, Layout};
use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue, types, IoUring, Probe};
use nix::libc;

/// The operation's kind sits in the top byte of its `user_data`; the rest is the caller's
/// token, or the index of the memory the operation owns.
const KIND_SHIFT: u32 = 56;
/// The bits of `user_data` below the kind.
const PAYLOAD: u64 = (1 << KIND_SHIFT) - 1;

const ACCEPT: u64 = 1;
const RECV_MULTI: u64 = 2;
const RECV_OWNED: u64 = 3;
const SEND: u64 = 4;
const CANCEL: u64 = 5;
const TIMER: u64 = 6;

fn user_data(kind: u64, payload: u64) -> u64 {
    (kind << KIND_SHIFT) | (payload & PAYLOAD)
}

/// The buffer group of the provided buffers.
const BGID: u16 = 0;
/// Provided buffers (a power of two, at most 32768): enough for every connection of a
/// busy loop to have a receive completed between two waits, since each buffer goes back
/// as soon as its bytes are copied out.
const POOL_BUFS: u16 = 1024;
/// Bytes of each provided buffer: a few requests' worth (a larger request takes several).
const POOL_BUF_SIZE: usize = 4096;
/// Bytes of a single-shot receive's own buffer.
const OWNED_RECV: usize = 16 * 1024;
/// Single-shot receive buffers kept for reuse.
const SPARE_RECV: usize = 64;
/// How long dropping a ring waits for its cancelled operations.
const DROP_DRAIN: Duration = Duration::from_millis(200);

/// Tells receives of different rings apart (a receive's buffer is only valid on its own).
static NEXT_RING: AtomicU32 = AtomicU32::new(1);

/// One submitted operation, for [`ServerRing::cancel`]. Tokens are at most 56 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpId(u64);

/// A completion, as the caller sees it.
#[derive(Debug)]
pub enum Completion {
    /// An accept: the new connection (blocking, close-on-exec) or the error. `more`: a
    /// multishot accept goes on (else the caller submits another to accept again).
    Accepted {
        /// The connection, or why none.
        result: io::Result<OwnedFd>,
        /// Whether this accept goes on delivering.
        more: bool,
    },
    /// A receive: bytes (give them back with [`ServerRing::consume`]), an empty
    /// [`Received`] at the end of the stream, or the error. `more`: a multishot receive
    /// goes on.
    Received {
        /// The token the receive was submitted with.
        token: u64,
        /// What arrived.
        result: io::Result<Received>,
        /// Whether this receive goes on delivering.
        more: bool,
    },
    /// A send: how many bytes of `buf[off..]` went, and the buffer back.
    Sent {
        /// The token the send was submitted with.
        token: u64,
        /// Bytes sent, or the error.
        result: io::Result<usize>,
        /// The buffer given to [`ServerRing::send`].
        buf: Vec<u8>,
        /// Where in it the send started.
        off: usize,
    },
}

/// Bytes a receive delivered, held in the ring's memory until [`ServerRing::consume`]
/// gives the buffer back. Dropping one instead costs the ring that buffer for good.
#[must_use = "give it back with ServerRing::consume, or its buffer is lost to the ring"]
#[derive(Debug)]
pub struct Received {
    ring: u32,
    len: usize,
    src: Source,
}

#[derive(Debug)]
enum Source {
    /// The end of the stream: no bytes.
    Nothing,
    /// A provided buffer, by id.
    Pool(u16),
    /// A single-shot receive's own buffer.
    Owned(Vec<u8>),
}

impl Received {
    /// Whether this is the end of the stream (the peer shut its side down).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Memory an operation in flight owns.
enum Owned {
    Send {
        token: u64,
        buf: Vec<u8>,
        off: usize,
    },
    Recv {
        token: u64,
        buf: Vec<u8>,
    },
}

/// `struct io_uring_buf`: one entry of the provided-buffer ring.
#[repr(C)]
struct RawBuf {
    addr: u64,
    len: u32,
    bid: u16,
    resv: u16,
}

/// The ring's tail is the `u16` at this byte of its first entry (`struct
/// io_uring_buf_ring` overlays it on that entry's `resv`).
const TAIL_OFFSET: usize = 14;

/// A provided-buffer ring and the buffers it hands to the kernel.
struct Pool {
    entries: NonNull<RawBuf>,
    entries_layout: Layout,
    data: NonNull<u8>,
    data_layout: Layout,
    /// Our copy of the tail (the kernel only reads the shared one).
    tail: u16,
}

impl Pool {
    /// Allocate the buffers and register them as group [`BGID`] of `ring`.
    fn new(ring: &IoUring) -> io::Result<Pool> {
        const _: () = assert!(std::mem::size_of::<RawBuf>() == 16);
        const _: () = assert!(POOL_BUFS.is_power_of_two());
        let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
            .ok()
            .flatten()
            .map_or(4096, |p| p as usize);
        let bad = |_| io::Error::from(io::ErrorKind::InvalidInput);
        let entries_layout =
            Layout::from_size_align(usize::from(POOL_BUFS) * 16, page).map_err(bad)?;
        let data_layout =
            Layout::from_size_align(usize::from(POOL_BUFS) * POOL_BUF_SIZE, page).map_err(bad)?;
        // SAFETY: both layouts have a non-zero size.
        let entries = NonNull::new(unsafe { alloc::alloc_zeroed(entries_layout) });
        // SAFETY: as above.
        let data = NonNull::new(unsafe { alloc::alloc_zeroed(data_layout) });
        let (Some(entries), Some(data)) = (entries, data) else {
            for (p, l) in [(entries, entries_layout), (data, data_layout)] {
                if let Some(p) = p {
                    // SAFETY: allocated just above with this layout.
                    unsafe { alloc::dealloc(p.as_ptr(), l) };
                }
            }
            return Err(io::ErrorKind::OutOfMemory.into());
        };
        let mut pool = Pool {
            entries: entries.cast(),
            entries_layout,
            data,
            data_layout,
            tail: 0,
        };
        // SAFETY: the ring memory is page-aligned, holds POOL_BUFS entries, and stays
        // allocated until the group is unregistered (ServerRing's Drop) or leaked.
        unsafe {
            ring.submitter().register_buf_ring_with_flags(
                pool.entries.as_ptr() as u64,
                POOL_BUFS,
                BGID,
                0,
            )?;
        }
        for bid in 0..POOL_BUFS {
            pool.put(bid);
        }
        Ok(pool)
    }

    /// Hand buffer `bid` (back) to the kernel.
    fn put(&mut self, bid: u16) {
        // Buffer ids come from the kernel, which hands back only those it was given; the
        // mask keeps every address inside the allocation regardless.
        let bid = bid & (POOL_BUFS - 1);
        let i = usize::from(self.tail & (POOL_BUFS - 1));
        let addr = self.data.as_ptr() as u64 + u64::from(bid) * POOL_BUF_SIZE as u64;
        // SAFETY: `i` is within the ring. The kernel reads only the entries between its
        // head and the published tail, and at most POOL_BUFS buffers are ever out, so the
        // entry at the tail is ours until the store below publishes it. The fields are
        // written one by one through raw pointers: no reference covers entry 0's `resv`,
        // which is the tail the kernel reads.
        unsafe {
            let e = self.entries.as_ptr().add(i);
            ptr::addr_of_mut!((*e).addr).write(addr);
            ptr::addr_of_mut!((*e).len).write(POOL_BUF_SIZE as u32);
            ptr::addr_of_mut!((*e).bid).write(bid);
        }
        self.tail = self.tail.wrapping_add(1);
        self.shared_tail().store(self.tail, Ordering::Release);
    }

    fn shared_tail(&self) -> &AtomicU16 {
        // SAFETY: the tail is a 2-byte-aligned u16 inside the ring's first entry, which
        // lives as long as the pool; the kernel only reads it (with acquire), and
        // AtomicU16 has u16's size and alignment.
        unsafe {
            &*self
                .entries
                .as_ptr()
                .cast::<u8>()
                .add(TAIL_OFFSET)
                .cast::<AtomicU16>()
        }
    }

    /// The first `len` bytes of buffer `bid`, which the kernel filled and gave us.
    fn bytes(&self, bid: u16, len: usize) -> &[u8] {
        let bid = usize::from(bid & (POOL_BUFS - 1));
        // SAFETY: buffer `bid` lies within the allocation; the completion that named it
        // handed it to us (the kernel writes it again only after `put`, which takes
        // `&mut self` and so waits for this borrow to end), and the completion queue's
        // acquire load ordered the kernel's writes before this read.
        unsafe {
            std::slice::from_raw_parts(
                self.data.as_ptr().add(bid * POOL_BUF_SIZE),
                len.min(POOL_BUF_SIZE),
            )
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // SAFETY: allocated in `Pool::new` with these layouts; ServerRing drops a pool
        // only once the kernel can no longer use it (unregistered, nothing in flight).
        unsafe {
            alloc::dealloc(self.entries.as_ptr().cast(), self.entries_layout);
            alloc::dealloc(self.data.as_ptr(), self.data_layout);
        }
    }
}

/// A ring for one server thread.
pub struct ServerRing {
    ring: IoUring,
    id: u32,
    pool: Option<Pool>,
    /// Memory of operations in flight, by the index in their `user_data`.
    owned: Vec<Option<Owned>>,
    free: Vec<u32>,
    spare_recv: Vec<Vec<u8>>,
    /// Submitted operations whose last completion has not arrived.
    in_flight: usize,
    ext_arg: bool,
    timer: Box<types::Timespec>,
    timer_armed: bool,
    accept_multishot: bool,
    recv_multishot: bool,
    taskrun: &'static str,
    /// Completions taken from the queue, before they are sorted out.
    batch: Vec<(u64, i32, u32)>,
}

/// Set up a ring of `entries` submissions (completions four times that), with the best
/// task-work mode the kernel has.
fn build(entries: u32) -> io::Result<(IoUring, &'static str)> {
    let cq = entries.saturating_mul(4);
    if let Ok(r) = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_cqsize(cq)
        .build(entries)
    {
        return Ok((r, "deferred task work"));
    }
    if let Ok(r) = IoUring::builder()
        .setup_coop_taskrun()
        .setup_cqsize(cq)
        .build(entries)
    {
        return Ok((r, "cooperative task work"));
    }
    Ok((
        IoUring::builder().setup_cqsize(cq).build(entries)?,
        "task work by interrupt",
    ))
}

/// Check that the kernel's io_uring has what a server needs (accept, receive, send,
/// cancel: Linux 5.6).
fn check_ops(ring: &IoUring) -> io::Result<()> {
    let mut p = Probe::new();
    ring.submitter().register_probe(&mut p).map_err(|e| {
        io::Error::new(
            io::ErrorKind::Unsupported,
            format!("the kernel cannot tell which io_uring operations it has ({e}); Linux 5.6 or newer is needed"),
        )
    })?;
    for (code, name) in [
        (opcode::Accept::CODE, "accept"),
        (opcode::Recv::CODE, "recv"),
        (opcode::Send::CODE, "send"),
        (opcode::AsyncCancel::CODE, "cancel"),
    ] {
        if !p.is_supported(code) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("the kernel's io_uring has no {name} operation (Linux 5.6 or newer has)"),
            ));
        }
    }
    Ok(())
}

/// Whether a server ring can be set up here; the error says why not (io_uring disabled by
/// `kernel.io_uring_disabled`, blocked by seccomp, or a kernel too old).
///
/// # Errors
/// As above.
pub fn probe() -> io::Result<()> {
    let (ring, _) = build(4)?;
    check_ops(&ring)
}

fn os_error(res: i32) -> io::Error {
    io::Error::from_raw_os_error(-res)
}

impl ServerRing {
    /// A ring of `entries` submissions. `as_old_kernel` forgoes the multishot operations,
    /// the provided buffers and the timed waits, as on a kernel before 5.11 (so that
    /// tests reach those paths).
    ///
    /// # Errors
    /// The ring cannot be set up, or the kernel lacks an operation a server needs.
    pub fn new(entries: u32, as_old_kernel: bool) -> io::Result<ServerRing> {
        let (ring, taskrun) = build(entries)?;
        check_ops(&ring)?;
        let pool = if as_old_kernel {
            None
        } else {
            Pool::new(&ring).ok()
        };
        Ok(ServerRing {
            ext_arg: ring.params().is_feature_ext_arg() && !as_old_kernel,
            ring,
            id: NEXT_RING.fetch_add(1, Ordering::Relaxed),
            recv_multishot: pool.is_some(),
            pool,
            owned: Vec::new(),
            free: Vec::new(),
            spare_recv: Vec::new(),
            in_flight: 0,
            timer: Box::new(types::Timespec::new()),
            timer_armed: false,
            accept_multishot: !as_old_kernel,
            taskrun,
            batch: Vec::with_capacity(256),
        })
    }

    /// What this ring uses, for the log.
    pub fn features(&self) -> String {
        let accept = if self.accept_multishot {
            "multishot accept"
        } else {
            "single-shot accept"
        };
        let recv = if self.recv_multishot {
            format!("multishot receive into {POOL_BUFS} provided buffers of {POOL_BUF_SIZE} bytes")
        } else {
            format!("single-shot receive into {OWNED_RECV}-byte buffers")
        };
        let wait = if self.ext_arg {
            "timed waits"
        } else {
            "a timeout submission to wake"
        };
        format!("{accept}, {recv}, {wait}, {}", self.taskrun)
    }

    /// Whether accepts are multishot.
    pub fn multishot_accept(&self) -> bool {
        self.accept_multishot
    }

    /// Submit single-shot accepts from now on (a multishot one failed with `EINVAL`).
    pub fn disable_multishot_accept(&mut self) {
        self.accept_multishot = false;
    }

    /// Whether receives are multishot.
    pub fn multishot_recv(&self) -> bool {
        self.recv_multishot
    }

    /// Submit single-shot receives from now on (a multishot one failed with `EINVAL`).
    pub fn disable_multishot_recv(&mut self) {
        self.recv_multishot = false;
    }

    /// Operations whose last completion has not arrived yet.
    #[cfg(test)]
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Queue `entry`, submitting what is queued first if the queue is full.
    ///
    /// # Safety
    /// Every buffer `entry` points at must stay valid until its last completion.
    unsafe fn push(&mut self, entry: squeue::Entry) -> io::Result<()> {
        for _ in 0..4 {
            // SAFETY: per this function's contract.
            if unsafe { self.ring.submission().push(&entry) }.is_ok() {
                self.in_flight += 1;
                return Ok(());
            }
            match self.ring.submit() {
                Ok(_) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::EBUSY)) => {}
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::other("the io_uring submission queue stays full"))
    }

    /// Keep `o` while its operation is in flight; its index.
    fn hold(&mut self, o: Owned) -> u64 {
        match self.free.pop() {
            Some(i) => {
                self.owned[i as usize] = Some(o);
                u64::from(i)
            }
            None => {
                self.owned.push(Some(o));
                (self.owned.len() - 1) as u64
            }
        }
    }

    fn release(&mut self, i: u64) -> Option<Owned> {
        let o = self.owned.get_mut(i as usize)?.take()?;
        self.free.push(i as u32);
        Some(o)
    }

    /// Accept connections on the listening socket `fd` (blocking or not: the ring waits
    /// for it either way on current kernels; keep it blocking for old ones), multishot
    /// unless disabled.
    ///
    /// # Errors
    /// The submission queue cannot be flushed.
    pub fn accept(&mut self, fd: RawFd) -> io::Result<OpId> {
        let ud = user_data(ACCEPT, 0);
        let e = if self.accept_multishot {
            opcode::AcceptMulti::new(types::Fd(fd))
                .flags(libc::SOCK_CLOEXEC)
                .build()
        } else {
            opcode::Accept::new(types::Fd(fd), ptr::null_mut(), ptr::null_mut())
                .flags(libc::SOCK_CLOEXEC)
                .build()
        };
        // SAFETY: no peer address is asked for: the accept writes no memory of ours.
        unsafe { self.push(e.user_data(ud))? };
        Ok(OpId(ud))
    }

    /// Receive from the socket `fd`: multishot into the provided buffers, or once into a
    /// buffer of the ring's.
    ///
    /// # Errors
    /// The submission queue cannot be flushed.
    pub fn recv(&mut self, fd: RawFd, token: u64) -> io::Result<OpId> {
        if self.recv_multishot && self.pool.is_some() {
            let ud = user_data(RECV_MULTI, token);
            let e = opcode::RecvMulti::new(types::Fd(fd), BGID)
                .build()
                .user_data(ud);
            // SAFETY: it writes only into provided buffers, which the pool keeps
            // allocated while anything is in flight.
            unsafe { self.push(e)? };
            return Ok(OpId(ud));
        }
        let mut buf = self.spare_recv.pop().unwrap_or_else(|| vec![0; OWNED_RECV]);
        let (p, len) = (buf.as_mut_ptr(), buf.len() as u32);
        let i = self.hold(Owned::Recv { token, buf });
        let ud = user_data(RECV_OWNED, i);
        let e = opcode::Recv::new(types::Fd(fd), p, len)
            .build()
            .user_data(ud);
        // SAFETY: the buffer is held in `owned` (moving a Vec leaves its heap memory in
        // place) until this operation's completion.
        if let Err(err) = unsafe { self.push(e) } {
            self.release(i);
            return Err(err);
        }
        Ok(OpId(ud))
    }

    /// Send `buf[off..]` on the socket `fd`; the buffer comes back with the completion.
    ///
    /// # Errors
    /// The submission queue cannot be flushed (the buffer is dropped).
    pub fn send(&mut self, fd: RawFd, token: u64, buf: Vec<u8>, off: usize) -> io::Result<OpId> {
        let off = off.min(buf.len());
        let p = buf[off..].as_ptr();
        let len = (buf.len() - off).min(u32::MAX as usize) as u32;
        let i = self.hold(Owned::Send { token, buf, off });
        let ud = user_data(SEND, i);
        let e = opcode::Send::new(types::Fd(fd), p, len)
            .flags(libc::MSG_NOSIGNAL)
            .build()
            .user_data(ud);
        // SAFETY: the buffer is held in `owned` (its heap memory does not move) until
        // this operation's completion.
        if let Err(err) = unsafe { self.push(e) } {
            self.release(i);
            return Err(err);
        }
        Ok(OpId(ud))
    }

    /// Ask the kernel to cancel `op`; its completion then arrives with `ECANCELED` (or
    /// with its own result, if it finished first).
    ///
    /// # Errors
    /// The submission queue cannot be flushed.
    pub fn cancel(&mut self, op: OpId) -> io::Result<()> {
        let e = opcode::AsyncCancel::new(op.0)
            .build()
            .user_data(user_data(CANCEL, 0));
        // SAFETY: a cancellation touches no memory of ours.
        unsafe { self.push(e) }
    }

    /// Submit what is queued and wait until a completion arrives, `timeout` passes or a
    /// signal comes.
    ///
    /// # Errors
    /// `io_uring_enter` fails other than by timing out or being interrupted.
    pub fn wait(&mut self, timeout: Duration) -> io::Result<()> {
        let r = if self.ext_arg {
            let ts = types::Timespec::from(timeout);
            let args = types::SubmitArgs::new().timespec(&ts);
            self.ring.submitter().submit_with_args(1, &args)
        } else {
            if !self.timer_armed {
                *self.timer = types::Timespec::from(timeout);
                let e = opcode::Timeout::new(&*self.timer)
                    .build()
                    .user_data(user_data(TIMER, 0));
                // SAFETY: the timespec is boxed in `self` and is only rewritten once this
                // timeout has completed.
                unsafe { self.push(e)? };
                self.timer_armed = true;
            }
            self.ring.submit_and_wait(1)
        };
        match r {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Move the completions that arrived into `out`.
    pub fn completions(&mut self, out: &mut Vec<Completion>) {
        let mut batch = std::mem::take(&mut self.batch);
        batch.extend(
            self.ring
                .completion()
                .map(|c| (c.user_data(), c.result(), c.flags())),
        );
        for &(ud, res, flags) in &batch {
            self.complete(ud, res, flags, out);
        }
        batch.clear();
        self.batch = batch;
    }

    fn complete(&mut self, ud: u64, res: i32, flags: u32, out: &mut Vec<Completion>) {
        let more = cqueue::more(flags);
        if !more {
            self.in_flight = self.in_flight.saturating_sub(1);
        }
        let payload = ud & PAYLOAD;
        match ud >> KIND_SHIFT {
            ACCEPT => out.push(Completion::Accepted {
                result: if res >= 0 {
                    Ok(super::own_fd(res))
                } else {
                    Err(os_error(res))
                },
                more,
            }),
            RECV_MULTI => {
                let bid = cqueue::buffer_select(flags);
                let result = match (res, bid) {
                    (n, Some(bid)) if n > 0 => Ok(Received {
                        ring: self.id,
                        len: n as usize,
                        src: Source::Pool(bid),
                    }),
                    (n, bid) => {
                        // An empty or failed receive that still took a buffer: back it goes.
                        if let (Some(bid), Some(pool)) = (bid, self.pool.as_mut()) {
                            pool.put(bid);
                        }
                        if n < 0 {
                            Err(os_error(n))
                        } else if n > 0 {
                            Err(io::Error::other("a multishot receive without its buffer"))
                        } else {
                            Ok(Received {
                                ring: self.id,
                                len: 0,
                                src: Source::Nothing,
                            })
                        }
                    }
                };
                out.push(Completion::Received {
                    token: payload,
                    result,
                    more,
                });
            }
            RECV_OWNED => {
                if let Some(Owned::Recv { token, buf }) = self.release(payload) {
                    let result = if res > 0 {
                        Ok(Received {
                            ring: self.id,
                            len: (res as usize).min(buf.len()),
                            src: Source::Owned(buf),
                        })
                    } else {
                        self.keep_spare(buf);
                        if res < 0 {
                            Err(os_error(res))
                        } else {
                            Ok(Received {
                                ring: self.id,
                                len: 0,
                                src: Source::Nothing,
                            })
                        }
                    };
                    out.push(Completion::Received {
                        token,
                        result,
                        more: false,
                    });
                }
            }
            SEND => {
                if let Some(Owned::Send { token, buf, off }) = self.release(payload) {
                    out.push(Completion::Sent {
                        token,
                        result: if res >= 0 {
                            Ok(res as usize)
                        } else {
                            Err(os_error(res))
                        },
                        buf,
                        off,
                    });
                }
            }
            TIMER => self.timer_armed = false,
            _ => {}
        }
    }

    fn keep_spare(&mut self, buf: Vec<u8>) {
        if self.spare_recv.len() < SPARE_RECV {
            self.spare_recv.push(buf);
        }
    }

    /// Run `f` on the bytes of `r`, then give their buffer back to the ring.
    ///
    /// # Panics
    /// If `r` came from another ring.
    pub fn consume<R>(&mut self, r: Received, f: impl FnOnce(&[u8]) -> R) -> R {
        assert_eq!(r.ring, self.id, "a receive given back to another ring");
        match r.src {
            Source::Nothing => f(&[]),
            Source::Owned(buf) => {
                let out = f(&buf[..r.len]);
                self.keep_spare(buf);
                out
            }
            Source::Pool(bid) => {
                let pool = self
                    .pool
                    .as_mut()
                    .expect("a provided buffer comes from the ring's pool");
                let out = f(pool.bytes(bid, r.len));
                pool.put(bid);
                out
            }
        }
    }
}

impl Drop for ServerRing {
    fn drop(&mut self) {
        if self.in_flight > 0 {
            // Whatever the caller left: cancel it all (Linux 5.19; older kernels reject
            // this, and the wait below is for what the caller cancelled itself).
            let any = opcode::AsyncCancel2::new(types::CancelBuilder::any())
                .build()
                .user_data(user_data(CANCEL, 0));
            // SAFETY: a cancellation touches no memory of ours.
            let _ = unsafe { self.push(any) };
            let until = Instant::now() + DROP_DRAIN;
            let mut out = Vec::new();
            while self.in_flight > 0 && Instant::now() < until {
                if self.wait(Duration::from_millis(10)).is_err() {
                    break;
                }
                self.completions(&mut out);
                for c in out.drain(..) {
                    // Accepted connections close as they drop; buffers go back.
                    if let Completion::Received { result: Ok(r), .. } = c {
                        self.consume(r, |_| ());
                    }
                }
            }
        }
        if self.in_flight > 0 {
            // The kernel may still write into these: leak them rather than free them
            // under it (the ring's own teardown ends the operations later).
            std::mem::forget(self.pool.take());
            std::mem::forget(std::mem::take(&mut self.owned));
        } else if self.pool.is_some() {
            let _ = self.ring.submitter().unregister_buf_ring(BGID);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    /// Wait for completions until `done` says enough (at most a second).
    fn collect(ring: &mut ServerRing, done: impl Fn(&[Completion]) -> bool) -> Vec<Completion> {
        let mut all = Vec::new();
        let until = Instant::now() + Duration::from_secs(1);
        while !done(&all) && Instant::now() < until {
            ring.wait(Duration::from_millis(50)).unwrap();
            ring.completions(&mut all);
        }
        all
    }

    fn round_trip(as_old_kernel: bool) {
        if probe().is_err() {
            return;
        }
        let mut ring = ServerRing::new(16, as_old_kernel).unwrap();
        let (mut a, b) = UnixStream::pair().unwrap();
        ring.recv(b.as_raw_fd(), 7).unwrap();
        a.write_all(b"hello").unwrap();
        let got = collect(&mut ring, |c| !c.is_empty());
        let Some(Completion::Received {
            token: 7,
            result: Ok(r),
            more,
        }) = got.into_iter().next()
        else {
            panic!("no receive")
        };
        assert_eq!(more, ring.multishot_recv());
        assert_eq!(ring.consume(r, <[u8]>::to_vec), b"hello");
        ring.send(b.as_raw_fd(), 9, b"xxworld".to_vec(), 2).unwrap();
        let got = collect(&mut ring, |c| {
            c.iter().any(|c| matches!(c, Completion::Sent { .. }))
        });
        assert!(got.iter().any(|c| matches!(
            c,
            Completion::Sent {
                token: 9,
                result: Ok(5),
                off: 2,
                ..
            }
        )));
        let mut back = [0; 5];
        a.read_exact(&mut back).unwrap();
        assert_eq!(&back, b"world");
        // The end of the stream, after a multishot receive is re-armed if it ended.
        if !ring.multishot_recv() {
            ring.recv(b.as_raw_fd(), 7).unwrap();
        }
        drop(a);
        let got = collect(&mut ring, |c| {
            c.iter()
                .any(|c| matches!(c, Completion::Received { more: false, .. }))
        });
        let mut eof = false;
        for c in got {
            if let Completion::Received { result: Ok(r), .. } = c {
                eof |= r.is_empty();
                ring.consume(r, |_| ());
            }
        }
        assert!(eof);
        // Nothing left in flight but, on the old kernel's path, the timer.
        assert!(ring.in_flight() <= usize::from(as_old_kernel));
    }

    #[test]
    fn a_multishot_receive_and_a_send_round_trip() {
        round_trip(false);
    }

    #[test]
    fn single_shot_receives_and_a_timer_round_trip_too() {
        round_trip(true);
    }

    #[test]
    fn a_cancelled_receive_completes_with_ecanceled() {
        if probe().is_err() {
            return;
        }
        let mut ring = ServerRing::new(16, false).unwrap();
        let (_a, b) = UnixStream::pair().unwrap();
        let op = ring.recv(b.as_raw_fd(), 3).unwrap();
        ring.wait(Duration::from_millis(1)).unwrap();
        ring.cancel(op).unwrap();
        let got = collect(&mut ring, |c| !c.is_empty());
        assert!(matches!(
            &got[..],
            [Completion::Received { token: 3, result: Err(e), more: false }]
                if e.raw_os_error() == Some(libc::ECANCELED)
        ));
        // The cancellation's own completion is counted and swallowed.
        let until = Instant::now() + Duration::from_secs(1);
        let mut rest = Vec::new();
        while ring.in_flight() > 0 && Instant::now() < until {
            ring.wait(Duration::from_millis(10)).unwrap();
            ring.completions(&mut rest);
        }
        assert!(rest.is_empty());
        assert_eq!(ring.in_flight(), 0);
    }
}
