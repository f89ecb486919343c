/* rqueue.pml - the Redlock hand-off queue over 3 masters (lock/src/rqueue.c
 * and enter.lua, pass.lua with handoff.lua, leave.lua): listing rounds,
 * hand-offs on release, the wait for hand-offs on every node where the
 * waiter is listed, the grant on a quorum with its fence sync, a minority
 * yielded to the oldest waiter, the release. A listing round stops at a
 * quorum of answers: the third node's enter.lua may run later, unknown to
 * the waiter (it may even take the free key for it, and then announces it
 * on the waiter's list), until the waiter's next command there; a waiter
 * whose keys and unanswered nodes could make
 * a quorum enters again to find out (the recheck). docs/model.md maps
 * every step to the code.
 *
 * No time: keys never expire and waiters never give up, so the only way a
 * key moves is a release or a yield. That is the setting of the liveness
 * question (holders release, nodes answer: is every waiter granted?); the
 * timing of grants is redlock.pml's. Scores: every node orders a call's
 * listings by the call's score (its start by the caller's wall clock, as
 * each node corrects it), so the order of call starts; the model keeps it
 * as each active call's rank. With MUT_CLIENT_CLOCK_QUEUE the score is the
 * client's raw wall clock and client SKEWED's runs a minute ahead: every
 * listing of a call started after it still sorts before it (the starvation
 * the node-side correction of enter.lua removes).
 *
 * Runs: the default checks at most one holder and no deadlock over one
 * call per client; FENCES (with C=2: two clients, two calls each) also
 * checks that fences rise per grant; LIVE lets the clients take
 * the lock for ever (no fences: they would grow without bound) and checks,
 * under weak fairness, that client SKEWED is granted again and again;
 * LATE_EVERY_ROUND lets every listing round leave the third node's answer
 * behind (with C=2, the liveness run of the recheck rule).
 *
 * With CACHE (and C=2) client 0 may keep its lock cached after a section
 * (cache.c), start sections under it while it is not wanted, or give it up
 * idle. enter.lua publishes a notice when it lists a caller; the listener
 * process marks a held lock wanted, and a wanted cached lock is released
 * with hand-over. No time: a cached lock is never renewed, and the idle
 * give-up may come at any point. With LIVE, skewed_granted says the
 * waiter (client 1) is granted again and again: the cached lock is given
 * up to it. MUT_CACHE_NEVER_RELEASES ignores the
 * notice; MUT_CACHE_RELEASE_NO_HANDOVER gives the wanted lock up by DEL. */

#define N 3
#ifndef C
#define C 3
#endif
#ifdef MUT_ONE_NODE_GRANT
#define Q 1               /* the mutant: a grant on one node of three */
#else
#define Q 2
#endif
#define SKEWED (C - 1)
#ifndef CALLS
#define CALLS 1
#endif
/* Which rounds may leave the third node's answer behind: one per call
 * (the safety runs); any round with LATE_EVERY_ROUND (a node slower than
 * the grace every time); none in the other LIVE runs (the three-client
 * search with late rounds does not complete in memory). */
#if defined(LATE_EVERY_ROUND)
#define LATE_OK(late) true
#elif defined(LIVE)
#define LATE_OK(late) false
#else
#define LATE_OK(late) !(late)
#endif
/* The nodes a waiter may recheck: those whose answer it lacks, less those
 * a recheck already lacked (rqueue.c: once per node until it answers). The
 * mutant rechecks as long as any is missing: the livelock of a node that
 * is always a little late. */
#ifdef MUT_RECHECK_UNBOUNDED
#define RECHECKABLE(c) maybe[c]
#else
#define RECHECKABLE(c) (maybe[c] & ~rechecked[c])
#endif

#define P_IDLE 0
#define P_ENTER 1      /* enter.lua to node i */
#define P_WAIT 2       /* BLPOP on every node where listed, not owned */
#define P_LEAVE 3      /* granted: leave.lua to node i where not owned */
#define P_HOLD 4
#define P_REL 5        /* pass.lua to node i */
#define P_DONE 6
#define P_CACHED 7     /* CACHE: the lock kept, no section running */

