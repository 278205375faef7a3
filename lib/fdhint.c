/* SPDX-License-Identifier: MIT */
/*
 * What the program said about its fds (afio_fd_hint()), and the per-call
 * memo that answers a submit call's question "is this fd O_DIRECT, and
 * what alignment does it need?" from the hint or from the kernel.
 *
 * Without a hint the answer is asked once per fd in a row within one
 * submit call and kept nowhere longer (struct afio_fd_memo).  A hint is
 * the program's promise that the answer holds until it drops the hint,
 * so it is checked once, when given.  A wrong one (the fd closed and its
 * number reused without afio_close()) routes a request as if the flag
 * were the hinted one: a buffered read handed to the kernel as direct
 * I/O is done inside io_submit(), a direct read tried as buffered waits
 * for the device in the caller; either way the kernel does the I/O the
 * fd asks for, so data stay right and only the promise not to wait is
 * broken.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"

/* Room for fd, in steps that double. */
static int grow(struct afio_fd_hints *h, int fd)
{
	unsigned n = h->n ? h->n : 64;
	struct afio_fd_hint *by_fd;

	while (n <= (unsigned)fd)
		n *= 2;
	by_fd = realloc(h->by_fd, n * sizeof(*by_fd));
	if (!by_fd)
		return -ENOMEM;
	memset(by_fd + h->n, 0, (n - h->n) * sizeof(*by_fd));
	h->by_fd = by_fd;
	h->n = n;
	return 0;
}

static void drop(struct afio_fd_hints *h, int fd)
{
	if ((unsigned)fd < h->n)
		h->by_fd[fd].hint = 0;
}

int afio_fd_hint(afio_ctx *ctx, int fd, unsigned hint)
{
	struct afio_fd_hints *h;
	struct afio_dio_facts dio;
	int ret, fl, dio_ret = 0;

	ret = afio_ctx_check(ctx);
	if (ret)
		return ret;
	if (fd < 0)
		return -EBADF;
	if (hint & ~(AFIO_FD_BUFFERED | AFIO_FD_DIRECT) ||
	    hint == (AFIO_FD_BUFFERED | AFIO_FD_DIRECT))
		return -EINVAL;
	h = &ctx->hints;
	if (!hint) {
		drop(h, fd);
		return 0;
	}
	fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return -errno;
	if (!!(fl & O_DIRECT) != (hint == AFIO_FD_DIRECT))
		return -EINVAL;
	memset(&dio, 0, sizeof(dio));
	if (hint == AFIO_FD_DIRECT) {
		/* -EOPNOTSUPP is an answer too: such a file's requests go to
		   the pool, as without the hint. */
		dio_ret = afio_dio_facts(fd, &h->lbs, &dio);
		if (dio_ret && dio_ret != -EOPNOTSUPP)
			return dio_ret;
	}
	if ((unsigned)fd >= h->n) {
		ret = grow(h, fd);
		if (ret)
			return ret;
	}
	h->by_fd[fd] = (struct afio_fd_hint){
		.hint = (uint8_t)hint,
		.dio_ok = !dio_ret,
		.from_statx = dio.from_statx,
		.mem = dio.mem,
		.off = dio.off,
	};
	return 0;
}

void afio_fd_hint_closed(struct afio_ctx *ctx, int fd)
{
	drop(&ctx->hints, fd);
}

void afio_fd_hints_free(struct afio_ctx *ctx)
{
	free(ctx->hints.by_fd);
	memset(&ctx->hints, 0, sizeof(ctx->hints));
}

void afio_fd_memo_init(struct afio_fd_memo *m, const struct afio_engine *e)
{
	m->fd = -1;
	m->hints = &e->ctx->hints;
}

/* The hint's answers in place of fcntl's and statx's; the file's size,
   which a write may change, is not kept. */
static void memo_from_hint(struct afio_fd_memo *m, const struct afio_fd_hint *fh)
{
	if (fh->hint == AFIO_FD_BUFFERED) {
		m->fl = 0;
		return;
	}
	m->fl = O_DIRECT;
	m->dio_ret = fh->dio_ok ? 0 : -EOPNOTSUPP;
	m->dio = (struct afio_dio_facts){
		.mem = fh->mem,
		.off = fh->off,
		.from_statx = fh->from_statx,
		.size_unknown = true,
	};
}

/* A new fd for the memo: its answers unknown. */
static bool memo_new_fd(struct afio_fd_memo *m, int fd)
{
	if (fd == m->fd)
		return false;
	m->fd = fd;
	m->dio_ret = 1;
	m->positional = AFIO_FD_POSITIONS_UNKNOWN;
	return true;
}

/* The word stands for the batch's later requests on fd too, as a
   hint's would. */
int afio_fd_memo_promised(struct afio_fd_memo *m, int fd)
{
	if (memo_new_fd(m, fd))
		m->fl = 0;
	return m->fl;
}

int afio_fd_memo_flags(struct afio_fd_memo *m, int fd)
{
	const struct afio_fd_hints *h = m->hints;

	if (!memo_new_fd(m, fd))
		return m->fl;
	if ((unsigned)fd < h->n && h->by_fd[fd].hint) {
		memo_from_hint(m, &h->by_fd[fd]);
		return m->fl;
	}
	m->fl = fcntl(fd, F_GETFL);
	if (m->fl < 0)
		m->fl = -errno;
	return m->fl;
}
