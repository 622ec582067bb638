//! The machine a run happened on: kernel, CPU, cores, frequency governor and the sysctls
//! that bound socket, pipe and message-queue buffers. Recorded in every report so two
//! reports can be compared knowing what differed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Sysctls that shape IPC results, by their `sysctl` name.
const SYSCTLS: [&str; 11] = [
    "net.core.rmem_default",
    "net.core.rmem_max",
    "net.core.wmem_default",
    "net.core.wmem_max",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.udp_mem",
    "net.unix.max_dgram_qlen",
    "fs.pipe-max-size",
    "fs.mqueue.msg_max",
    "fs.mqueue.msgsize_max",
];

/// Where a run happened.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Environment {
    /// `uname -sr` and build string.
    pub kernel: String,
    /// Host name.
    pub hostname: String,
    /// CPU model from `/proc/cpuinfo`; null if unknown.
    pub cpu_model: Option<String>,
    /// Logical CPUs this process may run on.
    pub cpus: usize,
    /// cpufreq governor of CPU 0; null where there is no cpufreq (many VMs).
    pub governor: Option<String>,
    /// Relevant sysctls as the kernel prints them (null if absent).
    pub sysctls: BTreeMap<String, Option<String>>,
}

/// Read a sysctl by its `/proc/sys` relative path (`net/core/wmem_max`) as text.
pub fn read_sysctl(path: &str) -> Option<String> {
    std::fs::read_to_string(format!("/proc/sys/{path}"))
        .ok()
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// A field of `/proc/self/status` (`Umask:`, `VmSize:`...), its value trimmed.
pub fn proc_status(field: &str) -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let value = status.lines().find_map(|l| l.strip_prefix(field))?;
    Some(value.trim().to_string())
}

/// Whether this process holds CAP_SYS_RESOURCE (bit 24 of CapEff in /proc/self/status),
/// which lets it exceed the message-queue limits; being root is not enough inside many
/// containers.
pub fn has_cap_sys_resource() -> bool {
    proc_status("CapEff:").is_some_and(|hex| holds_cap_sys_resource(&hex))
}

/// Whether a capability set as /proc prints it (hex) holds CAP_SYS_RESOURCE (24).
fn holds_cap_sys_resource(hex: &str) -> bool {
    u64::from_str_radix(hex, 16).is_ok_and(|caps| caps & (1 << 24) != 0)
}

/// Read a numeric sysctl by its `/proc/sys` relative path.
pub fn read_sysctl_u64(path: &str) -> Option<u64> {
    read_sysctl(path)?.parse().ok()
}

impl Environment {
    /// Collect the environment now.
    pub fn collect() -> Environment {
        let uts = nix::sys::utsname::uname().ok();
        let kernel = uts
            .as_ref()
            .map(|u| {
                format!(
                    "{} {} {}",
                    u.sysname().to_string_lossy(),
                    u.release().to_string_lossy(),
                    u.version().to_string_lossy()
                )
            })
            .unwrap_or_default();
        let hostname = uts
            .map(|u| u.nodename().to_string_lossy().into_owned())
            .unwrap_or_default();
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        });
        let governor =
            std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
                .ok()
                .map(|s| s.trim().to_string());
        let sysctls = SYSCTLS
            .iter()
            .map(|name| (name.to_string(), read_sysctl(&name.replace('.', "/"))))
            .collect();
        Environment {
            kernel,
            hostname,
            cpu_model,
            cpus: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            governor,
            sysctls,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_sys_resource_is_bit_24_of_the_effective_set() {
        assert!(holds_cap_sys_resource("0000000001000000"));
        assert!(
            holds_cap_sys_resource("000001ffffffffff"),
            "root's full set"
        );
        assert!(
            !holds_cap_sys_resource("000001fffeffffff"),
            "everything but it"
        );
        assert!(!holds_cap_sys_resource("0000000000000000"));
        assert!(!holds_cap_sys_resource("not hex"));
    }
}
