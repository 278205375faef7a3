/* SPDX-License-Identifier: MIT */
/*
 * The contract between the core and a backend.  Each backend fills in one
 * const struct afio_backend_ops; the core walks afio_backends[] in order and
 * the first whose init succeeds runs the context.  The core knows
 * nothing else about a backend.
 * (lib/README.md, "The engine contract")
 *
 * Threading: every op runs on the thread that owns the context, except that
 * the thread-pool engine completes work on its own threads and hands results
 * back through its reap op.
 */
#ifndef AFIO_BACKEND_H
#define AFIO_BACKEND_H

#include <stdbool.h>

#include "asyncfio.h"
#include "request.h"
#include "route.h"

struct afio_ctx;

/* The highest enum afio_backend: for tables indexed by backend. */
#define AFIO_BACKEND_LAST AFIO_BACKEND_THREADS

/* One running instance of a backend inside a context.  A context has its
   primary engine and, once something is routed there, a thread-pool one. */
struct afio_engine {
	const struct afio_backend_ops *ops;
	struct afio_ctx *ctx;
	void *priv;
	unsigned handed;	/* requests this engine owns now */
	/* A completion waits in the engine until a callback has run: reap
	   again after the callbacks (set and cleared by reap). */
	bool held;
	/* Where each op runs in the context's mode, set before init (which
	   may say what the kernel lacks: afio_engine_lacks_op()). */
	struct afio_route route[AFIO_OP_COUNT];
	/* Set during the submit of an afio_poll() that will then wait with
	   no time limit, unless a completion comes first: the engine may keep
	   a request back for its wait op to run in the caller, and start it
	   in start_kept if the call ends without that wait. */
	bool caller_waits;
};

struct afio_backend_ops {
	enum afio_backend id;
	const char *name;
	unsigned caps;		/* enum afio_backend_caps: what its kernel runs */

	/* 0 when the backend can run with cfg; else -errno and a reason. */
	int (*probe)(const struct afio_config *cfg, char *reason, size_t len);

	/* Set up e->priv.  On failure, the -errno and reason probe would give:
	   selection calls init alone. */
	int (*init)(struct afio_engine *e, const struct afio_config *cfg,
		    char *reason, size_t len);

	/* Free everything; the core calls it only when e->handed is 0. */
	void (*exit)(struct afio_engine *e);

	/*
	 * Instead of exit, in a child of fork(): the kernel objects and
	 * threads are the parent's, still in use there, and requests may be
	 * in flight.  Free this process's memory and close its copies of
	 * the fds the engine can name with certainty; touch nothing shared
	 * and wait for nothing.
	 */
	void (*forget)(struct afio_engine *e);

	/*
	 * Take requests from the head of q and start them; leave at the head
	 * what cannot go now (a full kernel queue), to be retried after a reap.
	 * A request the engine cannot do well goes to afio_route_to_pool();
	 * one that fails at once is finished with afio_req_done().  Returns
	 * how many were taken, or -errno when none could be.
	 */
	int (*submit)(struct afio_engine *e, struct afio_reqq *q);

	/* Finish (afio_req_done) whatever completed; never blocks. */
	void (*reap)(struct afio_engine *e);

	/* Optional: from now on every completion must make the eventfd
	   readable, because the application watches it or the core sleeps
	   on it beside the pool (lib/queue.c, wait_some()).  Until the first
	   call an engine that has it may leave the eventfd alone, and spare
	   a program that waits only inside afio_poll() its cost.  -errno:
	   it cannot. */
	int (*watch_eventfd)(struct afio_engine *e);

	/* Optional: the owner is about to rely on the eventfd (to sleep on it,
	   or because the application watches it): the next completion must
	   make it readable.  Engines whose every completion does need none. */
	void (*expect_wakeup)(struct afio_engine *e);

	/* Optional: whether a reap would find something now.  A hint for
	   the eventfd, which such completions made readable (or will, from a
	   worker that is telling), so it must not claim what is not there;
	   without it the core reads the eventfd before each look. */
	bool (*ready)(const struct afio_engine *e);

	/* Optional: block up to timeout_ms (-1: no limit) until reap would find
	   something; 1 when the engine has nothing of its own that could
	   come, and the core waits on the context's eventfd, as it does
	   without this op. */
	int (*wait)(struct afio_engine *e, int timeout_ms);

	/* Optional, with caller_waits: the afio_poll() ends; what submit
	   kept back for wait starts now. */
	void (*start_kept)(struct afio_engine *e);

