/* SPDX-License-Identifier: MIT */
/*
 * Buffer pools as provided buffer rings (Linux 5.19): the kernel picks a
 * free buffer when data arrives, so a pooled receive is one IORING_OP_RECV
 * with IOSQE_BUFFER_SELECT, no wait for readiness first and no read of
 * our own.  The ring holds free buffers of the pool; a buffer the program
 * gives back goes onto it again, or waits as a spare (below).  A kernel
 * without such rings refuses the registration, and the core keeps the
 * pool (lib/bufpool.c).
 *
 * The kernel takes buffers from the ring's head and the program's come
 * back at its tail: with every free buffer on the ring, traffic would
 * rotate through them all, and each page of the pool would stay resident
 * however few buffers are ever in use at once.  So the ring holds only
 * `depth` of them; the rest wait on a stack, the latest given back on
 * top, and go onto the ring as the kernel takes from it.  A ring the
 * kernel found empty while spares waited was too shallow for the traffic:
 * it is made twice as deep, so that depth follows the most buffers taken
 * between two reaps, and what the pool keeps resident with it.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "uring.h"

/* The kernel's limit on a buffer ring's entries. */
#define MAX_RING_BUFS	32768u
/* Buffers on the ring to start with. */
#define START_DEPTH	16u

static unsigned ring_entries(unsigned count)
{
	unsigned n = 1;

	while (n < count)
		n <<= 1;
	return n;
}

static void ring_add(struct uring_bufring *b, unsigned id)
{
	io_uring_buf_ring_add(b->br, b->mem + (size_t)id * b->size, b->size, (uint16_t)id,
			      b->mask, 0);
	io_uring_buf_ring_advance(b->br, 1);
	b->on_ring++;
}

/* Spares onto the ring up to its depth; each is a buffer back for what
   waits for one (afio_bufpool_recycled()). */
static void top_up(struct uring *u, struct afio_ctx *ctx, unsigned pool)
{
	struct uring_bufring *b = &u->bufrings[pool];

	while (b->on_ring < b->depth && b->nspare) {
		ring_add(b, b->spare[--b->nspare]);
		afio_bufpool_recycled(ctx, pool);
	}
}

int uring_pool_attach(struct afio_engine *e, unsigned pool, char *mem, unsigned count,
		      size_t size)
{
	struct uring *u = e->priv;
	struct uring_bufring *b = &u->bufrings[pool];
	struct io_uring_buf_reg reg = { 0 };
	unsigned entries;
	int ret;

	if (count > MAX_RING_BUFS || size > UINT32_MAX)
		return -EINVAL;
	entries = ring_entries(count);
	b->spare = malloc(count * sizeof(*b->spare));
	if (!b->spare)
		return -ENOMEM;
	b->map_len = entries * sizeof(struct io_uring_buf);
	b->br = mmap(NULL, b->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		     -1, 0);
	if (b->br == MAP_FAILED) {
		b->br = NULL;
		free(b->spare);
		b->spare = NULL;
		return -ENOMEM;
	}
	io_uring_buf_ring_init(b->br);
	reg.ring_addr = (unsigned long)b->br;
	reg.ring_entries = entries;
	reg.bgid = (uint16_t)pool;
	ret = io_uring_register_buf_ring(&u->ring, &reg, 0);
	if (ret) {
		/* Nothing kept: the pool is the core's (a kernel before 5.19),
		   and destroy frees what a ring left. */
		munmap(b->br, b->map_len);
		b->br = NULL;
		free(b->spare);
		b->spare = NULL;
		return ret;
	}
	b->mem = mem;
	b->size = (unsigned)size;
	b->mask = io_uring_buf_ring_mask(entries);
	b->count = count;
	b->depth = count < START_DEPTH ? count : START_DEPTH;
	/* The lowest ids first, onto the ring and then on top of the stack. */
	for (unsigned id = count; id-- > b->depth;)
		b->spare[b->nspare++] = id;
	for (unsigned id = 0; id < b->depth; id++)
		ring_add(b, id);
	u->pbuf_pools |= 1u << pool;
	return 0;
}

/* A buffer free again: onto the ring while it is short, else a spare. */
static void ring_return(struct uring *u, unsigned pool, unsigned id)
{
	struct uring_bufring *b = &u->bufrings[pool];

	if (b->on_ring < b->depth)
		ring_add(b, id);
	else
		b->spare[b->nspare++] = id;
}

void uring_pool_return(struct afio_engine *e, unsigned pool, unsigned id)
{
	ring_return(e->priv, pool, id);
}

/* The kernel took a buffer of r's pool off the ring. */
static void ring_took(struct uring *u, const struct afio_req *r)
{
	u->bufrings[r->mode].on_ring--;
	top_up(u, r->ctx, r->mode);
}

/* r found the ring empty: true when spares went onto it, so that r can
   go again at once. */
bool uring_pool_ran_dry(struct uring *u, const struct afio_req *r)
{
	struct uring_bufring *b = &u->bufrings[r->mode];

	if (!b->nspare)
		return false;
	b->depth = 2 * b->depth < b->count ? 2 * b->depth : b->count;
	top_up(u, r->ctx, r->mode);
	return true;
}

/* The CQE of a pooled receive that took a buffer: the bytes, or, where
   there are none to give, the buffer back onto the ring. */
void uring_pooled_cqe(struct uring *u, struct afio_req *r, ssize_t res, unsigned id)
{
	ring_took(u, r);
	release_slot(u, r);
	if (res > 0) {
		afio_req_done_buf(r, res, id);
		return;
	}
	ring_return(u, r->mode, id);
	afio_bufpool_recycled(r->ctx, r->mode);
	afio_req_done(r, res);
}

/* A result of the kernel's own multishot receive, which goes on. */
void uring_pooled_shot(struct uring *u, struct afio_req *r, ssize_t res, unsigned id)
{
	ring_took(u, r);
	afio_req_shot_buf(r, res, id);
}

/* After the ring is gone: the kernel no longer reads the rings. */
void uring_bufrings_free(struct uring *u)
{
	for (unsigned i = 0; i < AFIO_MAX_BUFPOOLS; i++) {
		if (u->bufrings[i].br)
			munmap(u->bufrings[i].br, u->bufrings[i].map_len);
		free(u->bufrings[i].spare);
	}
}
