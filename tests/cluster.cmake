# Issue 32's deployment: deploy/cluster/ and scripts/cluster.sh.
#
# cluster_configs: the files docker-compose runs agree with each other and
# with the protocol (HAProxy's Ping bytes and the Pong it expects, ports,
# Redis's durability settings); HAProxy validates its file.
# cluster_loopback: scripts/cluster.sh up with Redis, HAProxy and two
# replicas on loopback, then Ping/FindPath/UpdateCells through HAProxy, a
# drain, a kill -9 and start-replica, and down (tests/cluster/test_cluster.py).
# cluster_faults: the fault run of issue 32's Tests: three replicas under
# load from four clients while a replica is killed, another stopped for 5 s
# and Redis killed; a checker then replays the Stream and checks every
# answer (tests/cluster/test_faults.py).
# haproxy and redis-server come from the test package set
# (scripts/install-deps.sh test); without them the tests fail naming them.
if(PDPY_MISSING)
  pd_client_test_unavailable(cluster_configs "${PDPY_MISSING}")
  pd_client_test_unavailable(cluster_loopback "${PDPY_MISSING}")
  pd_client_test_unavailable(cluster_faults "${PDPY_MISSING}")
else()
  add_test(NAME cluster_configs
           COMMAND ${CMAKE_COMMAND} -E env "PYTHONPATH=${PDPY_GEN_DIR}"
                   "${PATHD_PYTHON}" "${CMAKE_CURRENT_SOURCE_DIR}/cluster/test_deploy_configs.py"
                   "${PROJECT_SOURCE_DIR}")
  set_tests_properties(cluster_configs PROPERTIES LABELS "cluster" TIMEOUT 60)
  add_test(NAME cluster_loopback
           COMMAND ${CMAKE_COMMAND} -E env "PYTHONPATH=${PDPY_GEN_DIR}"
                   "${PATHD_PYTHON}" "${CMAKE_CURRENT_SOURCE_DIR}/cluster/test_cluster.py"
                   "${PROJECT_SOURCE_DIR}/scripts/cluster.sh" $<TARGET_FILE:pathd>)
  # Ports of its own (a free block it picks), but HAProxy's checks and the
  # waits for them take seconds: not beside the other daemon tests' load.
  set_tests_properties(cluster_loopback PROPERTIES LABELS "cluster" TIMEOUT 180 RUN_SERIAL TRUE)
  add_test(NAME cluster_faults
           COMMAND ${CMAKE_COMMAND} -E env
                   "PYTHONPATH=${PDPY_GEN_DIR}:${PROJECT_SOURCE_DIR}/client-examples/python"
                   "PYTHONPYCACHEPREFIX=${CMAKE_BINARY_DIR}/client-examples/python/pycache"
                   "${PATHD_PYTHON}" "${CMAKE_CURRENT_SOURCE_DIR}/cluster/test_faults.py"
                   "${PROJECT_SOURCE_DIR}/scripts/cluster.sh" $<TARGET_FILE:pathd>)
  # About 50 s: 30 s of load with the faults, the checker, and down.
  set_tests_properties(cluster_faults PROPERTIES LABELS "cluster" TIMEOUT 150 RUN_SERIAL TRUE)
endif()