byte owner[N];         /* lock key: 0 free, else client + 1 */
byte q[N * C];         /* node n's waiters set in score order: client + 1, 0 empty */
byte qn[N];
bool msg[N * C];       /* node n pushed a hand-off onto client c's list */
byte maybe[C];         /* bit n: node n's enter.lua unanswered, may still run */
byte rechecked[C];     /* bit n: a recheck did not hear node n either */
bool rck[C];           /* this listing round is a recheck */
byte pend[C];          /* node + 1 whose enter.lua has not run yet, 0 none */
#ifdef FENCES
byte fctr[N];          /* fence counters */
byte mf[N * C];        /* the fence pushed with node n's hand-off to client c */
byte hf[N * C];        /* the fence client c holds node n's key at */
byte lastf;            /* the largest fence granted */
#define FENCE(x) x
/* INCR, saturating: yields in a loop (the model has no hand-off window)
 * would grow the counters without bound. Up to FMAX the fences are exact
 * and checked; at FMAX a counter only says "at least FMAX". */
#define FMAX 6
#define INCR(n) if :: fctr[n] < FMAX -> fctr[n]++ :: else fi
#else
#define FENCE(x) skip
#endif
byte rank[C];          /* the call's score: its rank among the active calls' starts */
byte nactive;
byte pc[C];
byte own[C];           /* bit n: node n's key is ours */
byte listed[C];        /* bit n: listed on node n */
byte holders;          /* ghost: granted and not yet released */
bool key_unknown;      /* ghost: a waiting client holds a key it has not heard of */
byte sj, sk;           /* scratch (0 between steps) */
#ifdef CACHE
/* client 0's lock handle, from its grant to its release */
bool lease;            /* client 0 holds a handle (granted, not released) */
bool kept;             /* that handle was kept (dlock_keep): a cached lock */
bool wanted;           /* a notice came for it: no more sections, release */
bool reldel;           /* the release under way is the mutant's DEL */
bool sub;              /* client 0 listens for notices (subscribed) */
bool notice;           /* a notice published to it, not yet handled */
byte sq;               /* scratch: the set's size before ZADD NX */
#define CACHE_END(c) if :: (c) == 0 -> lease = false; kept = false; wanted = false :: else fi
/* dlock_keep looks at the waiters set at each lock's first keep: a
 * notice that came while the lock was being acquired was dropped. With
 * CACHE_CHECK_ONCE only right after it subscribes (the first keep ever),
 * and a waiter listed then starves (SPIN's acceptance cycle). */
#ifdef CACHE_CHECK_ONCE
#define KEEP_CHECKS (!sub)
#else
#define KEEP_CHECKS (!kept)
#endif
#ifdef LIVE
#define REUSE_OK true
#define REUSE_COUNT skip
#else
#define REUSE_OK (calls < CALLS)
#define REUSE_COUNT calls++
#endif
#else
#define CACHE_END(c) skip
#endif

#define BIT(n) (1 << (n))
#define CNT(m) ((((m) >> 0) & 1) + (((m) >> 1) & 1) + (((m) >> 2) & 1))
#define Q_AT(n, j) q[(n) * C + (j)]
#define MSG(n, c) msg[(n) * C + (c)]
#define HANDED(c) (MSG(0, c) || MSG(1, c) || MSG(2, c))

/* Does a listing of client a sort before client b's (b already listed)? */
#ifdef MUT_CLIENT_CLOCK_QUEUE
#define BEFORE(a, b) (((b) == SKEWED && (a) != SKEWED) || \
                      (!((a) == SKEWED && (b) != SKEWED) && rank[a] < rank[b]))
#else
#define BEFORE(a, b) (rank[a] < rank[b])
#endif

/* ZADD NX at the call's score */
inline zadd(n, c) {
    sj = 0;
    do
    :: sj < qn[n] && Q_AT(n, sj) == c + 1 -> goto zdone
    :: sj < qn[n] && Q_AT(n, sj) != c + 1 -> sj++
    :: sj >= qn[n] -> break
    od;
    sj = 0;
    do
    :: sj < qn[n] && !BEFORE(c, Q_AT(n, sj) - 1) -> sj++
    :: else -> break
    od;
    sk = qn[n];
    do
    :: sk > sj -> Q_AT(n, sk) = Q_AT(n, sk - 1); sk--
    :: else -> break
    od;
    Q_AT(n, sj) = c + 1; qn[n]++;
zdone:
    sj = 0; sk = 0
}

