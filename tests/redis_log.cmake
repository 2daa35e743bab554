# Issue 32: the change log on Redis Streams (server/scene/pd_redis_log.c)
# against a real redis-server the test starts on a loopback port with a
# temporary directory, and stops (tests/unit/test_redis_log.c): the
# FUNCTION's dense versions, deduplication and compare-and-set, tails, a
# store replayed through it, Redis down. redis-server is in the test
# package set (scripts/install-deps.sh test); without it the test fails,
# naming the package.
pd_test(NAME test_redis_log SOURCES unit/test_redis_log.c LIBS pathd_scene PkgConfig::HIREDIS LABELS sanitize
        TIMEOUT 120)

# Scene snapshots in Redis and the streams' trim (pd_redis_snapshot.c):
# K newest kept, the stream trimmed below the oldest, a fresh store
# replays from a snapshot and the tail alone, a trimmed position catches
# up from the newest snapshot, instances outlive their template's trim,
# the size bound.
pd_test(NAME test_redis_snapshot SOURCES unit/test_redis_snapshot.c LIBS pathd_scene PkgConfig::HIREDIS
        LABELS sanitize TIMEOUT 120)

# The same log through the real daemon (config "log"): kill -9 of pathd and
# a restart serve the same versions and cells; Redis killed -> UNAVAILABLE,
# nothing served; Redis back -> the update goes through.
pd_test(NAME test_e2e_redis_log SOURCES integration/test_e2e_redis_log.c
        LIBS pathd_integ_harness PkgConfig::HIREDIS LABELS sanitize TIMEOUT 120)

# Replicas (issue 32): two pathd processes and a late third over one Redis:
# a change on one is seen on the others (min_version waits for the tail),
# a resent idempotency key applies once, Ping SERVING once caught up, Redis
# killed -> updates UNAVAILABLE while queries go on, Redis back -> updates;
# two replicas appending at once answer every update OK (the race retried).
pd_test(NAME test_e2e_replicas SOURCES integration/test_e2e_replicas.c
        LIBS pathd_integ_harness PkgConfig::HIREDIS LABELS sanitize threaded TIMEOUT 120)

# Snapshots through the daemon: 3N updates leave the two newest snapshots
# and a trimmed stream; a pathd with an empty data_dir starts from Redis's
# snapshot, one restarted on its data_dir from its local cache, both
# serving the writer's cells.
pd_test(NAME test_e2e_redis_snapshot SOURCES integration/test_e2e_redis_snapshot.c
        LIBS pathd_integ_harness PkgConfig::HIREDIS LABELS sanitize TIMEOUT 120)

