#!/usr/bin/env bash
# fuzz_control.sh - feed the control protocol's frame decoder random bytes in random
# pieces (property test `arbitrary_bytes_never_panic_nor_pass_an_oversized_frame`):
# no panic, no frame over its type's cap, the same frames read whole or in pieces.
# The test suite runs 2000 cases; this runs CASES (default 1,000,000) in release mode,
# bounded by LIMIT seconds (default 1800). Not part of CI.
#
#   bench/fuzz_control.sh
#   CASES=200000 bench/fuzz_control.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cases=${CASES:-1000000}
limit=${LIMIT:-1800}
echo "fuzz: $cases inputs through the control frame decoder (at most ${limit}s)" >&2
start=$(date +%s)
PROPTEST_CASES=$cases timeout "$limit" cargo test --release --lib --quiet \
  control::frame::tests::arbitrary_bytes_never_panic_nor_pass_an_oversized_frame
echo "fuzz: $cases inputs, no failure, in $(( $(date +%s) - start ))s" >&2
