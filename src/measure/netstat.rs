//! Kernel network counters: UDP receive-buffer overflows (`RcvbufErrors` in
//! `/proc/net/snmp`, `Udp6RcvbufErrors` in `/proc/net/snmp6`). They are system-wide, so
//! other UDP traffic on the machine during a run is counted too.

/// The current UDP receive-buffer error count, IPv4 or IPv6; `None` if unreadable.
pub fn udp_rcvbuf_errors(ipv6: bool) -> Option<u64> {
    if ipv6 {
        let text = std::fs::read_to_string("/proc/net/snmp6").ok()?;
        parse_snmp6(&text, "Udp6RcvbufErrors")
    } else {
        let text = std::fs::read_to_string("/proc/net/snmp").ok()?;
        parse_snmp(&text, "Udp:", "RcvbufErrors")
    }
}

/// `/proc/net/snmp` has a header line and a value line per protocol.
fn parse_snmp(text: &str, proto: &str, field: &str) -> Option<u64> {
    let mut lines = text.lines().filter(|l| l.starts_with(proto));
    let header = lines.next()?;
    let values = lines.next()?;
    let i = header.split_whitespace().position(|h| h == field)?;
    values.split_whitespace().nth(i)?.parse().ok()
}

/// `/proc/net/snmp6` has one `name value` pair per line.
fn parse_snmp6(text: &str, field: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        (it.next()? == field).then(|| it.next()?.parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_named_column_of_the_udp_lines() {
        let text = "Ip: Forwarding DefaultTTL\nIp: 1 64\nUdp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors\nUdp: 10 0 7 12 5\n";
        assert_eq!(parse_snmp(text, "Udp:", "RcvbufErrors"), Some(5));
        assert_eq!(
            parse_snmp6(
                "Udp6InDatagrams 3\nUdp6RcvbufErrors 9\n",
                "Udp6RcvbufErrors"
            ),
            Some(9)
        );
    }

    #[test]
    fn this_machine_has_the_counters() {
        assert!(udp_rcvbuf_errors(false).is_some());
    }
}
