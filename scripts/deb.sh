#!/usr/bin/env bash
# Builds the Debian package, target/debian/tableq_VERSION-1_ARCH.deb: the release
# binary, then the man pages and shell completions the package installs (made by
# the binary itself: `tableq man DIR`, `tableq completions SHELL`), then
# `cargo deb --no-build` with the metadata in Cargo.toml. Needs cargo-deb
# (`cargo install --locked cargo-deb`).
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"

cargo build --release --locked --bin tableq
made="$target/release/deb"
rm -rf "$made"
mkdir -p "$made/man" "$made/completions"
"$target/release/tableq" man "$made/man"
gzip -9n "$made"/man/*.1    # Debian policy: man pages compressed
"$target/release/tableq" completions bash > "$made/completions/tableq.bash"
"$target/release/tableq" completions zsh > "$made/completions/_tableq"
"$target/release/tableq" completions fish > "$made/completions/tableq.fish"
cargo deb --no-build --locked --output "$target/debian/" "$@"
