# Unit sizes and reachability (issue 4): clearance, per-unit grids, component
# labels, and A* on unit grids against a footprint-graph Dijkstra. They link
# pathd_core alone, so they also prove this code needs nothing above libc.
pd_test(NAME test_clearance SOURCES unit/test_clearance.c LIBS pathd_core LABELS sanitize)
pd_test(NAME test_components SOURCES unit/test_components.c LIBS pathd_core LABELS sanitize)
pd_test(NAME test_unit_search SOURCES unit/test_unit_search.c LIBS pathd_core LABELS sanitize)
