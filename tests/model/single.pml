/* single.pml - one Redis node, the FIFO queue with direct hand-off
 * (lock/src/queue.c, enter.lua, pass.lua with handoff.lua, leave.lua),
 * release (release.c), renewal (extend.c, extend.lua) and fencing.
 * docs/model.md maps every step to its script or function.
 *
 * Mutant (-D): MUT_VALIDITY_FROM_NODE_TIME - a handed key's validity
 * counted from the node's TIME (how long the listing waited, by the node's
 * clock, added to the send time of the first listing), which a host clock
 * step moves. */

#define N 1
#define R 1
#ifndef C
#define C 3
#endif
#ifndef CALLS
#define CALLS 2          /* calls per client (safety runs; LIVE: for ever) */
#endif
#ifndef CAP
#define CAP 4
#endif
#include "params.pml"

/* one node: no late bound, the score is the node's TIME at the listing */
#define ENTER_REFUSED(n, c, arg) false
#define ENTER_SCORE_AGE(n, c) 0

/* ---- the clients' state (read by the clock and the properties) --------- */
#define W_IDLE 0
#define W_ENTER 1        /* enter.lua sent, waiting for its answer */
#define W_POP 2          /* blocked in BLPOP of its own list */
#define W_LEAVE 3        /* leave.lua sent (giving up) */
#define W_HOLD 4         /* holds the lock */
#define W_REL 5          /* release (pass.lua) sent */
#define W_EXT 6          /* extend.lua sent */
#define W_BACK 7         /* backoff sleep */
#define W_DONE 8

#define LOW (-(STAY + 2))
#define NOSET (-100)
#define RCAP (TTL + 1)

byte wp[C];              /* where the client waits */
bool want[C];            /* in a call (from its start to its grant) */
bool hold[C];            /* holds a handle that is not released */
byte hv[C];              /* that handle's validity left, by the client's clock */
byte rel[C];             /* ticks since the round now awaited was sent */
byte dl[C];              /* ticks to the call's deadline */
byte wcd[C];             /* ticks the BLPOP may still block */
short lcd[C];            /* listed_sent_ms + TTL - drift - now, of the last listing */
#ifdef MUT_VALIDITY_FROM_NODE_TIME
short fcd[C];            /* the same from the first listing of the call */
#endif
byte bo[C];              /* backoff left */
byte hage[C];            /* ticks held (0, 1) */
byte lastg;              /* the last fence granted */

#define REPLY_WAIT(c) (wp[c] == W_ENTER || wp[c] == W_LEAVE || wp[c] == W_REL || wp[c] == W_EXT)
#define READY(c) ((REPLY_WAIT(c) && (rw[CN(c, 0)] != NONE || rel[c] >= CT)) || \
                  (wp[c] == W_POP && (ib[CN(c, 0)] != 0 || wcd[c] == 0)) || \
                  (wp[c] == W_BACK && bo[c] == 0))
#if C > 2
#define CLIENTS_QUIET (!READY(0) && !READY(1) && !READY(2))
#else
#define CLIENTS_QUIET (!READY(0) && !READY(1))
#endif

inline client_tick()
{
  for (h_c : 0 .. C - 1) {
    if
    :: REPLY_WAIT(h_c) && rel[h_c] < RCAP -> rel[h_c]++
    :: else
    fi;
#ifndef LIVE
    if
    :: want[h_c] && dl[h_c] > 0 -> dl[h_c]--
    :: else
    fi;
#endif
    if
    :: wp[h_c] == W_POP && wcd[h_c] > 0 -> wcd[h_c]--
    :: else
    fi;
    if
    :: hold[h_c] && hv[h_c] > 0 -> hv[h_c]--
    :: else
    fi;
    if
    :: hold[h_c] && hage[h_c] < 1 -> hage[h_c]++
    :: else
    fi;
    if
    :: want[h_c] && lcd[h_c] > LOW -> lcd[h_c]--
    :: else
    fi;
#ifdef MUT_VALIDITY_FROM_NODE_TIME
    if
    :: want[h_c] && fcd[h_c] > LOW -> fcd[h_c]--
    :: else
    fi;
#endif
    if
    :: bo[h_c] > 0 -> bo[h_c]--
    :: else
    fi
  }
}

#include "common.pml"

#ifdef LIVE
#define DEADLINE(c) false
#else
#define DEADLINE(c) (dl[c] == 0)
#endif

/* a round's command to the node, or the failure a down node answers */
inline ask(c, cmd, arg)
{
  if
  :: up(0) -> send(c, 0, cmd, tokc[c], arg, 0, 1)
  :: else -> rw[CN(c, 0)] = RERR
  fi;
  rel[c] = 0
}

inline tell(c, cmd)                 /* sent, answer not read (script_send_only) */
{
  if
  :: up(0) -> send(c, 0, cmd, tokc[c], 0, 0, 0)
  :: else
  fi
}

