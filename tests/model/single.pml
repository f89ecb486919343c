/* single.pml - libdlock on one Redis node with wake_on_release: the FIFO
 * queue, the hand-off on release, fencing and renewal (lock/src/queue.c and
 * the scripts enter.lua, pass.lua with handoff.lua, leave.lua, extend.lua).
 * docs/model.md maps every step to the code; tests/model/run.sh runs the
 * model and its mutants.
 *
 * Time is kept as counters relative to now, which the clock process
 * moves by one tick in one atomic step: what is left (a key's TTL, a
 * listing's stay, a validity, a deadline) counts down to 0, ages (since a
 * round was sent) count up to AGEMAX. So two states that differ only by
 * when they happened are one state, and time needs no horizon. A key set
 * by the node lives TTL ticks, or DRIFT fewer (the node's clock may run
 * fast: bounded drift); the client's monotonic clock is the tick itself
 * (the drift of the two rates is charged to the node). A script is one
 * atomic step that runs at any tick after it was sent (a slow link); after
 * CT ticks (command timeout) a paused node's client stops waiting, and the
 * script then still runs later, before the client's next command (Redis
 * runs one connection's commands in order).
 *
 * Faults, at most FAULTS per run: a node pause (the client stops waiting,
 * the script runs later), a reply lost (the script ran), a request lost
 * (it did not), a client crash (stops for good while it holds). A
 * client paused past its TTL is no fault: ticks may pass between any two
 * of its steps. The node's wall clock may be SKEW ticks ahead of the
 * client's (it moves only TIME, which the code never uses for validity).
 * With NODE_STEP the node's clock steps forward STEP ticks once and its
 * keys expire early: assumption 1 of docs/redlock.md, which this run shows
 * is needed.
 *
 * With CACHE client 0 may keep its lock cached after a section (cache.c):
 * the watchdog renews it, a section reuses it (same fence) while its
 * validity is at least MINV and it is not wanted, and one unused for IDLE
 * renewals is given up. enter.lua publishes a notice when it lists a
 * caller; the listener process (cache_noticed) marks the lock wanted, and
 * a wanted cached lock is released with hand-over. With LIVE the sections
 * under a cached lock may go on for ever, and the ltl property says a
 * cached lock is given up once another client is listed (run with
 * FAULTS=0). MUT_CACHE_NEVER_RELEASES ignores the notice;
 * MUT_CACHE_RELEASE_NO_HANDOVER gives the wanted lock up by a plain DEL. */

#define C 2
#define CALLS_OF(c) ((c) == 0 -> 2 : 1)  /* a third acquisition sees what two leave */
#define TTL 3
#define DRIFT 1
#define CT 1          /* command timeout */
#define WAIT 4        /* a call's wait */
#define WINDOW 1      /* hand-off window added to a listing's stay */
#define SKEW 2
#define STEP 3
#define AGEMAX 4      /* ages saturate: past TTL every bound from them is spent */
#define MINV 2        /* CACHE: the validity a section under a cached lock needs */
#ifndef IDLE
#define IDLE 1        /* CACHE: the idle time, in renewals of an unused cached lock */
#endif
#ifndef FAULTS
#define FAULTS 1
#endif

#define P_IDLE 0
#define P_SEND 1      /* kind: the script to send next */
#define P_WAIT 2      /* sent `age` ticks ago, waiting for the answer */
#define P_POP 3       /* blocked in BLPOP of our list for `bleft` ticks */
#define P_HOLD 4
#define P_DEAD 5
#define P_CACHED 6    /* CACHE: the lock kept, no section running */

#define K_ENTER 1
#define K_LEAVE 2
#define K_PASS 3
#define K_EXTEND 4
#define K_DEL 5       /* MUT_CACHE_RELEASE_NO_HANDOVER: a plain token-checked DEL */

