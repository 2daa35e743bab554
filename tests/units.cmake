# Unit sizes and reachability (issue 4): clearance, per-unit grids, component
# labels, and A* on unit grids against a footprint-graph Dijkstra. They link
# pathd_core alone, so they also prove this code needs nothing above libc.
pd_test(NAME test_clearance SOURCES unit/test_clearance.c LIBS pathd_core LABELS sanitize)
# test_components builds labels on grids up to 600x600 many times over: 80 s
# of CPU under ASan, 134 s at load average 8 alone, and one CI pre-check at
# load 8 (ctest -j 2 beside other work) ran past the default 300 s. The
# timeout is a hang guard, not a speed test.
pd_test(NAME test_components SOURCES unit/test_components.c LIBS pathd_core LABELS sanitize TIMEOUT 900)
pd_test(NAME test_unit_search SOURCES unit/test_unit_search.c LIBS pathd_core LABELS sanitize)
