/* common.pml - what the three models share (docs/model.md): time in ticks,
 * the Redis nodes (lock keys, fence counters, waiters sets, waiters' own
 * lists, blocked BLPOPs), the Lua scripts of lock/src/lua/ as atomic steps,
 * the client-node connections, one process per node, and the clock with
 * the faults of nodes and clocks.
 *
 * The includer defines N (nodes), R (resources), C (clients), includes
 * params.pml and, before this file, the client side the clock needs: the inline client_tick() and
 * the macro CLIENTS_QUIET (no client has a step to take now).
 *
 * One atomic step here = one Lua script run by one node (Redis runs a
 * script without interleaving), or one command (ZADD, BLPOP).  Clients
 * are in the model files. */

#include "params.pml"

/* ---- the nodes' data --------------------------------------------------- */
byte kown[N * R];    /* lock key: 0 absent, else the owner's token */
byte kttl[N * R];    /* its remaining TTL, ticks of the node's clock */
byte fc[N * R];      /* fence counter (no TTL, survives restarts: persistence assumed) */
byte lq[N * R * C];  /* waiters set: 0, or the token of client c's listing */
short sage[N * R * C]; /* node TIME - score of that listing (its age by the node's clock) */
bool shk[N * R * C]; /* the client knows that score (it may re-list with it: ZADD NX) */
byte lm[N * R * C];  /* client c's own list: the fence pushed, 0 empty */
byte lmt[N * R * C]; /* the token whose list that is */
#ifdef MUT_VALIDITY_FROM_NODE_TIME
short lma[N * R * C]; /* the mutant's extra: node TIME at the push - score */
#endif
byte blk[N * R * C]; /* a BLPOP of that token's list blocked on the node */
byte bpd[N * R * C]; /* a BLPOP sent to a paused node, not run yet */
short off[N];        /* the node's wall clock - the global tick count */
byte paused[N];      /* ticks of pause left */
byte down[N];        /* ticks until a restarted node is back */

/* ---- connections ------------------------------------------------------- */
/* One connection per client and node, commands run in order (Redis runs a
 * connection's commands in order; rounds.c keeps lagging connections). */
chan cq[C * N] = [CAP] of { byte, byte, byte, byte, bool }; /* cmd, token, arg, resource, awaited */
byte ain[C * N];     /* the awaited command of the client's current round is in cq */
byte owe[C * N];     /* awaited commands in cq whose round ended without them: replies dropped */
bool lostr[C * N];   /* the awaited reply was lost: the round will time out, nothing owed */
byte rw[C * N];      /* the reply: NONE, or what (0, 1, 2, RERR) */
byte rf[C * N * R];  /* its fence(s) */
short rp[C * N];     /* its PTTL (or -1: set by this script) */
short rx[C * N];     /* the node's clock offset when it ran (the TIME enter.lua answers) */
bool eflt[C * N];    /* an enter.lua is in cq */
byte eage[C * N];    /* ticks since that enter.lua was sent */
byte ib[C * N];      /* the client's blocking connection: a popped fence, 0 none */
#ifdef MUT_VALIDITY_FROM_NODE_TIME
short iba[C * N];
#endif

/* ---- state the node side reads of clients ----------------------------- */
byte tokc[C];        /* the client's current token */
short coff[C];       /* the client's wall clock - the global tick count (skew) */
byte cage[C];        /* ticks since the client's call began (its score, with coff) */

/* ---- fault counters ---------------------------------------------------- */
byte npause, nrestart, nstep, nlost, ncrash;

/* scratch: never kept across steps */
hidden byte h_i, h_j, h_k, h_h, h_t, h_c, h_cmd, h_tk, h_arg, h_r, h_res;
hidden byte h_aw;
hidden short h_a, h_v;

/* ---- replies ----------------------------------------------------------- */
/* An awaited command answers into the client's slot, unless its round
 * already ended (then the reply is read and discarded by a later round). */
