//! The agent's side of a mesh: a `sockbench server` that a coordinator asks to drive a
//! test ([`DriveMsg`]) runs it as a client of the target agent, in a child process of
//! its own binary (`sockbench stream|pingpong|rate ... --server TARGET --format json`),
//! and answers with that client's whole report ([`DriveReport`]).
//!
//! The command line is built here from the checked message, never taken from it; the
//! child inherits the agent's key file, so the key proves the agent to the target as it
//! proved the coordinator to the agent. A child that outlives the test's time plus
//! [`GRACE`], or a Ctrl-C of the agent, is killed; either way the coordinator hears why.

use std::io::Read;
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::control::frame::FrameType;
use crate::control::messages::{target_address, DriveMsg, DriveReport, HostMeta};
use crate::environment::{read_sysctl, Environment};
use crate::transport::route::route_between;

/// How long a driven test may run beyond its warm-up and duration (connection set-up,
/// the end of the run, the report) before the agent kills it.
pub const GRACE: Duration = Duration::from_secs(30);

/// The client's command line for `m` (after the program name).
pub fn command_line(m: &DriveMsg, key_file: Option<&Path>) -> Vec<String> {
    let (command, transport, size) = match m.workload.as_str() {
        "tcp-stream" => ("stream", "tcp", "128K".to_string()),
        "tcp-pingpong" => ("pingpong", "tcp", "64".to_string()),
        "udp-pingpong" => ("pingpong", "udp", "64".to_string()),
        _ => ("rate", "udp", "64".to_string()),
    };
    let size = m.size.map_or(size, |s| s.to_string());
    let mut args: Vec<String> = [
        command,
        "-t",
        transport,
        "-s",
        &size,
        "-P",
        &m.parallel.to_string(),
        "-d",
        &format!("{}s", m.duration_s),
        "-w",
        &format!("{}s", m.warmup_s),
        "--server",
        &m.target,
        "--format",
        "json",
        "-q",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some(k) = key_file {
        args.push("--key-file".into());
        args.push(k.display().to_string());
    }
    args
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// This host, and its route toward `target`.
pub fn host_meta(target: Option<SocketAddr>) -> HostMeta {
    let env = Environment::collect();
    let route = target.and_then(|t| {
        let bind: SocketAddr = if t.is_ipv6() {
            "[::]:0".parse().ok()?
        } else {
            "0.0.0.0:0".parse().ok()?
        };
        // A connected UDP socket sends nothing: it only asks the kernel for the route.
        let s = UdpSocket::bind(bind).ok()?;
        s.connect(t).ok()?;
        route_between(s.local_addr().ok()?.ip(), t.ip())
    });
    HostMeta {
        hostname: env.hostname,
        kernel: env.kernel,
        cpu_model: env.cpu_model,
        cpus: env.cpus as u32,
        congestion_control: read_sysctl("net/ipv4/tcp_congestion_control"),
        route_device: route.as_ref().map(|r| r.0.clone()),
        offloads: route
            .as_ref()
            .and_then(|r| crate::sys::ethtool::offloads(&r.0)),
        mtu: route.and_then(|r| r.1).map(|m| m as u32),
    }
}

/// Run `m` (checked with [`check`]) as a client of its target and report what it gave;
/// `gone` says whether the coordinator has hung up, which stops the test.
pub fn drive(m: &DriveMsg, key_file: Option<&Path>, gone: &mut dyn FnMut() -> bool) -> DriveReport {
    let started_unix_ns = now_ns();
    let target = target_address(&m.target).ok();
    let host = Some(host_meta(target));
    let (report, error) = match run_child(m, key_file, gone) {
        Ok(report) => {
            let error = report
                .get("error")
                .and_then(|e| e.as_str())
                .map(str::to_string);
            (Some(report), error)
        }
        Err(e) => (None, Some(e)),
    };
    DriveReport {
        started_unix_ns,
        ended_unix_ns: now_ns().max(started_unix_ns),
        report,
        error,
        host,
    }
}

/// The child's JSON report, or why there is none.
fn run_child(
    m: &DriveMsg,
    key_file: Option<&Path>,
    gone: &mut dyn FnMut() -> bool,
) -> Result<serde_json::Value, String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the sockbench binary: {e}"))?;
    let mut child = Command::new(exe)
        .args(command_line(m, key_file))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the client: {e}"))?;
    let cap = FrameType::Report.cap() as u64;
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = (&mut stdout).take(cap + 1).read_to_end(&mut b);
        // Drain the rest so the child never blocks on a full pipe.
        let _ = std::io::copy(&mut stdout, &mut std::io::sink());
        b
    });
    let err = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = (&mut stderr).take(4096).read_to_end(&mut b);
        let _ = std::io::copy(&mut stderr, &mut std::io::sink());
        b
    });
    let limit = Duration::from_secs_f64(m.duration_s + m.warmup_s) + GRACE;
    let begun = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if gone() => {
                break Err("the coordinator hung up, so the test was stopped".to_string())
            }
            Ok(None) if crate::interrupt::requested() => {
                break Err("the agent was stopped (Ctrl-C)".to_string())
            }
            Ok(None) if begun.elapsed() > limit => {
                break Err(format!(
                    "the client ran past {:.0} s and was killed",
                    limit.as_secs_f64()
                ))
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => break Err(format!("cannot wait for the client: {e}")),
        }
    };
    if status.is_err() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    let status = status?;
    if out.len() as u64 > cap {
        return Err(format!("the client's report is over {cap} bytes"));
    }
    match serde_json::from_slice::<serde_json::Value>(&out) {
        Ok(v) if v.is_object() => Ok(v),
        _ => {
            let said = String::from_utf8_lossy(&err);
            let said = said.trim();
            Err(if said.is_empty() {
                format!("the client ended ({status}) without a report")
            } else {
                format!("the client ended ({status}): {said}")
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::messages::Limits;

    fn msg(workload: &str) -> DriveMsg {
        DriveMsg {
            workload: workload.into(),
            target: "127.0.0.1:5290".into(),
            duration_s: 2.0,
            warmup_s: 0.5,
            parallel: 4,
            size: None,
        }
    }

    #[test]
    fn each_test_becomes_its_own_client_command_line() {
        assert_eq!(
            command_line(&msg("tcp-stream"), Some(Path::new("/k"))).join(" "),
            "stream -t tcp -s 128K -P 4 -d 2s -w 0.5s --server 127.0.0.1:5290 --format json -q --key-file /k"
        );
        let mut m = msg("udp-pingpong");
        m.size = Some(1000);
        m.parallel = 1;
        assert_eq!(
            command_line(&m, None).join(" "),
            "pingpong -t udp -s 1000 -P 1 -d 2s -w 0.5s --server 127.0.0.1:5290 --format json -q"
        );
        assert!(command_line(&msg("tcp-pingpong"), None).starts_with(&[
            "pingpong".into(),
            "-t".into(),
            "tcp".into()
        ]));
        assert!(command_line(&msg("udp-rate"), None).starts_with(&[
            "rate".into(),
            "-t".into(),
            "udp".into()
        ]));
    }

    #[test]
    fn a_request_over_the_agents_limits_or_malformed_is_refused() {
        let limits = Limits::default();
        assert_eq!(DriveMsg::check(&msg("tcp-stream"), &limits), Ok(()));
        let refused = |f: &dyn Fn(&mut DriveMsg), want: &str| {
            let mut m = msg("tcp-stream");
            f(&mut m);
            let e = DriveMsg::check(&m, &limits).unwrap_err();
            assert!(e.contains(want), "{e}");
        };
        refused(&|m| m.workload = "sctp".into(), "unknown mesh test");
        refused(&|m| m.duration_s = 0.0, "above 0");
        refused(&|m| m.duration_s = f64::NAN, "above 0");
        refused(&|m| m.warmup_s = -1.0, "warm-up");
        refused(&|m| m.duration_s = 300.0, "--max-duration");
        refused(&|m| m.parallel = 0, "--max-streams");
        refused(&|m| m.parallel = 129, "--max-streams");
        refused(&|m| m.size = Some(0), "--max-size");
        refused(&|m| m.size = Some((64 << 20) + 1), "--max-size");
        refused(&|m| m.target = "a b:1".into(), "HOST:PORT");
        // 128 streams of 8 MiB messages: 2 GiB of buffers, over the 1 GiB default.
        refused(
            &|m| {
                m.parallel = 128;
                m.size = Some(8 << 20);
            },
            "--max-memory",
        );
        refused(&|m| m.target = "127.0.0.1".into(), "mesh target");
        let mut m = msg("tcp-stream");
        (m.parallel, m.size) = (128, Some(4 << 20));
        assert_eq!(DriveMsg::check(&m, &limits), Ok(()), "exactly 1 GiB");
        let mut m = msg("tcp-stream");
        (m.parallel, m.size) = (1, Some(64 << 20));
        assert_eq!(DriveMsg::check(&m, &limits), Ok(()), "exactly --max-size");
        // Without a size the test's own (128 KiB) counts: 4 streams fit 1 MiB, 5 do not.
        let small = Limits {
            max_memory: 1 << 20,
            ..Limits::default()
        };
        let mut m = msg("tcp-stream");
        m.parallel = 4;
        assert_eq!(DriveMsg::check(&m, &small), Ok(()));
        m.parallel = 5;
        assert!(DriveMsg::check(&m, &small)
            .unwrap_err()
            .contains("--max-memory"));
        // A name too long for DNS is refused as such, not looked up.
        let mut m = msg("tcp-stream");
        m.target = format!("{}:1", "a".repeat(300));
        assert_eq!(
            DriveMsg::check(&m, &limits),
            Err("the mesh target must be HOST:PORT".into())
        );
        // 255 characters is short enough to be looked up (and found missing).
        m.target = format!("{}:1", "a".repeat(253));
        assert!(DriveMsg::check(&m, &limits)
            .unwrap_err()
            .starts_with("mesh target aaa"));
        let mut m = msg("tcp-stream");
        m.duration_s = 299.5;
        m.warmup_s = 0.5;
        assert_eq!(DriveMsg::check(&m, &limits), Ok(()));
    }

    #[test]
    fn the_route_toward_a_local_target_is_lo() {
        let h = host_meta(Some("127.0.0.1:9".parse().unwrap()));
        assert_eq!(h.route_device.as_deref(), Some("lo"));
        let lo_mtu: u32 = std::fs::read_to_string("/sys/class/net/lo/mtu")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(h.mtu, Some(lo_mtu));
        assert!(h.cpus >= 1);
        let offloads = h.offloads.expect("lo reports its offloads");
        assert_eq!(offloads, crate::sys::ethtool::offloads("lo").unwrap());
        assert!(!h.kernel.is_empty());
        assert_eq!(host_meta(None).route_device, None);
    }
}
