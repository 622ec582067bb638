//! Chunked transfer coding (RFC 9112 section 7.1), both ways and without I/O: the one
//! decoder the server (a request's body) and the load generator (a response's body)
//! step through as bytes arrive, and the encoder the tests and the fuzzers write bodies
//! with.
//!
//! The decoder counts a body's data and never keeps it. It consumes a chunk-size line
//! only when the whole line is there (it is parsed with `httparse::parse_chunk_size`),
//! and everything else a byte at a time, so a caller that owns its buffer hands it the
//! same unconsumed bytes again with more behind them, and one that does not keeps the
//! unconsumed tail of a size line (at most `max_line` bytes).

/// The last chunk and the empty trailer that end every chunked body.
pub const LAST: &[u8] = b"0\r\n\r\n";

/// `data` as one chunk (nothing for empty data: a chunk of size 0 is the last one).
pub fn encode(data: &[u8], out: &mut Vec<u8>) {
    if data.is_empty() {
        return;
    }
    out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// Where a chunked body stands, as bytes arrive.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Decoder {
    /// Expecting a chunk-size line.
    #[default]
    Size,
    /// Inside a chunk's data, this many bytes left.
    Data(u64),
    /// The CRLF after a chunk's data; `cr`: its CR was seen.
    DataEnd {
        /// The CR was seen.
        cr: bool,
    },
    /// After the last chunk: trailer lines until an empty one.
    Trailer {
        /// Bytes of the current line so far (0: at the start of a line).
        line: usize,
        /// Bytes of the trailer section so far.
        section: usize,
    },
}

/// What one call of [`Decoder::feed`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fed {
    /// Bytes consumed from the front of the input. Short of its end and not `done`, the
    /// rest is the start of a chunk-size line: give it again with more behind it.
    pub used: usize,
    /// Bytes of chunk data among them.
    pub data: u64,
    /// The body ended (after the empty line that closes the trailer).
    pub done: bool,
}

/// A chunked body that cannot be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkError {
    /// Not chunked coding, with what is wrong.
    Malformed(&'static str),
    /// A chunk-size line or the trailer section longer than the caller takes.
    TooLarge,
}

