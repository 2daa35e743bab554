// The pathd Go client (client-examples/go). It builds offline from Debian 12's
// packages: golang-go (Go 1.19) and golang-google-protobuf-dev, whose source
// tree the replace below points at. A project with its own protobuf module
// (Nakama's, say) drops the replace and vendors this package (README.md).
module pathd.example/client

go 1.19

require google.golang.org/protobuf v1.28.1

replace google.golang.org/protobuf => /usr/share/gocode/src/google.golang.org/protobuf
