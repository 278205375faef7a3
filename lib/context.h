/* SPDX-License-Identifier: MIT */
#ifndef AFIO_CONTEXT_H
#define AFIO_CONTEXT_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "asyncfio.h"
#include "backend.h"
#include "request.h"

#define AFIO_REASON_LEN 192
#define AFIO_DEFAULT_THREADS	4

/* afio_fd_hint()'s, by fd (lib/fdhint.c). */
struct afio_fd_hint {
	uint8_t hint;		/* AFIO_FD_BUFFERED or AFIO_FD_DIRECT; 0: none */
	bool dio_ok;		/* DIRECT: the kernel said how to align (mem, off) */
	bool from_statx;
	uint32_t mem;
	uint32_t off;
};

struct afio_fd_hints {
	struct afio_fd_hint *by_fd;
	unsigned n;
	struct afio_lbs_cache lbs;
};

struct afio_ctx {
	struct afio_engine primary;
	struct afio_engine pool;	/* ops NULL until something is routed */
	struct afio_reqq queue;		/* accepted, not yet handed over */
	struct afio_reqq rearm;		/* multishot, to go on at the end of the next afio_poll() */
	struct afio_reqq done;		/* finished, callbacks pending */
	struct afio_reqq to_pool;	/* routed by the primary, for the pool */
	struct afio_req *free_slots;	/* freed ones, the latest first */
	struct afio_req *last;		/* the latest accepted: afio_last_handle() */
	/* Slots ever taken, 0 up to this, the rest untouched (get_slot()
	   takes a new one only when none is free): what cancel by data and
	   destroy look through, the most requests ever held at once. */
	unsigned slots_used;
	bool requeued;			/* the core queued a request again since the last flush */
	unsigned nbufpools;
	struct afio_bufpool *bufpools[AFIO_MAX_BUFPOOLS];
	struct afio_fd_hints hints;
	struct afio_req *slots;
	struct afio_config cfg;
	struct afio_stats st;
	int evfd;
	bool in_poll;
	bool evfd_exported;		/* afio_eventfd() was called */
	bool evfd_up;			/* known readable: not read since signaled (lib/queue.c) */
	bool closing;
	bool destroy_deferred;		/* afio_destroy() from a callback of afio_poll() */
	unsigned fork_gen;		/* afio_fork_gen when created */
	unsigned threads_asked;		/* cfg.threads as given; 0: sized for the mode */
	char skip_reason[AFIO_BACKEND_LAST + 1][AFIO_REASON_LEN];
};

/* One more in each child of fork() than in its parent. */
extern atomic_uint afio_fork_gen;

/*
 * A context made before fork() belongs to the parent: its kernel objects
 * and threads are the parent's, and the child must not drive them.  A
 * relaxed load and a compare, so that every call can afford it.
 */
static inline bool afio_ctx_forked(const struct afio_ctx *ctx)
{
	return ctx->fork_gen != atomic_load_explicit(&afio_fork_gen, memory_order_relaxed);
}

/* What every call on a context checks first. */
static inline int afio_ctx_check(const struct afio_ctx *ctx)
{
	if (!ctx)
		return -EINVAL;
	return afio_ctx_forked(ctx) ? -ECHILD : 0;
}

int afio_select_backend(struct afio_ctx *ctx);

/* e runs ops for ctx from now on: its routes are set for ctx's mode. */
void afio_engine_prepare(struct afio_ctx *ctx, struct afio_engine *e,
			 const struct afio_backend_ops *ops);

/* From now on the application watches the eventfd. */
int afio_export_eventfd(struct afio_ctx *ctx);

/* ---- lib/fdhint.c ---- */
void afio_fd_hint_closed(struct afio_ctx *ctx, int fd);
void afio_fd_hints_free(struct afio_ctx *ctx);

/* ---- lib/bufpool.c ---- */
struct afio_bufpool;
void afio_bufpools_free(struct afio_ctx *ctx);
bool afio_bufpool_valid(const struct afio_ctx *ctx, unsigned pool);
size_t afio_bufpool_size(const struct afio_ctx *ctx, unsigned pool);
bool afio_bufpool_kernel(const struct afio_ctx *ctx, unsigned pool);
/* r's engine found it readable: read into a pool buffer, park or queue it again. */
void afio_recv_into_pool(struct afio_req *r);
void afio_bufpool_unpark(struct afio_ctx *ctx, struct afio_req *r);
bool afio_bufpool_park(struct afio_req *r);
/* r's callback is about to get its buffer: the program's from now on. */
void afio_bufpool_deliver(struct afio_req *r);
/* r is queued now: a buffer given back later wakes it (afio_bufpool_park()). */
void afio_bufpool_mark(struct afio_req *r);
void afio_req_detach(struct afio_req *r);

/* The result is final (afio_req_done() after the engine's part). */
void afio_req_finish(struct afio_req *r, ssize_t res);
void afio_req_requeue(struct afio_req *r);
/* Submits what the core queued again, where no afio_poll() will. */
void afio_ctx_kick(struct afio_ctx *ctx);

/* Cancel everything queued or in flight (destroy). */
void afio_cancel_all(struct afio_ctx *ctx);
/* Reap and run callbacks until nothing is in flight (destroy). */
void afio_drain(struct afio_ctx *ctx);

#endif
