//! Text sockbench did not write (a peer's words, a saved report's strings, a client's
//! socket name, a file name) made safe to show. This is the one place that decides what
//! may reach a terminal or a Markdown page:
//!
//! - [`terminal`]: no control character reaches a terminal as it is: C0 (ESC, BEL, CR,
//!   LF, ...), DEL, C1 (0x80-0x9f: CSI, OSC, ...) and the invisible characters that
//!   reorder or break a line (bidirectional overrides and isolates, line and paragraph
//!   separators) are written as visible escapes (`\x1b`, `\n`, `\u{9b}`);
//! - [`bytes`]: raw bytes (what a client sent) as printable ASCII, every other byte
//!   `\xNN`;
//! - [`markdown`]: a Markdown table cell or list item: [`terminal`], then the characters
//!   HTML and Markdown tables give a meaning (`&`, `<`, `>`, `|`, `` ` ``, `\`) escaped.

use std::fmt::Write;

/// Whether `c` must not reach a terminal (or a page) as it is.
pub fn hidden(c: char) -> bool {
    // `is_control`: the C0 controls, DEL and the C1 controls.
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
        )
}

/// `text` with every control character (and every invisible character that reorders or
/// breaks a line) written as a visible escape: `\n`, `\r`, `\t`, `\x1b` (ASCII),
/// `\u{9b}` (the rest). Everything else, other languages' letters included, stays as it
/// is.
pub fn terminal(text: &str) -> String {
    if !text.chars().any(hidden) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if hidden(c) && c.is_ascii() => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if hidden(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// [`terminal`], cut at `max` characters (before escaping) with `…` when it was longer.
pub fn terminal_cut(text: &str, max: usize) -> String {
    let mut out = match text.char_indices().nth(max) {
        Some((at, _)) => terminal(&text[..at]),
        None => return terminal(text),
    };
    out.push('…');
    out
}

/// Bytes as text no terminal will interpret: printable ASCII as it is, `\n` `\r` `\t`,
/// `\\` and `\"`, anything else (control bytes, DEL, every byte of UTF-8) as `\xNN`.
pub fn bytes(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    for &b in bytes {
        match b {
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            0x20..=0x7e => s.push(char::from(b)),
            _ => {
                let _ = write!(s, "\\x{b:02x}");
            }
        }
    }
    s
}

/// Free text as a Markdown table cell, heading or list item: [`terminal`] (so no line
/// break either), then `&` `<` `>` as character references (no HTML element, no entity of
/// the text's own) and `\` `|` `` ` `` behind a backslash (no cell break, no code span).
pub fn markdown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in terminal(text).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\\' => out.push_str("\\\\"),
            '|' => out.push_str("\\|"),
            '`' => out.push_str("\\`"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_control_character_becomes_a_visible_escape() {
        assert_eq!(
            terminal("linux\u{1b}[31m 6.1\r\n\u{7}"),
            "linux\\x1b[31m 6.1\\r\\n\\x07"
        );
        assert_eq!(terminal("\u{1b}]0;owned\u{7}"), "\\x1b]0;owned\\x07");
        assert_eq!(
            terminal("a\u{7f}b\u{9b}31m\u{9d}c"),
            "a\\x7fb\\u{9b}31m\\u{9d}c"
        );
        assert_eq!(terminal("\u{0}\t"), "\\x00\\t");
        assert_eq!(terminal("evil\u{202e}txt.exe"), "evil\\u{202e}txt.exe");
        for c in (0u32..0x20).chain(0x7f..0xa0).filter_map(char::from_u32) {
            let shown = terminal(&c.to_string());
            assert!(shown.chars().all(|c| !c.is_control()), "{c:?}: {shown}");
        }
    }

    #[test]
    fn plain_text_and_other_scripts_are_left_alone() {
        for t in ["tcp 64 KiB", "Ünïcödé → 東京", "a\\b \"q\"", ""] {
            assert_eq!(terminal(t), t);
        }
    }

    #[test]
    fn a_cut_text_is_cut_before_it_is_escaped() {
        assert_eq!(terminal_cut("abcdef", 3), "abc…");
        assert_eq!(terminal_cut("ok", 2), "ok");
        assert_eq!(terminal_cut("\u{1b}[2Jxyz", 2), "\\x1b[…");
    }

    #[test]
    fn bytes_are_printable_ascii_or_hex() {
        assert_eq!(bytes(b"hello\n"), "hello\\n");
        assert_eq!(bytes(b"\x1b[2J\x07"), "\\x1b[2J\\x07");
        assert_eq!(bytes("\u{9b}".as_bytes()), "\\xc2\\x9b");
    }

    #[test]
    fn markdown_cells_carry_no_markup_no_cell_break_and_no_line_break() {
        assert_eq!(
            markdown("<script>alert(1)</script>"),
            "&lt;script&gt;alert(1)&lt;/script&gt;"
        );
        assert_eq!(
            markdown("<img src=x onerror=alert(1)>"),
            "&lt;img src=x onerror=alert(1)&gt;"
        );
        assert_eq!(
            markdown("a|b `c` &amp; d\\"),
            "a\\|b \\`c\\` &amp;amp; d\\\\"
        );
        assert_eq!(markdown("one\ntwo\u{1b}"), "one\\\\ntwo\\\\x1b");
        assert_eq!(markdown("tcp 64 KiB"), "tcp 64 KiB");
    }
}
