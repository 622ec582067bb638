//! The synchronous front end to io_uring of the io-uring engine (`crate::engine`): every
//! call submits its operations and returns only once each of them has completed, so a
//! buffer the caller lends is never touched by the kernel after the call returns.
//!
//! What it uses, each probed or tried, each with a fallback:
//! - the transport's descriptors as fixed files;
//! - registered buffers for pipes and FIFOs: a buffer that comes back a second time at
//!   the same address and length is registered (two slots: one for what is written, one
//!   for what is read) and later operations on it (or on part of it) use
//!   `WRITE_FIXED`/`READ_FIXED`; a buffer at another address replaces the registration
//!   of its slot. Sockets use `SEND` (with `MSG_WAITALL`, as a blocking write goes out
//!   whole) and `RECV`, which take no registered buffer (only `SEND_ZC` does) and
//!   measured faster here than the file read and write paths the fixed opcodes take. The kernel pins the registered pages itself, so a
//!   registration never makes it touch memory the process has freed; a buffer freed and
//!   allocated again at the very same address and length between two calls would be sent
//!   from (or read into) the pages it was registered with, which the workloads, whose
//!   buffers live as long as the connection, never do;
//! - several operations per submission, linked (`IOSQE_IO_LINK`) so they run in order: a
//!   byte stream's writes go out in the order given, and a short one (which breaks the
//!   chain, cancelling the rest) is followed by a new chain from where it stopped;
//! - a multishot receive on sockets (`IORING_RECV_MULTISHOT`, Linux 6.0) into a ring of
//!   provided buffers the ring owns;
//! - a kernel thread polling the submission queue (`IORING_SETUP_SQPOLL`), whose CPU time
//!   is read from /proc so it can be counted;
//! - a single submitter with deferred task work (Linux 6.1), else neither.

use std::alloc::{self, Layout};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue, types, IoUring, Probe};
use nix::libc;

/// user_data of a linked timeout.
const TIMEOUT: u64 = u64::MAX - 1;
/// user_data of the multishot receive.
const MULTI: u64 = u64::MAX - 2;
/// user_data of a cancellation.
const CANCEL: u64 = u64::MAX - 3;
/// `IORING_RECVSEND_POLL_FIRST` (the io-uring crate keeps its constants private).
const RECVSEND_POLL_FIRST: u16 = 1;
/// user_data of a deferred send.
const DEFERRED: u64 = u64::MAX - 4;
/// The largest send that may be deferred (copied into the ring's own buffer): copying
/// more would cost more than the system call it saves.
pub const DEFER_MAX: usize = 4096;
/// The buffer group of the multishot receive's provided buffers.
const BGID: u16 = 0x5b;
/// Registered-buffer slots: what is sent, what is received.
const SEND_SLOT: usize = 0;
const RECV_SLOT: usize = 1;

/// How a ring is set up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingOptions {
    /// Operations one call may have in flight (the ring gets room for twice as many).
    pub in_flight: u32,
    /// `IORING_SETUP_SQPOLL`, with the kernel thread going to sleep after this long idle.
    pub sqpoll_idle: Option<Duration>,
}

/// What the ring used and did, for the report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RingUse {
    /// Submissions (batches handed to the kernel), each one `io_uring_enter` unless a
    /// kernel thread polls the queue.
    pub submissions: u64,
    /// Operations that went out on a registered buffer.
    pub fixed_ops: u64,
    /// Completions of the multishot receive.
    pub multishot_completions: u64,
    /// `--sqpoll`: the thread that made the ring (its polling thread is named after it).
    pub sqpoll_tid: Option<i32>,
    /// Why a feature asked for was not used.
    pub notes: Vec<String>,
}

/// Whether io_uring can be used here; the error says why not.
///
/// # Errors
/// The reason io_uring is unavailable (not built in, disabled by sysctl, seccomp).
pub fn probe() -> io::Result<()> {
    IoUring::new(2).map(drop)
}

/// A registered buffer: where it starts and how long it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Region {
    addr: usize,
    len: usize,
}

impl Region {
    fn of(p: *const u8, len: usize) -> Region {
        Region {
            addr: p as usize,
            len,
        }
    }
    fn contains(&self, o: Region) -> bool {
        o.addr >= self.addr && o.addr + o.len <= self.addr + self.len
    }
}

/// The registered-buffer table: a slot per direction, and the buffer last seen in each
/// slot (registered when it comes back).
#[derive(Debug, Default)]
struct Registry {
    /// The kernel's table is set up (sparse, two slots).
    on: bool,
    slots: [Option<Region>; 2],
    seen: [Option<Region>; 2],
}

impl Registry {
    /// The slot whose registered buffer holds `r`, registering `r` in `slot` if it is
    /// the buffer seen there last time; `None`: use a plain operation.
    fn lookup(
        &mut self,
        ring: &IoUring,
        slot: usize,
        r: Region,
        notes: &mut Vec<String>,
    ) -> Option<u16> {
        if !self.on || r.len == 0 {
            return None;
        }
        if self.slots[slot].is_some_and(|s| s.contains(r)) {
            return Some(slot as u16);
        }
        if self.seen[slot] != Some(r) {
            self.seen[slot] = Some(r);
            return None;
        }
        let iov = libc::iovec {
            iov_base: r.addr as *mut libc::c_void,
            iov_len: r.len,
        };
        // SAFETY: the kernel pins the pages of this range when it registers them and
        // holds them until the slot is updated or the ring is closed, so the range
        // being freed later cannot make it write into memory the process reuses; it is
        // valid now (the caller lends it for the current call).
        match unsafe {
            ring.submitter()
                .register_buffers_update(slot as u32, &[iov], None)
        } {
            Ok(()) => {
                self.slots[slot] = Some(r);
                self.seen[slot] = None;
                Some(slot as u16)
            }
            Err(e) => {
                // RLIMIT_MEMLOCK, a buffer over 1 GiB: go on with plain operations.
                self.on = false;
                notes.push(format!(
                    "registered buffers: the kernel refused to register a {}-byte buffer: {e}",
                    r.len
                ));
                None
            }
        }
    }
}

