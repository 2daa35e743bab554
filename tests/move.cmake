# Issue 11 part 2, core: rays, slides, nearest open cell, distance to the
# wall and cells within a walking distance (pd_move), against brute force.
pd_test(NAME test_move SOURCES unit/test_move.c LIBS pathd_core LABELS sanitize)
