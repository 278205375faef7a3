/* SPDX-License-Identifier: MIT */
/*
 * Buffer pools: receives that hold no buffer while they wait.
 *
 * A RECV_POOL request is two steps.  The engine waits for the socket to
 * be readable, as for any socket op, and completes with the poll(2)
 * events; afio_req_done() then hands it here, on the owner thread, where
 * it takes a free buffer and reads into it without blocking.  No buffer
 * free: the request is PARKED in the pool's waiters until one comes back.
 * Nothing read after all (another reader was first): it is queued again
 * for another wait.  Buffers are the owner thread's alone, so no lock.
 *
 * An engine whose kernel picks buffers itself (io_uring's provided buffer
 * rings) takes the pool when it is made (pool_attach): its RECV_POOL is
 * one request that ends with the bytes in a buffer, the free buffers are
 * the kernel's, and an empty ring ends a receive with -ENOBUFS, which
 * parks it here as well.
 *
 * Who holds a buffer: the pool (or the kernel's ring) while it is free;
 * the request, from the result that names it to that result's callback
 * (a completion waiting in ctx->done); the program, from the callback
 * until afio_buf_release().  Only the program's may be given back: one
 * still on its way to a callback is not the program's to give, and
 * taken back it would be filled again under that callback.
 * The memory is mapped, not allocated: a buffer never used costs no RSS,
 * and the free stack hands out the most recently returned first.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "context.h"

#define MAX_BUF_SIZE	(1u << 30)

enum buf_owner {
	BUF_FREE,		/* the pool's, or the kernel's ring's */
	BUF_RESULT,		/* a finished request's, until its callback */
	BUF_PROGRAM,		/* from that callback to afio_buf_release() */
};

struct afio_bufpool {
	char *mem;
	size_t size;
	size_t map_len;
	unsigned count;
	unsigned nfree;
	uint32_t *free_ids;	/* a stack */
	uint8_t *owner;		/* enum buf_owner, by id */
	bool kernel;		/* the primary engine's kernel keeps the free ones */
	uint64_t returned;	/* buffers back on the kernel's ring so far */
	struct afio_reqq waiters;	/* PARKED, oldest first */
};

/* Only where the primary engine runs pooled receives itself: one it
   hands to the pool is read here, from the core's free stack. */
static bool attach(struct afio_ctx *ctx, unsigned pool, struct afio_bufpool *bp)
{
	struct afio_engine *e = &ctx->primary;

	if (!e->ops->pool_attach || afio_route_pooled(e->route[AFIO_OP_RECV_POOL]))
		return false;
	return !e->ops->pool_attach(e, pool, bp->mem, bp->count, bp->size);
}

static void free_pool(struct afio_bufpool *bp)
{
	if (bp->mem)
		munmap(bp->mem, bp->map_len);
	free(bp->free_ids);
	free(bp->owner);
	free(bp);
}