/// `struct io_uring_buf`: one entry of a provided-buffer ring.
#[repr(C)]
struct RawBuf {
    addr: u64,
    len: u32,
    bid: u16,
    resv: u16,
}

/// The ring's tail is the `u16` at this byte of its first entry.
const TAIL_OFFSET: usize = 14;

/// A provided-buffer ring for the multishot receive, and the buffers it hands out.
struct Pool {
    entries: NonNull<RawBuf>,
    entries_layout: Layout,
    data: NonNull<u8>,
    data_layout: Layout,
    count: u16,
    size: usize,
    tail: u16,
}

impl Pool {
    /// `count` buffers (a power of two) of `size` bytes, registered as group [`BGID`].
    fn new(ring: &IoUring, count: u16, size: usize) -> io::Result<Pool> {
        const _: () = assert!(std::mem::size_of::<RawBuf>() == 16);
        debug_assert!(count.is_power_of_two());
        let page = 4096;
        let bad = |_| io::Error::from(io::ErrorKind::InvalidInput);
        let entries_layout = Layout::from_size_align(usize::from(count) * 16, page).map_err(bad)?;
        let data_layout = Layout::from_size_align(usize::from(count) * size, page).map_err(bad)?;
        // SAFETY: both layouts have a non-zero size.
        let entries = NonNull::new(unsafe { alloc::alloc_zeroed(entries_layout) });
        // SAFETY: as above.
        let data = NonNull::new(unsafe { alloc::alloc(data_layout) });
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
            count,
            size,
            tail: 0,
        };
        // SAFETY: the ring memory is page-aligned, holds `count` entries, and stays
        // allocated until the group is unregistered (Ring's Drop) or leaked.
        unsafe {
            ring.submitter().register_buf_ring_with_flags(
                pool.entries.as_ptr() as u64,
                count,
                BGID,
                0,
            )?;
        }
        for bid in 0..count {
            pool.put(bid);
        }
        Ok(pool)
    }

    /// Hand buffer `bid` (back) to the kernel.
    fn put(&mut self, bid: u16) {
        let mask = self.count - 1;
        let bid = bid & mask;
        let i = usize::from(self.tail & mask);
        let addr = self.data.as_ptr() as u64 + u64::from(bid) * self.size as u64;
        // SAFETY: `i` is within the ring. The kernel reads only the entries between its
        // head and the published tail, and at most `count` buffers are ever out, so the
        // entry at the tail is ours until the store below publishes it. Fields are
        // written through raw pointers: no reference covers entry 0's `resv` (the tail).
        unsafe {
            let e = self.entries.as_ptr().add(i);
            ptr::addr_of_mut!((*e).addr).write(addr);
            ptr::addr_of_mut!((*e).len).write(self.size as u32);
            ptr::addr_of_mut!((*e).bid).write(bid);
        }
        self.tail = self.tail.wrapping_add(1);
        // SAFETY: the tail is a 2-byte-aligned u16 inside the first entry, alive as
        // long as the pool; the kernel only reads it; AtomicU16 has u16's layout.
        let shared = unsafe {
            &*self
                .entries
                .as_ptr()
                .cast::<u8>()
                .add(TAIL_OFFSET)
                .cast::<AtomicU16>()
        };
        shared.store(self.tail, Ordering::Release);
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with these layouts; the Ring drops a pool only once
        // nothing in flight can write into it (or leaks it).
        unsafe {
            alloc::dealloc(self.entries.as_ptr().cast(), self.entries_layout);
            alloc::dealloc(self.data.as_ptr(), self.data_layout);
        }
    }
}

// SAFETY: the pool owns its memory outright; the kernel is told about it through the
// ring, which moves with it.
unsafe impl Send for Pool {}

/// The multishot receive's state.
#[derive(Debug, Default)]
struct Multishot {
    /// A request is armed (it has not posted its last completion).
    armed: bool,
    /// The end of the data was seen.
    ended: bool,
    /// An error to return once the bytes before it are counted.
    error: Option<i32>,
    /// Bytes completed but not yet returned.
    pending: u64,
}

/// One ring with up to two registered descriptors (send and receive).
pub struct Ring {
    ring: IoUring,
    fds: Vec<RawFd>,
    socket: Vec<bool>,
    capacity: usize,
    registry: Registry,
    pool: Option<Pool>,
    multi: Multishot,
    /// Whether multishot receives were found missing (so not tried again).
    no_multishot: bool,
    used: RingUse,
    results: Vec<i32>,
    /// Completions taken from the queue (kept to reuse its memory).
    cqes: Vec<cqueue::Entry>,
    /// The copy a deferred send reads from, owned by the ring.
    deferred: Vec<u8>,
    /// A deferred send is queued or in flight.
    deferred_pending: bool,
    /// What the last deferred send completed with (taken by the next call).
    deferred_result: Option<(i32, usize)>,
    /// The last operation was a receive (a send now is an answer or the next request
    /// of a request/response exchange: deferring it to the receive that follows saves
    /// a system call).
    last_was_read: bool,
}

fn is_socket(fd: RawFd) -> bool {
    nix::sys::stat::fstat(fd)
        .map(|s| s.st_mode & libc::S_IFMT == libc::S_IFSOCK)
        .unwrap_or(false)
}

fn timespec(t: Duration) -> types::Timespec {
    types::Timespec::new()
        .sec(t.as_secs())
        .nsec(t.subsec_nanos())
}

fn result(n: i32) -> io::Result<usize> {
    match n {
        n if n >= 0 => Ok(n as usize),
        n if -n == libc::ECANCELED || -n == libc::ETIME => Err(io::ErrorKind::TimedOut.into()),
        n => Err(io::Error::from_raw_os_error(-n)),
    }
}

