# Worker layer tests, plus the core waypoint helper the worker applies.
pd_test(NAME test_path
        SOURCES unit/test_path.c
        LIBS pathd_core
        LABELS sanitize)

pd_test(NAME test_pool
        SOURCES unit/test_pool.c
        LIBS pathd_worker
        LABELS sanitize threaded
        TIMEOUT 600)

# The query pipelines (FindPath options, cell updates, routes), split out of
# test_pool so that one tests the pool alone; same labels and hang guard.
pd_test(NAME test_query_pipeline
        SOURCES unit/test_query_pipeline.c
        LIBS pathd_worker pathd_query
        LABELS sanitize threaded
        TIMEOUT 600)

# Issue 12: ordered tasks in lanes (one scene's changes in order, other
# scenes' beside them), shown with gates, not timing.
pd_test(NAME test_pool_lanes
        SOURCES unit/test_pool_lanes.c
        LIBS pathd_worker
        LABELS sanitize threaded)

# Issue 17: submits reach sleeping workers through the pool's incoming
# stack (thousands of sleep/wake races, bounded waits, no timing claims).
pd_test(NAME test_pool_handoff
        SOURCES unit/test_pool_handoff.c
        LIBS pathd_worker
        LABELS sanitize threaded)
