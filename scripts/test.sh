#!/usr/bin/env bash
# The test suite: formatting, lints, unit tests, and simulator tests over
# many seeds with faults (TESSERA_SEEDS per protocol, default 200).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== cargo test (unit, integration, ${TESSERA_SEEDS:-200} simulator seeds per protocol)"
cargo test --workspace --locked
