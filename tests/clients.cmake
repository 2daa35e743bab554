# Python and Node.js client examples (client-examples/python, client-examples/node),
# each tested against the live daemon: scripts/run-with-daemon.sh starts this
# build's pathd on the demo world (config/default.json, on an ephemeral
# loopback port), runs the client's test suite with PATHD_ADDR set, then stops the daemon with
# SIGTERM and requires a clean exit. PATHCTL_BIN is the C reference client,
# whose answers the other clients must match. The tests exercise the wire
# protocol, not the daemon's memory, so they carry no sanitizer labels; the
# label "clients" selects them (ctest -L clients).
#
# Missing tools (protoc, python3-protobuf, node, npm) never stop configuring,
# since the daemon builds without them; the affected test then fails and says
# which Debian package to install.
add_subdirectory("${PROJECT_SOURCE_DIR}/client-examples/python"
                 "${CMAKE_BINARY_DIR}/client-examples/python")

find_program(PATHD_NODE NAMES node nodejs)
find_program(PATHD_NPM NAMES npm)
set(PD_NODE_MISSING "")
if(NOT PATHD_NODE OR NOT PATHD_NPM)
  set(PD_NODE_MISSING "node or npm not found: install the Debian packages nodejs and npm")
endif()

set(PD_CLIENT_DAEMON
    "${PROJECT_SOURCE_DIR}/scripts/run-with-daemon.sh"
    --pathd $<TARGET_FILE:pathd>
    --config "${PROJECT_SOURCE_DIR}/config/default.json")

# A test that fails at once with the reason it cannot run.
function(pd_client_test_unavailable name reason)
  add_test(NAME ${name} COMMAND sh -c "echo \"${name}: $0\" >&2; exit 1" "${reason}")
endfunction()

if(PDPY_MISSING)
  pd_client_test_unavailable(client_python "${PDPY_MISSING}")
else()
  add_test(NAME client_python
           COMMAND ${CMAKE_COMMAND} -E env
                   PATHCTL_BIN=$<TARGET_FILE:pathctl>
                   "PYTHONPATH=${PDPY_GEN_DIR}:${PROJECT_SOURCE_DIR}/client-examples/python"
                   "PYTHONPYCACHEPREFIX=${CMAKE_BINARY_DIR}/client-examples/python/pycache"
                   ${PD_CLIENT_DAEMON}
                   -- "${PATHD_PYTHON}" "${PROJECT_SOURCE_DIR}/client-examples/python/test_pathd_client.py" -v)
endif()

# The Node client's pinned packages (npm ci) are installed by the build, not
# by the test: every build runs install-deps.sh, which returns at once when
# node_modules holds a complete install of package-lock.json and otherwise
# removes whatever is there (an empty or partial node_modules left by an
# interrupted npm ci) and installs again. So the install never runs inside
# client_node's timeout, and a half-finished one is redone by the next build.
# --soft: a failed install (offline) warns instead of failing the build, and
# client_node then fails saying the packages are missing.
# The Colyseus room example's packages are installed the same way.
function(pd_node_deps_target target dir what)
  add_custom_target(${target} ALL
                    COMMAND ${CMAKE_COMMAND} -E env PATHD_NODE=${PATHD_NODE} PATHD_NPM=${PATHD_NPM}
                            "${PROJECT_SOURCE_DIR}/client-examples/${dir}/install-deps.sh" --soft
                    COMMENT "${what}: pinned packages (npm ci when incomplete)"
                    VERBATIM)
endfunction()
if(NOT PD_NODE_MISSING)
  pd_node_deps_target(pathd_node_deps node "Node client")
endif()

# run-tests.sh only checks the install (install-deps.sh --check).
if(PD_NODE_MISSING)
  pd_client_test_unavailable(client_node "${PD_NODE_MISSING}")
else()
  add_test(NAME client_node
           COMMAND ${CMAKE_COMMAND} -E env
                   PATHCTL_BIN=$<TARGET_FILE:pathctl>
                   PATHD_NODE=${PATHD_NODE} PATHD_NPM=${PATHD_NPM}
                   ${PD_CLIENT_DAEMON}
                   -- "${PROJECT_SOURCE_DIR}/client-examples/node/run-tests.sh")
endif()

# install-deps.sh itself, against a stub npm in a scratch directory: an empty
# or partial node_modules is detected and installed again.
if(PD_NODE_MISSING)
  pd_client_test_unavailable(client_node_install "${PD_NODE_MISSING}")
else()
  add_test(NAME client_node_install
           COMMAND ${CMAKE_COMMAND} -E env PATHD_NODE=${PATHD_NODE}
                   "${PROJECT_SOURCE_DIR}/client-examples/node/test/install-deps-test.sh")
endif()

# The Colyseus room example (client-examples/colyseus): its pinned packages
# are installed by the build as the Node client's are (install-deps.sh runs
# the Node client's script on its directory), and its bots run against
# pathd daemons the test starts itself (PATHD_BIN, PATHD_CONFIG from
# run-with-daemon.sh), so it can restart one mid-run. The benchmark part
# plays COLYSEUS_BENCH_SECONDS (10 here; docs/BENCHMARKS.md's figures: 60).
if(NOT PD_NODE_MISSING)
  pd_node_deps_target(pathd_colyseus_deps colyseus "Colyseus room example")
  # One npm at a time: both installs share npm's cache.
  add_dependencies(pathd_colyseus_deps pathd_node_deps)
  add_test(NAME client_colyseus
           COMMAND ${CMAKE_COMMAND} -E env
                   PATHD_NODE=${PATHD_NODE} PATHD_NPM=${PATHD_NPM} COLYSEUS_BENCH_SECONDS=10
                   ${PD_CLIENT_DAEMON}
                   -- "${PROJECT_SOURCE_DIR}/client-examples/colyseus/run-tests.sh")
else()
  pd_client_test_unavailable(client_colyseus "${PD_NODE_MISSING}")
endif()
set_tests_properties(client_colyseus PROPERTIES LABELS "clients" TIMEOUT 180)

# The timeout is a hang guard, not a speed check: on a freshly bootstrapped
# Debian (Debian's node 18, 2 cores at load average ~18) client_node's 35
# tests took 40 s of node's own time and the whole test passed 60 s.
set_tests_properties(client_python client_node client_node_install PROPERTIES LABELS "clients" TIMEOUT 180)

# The Go client (client-examples/go): go test against the live daemon, offline
# (GOPROXY=off) from Debian's golang-go and golang-google-protobuf-dev; its
# build cache lives in the build tree. run-tests.sh names any missing Debian
# package and prints "go client: N passed, N failed". The timeout is a hang
# guard, within the 2 minutes the Go build and run may take: a cold build
# and the run took 40 s at load average 10.
find_program(PATHD_GO NAMES go)
if(NOT PATHD_GO)
  pd_client_test_unavailable(client_go "go not found: install the Debian packages golang-go, golang-google-protobuf-dev and protoc-gen-go")
else()
  add_test(NAME client_go
           COMMAND ${CMAKE_COMMAND} -E env
                   PATHCTL_BIN=$<TARGET_FILE:pathctl>
                   PATHD_GO=${PATHD_GO}
                   PATHD_GO_CACHE=${CMAKE_BINARY_DIR}/client-examples/go
                   ${PD_CLIENT_DAEMON}
                   -- "${PROJECT_SOURCE_DIR}/client-examples/go/run-tests.sh")
endif()
set_tests_properties(client_go PROPERTIES LABELS "clients" TIMEOUT 120)
