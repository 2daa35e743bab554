/*
 * pathctl_reserve.h - pathctl's reservation commands (issue 34): `reserve`
 * (ReservePath), `release` (ReleaseAgent) and `reservations`
 * (GetReservations). Kept apart: they take an option set of their own.
 */
#ifndef PATHCTL_RESERVE_H
#define PATHCTL_RESERVE_H

/* pathctl_reserve_main's answer when the command is none of the three. */
#define PATHCTL_RESERVE_NOT_MINE (-1)

/* Usage lines for the commands, included in pathctl --help. */
extern const char pathctl_reserve_usage[];

/* Runs `pathctl ... reserve|release|reservations ...`; returns its exit
 * code (as pathctl's), or PATHCTL_RESERVE_NOT_MINE. */
int pathctl_reserve_main(int argc, char **argv);

#endif
