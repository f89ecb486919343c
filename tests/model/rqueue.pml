/* rqueue.pml - the Redlock hand-off queue over 3 masters (lock/src/rqueue.c
 * and enter.lua, pass.lua with handoff.lua, leave.lua): listing rounds,
 * hand-offs on release, the wait for hand-offs on every node where the
 * waiter is listed, the grant on a quorum, a minority yielded to the oldest
 * waiter, the release. docs/model.md maps every step to the code.
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
 * Runs: the default checks at most one holder and no deadlock over two
 * calls per client; LIVE lets the clients take the lock for ever and
 * checks, under weak fairness, that client SKEWED is granted again and
 * again. */

#define N 3
#define C 3
#define Q 2
#define SKEWED 2
#ifndef CALLS
#define CALLS 2
#endif

#define P_IDLE 0
#define P_ENTER 1      /* enter.lua to node i */
#define P_WAIT 2       /* BLPOP on every node where listed, not owned */
#define P_LEAVE 3      /* granted: leave.lua to node i where not owned */
#define P_HOLD 4
#define P_REL 5        /* pass.lua to node i */
#define P_DONE 6

byte owner[N];         /* lock key: 0 free, else client + 1 */
byte q[N * C];         /* node n's waiters set in score order: client + 1, 0 empty */
byte qn[N];
bool msg[N * C];       /* node n pushed a hand-off onto client c's list */
byte rank[C];          /* the call's score: its rank among the active calls' starts */
byte nactive;
byte pc[C];
byte own[C];           /* bit n: node n's key is ours */
byte listed[C];        /* bit n: listed on node n */
byte holders;          /* ghost: granted and not yet released */
byte sj, sk;           /* scratch (0 between steps) */

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

/* pass.lua (with handoff.lua's hand_over): token-checked; the key goes to
 * the oldest listing, with a message on its list, or is deleted. */
inline pass(n, c) {
    if
    :: owner[n] == c + 1 && qn[n] > 0 ->
        sk = Q_AT(n, 0); zrem(n, sk - 1);
        owner[n] = sk; MSG(n, sk - 1) = true; sk = 0
    :: owner[n] == c + 1 && qn[n] == 0 -> owner[n] = 0
    :: else
    fi
}

/* A quorum of keys: the lock (one holder at most), then off the queues of
 * the other nodes. */
inline try_grant(c) {
    if
    :: CNT(own[c]) >= Q ->
        holders++; assert(holders == 1);   /* at most one holder */
        i = 0; pc[c] = P_LEAVE
    :: else -> pc[c] = P_WAIT
    fi
}

proctype client(byte c)
{
    byte i, calls;

    do
    :: pc[c] == P_DONE -> break
    :: atomic { pc[c] == P_IDLE && calls < CALLS ->
#ifndef LIVE
           calls++;
#endif
           rank[c] = nactive; nactive++; i = 0; pc[c] = P_ENTER }
    /* enter.lua: SET NX for us, or ours already, or ZADD NX; our list
     * emptied */
    :: atomic { pc[c] == P_ENTER && i < N ->
           MSG(i, c) = false;
           if
           :: owner[i] == 0 -> owner[i] = c + 1; own[c] = own[c] | BIT(i); zrem(i, c)
           :: owner[i] == c + 1 -> own[c] = own[c] | BIT(i)
           :: else -> zadd(i, c); listed[c] = listed[c] | BIT(i)
           fi;
           i++ }
    :: atomic { pc[c] == P_ENTER && i == N -> i = 0; try_grant(c) }
    /* BLPOP on every node where we are listed returns every hand-off
     * waiting there (dlock__wake_pop_any) */
    :: atomic { pc[c] == P_WAIT && HANDED(c) ->
           i = 0;
           do
           :: i < N -> if :: MSG(i, c) -> MSG(i, c) = false; own[c] = own[c] | BIT(i) :: else fi; i++
           :: else -> break
           od;
           try_grant(c) }
    /* a minority held for a hand-off window with no hand-off coming:
     * listed again at our score, then passed to the oldest waiter
     * (yield_minority), node by node */
    :: atomic { pc[c] == P_WAIT && own[c] != 0 && CNT(own[c]) < Q && !HANDED(c) ->
           i = 0;
           do
           :: i < N && (own[c] & BIT(i)) -> zadd(i, c); pass(i, c); own[c] = own[c] & ~BIT(i); i++
           :: i < N && !(own[c] & BIT(i)) -> i++
           :: i == N -> break
           od;
           i = 0 }
    /* leave.lua where we are not the owner (a key handed meanwhile is
     * ours: the release passes it on) */
    :: atomic { pc[c] == P_LEAVE && i < N ->
           if
           :: !(own[c] & BIT(i)) ->
               zrem(i, c); MSG(i, c) = false;
               if :: owner[i] == c + 1 -> own[c] = own[c] | BIT(i) :: else fi
           :: else
           fi;
           i++ }
    :: atomic { pc[c] == P_LEAVE && i == N -> i = 0; listed[c] = 0; pc[c] = P_HOLD }
    /* the release: not held from the moment it is sent */
    :: atomic { pc[c] == P_HOLD -> holders--; i = 0; pc[c] = P_REL }
    :: atomic { pc[c] == P_REL && i < N -> pass(i, c); i++ }
    :: atomic { pc[c] == P_REL && i == N ->
           i = 0; own[c] = 0;
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

init { atomic { run client(0); run client(1); run client(2) } }

#ifdef LIVE
/* client SKEWED is granted again and again */
ltl skewed_granted { []<> (pc[SKEWED] == P_HOLD) }
#endif