/* the node */
byte key;             /* the lock key: 0 absent, else a token */
byte kttl;            /* its TTL left */
byte fctr;            /* the fence counter (INCR) */
byte qt[C];           /* the waiters set in score order: tokens */
byte qstay[C];        /* each listing's stay left */
byte qn;
byte lt[C];           /* waiter:<token> lists, one per client: whose token */
byte lf[C];           /* the fence pushed there, 0 none */
byte noff;            /* the node's wall clock ahead of the client's */
#ifdef MUT_VALIDITY_FROM_NODE_TIME
byte lnv[C];          /* the mutant's bound: node TIME at the push + TTL - DRIFT, as ticks left */
#endif
/* each client's request to the node, as the scripts see it */
byte tokc[C];         /* token of the current call */
byte dleft[C];        /* ticks to its deadline; its listing stays WINDOW longer */
bool firstc[C];       /* no enter.lua sent yet in this call (ARGV[5] "0") */
byte pend[C];         /* a script the client stopped waiting for, not run yet */
byte pend2[C];        /* and one sent behind it */
byte age[C];          /* ticks since the client's last send */
byte lage[C];         /* ticks since the send of the enter.lua that listed it */
byte bleft[C];        /* BLPOP time left */
/* its answer */
byte rres[C];         /* 0 listed / not ours, 1 ours */
byte rf[C];           /* fence */
byte rp[C];           /* PTTL, or 255: set by this script */
byte pc[C];           /* where each client is (P_*) */
bool listed[C];       /* an enter.lua listed it: lage counts */
/* ghost state: the handles */
bool held[C];
byte vleft[C];        /* validity left, by the client's clock */
byte lastf;           /* the largest fence granted */
byte faults;
bool stepped;
byte sj, sw, se;      /* scratch of the scripts (0 between steps) */
bool sh;
#ifdef CACHE
byte lasth;           /* who was granted lastf */
/* client 0's lock handle, from its grant to its release */
bool lease;           /* client 0 holds a handle (granted, not released) */
bool kept;            /* that handle was kept (dlock_keep): a cached lock */
bool wanted;          /* a notice came for it: no more sections, release */
byte lfen;            /* its fence */
bool sub;             /* client 0 listens for notices (subscribed) */
bool notice;          /* a notice published to it, not yet handled */
byte idle;            /* renewals since the lock was last kept */
#endif

#define ALIVE (key != 0 && kttl > 0)
#define OWNER(t) (((t) - 1) % C)
#define VALID(c) (held[c] && vleft[c] > 0)
/* Nobody else holds a valid lock: checked whenever a validity is granted
 * or extended (in between it only shrinks). */
#define EXCLUSIVE(c) (c == 0 && !VALID(1) || c == 1 && !VALID(0))
#define DEC(x) if :: x > 0 -> x-- :: else fi
#define INC(x) if :: x < AGEMAX -> x++ :: else fi
/* a bound of `span` ticks counted from a send `a` ticks ago, less drift */
#define LEFT(span, a) ((span) > (a) + DRIFT -> (span) - (a) - DRIFT : 0)

#ifdef CACHE
/* the handle's end: released, lost or crashed */
#define CACHE_END(c) if :: c == 0 -> lease = false; kept = false; wanted = false; idle = 0 :: else fi
/* dlock_keep looks at the waiters set at each lock's first keep: a
 * notice that came while the lock was being acquired was dropped. With
 * CACHE_CHECK_ONCE only right after it subscribes (the first keep ever),
 * and a waiter listed then starves (SPIN's acceptance cycle). */
#ifdef CACHE_CHECK_ONCE
#define KEEP_CHECKS (!sub)
#else
#define KEEP_CHECKS (!kept)
#endif
/* a section under the cached lock is one more call; with LIVE, for ever */
#ifdef LIVE
#define REUSE_OK(c) true
#define REUSE_COUNT(c) skip
#else
#define REUSE_OK(c) (calls < CALLS_OF(c))
#define REUSE_COUNT(c) calls++
#endif
/* client 0 renews only while cached (the search stays small enough) */
#define SECTION_RENEWS(c) (c != 0)
#else
#define CACHE_END(c) skip
#define SECTION_RENEWS(c) true
#endif

inline set_key(t) {
    key = t;
    if
    :: kttl = TTL
    :: kttl = TTL - DRIFT
    fi
}

inline unlist(t) {
    sj = 0;
    do
    :: sj < qn && qt[sj] != t -> sj++
    :: sj < qn && qt[sj] == t ->
        do
        :: sj + 1 < qn -> qt[sj] = qt[sj + 1]; qstay[sj] = qstay[sj + 1]; sj++
        :: else -> break
        od;
        qn--; qt[qn] = 0; qstay[qn] = 0; break
    :: sj >= qn -> break
    od;
    sj = 0
}

/* handoff.lua's hand_over: the oldest listing whose stay has not run out
 * gets the key (its token, its TTL) and a fresh fence on its own list. */
