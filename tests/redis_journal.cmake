# The replica's local journal beside the snapshot cache (issue 32):
# tests/unit/test_redis_journal.c; the daemon's use of it is in
# tests/integration/test_e2e_redis_snapshot.c.
pd_test(NAME test_redis_journal SOURCES unit/test_redis_journal.c LIBS pathd_scene LABELS sanitize)
