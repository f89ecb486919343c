/* params.pml - the models' constants: time in ticks, fault budgets, the
 * indexing of the shared arrays (docs/model.md, "Time").  Included first by
 * every model; N, R and C are the model's. */
#ifndef PARAMS_PML
#define PARAMS_PML

/* ---- time, in ticks ---------------------------------------------------- */
#ifndef TTL
#define TTL 3        /* the lock's TTL */
#endif
#ifndef DRIFT
#define DRIFT 1      /* the drift allowance taken off every validity */
#endif
#define CT 1         /* command timeout: a round waits at most CT ticks */
#define HW 2         /* hand-off window, 2 x CT */
#define HALFT (TTL / 2)                    /* a handed key with less left is re-asked */
#define LATE ((TTL > CT -> TTL : CT) / 2)  /* the late-listing bound: max(TTL, CT)/2 */
#ifndef WAIT
#define WAIT 5       /* a call's deadline, ticks after it starts */
#endif
#ifdef LIVE
#define STAY 100     /* waiters wait for ever: a listing never lapses */
#define SCAP 2       /* ages beyond this are equal (older than every newer listing) */
#else
#define STAY (WAIT + HW)   /* a listing lapses at its waiter's deadline + HW */
#define SCAP STAY
#endif
#ifndef STEP
#define STEP 2       /* a host clock step, ticks */
#endif
#ifndef PMAX
#define PMAX 2       /* longest node pause, ticks */
#endif
#define DOWNT (TTL + 1)    /* a restarted node stays out this long (delayed restart) */

/* ---- fault budgets (0 = off); set with -D ----------------------------- */
#ifndef MAXPAUSE
#define MAXPAUSE 0
#endif
#ifndef MAXRESTART
#define MAXRESTART 0
#endif
#ifndef MAXSTEP
#define MAXSTEP 0
#endif
#ifndef MAXLOST
#define MAXLOST 0
#endif
#ifndef MAXCRASH
#define MAXCRASH 0
#endif
#ifndef FMAX
#define FMAX 250
#endif

#define NONE 255
#define RERR 3       /* reply slot: the connection failed (unknown outcome) */
#define TOKS 4       /* tokens per client: call k uses token c*TOKS + k%TOKS + 1 */
#define TOKC(t) (((t) - 1) / TOKS)

#define NR(n, r) ((n) * R + (r))
#define NRC(n, r, c) (((n) * R + (r)) * C + (c))
#define CN(c, n) ((c) * N + (n))
#define up(n) (down[n] == 0)
#define live(n) (down[n] == 0 && paused[n] == 0)

/* Fences: real numbers in safety runs; in liveness runs (NOFENCE) every
 * INCR gives 1: a value decides nothing there but the stale-message test,
 * which NOFENCE runs make impossible (docs/model.md). */
#ifdef NOFENCE
#define INCR(x) x = 1
#else
#define INCR(x) x++; assert(x < FMAX)
#endif

/* Commands on a client-node connection. */
#define E_ENTER 1    /* enter.lua; arg: bit 0 ARGV[5], bit 1 a late bound sent, bits 2.. its offset + 4 */
#define E_LEAVE 2    /* leave.lua */
#define E_PASS 3     /* pass.lua (release, pass_on) */
#define E_ZADD 4     /* ZADD NX with the score the node gave (yield_minority) */
#define E_SYNC 5     /* fence_sync.lua; arg: the fence */
#define E_EXTEND 6   /* extend.lua */
#define E_MACQ 7     /* multi_acquire.lua; arg: the set (bit r) */
#define E_MREL 8     /* multi_release.lua; arg: the set (bit r) */

#ifndef CAP
#define CAP 3
#endif

#endif
