//! The request every connection sends, built once: an HTTP/1.1 request line, `Host`, the
//! user's headers and, without keep-alive, `Connection: close`. The bytes are repeated
//! once per pipeline slot so that a batch of k requests is one slice and one write.

/// The prebuilt request bytes.
#[derive(Clone, Debug)]
pub struct Request {
    bytes: Vec<u8>,
    one: usize,
}

impl Request {
    /// `method path HTTP/1.1` with `Host: host`, `headers` (a `Host` among them replaces
    /// the URL's) and `Connection: close` unless `keepalive`, repeated `copies` times.
    pub fn new(
        method: &str,
        path: &str,
        host: &str,
        headers: &[(String, String)],
        keepalive: bool,
        copies: u32,
    ) -> Request {
        let mut one = format!("{method} {path} HTTP/1.1\r\n");
        if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
            one.push_str(&format!("Host: {host}\r\n"));
        }
        for (n, v) in headers {
            one.push_str(&format!("{n}: {v}\r\n"));
        }
        if !keepalive
            && !headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("connection"))
        {
            one.push_str("Connection: close\r\n");
        }
        one.push_str("\r\n");
        let len = one.len();
        Request {
            bytes: one.repeat(copies.max(1) as usize).into_bytes(),
            one: len,
        }
    }

    /// Bytes of one request.
    pub fn len(&self) -> usize {
        self.one
    }

    /// Never: a request has at least its request line.
    pub fn is_empty(&self) -> bool {
        self.one == 0
    }

    /// `k` requests back to back (at most the copies it was built with).
    pub fn batch(&self, k: usize) -> &[u8] {
        &self.bytes[..(k * self.one).min(self.bytes.len())]
    }
}

/// Check a `-H` header, `Name: value`.
///
/// # Errors
/// A message saying what a header looks like.
pub fn parse_header(text: &str) -> Result<(String, String), String> {
    let Some((name, value)) = text.split_once(':') else {
        return Err(format!(
            "invalid header '{text}': write it as 'Name: value', e.g. -H 'Accept: */*'"
        ));
    };
    let (name, value) = (name.trim(), value.trim());
    if name.is_empty() || !name.bytes().all(is_token) {
        return Err(format!(
            "invalid header name '{name}': letters, digits and !#$%&'*+-.^_`|~ only"
        ));
    }
    if value.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
        return Err(format!(
            "invalid header '{name}': its value holds a control character (a line break?)"
        ));
    }
    Ok((name.to_string(), value.to_string()))
}

/// Check `-m`: a token (RFC 9110 5.6.2), upper-cased as servers expect.
///
/// # Errors
/// A message naming the method.
pub fn parse_method(text: &str) -> Result<String, String> {
    let m = text.trim();
    if m.is_empty() || !m.bytes().all(is_token) {
        return Err(format!(
            "invalid method '{text}': a word such as GET, HEAD or POST"
        ));
    }
    Ok(m.to_ascii_uppercase())
}

/// RFC 9110 `tchar`.
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_one_http11_request_repeated_per_slot() {
        let r = Request::new("GET", "/x", "h:8080", &[], false, 3);
        let one = "GET /x HTTP/1.1\r\nHost: h:8080\r\nConnection: close\r\n\r\n";
        assert_eq!(r.len(), one.len());
        assert_eq!(r.batch(1), one.as_bytes());
        assert_eq!(r.batch(3), one.repeat(3).as_bytes());
        assert_eq!(r.batch(9).len(), 3 * one.len());
        let h = vec![("Host".to_string(), "other".to_string())];
        let r = Request::new("HEAD", "/", "h", &h, true, 1);
        assert_eq!(r.batch(1), b"HEAD / HTTP/1.1\r\nHost: other\r\n\r\n");
    }

    #[test]
    fn headers_and_methods_are_checked() {
        assert_eq!(
            parse_header("Accept:  */* ").unwrap(),
            ("Accept".into(), "*/*".into())
        );
        assert!(parse_header("nocolon").unwrap_err().contains("Name: value"));
        assert!(parse_header("Bad Name: x")
            .unwrap_err()
            .contains("header name"));
        assert!(parse_header("X: a\r\nY: b")
            .unwrap_err()
            .contains("control"));
        assert_eq!(parse_method("get").unwrap(), "GET");
        assert!(parse_method("GE T").is_err());
        assert!(parse_method("").is_err());
    }
}