/// One operation of a batch: which descriptor, what memory, how much.
#[derive(Clone, Copy)]
enum Op {
    Write {
        fd: RawFd,
        p: *const u8,
        len: usize,
    },
    /// `flags`: a socket's `recv` flags (`None`: none; a pipe is `read` regardless).
    Read {
        fd: RawFd,
        p: *mut u8,
        len: usize,
        flags: Option<i32>,
    },
}

impl Ring {
    /// A ring for a transport whose sends go to `send_fd` and receives come from `recv_fd`.
    ///
    /// # Errors
    /// If the ring cannot be set up.
    pub fn new(
        send_fd: Option<RawFd>,
        recv_fd: Option<RawFd>,
        opts: RingOptions,
    ) -> io::Result<Ring> {
        let entries = (2 * opts.in_flight.max(4)).next_power_of_two().min(4096);
        let mut used = RingUse::default();
        let ring = match opts.sqpoll_idle {
            Some(idle) => {
                let idle_ms = idle.as_millis().clamp(1, u32::MAX as u128) as u32;
                IoUring::builder()
                    .setup_sqpoll(idle_ms)
                    .setup_single_issuer()
                    .build(entries)
                    .or_else(|_| IoUring::builder().setup_sqpoll(idle_ms).build(entries))
                    .map_err(|e| {
                        io::Error::new(
                            e.kind(),
                            format!("--sqpoll: the kernel refused a ring with a polling thread (IORING_SETUP_SQPOLL): {e}"),
                        )
                    })?
            }
            // One thread submits and reaps, so completions can be run when it waits
            // (DEFER_TASKRUN) instead of interrupting it; older kernels lack the flags.
            None => IoUring::builder()
                .setup_single_issuer()
                .setup_defer_taskrun()
                .build(entries)
                .or_else(|_| IoUring::new(entries))?,
        };
        let mut fds: Vec<RawFd> = [send_fd, recv_fd].into_iter().flatten().collect();
        fds.dedup();
        if !fds.is_empty() {
            ring.submitter().register_files(&fds)?;
        }
        let registry = Registry {
            on: match ring.submitter().register_buffers_sparse(2) {
                Ok(()) => true,
                Err(e) => {
                    used.notes
                        .push(format!("registered buffers: unavailable ({e})"));
                    false
                }
            },
            ..Registry::default()
        };
        if opts.sqpoll_idle.is_some() {
            // The maker, as the kernel names it until its thread runs (see sqpoll_cpu).
            used.sqpoll_tid = Some(nix::unistd::gettid().as_raw());
        }
        Ok(Ring {
            capacity: ring.params().sq_entries() as usize,
            socket: fds.iter().map(|&f| is_socket(f)).collect(),
            ring,
            fds,
            registry,
            pool: None,
            multi: Multishot::default(),
            no_multishot: false,
            used,
            results: Vec::new(),
            cqes: Vec::new(),
            deferred: Vec::new(),
            deferred_pending: false,
            deferred_result: None,
            last_was_read: false,
        })
    }

    /// What the ring used and did so far.
    pub fn used(&self) -> &RingUse {
        &self.used
    }

    /// CPU time the kernel thread polling this ring has used so far (`--sqpoll`), from
    /// `/proc/self/task/TID/schedstat` (nanoseconds).
    ///
    /// The thread is looked up when asked, not at setup: until the kernel thread has
    /// started, the ring's fdinfo names the thread that made the ring, whose own CPU must
    /// not be counted twice.
    pub fn sqpoll_cpu(&self) -> Option<Duration> {
        let maker = self.used.sqpoll_tid?;
        sqpoll_thread(self.ring.as_raw_fd())
            .filter(|&t| t != maker && t != nix::unistd::gettid().as_raw())
            .or_else(|| sqpoll_thread_named(maker))
            .and_then(thread_cpu)
    }

