//! Counters of the calling thread from `perf_event_open(2)`: a group of events opened
//! for this thread on whatever CPU it runs (pid 0, cpu -1), counting from the moment it
//! is opened, read in one `read` (PERF_FORMAT_GROUP) at each edge of the measured
//! interval and subtracted. Nothing is read in between.
//!
//! `perf_event_attr` is written out here (the `libc` crate does not define it): the
//! fields up to `PERF_ATTR_SIZE_VER5` (112 bytes), all zero but type, size, config, the
//! read format and the flag bits set below; the kernel takes any size it knows.
//!
//! # Platform-specific behavior
//! Linux only. Hardware events fail with ENOENT where no PMU exists (a VM whose
//! hypervisor exposes none), EACCES or EPERM where `kernel.perf_event_paranoid` forbids
//! them to this user.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use nix::libc;

/// `PERF_TYPE_HARDWARE`.
pub const TYPE_HARDWARE: u32 = 0;
/// `PERF_TYPE_SOFTWARE`.
pub const TYPE_SOFTWARE: u32 = 1;

/// `PERF_COUNT_HW_CPU_CYCLES`.
pub const HW_CYCLES: u64 = 0;
/// `PERF_COUNT_HW_INSTRUCTIONS`.
pub const HW_INSTRUCTIONS: u64 = 1;
/// `PERF_COUNT_HW_CACHE_MISSES`.
pub const HW_CACHE_MISSES: u64 = 3;
/// `PERF_COUNT_SW_TASK_CLOCK` (ns).
pub const SW_TASK_CLOCK: u64 = 1;
/// `PERF_COUNT_SW_PAGE_FAULTS`.
pub const SW_PAGE_FAULTS: u64 = 2;
/// `PERF_COUNT_SW_CONTEXT_SWITCHES`.
pub const SW_CONTEXT_SWITCHES: u64 = 3;
/// `PERF_COUNT_SW_CPU_MIGRATIONS`.
pub const SW_CPU_MIGRATIONS: u64 = 4;

const FORMAT_TOTAL_TIME_ENABLED: u64 = 1;
const FORMAT_TOTAL_TIME_RUNNING: u64 = 2;
const FORMAT_GROUP: u64 = 8;
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;

/// `struct perf_event_attr` up to `PERF_ATTR_SIZE_VER5`.
#[repr(C)]
#[derive(Default)]
struct Attr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved_2: u16,
}

const _: () = assert!(std::mem::size_of::<Attr>() == 112);

/// A group of counters of the calling thread.
#[derive(Debug)]
pub struct Group {
    leader: OwnedFd,
    _members: Vec<OwnedFd>,
    events: usize,
}

fn open_one(
    kind: u32,
    config: u64,
    user_only: bool,
    leader: Option<&OwnedFd>,
) -> io::Result<OwnedFd> {
    let attr = Attr {
        kind,
        size: std::mem::size_of::<Attr>() as u32,
        config,
        read_format: FORMAT_GROUP | FORMAT_TOTAL_TIME_ENABLED | FORMAT_TOTAL_TIME_RUNNING,
        flags: if user_only {
            FLAG_EXCLUDE_KERNEL | FLAG_EXCLUDE_HV
        } else {
            0
        },
        ..Attr::default()
    };
    let group_fd = leader.map_or(-1, |l| l.as_raw_fd());
    // SAFETY: `attr` is a valid, fully initialised perf_event_attr of the size it
    // declares, alive for the call; the other arguments are plain integers.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            std::ptr::from_ref(&attr),
            0 as libc::pid_t,
            -1 as libc::c_int,
            group_fd as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

impl Group {
    /// Open `events` (type, config) as one group counting the calling thread from now;
    /// `user_only` excludes the kernel and the hypervisor.
    ///
    /// # Errors
    /// The first event the kernel refuses (ENOENT: no PMU counts it; EACCES/EPERM: not
    /// allowed by `perf_event_paranoid`).
    pub fn open(events: &[(u32, u64)], user_only: bool) -> io::Result<Group> {
        let Some((&(kind, config), rest)) = events.split_first() else {
            return Err(io::ErrorKind::InvalidInput.into());
        };
        let leader = open_one(kind, config, user_only, None)?;
        let members = rest
            .iter()
            .map(|&(k, c)| open_one(k, c, user_only, Some(&leader)))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Group {
            leader,
            _members: members,
            events: events.len(),
        })
    }

    /// Every counter of the group now, in the order opened, scaled up when the kernel
    /// had to multiplex the group off its PMU for part of the time (null if it never ran).
    ///
    /// # Errors
    /// The read fails (never for a group this process opened).
    pub fn read(&self) -> io::Result<Reading> {
        let mut buf = vec![0u64; 3 + self.events];
        let bytes = nix::unistd::read(self.leader.as_raw_fd(), as_bytes(&mut buf))?;
        if bytes < 8 * buf.len() || buf[0] as usize != self.events {
            return Err(io::Error::other("short read of a perf counter group"));
        }
        Ok(Reading {
            enabled_ns: buf[1],
            running_ns: buf[2],
            values: buf[3..].to_vec(),
        })
    }
}

/// One reading of a group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    /// How long the group was enabled.
    pub enabled_ns: u64,
    /// How long it was on the PMU (less than enabled when multiplexed).
    pub running_ns: u64,
    /// The counters, in the order opened.
    pub values: Vec<u64>,
}

fn as_bytes(buf: &mut [u64]) -> &mut [u8] {
    // SAFETY: a u64 slice is valid as bytes (any bit pattern is a valid u8 and u64), of
    // 8 times its length, with u8's alignment of 1; the borrow is carried over.
    unsafe {
        std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(buf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn software_counters_count_this_thread() {
        let g = match Group::open(
            &[
                (TYPE_SOFTWARE, SW_TASK_CLOCK),
                (TYPE_SOFTWARE, SW_CONTEXT_SWITCHES),
            ],
            false,
        ) {
            Ok(g) => g,
            // A kernel that forbids it (perf_event_paranoid 3, seccomp): nothing to test.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EACCES | libc::EPERM | libc::ENOSYS)
                ) =>
            {
                return
            }
            Err(e) => panic!("{e}"),
        };
        let a = g.read().unwrap();
        let mut x = 0u64;
        for i in 0..1_000_000u64 {
            x = std::hint::black_box(x.wrapping_add(i));
        }
        // Sleeping switches away; on a loaded machine give it a few tries to be counted.
        let mut b = g.read().unwrap();
        for _ in 0..10 {
            std::thread::sleep(std::time::Duration::from_millis(2));
            b = g.read().unwrap();
            if b.values[1] > a.values[1] {
                break;
            }
        }
        assert_eq!(a.values.len(), 2);
        assert!(b.values[0] > a.values[0], "task clock grew: {a:?} {b:?}");
        assert!(
            b.values[1] > a.values[1],
            "the sleeps switched: {a:?} {b:?}"
        );
        assert!(b.enabled_ns >= a.enabled_ns);
    }

    #[test]
    fn an_empty_group_is_refused() {
        assert_eq!(
            Group::open(&[], false).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }
}
