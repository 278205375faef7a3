/* SPDX-License-Identifier: MIT */
/*
 * asyncfio.h on its own, the first include of a program built as strict
 * C11 without _GNU_SOURCE: it brings what its prototypes need and only
 * declares struct open_how and struct statx, so that the program's own
 * <linux/stat.h> (glibc's <sys/stat.h> has it only for _GNU_SOURCE) and
 * <linux/openat2.h> after it define them once.
 */
#include "asyncfio.h"

#if defined(_SYS_STAT_H) || defined(STATX_BASIC_STATS)
#error "asyncfio.h pulls in <sys/stat.h>: it should only declare struct statx"
#endif
#ifdef RESOLVE_BENEATH
#error "asyncfio.h pulls in <linux/openat2.h>: it should only declare struct open_how"
#endif

/* Every 0.2 prototype's types are known here, before any other include. */
typedef void (*any_fn)(void);
static const any_fn ops_02[] = {
	(any_fn)afio_accept, (any_fn)afio_connect, (any_fn)afio_sendmsg,
	(any_fn)afio_recvmsg, (any_fn)afio_sendfile, (any_fn)afio_timeout,
	(any_fn)afio_openat, (any_fn)afio_openat2, (any_fn)afio_close,
	(any_fn)afio_statx, (any_fn)afio_readv2, (any_fn)afio_writev2,
	(any_fn)afio_fallocate, (any_fn)afio_ftruncate, (any_fn)afio_sync_range,
	(any_fn)afio_renameat, (any_fn)afio_unlinkat, (any_fn)afio_mkdirat,
	(any_fn)afio_dio_align, (any_fn)afio_op_count, (any_fn)afio_op_name,
	(any_fn)afio_op_native,
};

#include <errno.h>
#include <linux/openat2.h>
#include <linux/stat.h>
#include <stdio.h>
#include <sys/stat.h>

static void on_done(void *data, ssize_t res)
{
	*(ssize_t *)data = res;
}

/* The structs the header only declared, now defined by the system's
   headers, go to the library as they are; calls refused at once. */
int main(void)
{
	struct open_how how = { .flags = 0 };
	struct sockaddr_storage ss;
	struct iovec iov = { &ss, 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct statx stx;
	ssize_t res = 1;
	afio_ctx *ctx;
	int bad = 0;

	for (size_t i = 0; i < sizeof(ops_02) / sizeof(ops_02[0]); i++)
		bad += !ops_02[i];
	if (afio_create(&ctx, NULL))
		return 1;
	bad += afio_openat2(ctx, -1, "x", &how, on_done, &res) != -EBADF;
	bad += afio_statx(ctx, -1, "x", 0, STATX_SIZE, &stx, on_done, &res) != -EBADF;
	bad += afio_recvmsg(ctx, -1, &msg, 0, on_done, &res) != -EBADF;
	bad += afio_connect(ctx, -1, (struct sockaddr *)&ss, sizeof(ss), on_done, &res) != -EBADF;
	afio_destroy(ctx);
	printf("asyncfio.h: %u ops, %d calls not refused as expected\n", afio_op_count(), bad);
	return bad || res != 1;
}
