/*
 * pathctl_scene.h - pathctl's `scene` commands: create a scene from a map
 * file, make an instance of a scene, drop a scene (scenes made at run time,
 * role write). Kept apart because they take an option set of their own.
 */
#ifndef PATHCTL_SCENE_H
#define PATHCTL_SCENE_H

#include "pathd_client.h"

/* pathctl_scene_main's answer when the command is not `scene`. */
#define PATHCTL_SCENE_NOT_MINE (-1)

/* Usage lines for these commands, included in pathctl --help. */
extern const char pathctl_scene_usage[];

/* Runs `pathctl ... scene create|instance|drop ...`; returns its exit code
 * (as pathctl's), or PATHCTL_SCENE_NOT_MINE. */
int pathctl_scene_main(int argc, char **argv);

/* Connects and, with a token (else $PATHD_TOKEN when set), authenticates;
 * NULL with the reason printed and pathctl's exit code in *exit_code. */
pdc_conn *pathctl_open(const char *server, int timeout_ms, const char *token, int *exit_code);

#endif