inline deliver(n, c, aw, w, f, p)
{
  if
  :: !aw -> skip
  :: aw && owe[CN(c, n)] > 0 -> owe[CN(c, n)]--
  :: aw && owe[CN(c, n)] == 0 ->
     ain[CN(c, n)] = 0;
     if
     :: nlost < MAXLOST -> nlost++; lostr[CN(c, n)] = 1;  /* FAULT: the reply is lost */
        printf("MSC: node %d: the reply to c%d is lost\n", n, c)
     :: true -> rw[CN(c, n)] = w; rf[CN(c, n) * R] = f; rp[CN(c, n)] = p; rx[CN(c, n)] = off[n]
     fi
  fi
}

/* DEL of token tk's own list (KEYS[4]) */
inline dellist(j, tk)
{
  if
  :: lmt[j] == tk -> lm[j] = 0; lmt[j] = 0
  :: else
  fi
}

/* RPUSH of fence f onto token tk's list; a BLPOP blocked on it pops it */
inline push(n, r, c, tk, f, age)
{
  h_j = NRC(n, r, c);
  if
  :: blk[h_j] == tk ->
     blk[h_j] = 0; ib[CN(c, n)] = f;
#ifdef MUT_VALIDITY_FROM_NODE_TIME
     iba[CN(c, n)] = age;
#endif
  :: else ->
     /* a newer call's message is never overwritten by an older call's */
     assert(!(lm[h_j] != 0 && lmt[h_j] == tokc[c] && tk != tokc[c]));
     lm[h_j] = f; lmt[h_j] = tk;
#ifdef MUT_VALIDITY_FROM_NODE_TIME
     lma[h_j] = age;
#endif
  fi
}

/* handoff.lua's hand_over: the oldest listing (largest age; equal ages:
 * the lowest client, as Redis orders equal scores by member) is popped;
 * if its stay has not run out by the node's clock, the key becomes its
 * token's with its TTL, the fence is INCRed and pushed to its list.
 * h_res = 1 when handed, 0 when nobody (the caller DELs). */
inline hand_over(n, r)
{
  h_res = 0;
  do
  :: true ->
     h_h = NONE; h_a = -100;
     for (h_k : 0 .. C - 1) {
       if
       :: lq[NRC(n, r, h_k)] != 0 && sage[NRC(n, r, h_k)] > h_a ->
          h_h = h_k; h_a = sage[NRC(n, r, h_k)]
       :: else
       fi
     }
     if
     :: h_h == NONE -> break
     :: else ->
        h_t = lq[NRC(n, r, h_h)];
        lq[NRC(n, r, h_h)] = 0;                         /* ZREM */
        if
        :: h_a < STAY ->
           kown[NR(n, r)] = h_t; kttl[NR(n, r)] = TTL;  /* SET key tok PX ttl */
           INCR(fc[NR(n, r)]);
           printf("MSC: node %d: hand_over r%d to c%d, fence %d\n", n, r, h_h, fc[NR(n, r)]);
           push(n, r, h_h, h_t, fc[NR(n, r)], h_a);
           h_res = 1;
           break
        :: else -> printf("MSC: node %d: hand_over skips c%d (stay ran out)\n", n, h_h)
        fi
     fi
  od
}

/* ---- the scripts ------------------------------------------------------- */