inline hand_over(done) {
    done = false;
    do
    :: qn == 0 -> break
    :: qn > 0 ->
        sw = qt[0]; se = qstay[0];
        unlist(sw);
        if
        :: se > 0 ->
            set_key(sw); fctr++;
            lt[OWNER(sw)] = sw; lf[OWNER(sw)] = fctr;
#ifdef MUT_VALIDITY_FROM_NODE_TIME
            lnv[OWNER(sw)] = TTL - DRIFT + noff;
#endif
            done = true; sw = 0; se = 0; break
        :: else
        fi;
        sw = 0; se = 0
    od
}

/* One script run by the node for client c, atomically. */
inline run_script(c, kind) {
    if
    :: kind == K_ENTER ->
        if
        :: !ALIVE ->
            set_key(tokc[c]);
            if :: !firstc[c] -> unlist(tokc[c]); lf[c] = 0 :: else fi;
            fctr++; rres[c] = 1; rf[c] = fctr; rp[c] = 255
        :: ALIVE ->
            if :: lt[c] == tokc[c] -> lf[c] = 0 :: else fi;   /* DEL KEYS[4] */
            if
            :: key == tokc[c] -> rres[c] = 1; rf[c] = fctr; rp[c] = kttl
            :: else ->
                rres[c] = 0; rp[c] = kttl;
                /* ZADD NX, scored by the node's TIME: arrival order */
                sj = 0;
                do
                :: sj < qn && qt[sj] == tokc[c] -> break
                :: sj < qn && qt[sj] != tokc[c] -> sj++
                :: sj >= qn -> qt[qn] = tokc[c]; qstay[qn] = dleft[c] + WINDOW; qn++;
#ifdef CACHE
                    if :: sub -> notice = true :: else fi;   /* PUBLISH on listing */
#endif
                    break
                od;
                sj = 0
            fi
        fi;
        firstc[c] = false
    :: kind == K_LEAVE ->
        unlist(tokc[c]);
        if :: lt[c] == tokc[c] -> lf[c] = 0 :: else fi;
        if
        :: ALIVE && key == tokc[c] -> rres[c] = 1; rf[c] = fctr; rp[c] = kttl
        :: else -> rres[c] = 0
        fi
    :: kind == K_PASS ->
        if
        :: ALIVE && key == tokc[c] ->
            hand_over(sh);
            if :: !sh -> key = 0; kttl = 0 :: else fi;
            rres[c] = 1
        :: else -> rres[c] = 0
        fi
    :: kind == K_EXTEND ->
        if
        :: ALIVE && key == tokc[c] -> set_key(tokc[c]); rres[c] = 1
        :: else -> rres[c] = 0
        fi
    :: kind == K_DEL ->
        if
        :: ALIVE && key == tokc[c] -> key = 0; kttl = 0; rres[c] = 1
        :: else -> rres[c] = 0
        fi
    fi;
    sh = false
}

/* pass_on: fire and forget, runs after whatever we sent before. */
inline send_only(c, kind) {
    if
    :: pend[c] == 0 -> pend[c] = kind
    :: else -> pend2[c] = kind
    fi
}

/* dlock__lock_grant: the one place a handle is made, never with validity
 * <= 0 (DLOCK_ERR_EXPIRED: the key is passed on). */
inline grant(c, f, v) {
    if
    :: v > 0 ->
        assert(EXCLUSIVE(c));          /* at most one valid holder */
        assert(f > lastf);             /* fences of grants strictly increase */
        lastf = f; held[c] = true; vleft[c] = v; pc[c] = P_HOLD;
#ifdef CACHE
        lasth = c;
        if :: c == 0 -> lease = true; kept = false; wanted = false; lfen = f :: else fi;
#endif
        skip
    :: else -> send_only(c, K_PASS); pc[c] = P_IDLE
    fi
}

