/*
 * pd_smooth.c - line of sight, string-pulling smoothing and waypoint timing
 * (see pd_smooth.h).
 *
 * All three walk the same exact supercover (pd_supercover.h), so "visible"
 * and "the cells a segment is timed over" can never disagree, and a visible
 * segment is a legal walk for the unit whose grid it was tested on.
 */
#include "pd_smooth.h"

#include <math.h>

#include "pd_supercover.h"

static int pd__open(const pd_grid *g, pd_point c)
{
    return pd_grid_get(g, c.x, c.y) != PD_CELL_BLOCKED;
}

int pd_line_of_sight(const pd_grid *g, pd_point a, pd_point b)
{
    if (!g || !pd__open(g, a))
        return 0;
    pd__supercover w;
    pd__supercover_init(&w, a, b);
    pd_point side[2];
    for (;;) {
        pd__supercover_move m = pd__supercover_step(&w, side);
        if (m == PD__SUPERCOVER_DONE)
            return 1;
        if (m == PD__SUPERCOVER_CORNER && (!pd__open(g, side[0]) || !pd__open(g, side[1])))
            return 0;
        if (!pd__open(g, pd__supercover_cell(&w)))
            return 0;
    }
}

static double pd__segment_length(pd_point a, pd_point b)
{
    double dx = (double)b.x - (double)a.x, dy = (double)b.y - (double)a.y;
    return sqrt(dx * dx + dy * dy);
}

double pd_path_length(const pd_point *pts, size_t n)
{
    double total = 0.0;
    if (!pts)
        return total;
    for (size_t i = 1; i < n; i++)
        total += pd__segment_length(pts[i - 1], pts[i]);
    return total;
}

/* A blocked or off-grid cell has no cost byte to read; it counts as ordinary
 * ground so timing stays defined for any input. */
static double pd__time_cost(const pd_grid *g, pd_point c)
{
    uint8_t v = pd_grid_get(g, c.x, c.y);
    return v == PD_CELL_BLOCKED ? 1.0 : (double)v;
}

/* Mean cost of the main cells the segment enters after its first. Cells
 * beside an exact corner are only touched at a point, not entered, so they
 * do not count: a diagonal cell step then costs sqrt(2) x the entered cell,
 * exactly as the search charges it. */
static double pd__segment_mean_cost(const pd_grid *g, pd_point a, pd_point b)
{
    pd__supercover w;
    pd__supercover_init(&w, a, b);
    pd_point side[2];
    double sum = 0.0;
    uint64_t entered = 0;
    while (pd__supercover_step(&w, side) != PD__SUPERCOVER_DONE) {
        sum += pd__time_cost(g, pd__supercover_cell(&w));
        entered++;
    }
    return entered ? sum / (double)entered : 0.0;
}

/* What walking a segment costs: its length times the mean cost of the cells
 * it enters, the same measure pd_path_times turns into seconds. */
static double pd__segment_cost(const pd_grid *g, pd_point a, pd_point b)
{
    return pd__segment_length(a, b) * pd__segment_mean_cost(g, a, b);
}

/*
 * Greedy string pulling. From each kept anchor it first tries the goal
 * directly (so start and goal that see each other give the direct line),
 * then advances along the path while the next point is still in sight and
 * keeps the last visible one. The next path point is kept even when it is
 * not visible (only possible for input that is not a legal walk), so points
 * are only ever dropped where a visible straight segment replaces them.
 *
 * Kept points are a subsequence of the input and each new segment joins two
 * of them, so on uniform ground the triangle inequality makes the result
 * never longer. On ground with terrain costs a straight segment may cross
 * dearer cells than the stretch it would replace went around, so there a
 * segment is taken only when it costs no more than that stretch: the result
 * then never costs more (and never takes longer to walk) than the input.
 */
#define PD__SMOOTH_COST_EPS 1e-9

size_t pd_path_smooth(const pd_grid *g, pd_point *pts, size_t n)
{
    if (!g || !pts || n < 3)
        return n;
    const int weighted = !g->uniform_cost;
    size_t kept = 1;
    size_t anchor = 0;
    while (anchor < n - 1) {
        /* Points from anchor on are still the input's: output slots only
         * ever overwrite indices at or below the current anchor. */
        int direct = pd_line_of_sight(g, pts[anchor], pts[n - 1]);
        if (direct && weighted) {
            double stretch = 0.0;
            for (size_t i = anchor + 1; i < n; i++)
                stretch += pd__segment_cost(g, pts[i - 1], pts[i]);
            direct = pd__segment_cost(g, pts[anchor], pts[n - 1]) <= stretch + PD__SMOOTH_COST_EPS;
        }
        size_t next;
        if (direct) {
            next = n - 1;
        } else {
            next = anchor + 1;
            double stretch = weighted ? pd__segment_cost(g, pts[anchor], pts[next]) : 0.0;
            while (next + 1 < n - 1 && pd_line_of_sight(g, pts[anchor], pts[next + 1])) {
                if (weighted) {
                    double longer = stretch + pd__segment_cost(g, pts[next], pts[next + 1]);
                    if (pd__segment_cost(g, pts[anchor], pts[next + 1]) > longer + PD__SMOOTH_COST_EPS)
                        break;
                    stretch = longer;
                }
                next++;
            }
        }
        pts[kept++] = pts[next];
        anchor = next;
    }
    return kept;
}

void pd_path_times(const pd_grid *g, const pd_point *pts, size_t n,
                   double speed_cells_per_s, double start_time, double *times)
{
    if (!times || n == 0)
        return;
    /* A broken contract (no grid, no points, no usable speed) leaves every
     * waypoint at start_time rather than writing garbage or dividing by 0. */
    int usable = g && pts && isfinite(speed_cells_per_s) && speed_cells_per_s > 0.0;
    double t = start_time;
    times[0] = t;
    for (size_t i = 1; i < n; i++) {
        if (usable) {
            double len = pd__segment_length(pts[i - 1], pts[i]);
            t += len * pd__segment_mean_cost(g, pts[i - 1], pts[i]) / speed_cells_per_s;
        }
        times[i] = t;
    }
}