/* enter.lua (queue.c, rqueue.c) */
inline enter_lua(n, r, c, tk, arg, aw)
{
  h_i = NR(n, r); h_j = NRC(n, r, c);
  if
  :: kown[h_i] == 0 ->                                  /* SET NX PX */
     kown[h_i] = tk; kttl[h_i] = TTL;
     if
     :: arg & 1 ->                                      /* ARGV[5] = "1" */
        if
        :: lq[h_j] == tk -> lq[h_j] = 0
        :: else
        fi;
        dellist(h_j, tk)
     :: else
     fi;
     INCR(fc[h_i]);
     printf("MSC: node %d: enter.lua c%d: SET NX, fence %d\n", n, c, fc[h_i]);
     deliver(n, c, aw, 1, fc[h_i], -1)
  :: else ->
     dellist(h_j, tk);
     if
     :: kown[h_i] == tk ->
        printf("MSC: node %d: enter.lua c%d: the key is ours, pttl %d\n", n, c, kttl[h_i]);
        deliver(n, c, aw, 1, fc[h_i], kttl[h_i])
     :: else ->
        if
        :: ENTER_REFUSED(n, c, arg) ->                  /* a listing judged late */
           printf("MSC: node %d: enter.lua c%d: refused as late\n", n, c);
           deliver(n, c, aw, 2, fc[h_i], kttl[h_i])
        :: else ->
           if                                           /* ZADD NX */
           :: lq[h_j] == 0 ->
              lq[h_j] = tk; shk[h_j] = 1;
              sage[h_j] = ENTER_SCORE_AGE(n, c)
           :: else -> assert(lq[h_j] == tk)             /* one listing per client */
           fi;
           printf("MSC: node %d: enter.lua c%d: listed, age %d, holder's pttl %d\n", n, c, sage[h_j], kttl[h_i]);
           deliver(n, c, aw, 0, fc[h_i], kttl[h_i])
        fi
     fi
  fi
}

/* leave.lua */
inline leave_lua(n, r, c, tk, aw)
{
  h_i = NR(n, r); h_j = NRC(n, r, c);
  if
  :: lq[h_j] == tk -> lq[h_j] = 0
  :: else
  fi;
  dellist(h_j, tk);
  if
  :: kown[h_i] == tk -> deliver(n, c, aw, 1, fc[h_i], kttl[h_i])
  :: else -> deliver(n, c, aw, 0, 0, 0)
  fi
}

/* pass.lua */
inline pass_lua(n, r, c, tk, aw)
{
  h_i = NR(n, r);
  if
  :: kown[h_i] != tk -> deliver(n, c, aw, 0, 0, 0)
  :: else ->
     hand_over(n, r);
     if
     :: h_res == 0 -> kown[h_i] = 0; kttl[h_i] = 0;      /* DEL */
        printf("MSC: node %d: pass.lua c%d: DEL\n", n, c)
     :: else
     fi;
     deliver(n, c, aw, 1, 0, 0)
  fi
}

/* ZADD waiters NX <the score this node gave> member (rqueue.c yield_minority) */
inline zadd_nx(n, r, c, tk)
{
  h_j = NRC(n, r, c);
  if
  :: lq[h_j] == 0 && shk[h_j] -> lq[h_j] = tk
  :: else
  fi
}

/* extend.lua */
inline extend_lua(n, r, c, tk, aw)
{
  h_i = NR(n, r);
  if
  :: kown[h_i] == tk -> kttl[h_i] = TTL; deliver(n, c, aw, 1, 0, 0)
  :: else -> deliver(n, c, aw, 0, 0, 0)
  fi
}

/* fence_sync.lua */
inline fence_sync_lua(n, r, c, v, aw)
{
  h_i = NR(n, r);
  if
  :: fc[h_i] < v -> fc[h_i] = v
  :: else
  fi;
  deliver(n, c, aw, 1, 0, 0)
}

/* multi_acquire.lua over the set m (bit r = resource r) */
inline multi_acquire_lua(n, c, tk, m, aw)
{
  h_v = 0;
  for (h_k : 0 .. R - 1) {
    if
    :: (m & (1 << h_k)) && kown[NR(n, h_k)] != 0 -> h_v = 1
    :: else
    fi
  }
  if
  :: h_v -> deliver(n, c, aw, 0, 0, 0)                 /* {0, i}: nothing set */
  :: else ->
     for (h_k : 0 .. R - 1) {
       if
       :: m & (1 << h_k) ->
          kown[NR(n, h_k)] = tk; kttl[NR(n, h_k)] = TTL; INCR(fc[NR(n, h_k)])
       :: else
       fi
     };
     if
     :: aw && owe[CN(c, n)] == 0 ->
        for (h_k : 0 .. R - 1) { rf[CN(c, n) * R + h_k] = fc[NR(n, h_k)] }
     :: else
     fi;
     deliver(n, c, aw, 1, fc[NR(n, 0)], 0)
  fi
}

