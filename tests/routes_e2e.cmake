# FindRoute through the real daemon (issue 5): the demo world of
# config/default.json reloaded into a harness daemon, routes checked leg by
# leg against FindPath, a door toggled by UpdateCells while other
# connections ask for routes, and pathctl route --json. The harness library
# comes from integration.cmake, which sorts before this fragment.
pd_test(NAME test_e2e_routes SOURCES integration/test_e2e_routes.c
        LIBS pathd_integ_harness PkgConfig::CJSON LABELS sanitize threaded TIMEOUT 240)
