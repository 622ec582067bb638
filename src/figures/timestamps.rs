//! A run's and a scenario's `timestamps` figure: each stream's sender's stamps joined
//! with its receiver's, the way its workload exchanges messages.

use crate::measure::timestamps::{
    join_pingpong, join_rate, report, Exchange, RunStamps, StampedStream, Timestamps,
};
use crate::scenario::Scenario;
use crate::workload::Roles;

/// A run's joined stamps: each stream's sender with its receiver (the one whose link is
/// its own; the one in the same place if none is), merged over streams; `None` without
/// `--timestamps` or if a role kept no log. Each direction counts what its sending role
/// sent (pingpong: the request the client's, the reply the server's; rate: the sender's),
/// and each stream what it sent beside what its join kept.
pub fn of_run(sc: &Scenario, roles: &Roles) -> Option<RunStamps> {
    if !sc.extras.timestamps || roles.senders.len() != roles.receivers.len() {
        return None;
    }
    let join = match crate::workload::spec(sc.workload).exchange()? {
        Exchange::RequestReply => join_pingpong,
        Exchange::OneWay => join_rate,
    };
    let mut out: Option<RunStamps> = None;
    for (i, sender) in roles.senders.iter().enumerate() {
        let s = sender.stamps.as_ref()?;
        let receiver = (roles.receivers.iter())
            .find(|r| {
                r.stamps
                    .as_ref()
                    .is_some_and(|r| !s.link.is_empty() && r.link == s.link)
            })
            .unwrap_or(&roles.receivers[i]);
        let r = receiver.stamps.as_ref()?;
        let mut one = join(s, r);
        // Each direction's sender: the stream's sender, then (pingpong's reply) its receiver.
        for (d, by) in one.directions.iter_mut().zip([sender, receiver]) {
            d.sent = by.messages;
        }
        one.streams.push(StampedStream {
            sampled_every: one.every,
            messages_sent: sender.messages,
            messages: one.directions[0].messages,
        });
        match &mut out {
            Some(o) => o.merge(&one),
            None => out = Some(one),
        }
    }
    out
}

/// One run's `timestamps` figure.
pub fn run_report(sc: &Scenario, roles: &Roles) -> Option<Timestamps> {
    of_run(sc, roles).map(|s| report(&s, roles.link.route.as_deref()))
}

