/* multi.pml - the multi-resource lock beside single-resource waiters on
 * one node (lock/src/multi.c, release.c and multi_acquire.lua,
 * multi_release.lua with handoff.lua; the single waiters as in
 * single.pml: enter.lua, pass.lua, their lists). docs/model.md maps every
 * step to the code.
 *
 * Client 0 takes resources a and b as one lock (all or none in one
 * script; when any key is held it backs off and tries again, never
 * queued); client 1 waits for a and client 2 for b through the queue. No
 * time: keys never expire and waiters never give up, so a waiter whose
 * key is not handed to it waits for ever (the liveness question:
 * holders release, the node answers). With MUT_MULTI_RELEASE_DELETES the
 * multi release deletes its keys whatever waits for them (what the old
 * wake_on_release = 0 path did): a waiter is stranded.
 *
 * Runs: the default checks one holder per resource and no deadlock (every
 * client ends) over CALLS calls each; LIVE lets them take their locks for
 * ever and checks, under weak fairness, that both single waiters are
 * granted again and again. */

#define R 2
#define C 3
#ifndef CALLS
#define CALLS 2
#endif

#define P_IDLE 0
#define P_TRY 1        /* multi: multi_acquire.lua / single: enter.lua */
#define P_WAIT 2       /* single: BLPOP of its list */
#define P_HOLD 3
#define P_REL 4        /* release sent */
#define P_DONE 5

byte owner[R];         /* lock key of resource r: 0 free, else client + 1 */
byte q[R * C];         /* resource r's waiters set, in arrival order */
byte qn[R];
bool msg[C];           /* a hand-off pushed onto client c's list */
byte pc[C];
byte holds[R];         /* ghost: holders of resource r */
byte sj;

#define Q_AT(r, j) q[(r) * C + (j)]
#define RES(c) ((c) - 1)          /* the resource of single client c */

inline zrem(r, c) {
    sj = 0;
    do
    :: sj < qn[r] && Q_AT(r, sj) != c + 1 -> sj++
    :: sj < qn[r] && Q_AT(r, sj) == c + 1 ->
        do
        :: sj + 1 < qn[r] -> Q_AT(r, sj) = Q_AT(r, sj + 1); sj++
        :: else -> break
        od;
        qn[r]--; Q_AT(r, qn[r]) = 0; break
    :: sj >= qn[r] -> break
    od;
    sj = 0
}

/* handoff.lua's hand_over for resource r, else DEL */
inline hand_over_or_del(r) {
    if
    :: qn[r] > 0 -> sj = Q_AT(r, 0) - 1; owner[r] = sj + 1; msg[sj] = true; zrem(r, sj)
    :: else -> owner[r] = 0
    fi
}

inline take(r) { holds[r]++; assert(holds[r] == 1) }   /* one holder per resource */

/* client 0: dlock_acquire_multi over {a, b}, then dlock_release */
active proctype multi()
{
    byte calls;
    do
    :: pc[0] == P_DONE -> break
    :: atomic { pc[0] == P_IDLE && calls < CALLS ->
#ifndef LIVE
           calls++;
#endif
           pc[0] = P_TRY }
    /* multi_acquire.lua: every key or none */
    :: atomic { pc[0] == P_TRY ->
           if
           :: owner[0] == 0 && owner[1] == 0 ->
               owner[0] = 1; owner[1] = 1; take(0); take(1); pc[0] = P_HOLD
           :: else       /* refused: back off, try again */
           fi }
    :: atomic { pc[0] == P_HOLD -> holds[0]--; holds[1]--; pc[0] = P_REL }
    /* multi_release.lua: each key still ours handed to its oldest waiter */
    :: atomic { pc[0] == P_REL ->
           if :: owner[0] == 1 ->
#ifdef MUT_MULTI_RELEASE_DELETES
                 owner[0] = 0
#else
                 hand_over_or_del(0)
#endif
              :: else fi;
           if :: owner[1] == 1 ->
#ifdef MUT_MULTI_RELEASE_DELETES
                 owner[1] = 0
#else
                 hand_over_or_del(1)
#endif
              :: else fi;
           pc[0] = P_IDLE }
    :: atomic { pc[0] == P_IDLE && calls == CALLS -> pc[0] = P_DONE }
    od
}

/* clients 1 and 2: dlock_acquire with wake_on_release on a or b */
proctype single(byte c)
{
    byte calls;
    do
    :: pc[c] == P_DONE -> break
    :: atomic { pc[c] == P_IDLE && calls < CALLS ->
#ifndef LIVE
           calls++;
#endif
           pc[c] = P_TRY }
    /* enter.lua: SET NX, or ZADD NX behind the holder; our list emptied */
    :: atomic { pc[c] == P_TRY ->
           msg[c] = false;
           if
           :: owner[RES(c)] == 0 -> owner[RES(c)] = c + 1; zrem(RES(c), c); take(RES(c)); pc[c] = P_HOLD
           :: owner[RES(c)] == c + 1 -> take(RES(c)); pc[c] = P_HOLD
           :: else ->
               sj = 0;
               do
               :: sj < qn[RES(c)] && Q_AT(RES(c), sj) != c + 1 -> sj++
               :: sj < qn[RES(c)] && Q_AT(RES(c), sj) == c + 1 -> break
               :: sj >= qn[RES(c)] -> Q_AT(RES(c), sj) = c + 1; qn[RES(c)]++; break
               od;
               sj = 0; pc[c] = P_WAIT
           fi }
    /* BLPOP: the hand-off */
    :: atomic { pc[c] == P_WAIT && msg[c] -> msg[c] = false; take(RES(c)); pc[c] = P_HOLD }
    :: atomic { pc[c] == P_HOLD -> holds[RES(c)]--; pc[c] = P_REL }
    /* pass.lua */
    :: atomic { pc[c] == P_REL ->
           if :: owner[RES(c)] == c + 1 -> hand_over_or_del(RES(c)) :: else fi;
           pc[c] = P_IDLE }
    :: atomic { pc[c] == P_IDLE && calls == CALLS -> pc[c] = P_DONE }
    od
}

init { atomic { run single(1); run single(2) } }

#ifdef LIVE
/* both single waiters are granted again and again */
ltl singles_granted { []<> (pc[1] == P_HOLD) && []<> (pc[2] == P_HOLD) }
#endif
