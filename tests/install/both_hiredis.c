/* both_hiredis.c - a program that links a hiredis of its own (the system's,
 * 0.14 on Debian 12) beside the installed libdlock, and uses both: a lock
 * through libdlock, and SET / GET / EXISTS through its own hiredis on the
 * same server. libdlock's own hiredis (the bundled 1.2.0, renamed) must not
 * stand in for the program's: the structures of the two versions differ,
 * so a mixed-up call would misread its reply or crash.
 *
 * both_hiredis SOCKET: a running redis-server's unix socket. Prints
 * "both ok" and exits 0 only when every step did what it must. */
#include <dlock.h>
#include <hiredis/hiredis.h>

#include <stdio.h>
#include <string.h>

/* One command on the program's own hiredis: the reply as text into out. */
static int cmd(redisContext *rc, char *out, size_t len, const char *fmt, const char *arg)
{
    redisReply *r = redisCommand(rc, fmt, arg);

    if (r == NULL) {
        printf("hiredis: %s\n", rc->errstr);
        return -1;
    }
    if (r->type == REDIS_REPLY_INTEGER)
        snprintf(out, len, "%lld", r->integer);
    else if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS)
        snprintf(out, len, "%.*s", (int)r->len, r->str);
    else
        snprintf(out, len, "(type %d)", r->type);
    freeReplyObject(r);
    return 0;
}

int main(int argc, char **argv)
{
    char addr[300], got[64], err[DLOCK_ERRSTR_LEN];
    const char *addrs[1] = {addr};
    dlock_options o;
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    redisContext *rc;
    struct timeval tv = {2, 0};
    int ok = 1;

    if (argc != 2) {
        fprintf(stderr, "usage: both_hiredis SOCKET\n");
        return 2;
    }
    printf("program's hiredis: %d.%d.%d\n", HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH);
    snprintf(addr, sizeof addr, "unix:%s", argv[1]);
    rc = redisConnectUnixWithTimeout(argv[1], tv);
    if (rc == NULL || rc->err != 0) {
        printf("hiredis connect: %s\n", rc != NULL ? rc->errstr : "out of memory");
        return 1;
    }
    dlock_options_init(&o);
    o.addrs = addrs;
    o.n_addrs = 1;
    o.key_prefix = "both:";
    if (dlock_client_new(&o, &c, err, sizeof err) != DLOCK_OK) {
        printf("dlock_client_new: %s\n", err);
        return 1;
    }
    ok &= dlock_try_acquire(c, "r", 10000, &l) == DLOCK_OK;
    /* The lock's key, seen through the program's hiredis. */
    ok &= cmd(rc, got, sizeof got, "EXISTS %s", "both:" DLOCK_LOCK_NS "r") == 0 && strcmp(got, "1") == 0;
    printf("EXISTS both:lock:r while held: %s\n", got);
    ok &= cmd(rc, got, sizeof got, "SET both:v %s", "hello") == 0 && strcmp(got, "OK") == 0;
    ok &= cmd(rc, got, sizeof got, "GET %s", "both:v") == 0 && strcmp(got, "hello") == 0;
    printf("GET both:v: %s\n", got);
    ok &= l != NULL && dlock_release(c, l) == DLOCK_OK;
    ok &= cmd(rc, got, sizeof got, "EXISTS %s", "both:" DLOCK_LOCK_NS "r") == 0 && strcmp(got, "0") == 0;
    printf("EXISTS both:lock:r after release: %s\n", got);
    dlock_lock_free(l);
    dlock_client_free(c);
    redisFree(rc);
    if (!ok) {
        printf("both: FAILED\n");
        return 1;
    }
    printf("both ok\n");
    return 0;
}
