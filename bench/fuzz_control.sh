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
#      its_own`): random addresses, paths and names; only its own address passes;
#   5. the client's whole session against a hostile server (`a_hostile_server_never_makes_a_
#      session_panic_hang_trust_it_or_report_the_impossible`): a scripted server plays the
#      handshake (with and without a key) and one or two tcp, unix or fifo runs honestly,
#      then breaks one step (wrong type, cut, over its cap, garbage, a lying value, an
#      endpoint no trust check passes, silence, a hang-up); the real client (`Placement::
#      run` after the handshake) must not panic, must give up on silence within its
#      deadlines, must open nothing the decoys stand for, hold no more than a result and
#      accept only figures a measurement gives;
#   6. the server's whole session against a hostile client (`a_hostile_client_never_makes_
#      the_server_panic_hang_hold_too_much_or_go_on_after_a_refusal`): the same, the other
#      way round, one or two steps broken; the real conversation (`converse`: the session,
#      its decoder, `server_run`) must not panic, must end within its deadlines, must hold
#      no more than the state's frames (4 KiB before the handshake, 64 KiB after), must
#      send nothing after a refusal and open nothing the decoys stand for; threads and
#      descriptors stay bounded over the million.
# The test suite runs 2000, 500, 500, 500, 300 and 300 cases; this runs CASES (default
# 1,000,000) of each, each bounded by LIMIT seconds (default 1800; a hang fails). Targets 5
# and 6 run SBFUZZ_WORKERS sessions at once (default four per CPU; a session mostly waits
# for the other side). Not part of CI.
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
         placement::trust::tests::fuzz::a_remote_peer_passes_only_with_an_address_of_its_own \
         placement::remote::session_fuzz::a_hostile_server_never_makes_a_session_panic_hang_trust_it_or_report_the_impossible \
         mode::server::session_fuzz::a_hostile_client_never_makes_the_server_panic_hang_hold_too_much_or_go_on_after_a_refusal; do
  echo "fuzz: $cases inputs through ${t%%::tests*} (at most ${limit}s)" >&2
  start=$(date +%s)
  PROPTEST_CASES=$cases timeout "$limit" cargo test --release --lib --quiet "$t"
  echo "fuzz: $cases inputs, no failure, in $(( $(date +%s) - start ))s" >&2
done
