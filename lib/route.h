/* SPDX-License-Identifier: MIT */
/*
 * Where a request runs: the mode is a policy, and this is the one place
 * that interprets it.  From an op's kind, the context's mode and what an
 * engine's kernel interface can do, afio_route() says where a request
 * goes first and where it ends up when that would block.  Backends look
 * their routes up (struct afio_engine.route) instead of testing the mode;
 * afio_op_native(3), afio-probe(1) and the tables of asyncfio(7) and
 * README.md are made from the same answers (tests/routes.c checks the
 * documents against them).  lib/README.md, "How a request is routed".
 *
 * What the table cannot know stays with the backend that finds it out per
 * request: whether a file is O_DIRECT and aligned (libaio), whether a
 * socket is O_NONBLOCK where accept and connect have no flag of their
 * own, whether a sendfile's range is cached.  Each is named beside the
 * route it bends (route_note()).
 */
#ifndef AFIO_ROUTE_H
#define AFIO_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "asyncfio.h"
#include "request.h"

/* What an engine's kernel interface runs (struct afio_backend_ops.caps).
   An engine with none of them is the thread pool. */
enum afio_backend_caps {
	AFIO_CAP_NOP = 1u << 0,		/* a no-op request */
	AFIO_CAP_FILES = 1u << 1,	/* file reads and writes, cached or not */
	AFIO_CAP_DIRECT = 1u << 2,	/* only aligned O_DIRECT reads and writes */
	AFIO_CAP_SOCKETS = 1u << 3,	/* socket ops, waiting for readiness itself */
	AFIO_CAP_READINESS = 1u << 4,	/* tells socket readiness, no more */
	AFIO_CAP_FSYNC = 1u << 5,	/* fsync and fdatasync */
	AFIO_CAP_SYNC_OPS = 1u << 6,	/* the other one-call ops: paths, fallocate, ... */
	AFIO_CAP_TIMERS = 1u << 7,
	AFIO_CAP_WORKERS = 1u << 8,	/* a request can go straight to the kernel's workers */
};

/* Where a request is tried first, without blocking. */
enum afio_try {
	AFIO_TRY_NONE,
	AFIO_TRY_CALLER,	/* in the thread that submits it */
	AFIO_TRY_WORKER,	/* by the pool worker that takes it */
};

/* Where it runs when it was not tried, or the try would have blocked. */
enum afio_run {
	AFIO_RUN_CORE,		/* the core finishes it as it is queued */
	AFIO_RUN_KERNEL,	/* the kernel, which tries it in the submitter first */
	AFIO_RUN_KERNEL_WORKER,	/* the kernel's own workers, at once */
	AFIO_RUN_KERNEL_READY,	/* the kernel tells readiness; the owner moves the bytes */
	AFIO_RUN_POOL,		/* a pool worker, which may block in it */
	AFIO_RUN_POOL_READY,	/* the pool's epoll set, then a worker moves the bytes */
	AFIO_RUN_POOL_TIMER,	/* the pool's deadline heap */
	AFIO_RUN_CALLER,	/* the caller, which may wait in it; O_DIRECT a pool worker */
};

struct afio_route {
	uint8_t first;		/* enum afio_try */
	uint8_t then;		/* enum afio_run */
};

/* The route of op in mode on an engine with caps whose kernel has op
   (false: the running kernel lacks it, as io_uring's probe tells);
   flags: the context's (AFIO_CALLER_WRITES bends a route). */
struct afio_route afio_route(unsigned caps, bool kernel_has, enum afio_op op,
			     enum afio_mode mode, unsigned flags);

/* true when the route leaves the engine for the thread pool. */
static inline bool afio_route_pooled(struct afio_route rt)
{
	return rt.then >= AFIO_RUN_POOL;
}

/* One line on a route, as afio_op_native(3) gives it; kernel names the
   engine's own call for op (e.g. "IORING_OP_READ"), or is NULL; mode and
   flags are the ones rt was made for. */
void afio_route_describe(struct afio_route rt, unsigned caps, enum afio_op op,
			 enum afio_mode mode, unsigned flags, const char *kernel, char *buf,
			 size_t len);

/* A socket request waiting for its peer holds a pool worker: so many can
   wait at once as there are workers (afio_limits(3)). */
bool afio_route_holds_worker(unsigned caps, enum afio_mode mode);

#endif
