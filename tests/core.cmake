# Core layer tests: grid, map parsers, open list, node pool, A* (hand-made cases and an
# independent Dijkstra reference). They link pathd_core alone, so they also
# prove the core needs nothing above libc and libm.
pd_test(NAME test_grid SOURCES unit/test_grid.c LIBS pathd_core LABELS sanitize)
pd_test(NAME test_index SOURCES unit/test_index.c LIBS pathd_core LABELS sanitize)
pd_test(NAME test_mapfile SOURCES unit/test_mapfile.c LIBS pathd_core LABELS sanitize)
pd_test(NAME test_open_list SOURCES unit/test_open_list.c LIBS pathd_core LABELS sanitize)
pd_test(NAME test_search SOURCES unit/test_search.c LIBS pathd_core LABELS sanitize)
pd_test(NAME test_nodepool SOURCES unit/test_nodepool.c LIBS pathd_core LABELS sanitize)
pd_test(NAME test_search_reference SOURCES unit/test_search_reference.c LIBS pathd_core
        LABELS sanitize)
pd_test(NAME test_targets SOURCES unit/test_targets.c LIBS pathd_core LABELS sanitize)
