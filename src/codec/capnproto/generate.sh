#!/bin/sh
# Regenerates messages_capnp.rs from messages.capnp. Needs the schema compiler (Debian:
# apt-get install capnproto) and the Rust plugin of the capnp crate's version (cargo install
# capnpc --version 0.27.0, then its bin directory on PATH).
set -e
cd "$(dirname "$0")"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
capnp compile -orust:"$out" messages.capnp
# The plugin names its module from the crate's root; here it lives in codec::capnproto.
sed 's/crate::messages_capnp/crate::codec::capnproto::messages_capnp/g' \
    "$out/messages_capnp.rs" > messages_capnp.rs
