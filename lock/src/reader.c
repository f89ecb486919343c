/* reader.c - a cap on what one reply may announce, on every connection
 * libdlock opens (round connections, wakers, sentinels, both clients). */
#include "dlock_internal.h"

#include <pthread.h>

/* The most elements one reply may announce. Ours hold at most a few per
 * resource (DLOCK_MAX_MULTI) or a sentinel's few fields; hiredis allocates
 * what a "*<count>" header claims before the elements arrive, so a broken
 * or hostile server could make it reserve gigabytes with one line. */
#define DLOCK__MAX_REPLY_ELEMENTS 1024

#if HIREDIS_MAJOR >= 1
void dlock__reader_bound(redisContext *ctx)
{
    ctx->reader->maxelements = DLOCK__MAX_REPLY_ELEMENTS;
}
#else
/* hiredis 0.14 has no such limit: its array constructor is wrapped instead,
 * and a refused count reads as hiredis's "Out of memory" reader error. */
static redisReplyObjectFunctions bounded_fns;
static void *(*default_create_array)(const redisReadTask *, int);
static pthread_once_t bounded_once = PTHREAD_ONCE_INIT;

static void *bounded_create_array(const redisReadTask *task, int elements)
{
    return elements > DLOCK__MAX_REPLY_ELEMENTS ? NULL : default_create_array(task, elements);
}

static void bounded_init(void)
{
    redisReader *r = redisReaderCreate();

    if (r == NULL)
        return;
    bounded_fns = *r->fn;
    default_create_array = r->fn->createArray;
    bounded_fns.createArray = bounded_create_array;
    redisReaderFree(r);
}

void dlock__reader_bound(redisContext *ctx)
{
    if (pthread_once(&bounded_once, bounded_init) == 0 && default_create_array != NULL)
        ctx->reader->fn = &bounded_fns;
}
#endif
