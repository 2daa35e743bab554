# The layering of server/ on the built objects (issue 31): no library uses a
# symbol of one its CMakeLists.txt does not link, and no two files of one
# library call each other both ways beyond the known pairs listed in
# layers/two-way-pairs.txt.
find_package(Python3 COMPONENTS Interpreter REQUIRED)
add_test(NAME layers
         COMMAND ${Python3_EXECUTABLE} "${CMAKE_CURRENT_SOURCE_DIR}/layers/check_layers.py"
                 "${PROJECT_BINARY_DIR}" "${PROJECT_SOURCE_DIR}")
set_tests_properties(layers PROPERTIES LABELS "docs" TIMEOUT 60)
