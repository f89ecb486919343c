/* redlock.pml - one Redlock acquisition over 3 masters, with time: the
 * round of acquire.lua (SET NX PX + INCR) on every node, the quorum, the
 * fence sync of the lagging nodes (fence_sync.lua), the validity judged
 * after the sync in the one place handles are made (dlock__lock_grant),
 * and the token-checked release (lock/src/acquire.c: the attempt's steps
 * dlock__attempt_decide, fence_lagging, dlock__attempt_grant, run by both
 * clients; lock.c; release.c).
 * docs/model.md maps every step to the code.
 *
 * Time as in single.pml: counters relative to now, moved by the clock
 * process one tick at a time (a key's TTL left, a handle's validity left,
 * the age of the client's round). A key set with PX TTL may live DRIFT
 * ticks less (the node's clock runs fast: bounded drift, charged to every
 * validity). Any step of a
 * client may come any number of ticks after the one before (a slow link,
 * a paused node, a paused client). Faults, at most FAULTS per run: a
 * node's answer lost (the script ran or not: a pause past the command
 * timeout, a lost reply), a client crash while holding.
 *
 * CANCEL: the event-loop client's cancel of a call whose round is out
 * (dlock_async_cancel mid-round, lock/src/async.c: acquire_finish). What
 * the round grants is not held: it goes to the release, pass.lua on every
 * node, and when that release lost no message no node holds the call's
 * token any more (the key is handed on, never left to its TTL). */

#define N 3
#define C 2
#ifdef CANCEL
#define CALLS_OF(c) 1   /* one call each: the cancel, not the fence counters, is checked */
#else
#define CALLS_OF(c) ((c) == 0 -> 2 : 1)   /* a third grant shows a lagging counter */
#endif
#define TTL 3
#define DRIFT 1
#define AGEMAX (TTL - DRIFT)   /* an older round has no validity left */
#ifndef FAULTS
#define FAULTS 1
#endif
/* NO_FENCE_CHECK: the mutex mutant's run checks that property alone */
#ifdef MUT_ONE_NODE_GRANT
#define Q 1            /* the mutant: a grant on one node of three */
#else
#define Q 2
#endif

#define P_IDLE 0
#define P_ROUND 1      /* sending acquire.lua to node `i` */
#define P_SYNC 2       /* syncing the lagging fence of node `i` */
#define P_GRANT 3
#define P_HOLD 4
#define P_REL 5        /* releasing on node `i` */
#define P_DEAD 6

byte owner[N];     /* lock key: 0 free, else a token */
byte ttl[N];       /* its TTL left */
byte down[N];      /* a restarted node is back in that many ticks */
byte fence[N];     /* the node's counter (INCR, raised by fence_sync) */
byte pc[C];
byte el[C];        /* age of the client's round (ticks since t0) */
bool held[C];
byte hv[C];        /* the handle's validity left */
byte lastf;        /* the largest fence granted */
byte faults;
#ifdef CANCEL
bool cancelled[C]; /* the call in flight was cancelled */
bool rel_lost[C];  /* its release lost a message (a fault) */
/* A cancelled call has left nothing of its own: no up node holds its
 * token (a restarted node lost it anyway), unless its release lost a
 * message, which only the TTL then cleans. */
#define LEFT_NOTHING(tok) (rel_lost[c] || \
    (owner[0] != tok && owner[1] != tok && owner[2] != tok))
#endif

/* PX TTL: the node's clock may run fast, the key lives DRIFT less */
#define SET_TTL(i) if :: ttl[i] = TTL :: ttl[i] = TTL - DRIFT fi
#define VALID(c) (held[c] && hv[c] > 0)
#define DEC(x) if :: x > 0 -> x-- :: else fi

active proctype clock()
{
    byte i;
end:
    do
    :: atomic {
        i = 0;
        do
        :: i < N ->
            if
            :: ttl[i] > 0 -> ttl[i]--;
               if :: ttl[i] == 0 -> owner[i] = 0 :: else fi
            :: else
            fi;
            i++
        :: else -> break
        od;
        i = 0;
        do
        :: i < N -> DEC(down[i]); i++
        :: else -> break
        od;
        i = 0;
        do
        :: i < C ->
            DEC(hv[i]);
            if :: (pc[i] == P_ROUND || pc[i] == P_SYNC || pc[i] == P_GRANT) && el[i] < AGEMAX -> el[i]++
               :: else fi;
            i++
        :: else -> break
        od;
        i = 0
       }
    /* fault: a node crashes and restarts without its keys (the fence
     * counters are kept: persistence, docs/fencing.md). It stays down for
     * a TTL (a delayed restart), or with RESTART_AT_ONCE comes straight
     * back: assumption 2 of docs/redlock.md, which this run shows is
     * needed. */
    :: atomic { faults < FAULTS -> faults++;
           if :: i = 0 :: i = 1 :: i = 2 fi;
           owner[i] = 0; ttl[i] = 0;
#ifndef RESTART_AT_ONCE
           down[i] = TTL;
#endif
           i = 0 }
    od
}

