#!/usr/bin/env bash
# fuzz_http.sh - feed sockbench's HTTP framing random input, both sides (property tests,
# release mode), each CASES times:
#
# - requests, as `sockbench serve` reads them
#   (`http::session::tests::fuzz::arbitrary_requests_get_well_formed_answers_however_split`):
#   requests built from valid pieces with bytes flipped, long runs inserted, or plain
#   random bytes, fed whole and in random pieces through the session every server model
#   drives. Checked: no panic, no hang, the input buffer bounded, every answer a
#   well-formed response with its own length and one per answered request, nothing after
#   a refusal, and the same answers however the bytes were split.
# - responses, as `sockbench load` reads them (`http::response::tests::fuzz::`):
#   responses as servers write them (lengths, chunked bodies written by the one chunked
#   encoder, bodies to the end of the connection, none; several per connection) must
#   parse back to exactly what was written however split; the same with bytes flipped,
#   long runs inserted, or random bytes must give the same outcome however split, with
#   progress on every call and the kept bytes bounded.
# - chunked bodies (`http::chunked::tests::fuzz::`): any chunks, encoded, decode to their
#   data however split; junk never counts more data than it holds.
#
# The test suite runs 1000 cases of each (256 of the chunked one); this runs CASES
# (default 1,000,000) of each, bounded by LIMIT seconds per target (default 1800; a hang
# fails). Not part of CI.
#
#   bench/fuzz_http.sh
#   CASES=100000 bench/fuzz_http.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cases=${CASES:-1000000}
limit=${LIMIT:-1800}
cargo test --release --lib --quiet --no-run 2>/dev/null
for t in \
    http::session::tests::fuzz::arbitrary_requests_get_well_formed_answers_however_split \
    http::response::tests::fuzz::written_responses_parse_back_exactly_however_split \
    http::response::tests::fuzz::arbitrary_bytes_parse_the_same_however_split \
    http::chunked::tests::fuzz::any_chunks_decode_to_their_data_however_split; do
    echo "fuzz: $cases inputs through $t (at most ${limit}s)" >&2
    start=$(date +%s)
    PROPTEST_CASES=$cases timeout "$limit" cargo test --release --lib --quiet "$t"
    echo "fuzz: $cases inputs, no failure, in $(( $(date +%s) - start ))s: $t" >&2
done
