#!/bin/sh
# Regenerates pathdpb/pathd.pb.go from proto/pathd.proto with Debian's protoc
# and protoc-gen-go (packages protobuf-compiler and protoc-gen-go). The file
# is committed, as Go packages do, so `go build` needs no protoc; the test
# TestGeneratedMatchesProto fails until this is run after a proto change.
#
#   client-examples/go/gen.sh [OUTDIR]    (default: client-examples/go/pathdpb)
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/pathdpb}"
mkdir -p "$out"
exec protoc -I"$here/../../proto" \
  --go_out="$out" --go_opt=paths=source_relative \
  --go_opt=Mpathd.proto=pathd.example/client/pathdpb \
  pathd.proto