/// A scenario's `timestamps` figure: its runs' histograms merged.
pub fn scenario_report(sc: &Scenario, raws: &[Roles]) -> Option<Timestamps> {
    let mut out: Option<RunStamps> = None;
    for s in raws.iter().filter_map(|r| of_run(sc, r)) {
        match &mut out {
            Some(o) => o.merge(&s),
            None => out = Some(s),
        }
    }
    let device = raws.iter().find_map(|r| r.link.route.as_deref());
    out.map(|s| report(&s, device))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::timestamps::{Record, StampLog, CAP};
    use crate::workload::SideReport;

    use crate::scenario::WorkloadKind;
    use crate::transport::TransportKind;

    const T: u64 = 1_700_000_000_000_000_000;

    /// `workload` over UDP at `size`-byte messages in `streams` streams, with
    /// `--timestamps`.
    fn stamped(workload: WorkloadKind, size: u64, streams: u32) -> Scenario {
        let mut sc = Scenario::new(workload, TransportKind::Udp, size);
        sc.parallel = streams;
        sc.extras.timestamps = true;
        sc
    }

    /// A side whose log names `link`, with one request (client) or its echo (server).
    fn side(link: &str, server: bool, base: u64) -> SideReport {
        let mut l = StampLog::new(T);
        l.link = link.into();
        l.push(&if server {
            Record {
                seq: 0,
                rx_kernel: base + 10,
                rx_user: base + 20,
                tx_user: base + 30,
                tx_kernel: base + 40,
                carried: 0,
            }
        } else {
            Record {
                seq: 0,
                tx_user: base,
                tx_kernel: base + 5,
                rx_kernel: base + 45,
                rx_user: base + 60,
                carried: 0,
            }
        });
        SideReport {
            stamps: Some(l),
            ..SideReport::default()
        }
    }

    #[test]
    fn each_stream_is_joined_by_its_link_whatever_the_order_the_roles_ended_in() {
        let sc = stamped(WorkloadKind::Pingpong, 64, 1);
        // Two streams a second apart: joined across, every part would be out of order.
        let roles = Roles {
            senders: vec![side("a", false, T), side("b", false, T + 1_000_000_000)],
            receivers: vec![side("b", true, T + 1_000_000_000), side("a", true, T)],
            ..Roles::default()
        };
        let j = of_run(&sc, &roles).expect("stamps");
        assert_eq!(j.directions.len(), 2);
        assert!(j
            .directions
            .iter()
            .all(|d| (d.messages, d.stamped) == (2, 2)));
        assert_eq!(j.directions[0].kernel_to_kernel.max(), 5);
        // Unknown links: joined in place.
        let mut unknown = roles.clone();
        unknown.receivers.reverse();
        for s in unknown
            .senders
            .iter_mut()
            .chain(unknown.receivers.iter_mut())
        {
            s.stamps.as_mut().unwrap().link.clear();
        }
        assert_eq!(of_run(&sc, &unknown).unwrap().directions[0].stamped, 2);
        // Without --timestamps, or a role without a log, or unpaired roles: nothing.
        let plain = Scenario::new(WorkloadKind::Pingpong, TransportKind::Udp, 64);
        assert!(of_run(&plain, &roles).is_none());
        let mut lost = roles.clone();
        lost.receivers[1].stamps = None;
        lost.receivers[0].stamps.as_mut().unwrap().link = "c".into();
        assert!(of_run(&sc, &lost).is_none());
        let mut unpaired = roles.clone();
        unpaired.receivers.pop();
        assert!(of_run(&sc, &unpaired).is_none());
        // rate joins one direction.
        let rate = stamped(WorkloadKind::Rate, 16, 1);
        assert_eq!(of_run(&rate, &roles).unwrap().directions.len(), 1);
    }

    /// Issue 29: merged over streams, each sampled on its own, the breakdown keeps the
    /// largest step, each stream's own, and every direction's count of what was sent
    /// beside what it covers.
    #[test]
    fn streams_sampled_differently_merge_into_what_they_cover_of_what_was_sent() {
        let sc = stamped(WorkloadKind::Pingpong, 64, 2);
        let rec = |seq: u64, server: bool| {
            let t = T + seq * 1000;
            match server {
                false => Record {
                    seq,
                    tx_user: t,
                    tx_kernel: t + 5,
                    rx_kernel: t + 45,
                    rx_user: t + 60,
                    carried: 0,
                },
                true => Record {
                    seq,
                    rx_kernel: t + 10,
                    rx_user: t + 20,
                    tx_user: t + 30,
                    tx_kernel: t + 40,
                    carried: 0,
                },
            }
        };
        // Stream "a" makes CAP + 10 round trips (kept 1 in 2), stream "b" 10 (all kept).
        let side = |link: &str, n: u64, server: bool| {
            let mut l = StampLog::new(T);
            l.link = link.into();
            (0..n).for_each(|s| l.push(&rec(s, server)));
            SideReport {
                stamps: Some(l),
                messages: n,
                ..SideReport::default()
            }
        };
        let big = CAP as u64 + 10;
        let roles = Roles {
            senders: vec![side("a", big, false), side("b", 10, false)],
            receivers: vec![side("b", 10, true), side("a", big, true)],
            ..Roles::default()
        };
        let j = of_run(&sc, &roles).unwrap();
        assert_eq!(j.every, 2);
        let kept = big.div_ceil(2) + 10;
        assert_eq!(
            j.streams,
            [
                StampedStream {
                    sampled_every: 2,
                    messages_sent: big,
                    messages: big.div_ceil(2)
                },
                StampedStream {
                    sampled_every: 1,
                    messages_sent: 10,
                    messages: 10
                },
            ]
        );
        for d in &j.directions {
            assert_eq!(
                (d.sent, d.messages, d.stamped),
                (big + 10, kept, kept),
                "{}",
                d.direction
            );
        }
        let r = report(&j, None);
        assert_eq!(r.sampled_every, 2);
        assert_eq!(r.streams, j.streams);
        let req = &r.directions[0];
        assert_eq!(
            (req.messages_sent, req.messages, req.missing),
            (big + 10, kept, 0)
        );
        // Over two runs: the streams of both, the counts added.
        let two = crate::figures::figures(&sc, &[roles.clone(), roles]);
        let t = two.timestamps.unwrap();
        assert_eq!(t.streams.len(), 4);
        assert_eq!(t.directions[0].messages_sent, 2 * (big + 10));
        assert_eq!(t.directions[0].messages, 2 * kept);
    }

    #[test]
    fn a_scenario_merges_its_runs_and_each_run_reports_its_own() {
        let sc = stamped(WorkloadKind::Pingpong, 64, 1);
        let run = Roles {
            senders: vec![side("a", false, T)],
            receivers: vec![side("a", true, T)],
            ..Roles::default()
        };
        let r = crate::figures::figures(&sc, &[run.clone(), run]);
        let t = r.timestamps.expect("merged over runs");
        assert_eq!(t.directions[0].stamped, 2);
        assert_eq!(
            t.turnaround.map(|l| l.count),
            Some(2),
            "both runs' turnarounds"
        );
        assert_eq!(
            r.runs[0].timestamps.as_ref().unwrap().directions[0].stamped,
            1
        );
    }
}
