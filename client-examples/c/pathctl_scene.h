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

/* Where and how a pathctl command module connects: --server, --token,
 * --timeout (pathctl_conn_defaults fills the defaults). */
typedef struct pathctl_conn_opts {
    const char *server, *token;
    int timeout_ms;
} pathctl_conn_opts;

void pathctl_conn_defaults(pathctl_conn_opts *c);

/* 1 when option o (its value v) is one of those and was taken, 0 when it
 * is not, -1 for a bad --timeout (the reason printed, exit code 2). */
int pathctl_conn_option(pathctl_conn_opts *c, const char *o, const char *v);

/* Connects and, with a token (else $PATHD_TOKEN when set), authenticates;
 * NULL with the reason printed and pathctl's exit code in *exit_code. */
pdc_conn *pathctl_open(const pathctl_conn_opts *opts, int *exit_code);

/* Prints a usage error (fmt with one %s) and the hint; returns the usage
 * exit code (2). For the commands kept in files of their own. */
int pathctl_cmd_usage(const char *fmt, const char *arg);

/* The command: the first word that is not an option or an option's value
 * (every option but --json takes one); NULL when there is none. */
const char *pathctl_command_word(int argc, char **argv);

#endif
