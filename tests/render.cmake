# pathctl render (client-examples/c/pathctl_render.h): PNG pictures of a grid
# and a path, decoded again with libpng; the local map parsers; the command's
# options and exit codes (no server needed).
pd_test(NAME test_render SOURCES unit/test_render.c
        LIBS pathctl_render pathd_testsock PkgConfig::LIBPNG
        LABELS sanitize TIMEOUT 120)
