# Net layer tests: the server in-process on an ephemeral loopback port, with a
# raw socket client that builds frames from the generated protobuf-c code.
pd_test(NAME test_server SOURCES unit/test_server.c
        LIBS pathd_net pathd_testsock PkgConfig::PROTOBUFC Threads::Threads
        LABELS sanitize threaded TIMEOUT 120)
get_target_property(PD_NET_PROTO_GEN_DIR pathd_codec PD_PROTO_GEN_DIR)
target_include_directories(test_server PRIVATE "${PD_NET_PROTO_GEN_DIR}")
# The watch subscriptions (pd_watchers.c) without sockets: version order when
# events arrive out of order, late subscribers, the overflow cap.
pd_test(NAME test_watch_hub SOURCES unit/test_watch_hub.c
        LIBS pathd_net PkgConfig::PROTOBUFC LABELS sanitize)
target_include_directories(test_watch_hub PRIVATE "${PD_NET_PROTO_GEN_DIR}")
