# Issue 34, core: space-time reservations. The table (pd_reserve) and
# ReservePath's planner (pd_sipp) on hand-made plans and scenes, the
# comparison with A* alone, and a randomized simulation; every answer with a
# plan is replayed by the independent checker tests/agents/check_plans.py,
# which the test runs itself (Python 3, standard library only).
if(NOT PATHD_PYTHON)
  set(PD_AGENTS_PYTHON "/usr/bin/python3")
else()
  set(PD_AGENTS_PYTHON "${PATHD_PYTHON}")
endif()
pd_test(NAME test_reserve SOURCES unit/test_reserve.c LIBS pathd_core LABELS sanitize TIMEOUT 600)
target_compile_definitions(test_reserve PRIVATE PD_AGENTS_PYTHON="${PD_AGENTS_PYTHON}")
# The checker itself, on answers made to break one rule each.
add_test(NAME check_plans_selftest
         COMMAND "${PD_AGENTS_PYTHON}" "${CMAKE_CURRENT_SOURCE_DIR}/agents/test_check_plans.py")
set_tests_properties(check_plans_selftest PROPERTIES LABELS "sanitize" TIMEOUT 60
                     ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")
# Reservations over the wire: a pathd of its own, the Python client, and
# every ReservePath answer that came over the wire replayed by the checker
# (tests/agents/test_reserve_wire.py says what is covered).
if(PDPY_MISSING)
  pd_client_test_unavailable(reserve_wire "${PDPY_MISSING}")
  pd_client_test_unavailable(reserve_durable "${PDPY_MISSING}")
else()
  add_test(NAME reserve_wire
           COMMAND ${CMAKE_COMMAND} -E env
                   PATHD_BIN=$<TARGET_FILE:pathd>
                   PATHCTL_BIN=$<TARGET_FILE:pathctl>
                   "PYTHONPATH=${PDPY_GEN_DIR}:${PROJECT_SOURCE_DIR}/client-examples/python"
                   PYTHONDONTWRITEBYTECODE=1
                   -- "${PATHD_PYTHON}" "${CMAKE_CURRENT_SOURCE_DIR}/agents/test_reserve_wire.py" -v)
  set_tests_properties(reserve_wire PROPERTIES LABELS "clients" TIMEOUT 180)
  # The reservation log: a pathd restarted (kill -9) on its data_dir keeps
  # every reservation; a replica (log.redis) refuses reservations
  # (tests/agents/test_reserve_durable.py; redis-server from the test
  # package set).
  add_test(NAME reserve_durable
           COMMAND ${CMAKE_COMMAND} -E env
                   PATHD_BIN=$<TARGET_FILE:pathd>
                   PATHCTL_BIN=$<TARGET_FILE:pathctl>
                   "PYTHONPATH=${PDPY_GEN_DIR}:${PROJECT_SOURCE_DIR}/client-examples/python"
                   PYTHONDONTWRITEBYTECODE=1
                   -- "${PATHD_PYTHON}" "${CMAKE_CURRENT_SOURCE_DIR}/agents/test_reserve_durable.py" -v)
  set_tests_properties(reserve_durable PROPERTIES LABELS "clients" TIMEOUT 180)
endif()
# ReservePath's fast path (the static shortest path when the table leaves
# it free) against SIPP alone on random grids and tables, and jump point
# search in milliseconds against a Dijkstra.
pd_test(NAME test_sipp_direct SOURCES unit/test_sipp_direct.c LIBS pathd_core LABELS sanitize TIMEOUT 300)
# The reservation log's compaction: a random table exported, encoded,
# decoded and restored is the same table entry by entry; restore refuses
# what a replace would; the file rewritten as a dump replays the same.
pd_test(NAME test_reserve_compact SOURCES unit/test_reserve_compact.c LIBS pathd_scene LABELS sanitize TIMEOUT 300)
