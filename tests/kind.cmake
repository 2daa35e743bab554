# The request-kind table (server/query/pd_kind.h): every kind's row, and a
# FindPath and a movement query through their descriptors, no threads.
pd_test(NAME test_kind SOURCES unit/test_kind.c LIBS pathd_query LABELS sanitize)
