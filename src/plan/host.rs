//! The machine's limits, probed once before planning: the sysctls that cap messages and
//! buffers, capabilities, rlimits, the CPUs this process may use, free memory, and the
//! engines the system refuses. The plan reads this one value and nothing else from the
//! system, so a server's limits can later be planned with in the same way (from its
//! hello) as the local machine's.

use nix::sys::resource::{getrlimit, Resource, RLIM_INFINITY};

use crate::engine::EngineKind;
use crate::transport::SystemLimits;

/// What the plan needs to know about the machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    /// What bounds the messages and buffers of transports (sysctls, CAP_SYS_RESOURCE).
    pub limits: SystemLimits,
    /// RLIMIT_NOFILE (soft): descriptors this process may open.
    pub max_descriptors: Option<u64>,
    /// The CPUs this process may run on (a cpuset or taskset may exclude some).
    pub cpus: Vec<usize>,
    /// MemAvailable from /proc/meminfo.
    pub mem_available: Option<u64>,
    /// Address-space and data limits that are set: (what, soft limit, in use now).
    pub memory_limits: Vec<(&'static str, u64, u64)>,
    /// Engines this system cannot run at all, with the reason.
    pub engines_unavailable: Vec<(EngineKind, String)>,
}

fn sysctl(name: &str) -> Option<u64> {
    crate::environment::read_sysctl_u64(&name.replace('.', "/"))
}

/// A field of /proc/self/status in bytes (`VmSize:   1234 kB`).
fn status_bytes(field: &str) -> Option<u64> {
    let value = crate::environment::proc_status(field)?;
    let kib: u64 = value.split_whitespace().next()?.parse().ok()?;
    Some(kib * 1024)
}

impl Host {
    /// Read everything once.
    pub fn probe() -> Host {
        let allowed = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).ok();
        let cpus = (0..nix::sched::CpuSet::count())
            .filter(|&c| {
                allowed
                    .as_ref()
                    .is_some_and(|set| set.is_set(c).unwrap_or(false))
            })
            .collect();
        let mem_available = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
            let line = m.lines().find(|l| l.starts_with("MemAvailable:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        });
        let memory_limits = [
            (Resource::RLIMIT_AS, "address space (ulimit -v)", "VmSize:"),
            (Resource::RLIMIT_DATA, "data segment (ulimit -d)", "VmData:"),
        ]
        .into_iter()
        .filter_map(|(resource, name, field)| {
            let (soft, _) = getrlimit(resource).ok()?;
            (soft != RLIM_INFINITY).then(|| (name, soft, status_bytes(field).unwrap_or(0)))
        })
        .collect();
        Host {
            limits: SystemLimits {
                wmem_max: sysctl("net.core.wmem_max").unwrap_or(212_992),
                wmem_default: sysctl("net.core.wmem_default").unwrap_or(212_992),
                mq_msgsize_max: sysctl("fs.mqueue.msgsize_max").unwrap_or(8192),
                cap_sys_resource: crate::environment::has_cap_sys_resource(),
            },
            max_descriptors: getrlimit(Resource::RLIMIT_NOFILE)
                .ok()
                .map(|(soft, _)| soft),
            cpus,
            mem_available,
            memory_limits,
            engines_unavailable: EngineKind::ALL
                .iter()
                .filter_map(|&e| Some((e, e.engine().unavailable()?)))
                .collect(),
        }
    }

    /// Why `engine` cannot run here at all, if it cannot.
    pub fn engine_unavailable(&self, engine: EngineKind) -> Option<&str> {
        self.engines_unavailable
            .iter()
            .find(|(e, _)| *e == engine)
            .map(|(_, why)| why.as_str())
    }
}
