/*
 * pathctl_query.h - pathctl's movement commands (raycast, validate, move,
 * nearest, reachable, random, clearance, batch) and grid, kept apart from
 * the path commands because they share one option set of their own.
 */
#ifndef PATHCTL_QUERY_H
#define PATHCTL_QUERY_H

#include "pathd_client.h"

/* pathctl_query_main's answer when the command is not one of its own. */
#define PATHCTL_QUERY_NOT_MINE (-1)

/* Usage lines for these commands, included in pathctl --help. */
extern const char pathctl_query_usage[];

/* "X,Y" as a cell (integers) or, with world set, a world point (finite
 * numbers); 0, or -1 for anything else. Shared by every pathctl command. */
int pathctl_parse_point(const char *s, int world, pdc_point *out);

/* The whole of s as a finite number (not nan, inf or out of a double's
 * range); 0, or -1 for anything else. Every pathctl flag that takes a
 * number with a fraction reads it so, and a command says "bad --FLAG V"
 * for a value given but not taken, keeping "needs --FLAG" for one
 * absent: "--radius nan" was reported as a missing --radius. */
int pathctl_parse_number(const char *s, double *out);

/* Runs the command in argv when it is one of these; returns its exit code
 * (as pathctl's), or PATHCTL_QUERY_NOT_MINE. */
int pathctl_query_main(int argc, char **argv);

#endif
