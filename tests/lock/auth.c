/* auth.c - AUTH with a password and with an ACL user: the right
 * credentials work, wrong ones give DLOCK_ERR_AUTH, none an error. */
#include <criterion/criterion.h>
#include <string.h>

#include "lock_common.h"

static redis_proc node;

static void setup(void)
{
    memset(&node, 0, sizeof node);
    strcpy(node.password, "s3cret-pw");
    cr_assert_eq(redis_start(&node), 0);
}

static void teardown(void)
{
    redis_stop(&node);
}

TestSuite(lock_auth, .init = setup, .fini = teardown);

static dlock_client *client_as(const char *user, const char *pw)
{
    dlock_options o;
    tc_addrs a;
    dlock_client *c = NULL;
    tc_options(&o, &a, &node, 1);
    o.username = user;
    o.password = pw;
    cr_assert_eq(dlock_client_new(&o, &c, NULL, 0), DLOCK_OK);
    return c;
}

Test(lock_auth, right_password, .timeout = 10)
{
    char pw[32];
    strcpy(pw, "s3cret-pw");
    dlock_client *c = client_as(NULL, pw);
    /* The client copies the password: our buffer may change. */
    memset(pw, 'x', sizeof pw - 1);
    dlock_lock *l = NULL;
    cr_assert_eq(dlock_try_acquire(c, "au", 5000, &l), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(tc_exists(&node, "au"), 1);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    /* After a restart the client must authenticate again on reconnect. */
    cr_assert_eq(redis_restart(&node), 0);
    dlock_err e = dlock_try_acquire(c, "au", 5000, &l);
    if (e != DLOCK_OK)
        e = dlock_try_acquire(c, "au", 5000, &l);
    cr_assert_eq(e, DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

Test(lock_auth, wrong_password, .timeout = 10)
{
    dlock_client *c = client_as(NULL, "wrong");
    dlock_lock *l = (dlock_lock *)0x1;
    size_t up = 9;
    cr_assert_eq(dlock_try_acquire(c, "au", 5000, &l), DLOCK_ERR_AUTH);
    cr_assert_null(l);
    cr_assert_neq(TC_ERR(c)[0], '\0');
    cr_assert_eq(dlock_ping(c, &up), DLOCK_ERR_AUTH);
    cr_assert_eq(up, 0);
    cr_assert_eq(tc_exists(&node, "au"), 0);
    dlock_client_free(c);
}

Test(lock_auth, no_password, .timeout = 10)
{
    dlock_client *c = client_as(NULL, NULL);
    dlock_lock *l = (dlock_lock *)0x1;
    dlock_err e = dlock_try_acquire(c, "au", 5000, &l);
    cr_assert(e == DLOCK_ERR_AUTH || e == DLOCK_ERR_PROTOCOL, "got %s", dlock_strerror(e));
    cr_assert_null(l);
    cr_assert_eq(tc_exists(&node, "au"), 0);
    dlock_client_free(c);
}

Test(lock_auth, acl_user, .timeout = 10)
{
    char out[128];
    const char *setuser[] = {"ACL", "SETUSER", "locker", "on", ">userpw", "~*", "+@all"};
    tc_cmd(&node, out, sizeof out, 7, setuser);
    cr_assert_str_eq(out, "OK");

    dlock_client *c = client_as("locker", "userpw");
    dlock_lock *l = NULL;
    cr_assert_eq(dlock_try_acquire(c, "acl", 5000, &l), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);

    c = client_as("locker", "s3cret-pw");
    l = (dlock_lock *)0x1;
    cr_assert_eq(dlock_try_acquire(c, "acl", 5000, &l), DLOCK_ERR_AUTH);
    cr_assert_null(l);
    dlock_client_free(c);

    c = client_as("nobody", "userpw");
    cr_assert_eq(dlock_try_acquire(c, "acl", 5000, &l), DLOCK_ERR_AUTH);
    dlock_client_free(c);
}
