# Tests for the conf and scene layers (tests/unit/test_conf.c, test_scene.c).
# test_scene also runs readers against reloads on several threads, so it is
# labelled "threaded" for the TSan run.
pd_test(NAME test_conf SOURCES unit/test_conf.c LIBS pathd_conf LABELS sanitize)
pd_test(NAME test_scene SOURCES unit/test_scene.c LIBS pathd_scene LABELS sanitize threaded)
