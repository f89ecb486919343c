/* handoff_setup.c - see handoff_setup.h. */
#include "handoff_setup.h"

#include <stdio.h>
#include <string.h>

int ho_nodes_up(redis_proc *rs, size_t n, const ho_nodes_opts *o)
{
    memset(rs, 0, n * sizeof *rs);
    for (size_t i = 0; o != NULL && i < n; i++) {
        rs[i].clock_shift = o->clock_shift;
        if (o->password != NULL)
            snprintf(rs[i].password, sizeof rs[i].password, "%s", o->password);
    }
    return redis_start_n(rs, n);
}

void ho_nodes_down(redis_proc *rs, size_t n)
{
    tc_kill_children();
    tc_nodes_down(rs, n);
}

dlock_client *ho_client(const redis_proc *rs, size_t n, const ho_client_opts *o, char *err)
{
    dlock_options opts;
    tc_addrs hold;
    dlock_client *c = NULL;

    tc_options(&opts, &hold, rs, n);
    if (o != NULL) {
        if (o->addrs != NULL)
            opts.addrs = o->addrs;
        opts.wake_on_release = o->wake;
        if (o->command_timeout_ms > 0)
            opts.command_timeout_ms = o->command_timeout_ms;
        if (o->retry_fixed_ms > 0)
            opts.retry_fixed_ms = o->retry_fixed_ms;
        if (o->password != NULL)
            opts.password = o->password;
    }
    if (dlock_client_new(&opts, &c, err, err != NULL ? DLOCK_ERRSTR_LEN : 0) != DLOCK_OK)
        return NULL;
    return c;
}
