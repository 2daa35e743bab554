# Cross-scene routes (issue 5): the route graph's Dijkstra (core alone), the
# world of portals, route tables and the planner on a hand-made four-scene
# world, and the planner against a union-graph Dijkstra on random worlds.
# test_world also plans on several threads while the world is refreshed, so
# it is labelled "threaded" for the TSan run.
pd_test(NAME test_route SOURCES unit/test_route.c LIBS pathd_core LABELS sanitize)
pd_test(NAME test_world SOURCES unit/test_world.c LIBS pathd_scene LABELS sanitize threaded)
pd_test(NAME test_world_bruteforce SOURCES unit/test_world_bruteforce.c LIBS pathd_scene
        LABELS sanitize)
