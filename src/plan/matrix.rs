//! The cross product of engines, transports and sizes, and the one refusal rule: a
//! combination the user named explicitly is an error (exit 2) that names the limit; under
//! `all` it is a skip recorded with workload, transport, engine, size and the reason.
//! That includes a role that waits by spinning pinned to its peer's CPU (`--cpus A,A`)
//! without `--allow-shared-cpu`.

use super::host::Host;
use super::Scenario;
use crate::engine::EngineKind;
use crate::error::PlanError;
use crate::scenario::Skipped;
use crate::transport::TransportKind;
use crate::vocab::units::format_bytes;
use crate::workload::spec;

/// The axes of a plan.
pub struct Axes<'a> {
    /// Transports, in order.
    pub transports: &'a [TransportKind],
    /// Engines, in order.
    pub engines: &'a [EngineKind],
    /// Sizes as given; `None`: each workload's default for each transport.
    pub sizes: Option<&'a [u64]>,
    /// Requested send buffers (`None`: the kernel's default), each a scenario.
    pub sndbufs: &'a [Option<u64>],
    /// Requested receive buffers, likewise.
    pub rcvbufs: &'a [Option<u64>],
    /// Whether the user named every combination (no `all` on any axis): then a refusal
    /// is an error rather than a skip.
    pub explicit: bool,
    /// The CPU both roles are pinned to on this host (`--cpus A,A`), unless
    /// `--allow-shared-cpu` lets a spinning engine or transport share it.
    pub one_cpu: Option<usize>,
}

/// Why `transport` cannot carry `size`-byte messages, if it cannot.
pub fn size_refusal(
    host: &Host,
    transport: TransportKind,
    size: u64,
    sndbuf: Option<u64>,
) -> Option<String> {
    let (max, why) = transport.max_message(sndbuf, &host.limits)?;
    (size > max).then(|| {
        format!(
            "size {} ({size} bytes) is too large for {transport}: {why}",
            format_bytes(size)
        )
    })
}

/// Why the combination `sc` cannot run, if it cannot: the workload's own refusal, the
/// engine's, the options', then the transport's size limit.
pub fn refusal(host: &Host, sc: &Scenario) -> Option<String> {
    let (t, e) = (sc.transport, sc.engine);
    if let Some(why) = spec(sc.workload).refuses(sc) {
        return Some(why);
    }
    if let Some(why) = e.engine().refuses(t) {
        return Some(format!("engine {e} cannot drive {t}: {why}"));
    }
    if e == EngineKind::IoUring && sc.connect.is_some() && t.is_ip() && !t.reliable() {
        return Some(
            "with --connect the UDP receiver answers with sendto, which the io-uring engine does not \
             submit: drop --connect or use another engine"
                .into(),
        );
    }
    let family = |v6: bool| v6 != t.is_ipv6();
    if t.is_ip()
        && (sc.bind.is_some_and(|b| family(b.is_ipv6()))
            || sc.connect.is_some_and(|c| family(c.is_ipv6())))
    {
        return Some("--bind/--connect address is of the other IP family".into());
    }
    size_refusal(host, t, sc.size, sc.sndbuf)
}

/// Why `sc` may not run with both roles pinned to `cpu`: its engine or transport waits by
/// spinning, which burns the time slice the peer it waits for needs, so the figure would
/// be the scheduler's (`stream -t pipe -e nonblocking --cpus 0,0` gave 65.6 Mbit/s against
/// 7.95 Gbit/s on two CPUs).
pub fn shared_cpu_refusal(host: &Host, sc: &Scenario, cpu: usize) -> Option<String> {
    let spinner = sc.spinner()?;
    let apart = match host.cpus.iter().find(|&&c| c != cpu) {
        Some(other) => format!("pin the roles apart (--cpus {cpu},{other})"),
        None => "run it on a machine where the roles can have a CPU each".into(),
    };
    Some(format!(
        "{spinner}: a role waits by spinning, and --cpus puts both roles on CPU {cpu}: it burns the \
         time slice its peer needs, so the figure would be the scheduler's, not the transport's; \
         {apart}, or add --allow-shared-cpu to measure it anyway"
    ))
}

/// Every combination of the axes, built from `template` (its transport, engine and size
/// are replaced): those that can run, and those left out with why.
///
/// # Errors
/// [`PlanError::Unsupported`] for a refused combination the user named explicitly.
pub fn expand(
    host: &Host,
    axes: &Axes<'_>,
    template: &Scenario,
) -> Result<(Vec<Scenario>, Vec<Skipped>), PlanError> {
    let (mut run, mut skipped) = (Vec::new(), Vec::new());
    let workload = spec(template.workload);
    for &engine in axes.engines {
        for &transport in axes.transports {
            let defaults = [workload.default_size(transport)];
            for &size in axes.sizes.unwrap_or(&defaults) {
                // A receive buffer is a socket's; other transports have one buffer, the
                // send side's.
                let rcvbufs = match transport.is_socket() {
                    true => axes.rcvbufs,
                    false => &[None],
                };
                for &sndbuf in axes.sndbufs {
                    for &rcvbuf in rcvbufs {
                        let sc = Scenario {
                            transport,
                            engine,
                            size,
                            sndbuf,
                            rcvbuf,
                            ..template.clone()
                        };
                        let refused = refusal(host, &sc).or_else(|| {
                            axes.one_cpu
                                .and_then(|cpu| shared_cpu_refusal(host, &sc, cpu))
                        });
                        match refused {
                            None => run.push(sc),
                            Some(why) if axes.explicit => return Err(PlanError::Unsupported(why)),
                            Some(reason) => skipped.push(Skipped {
                                workload: sc.workload,
                                transport,
                                engine,
                                size_bytes: size,
                                reason,
                            }),
                        }
                    }
                }
            }
        }
    }
    Ok((run, skipped))
}
