/* SPDX-License-Identifier: MIT */
/*
 * Arguments every call refuses at once, on one backend in one mode (from
 * argv): no context, no callback, NULL pointers, negative fds, flags the
 * library does not take, offsets and lengths out of range.  Nothing is
 * queued and no callback runs.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "asyncfio.h"
#include "testutil.h"

/* Refused at once, with want. */
#define REFUSED(want, call)	tu_expect_eq((call), (want), #call)

START_TEST(test_bad_arguments)
{
	const uint64_t too_far = (uint64_t)INT64_MAX + 1;
	afio_ctx *ctx = tu_new_ctx();
	struct tu_dir dir;
	int file = tu_new_file(0), sv[2], l;
	char buf[8];
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct msghdr no_iov = { .msg_iov = NULL, .msg_iovlen = 1 };
	struct msghdr many = { .msg_iov = &iov, .msg_iovlen = IOV_MAX + 1 };
	struct open_how how = tu_how_of(O_RDONLY, 0, 0);
	struct sockaddr_in addr;
	struct afio_stats st;
	struct tu_done d = { 0 };
	struct statx stx;
	afio_cb cb = tu_on_done;
	int dfd;

	tu_dir_make(&dir);
	dfd = dir.fd;
	tu_socketpair(sv);
	l = tu_tcp_listener(4, false, &addr);

	/* accept */
	REFUSED(-EINVAL, afio_accept(NULL, l, 0, cb, &d));
	REFUSED(-EINVAL, afio_accept(ctx, l, 0, NULL, &d));
	REFUSED(-EBADF, afio_accept(ctx, -1, 0, cb, &d));
	REFUSED(-EINVAL, afio_accept(ctx, l, O_APPEND, cb, &d));
	REFUSED(-EINVAL, afio_accept(ctx, l, SOCK_CLOEXEC | 1, cb, &d));
	REFUSED(-EINVAL, afio_accept(ctx, l, -1, cb, &d));
	/* connect */
	REFUSED(-EINVAL, afio_connect(NULL, sv[0], (struct sockaddr *)&addr, sizeof(addr), cb, &d));
	REFUSED(-EINVAL,
		afio_connect(ctx, sv[0], (struct sockaddr *)&addr, sizeof(addr), NULL, &d));
	REFUSED(-EINVAL, afio_connect(ctx, sv[0], NULL, sizeof(addr), cb, &d));
	REFUSED(-EBADF, afio_connect(ctx, -1, (struct sockaddr *)&addr, sizeof(addr), cb, &d));
	/* sendmsg, recvmsg */
	REFUSED(-EINVAL, afio_sendmsg(NULL, sv[0], &msg, 0, cb, &d));
	REFUSED(-EINVAL, afio_recvmsg(NULL, sv[0], &msg, 0, cb, &d));
	REFUSED(-EINVAL, afio_sendmsg(ctx, sv[0], &msg, 0, NULL, &d));
	REFUSED(-EINVAL, afio_recvmsg(ctx, sv[0], &msg, 0, NULL, &d));
	REFUSED(-EINVAL, afio_sendmsg(ctx, sv[0], NULL, 0, cb, &d));
	REFUSED(-EINVAL, afio_recvmsg(ctx, sv[0], NULL, 0, cb, &d));
	REFUSED(-EBADF, afio_sendmsg(ctx, -1, &msg, 0, cb, &d));
	REFUSED(-EBADF, afio_recvmsg(ctx, -1, &msg, 0, cb, &d));
	REFUSED(-EINVAL, afio_sendmsg(ctx, sv[0], &msg, MSG_DONTWAIT, cb, &d));
	REFUSED(-EINVAL, afio_recvmsg(ctx, sv[0], &msg, MSG_DONTWAIT, cb, &d));
	REFUSED(-EINVAL, afio_sendmsg(ctx, sv[0], &msg, MSG_DONTWAIT | MSG_NOSIGNAL, cb, &d));
	REFUSED(-EINVAL, afio_recvmsg(ctx, sv[0], &msg, MSG_DONTWAIT | MSG_PEEK, cb, &d));
	REFUSED(-EINVAL, afio_sendmsg(ctx, sv[0], &msg, MSG_WAITALL, cb, &d));
	REFUSED(-EINVAL, afio_recvmsg(ctx, sv[0], &msg, MSG_WAITALL, cb, &d));
	REFUSED(-EINVAL, afio_sendmsg(ctx, sv[0], &no_iov, 0, cb, &d));
	REFUSED(-EINVAL, afio_recvmsg(ctx, sv[0], &no_iov, 0, cb, &d));
	REFUSED(-EINVAL, afio_sendmsg(ctx, sv[0], &many, 0, cb, &d));
	REFUSED(-EINVAL, afio_recvmsg(ctx, sv[0], &many, 0, cb, &d));
	/* recv of nothing would read as the end of the stream */
	REFUSED(-EINVAL, afio_recv(ctx, sv[0], buf, 0, 0, cb, &d));
	/* sendfile */
	REFUSED(-EINVAL, afio_sendfile(NULL, sv[0], file, 0, 1, cb, &d));
	REFUSED(-EINVAL, afio_sendfile(ctx, sv[0], file, 0, 1, NULL, &d));
	REFUSED(-EBADF, afio_sendfile(ctx, -1, file, 0, 1, cb, &d));
	REFUSED(-EBADF, afio_sendfile(ctx, sv[0], -1, 0, 1, cb, &d));
	REFUSED(-EINVAL, afio_sendfile(ctx, sv[0], file, too_far, 1, cb, &d));
	REFUSED(-EINVAL, afio_sendfile(ctx, sv[0], file, 0, (size_t)SSIZE_MAX + 1, cb, &d));
	/* timeout */
	REFUSED(-EINVAL, afio_timeout(NULL, 1000, cb, &d));
	REFUSED(-EINVAL, afio_timeout(ctx, 1000, NULL, &d));
	REFUSED(-EINVAL, afio_timeout(ctx, too_far, cb, &d));
	REFUSED(-EINVAL, afio_timeout(ctx, UINT64_MAX, cb, &d));
	/* openat, openat2, close */
	REFUSED(-EINVAL, afio_openat(NULL, dfd, "f", O_RDONLY, 0, cb, &d));
	REFUSED(-EINVAL, afio_openat(ctx, dfd, "f", O_RDONLY, 0, NULL, &d));
	REFUSED(-EINVAL, afio_openat(ctx, dfd, NULL, O_RDONLY, 0, cb, &d));
	REFUSED(-EBADF, afio_openat(ctx, -1, "f", O_RDONLY, 0, cb, &d));
	REFUSED(-EBADF, afio_openat(ctx, -5, "f", O_RDONLY, 0, cb, &d));
	REFUSED(-EINVAL, afio_openat2(NULL, dfd, "f", &how, cb, &d));
	REFUSED(-EINVAL, afio_openat2(ctx, dfd, "f", &how, NULL, &d));
	REFUSED(-EINVAL, afio_openat2(ctx, dfd, NULL, &how, cb, &d));
	REFUSED(-EINVAL, afio_openat2(ctx, dfd, "f", NULL, cb, &d));
	REFUSED(-EBADF, afio_openat2(ctx, -1, "f", &how, cb, &d));
	REFUSED(-EINVAL, afio_close(NULL, file, cb, &d));
	REFUSED(-EINVAL, afio_close(ctx, file, NULL, &d));
	REFUSED(-EBADF, afio_close(ctx, -1, cb, &d));
	/* statx */
	REFUSED(-EINVAL, afio_statx(NULL, dfd, "f", 0, STATX_SIZE, &stx, cb, &d));
	REFUSED(-EINVAL, afio_statx(ctx, dfd, "f", 0, STATX_SIZE, &stx, NULL, &d));
	REFUSED(-EINVAL, afio_statx(ctx, dfd, NULL, 0, STATX_SIZE, &stx, cb, &d));
	REFUSED(-EINVAL, afio_statx(ctx, dfd, "f", 0, STATX_SIZE, NULL, cb, &d));
	REFUSED(-EBADF, afio_statx(ctx, -1, "f", 0, STATX_SIZE, &stx, cb, &d));
	/* readv2, writev2 */
	REFUSED(-EINVAL, afio_readv2(NULL, file, &iov, 1, 0, 0, cb, &d));
	REFUSED(-EINVAL, afio_writev2(NULL, file, &iov, 1, 0, 0, cb, &d));
	REFUSED(-EINVAL, afio_readv2(ctx, file, &iov, 1, 0, 0, NULL, &d));
	REFUSED(-EINVAL, afio_writev2(ctx, file, &iov, 1, 0, 0, NULL, &d));
	REFUSED(-EINVAL, afio_readv2(ctx, file, &iov, 1, 0, RWF_NOWAIT, cb, &d));
	REFUSED(-EINVAL, afio_writev2(ctx, file, &iov, 1, 0, RWF_NOWAIT, cb, &d));
	REFUSED(-EINVAL, afio_readv2(ctx, file, &iov, 1, 0, RWF_NOWAIT | RWF_HIPRI, cb, &d));
	REFUSED(-EINVAL, afio_writev2(ctx, file, &iov, 1, 0, RWF_NOWAIT | RWF_DSYNC, cb, &d));
	REFUSED(-EINVAL, afio_readv2(ctx, file, NULL, 1, 0, 0, cb, &d));
	REFUSED(-EINVAL, afio_writev2(ctx, file, NULL, 1, 0, 0, cb, &d));
	REFUSED(-EINVAL, afio_readv2(ctx, file, &iov, -1, 0, 0, cb, &d));
	REFUSED(-EINVAL, afio_writev2(ctx, file, &iov, IOV_MAX + 1, 0, 0, cb, &d));
	REFUSED(-EBADF, afio_readv2(ctx, -1, &iov, 1, 0, 0, cb, &d));
	REFUSED(-EBADF, afio_writev2(ctx, -1, &iov, 1, 0, 0, cb, &d));
	REFUSED(-EINVAL, afio_readv2(ctx, file, &iov, 1, too_far, 0, cb, &d));
	REFUSED(-EINVAL, afio_writev2(ctx, file, &iov, 1, UINT64_MAX, 0, cb, &d));
	/* fallocate, ftruncate, sync_range */
	REFUSED(-EINVAL, afio_fallocate(NULL, file, 0, 0, 1, cb, &d));
	REFUSED(-EINVAL, afio_fallocate(ctx, file, 0, 0, 1, NULL, &d));
	REFUSED(-EBADF, afio_fallocate(ctx, -1, 0, 0, 1, cb, &d));
	REFUSED(-EINVAL, afio_fallocate(ctx, file, 0, too_far, 1, cb, &d));
	REFUSED(-EINVAL, afio_fallocate(ctx, file, 0, 0, too_far, cb, &d));
	REFUSED(-EINVAL, afio_ftruncate(NULL, file, 1, cb, &d));
	REFUSED(-EINVAL, afio_ftruncate(ctx, file, 1, NULL, &d));
	REFUSED(-EBADF, afio_ftruncate(ctx, -1, 1, cb, &d));
	REFUSED(-EINVAL, afio_ftruncate(ctx, file, too_far, cb, &d));
	REFUSED(-EINVAL, afio_sync_range(NULL, file, 0, 0, 0, cb, &d));
	REFUSED(-EINVAL, afio_sync_range(ctx, file, 0, 0, 0, NULL, &d));
	REFUSED(-EBADF, afio_sync_range(ctx, -1, 0, 0, 0, cb, &d));
	REFUSED(-EINVAL, afio_sync_range(ctx, file, too_far, 0, 0, cb, &d));
	REFUSED(-EINVAL, afio_sync_range(ctx, file, 0, too_far, 0, cb, &d));
	/* renameat, unlinkat, mkdirat */
	REFUSED(-EINVAL, afio_renameat(NULL, dfd, "a", dfd, "b", 0, cb, &d));
	REFUSED(-EINVAL, afio_renameat(ctx, dfd, "a", dfd, "b", 0, NULL, &d));
	REFUSED(-EINVAL, afio_renameat(ctx, dfd, NULL, dfd, "b", 0, cb, &d));
	REFUSED(-EINVAL, afio_renameat(ctx, dfd, "a", dfd, NULL, 0, cb, &d));
	REFUSED(-EBADF, afio_renameat(ctx, -1, "a", dfd, "b", 0, cb, &d));
	REFUSED(-EBADF, afio_renameat(ctx, dfd, "a", -1, "b", 0, cb, &d));
	REFUSED(-EINVAL, afio_unlinkat(NULL, dfd, "a", 0, cb, &d));
	REFUSED(-EINVAL, afio_unlinkat(ctx, dfd, "a", 0, NULL, &d));
	REFUSED(-EINVAL, afio_unlinkat(ctx, dfd, NULL, 0, cb, &d));
	REFUSED(-EBADF, afio_unlinkat(ctx, -1, "a", 0, cb, &d));
	REFUSED(-EINVAL, afio_mkdirat(NULL, dfd, "a", 0700, cb, &d));
	REFUSED(-EINVAL, afio_mkdirat(ctx, dfd, "a", 0700, NULL, &d));
	REFUSED(-EINVAL, afio_mkdirat(ctx, dfd, NULL, 0700, cb, &d));
	REFUSED(-EBADF, afio_mkdirat(ctx, -1, "a", 0700, cb, &d));
	/* the op table */
	REFUSED(-EINVAL, afio_op_native(NULL, 0, NULL, 0));
	REFUSED(-EINVAL, afio_op_native(ctx, afio_op_count(), NULL, 0));
	REFUSED(-EINVAL, afio_op_native(ctx, UINT_MAX, NULL, 0));

	/* Refused at once: nothing was queued, no callback will run. */
	ck_assert_int_eq(afio_poll(ctx, 0, 0), 0);
	ck_assert_int_eq(d.calls, 0);
	ck_assert_int_eq(afio_stats(ctx, &st), 0);
	ck_assert_int_eq(st.submitted, 0);
	ck_assert(!tu_exists_at(dfd, "a") && !tu_exists_at(dfd, "b"));
	afio_destroy(ctx);
	close(l);
	close(sv[0]);
	close(sv[1]);
	close(file);
	tu_dir_remove(&dir);
}
END_TEST

static Suite *args_suite(void)
{
	Suite *s = suite_create("args");
	TCase *arguments = tu_tcase(s, "arguments");

	tcase_add_test(arguments, test_bad_arguments);
	return s;
}

int main(int argc, char **argv)
{
	return tu_main(argc, argv, args_suite);
}
