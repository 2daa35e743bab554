/*
 * fuzz_ldtk.c - libFuzzer target for the LDtk IntGrid reader
 * (server/conf/pd_ldtk.c): the .ldtk project a level designer saved.
 *
 * Input: the project file. Values 1..3 are mapped (1 blocked, 2 cost 3,
 * 3 cost 2), the first level and every IntGrid layer are read. A grid that
 * parses must keep the grid invariants (fuzz_check.h) and a finite world
 * offset; a refusal must say why.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"
#include "pd_ldtk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pd_ldtk_rules rules;
    memset(&rules, 0, sizeof rules);
    rules.cost[1] = PD_CELL_BLOCKED;
    rules.cost[2] = 3;
    rules.cost[3] = 2;
    rules.cost_set[1] = rules.cost_set[2] = rules.cost_set[3] = 1;
    double ox = NAN, oy = NAN;
    char err[256];
    err[0] = '\0';
    pd_grid *g = pd_ldtk_load((const char *)data, size, &rules, &ox, &oy, err, sizeof err);
    if (!g) {
        FUZZ_REQUIRE(err[0] != '\0', "refused without a reason");
        return 0;
    }
    FUZZ_REQUIRE(isfinite(ox) && isfinite(oy), "world offset (%g, %g) is not finite", ox, oy);
    fuzz_check_grid(g);
    pd_grid_destroy(g);
    return 0;
}