	/* Ask for r (owned by e) to stop.  It still completes exactly once:
	   later through reap, or at once by afio_req_done() where nothing of
	   it is in the kernel. */
	void (*cancel)(struct afio_engine *e, struct afio_req *r);

	/* Optional: one line on how the engine is set up. */
	int (*describe)(const struct afio_engine *e, char *buf, size_t len);

	/* Optional: the name of the kernel's call that runs op (1), or why
	   the kernel has none (0), for afio_op_native(3). */
	int (*op_kernel)(const struct afio_engine *e, enum afio_op op, char *buf, size_t len);

	/* Optional: from now on the kernel picks the free buffers of pool
	   (count buffers of size bytes at mem) for RECV_POOL, whose result
	   the engine gives by afio_req_done_buf(); -errno leaves the pool to
	   the core (lib/bufpool.c). */
	int (*pool_attach)(struct afio_engine *e, unsigned pool, char *mem, unsigned count,
			   size_t size);
	/* With pool_attach: buffer id of pool is free again (the program
	   gave it back; one the kernel filled with nothing, the engine puts
	   back itself and says so by afio_bufpool_recycled()). */
	void (*pool_return)(struct afio_engine *e, unsigned pool, unsigned id);
};

extern const struct afio_backend_ops afio_backend_io_uring;
extern const struct afio_backend_ops afio_backend_libaio;
extern const struct afio_backend_ops afio_backend_threads;

/* Candidates for AUTO, best first. */
extern const struct afio_backend_ops *const afio_backends[];

/* The ops for b, or NULL when b was not built in. */
const struct afio_backend_ops *afio_backend_find(enum afio_backend b);

/* ---- what the core offers backends ---- */

/* The engine now owns r (popped from the submit queue). */
static inline void afio_engine_take(struct afio_engine *e, struct afio_req *r)
{
	r->engine = e;
	r->state = AFIO_REQ_HANDED;
	e->handed++;
}

/* r's result: res bytes in buffer id of its pool (an attached pool),
   which the program holds from now on.  -ENOBUFS through afio_req_done()
   parks r until a buffer comes back, unless it asked otherwise. */
void afio_req_done_buf(struct afio_req *r, ssize_t res, unsigned id);

/*
 * The try of a pooled receive in the owner thread, where an engine waits
 * for readiness itself: the read into a free buffer at once, the one
 * system call a socket with data needs, instead of a readiness check
 * first.  true: r is finished (bytes, the end, an error); false: nothing
 * read (no data, or no free buffer), r is still the engine's to wait.
 */
bool afio_recv_pool_try(struct afio_req *r);

/*
 * A result of r that the kernel's own multishot gave: r stays e's (it is
 * DONE until its callback, HANDED again after), and the callback gets
 * AFIO_CQE_MORE.  r's next result may be given only once that callback
 * has run: until then the engine holds it (and sets e->held).  The last
 * goes through afio_req_done() or afio_req_done_buf().
 */
void afio_req_shot(struct afio_req *r, ssize_t res);
void afio_req_shot_buf(struct afio_req *r, ssize_t res, unsigned id);

/* A buffer of an attached pool went back to the kernel without the
   program: what waits for one goes again. */
void afio_bufpool_recycled(struct afio_ctx *ctx, unsigned pool);

/* From init: the running kernel lacks op, which the caps promise; its
   requests go to the pool. */
void afio_engine_lacks_op(struct afio_engine *e, enum afio_op op);

/* Record r's result; its callback runs in the next afio_poll().  Owner
   thread only; r leaves its engine. */
void afio_req_done(struct afio_req *r, ssize_t res);

/* Hand r to the context's thread pool (created on first use) and count it
   in stats.fallbacks.  Owner thread, from submit or reap only: the core
   passes what was routed to the pool in one batch when the op returns. */
void afio_route_to_pool(struct afio_engine *from, struct afio_req *r);

/* The context's eventfd, which every engine makes readable when it has
   completions for reap (from its watch_eventfd() on, where it has one). */
int afio_ctx_eventfd(const struct afio_ctx *ctx);
/* Read it empty; an engine does so only through this, which the core's
   record of the eventfd (lib/queue.c, "evfd_up") needs to stay true. */
void afio_ctx_clear_eventfd(struct afio_ctx *ctx);
enum afio_mode afio_ctx_mode(const struct afio_ctx *ctx);
unsigned afio_ctx_flags(const struct afio_ctx *ctx);
unsigned afio_ctx_entries(const struct afio_ctx *ctx);