/* queue.c, dlock_acquire_queued: a new call, a new token */
inline new_call(c, k)
{
  tokc[c] = c * TOKS + (k % TOKS) + 1;
  for (h_j : 0 .. C - 1) {
    if
    :: h_j == c -> blk[NRC(0, 0, h_j)] = 0; bpd[NRC(0, 0, h_j)] = 0; shk[NRC(0, 0, h_j)] = 0;
       if
       :: lq[NRC(0, 0, h_j)] == 0 -> sage[NRC(0, 0, h_j)] = 0
       :: else
       fi
    :: else
    fi
  };
  ib[CN(c, 0)] = 0;
  want[c] = 1; dl[c] = WAIT; lcd[c] = 0;
#ifdef MUT_VALIDITY_FROM_NODE_TIME
  fcd[c] = NOSET;
#endif
}

inline end_call(c)
{
  want[c] = 0; dl[c] = 0; lcd[c] = 0; wcd[c] = 0; bo[c] = 0; rel[c] = 0;
#ifdef MUT_VALIDITY_FROM_NODE_TIME
  fcd[c] = 0;
#endif
  ib[CN(c, 0)] = 0
}

/* dlock__lock_grant (lock.c): the one place a handle is made; a validity
 * that ran out is DLOCK_ERR_EXPIRED, and queue.c's take passes the key on. */
inline take(c, f, v)
{
  if
  :: v > 0 ->
     assert(v > 0);                 /* no DLOCK_OK with validity <= 0 */
#ifndef NOFENCE
     assert(f > lastg);             /* fences of grants strictly increase */
     lastg = f;
#endif
     printf("MSC: c%d granted: fence %d, validity %d\n", c, f, v);
     end_call(c); listed = 0; f = 0;
     hold[c] = 1; hv[c] = v; hage[c] = 0; wp[c] = W_HOLD; v = 0;
     got = 1
  :: else ->
     printf("MSC: c%d: validity %d used up: EXPIRED, pass_on\n", c, v);
     tell(c, E_PASS);               /* pass_on */
     got = 0
  fi
}

