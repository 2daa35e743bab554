# Tests for the conf and scene layers (tests/unit/test_conf.c, test_tiled.c,
# test_tiled_formats.c, test_tiled_cost.c, test_ldtk.c,
# test_scene.c, test_scene_update.c, test_scene_runtime.c, test_scene_reload.c,
# test_journal.c, test_store_log.c). test_scene runs readers against reloads
# and test_scene_update runs updaters and readers on several threads, so both
# are labelled "threaded" for the TSan run (test_scene_update's threaded
# tests alone, as test_scene_update_threads).
pd_test(NAME test_conf SOURCES unit/test_conf.c LIBS pathd_conf LABELS sanitize)
pd_test(NAME test_tiled SOURCES unit/test_tiled.c LIBS pathd_conf LABELS sanitize)
# The encoded variants are compressed by the test itself; an infinite map
# is loaded as a scene too, for its origin.
pd_test(NAME test_tiled_formats SOURCES unit/test_tiled_formats.c
        LIBS pathd_scene PkgConfig::ZLIB PkgConfig::ZSTD LABELS sanitize)
pd_test(NAME test_ldtk SOURCES unit/test_ldtk.c LIBS pathd_scene LABELS sanitize)
# Issue 29 findings 6 and 7: polygon colliders drawn row by row (against the
# per-cell rule on random polygons), the colliders' budget, the cells cap
# before decoding, the load's poll.
pd_test(NAME test_tiled_cost SOURCES unit/test_tiled_cost.c LIBS pathd_conf m LABELS sanitize)
pd_test(NAME test_scene SOURCES unit/test_scene.c LIBS pathd_scene LABELS sanitize threaded)
# The timeout is a hang guard: under TSan on the shared 2-core machine (load
# average 14) test_scene_update took 292 s of wall time for 38 s of CPU.
# TSan runs only its tests that start threads (test_threads_*): the random
# update tests beside them are single-threaded and took 280 s there.
pd_test(NAME test_scene_update SOURCES unit/test_scene_update.c LIBS pathd_scene LABELS sanitize
        TIMEOUT 900)
add_test(NAME test_scene_update_threads COMMAND test_scene_update "test_threads_*")
set_tests_properties(test_scene_update_threads PROPERTIES LABELS threaded TIMEOUT 900)
pd_test(NAME test_scene_runtime SOURCES unit/test_scene_runtime.c LIBS pathd_scene LABELS sanitize)
# Issue 12, "Durable": the journal's record format, replay, damaged tails
# and compaction, on temporary data directories.
# Its parallel updates of three scenes run on threads: "threaded" for TSan.
pd_test(NAME test_journal SOURCES unit/test_journal.c LIBS pathd_scene LABELS sanitize threaded)
# The whole-buffer write every log in data_dir shares (pd_fileio.h: short
# writes and EINTR, on a pipe a second thread signals) and the one u64
# comparator (pd_sort.h).
pd_test(NAME test_fileio SOURCES unit/test_fileio.c LIBS pathd_scene LABELS sanitize threaded)
# Issue 12, "Reload keeps the living state": which config scenes a reload
# keeps (definition unchanged: version and updates stay) and which it
# builds again, on maps the test rewrites in a temporary directory; one
# test updates on a thread while reloads run: threaded.
pd_test(NAME test_scene_reload SOURCES unit/test_scene_reload.c LIBS pathd_scene LABELS sanitize threaded)
# Issue 31: the store's change log interface driven through a second,
# in-memory implementation (updates, new scenes, instances, drops, tails,
# snapshot and compaction, replay into a fresh store).
pd_test(NAME test_store_log SOURCES unit/test_store_log.c LIBS pathd_scene LABELS sanitize)
