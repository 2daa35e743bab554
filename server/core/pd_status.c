/* pd_status.c - names for pd_status values, for logs, CLIs and tests. */
#include "pd_status.h"

const char *pd_status_name(pd_status s)
{
    static const char *const names[PD_STATUS_COUNT] = {
        "OK", "PARTIAL", "NO_PATH", "UNKNOWN_SCENE", "OUT_OF_BOUNDS",
        "START_BLOCKED", "GOAL_BLOCKED", "INVALID_ARGUMENT", "BUDGET_EXCEEDED",
        "DEADLINE_EXCEEDED", "CANCELLED", "OVERLOADED", "MALFORMED",
        "FRAME_TOO_LARGE", "INTERNAL", "BUFFER_TOO_SMALL", "UNAUTHENTICATED",
        "PERMISSION_DENIED",
    };
    if ((unsigned)s >= PD_STATUS_COUNT)
        return "UNKNOWN_STATUS";
    return names[s];
}
