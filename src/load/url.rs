//! `http://HOST[:PORT]/PATH` as `sockbench load` takes it: parsed and checked, and the
//! host resolved. Plain HTTP only; the URL's host also names the `Host` header, even when
//! `--unix-socket` decides where the connections go. Not here: building the request
//! ([`crate::http::request`]).

use std::fmt;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

/// A checked `http://` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Url {
    /// The host as written, without the brackets of an IPv6 literal.
    pub host: String,
    /// The port (80 when the URL names none).
    pub port: u16,
    /// Whether the URL named the port.
    pub explicit_port: bool,
    /// The path and query, starting with `/` (the fragment is dropped, as browsers do).
    pub path: String,
}

impl Url {
    /// Parse `text`.
    ///
    /// # Errors
    /// A message naming what is wrong and what to write instead: `https://` (no TLS
    /// here), no scheme, user info, a bad port, a path with spaces or control bytes.
    pub fn parse(text: &str) -> Result<Url, String> {
        let t = text.trim();
        let Some((scheme, rest)) = t.split_once("://") else {
            return Err(format!(
                "invalid URL '{text}': write it with its scheme, e.g. http://{t}"
            ));
        };
        if scheme.eq_ignore_ascii_case("https") {
            return Err(format!(
                "{text}: https is not supported, sockbench load speaks plain HTTP/1.1 \
                 (measure the server over http://, or put a TLS terminator in front of the generator)"
            ));
        }
        if !scheme.eq_ignore_ascii_case("http") {
            return Err(format!(
                "invalid URL '{text}': the scheme must be http:// (not {scheme}://)"
            ));
        }
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        if authority.contains('@') {
            return Err(format!(
                "invalid URL '{text}': user info (user@host) is not supported; give a header instead: -H 'Authorization: ...'"
            ));
        }
        let (host, port) =
            split_host_port(authority).map_err(|e| format!("invalid URL '{text}': {e}"))?;
        let tail = tail.split('#').next().unwrap_or_default();
        let path = if tail.starts_with('/') {
            tail.to_string()
        } else {
            format!("/{tail}")
        };
        if let Some(b) = path.bytes().find(|b| !b.is_ascii_graphic()) {
            return Err(format!(
                "invalid URL '{text}': the path holds {}; percent-encode it (a space is %20)",
                if b == b' ' {
                    "a space".to_string()
                } else {
                    format!("the byte 0x{b:02x}")
                }
            ));
        }
        Ok(Url {
            host,
            port: port.unwrap_or(80),
            explicit_port: port.is_some(),
            path,
        })
    }

    /// The `Host` header's value: the host, with the port when the URL named one that is
    /// not 80 (as curl sends it).
    pub fn host_header(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.explicit_port && self.port != 80 {
            format!("{host}:{}", self.port)
        } else {
            host
        }
    }

    /// The address to connect to: the literal, or the first address the name resolves to
    /// (an IPv4 one when there is one, as most servers listen there).
    ///
    /// # Errors
    /// The resolver's error, or a name with no address.
    pub fn resolve(&self) -> std::io::Result<SocketAddr> {
        if let Ok(ip) = self.host.parse::<IpAddr>() {
            return Ok(SocketAddr::new(ip, self.port));
        }
        let all: Vec<SocketAddr> = (self.host.as_str(), self.port).to_socket_addrs()?.collect();
        all.iter()
            .find(|a| a.is_ipv4())
            .or(all.first())
            .copied()
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("{} has no address", self.host),
                )
            })
    }
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.explicit_port {
            write!(f, "http://{host}:{}{}", self.port, self.path)
        } else {
            write!(f, "http://{host}{}", self.path)
        }
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`.
fn split_host_port(authority: &str) -> Result<(String, Option<u16>), String> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (inside, after) = rest
            .split_once(']')
            .ok_or("an IPv6 address needs its closing ']', e.g. http://[::1]:8080/")?;
        inside
            .parse::<std::net::Ipv6Addr>()
            .map_err(|_| format!("'{inside}' is not an IPv6 address"))?;
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| format!("unexpected '{p}' after the IPv6 address"))?,
            ),
        };
        (inside.to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, _)) if h.contains(':') => {
                return Err("an IPv6 address goes in brackets, e.g. http://[::1]:8080/".into())
            }
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (authority.to_string(), None),
        }
    };
    if host.is_empty() {
        return Err("no host: write one, e.g. http://127.0.0.1:8080/".into());
    }
    if !host
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b':'))
    {
        return Err(format!("'{host}' is not a host name or an IP address"));
    }
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => Some(n),
            _ => return Err(format!("'{p}' is not a port (1 to 65535)")),
        },
    };
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_gives_host_port_and_path() {
        let u = Url::parse("http://127.0.0.1:8081/a/b?x=1#frag").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("127.0.0.1", 8081, "/a/b?x=1")
        );
        assert_eq!(u.host_header(), "127.0.0.1:8081");
        assert_eq!(u.to_string(), "http://127.0.0.1:8081/a/b?x=1");
        let u = Url::parse("HTTP://example.com").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("example.com", 80, "/")
        );
        assert_eq!(u.host_header(), "example.com");
        let u = Url::parse("http://localhost?q").unwrap();
        assert_eq!(u.path, "/?q");
        let u = Url::parse("http://h:80/").unwrap();
        assert_eq!(u.host_header(), "h");
    }

    #[test]
    fn ipv6_literals_go_in_brackets() {
        let u = Url::parse("http://[::1]:8080/x").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("::1", 8080));
        assert_eq!(u.host_header(), "[::1]:8080");
        assert_eq!(u.resolve().unwrap(), "[::1]:8080".parse().unwrap());
        let u = Url::parse("http://[::1]/").unwrap();
        assert_eq!((u.port, u.host_header().as_str()), (80, "[::1]"));
        assert!(Url::parse("http://::1:8080/")
            .unwrap_err()
            .contains("brackets"));
        assert!(Url::parse("http://[::1/").unwrap_err().contains("']'"));
        assert!(Url::parse("http://[nope]/").unwrap_err().contains("IPv6"));
    }

    #[test]
    fn bad_urls_say_what_to_write() {
        let e = |t: &str| Url::parse(t).unwrap_err();
        assert!(e("https://127.0.0.1/").contains("https is not supported"));
        assert!(e("127.0.0.1:8080").contains("http://127.0.0.1:8080"));
        assert!(e("ftp://h/").contains("http://"));
        assert!(e("http://:8080/").contains("no host"));
        assert!(e("http://h:0/").contains("port"));
        assert!(e("http://h:99999/").contains("port"));
        assert!(e("http://h:x/").contains("port"));
        assert!(e("http://u@h/").contains("user info"));
        assert!(e("http://h/a b").contains("%20"));
        assert!(e("http://h/a\x1b").contains("0x1b"));
        assert!(e("http://h%20/").contains("host name"));
    }

    #[test]
    fn names_and_literals_resolve() {
        let u = Url::parse("http://127.0.0.1:9/").unwrap();
        assert_eq!(u.resolve().unwrap(), "127.0.0.1:9".parse().unwrap());
        let u = Url::parse("http://localhost:9/").unwrap();
        assert!(u.resolve().unwrap().ip().is_loopback());
    }
}