/* What the client does with an answer (ok) or its absence (!ok). */
inline react(c) {
    if
    :: kind == K_ENTER ->
        if
        :: ok && rres[c] == 1 ->
            v = (rp[c] == 255 -> LEFT(TTL, age[c]) : LEFT(rp[c], age[c]));
            grant(c, rf[c], v)
        :: ok && rres[c] == 0 && dleft[c] > 0 ->
            listed[c] = true; lage[c] = age[c];
            /* BLPOP of our list, never past the holder's key (PTTL 0: one
             * tick) nor our deadline */
            bleft[c] = (rp[c] > age[c] -> rp[c] - age[c] : 1);
            if :: bleft[c] > dleft[c] -> bleft[c] = dleft[c] :: else fi;
            pc[c] = P_POP
        :: dleft[c] == 0 -> kind = K_LEAVE; pc[c] = P_SEND
        :: else -> pc[c] = P_SEND       /* unavailable: back off, enter again */
        fi
    :: kind == K_LEAVE ->
        if
        :: ok && rres[c] == 1 -> v = LEFT(rp[c], age[c]); grant(c, rf[c], v)
        :: ok && rres[c] == 0 -> pc[c] = P_IDLE
        :: !ok -> send_only(c, K_PASS); pc[c] = P_IDLE
        fi
    :: kind == K_EXTEND ->
        if
        :: ok && rres[c] == 1 && LEFT(TTL, age[c]) > 0 ->
            assert(EXCLUSIVE(c)); vleft[c] = LEFT(TTL, age[c])
        :: else
        fi;
#ifdef CACHE
        if
        :: held[c] -> pc[c] = P_HOLD
        :: !held[c] && ok && rres[c] == 0 ->   /* a cached lock lost: not ours */
            CACHE_END(c); pc[c] = P_IDLE
        :: else -> pc[c] = P_CACHED
        fi
#else
        pc[c] = P_HOLD
#endif
    :: kind == K_PASS || kind == K_DEL -> pc[c] = P_IDLE
    fi;
    if :: pc[c] == P_IDLE || pc[c] == P_HOLD || pc[c] == P_CACHED -> listed[c] = false; lage[c] = 0; dleft[c] = 0 :: else fi;
    ok = false; v = 0; age[c] = 0; rres[c] = 0; rf[c] = 0; rp[c] = 0
}