proctype client(byte c)
{
    byte i, tok, got, fmax, valid, left, calls;
    bool mine[N];      /* the node set the key for us (its fence is in fmax) */

    do
    :: pc[c] == P_DEAD -> break
    :: atomic { pc[c] == P_IDLE && calls < CALLS_OF(c) ->
           calls++; tok = c + 1 + C * (calls - 1); el[c] = 0; got = 0; fmax = 0; i = 0;
           pc[c] = P_ROUND }
    /* acquire.lua on node i: SET NX PX, and INCR the fence if set */
    :: atomic { pc[c] == P_ROUND && i < N && down[i] == 0 ->
           if
           :: owner[i] == 0 -> owner[i] = tok; SET_TTL(i);
              fence[i]++; mine[i] = true; got++;
              if :: fence[i] > fmax -> fmax = fence[i] :: else fi
           :: else -> mine[i] = false
           fi;
           i++ }
    /* fault: node i's answer never comes (a pause past the command
     * timeout, a lost reply: the script ran there, unknown to us) */
    :: atomic { pc[c] == P_ROUND && i < N && faults < FAULTS -> faults++;
           if
           :: owner[i] == 0 -> owner[i] = tok; SET_TTL(i); fence[i]++
           :: true
           fi;
           mine[i] = false; i++ }
    /* a node down after a restart answers nothing */
    :: atomic { pc[c] == P_ROUND && i < N && down[i] > 0 -> mine[i] = false; i++ }
#ifdef CANCEL
    /* the caller cancels while the round (or its fence sync) is out */
    :: atomic { (pc[c] == P_ROUND || pc[c] == P_SYNC) && !cancelled[c] -> cancelled[c] = true }
#endif
    :: atomic { pc[c] == P_ROUND && i == N ->
           i = 0;
#ifdef MUT_NO_CHECK_AFTER_SYNC
           /* the mutant: validity judged before the sync round */
           valid = (el[c] + DRIFT < TTL -> TTL - DRIFT - el[c] : 0);
#endif
           if
           :: got >= Q -> pc[c] = P_SYNC
           :: else -> pc[c] = P_REL     /* no quorum: undo on every node */
           fi }
    /* fence_sync.lua on the lagging nodes of ours, one step each */
    :: atomic { pc[c] == P_SYNC && i < N ->
           if
           :: mine[i] && down[i] > 0 -> got--   /* no answer: counted as not synced */
#ifndef MUT_NO_FENCE_SYNC
           ::  mine[i] && fence[i] < fmax -> fence[i] = fmax
#endif
           :: else
           fi;
           i++ }
    /* synced on fewer than a quorum: DLOCK_ERR_FENCE_SYNC, handed back */
    :: atomic { pc[c] == P_SYNC && i == N -> i = 0; pc[c] = (got >= Q -> P_GRANT : P_REL) }
    /* dlock__lock_grant: validity = TTL - elapsed - drift, judged now,
     * after the sync */
#ifdef CANCEL
    /* cancelled: a grant is not held; it is handed on (pass.lua) at once.
     * The mutant drops it instead, leaving the keys to their TTL. */
    :: atomic { pc[c] == P_GRANT && cancelled[c] ->
           el[c] = 0; valid = 0;
#ifdef MUT_CANCEL_NO_HANDOVER
           assert(LEFT_NOTHING(tok));
           cancelled[c] = false; i = 0; got = 0; fmax = 0;
           mine[0] = false; mine[1] = false; mine[2] = false;
           pc[c] = P_IDLE
#else
           pc[c] = P_REL
#endif
       }
    :: atomic { pc[c] == P_GRANT && !cancelled[c] ->
#else
    :: atomic { pc[c] == P_GRANT ->
#endif
           left = (el[c] + DRIFT < TTL -> TTL - DRIFT - el[c] : 0);
#ifndef MUT_NO_CHECK_AFTER_SYNC
           valid = left;
#endif
           if
           :: valid > 0 ->
               assert(c == 0 && !VALID(1) || c == 1 && !VALID(0));  /* one valid holder */
               assert(left > 0);        /* no DLOCK_OK with validity <= 0 */
#ifndef NO_FENCE_CHECK
               assert(fmax > lastf);     /* fences of grants strictly increase */
#endif
               lastf = fmax; held[c] = true; hv[c] = left; pc[c] = P_HOLD
           :: else -> pc[c] = P_REL      /* DLOCK_ERR_EXPIRED: handed back */
           fi;
           el[c] = 0; valid = 0; left = 0 }
    /* holding: release (not held from the moment it is sent), or crash */
    :: atomic { pc[c] == P_HOLD -> held[c] = false; hv[c] = 0; pc[c] = P_REL }
    :: atomic { pc[c] == P_HOLD && faults < FAULTS -> faults++; held[c] = false; hv[c] = 0; pc[c] = P_DEAD }
    /* pass.lua on node i (release.c, and acquire.c's undo of a failed
     * attempt): token-checked; nobody is listed in this model, so its
     * hand_over finds no waiter and it is a DEL */
    :: atomic { pc[c] == P_REL && i < N && down[i] > 0 -> i++ }
    :: atomic { pc[c] == P_REL && i < N && down[i] == 0 ->
           if :: owner[i] == tok -> owner[i] = 0; ttl[i] = 0 :: else fi;
           i++ }
    :: atomic { pc[c] == P_REL && i < N && faults < FAULTS -> faults++;
#ifdef CANCEL
           rel_lost[c] = true;
#endif
           i++ }   /* lost */
    :: atomic { pc[c] == P_REL && i == N ->
#ifdef CANCEL
           if :: cancelled[c] -> assert(LEFT_NOTHING(tok)) :: else fi;
           cancelled[c] = false; rel_lost[c] = false;
#endif
           i = 0; got = 0; fmax = 0; el[c] = 0; mine[0] = false; mine[1] = false; mine[2] = false;
           pc[c] = P_IDLE }
    :: atomic { pc[c] == P_IDLE && calls == CALLS_OF(c) -> pc[c] = P_DEAD }
    od
}

init { atomic { run client(0); run client(1) } }