/* Counts a request that finished at once, in the caller (stats.nowait). */
void afio_count_nowait(struct afio_ctx *ctx);

/* ---- lib/sockops.c: a waiting socket request's hold on its socket ---- */

/* The rules (who owns it, when it goes, fork) are at afio_sock_hold(). */
struct afio_sock_hold {
	/* What the request waits and transfers on, plus one: 0 is nothing,
	   so that zeroed slots, never touched until used, hold nothing. */
	int fd_plus1;
	int8_t borrowed;	/* 0: the fd is a dup; -EMFILE or -ENFILE: none
				   could be made, and it is r->fd itself */
	bool request_owns;	/* the fd is the request's own (AFIO_SHOT_BOUND) */
} __attribute__((packed));	/* 6 bytes in every slot: a waiting connection's cost */

static inline void afio_sock_hold_init(struct afio_sock_hold *h)
{
	h->fd_plus1 = 0;
	h->borrowed = 0;
	h->request_owns = false;
}

/* The fd h holds; only while it holds one. */
static inline int afio_sock_held_fd(const struct afio_sock_hold *h)
{
	return h->fd_plus1 - 1;
}

/* Binds r to its socket, once: 0 when h holds a dup, h->borrowed when it
   waits on r->fd, another -errno (r->fd is not open) when h holds
   nothing. */
int afio_sock_hold(struct afio_sock_hold *h, const struct afio_req *r);

/* The fd to wait and transfer on: the held one, else r->fd. */
static inline int afio_sock_hold_fd(const struct afio_sock_hold *h, const struct afio_req *r)
{
	return h->fd_plus1 ? afio_sock_held_fd(h) : r->fd;
}

/* Closes the dup, if any; h holds nothing after. */
void afio_sock_release(struct afio_sock_hold *h);

/* ---- lib/dio.c: what O_DIRECT needs ---- */

#define AFIO_LBS_CACHE 8

/* Logical block sizes by device, where statx does not say. */
struct afio_lbs_cache {
	struct {
		dev_t dev;
		unsigned lbs;
	} devs[AFIO_LBS_CACHE];
	unsigned next;
};

struct afio_dio_facts {
	unsigned mem;		/* buffer alignment */
	unsigned off;		/* offset and length alignment */
	uint64_t size;		/* file size when asked; UINT64_MAX for a device */
	bool from_statx;	/* else the logical block size */
	bool size_unknown;	/* from a hint: size not asked */
};

/* The alignment O_DIRECT I/O on fd needs and the file's size; -EOPNOTSUPP
   when direct I/O is not known to be asynchronous there, -EBADF. */
int afio_dio_facts(int fd, struct afio_lbs_cache *cache, struct afio_dio_facts *facts);

/*
 * What one submit call asked about the fd its latest file request named.
 * The requests of a batch are routed in one call, in which no callback
 * runs: an F_SETFL or a truncate by another thread meanwhile races with
 * all of them alike, so one fcntl (and one statx) per fd and batch says
 * as much as one per request.  Nothing is kept from one call to the next
 * (a closed fd number comes back as another file, asyncfio(7)) but what
 * the program promised with afio_fd_hint().
 */
struct afio_fd_memo {
	const struct afio_fd_hints *hints;	/* the program's (lib/fdhint.c), asked first */
	int fd;			/* -1: nothing asked yet */
	int fl;			/* its F_GETFL, or -errno */
	int dio_ret;		/* 1: not asked; else what afio_dio_facts() gave */
	int positional;		/* 1: fd has positions (pread(2) took it);
				   0: not, or not known to; or: */
#define AFIO_FD_POSITIONS_UNKNOWN 2
	struct afio_dio_facts dio;
};

void afio_fd_memo_init(struct afio_fd_memo *m, const struct afio_engine *e);

/* fd's F_GETFL (or -errno; only O_DIRECT is sure to be there), from its
   hint or asked once per fd in a row; a new fd's other answers are then
   unknown, or the hint's. */
int afio_fd_memo_flags(struct afio_fd_memo *m, int fd);

/* The same for a request whose program said fd is not O_DIRECT
   (AFIO_RWF_BUFFERED): the memo's answer if it has asked, else that word,
   without asking. */
int afio_fd_memo_promised(struct afio_fd_memo *m, int fd);

/* snprintf into reason, tolerating a NULL or zero-sized buffer. */
void afio_reason(char *reason, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Reads a whole /proc/sys file's first line into buf; -errno on failure. */
int afio_read_sysctl(const char *path, char *buf, size_t len);

#endif