/* The node runs what clients stopped waiting for. */
active proctype node()
{
end:
    do
    :: atomic { pend[0] != 0 -> run_script(0, pend[0]); pend[0] = pend2[0]; pend2[0] = 0 }
    :: atomic { pend[1] != 0 -> run_script(1, pend[1]); pend[1] = pend2[1]; pend2[1] = 0 }
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

/* One tick: everything left counts down, every age up. */
active proctype clock()
{
    byte i;
end:
    do
    :: atomic {
        DEC(kttl);
        i = 0;
        do
        :: i < C ->
            DEC(qstay[i]); DEC(dleft[i]); DEC(bleft[i]); DEC(vleft[i]);
#ifdef MUT_VALIDITY_FROM_NODE_TIME
            DEC(lnv[i]);
#endif
            /* ages only while something counts from them */
            if :: pc[i] == P_WAIT -> INC(age[i]) :: else fi;
            if :: listed[i] -> INC(lage[i]) :: else fi;
            i++
        :: else -> break
        od;
        i = 0
       }
#ifdef NODE_STEP
    :: atomic { !stepped -> stepped = true; noff = noff + STEP;
                if :: kttl > STEP -> kttl = kttl - STEP :: else -> kttl = 0 fi }
#endif
    od
}

/* One client: each transition is one atomic step of libdlock's code
 * between two network events (docs/model.md). */
proctype client(byte c)
{
    byte kind, calls, seen, v;
    bool ok, extended;

    do
    :: pc[c] == P_DEAD -> break
    :: atomic { pc[c] == P_IDLE && calls < CALLS_OF(c) ->
           calls++; tokc[c] = c + 1 + C * (calls - 1); firstc[c] = true;
           dleft[c] = WAIT; listed[c] = false; seen = 0; extended = false; held[c] = false;
           kind = K_ENTER; pc[c] = P_SEND }
    :: atomic { pc[c] == P_SEND && pend[c] == 0 -> age[c] = 0; pc[c] = P_WAIT }
    /* answered (the script ran at some tick since it was sent) */
    :: atomic { pc[c] == P_WAIT -> run_script(c, kind); ok = true; react(c) }
    /* no answer within the command timeout (the node paused): the script
     * runs later */
    :: atomic { pc[c] == P_WAIT && age[c] >= CT && faults < FAULTS -> faults++; pend[c] = kind; react(c) }
    /* faults: the reply lost after the script ran, or the request lost */
    :: atomic { pc[c] == P_WAIT && faults < FAULTS -> faults++; run_script(c, kind); react(c) }
    :: atomic { pc[c] == P_WAIT && faults < FAULTS -> faults++; react(c) }
    /* BLPOP returns a hand-off's fence */
    :: atomic { pc[c] == P_POP && lt[c] == tokc[c] && lf[c] != 0 ->
#ifdef MUT_VALIDITY_FROM_NODE_TIME
           v = lnv[c];                  /* the mutant: from the node's TIME at the push */
#else
           v = LEFT(TTL, lage[c]);      /* from our send time of the listing that got it */
#endif
           if
           :: lf[c] <= seen || !listed[c] -> lf[c] = 0; kind = K_ENTER; pc[c] = P_SEND
           :: lf[c] > seen && listed[c] && v < TTL / 2 ->
               seen = lf[c]; lf[c] = 0; kind = K_ENTER; pc[c] = P_SEND  /* too little left: ask */
           :: lf[c] > seen && listed[c] && v >= TTL / 2 ->
               seen = lf[c]; lf[c] = 0; grant(c, seen, v)
           fi;
           v = 0; bleft[c] = 0 }
    /* BLPOP ends at its bound, by our clock */
    :: atomic { pc[c] == P_POP && bleft[c] == 0 ->
           kind = (dleft[c] == 0 -> K_LEAVE : K_ENTER); pc[c] = P_SEND }
    /* holding: renew once, or release, or crash */
    :: atomic { pc[c] == P_HOLD && !extended && SECTION_RENEWS(c) -> extended = true; kind = K_EXTEND; pc[c] = P_SEND }
    :: atomic { pc[c] == P_HOLD -> held[c] = false; vleft[c] = 0; kind = K_PASS; pc[c] = P_SEND; CACHE_END(c) }
    :: atomic { pc[c] == P_HOLD && faults < FAULTS -> faults++; held[c] = false; vleft[c] = 0; pc[c] = P_DEAD; CACHE_END(c) }
#ifdef CACHE
    /* dlock_keep: the section ends, the lock stays cached; listening
     * starts before it is first kept; one look at the waiters set */
    :: atomic { c == 0 && pc[c] == P_HOLD && !wanted && vleft[c] > 0 ->
           held[c] = false;
           if
           :: KEEP_CHECKS -> if :: qn > 0 -> wanted = true :: else fi
           :: else
           fi;
           sub = true; kept = true; idle = 0; pc[c] = P_CACHED }
    /* the watchdog renews the cached lock (extend.lua), while not wanted
     * and not idle for the idle time */
    :: atomic { c == 0 && pc[c] == P_CACHED && !wanted && idle < IDLE -> idle++; kind = K_EXTEND; pc[c] = P_SEND }
    /* wanted: released with hand-over (pass.lua) */
    :: atomic { c == 0 && pc[c] == P_CACHED && wanted -> CACHE_END(c);
#ifdef MUT_CACHE_RELEASE_NO_HANDOVER
           kind = K_DEL;
#else
           kind = K_PASS;
#endif
           pc[c] = P_SEND }
    /* cache_idle_expired: unused for the idle time, released with hand-over */
    :: atomic { c == 0 && pc[c] == P_CACHED && !wanted && idle == IDLE -> CACHE_END(c); kind = K_PASS; pc[c] = P_SEND }
    /* dlock_reuse: a section under the cached lock, same fence, with
     * enough validity left; too little: released with hand-over, and the
     * call acquires anew */
    :: atomic { c == 0 && pc[c] == P_CACHED && !wanted && REUSE_OK(c) && vleft[c] >= MINV ->
           REUSE_COUNT(c);
           assert(EXCLUSIVE(c));                              /* at most one valid holder */
           assert(lfen > lastf || lfen == lastf && lasth == c); /* same holder: same fence */
           held[c] = true; extended = false; pc[c] = P_HOLD }
    :: atomic { c == 0 && pc[c] == P_CACHED && !wanted && REUSE_OK(c) && vleft[c] < MINV ->
           CACHE_END(c); kind = K_PASS; pc[c] = P_SEND }
#endif
    :: atomic { pc[c] == P_IDLE && calls == CALLS_OF(c) -> pc[c] = P_DEAD; listed[c] = false; dleft[c] = 0; lage[c] = 0 }
    od
}

#ifdef CACHE
#ifdef LIVE
/* a cached lock is given up once another client is listed as a waiter */
ltl cache_released { [] ((kept && qn > 0) -> <> !kept) }
#endif
#endif

init {
    atomic {
#if defined(CACHE) && !defined(MUT_VALIDITY_FROM_NODE_TIME)
        /* only that mutant reads TIME's offset: one offset is enough */
        noff = 0;
#else
        if :: noff = 0 :: noff = SKEW fi;
#endif
        run client(0); run client(1)
    }
}
