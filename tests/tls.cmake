# TLS in front of pathd, as docs/TLS.md tells operators to run it: HAProxy
# terminates TLS on loopback and forwards to the daemon. Fails, naming the
# Debian packages, where haproxy or openssl is missing (`make test` installs
# them, scripts/install-deps.sh), like the Node and Python client tests.
add_test(NAME tls_haproxy
         COMMAND "${CMAKE_CURRENT_SOURCE_DIR}/tls/test-tls-haproxy.sh" $<TARGET_FILE:pathd> "${PDPY_GEN_DIR}" "${PATHD_PYTHON}")
set_tests_properties(tls_haproxy PROPERTIES LABELS "clients" TIMEOUT 60)