/* ZREM */
inline zrem(n, c) {
    sj = 0;
    do
    :: sj < qn[n] && Q_AT(n, sj) != c + 1 -> sj++
    :: sj < qn[n] && Q_AT(n, sj) == c + 1 ->
        do
        :: sj + 1 < qn[n] -> Q_AT(n, sj) = Q_AT(n, sj + 1); sj++
        :: else -> break
        od;
        qn[n]--; Q_AT(n, qn[n]) = 0; break
    :: sj >= qn[n] -> break
    od;
    sj = 0
}

/* pass.lua (with handoff.lua's hand_over): token-checked; our own list
 * goes (an announcement of a key we no longer hold: ARGV[4]); the key
 * goes to the oldest listing, with a message on its list, or is deleted. */
inline pass(n, c) {
    if
    :: owner[n] == c + 1 && qn[n] > 0 ->
        MSG(n, c) = false; FENCE(mf[(n) * C + (c)] = 0);
        sk = Q_AT(n, 0); zrem(n, sk - 1);
        owner[n] = sk; MSG(n, sk - 1) = true;
        FENCE(INCR(n); mf[(n) * C + sk - 1] = fctr[n]);
        sk = 0
    :: owner[n] == c + 1 && qn[n] == 0 -> MSG(n, c) = false; FENCE(mf[(n) * C + (c)] = 0); owner[n] = 0
    :: else
    fi
}

/* A quorum of keys: the lock (one holder at most), then off the queues of
 * the other nodes. */
inline try_grant(c) {
    if
    :: CNT(own[c]) >= Q ->
        holders++; assert(holders == 1);   /* at most one holder */
#ifdef FENCES
        /* the fence: the largest of our keys'; the lagging counters of
         * our nodes raised to it (fence_sync.lua) */
        sk = 0; i = 0;
        do
        :: i < N -> if :: (own[c] & BIT(i)) && hf[i * C + c] > sk -> sk = hf[i * C + c] :: else fi; i++
        :: else -> break
        od;
#ifndef MUT_NO_FENCE_SYNC
        i = 0;
        do
        :: i < N -> if :: (own[c] & BIT(i)) && fctr[i] < sk -> fctr[i] = sk :: else fi; i++
        :: else -> break
        od;
#endif
        assert(sk > lastf || sk == FMAX);  /* fences of grants strictly increase */
        lastf = sk; sk = 0;
#endif
        i = 0; pc[c] = P_LEAVE;
#ifdef CACHE
        if :: c == 0 -> lease = true; kept = false; wanted = false :: else fi;
#endif
        skip
    :: else -> pc[c] = P_WAIT
    fi
}

/* enter.lua on node n for client c: SET NX for us (and INCR), or ours
 * already, or ZADD NX at our score; our list emptied, and a key that is
 * ours announced on it (ARGV[9]: a message like a hand-off's, which a
 * client that read the answer finds stale and drops). `answered`: the
 * client reads the answer (else it is dropped: a late reply). The mutant
 * announces nothing: a late enter.lua's key is ours unknown to us. */
#ifdef MUT_LATE_UNANNOUNCED
#define ANNOUNCE(n, c)
#else
#define ANNOUNCE(n, c) MSG(n, c) = true; FENCE(mf[(n) * C + (c)] = fctr[n])
#endif
inline ours(n, c, answered) {
    if :: answered -> own[c] = own[c] | BIT(n); FENCE(hf[n * C + c] = fctr[n])
       :: else -> ANNOUNCE(n, c)
    fi
}

inline enter(n, c, answered) {
    MSG(n, c) = false;
    if
    :: owner[n] == 0 -> owner[n] = c + 1; zrem(n, c);
       FENCE(INCR(n));
       ours(n, c, answered)
    :: owner[n] == c + 1 -> ours(n, c, answered)
    :: else ->
#ifdef CACHE
       sq = qn[n];
#endif
       zadd(n, c); if :: answered -> listed[c] = listed[c] | BIT(n) :: else fi;
#ifdef CACHE
       if :: qn[n] > sq && sub -> notice = true :: else fi;   /* PUBLISH on listing */
       sq = 0;
#endif
       skip
    fi
}