impl Decoder {
    /// Consume as much of a chunked body as `buf` holds, up to its end; chunk-size lines
    /// and the trailer section may each be at most `max_line` bytes.
    ///
    /// # Errors
    /// A chunk size that is not hexadecimal (or overflows), chunk data longer than its
    /// size, a size line or trailer section over `max_line`.
    pub fn feed(&mut self, buf: &[u8], max_line: usize) -> Result<Fed, ChunkError> {
        let mut fed = Fed::default();
        loop {
            let rest = &buf[fed.used..];
            match *self {
                Decoder::Size => {
                    let line = &rest[..rest.len().min(max_line)];
                    match httparse::parse_chunk_size(line) {
                        Ok(httparse::Status::Complete((n, size))) => {
                            fed.used += n;
                            *self = match size {
                                0 => Decoder::Trailer {
                                    line: 0,
                                    section: 0,
                                },
                                s => Decoder::Data(s),
                            };
                        }
                        Ok(httparse::Status::Partial) if rest.len() >= max_line => {
                            return Err(ChunkError::TooLarge)
                        }
                        Ok(httparse::Status::Partial) => return Ok(fed),
                        Err(_) => return Err(ChunkError::Malformed("invalid chunk size")),
                    }
                }
                Decoder::Data(left) => {
                    let take = (rest.len() as u64).min(left);
                    fed.used += take as usize;
                    fed.data += take;
                    if take < left {
                        *self = Decoder::Data(left - take);
                        return Ok(fed);
                    }
                    *self = Decoder::DataEnd { cr: false };
                }
                Decoder::DataEnd { cr } => {
                    let Some(&b) = rest.first() else {
                        return Ok(fed);
                    };
                    fed.used += 1;
                    *self = match (cr, b) {
                        (false, b'\r') => Decoder::DataEnd { cr: true },
                        (_, b'\n') => Decoder::Size,
                        _ => return Err(ChunkError::Malformed("chunk data longer than its size")),
                    };
                }
                Decoder::Trailer { line, section } => {
                    let Some(&b) = rest.first() else {
                        return Ok(fed);
                    };
                    fed.used += 1;
                    if section + 1 > max_line {
                        return Err(ChunkError::TooLarge);
                    }
                    match b {
                        b'\n' if line == 0 => {
                            *self = Decoder::Size;
                            fed.done = true;
                            return Ok(fed);
                        }
                        b'\n' => {
                            *self = Decoder::Trailer {
                                line: 0,
                                section: section + 1,
                            }
                        }
                        // A CR is not part of a line's length (a bare CRLF is empty).
                        b'\r' => {
                            *self = Decoder::Trailer {
                                line,
                                section: section + 1,
                            }
                        }
                        _ => {
                            *self = Decoder::Trailer {
                                line: line + 1,
                                section: section + 1,
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decode `wire` fed in pieces cut at `cuts`, keeping an unconsumed size line as a
    /// caller that owns its buffer does: the data count, and where the body ended.
    fn decode(wire: &[u8], cuts: &[usize], max_line: usize) -> Result<(u64, usize), ChunkError> {
        let mut d = Decoder::default();
        let (mut data, mut start) = (0, 0);
        for &end in cuts.iter().chain(std::iter::once(&wire.len())) {
            loop {
                let fed = d.feed(&wire[start..end], max_line)?;
                start += fed.used;
                data += fed.data;
                if fed.done {
                    return Ok((data, start));
                }
                if fed.used == 0 || start == end {
                    break;
                }
            }
        }
        Ok((data, usize::MAX))
    }

    #[test]
    fn chunks_with_extensions_and_a_trailer_end_where_the_body_does() {
        let wire = b"5;ext=1\r\nHello\r\n8\r\n, World!\r\n0\r\nX-T: 1\r\n\r\nNEXT";
        assert_eq!(decode(wire, &[], 64), Ok((13, wire.len() - 4)));
        for cut in 1..wire.len() {
            assert_eq!(
                decode(wire, &[cut], 64),
                Ok((13, wire.len() - 4)),
                "cut at {cut}"
            );
        }
        let every: Vec<usize> = (1..wire.len()).collect();
        assert_eq!(decode(wire, &every, 64), Ok((13, wire.len() - 4)));
        // A bare LF ends chunk data and trailer lines too (a size line needs its CRLF).
        assert_eq!(decode(b"3\r\nabc\n0\r\nX: y\n\n", &[], 64), Ok((3, 16)));
    }

    #[test]
    fn what_is_not_chunked_is_refused_with_the_reason() {
        assert_eq!(
            decode(b"zz\r\n", &[], 64),
            Err(ChunkError::Malformed("invalid chunk size"))
        );
        assert_eq!(
            decode(b"2\r\nabc\r\n", &[], 64),
            Err(ChunkError::Malformed("chunk data longer than its size"))
        );
        assert_eq!(
            decode(b"2\r\nab\rX", &[], 64),
            Err(ChunkError::Malformed("chunk data longer than its size"))
        );
        // An overflowing size is not a size.
        assert_eq!(
            decode(b"fffffffffffffffff\r\n", &[], 64),
            Err(ChunkError::Malformed("invalid chunk size"))
        );
    }

    #[test]
    fn a_size_line_or_a_trailer_over_the_bound_is_too_large_and_one_at_it_is_not() {
        let long = format!("1;{}\r\nx\r\n0\r\n\r\n", "e".repeat(20));
        let line = long.find('\n').unwrap() + 1;
        assert_eq!(decode(long.as_bytes(), &[], line), Ok((1, long.len())));
        assert_eq!(
            decode(long.as_bytes(), &[], line - 1),
            Err(ChunkError::TooLarge)
        );
        // A partial size line as long as the bound can never complete.
        assert_eq!(decode(b"1;eeeeee", &[], 8), Err(ChunkError::TooLarge));
        assert_eq!(decode(b"1;eeeee", &[], 8), Ok((0, usize::MAX)));
        // The trailer section in all, not each line, is bounded.
        let trailer = b"0\r\nA: 1\r\nB: 2\r\n\r\n";
        let section = trailer.len() - 3;
        assert_eq!(decode(trailer, &[], section), Ok((0, trailer.len())));
        assert_eq!(decode(trailer, &[], section - 1), Err(ChunkError::TooLarge));
    }

    #[test]
    fn what_the_encoder_writes_the_decoder_reads_back() {
        let mut wire = Vec::new();
        for piece in [&b"a"[..], b"", &[7u8; 300], b"\r\n0\r\n"] {
            encode(piece, &mut wire);
        }
        wire.extend_from_slice(LAST);
        assert!(wire.starts_with(b"1\r\na\r\n12c\r\n"));
        assert_eq!(decode(&wire, &[], 64), Ok((306, wire.len())));
        let mut empty = Vec::new();
        encode(b"", &mut empty);
        assert!(empty.is_empty(), "an empty chunk would end the body");
    }

    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// Chunks of any sizes, encoded, decode to their data however the bytes are
            /// split; and bytes that are not chunked coding give an error or stop short,
            /// never a panic, never a count beyond what was given.
            #[test]
            fn any_chunks_decode_to_their_data_however_split(
                chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..70), 0..12),
                cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
                junk in proptest::collection::vec(any::<u8>(), 0..200),
            ) {
                let mut wire = Vec::new();
                for c in &chunks {
                    encode(c, &mut wire);
                }
                wire.extend_from_slice(LAST);
                let total: u64 = chunks.iter().map(|c| c.len() as u64).sum();
                let mut at: Vec<usize> = cuts.iter().map(|i| i.index(wire.len())).collect();
                at.sort_unstable();
                prop_assert_eq!(decode(&wire, &at, 64), Ok((total, wire.len())));
                if let Ok((data, _)) = decode(&junk, &[], 64) {
                    prop_assert!(data <= junk.len() as u64);
                }
            }
        }
    }
}