/* multi_release.lua: every key of the set holding the token is handed to
 * its head live waiter (hand_over, as pass.lua) or deleted.  The mutant
 * MUT_MULTI_RELEASE_DELETES deletes it whatever waits. */
inline multi_release_lua(n, c, tk, m, aw)
{
  h_v = 1;
  for (h_r : 0 .. R - 1) {
    if
    :: (m & (1 << h_r)) && kown[NR(n, h_r)] == tk ->
#ifdef MUT_MULTI_RELEASE_DELETES
       h_res = 0;
#else
       hand_over(n, h_r);
#endif
       if
       :: h_res == 0 -> kown[NR(n, h_r)] = 0; kttl[NR(n, h_r)] = 0
       :: else
       fi
    :: (m & (1 << h_r)) && kown[NR(n, h_r)] != tk -> h_v = 0
    :: else
    fi
  };
  deliver(n, c, aw, h_v, 0, 0)
}

/* Runs the oldest command of client c's connection to node n. */
inline run_one(n, c)
{
  cq[CN(c, n)]?h_cmd, h_tk, h_arg, h_r, h_aw;
  if
  :: h_cmd == E_ENTER -> eflt[CN(c, n)] = 0; eage[CN(c, n)] = 0; enter_lua(n, h_r, c, h_tk, h_arg, h_aw)
  :: h_cmd == E_LEAVE -> leave_lua(n, h_r, c, h_tk, h_aw)
  :: h_cmd == E_PASS -> pass_lua(n, h_r, c, h_tk, h_aw)
  :: h_cmd == E_ZADD -> zadd_nx(n, h_r, c, h_tk)
  :: h_cmd == E_SYNC -> fence_sync_lua(n, h_r, c, h_arg, h_aw)
  :: h_cmd == E_EXTEND -> extend_lua(n, h_r, c, h_tk, h_aw)
  :: h_cmd == E_MACQ -> multi_acquire_lua(n, c, h_tk, h_arg, h_aw)
  :: h_cmd == E_MREL -> multi_release_lua(n, c, h_tk, h_arg, h_aw)
  fi;
  h_cmd = 0; h_tk = 0; h_arg = 0; h_r = 0; h_aw = 0
}

/* BLPOP of token tk's list on node n, resource r, as the node runs it */
inline blpop_run(n, r, c, tk)
{
  h_j = NRC(n, r, c);
  if
  :: lm[h_j] != 0 && lmt[h_j] == tk ->
     ib[CN(c, n)] = lm[h_j];
#ifdef MUT_VALIDITY_FROM_NODE_TIME
     iba[CN(c, n)] = lma[h_j];
#endif
     lm[h_j] = 0; lmt[h_j] = 0
  :: else -> blk[h_j] = tk
  fi
}

/* ---- sending (client side of a connection) ----------------------------- */
/* Only to a node that is up (a down node refuses the connection). */
inline send(c, n, cmd, tk, arg, r, aw)
{
  assert(nfull(cq[CN(c, n)]));
  cq[CN(c, n)]!cmd, tk, arg, r, aw;
  if
  :: aw -> ain[CN(c, n)] = 1; rw[CN(c, n)] = NONE
  :: else
  fi
}

/* The round stopped waiting for node n: a reply still to come is
 * discarded when it arrives. */
inline abandon(c, n)
{
  if
  :: ain[CN(c, n)] -> ain[CN(c, n)] = 0; owe[CN(c, n)]++
  :: else -> lostr[CN(c, n)] = 0
  fi;
  rw[CN(c, n)] = NONE
}

/* A BLPOP sent on client c's blocking connection to node n */
inline blpop_send(c, n, r)
{
  if
  :: live(n) -> blpop_run(n, r, c, tokc[c])
  :: !live(n) && up(n) -> bpd[NRC(n, r, c)] = tokc[c]
  :: else
  fi
}

