/* fenced_workers.c - why the fence: a lock can be lost without its holder
 * knowing (a pause longer than the TTL), so the store itself refuses work
 * from an older holder. Four worker threads, each with its own client,
 * increment one counter kept in a file; every read and every write carries
 * the lock's fence, and the store refuses any fence older than the newest
 * it has seen (a database does this with a column and a WHERE clause:
 * docs/fencing.md).
 *
 *   cc fenced_workers.c $(pkg-config --cflags --libs dlock) -lpthread -Wl,-rpath,$(pkg-config --variable=libdir dlock) -o fenced_workers
 *   ./fenced_workers redis://127.0.0.1:6379
 *
 * Exit 0 when the counter equals the increments that were accepted. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <dlock.h>

#define WORKERS 4
#define ROUNDS 50

/* ---- the store: a file "<value> <newest fence seen>" ---- */
typedef struct store {
    pthread_mutex_t mu; /* the store's own atomicity (a database's row lock) */
    char path[64];
} store;

static int store_load(store *s, long *value, uint64_t *fence)
{
    FILE *f = fopen(s->path, "r");
    int ok = f != NULL && fscanf(f, "%ld %" SCNu64, value, fence) == 2;

    if (f != NULL)
        fclose(f);
    return ok ? 0 : -1;
}

static int store_save(store *s, long value, uint64_t fence)
{
    FILE *f = fopen(s->path, "w");

    if (f == NULL)
        return -1;
    fprintf(f, "%ld %" PRIu64 "\n", value, fence);
    return fclose(f) == 0 ? 0 : -1;
}

/* Read under fence: refused (-1) when a newer holder has been here. */
static int store_read(store *s, uint64_t fence, long *value)
{
    uint64_t seen;
    int rc = -1;

    pthread_mutex_lock(&s->mu);
    if (store_load(s, value, &seen) == 0 && fence >= seen)
        rc = store_save(s, *value, fence); /* remember the newest fence */
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* Write under fence: refused (-1) for a fence older than the newest seen. */
static int store_write(store *s, uint64_t fence, long value)
{
    long old;
    uint64_t seen;
    int rc = -1;

    pthread_mutex_lock(&s->mu);
    if (store_load(s, &old, &seen) == 0 && fence >= seen)
        rc = store_save(s, value, fence);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* ---- the workers ---- */
typedef struct worker {
    const char *addr;
    store *st;
    int accepted;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    const char *addrs[1] = {w->addr};
    dlock_options opts;
    dlock_client *c = NULL;
    char err[DLOCK_ERRSTR_LEN];

    dlock_options_init(&opts);
    opts.addrs = addrs;
    opts.n_addrs = 1;
    if (dlock_client_new(&opts, &c, err, sizeof err) != DLOCK_OK) {
        fprintf(stderr, "fenced_workers: %s\n", err);
        return NULL;
    }
    for (int i = 0; i < ROUNDS; i++) {
        dlock_lock *lock = NULL;
        long v;

        if (dlock_acquire_for(c, "counter", 2000, 5000, &lock) != DLOCK_OK)
            continue;
        /* Read-modify-write under the lock, the fence on both ends. */
        if (store_read(w->st, dlock_lock_fence(lock), &v) == 0 &&
            store_write(w->st, dlock_lock_fence(lock), v + 1) == 0)
            w->accepted++;
        dlock_release(c, lock);
        dlock_lock_free(lock);
    }
    dlock_client_free(c);
    return NULL;
}

int main(int argc, char **argv)
{
    store st = {PTHREAD_MUTEX_INITIALIZER, "/tmp/fenced_store.XXXXXX"};
    worker ws[WORKERS];
    pthread_t th[WORKERS];
    long value = -1;
    uint64_t fence = 0;
    int fd, accepted = 0;

    if (argc != 2) {
        fprintf(stderr, "usage: %s redis://host:port\n", argv[0]);
        return 2;
    }
    fd = mkstemp(st.path);
    if (fd < 0 || close(fd) != 0 || store_save(&st, 0, 0) != 0) {
        perror("fenced_workers: the store file");
        return 1;
    }
    for (int i = 0; i < WORKERS; i++) {
        ws[i] = (worker){argv[1], &st, 0};
        if (pthread_create(&th[i], NULL, work, &ws[i]) != 0) {
            fprintf(stderr, "fenced_workers: no thread\n");
            return 1;
        }
    }
    for (int i = 0; i < WORKERS; i++) {
        pthread_join(th[i], NULL);
        accepted += ws[i].accepted;
    }
    (void)store_load(&st, &value, &fence);
    unlink(st.path);
    printf("counter %ld, accepted increments %d, newest fence %" PRIu64 "\n", value, accepted,
           fence);
    return value == accepted && accepted == WORKERS * ROUNDS ? 0 : 1;
}
