# The documents stay true (issue 14). docs_live runs scripts/gen-docs.py
# --check: every recorded session in the docs (blocks marked <!-- gen-docs -->)
# is run again against this build's pathd on the demo config and must print
# what the document shows; `make docs` regenerates them. readme_scenes checks
# the tables of demo scenes in README.md and config/README.md against
# config/default.json. arch_files checks that every source file
# docs/ARCHITECTURE.md names exists (tests/docs/arch-files.py). docs_drift shows
# both checks fail on a deliberately changed copy (and pass on an unchanged
# one), so they cannot pass by accident.
add_test(NAME docs_live
         COMMAND "${PATHD_PYTHON}" "${PROJECT_SOURCE_DIR}/scripts/gen-docs.py" --check
                 --build "${CMAKE_BINARY_DIR}")
add_test(NAME readme_scenes
         COMMAND "${PATHD_PYTHON}" "${CMAKE_CURRENT_SOURCE_DIR}/docs/readme-scenes.py"
                 "${PROJECT_SOURCE_DIR}/config/default.json"
                 "${PROJECT_SOURCE_DIR}/README.md" "${PROJECT_SOURCE_DIR}/config/README.md")
add_test(NAME arch_files
         COMMAND "${PATHD_PYTHON}" "${CMAKE_CURRENT_SOURCE_DIR}/docs/arch-files.py"
                 "${PROJECT_SOURCE_DIR}")
add_test(NAME docs_drift
         COMMAND "${CMAKE_CURRENT_SOURCE_DIR}/docs/drift-test.sh" "${CMAKE_BINARY_DIR}" "${PATHD_PYTHON}")
set_tests_properties(docs_live readme_scenes arch_files docs_drift PROPERTIES LABELS "docs" TIMEOUT 120)