int afio_bufpool_create(afio_ctx *ctx, unsigned count, size_t size, unsigned *pool)
{
	struct afio_bufpool *bp;
	int ret = afio_ctx_check(ctx);

	if (ret)
		return ret;
	if (!pool || !count || count > AFIO_MAX_POOL_BUFS || !size || size > MAX_BUF_SIZE)
		return -EINVAL;
	if (ctx->nbufpools == AFIO_MAX_BUFPOOLS)
		return -ENOSPC;
	bp = calloc(1, sizeof(*bp));
	if (!bp)
		return -ENOMEM;
	bp->size = size;
	bp->count = count;
	bp->map_len = (size_t)count * size;
	bp->mem = mmap(NULL, bp->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	if (bp->mem == MAP_FAILED)
		bp->mem = NULL;
	bp->free_ids = malloc(count * sizeof(*bp->free_ids));
	bp->owner = calloc(count, 1);
	if (!bp->mem || !bp->free_ids || !bp->owner) {
		free_pool(bp);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < count; i++)
		bp->free_ids[i] = count - 1 - i;
	bp->nfree = count;
	afio_reqq_init(&bp->waiters);
	*pool = ctx->nbufpools;
	ctx->bufpools[ctx->nbufpools++] = bp;
	bp->kernel = attach(ctx, *pool, bp);
	return 0;
}

void afio_bufpools_free(struct afio_ctx *ctx)
{
	for (unsigned i = 0; i < ctx->nbufpools; i++)
		free_pool(ctx->bufpools[i]);
	ctx->nbufpools = 0;
}

bool afio_bufpool_valid(const struct afio_ctx *ctx, unsigned pool)
{
	return pool < ctx->nbufpools;
}

/* The engine's kernel fills the pool's buffers (an io_uring buffer
   ring), rather than the core reading into them. */
bool afio_bufpool_kernel(const struct afio_ctx *ctx, unsigned pool)
{
	return ctx->bufpools[pool]->kernel;
}

size_t afio_bufpool_size(const struct afio_ctx *ctx, unsigned pool)
{
	return ctx->bufpools[pool]->size;
}

void *afio_buf(const afio_ctx *ctx, unsigned pool, unsigned id)
{
	const struct afio_bufpool *bp;

	if (!ctx || afio_ctx_forked(ctx) || pool >= ctx->nbufpools)
		return NULL;
	bp = ctx->bufpools[pool];
	return id < bp->count ? bp->mem + (size_t)id * bp->size : NULL;
}

/* r's result is res bytes in buffer id, the program's at its callback. */
static void finish_with_buf(struct afio_req *r, ssize_t res, uint32_t id)
{
	r->ctx->bufpools[r->mode]->owner[id] = BUF_RESULT;
	r->buf_id = id;
	r->shot |= AFIO_SHOT_HAS_BUF;
	afio_req_finish(r, res);
}

/* A read for r, without waiting, into a free buffer of bp (one must be
   free): n > 0 bytes in buffer *id, taken; else 0 (the end), -EAGAIN or
   -errno, and the buffer is free again. */
static ssize_t recv_free_buf(struct afio_bufpool *bp, const struct afio_req *r, uint32_t *id)
{
	ssize_t n;

	*id = bp->free_ids[--bp->nfree];
	do
		n = recv(r->fd, bp->mem + (size_t)*id * bp->size, bp->size,
			 r->flags | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n > 0)
		return n;
	bp->free_ids[bp->nfree++] = *id;
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	return 0;
}

/* r is ready (its engine said readable): read into a free buffer. */
void afio_recv_into_pool(struct afio_req *r)
{
	struct afio_bufpool *bp = r->ctx->bufpools[r->mode];
	uint32_t id;
	ssize_t n;

	if (!bp->nfree) {
		if (r->shot & AFIO_SHOT_BUF_NOWAIT) {
			afio_req_finish(r, -ENOBUFS);
			return;
		}
		r->state = AFIO_REQ_PARKED;
		afio_reqq_push(&bp->waiters, r);
		return;
	}
	n = recv_free_buf(bp, r, &id);
	if (n > 0)
		finish_with_buf(r, n, id);
	else if (n == -EAGAIN)
		afio_req_requeue(r);
	else
		afio_req_finish(r, n);
}

bool afio_recv_pool_try(struct afio_req *r)
{
	struct afio_bufpool *bp = r->ctx->bufpools[r->mode];
	uint32_t id;
	ssize_t n;

	if (bp->kernel || !bp->nfree)
		return false;
	n = recv_free_buf(bp, r, &id);
	if (n == -EAGAIN)
		return false;
	afio_count_nowait(r->ctx);
	if (n > 0)
		afio_req_done_buf(r, n, id);
	else
		afio_req_done(r, n);
	return true;
}

void afio_req_done_buf(struct afio_req *r, ssize_t res, unsigned id)
{
	afio_req_detach(r);
	finish_with_buf(r, res, id);
}

/* The request waits again in the kernel from this result on: an empty
   ring it meets later is compared with what came back since now. */
void afio_req_shot_buf(struct afio_req *r, ssize_t res, unsigned id)
{
	afio_bufpool_mark(r);
	r->shot |= AFIO_SHOT_ARMED;
	finish_with_buf(r, res, id);
}

void afio_bufpool_deliver(struct afio_req *r)
{
	r->ctx->bufpools[r->mode]->owner[r->buf_id] = BUF_PROGRAM;
}

void afio_bufpool_mark(struct afio_req *r)
{
	r->off = r->ctx->bufpools[r->mode]->returned;
}

/*
 * An attached pool's ring was empty: r waits for a buffer to come back.
 * One may have come back between the kernel's answer and this look at
 * it, and woken no one: r->off holds the count of buffers given back
 * when r began to wait (was queued, or its kernel multishot went on after
 * a result), and a later one sends r again at once.
 */
bool afio_bufpool_park(struct afio_req *r)
{
	struct afio_bufpool *bp = r->ctx->bufpools[r->mode];

	if (r->cancel) {
		afio_req_finish(r, -ECANCELED);
		return true;
	}
	if (!bp->kernel || (r->shot & AFIO_SHOT_BUF_NOWAIT))
		return false;
	if (r->off != bp->returned) {
		afio_req_requeue(r);
		return true;
	}
	r->state = AFIO_REQ_PARKED;
	afio_reqq_push(&bp->waiters, r);
	return true;
}

void afio_bufpool_unpark(struct afio_ctx *ctx, struct afio_req *r)
{
	afio_reqq_remove(&ctx->bufpools[r->mode]->waiters, r);
}

/* The kernel's ring says nothing of who will get a buffer back on it:
   every waiter goes again, and those that find none wait again. */
static void kernel_buffer_back(struct afio_bufpool *bp)
{
	struct afio_req *r;

	bp->returned++;
	while ((r = afio_reqq_pop(&bp->waiters)))
		afio_req_requeue(r);
}

void afio_bufpool_recycled(struct afio_ctx *ctx, unsigned pool)
{
	kernel_buffer_back(ctx->bufpools[pool]);
}

int afio_buf_release(afio_ctx *ctx, unsigned pool, unsigned id)
{
	struct afio_bufpool *bp;
	struct afio_req *r;
	int ret = afio_ctx_check(ctx);

	if (ret)
		return ret;
	if (pool >= ctx->nbufpools || id >= ctx->bufpools[pool]->count)
		return -EINVAL;
	bp = ctx->bufpools[pool];
	if (bp->owner[id] != BUF_PROGRAM)
		return -EALREADY;
	bp->owner[id] = BUF_FREE;
	if (bp->kernel) {
		ctx->primary.ops->pool_return(&ctx->primary, pool, id);
		kernel_buffer_back(bp);
	} else {
		/* A waiter may end without the buffer (the peer closed,
		   nothing was there after all): the next one tries too,
		   while one is free. */
		bp->free_ids[bp->nfree++] = id;
		while (bp->nfree && (r = afio_reqq_pop(&bp->waiters)))
			afio_recv_into_pool(r);
	}
	afio_ctx_kick(ctx);
	return 0;
}