    fn fixed(&self, fd: RawFd) -> io::Result<(types::Fixed, bool)> {
        self.fds
            .iter()
            .position(|&f| f == fd)
            .map(|i| (types::Fixed(i as u32), self.socket[i]))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "descriptor not registered"))
    }

    /// The submission entry of `op`.
    fn entry(&mut self, op: Op) -> io::Result<squeue::Entry> {
        Ok(match op {
            Op::Write { fd, p, len } => {
                let (f, socket) = self.fixed(fd)?;
                let len32 = len.min(u32::MAX as usize) as u32;
                if socket {
                    // A socket's write is a SEND told to go out whole, as a blocking
                    // write does (the kernel finishes a partial one itself, and a short
                    // one would cut a chain); SEND takes no registered buffer (only
                    // SEND_ZC does).
                    opcode::Send::new(f, p, len32)
                        .flags(libc::MSG_WAITALL | libc::MSG_NOSIGNAL)
                        .build()
                } else if let Some(i) = self.registry.lookup(
                    &self.ring,
                    SEND_SLOT,
                    Region::of(p, len),
                    &mut self.used.notes,
                ) {
                    self.used.fixed_ops += 1;
                    opcode::WriteFixed::new(f, p, len32, i)
                        .offset(u64::MAX)
                        .build()
                } else {
                    opcode::Write::new(f, p, len32).offset(u64::MAX).build()
                }
            }
            Op::Read { fd, p, len, flags } => {
                let (f, socket) = self.fixed(fd)?;
                let len32 = len.min(u32::MAX as usize) as u32;
                if socket {
                    // RECV, not READ_FIXED: a socket's read through the file's read
                    // path arms its poll the same way but costs more (about 0.4 us of
                    // a 17 us TCP round trip here), and a short one would cut a chain.
                    // After a send in the same submission (a request, an answer)
                    // the reply cannot be there yet: arm the poll first
                    // (IORING_RECVSEND_POLL_FIRST) instead of trying a receive that
                    // would find the socket empty.
                    let poll_first = if self.deferred_pending && flags.is_none() {
                        RECVSEND_POLL_FIRST
                    } else {
                        0
                    };
                    opcode::Recv::new(f, p, len32)
                        .flags(flags.unwrap_or(0))
                        .ioprio(poll_first)
                        .build()
                } else if let Some(i) = self.registry.lookup(
                    &self.ring,
                    RECV_SLOT,
                    Region::of(p, len),
                    &mut self.used.notes,
                ) {
                    self.used.fixed_ops += 1;
                    opcode::ReadFixed::new(f, p, len32, i)
                        .offset(u64::MAX)
                        .build()
                } else {
                    opcode::Read::new(f, p, len32).offset(u64::MAX).build()
                }
            }
        })
    }

    /// Push `ops` (user_data: their index), linked in order when `link`, submit them in
    /// one go, and wait until every one has completed; their results go to
    /// `self.results`. With `timeout`, a wait that sees nothing for that long cancels
    /// them (their results: `-ECANCELED`).
    fn run(&mut self, ops: &[Op], link: bool, timeout: Option<Duration>) -> io::Result<()> {
        let n = ops.len();
        debug_assert!(n > 0 && n + 2 <= self.capacity);
        self.results.clear();
        self.results.resize(n, i32::MIN);
        let single_timeout = timeout.filter(|_| n == 1);
        let ts = single_timeout.map(timespec);
        let mut entries = Vec::with_capacity(n);
        for (i, &op) in ops.iter().enumerate() {
            let mut e = self.entry(op)?.user_data(i as u64);
            if (link && i + 1 < n) || ts.is_some() {
                e = e.flags(squeue::Flags::IO_LINK);
            }
            entries.push(e);
        }
        {
            let mut sq = self.ring.submission();
            // All or nothing: an entry left queued by a failed call would point at
            // memory its caller no longer lends.
            if sq.capacity() - sq.len() < entries.len() + usize::from(ts.is_some()) {
                return Err(io::Error::other("submission queue full"));
            }
            for e in &entries {
                // SAFETY: every buffer an entry points at is borrowed by the caller for
                // this call, and this function returns only once every entry has
                // completed (or aborts the process); the timespec lives on this stack
                // until then too.
                unsafe { sq.push(e) }.map_err(|_| io::Error::other("submission queue full"))?;
            }
            if let Some(ts) = &ts {
                let t = opcode::LinkTimeout::new(ts).build().user_data(TIMEOUT);
                // SAFETY: as above.
                unsafe { sq.push(&t) }.map_err(|_| io::Error::other("submission queue full"))?;
            }
        }
        self.used.submissions += 1;
        let mut want = n + usize::from(ts.is_some()) + usize::from(self.deferred_pending);
        let mut cancelled = false;
        let batch_timeout = timeout.filter(|_| n > 1 && self.ring.params().is_feature_ext_arg());
        while want > 0 {
            let waited = match (batch_timeout, cancelled) {
                (Some(t), false) => {
                    let ts = timespec(t);
                    let args = types::SubmitArgs::new().timespec(&ts);
                    self.ring.submitter().submit_with_args(want, &args)
                }
                // All of them at once: one enter for the whole chain.
                _ => self.ring.submitter().submit_and_wait(want),
            };
            match waited {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ETIME) => {
                    // Nothing came: cancel the chain (its head; the rest follow).
                    let c = opcode::AsyncCancel::new(0).build().user_data(CANCEL);
                    // SAFETY: a cancellation points at no memory.
                    if unsafe { self.ring.submission().push(&c) }.is_ok() {
                        want += 1;
                        cancelled = true;
                    }
                }
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
                    ) => {}
                Err(e) => {
                    // Operations still in flight point at the caller's memory, which
                    // returning would let it free: stopping here is the only sound way.
                    eprintln!("sockbench: io_uring_enter failed with operations in flight: {e}");
                    std::process::abort();
                }
            }
            let mut cqes = std::mem::take(&mut self.cqes);
            cqes.clear();
            cqes.extend(self.ring.completion());
            for cqe in &cqes {
                match cqe.user_data() {
                    MULTI => self.multi_completion(cqe),
                    TIMEOUT | CANCEL => want -= 1,
                    DEFERRED => {
                        self.deferred_pending = false;
                        self.deferred_result = Some((cqe.result(), self.deferred.len()));
                        want -= 1;
                    }
                    i if (i as usize) < n => {
                        self.results[i as usize] = cqe.result();
                        want -= 1;
                    }
                    _ => {}
                }
            }
            self.cqes = cqes;
        }
        self.deferred_outcome()
    }

    /// The error of the last deferred send, if it failed or went out short (once).
    fn deferred_outcome(&mut self) -> io::Result<()> {
        match self.deferred_result.take() {
            Some((r, _)) if r < 0 => Err(io::Error::new(
                io::Error::from_raw_os_error(-r).kind(),
                format!(
                    "an earlier send failed: {}",
                    io::Error::from_raw_os_error(-r)
                ),
            )),
            Some((r, len)) if r as usize != len => Err(io::Error::other(format!(
                "an earlier send went out short: {r} of {len} bytes"
            ))),
            _ => Ok(()),
        }
    }

    /// Submit a deferred send still queued and wait for it.
    ///
    /// # Errors
    /// The deferred send's error.
    pub fn flush(&mut self) -> io::Result<()> {
        while self.deferred_pending {
            self.used.submissions += 1;
            match self.ring.submitter().submit_and_wait(1) {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
                    ) => {}
                Err(e) => return Err(e),
            }
            let cqes: Vec<cqueue::Entry> = self.ring.completion().collect();
            for cqe in &cqes {
                match cqe.user_data() {
                    DEFERRED => {
                        self.deferred_pending = false;
                        self.deferred_result = Some((cqe.result(), self.deferred.len()));
                    }
                    MULTI => self.multi_completion(cqe),
                    _ => {}
                }
            }
        }
        self.deferred_outcome()
    }

    /// `write(2)` through the ring.
    ///
    /// # Errors
    /// As `write(2)`.
    pub fn write(&mut self, fd: RawFd, buf: &[u8]) -> io::Result<usize> {
        if self.last_was_read && buf.len() <= DEFER_MAX && !buf.is_empty() {
            return self.write_deferred(fd, buf);
        }
        let op = Op::Write {
            fd,
            p: buf.as_ptr(),
            len: buf.len(),
        };
        self.run(&[op], false, None)?;
        result(self.results[0])
    }

    /// `read(2)` through the ring, giving up after `timeout` (as `TimedOut`).
    ///
    /// # Errors
    /// As `read(2)`.
    pub fn read(
        &mut self,
        fd: RawFd,
        buf: &mut [u8],
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        let op = Op::Read {
            fd,
            p: buf.as_mut_ptr(),
            len: buf.len(),
            flags: None,
        };
        self.run(&[op], false, timeout)?;
        self.last_was_read = true;
        result(self.results[0])
    }

    /// A small send right after a receive (an answer, or a request/response exchange's
    /// next request): copied into the ring's own buffer and queued, to be submitted with
    /// the next call's operations, in the same `io_uring_enter` (so a round trip costs
    /// one system call per side, not two). Returns the length at once; the kernel's
    /// result comes with the next call, which fails if this send did; [`Ring::flush`]
    /// submits it on its own.
    fn write_deferred(&mut self, fd: RawFd, buf: &[u8]) -> io::Result<usize> {
        self.flush()?;
        self.last_was_read = false;
        let (f, socket) = self.fixed(fd)?;
        self.deferred.clear();
        self.deferred.extend_from_slice(buf);
        let (p, len) = (self.deferred.as_ptr(), self.deferred.len() as u32);
        let e = if socket {
            opcode::Send::new(f, p, len)
                .flags(libc::MSG_WAITALL | libc::MSG_NOSIGNAL)
                .build()
        } else {
            opcode::Write::new(f, p, len).offset(u64::MAX).build()
        }
        .user_data(DEFERRED);
        // SAFETY: the copy is the ring's own; it is neither changed nor freed while the
        // send is pending (the next deferral flushes first, and Drop flushes or leaks).
        unsafe { self.ring.submission().push(&e) }
            .map_err(|_| io::Error::other("submission queue full"))?;
        self.deferred_pending = true;
        Ok(buf.len())
    }

    /// The most operations one submission of a call carries.
    pub fn max_batch(&self) -> usize {
        (self.capacity / 2).max(1)
    }

    /// Write all of `buf`, `n` times in a row, with up to [`Ring::max_batch`] writes in
    /// flight in one submission (linked, so they reach the descriptor in order; on a
    /// stream socket each with `MSG_WAITALL`). A short write ends its chain; what it left
    /// and the writes after it go in the next. Returns the bytes the kernel reported
    /// written (all of them, unless it fails) and the submissions made.
    ///
    /// # Errors
    /// The first failed write's error.
    pub fn write_repeated(&mut self, fd: RawFd, buf: &[u8], n: usize) -> io::Result<(u64, u64)> {
        self.flush()?;
        let before = self.used.submissions;
        let mut done = 0u64;
        let len = buf.len();
        // The message in progress and how much of it went out.
        let (mut msg, mut off) = (0usize, 0usize);
        let mut ops = Vec::with_capacity(n.min(self.max_batch()));
        while msg < n {
            ops.clear();
            let mut first = off;
            for _ in msg..n.min(msg + self.max_batch()) {
                ops.push(Op::Write {
                    fd,
                    p: buf[first..].as_ptr(),
                    len: len - first,
                });
                first = 0;
            }
            self.run(&ops, true, None)?;
            let mut cut = false;
            for (i, &r) in self.results.iter().enumerate() {
                if cut {
                    if r > 0 {
                        return Err(io::Error::other(
                            "io_uring ran a write after a short one in a linked chain: the bytes would be out of order",
                        ));
                    }
                    continue;
                }
                match r {
                    r if r >= 0 => {
                        let want = if i == 0 { len - off } else { len };
                        done += r as u64;
                        if r as usize == want {
                            msg += 1;
                            off = 0;
                        } else {
                            // Short: the chain stopped here; go on from this byte.
                            off = len - want + r as usize;
                            if r == 0 && want > 0 {
                                return Err(io::ErrorKind::WriteZero.into());
                            }
                            cut = true;
                        }
                    }
                    r if -r == libc::ECANCELED => cut = true,
                    r if -r == libc::EINTR || -r == libc::EAGAIN => cut = true,
                    r => return Err(io::Error::from_raw_os_error(-r)),
                }
            }
        }
        Ok((done, self.used.submissions - before))
    }

    /// Send each of `msgs` as one message, linked in one submission; returns how many
    /// went out (a prefix; at least one unless the first fails).
    ///
    /// # Errors
    /// The first send's error, if it failed.
    pub fn send_batch(&mut self, fd: RawFd, msgs: &[&[u8]]) -> io::Result<usize> {
        let msgs = &msgs[..msgs.len().min(self.max_batch())];
        if msgs.is_empty() {
            return Ok(0);
        }
        let ops: Vec<Op> = msgs
            .iter()
            .map(|m| Op::Write {
                fd,
                p: m.as_ptr(),
                len: m.len(),
            })
            .collect();
        self.run(&ops, true, None)?;
        let mut sent = 0;
        for (i, &r) in self.results.iter().enumerate() {
            match r {
                r if r >= 0 && r as usize == msgs[i].len() => sent += 1,
                r if r >= 0 => {
                    return Err(io::Error::other(format!(
                        "message truncated: sent {r} of {} bytes",
                        msgs[i].len()
                    )))
                }
                r if i == 0 => return Err(io::Error::from_raw_os_error(-r)),
                _ => break,
            }
        }
        Ok(sent)
    }

    /// Receive up to `bufs.len()` messages in one submission: the first waits (up to
    /// `timeout`), the others take only what is already queued (`MSG_DONTWAIT`); each
    /// length goes to `lens`. Returns how many arrived.
    ///
    /// # Errors
    /// The first receive's error (`TimedOut` after `timeout`).
    pub fn recv_batch(
        &mut self,
        fd: RawFd,
        bufs: &mut [&mut [u8]],
        lens: &mut [usize],
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        let n = bufs.len().min(lens.len()).min(self.max_batch());
        if n == 0 {
            return Ok(0);
        }
        let ops: Vec<Op> = bufs[..n]
            .iter_mut()
            .enumerate()
            .map(|(i, b)| Op::Read {
                fd,
                p: b.as_mut_ptr(),
                len: b.len(),
                flags: Some(if i == 0 { 0 } else { libc::MSG_DONTWAIT }),
            })
            .collect();
        self.run(&ops, true, timeout)?;
        let mut got = 0;
        for (i, &r) in self.results.iter().enumerate() {
            match r {
                r if r >= 0 => {
                    lens[i] = r as usize;
                    got += 1;
                    if r == 0 {
                        break; // the end marker: nothing after it counts
                    }
                }
                r if i == 0 => return result(r).map(|_| 0),
                _ => break,
            }
        }
        Ok(got)
    }

    /// Whether [`Ring::recv_multishot`] can work on `fd` here (probed once): a socket,
    /// on a kernel with multishot receives (Linux 6.0).
    ///
    /// # Errors
    /// Why not (also kept in the notes).
    pub fn multishot_available(&mut self, fd: RawFd) -> Result<(), String> {
        if self.no_multishot {
            return Err("multishot receive: unavailable".into());
        }
        let socket = self.fixed(fd).map(|(_, s)| s).unwrap_or(false);
        let mut probe = Probe::new();
        // The probe cannot see a flag: SEND_ZC came in the same release (6.0) as
        // multishot receives.
        let why = if !socket {
            // A multishot read (6.7) is refused on pipes here (EBADFD).
            Some("multishot receive: sockets only; a pipe is read once per submission")
        } else if self.ring.submitter().register_probe(&mut probe).is_err()
            || !probe.is_supported(opcode::SendZc::CODE)
        {
            Some("multishot receive: this kernel lacks it (Linux 6.0+): one read per submission")
        } else {
            None
        };
        match why {
            None => Ok(()),
            Some(why) => {
                self.no_multishot = true;
                self.used.notes.push(why.into());
                Err(why.into())
            }
        }
    }

    /// Receive from `fd` through one multishot request into `count` provided buffers of
    /// `size` bytes (set up on first use); the bytes are counted and the buffers handed
    /// straight back, unread. Waits for at least one completion and takes every one
    /// waiting; returns their bytes, 0 at the end of the data.
    ///
    /// # Errors
    /// The receive's error; `Unsupported` if the pool cannot be set up (the caller reads
    /// instead).
    pub fn recv_multishot(&mut self, fd: RawFd, count: u16, size: usize) -> io::Result<usize> {
        self.flush()?;
        if self.pool.is_none() {
            let count = count.clamp(2, 1 << 14).next_power_of_two();
            self.pool = Some(
                Pool::new(&self.ring, count, size.clamp(1, 1 << 30)).map_err(|e| {
                    self.no_multishot = true;
                    let why = format!(
                        "multishot receive: no provided-buffer ring ({e}): one read per submission"
                    );
                    self.used.notes.push(why.clone());
                    io::Error::new(io::ErrorKind::Unsupported, why)
                })?,
            );
        }
        loop {
            if self.multi.pending > 0 {
                let n = std::mem::take(&mut self.multi.pending);
                return Ok(n as usize);
            }
            if let Some(e) = self.multi.error.take() {
                return Err(io::Error::from_raw_os_error(e));
            }
            if self.multi.ended {
                return Ok(0);
            }
            if !self.multi.armed {
                let (f, socket) = self.fixed(fd)?;
                if !socket {
                    return Err(io::Error::new(
                        io::ErrorKind::Unsupported,
                        "multishot receive: sockets only",
                    ));
                }
                let e = opcode::RecvMulti::new(f, BGID).build().user_data(MULTI);
                // SAFETY: it writes only into the pool's buffers, which the ring keeps
                // allocated while the request is armed (and leaks if dropped armed).
                unsafe { self.ring.submission().push(&e) }
                    .map_err(|_| io::Error::other("submission queue full"))?;
                self.multi.armed = true;
            }
            self.used.submissions += 1;
            match self.ring.submitter().submit_and_wait(1) {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
                    ) => {}
                Err(e) => return Err(e),
            }
            let cqes: Vec<cqueue::Entry> = self.ring.completion().collect();
            for cqe in &cqes {
                if cqe.user_data() == MULTI {
                    self.multi_completion(cqe);
                }
            }
        }
    }

    /// Count one completion of the multishot receive and give its buffer back.
    fn multi_completion(&mut self, cqe: &cqueue::Entry) {
        self.used.multishot_completions += 1;
        let flags = cqe.flags();
        if let (Some(bid), Some(pool)) = (cqueue::buffer_select(flags), self.pool.as_mut()) {
            pool.put(bid);
        }
        if !cqueue::more(flags) {
            self.multi.armed = false;
        }
        match cqe.result() {
            0 => self.multi.ended = true,
            n if n > 0 => self.multi.pending += n as u64,
            // Every buffer was in use: arm it again (the buffers are back by now).
            n if -n == libc::ENOBUFS => {}
            n => self.multi.error = Some(-n),
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        if self.deferred_pending {
            // Its error has no one to go to now.
            let _ = self.flush();
            if self.deferred_pending {
                // The kernel may still read the copy: leak it rather than free it.
                std::mem::forget(std::mem::take(&mut self.deferred));
            }
        }
        if !self.multi.armed {
            if self.pool.is_some() {
                let _ = self.ring.submitter().unregister_buf_ring(BGID);
            }
            return;
        }
        // Cancel the armed receive and wait a moment for its last completion.
        let c = opcode::AsyncCancel::new(MULTI).build().user_data(CANCEL);
        // SAFETY: a cancellation points at no memory.
        if unsafe { self.ring.submission().push(&c) }.is_ok() {
            let until = Instant::now() + Duration::from_millis(200);
            while self.multi.armed && Instant::now() < until {
                let ts = timespec(Duration::from_millis(10));
                let args = types::SubmitArgs::new().timespec(&ts);
                let _ = self.ring.submitter().submit_with_args(1, &args);
                let cqes: Vec<cqueue::Entry> = self.ring.completion().collect();
                for cqe in &cqes {
                    if cqe.user_data() == MULTI {
                        self.multi_completion(cqe);
                    }
                }
            }
        }
        if self.multi.armed {
            // The kernel may still write into the pool: leak it rather than free it.
            std::mem::forget(self.pool.take());
        } else if self.pool.is_some() {
            let _ = self.ring.submitter().unregister_buf_ring(BGID);
        }
    }
}