/* ---- the node processes ------------------------------------------------ */
proctype node(byte n)
{
end_node:
  do
  :: atomic { live(n) && nempty(cq[CN(0, n)]) -> run_one(n, 0) }
  :: atomic { live(n) && nempty(cq[CN(1, n)]) -> run_one(n, 1) }
#if C > 2
  :: atomic { live(n) && nempty(cq[CN(2, n)]) -> run_one(n, 2) }
#endif
  :: d_step { live(n) && bpd[NRC(n, 0, 0)] != 0 -> blpop_run(n, 0, 0, bpd[NRC(n, 0, 0)]); bpd[NRC(n, 0, 0)] = 0 }
  :: d_step { live(n) && bpd[NRC(n, 0, 1)] != 0 -> blpop_run(n, 0, 1, bpd[NRC(n, 0, 1)]); bpd[NRC(n, 0, 1)] = 0 }
#if C > 2
  :: d_step { live(n) && bpd[NRC(n, 0, 2)] != 0 -> blpop_run(n, 0, 2, bpd[NRC(n, 0, 2)]); bpd[NRC(n, 0, 2)] = 0 }
#endif
  od
}

/* Nothing a healthy node owes: a live node runs what it was sent before
 * the next tick (delays come from pauses, which are faults). */
#define NODE_QUIET(n) (!live(n) || (empty(cq[CN(0, n)]) && empty(cq[CN(1, n)]) && NODE_QUIET2(n)))
#if C > 2
#define NODE_QUIET2(n) empty(cq[CN(2, n)])
#else
#define NODE_QUIET2(n) true
#endif

/* ---- the clock --------------------------------------------------------- */
/* One tick: every key's TTL, every listing's age (node clocks), every
 * client countdown (client_tick) moves by one. */
inline node_tick()
{
  for (h_i : 0 .. N * R - 1) {
    if
    :: kown[h_i] != 0 ->
       kttl[h_i]--;
       if
       :: kttl[h_i] == 0 -> kown[h_i] = 0;              /* expired */
          printf("MSC: node %d: key %d expires\n", h_i / R, h_i % R)
       :: else
       fi
    :: else
    fi
  };
  for (h_j : 0 .. N * R * C - 1) {
    if
    :: (lq[h_j] != 0 || shk[h_j]) && sage[h_j] < SCAP -> sage[h_j]++
    :: else
    fi
  };
  for (h_i : 0 .. N - 1) {
    if
    :: paused[h_i] > 0 -> paused[h_i]--
    :: else
    fi;
    if
    :: down[h_i] > 0 -> down[h_i]--
    :: else
    fi
  };
  for (h_i : 0 .. C * N - 1) {
    if
    :: eflt[h_i] && eage[h_i] < LATE + 2 -> eage[h_i]++
    :: else
    fi
  }
}

/* FAULT: node n restarts and forgets its keys, listings and lists (the
 * fence counter is persisted); it stays out DOWNT ticks (the delayed
 * restart of the distlock page); its connections break. */
inline restart(n)
{
  down[n] = DOWNT; paused[n] = 0;
  for (h_r : 0 .. R - 1) {
    kown[NR(n, h_r)] = 0; kttl[NR(n, h_r)] = 0;
    for (h_c : 0 .. C - 1) {
      h_j = NRC(n, h_r, h_c);
      lq[h_j] = 0; shk[h_j] = 0; sage[h_j] = 0; lm[h_j] = 0; lmt[h_j] = 0; blk[h_j] = 0; bpd[h_j] = 0
    }
  };
  for (h_c : 0 .. C - 1) {
    do
    :: nempty(cq[CN(h_c, n)]) -> cq[CN(h_c, n)]?_, _, _, _, _
    :: empty(cq[CN(h_c, n)]) -> break
    od;
    if
    :: ain[CN(h_c, n)] -> rw[CN(h_c, n)] = RERR       /* the round sees the connection fail */
    :: else
    fi;
    ain[CN(h_c, n)] = 0; owe[CN(h_c, n)] = 0; lostr[CN(h_c, n)] = 0;
    eflt[CN(h_c, n)] = 0; eage[CN(h_c, n)] = 0
  }
}

/* FAULT: node n's wall clock steps by s ticks.  Redis expires keys by the
 * wall clock: a forward step shortens every key (docs/redlock.md,
 * assumption 1), a backward one lengthens it; every listing's age by the
 * node's TIME moves with it. */
