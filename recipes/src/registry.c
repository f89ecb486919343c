/* registry.c - every recipe once (RECIPE_LIST), and the random token. */
#include "recipes_internal.h"

#include <string.h>

#include <uuid/uuid.h>

static const recipe *const ALL[] = {
#define RECIPE_ENTRY(x) &recipe_##x,
    RECIPE_LIST(RECIPE_ENTRY)
#undef RECIPE_ENTRY
};
#define N_RECIPES (sizeof ALL / sizeof ALL[0])

const recipe *recipe_at(size_t i)
{
    return i < N_RECIPES ? ALL[i] : NULL;
}

const recipe *recipe_by_name(const char *name)
{
    for (size_t i = 0; i < N_RECIPES; i++)
        if (strcmp(ALL[i]->name, name) == 0)
            return ALL[i];
    return NULL;
}

void recipe_new_token(recipe_hold *hold)
{
    uuid_t raw;
    /* Random (v4), as the seeds' UUID tokens: unguessable and unique per holder. */
    uuid_generate_random(raw);
    uuid_unparse_lower(raw, hold->token);
}
