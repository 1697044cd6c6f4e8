#!/usr/bin/env bash
# The test suite: formatting, lints, unit tests, and simulator tests over
# many seeds with faults (TESSERA_SEEDS per protocol, default 200).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings
# Issue 10's acceptance: the kill -9 / restart test 20 times in a row.
export TESSERA_KILL_RUNS="${TESSERA_KILL_RUNS:-20}"
echo "== cargo test (unit, integration, ${TESSERA_SEEDS:-200} simulator seeds per protocol, ${TESSERA_KILL_RUNS} kill -9 runs per protocol)"
cargo test --workspace --locked
