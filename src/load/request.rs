//! What `load -H` and `-m` may be: a header as `Name: value` with a token for a name and
//! no control character in the value, a method a token (the request they make is
//! [`crate::http::request::Request`]).

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