proctype client(byte c)
{
  byte k, f, pt;
  bool a4, listed, got;
  short v;

idle:
  atomic {
#ifndef LIVE
    k < CALLS ->
#endif
    k++; new_call(c, k); a4 = 0; listed = 0;
    printf("MSC: c%d calls dlock_acquire (token %d)\n", c, tokc[c]);
    ask(c, E_ENTER, 0); a4 = 1; wp[c] = W_ENTER
  };
enter_wait:                         /* took_or_listed */
  atomic {
    READY(c) ->
    if
    :: rw[CN(c, 0)] == 1 ->         /* ours: set by this script (-1), or its PTTL */
       f = rf[CN(c, 0)];
       if
       :: rp[CN(c, 0)] < 0 -> v = TTL - DRIFT - rel[c]
       :: else -> v = rp[CN(c, 0)] - DRIFT - rel[c]
       fi;
       rw[CN(c, 0)] = NONE; rel[c] = 0;
       take(c, f, v);
       if
       :: got -> goto hold_lock
       :: else ->
          if
          :: DEADLINE(c) -> goto give_up
          :: else -> bo[c] = 1; wp[c] = W_BACK; goto back_wait
          fi
       fi
    :: rw[CN(c, 0)] == 0 ->         /* held by another: listed */
       listed = 1; lcd[c] = TTL - DRIFT - rel[c]; pt = rp[CN(c, 0)];
#ifdef MUT_VALIDITY_FROM_NODE_TIME
       if
       :: fcd[c] == NOSET -> fcd[c] = lcd[c]
       :: else
       fi;
#endif
       rw[CN(c, 0)] = NONE; rel[c] = 0;
       if
       :: DEADLINE(c) -> goto give_up
       :: else ->                   /* wait_handoff: never past the holder's key nor the deadline */
#ifdef LIVE
          wcd[c] = pt;
#else
          wcd[c] = (pt < dl[c] -> pt : dl[c]);
#endif
          blpop_send(c, 0, 0); wp[c] = W_POP; pt = 0
       fi
    :: else ->                      /* no answer in time, or the connection failed */
       abandon(c, 0); rel[c] = 0;
       goto give_up
    fi
  };
pop_wait:                           /* wait_handoff */
  atomic {
    if
    :: READY(c) ->
       if
       :: ib[CN(c, 0)] != 0 ->
          f = ib[CN(c, 0)]; ib[CN(c, 0)] = 0;
#ifdef MUT_VALIDITY_FROM_NODE_TIME
          v = fcd[c] + iba[CN(c, 0)];   /* the mutant: the wait as the node's TIME saw it */
          iba[CN(c, 0)] = 0;
#else
          v = lcd[c];                   /* the last listing's send time + TTL - drift */
#endif
          wcd[c] = 0;
          if
          :: !listed -> bo[c] = 1; wp[c] = W_BACK; goto back_wait
          :: else ->
             if
             :: v < HALFT -> goto re_enter   /* too little by that bound: ask (the PTTL) */
             :: else ->
                take(c, f, v);
                if
                :: got -> goto hold_lock
                :: else -> goto re_enter
                fi
             fi
          fi
       :: else ->                   /* the wait ran out: the BLPOP times out */
          blk[NRC(0, 0, c)] = 0; bpd[NRC(0, 0, c)] = 0;
          goto re_enter
       fi
    :: ncrash < MAXCRASH -> ncrash++; goto crashed
    fi
  };
re_enter:
  atomic { ask(c, E_ENTER, a4); wp[c] = W_ENTER; goto enter_wait };
back_wait:
  atomic { READY(c) -> ask(c, E_ENTER, a4); wp[c] = W_ENTER; goto enter_wait };
give_up:                            /* leave.lua; a key handed meanwhile is ours */
  atomic { printf("MSC: c%d gives up: leave.lua\n", c); ask(c, E_LEAVE, 0); wp[c] = W_LEAVE };
  atomic {
    READY(c) ->
    if
    :: rw[CN(c, 0)] == 1 ->
       f = rf[CN(c, 0)]; v = rp[CN(c, 0)] - DRIFT - rel[c];
       rw[CN(c, 0)] = NONE; rel[c] = 0;
       take(c, f, v);
       if
       :: got -> goto hold_lock
       :: else
       fi
    :: rw[CN(c, 0)] == 0 -> rw[CN(c, 0)] = NONE; rel[c] = 0
    :: else -> abandon(c, 0); rel[c] = 0; tell(c, E_PASS)   /* no answer: pass.lua follows it */
    fi;
    end_call(c); listed = 0; f = 0; v = 0; wp[c] = W_IDLE;
    goto idle
  };
hold_lock:
  if
  :: atomic {
       hage[c] >= 1 ->              /* dlock_release: pass.lua; no longer held once sent */
       printf("MSC: c%d releases (validity left %d)\n", c, hv[c]);
       hold[c] = 0; hv[c] = 0; hage[c] = 0;
       ask(c, E_PASS, 0); wp[c] = W_REL
     };
     atomic {
       READY(c) ->
       if
       :: rw[CN(c, 0)] != NONE && rw[CN(c, 0)] != RERR -> rw[CN(c, 0)] = NONE
       :: else -> abandon(c, 0); tell(c, E_PASS)   /* one node: the release is sent again */
       fi;
       rel[c] = 0; wp[c] = W_IDLE;
       goto idle
     }
#ifdef RENEW
  :: atomic { hage[c] >= 1 -> ask(c, E_EXTEND, 0); wp[c] = W_EXT };
     atomic {
       READY(c) ->
       if
       :: rw[CN(c, 0)] == 1 && TTL - DRIFT - rel[c] > 0 -> hv[c] = TTL - DRIFT - rel[c]
       :: rw[CN(c, 0)] == 1 && TTL - DRIFT - rel[c] <= 0 -> hold[c] = 0; hv[c] = 0   /* LOST */
       :: rw[CN(c, 0)] == 0 -> hold[c] = 0; hv[c] = 0                                  /* LOST */
       :: else ->                   /* unknown: min(old end, t0 + ttl - drift) */
          abandon(c, 0);
          if
          :: TTL - DRIFT - rel[c] < hv[c] ->
             hv[c] = (TTL - DRIFT - rel[c] > 0 -> TTL - DRIFT - rel[c] : 0)
          :: else
          fi
       fi;
       rw[CN(c, 0)] = NONE; rel[c] = 0;
       if
       :: hold[c] -> wp[c] = W_HOLD; goto hold_lock
       :: else ->                   /* lost: the caller releases all the same */
          ask(c, E_PASS, 0); wp[c] = W_REL; hage[c] = 0
       fi
     };
     atomic {
       READY(c) ->
       if
       :: rw[CN(c, 0)] != NONE && rw[CN(c, 0)] != RERR -> rw[CN(c, 0)] = NONE
       :: else -> abandon(c, 0); tell(c, E_PASS)
       fi;
       rel[c] = 0; wp[c] = W_IDLE;
       goto idle
     }
#endif
  :: atomic { ncrash < MAXCRASH -> ncrash++; goto crashed }
  fi;
crashed:
  atomic {
    printf("MSC: c%d crashes\n", c);
    hold[c] = 0; hv[c] = 0; want[c] = 0; wp[c] = W_DONE; end_call(c)
  }
}

init {
  atomic {
    run node(0);
    for (h_c : 0 .. C - 1) { wp[h_c] = W_IDLE };
    run client(0); run client(1);
#if C > 2
    run client(2);
#endif
    h_c = 0
  }
}

/* ---- properties -------------------------------------------------------- */
/* At most one holder whose validity (by its own clock) has not run out. */
#define VALID(c) (hold[c] && hv[c] > 0)
#if C > 2
#define MUTEX (VALID(0) + VALID(1) + VALID(2) <= 1)
#else
#define MUTEX (VALID(0) + VALID(1) <= 1)
#endif

#ifndef LIVE
active proctype monitor()
{
  assert(MUTEX)
}
#endif

/* A waiter is granted when holders release and the node answers (pan -a -f,
 * the LIVE build: every client calls for ever, no deadline). */
ltl granted0 { [] (want[0] -> <> hold[0]) }
ltl granted1 { [] (want[1] -> <> hold[1]) }