proctype client(byte c)
{
    byte i, calls, ans;    /* ans: answers of this listing round */
    bool late;             /* a round of this call left an answer behind */

    do
    :: pc[c] == P_DONE -> break
    :: atomic { pc[c] == P_IDLE && calls < CALLS ->
#ifndef LIVE
           calls++;
#endif
           rank[c] = nactive; nactive++; i = 0; late = false; pc[c] = P_ENTER }
    /* enter.lua on node i, answered */
    :: atomic { pc[c] == P_ENTER && i < N && pend[c] != i + 1 ->
           enter(i, c, true); maybe[c] = maybe[c] & ~BIT(i); rechecked[c] = rechecked[c] & ~BIT(i);
           ans++; i++ }
    /* the round stops at a quorum of answers: the last node's enter.lua
     * runs when that node gets to it, before our next command there (one
     * answer owed at most: a node owing more opens its breaker). With no
     * time in the model, a late enter.lua that took the key for us holds
     * it until we hear of it, where in time it expires. */
    :: atomic { pc[c] == P_ENTER && i == N - 1 && pend[c] == 0 && ans >= Q && LATE_OK(late) ->
           late = true; pend[c] = N; maybe[c] = maybe[c] | BIT(N - 1); i++ }
    :: atomic { pc[c] == P_ENTER && i == N ->
           i = 0; ans = 0;
           if :: rck[c] -> rechecked[c] = rechecked[c] | maybe[c]; rck[c] = false :: else fi;
           try_grant(c) }
    /* a key that an unanswered enter.lua may have taken would make a
     * quorum with ours: enter again to find out (recheck) */
    :: atomic { pc[c] == P_WAIT && own[c] != 0 && CNT(own[c] | RECHECKABLE(c)) >= Q && !HANDED(c) ->
           rck[c] = true; i = 0; pc[c] = P_ENTER }
    /* BLPOP on every node where we are listed returns every hand-off
     * waiting there (dlock__wake_pop_any) */
    :: atomic { pc[c] == P_WAIT && HANDED(c) ->
           i = 0;
           do
           :: i < N -> if :: MSG(i, c) -> MSG(i, c) = false; own[c] = own[c] | BIT(i);
                                         FENCE(hf[i * C + c] = mf[i * C + c]; mf[i * C + c] = 0)
                         :: else fi; i++
           :: else -> break
           od;
           try_grant(c) }
    /* a minority held for a hand-off window with no hand-off coming:
     * listed again at our score where a listing of this call was answered
     * (the score that node gave; a key our own SET NX took, or whose
     * answer was lost, has none: passed on unlisted), then passed to the
     * oldest waiter (yield_minority), node by node */
    :: atomic { pc[c] == P_WAIT && own[c] != 0 && CNT(own[c] | RECHECKABLE(c)) < Q && !HANDED(c) ->
           i = 0;
           do
           :: i < N && (own[c] & BIT(i)) ->
               if :: listed[c] & BIT(i) -> zadd(i, c) :: else fi;
               pass(i, c); own[c] = own[c] & ~BIT(i);
                                            FENCE(hf[i * C + c] = 0); i++
           :: i < N && !(own[c] & BIT(i)) -> i++
           :: i == N -> break
           od;
           i = 0 }
    /* leave.lua where we are not the owner (a key handed meanwhile is
     * ours: the release passes it on) */
    :: atomic { pc[c] == P_LEAVE && i < N && pend[c] != i + 1 ->
           if
           :: !(own[c] & BIT(i)) ->
               zrem(i, c); MSG(i, c) = false; FENCE(mf[i * C + c] = 0);
               if :: owner[i] == c + 1 -> own[c] = own[c] | BIT(i) :: else fi
           :: else
           fi;
           i++ }
    :: atomic { pc[c] == P_LEAVE && i == N ->
           i = 0; listed[c] = 0; maybe[c] = 0; rechecked[c] = 0; pc[c] = P_HOLD }
    /* the release: not held from the moment it is sent */
    :: atomic { pc[c] == P_HOLD -> holders--; i = 0; pc[c] = P_REL; CACHE_END(c) }
#ifdef CACHE
    /* dlock_keep: the section ends, the lock stays cached; listening
     * starts before it is first kept; one look at the waiters sets */
    :: atomic { c == 0 && pc[c] == P_HOLD && !wanted -> holders--;
           if
           :: KEEP_CHECKS -> if :: qn[0] + qn[1] + qn[2] > 0 -> wanted = true :: else fi
           :: else
           fi;
           sub = true; kept = true; pc[c] = P_CACHED }
    /* wanted: released with hand-over (pass.lua), by cache_noticed */
    :: atomic { c == 0 && pc[c] == P_CACHED && wanted -> CACHE_END(c);
#ifdef MUT_CACHE_RELEASE_NO_HANDOVER
           reldel = true;
#endif
           i = 0; pc[c] = P_REL }
    /* cache_idle_expired: unused, released with hand-over */
    :: atomic { c == 0 && pc[c] == P_CACHED && !wanted -> CACHE_END(c); i = 0; pc[c] = P_REL }
    /* dlock_reuse: a section under the cached lock, not wanted */
    :: atomic { c == 0 && pc[c] == P_CACHED && !wanted && REUSE_OK ->
           REUSE_COUNT; holders++; assert(holders == 1); pc[c] = P_HOLD }
    /* the mutant's release: a token-checked DEL, nobody handed the key */
    :: atomic { pc[c] == P_REL && i < N && pend[c] != i + 1 && reldel ->
           if :: owner[i] == c + 1 -> owner[i] = 0; MSG(i, c) = false :: else fi; i++ }
    :: atomic { pc[c] == P_REL && i < N && pend[c] != i + 1 && !reldel -> pass(i, c); FENCE(hf[i * C + c] = 0); i++ }
#else
    :: atomic { pc[c] == P_REL && i < N && pend[c] != i + 1 -> pass(i, c); FENCE(hf[i * C + c] = 0); i++ }
#endif
    :: atomic { pc[c] == P_REL && i == N ->
           i = 0; own[c] = 0;
#ifdef CACHE
           reldel = false;
#endif
           /* the call ends: later calls' ranks move up */
           sj = 0;
           do
           :: sj < C -> if :: rank[sj] > rank[c] -> rank[sj]-- :: else fi; sj++
           :: else -> break
           od;
           sj = 0; rank[c] = 0; nactive--;
           pc[c] = P_IDLE }
    :: atomic { pc[c] == P_IDLE && calls == CALLS -> pc[c] = P_DONE }
    od
}