inline host_step(n, s)
{
  off[n] = off[n] + s;
  for (h_r : 0 .. R - 1) {
    h_i = NR(n, h_r);
    if
    :: kown[h_i] != 0 && kttl[h_i] <= s -> kown[h_i] = 0; kttl[h_i] = 0
    :: kown[h_i] != 0 && kttl[h_i] > s -> kttl[h_i] = kttl[h_i] - s
    :: else
    fi;
    for (h_c : 0 .. C - 1) {
      h_j = NRC(n, h_r, h_c);
      if
      :: lq[h_j] != 0 || shk[h_j] ->
         sage[h_j] = sage[h_j] + s;
         if
         :: sage[h_j] > SCAP -> sage[h_j] = SCAP
         :: sage[h_j] < -STEP -> sage[h_j] = -STEP
         :: else
         fi
      :: else
      fi
    }
  }
}

/* Whether node n holds a lock key now (a forward step then breaks the
 * assumption of docs/redlock.md: unless STEP_WHILE_HELD, steps come only
 * while no key is there). */
#define NODE_KEYLESS(n) (kown[NR(n, 0)] == 0 && (R < 2 || kown[NR(n, R - 1)] == 0))

#ifdef FAULT_CLIENT_PAUSE
#define QUIET_CLIENTS true
#else
#define QUIET_CLIENTS CLIENTS_QUIET
#endif

active proctype clock()
{
end_clock:
  do
  :: d_step {
       QUIET_CLIENTS && NODE_QUIET(0)
#if N > 1
       && NODE_QUIET(1) && NODE_QUIET(2)
#endif
       -> printf("MSC: --- tick ---\n"); node_tick(); client_tick(); h_i = 0; h_j = 0; h_c = 0
     }
#ifdef FAULT_DRIFT
     /* DRIFT: a node's clock runs fast: a key may go up to DRIFT ticks early */
  :: atomic {
       h_i = 0;
       do
       :: h_i < N * R && kown[h_i] != 0 && kttl[h_i] <= DRIFT -> kown[h_i] = 0; kttl[h_i] = 0;
          printf("MSC: node %d: key %d expires early (drift)\n", h_i / R, h_i % R); break
       :: h_i < N * R -> h_i++
       :: h_i == N * R -> break
       od;
       h_i = 0
     }
#endif
  :: atomic { npause < MAXPAUSE && live(0) -> npause++; paused[0] = PMAX; printf("MSC: node 0 pauses\n") }
  :: atomic { paused[0] > 0 -> paused[0] = 0; printf("MSC: node 0 resumes\n") }      /* a paused node may resume early */
#if N > 1
  :: atomic { npause < MAXPAUSE && live(1) -> npause++; paused[1] = PMAX; printf("MSC: node 1 pauses\n") }
  :: atomic { npause < MAXPAUSE && live(2) -> npause++; paused[2] = PMAX; printf("MSC: node 2 pauses\n") }
  :: atomic { paused[1] > 0 -> paused[1] = 0; printf("MSC: node 1 resumes\n") }
  :: atomic { paused[2] > 0 -> paused[2] = 0; printf("MSC: node 2 resumes\n") }
#endif
     /* restarts and clock steps on node 0 only: the nodes are alike */
  :: atomic { nrestart < MAXRESTART && up(0) -> nrestart++; restart(0); printf("MSC: node 0 restarts empty\n") }
#ifdef STEP_WHILE_HELD
  :: atomic { nstep < MAXSTEP -> nstep++; host_step(0, STEP); printf("MSC: node 0's clock steps +%d\n", STEP) }
#else
  :: atomic { nstep < MAXSTEP && NODE_KEYLESS(0) -> nstep++; host_step(0, STEP); printf("MSC: node 0's clock steps +%d\n", STEP) }
#endif
  :: atomic { nstep < MAXSTEP -> nstep++; host_step(0, -STEP); printf("MSC: node 0's clock steps -%d\n", STEP) }
  od
}
