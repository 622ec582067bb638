#!/usr/bin/env bash
# fuzz_control.sh - feed the control protocol random input (property tests, release mode):
#   1. the frame decoder: random bytes in random pieces (`arbitrary_bytes_never_panic_nor_
#      pass_an_oversized_frame`): no panic, no frame over its type's cap, the same frames
#      read whole or in pieces;
#   2. the server's state machine: random sequences of frames of every type with random
#      or valid bodies, with and without a key, and random bytes through the decoder into
#      it (`arbitrary_frames_never_panic_and_a_refusal_is_final`): no panic, every step an
#      answer, a run, an end or a refusal, nothing accepted after a refusal;
#   3. the client's handshake against a hostile server (`a_hostile_server_never_makes_the_
#      handshake_panic_hang_or_skip_the_key`): random scripts of frames and bytes; no
#      panic, no hang, no server accepted that did not prove the key;
#   4. what a peer on another host names (`a_remote_peer_passes_only_with_an_address_of_
#      its_own`): random addresses, paths and names; only its own address passes.
# The test suite runs 2000, 500, 500 and 500 cases; this runs CASES (default 1,000,000) of each,
# each bounded by LIMIT seconds (default 1800; a hang fails). Not part of CI.
#
#   bench/fuzz_control.sh
#   CASES=200000 bench/fuzz_control.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cases=${CASES:-1000000}
limit=${LIMIT:-1800}
for t in control::frame::tests::arbitrary_bytes_never_panic_nor_pass_an_oversized_frame \
         control::session::tests::fuzz::arbitrary_frames_never_panic_and_a_refusal_is_final \
         placement::remote::fuzz::a_hostile_server_never_makes_the_handshake_panic_hang_or_skip_the_key \
         placement::trust::tests::fuzz::a_remote_peer_passes_only_with_an_address_of_its_own; do
  echo "fuzz: $cases inputs through ${t%%::tests*} (at most ${limit}s)" >&2
  start=$(date +%s)
  PROPTEST_CASES=$cases timeout "$limit" cargo test --release --lib --quiet "$t"
  echo "fuzz: $cases inputs, no failure, in $(( $(date +%s) - start ))s" >&2
done
