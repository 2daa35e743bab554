/* pd_status.c - names for pd_status values, for logs, CLIs and tests, and
 * the one way a refusal writes its reason. */
#include "pd_status.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* Values without a name (the unused gaps 18..29 and 33..39) are not statuses. */
static const char *const pd__names[PD_STATUS_COUNT] = {
    "OK", "PARTIAL", "NO_PATH", "UNKNOWN_SCENE", "OUT_OF_BOUNDS",
    "START_BLOCKED", "GOAL_BLOCKED", "INVALID_ARGUMENT", "BUDGET_EXCEEDED",
    "DEADLINE_EXCEEDED", "CANCELLED", "OVERLOADED", "MALFORMED",
    "FRAME_TOO_LARGE", "INTERNAL", "BUFFER_TOO_SMALL", "UNAUTHENTICATED",
    "PERMISSION_DENIED",
    [PD_SCENE_EXISTS] = "SCENE_EXISTS",
    [PD_SCENE_IN_USE] = "SCENE_IN_USE",
    [PD_LIMIT_EXCEEDED] = "LIMIT_EXCEEDED",
    [PD_STALE_VERSION] = "STALE_VERSION",
    [PD_WATCH_OVERFLOW] = "WATCH_OVERFLOW",
    [PD_DRAINING] = "DRAINING",
    [PD_UNAVAILABLE] = "UNAVAILABLE",
};

const char *pd_status_name(pd_status s)
{
    if ((unsigned)s >= PD_STATUS_COUNT || !pd__names[s])
        return "UNKNOWN_STATUS";
    return pd__names[s];
}

int pd_status_is_answer(unsigned s)
{
    return s < PD_STATUS_COUNT && pd__names[s] != NULL && s != PD_BUFFER_TOO_SMALL;
}

void pd_set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}
