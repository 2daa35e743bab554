# Issue 4 core pieces: goal/start substitution (pd_fallback) and line of
# sight, smoothing and timing (pd_smooth).
pd_test(NAME test_fallback SOURCES unit/test_fallback.c LIBS pathd_core LABELS sanitize)
pd_test(NAME test_smooth SOURCES unit/test_smooth.c LIBS pathd_core LABELS sanitize)
