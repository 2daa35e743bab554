/*
 * pathctl_watch.h - pathctl's `watch` command: print the changes of one or
 * more scenes as they happen. Kept apart because it runs until stopped and
 * takes an option set of its own.
 */
#ifndef PATHCTL_WATCH_H
#define PATHCTL_WATCH_H

/* pathctl_watch_main's answer when the command is not `watch`. */
#define PATHCTL_WATCH_NOT_MINE (-1)

/* Usage lines for the command, included in pathctl --help. */
extern const char pathctl_watch_usage[];

/* Runs `pathctl ... watch SCENE... [--count N]`; returns its exit code (as
 * pathctl's), or PATHCTL_WATCH_NOT_MINE. */
int pathctl_watch_main(int argc, char **argv);

#endif