/* Every key a waiting client holds is known to it, or announced on its
 * list, or its enter.lua there has yet to run: no key sits unused, unknown
 * to its holder, until it expires (with MUT_LATE_UNANNOUNCED one does). */
#define UNKNOWN(c, n) (pc[c] == P_WAIT && owner[n] == (c) + 1 && !(own[c] & BIT(n)) && \
                       !MSG(n, c) && pend[c] != (n) + 1)
#if C > 2
#define UNKNOWN_AT(n) (UNKNOWN(0, n) || UNKNOWN(1, n) || UNKNOWN(2, n))
#else
#define UNKNOWN_AT(n) (UNKNOWN(0, n) || UNKNOWN(1, n))
#endif
active proctype known_keys()
{
end:
    do
    :: atomic { UNKNOWN_AT(0) || UNKNOWN_AT(1) || UNKNOWN_AT(2) -> key_unknown = true; assert(!key_unknown) }
    od
}

#ifdef CACHE
/* cache.c's cache_noticed, on client 0's listening connection: a notice
 * for a lock it holds marks it wanted (the cached lock's release follows
 * at once, a section's at its end); one for no handle is dropped. */
active proctype listener()
{
end:
    do
    :: atomic { notice -> notice = false;
#ifndef MUT_CACHE_NEVER_RELEASES
           if :: lease -> wanted = true :: else fi;
#endif
           skip }
    od
}
#endif

/* The nodes run the enter.lua a round stopped waiting for. */
active proctype node()
{
end:
    do
    :: atomic { pend[0] != 0 -> enter(pend[0] - 1, 0, false); pend[0] = 0 }
    :: atomic { pend[1] != 0 -> enter(pend[1] - 1, 1, false); pend[1] = 0 }
#if C > 2
    :: atomic { pend[2] != 0 -> enter(pend[2] - 1, 2, false); pend[2] = 0 }
#endif
    od
}

init {
    atomic {
        run client(0); run client(1);
#if C > 2
        run client(2)
#endif
    }
}

#ifdef LIVE
/* client SKEWED is granted again and again */
ltl skewed_granted { []<> (pc[SKEWED] == P_HOLD) }
#endif
