// SPDX-License-Identifier: MIT
/*
 * The floor of fio-asyncfio.so on io_uring: the library calls the engine
 * makes, written straight on liburing with the ring the library sets up
 * (the same setup flags and ring sizes), and nothing else: no checks, no
 * queue, no routes, no cancel, reads and writes only.  build.sh links it
 * with the unchanged engine into fio-asyncfio-floor.so, and bench.py's
 * "floor" pair runs that against fio's own io_uring engine.
 *
 * What the engine on the library costs over fio's io_uring engine is then
 * two parts: the floor over fio's engine (the engine's own work for fio,
 * the ring's flags) and the library over the floor.  Not a backend and not
 * a test double: nothing here is ever used to run I/O for anyone.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <liburing.h>

#include "asyncfio.h"

/* The library's flags on this kernel (afio_describe() of an io_uring
   context); a kernel without one refuses the setup, and the floor with it. */
#define FLOOR_SETUP_FLAGS	(IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL | \
				 IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG)

struct floor_slot {
	afio_cb cb;
	void *data;
};

struct afio_ctx {
	struct io_uring ring;
	struct floor_slot *slots;
	unsigned *free_ids;
	unsigned nfree;
};

void afio_config_init_sized(struct afio_config *cfg, size_t size)
{
	memset(cfg, 0, size);
	cfg->entries = 256;
}

/* The library's sizes: an SQ of up to 256, a CQ with room for every
   request and 40 more (its cancels' and a spare). */
static unsigned sq_entries(unsigned entries)
{
	return entries < 256 ? entries : 256;
}

static unsigned cq_entries(unsigned entries)
{
	unsigned n = 2 * sq_entries(entries);

	while (n < entries + 40)
		n *= 2;
	return n;
}

int afio_create(afio_ctx **out, const struct afio_config *cfg)
{
	struct io_uring_params p = { .flags = FLOOR_SETUP_FLAGS };
	unsigned n = cfg->entries ? cfg->entries : 256;
	afio_ctx *ctx = calloc(1, sizeof(*ctx));
	int ret;

	if (!ctx)
		return -ENOMEM;
	p.cq_entries = cq_entries(n);
	ret = io_uring_queue_init_params(sq_entries(n), &ctx->ring, &p);
	if (ret) {
		free(ctx);
		return ret;
	}
	ctx->slots = calloc(n, sizeof(*ctx->slots));
	ctx->free_ids = calloc(n, sizeof(*ctx->free_ids));
	if (!ctx->slots || !ctx->free_ids) {
		afio_destroy(ctx);
		return -ENOMEM;
	}
	while (ctx->nfree < n) {
		ctx->free_ids[ctx->nfree] = n - 1 - ctx->nfree;
		ctx->nfree++;
	}
	*out = ctx;
	return 0;
}

void afio_destroy(afio_ctx *ctx)
{
	/* The engine's cleanup comes after fio reaped everything. */
	io_uring_queue_exit(&ctx->ring);
	free(ctx->slots);
	free(ctx->free_ids);
	free(ctx);
}

static int queue_rw(afio_ctx *ctx, int opcode, int fd, const void *buf, size_t len,
		    uint64_t off, afio_cb cb, void *data)
{
	struct io_uring_sqe *sqe;
	unsigned id;

	if (!ctx->nfree)
		return -EAGAIN;
	sqe = io_uring_get_sqe(&ctx->ring);
	if (!sqe)
		return -EAGAIN;
	id = ctx->free_ids[--ctx->nfree];
	ctx->slots[id].cb = cb;
	ctx->slots[id].data = data;
	io_uring_prep_rw(opcode, sqe, fd, buf, (unsigned)len, off);
	io_uring_sqe_set_data64(sqe, id);
	return 0;
}

int afio_read(afio_ctx *ctx, int fd, void *buf, size_t len, uint64_t off, afio_cb cb, void *data)
{
	return queue_rw(ctx, IORING_OP_READ, fd, buf, len, off, cb, data);
}

int afio_write(afio_ctx *ctx, int fd, const void *buf, size_t len, uint64_t off, afio_cb cb,
	       void *data)
{
	return queue_rw(ctx, IORING_OP_WRITE, fd, buf, len, off, cb, data);
}

int afio_submit(afio_ctx *ctx)
{
	return io_uring_submit(&ctx->ring);
}

static unsigned run_cqes(afio_ctx *ctx)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;

	io_uring_for_each_cqe(&ctx->ring, head, cqe) {
		struct floor_slot s = ctx->slots[cqe->user_data];

		ctx->free_ids[ctx->nfree++] = (unsigned)cqe->user_data;
		n++;
		s.cb(s.data, cqe->res);
	}
	io_uring_cq_advance(&ctx->ring, n);
	return n;
}

int afio_poll(afio_ctx *ctx, unsigned min_complete, int timeout_ms)
{
	struct io_uring_cqe *cqe;
	unsigned ran = 0;
	int ret;

	for (;;) {
		ret = io_uring_submit(&ctx->ring);
		if (ret < 0)
			return ret;
		ran += run_cqes(ctx);
		if (ran >= min_complete || !timeout_ms)
			return (int)ran;
		/* fio's getevents waits without a limit here */
		ret = io_uring_wait_cqe(&ctx->ring, &cqe);
		if (ret < 0 && ret != -EINTR)
			return ret;
	}
}

/* What the engine calls besides: no fsync, sync_file_range or trim. */
int afio_fsync(afio_ctx *ctx, int fd, unsigned flags, afio_cb cb, void *data)
{
	(void)ctx, (void)fd, (void)flags, (void)cb, (void)data;
	return -EOPNOTSUPP;
}

int afio_sync_range(afio_ctx *ctx, int fd, uint64_t off, uint64_t len, unsigned flags,
		    afio_cb cb, void *data)
{
	(void)ctx, (void)fd, (void)off, (void)len, (void)flags, (void)cb, (void)data;
	return -EOPNOTSUPP;
}

int afio_fallocate(afio_ctx *ctx, int fd, int mode, uint64_t off, uint64_t len, afio_cb cb,
		   void *data)
{
	(void)ctx, (void)fd, (void)mode, (void)off, (void)len, (void)cb, (void)data;
	return -EOPNOTSUPP;
}

int afio_cancel(afio_ctx *ctx, void *data)
{
	(void)ctx, (void)data;
	return -ENOENT;
}

int afio_fd_hint(afio_ctx *ctx, int fd, unsigned hint)
{
	(void)ctx, (void)fd, (void)hint;
	return 0;
}

int afio_describe(const afio_ctx *ctx, char *buf, size_t len)
{
	(void)ctx;
	return snprintf(buf, len, "floor: bare liburing, the library's ring flags, no library");
}

int afio_probe(enum afio_backend b, char *reason, size_t len)
{
	(void)b, (void)reason, (void)len;
	return 1;
}

const char *afio_backend_name(enum afio_backend b)
{
	(void)b;
	return "floor";
}

const char *afio_mode_name(enum afio_mode m)
{
	(void)m;
	return "floor";
}

enum afio_backend afio_backend(const afio_ctx *ctx)
{
	(void)ctx;
	return AFIO_BACKEND_IO_URING;
}

enum afio_mode afio_mode(const afio_ctx *ctx)
{
	(void)ctx;
	return AFIO_MODE_INLINE;
}
