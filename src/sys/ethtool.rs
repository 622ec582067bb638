//! `SIOCETHTOOL`: ask a network device what it does, as `ethtool` asks it. Used for its
//! timestamping capabilities (`crate::sys::timestamps`) and its offloads (`mesh` agents
//! report them for the device of their route).

use std::collections::BTreeMap;

use nix::libc;

/// `struct ifreq` with its `ifr_data` member.
#[repr(C)]
struct IfreqData {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _rest: [u8; 16],
}

/// `struct ethtool_value`: a command and one number.
#[repr(C)]
#[derive(Default)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// The legacy one-flag offload queries (`linux/ethtool.h`), by the names `ethtool -k`
/// prints.
const OFFLOADS: [(&str, u32); 6] = [
    ("rx-checksumming", 0x14),              // ETHTOOL_GRXCSUM
    ("tx-checksumming", 0x16),              // ETHTOOL_GTXCSUM
    ("scatter-gather", 0x18),               // ETHTOOL_GSG
    ("tcp-segmentation-offload", 0x1e),     // ETHTOOL_GTSO
    ("generic-segmentation-offload", 0x23), // ETHTOOL_GGSO
    ("generic-receive-offload", 0x2b),      // ETHTOOL_GGRO
];

/// Run one `SIOCETHTOOL` request on `device`, whose command structure (starting with
/// its `u32` command) `data` points at; whether the kernel answered.
///
/// # Safety
/// `data` must point to a live, writable structure of the size the command's kernel
/// handler reads and writes.
pub(crate) unsafe fn request(device: &str, data: *mut libc::c_void) -> bool {
    if device.is_empty() || device.len() >= libc::IFNAMSIZ || device.contains('\0') {
        return false;
    }
    let Ok(sock) = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None) else {
        return false;
    };
    let mut req = IfreqData {
        name: [0; libc::IFNAMSIZ],
        data,
        _rest: [0; 16],
    };
    for (d, s) in req.name.iter_mut().zip(device.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: `req` is an ifreq naming the device (NUL-terminated: the name is shorter
    // than IFNAMSIZ and the rest is zero), whose data member points where the caller
    // promised; the socket is open for the call.
    let r = unsafe {
        libc::ioctl(
            std::os::fd::AsRawFd::as_raw_fd(&sock),
            libc::SIOCETHTOOL as _,
            std::ptr::from_mut(&mut req),
        )
    };
    r == 0
}

/// The offloads `device` reports, on or off, by `ethtool -k` names; those it does not
/// answer for are left out, and `None` if it answers for none (no such device).
pub fn offloads(device: &str) -> Option<BTreeMap<String, bool>> {
    let mut out = BTreeMap::new();
    for (name, cmd) in OFFLOADS {
        let mut v = EthtoolValue { cmd, data: 0 };
        // SAFETY: an ethtool_value, which these commands read and write whole.
        if unsafe { request(device, std::ptr::from_mut(&mut v).cast()) } {
            out.insert(name.to_string(), v.data != 0);
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offloads_of_lo_are_what_ethtool_says() {
        let ours = offloads("lo").expect("lo answers");
        assert_eq!(ours.len(), OFFLOADS.len());
        let Ok(out) = std::process::Command::new("ethtool")
            .args(["-k", "lo"])
            .output()
        else {
            eprintln!("skipped the comparison: ethtool is not installed");
            return;
        };
        let text = String::from_utf8_lossy(&out.stdout);
        for (name, on) in &ours {
            let line = text
                .lines()
                .find(|l| l.starts_with(&format!("{name}:")))
                .unwrap_or_else(|| panic!("ethtool -k lo has no {name}"));
            let theirs = line.split(':').nth(1).unwrap().trim().starts_with("on");
            assert_eq!(*on, theirs, "{name}: {line}");
        }
    }

    #[test]
    fn a_device_that_is_not_there_has_no_offloads() {
        assert_eq!(offloads("no-such-dev0"), None);
        assert_eq!(offloads(""), None);
        assert_eq!(offloads("a-name-far-too-long-for-a-device"), None);
    }
}