/// The thread polling the ring `ring_fd`'s submission queue: `SqThread:` in its fdinfo.
fn sqpoll_thread(ring_fd: RawFd) -> Option<i32> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{ring_fd}")).ok()?;
    sq_thread_of(&info)
}

/// The kernel thread that polls rings made by thread `maker`: the task of this process
/// named `iou-sqp-<maker>`.
fn sqpoll_thread_named(maker: i32) -> Option<i32> {
    let want = format!("iou-sqp-{maker}");
    std::fs::read_dir("/proc/self/task")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&t| t != maker)
        .find(|t| {
            std::fs::read_to_string(format!("/proc/self/task/{t}/comm"))
                .is_ok_and(|c| c.trim() == want)
        })
}

/// `SqThread:` of an io_uring's fdinfo (-1 or absent: none).
fn sq_thread_of(fdinfo: &str) -> Option<i32> {
    fdinfo
        .lines()
        .find_map(|l| l.strip_prefix("SqThread:"))
        .and_then(|v| v.trim().parse::<i32>().ok())
        .filter(|&t| t > 0)
}

/// CPU time of thread `tid` of this process (schedstat's first field, nanoseconds).
pub fn thread_cpu(tid: i32) -> Option<Duration> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    schedstat_cpu(&s)
}

fn schedstat_cpu(s: &str) -> Option<Duration> {
    s.split_whitespace()
        .next()?
        .parse::<u64>()
        .ok()
        .map(Duration::from_nanos)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;

    fn ring_for(a: &UnixStream, b: &UnixStream, in_flight: u32) -> Ring {
        Ring::new(
            Some(a.as_raw_fd()),
            Some(b.as_raw_fd()),
            RingOptions {
                in_flight,
                sqpoll_idle: None,
            },
        )
        .unwrap()
    }

    #[test]
    fn fdinfo_and_schedstat_are_read_as_the_kernel_writes_them() {
        let info = "pos:\t0\nflags:\t02000002\nSqMask:\t0x7\nSqThread:\t4242\nSqThreadCpu:\t1\n";
        assert_eq!(sq_thread_of(info), Some(4242));
        assert_eq!(sq_thread_of("SqThread:\t-1\n"), None);
        assert_eq!(sq_thread_of("pos:\t0\n"), None);
        assert_eq!(
            schedstat_cpu("123456789 5000 12\n"),
            Some(Duration::from_nanos(123_456_789))
        );
        assert_eq!(schedstat_cpu(""), None);
    }

    #[test]
    fn a_region_holds_only_what_lies_inside_it() {
        let r = Region {
            addr: 1000,
            len: 100,
        };
        assert!(r.contains(Region {
            addr: 1000,
            len: 100
        }));
        assert!(r.contains(Region {
            addr: 1050,
            len: 50
        }));
        assert!(!r.contains(Region {
            addr: 1050,
            len: 51
        }));
        assert!(!r.contains(Region { addr: 999, len: 10 }));
    }

    /// Write 4 x 8 copies of a `size`-byte message from `w` to `r` in at most `most`
    /// submissions; check every byte arrived in order.
    fn repeated_writes_through(w: RawFd, mut r: std::fs::File, pipe: bool, size: u32, most: u64) {
        let mut ring = Ring::new(
            Some(w),
            None,
            RingOptions {
                in_flight: 8,
                sqpoll_idle: None,
            },
        )
        .unwrap();
        let msg: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        let reader = std::thread::spawn(move || {
            let mut all = Vec::new();
            r.read_to_end(&mut all).unwrap();
            all
        });
        let mut subs = 0;
        for _ in 0..4 {
            let (bytes, s) = ring.write_repeated(w, &msg, 8).unwrap();
            assert_eq!(bytes, 8 * msg.len() as u64);
            subs += s;
        }
        assert_eq!(subs, ring.used().submissions);
        assert!(subs <= most, "{subs} submissions for 32 writes");
        // A pipe's writes are WRITE_FIXED on the buffer registered when it came back; a
        // socket's are SEND (MSG_WAITALL), which takes no registered buffer.
        assert_eq!(ring.used().fixed_ops > 0, pipe, "{:?}", ring.used());
        drop(ring);
        nix::unistd::close(w).unwrap();
        let all = reader.join().unwrap();
        assert_eq!(all.len(), 32 * msg.len());
        for chunk in all.chunks(msg.len()) {
            assert!(chunk == &msg[..], "bytes out of order");
        }
    }

    #[test]
    fn repeated_writes_arrive_whole_in_order_and_in_few_submissions() {
        if probe().is_err() {
            return; // no io_uring here
        }
        use std::os::fd::IntoRawFd;
        let (a, b) = UnixStream::pair().unwrap();
        let b = std::fs::File::from(std::os::fd::OwnedFd::from(b));
        // MSG_WAITALL: the kernel finishes a short send itself, so chains are never cut.
        repeated_writes_through(a.into_raw_fd(), b, false, 300_000, 8);
        // A pipe's writes can be short (when it is full), which cuts the chain: with
        // messages bigger than the pipe, every write after one is resubmitted.
        let (r, w) = nix::unistd::pipe().unwrap();
        repeated_writes_through(w.into_raw_fd(), std::fs::File::from(r), true, 300_000, 1000);
        let (r, w) = nix::unistd::pipe().unwrap();
        repeated_writes_through(w.into_raw_fd(), std::fs::File::from(r), true, 4096, 8);
    }

    #[test]
    fn a_send_after_a_receive_goes_with_the_next_call_and_its_error_comes_back() {
        if probe().is_err() {
            return;
        }
        let (a, mut b) = UnixStream::pair().unwrap();
        let mut ring = ring_for(&a, &a, 1);
        let fd = a.as_raw_fd();
        let mut buf = [0u8; 16];
        b.write_all(b"ping").unwrap();
        assert_eq!(ring.read(fd, &mut buf, None).unwrap(), 4);
        let before = ring.used().submissions;
        // Deferred: queued, nothing submitted yet.
        assert_eq!(ring.write(fd, b"pong").unwrap(), 4);
        assert_eq!(ring.used().submissions, before);
        b.write_all(b"ping").unwrap();
        // One submission carries the send and the receive.
        assert_eq!(ring.read(fd, &mut buf, None).unwrap(), 4);
        assert_eq!(ring.used().submissions, before + 1);
        let mut got = [0u8; 4];
        b.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"pong");
        // A deferred send that fails fails the next call.
        assert_eq!(ring.write(fd, b"late").unwrap(), 4);
        drop(b);
        let e = ring.flush().unwrap_err();
        assert!(e.to_string().contains("an earlier send failed"), "{e}");
    }

    #[test]
    fn a_buffer_is_registered_when_it_comes_back_and_replaced_by_the_next() {
        if probe().is_err() {
            return;
        }
        use std::os::fd::AsRawFd;
        let (r, w) = nix::unistd::pipe().unwrap();
        let (r, w) = (std::fs::File::from(r), std::fs::File::from(w));
        let mut ring = Ring::new(
            Some(w.as_raw_fd()),
            Some(r.as_raw_fd()),
            RingOptions {
                in_flight: 1,
                sqpoll_idle: None,
            },
        )
        .unwrap();
        let fd = w.as_raw_fd();
        let (a, b) = ([1u8; 100], [2u8; 100]);
        let fixed = |ring: &Ring| ring.used().fixed_ops;
        ring.write(fd, &a).unwrap();
        assert_eq!(fixed(&ring), 0, "seen once: a plain write");
        ring.write(fd, &a).unwrap();
        ring.write(fd, &a[..10]).unwrap();
        assert_eq!(fixed(&ring), 2, "seen again, and a part of it: registered");
        ring.write(fd, &b).unwrap();
        assert_eq!(fixed(&ring), 2, "another buffer: plain, once");
        ring.write(fd, &b).unwrap();
        ring.write(fd, &a).unwrap();
        assert_eq!(fixed(&ring), 3, "b replaced a in the slot");
        // What went through the pipe is what each write was given, in order.
        let mut got = vec![0u8; 510];
        let mut r = r;
        r.read_exact(&mut got).unwrap();
        let want: Vec<u8> = [&a[..], &a, &a[..10], &b, &b, &a].concat();
        assert!(got == want);
        // Reads have their own slot.
        let mut into = [0u8; 10];
        nix::unistd::write(&w, &[9u8; 20]).unwrap();
        ring.read(r.as_raw_fd(), &mut into, None).unwrap();
        ring.read(r.as_raw_fd(), &mut into, None).unwrap();
        assert_eq!(fixed(&ring), 4);
        assert_eq!(into, [9u8; 10]);
    }

    #[test]
    fn a_multishot_receive_counts_every_byte_and_the_end() {
        if probe().is_err() {
            return;
        }
        let (mut a, b) = UnixStream::pair().unwrap();
        let mut ring = ring_for(&b, &b, 8);
        if ring.multishot_available(b.as_raw_fd()).is_err() {
            return;
        }
        let writer = std::thread::spawn(move || {
            for _ in 0..100 {
                a.write_all(&[7u8; 10_000]).unwrap();
            }
        });
        let mut total = 0;
        loop {
            match ring.recv_multishot(b.as_raw_fd(), 8, 4096).unwrap() {
                0 => break,
                n => total += n,
            }
        }
        writer.join().unwrap();
        assert_eq!(total, 1_000_000);
        assert!(ring.used().multishot_completions >= 244);
    }

    #[test]
    fn a_batch_of_datagrams_goes_out_in_one_submission_and_comes_back_in_one() {
        if probe().is_err() {
            return;
        }
        let (a, b) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let mut ring = Ring::new(
            Some(a.as_raw_fd()),
            Some(b.as_raw_fd()),
            RingOptions {
                in_flight: 4,
                sqpoll_idle: None,
            },
        )
        .unwrap();
        let m = [1u8; 100];
        let msgs: Vec<&[u8]> = vec![&m[..10], &m[..20], &m[..30]];
        assert_eq!(ring.send_batch(a.as_raw_fd(), &msgs).unwrap(), 3);
        let mut store = vec![0u8; 4 * 64];
        let mut bufs: Vec<&mut [u8]> = store.chunks_mut(64).collect();
        let mut lens = [0usize; 4];
        let got = ring
            .recv_batch(
                b.as_raw_fd(),
                &mut bufs,
                &mut lens,
                Some(Duration::from_millis(50)),
            )
            .unwrap();
        assert_eq!((got, &lens[..3]), (3, &[10, 20, 30][..]));
        assert_eq!(ring.used().submissions, 2);
        // Nothing queued: the wait ends at the timeout.
        let e = ring
            .recv_batch(
                b.as_raw_fd(),
                &mut bufs,
                &mut lens,
                Some(Duration::from_millis(20)),
            )
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    }
}
