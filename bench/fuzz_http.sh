#!/usr/bin/env bash
# fuzz_http.sh - feed `sockbench serve`'s request handling random input (property test,
# release mode): `http::session::tests::fuzz::arbitrary_requests_get_well_formed_answers_
# however_split` builds requests from valid pieces with bytes flipped, long runs inserted,
# or plain random bytes, feeds each whole and in random pieces through the session every
# server model drives, and checks: no panic, no hang (each case bounded by the script's
# LIMIT), the input buffer bounded, every answer a well-formed response with its own
# length and one per answered request, nothing after a refusal, and the same answers
# however the bytes were split.
# The test suite runs 1000 cases; this runs CASES (default 1,000,000), bounded by LIMIT
# seconds in all (default 1800; a hang fails). Not part of CI.
#
#   bench/fuzz_http.sh
#   CASES=100000 bench/fuzz_http.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cases=${CASES:-1000000}
limit=${LIMIT:-1800}
t=http::session::tests::fuzz::arbitrary_requests_get_well_formed_answers_however_split
echo "fuzz: $cases inputs through the HTTP session (at most ${limit}s)" >&2
start=$(date +%s)
PROPTEST_CASES=$cases timeout "$limit" cargo test --release --lib --quiet "$t"
echo "fuzz: $cases inputs, no failure, in $(( $(date +%s) - start ))s" >&2
