# The package sets (scripts/install-deps.sh): the Dockerfile's build stage
# installs the same run set as `make run`, so the image and a newcomer's
# machine build from the same packages.
add_test(NAME deps_dockerfile
         COMMAND "${CMAKE_CURRENT_SOURCE_DIR}/deps/dockerfile-deps.sh" "${PROJECT_SOURCE_DIR}")
set_tests_properties(deps_dockerfile PROPERTIES LABELS "deps" TIMEOUT 30)

# The installer waits for a package lock another apt-get holds (issue 30
# item 4), tried with fake apt-get and dpkg-query: nothing is installed.
add_test(NAME deps_apt_lock_wait
         COMMAND "${CMAKE_CURRENT_SOURCE_DIR}/deps/apt-lock-wait.sh" "${PROJECT_SOURCE_DIR}")
set_tests_properties(deps_apt_lock_wait PROPERTIES LABELS "deps" TIMEOUT 60)
