# Issue 11 part 2, core: rays, slides, nearest open cell, distance to the
# wall and cells within a walking distance (pd_move), against brute force.
pd_test(NAME test_move SOURCES unit/test_move.c LIBS pathd_core LABELS sanitize)
# The movement queries through the query layer (pd_movement), no threads.
pd_test(NAME test_movement SOURCES unit/test_movement.c LIBS pathd_query LABELS sanitize)
# Through the daemon: every kind, Batch against singles, in-flight slots, pathctl batch.
pd_test(NAME test_e2e_movement SOURCES integration/test_e2e_movement.c LIBS pathd_integ_harness
        LABELS sanitize TIMEOUT 120)
# FindPath to within range / to the nearest of several goals, and FindPath
# items in a Batch, through the daemon against the harness's Dijkstra oracle.
pd_test(NAME test_e2e_range SOURCES integration/test_e2e_range.c LIBS pathd_integ_harness
        LABELS sanitize TIMEOUT 240)
