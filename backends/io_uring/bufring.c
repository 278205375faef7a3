/* SPDX-License-Identifier: MIT */
/*
 * Buffer pools as provided buffer rings (Linux 5.19): the kernel picks a
 * free buffer when data arrives, so a pooled receive is one IORING_OP_RECV
 * with IOSQE_BUFFER_SELECT, no wait for readiness first and no read of
 * our own.  The ring holds the pool's free buffers; a buffer the program
 * gives back goes onto it again.  A kernel without such rings refuses the
 * registration, and the core keeps the pool (lib/bufpool.c).
 */
#include <errno.h>
#include <sys/mman.h>

#include "uring.h"

/* The kernel's limit on a buffer ring's entries. */
#define MAX_RING_BUFS	32768u

static unsigned ring_entries(unsigned count)
{
	unsigned n = 1;

	while (n < count)
		n <<= 1;
	return n;
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
	b->map_len = entries * sizeof(struct io_uring_buf);
	b->br = mmap(NULL, b->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		     -1, 0);
	if (b->br == MAP_FAILED) {
		b->br = NULL;
		return -ENOMEM;
	}
	io_uring_buf_ring_init(b->br);
	reg.ring_addr = (unsigned long)b->br;
	reg.ring_entries = entries;
	reg.bgid = (uint16_t)pool;
	ret = io_uring_register_buf_ring(&u->ring, &reg, 0);
	if (ret) {
		munmap(b->br, b->map_len);
		b->br = NULL;
		return ret;
	}
	b->mem = mem;
	b->size = (unsigned)size;
	b->mask = io_uring_buf_ring_mask(entries);
	for (unsigned id = 0; id < count; id++)
		io_uring_buf_ring_add(b->br, mem + (size_t)id * size, b->size, (uint16_t)id,
				      b->mask, (int)id);
	io_uring_buf_ring_advance(b->br, (int)count);
	u->pbuf_pools |= 1u << pool;
	return 0;
}

static void ring_return(struct uring *u, unsigned pool, unsigned id)
{
	struct uring_bufring *b = &u->bufrings[pool];

	io_uring_buf_ring_add(b->br, b->mem + (size_t)id * b->size, b->size, (uint16_t)id,
			      b->mask, 0);
	io_uring_buf_ring_advance(b->br, 1);
}

void uring_pool_return(struct afio_engine *e, unsigned pool, unsigned id)
{
	ring_return(e->priv, pool, id);
}

/* The CQE of a pooled receive that took a buffer: the bytes, or, where
   there are none to give, the buffer back onto the ring. */
void uring_pooled_cqe(struct uring *u, struct afio_req *r, ssize_t res, unsigned id)
{
	release_slot(u, r);
	if (res > 0) {
		afio_req_done_buf(r, res, id);
		return;
	}
	ring_return(u, r->mode, id);
	afio_bufpool_recycled(r->ctx, r->mode);
	afio_req_done(r, res);
}

/* After the ring is gone: the kernel no longer reads the rings. */
void uring_bufrings_free(struct uring *u)
{
	for (unsigned i = 0; i < AFIO_MAX_BUFPOOLS; i++)
		if (u->bufrings[i].br)
			munmap(u->bufrings[i].br, u->bufrings[i].map_len);
}
