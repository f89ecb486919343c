/* strategies.c - the registry of claim strategies (strategies.h). */
#include "claim/strategies.h"

#include <string.h>

/* Every strategy, once, by the name of its `const strategy strategy_<x>` in
 * claim/strategy_<x>.c; --strategy, its help and its error message all read
 * this list, then the seeds' recipes (one strategy each, strategy_recipe.c,
 * from the recipes library's own registry). Adding a strategy is its file
 * plus one line here; adding a recipe, its file plus one line in recipes/. */
#define STRATEGIES(X)      \
    X(redlock)             \
    X(none)                \
    X(atomic)

#define STRATEGY_DECLARE(x) extern const strategy strategy_##x;
STRATEGIES(STRATEGY_DECLARE)
#undef STRATEGY_DECLARE

static const strategy *const REGISTRY[] = {
#define STRATEGY_ENTRY(x) &strategy_##x,
    STRATEGIES(STRATEGY_ENTRY)
#undef STRATEGY_ENTRY
};
#define N_STRATEGIES (sizeof REGISTRY / sizeof REGISTRY[0])

const strategy *strategy_at(size_t i)
{
    return i < N_STRATEGIES ? REGISTRY[i] : strategy_recipe_at(i - N_STRATEGIES);
}

const strategy *strategy_by_name(const char *name)
{
    const strategy *s;
    for (size_t i = 0; (s = strategy_at(i)) != NULL; i++)
        if (strcmp(s->name, name) == 0)
            return s;
    return NULL;
}
