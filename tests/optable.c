/* SPDX-License-Identifier: MIT */
/*
 * The op table on one backend in one mode (from argv): every op named
 * once, afio_op_native() answering on one line within the buffer, and
 * stats.fallbacks moving by exactly what afio_op_native() said for one
 * successful request of each op.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <linux/openat2.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "asyncfio.h"
#include "testutil.h"

/* Every call that queues a request, by its op's name: afio_readv2 and
   afio_writev2 queue readv and writev (afio_op_native(3)). */
static const char *const every_op[] = {
	"read", "write", "readv", "writev", "fsync", "recv", "send",
	"accept", "connect", "sendmsg", "recvmsg", "sendfile", "timeout",
	"openat", "openat2", "close", "statx",
	"fallocate", "ftruncate", "sync_range", "renameat", "unlinkat", "mkdirat", "nop",
};
#define N_OPS (sizeof(every_op) / sizeof(every_op[0]))

START_TEST(test_op_names)
{
	unsigned n = afio_op_count();

	for (unsigned op = 0; op < n; op++) {
		const char *name = afio_op_name(op);

		ck_assert_msg(name && *name, "op %u has no name", op);
		ck_assert_msg(strncmp(name, "afio_", 5), "op %u is named %s, without afio_", op,
			      name);
		for (unsigned other = 0; other < op; other++)
			ck_assert_msg(strcmp(name, afio_op_name(other)),
				      "ops %u and %u are both %s", other, op, name);
	}
	for (size_t i = 0; i < N_OPS; i++)
		ck_assert_msg(tu_op_number(every_op[i]) >= 0, "afio_%s is not in the op table",
			      every_op[i]);
	ck_assert_uint_ge(n, N_OPS);
	ck_assert_ptr_null(afio_op_name(n));
	ck_assert_ptr_null(afio_op_name(UINT_MAX));
}
END_TEST

/* One line, within len, terminated, the same answer without a buffer. */
START_TEST(test_op_native_how)
{
	afio_ctx *ctx = tu_new_ctx();

	for (unsigned op = 0; op < afio_op_count(); op++) {
		char how[256], small[12];
		int native;

		memset(how, 'x', sizeof(how));
		native = afio_op_native(ctx, op, how, sizeof(how));
		ck_assert_msg(native == 0 || native == 1, "afio_op_native(%s) on %s: %s",
			      afio_op_name(op), tu_target_name(), tu_res_str(native));
		ck_assert_msg(memchr(how, '\0', sizeof(how)), "how of %s is not terminated",
			      afio_op_name(op));
		ck_assert_msg(*how, "afio_op_native(%s) on %s says nothing on how",
			      afio_op_name(op), tu_target_name());
		ck_assert_msg(!strchr(how, '\n'), "how of %s is more than one line: %s",
			      afio_op_name(op), how);
		ck_assert_int_eq(afio_op_native(ctx, op, NULL, 0), native);
		ck_assert_int_eq(afio_op_native(ctx, op, NULL, 100), native);
		/* Cut short, terminated, nothing written past len. */
		memset(small, 'x', sizeof(small));
		ck_assert_int_eq(afio_op_native(ctx, op, small, 8), native);
		ck_assert_msg(memchr(small, '\0', 8), "a short how of %s is not terminated",
			      afio_op_name(op));
		ck_assert(!strncmp(small, how, strlen(small)));
		ck_assert(small[8] == 'x' && small[11] == 'x');
		memset(small, 'x', sizeof(small));
		ck_assert_int_eq(afio_op_native(ctx, op, small, 0), native);
		ck_assert(small[0] == 'x');
	}
	afio_destroy(ctx);
}
END_TEST

/* The threads backend is the pool: nothing is handed on. */
START_TEST(test_threads_all_native)
{
	afio_ctx *ctx;

	if (tu_backend != AFIO_BACKEND_THREADS)
		return;
	ctx = tu_new_ctx();
	for (unsigned op = 0; op < afio_op_count(); op++)
		ck_assert_msg(afio_op_native(ctx, op, NULL, 0) == 1,
			      "threads says it hands %s to the pool", afio_op_name(op));
	afio_destroy(ctx);
}
END_TEST

/*
 * What one successful request of each op needs: the case each backend
 * names as native (O_NONBLOCK sockets, an aligned O_DIRECT file).  A
 * blocking socket's accept or a buffered read may go to the pool where
 * afio_op_native()'s line says so.
 */
struct fixture {
	struct tu_dir dir;
	int file;		/* 64 KiB, buffered */
	int direct;		/* 64 KiB, O_DIRECT where the file system has it */
	unsigned char *buf;	/* aligned for direct I/O */
	size_t blk;
	int sv[2];
	int listener;
	struct sockaddr_in addr;
};

static void fixture_make(struct fixture *f)
{
	unsigned char *bytes = tu_random_bytes(65536, 77);
	size_t mem = 4096;

	tu_dir_make(&f->dir);
	tu_put_file(f->dir.fd, "f", "fixture");
	f->file = tu_data_file(bytes, 65536);
	f->direct = tu_tmpfile(O_DIRECT);
	f->blk = f->direct >= 0 ? tu_direct_block(f->direct, &mem) : 0;
	if (!f->blk) {
		/* No direct I/O here: buffered, and libaio's reads go to the
		   pool, which the comparison below then reports. */
		if (f->direct >= 0)
			close(f->direct);
		f->direct = tu_data_file(bytes, 65536);
		f->blk = 4096;
	}
	ck_assert_int_eq(ftruncate(f->direct, 65536), 0);
	f->buf = aligned_alloc(mem, f->blk);
	ck_assert_ptr_nonnull(f->buf);
	memset(f->buf, 'b', f->blk);
	tu_socketpair(f->sv);
	tu_set_nonblock(f->sv[0], true);
	tu_set_nonblock(f->sv[1], true);
	f->listener = tu_tcp_listener(8, true, &f->addr);
	free(bytes);
}

static void fixture_remove(struct fixture *f)
{
	close(f->file);
	close(f->direct);
	free(f->buf);
	close(f->sv[0]);
	close(f->sv[1]);
	close(f->listener);
	tu_dir_remove(&f->dir);
}

static void drain(int fd, size_t len)
{
	char buf[256];

	ck_assert(len <= sizeof(buf));
	ck_assert(tu_wait_readable(fd));
	ck_assert_int_eq(read(fd, buf, len), len);
}

static unsigned run_read(afio_ctx *ctx, struct fixture *f)
{
	TU_EXPECT(ctx, f->blk, afio_read(ctx, f->direct, f->buf, f->blk, 0, tu_on_done, &d));
	return 1;
}

static unsigned run_write(afio_ctx *ctx, struct fixture *f)
{
	TU_EXPECT(ctx, f->blk, afio_write(ctx, f->direct, f->buf, f->blk, f->blk, tu_on_done, &d));
	return 1;
}

/* afio_readv and afio_readv2 both queue the op readv; likewise writev. */
static unsigned run_readv(afio_ctx *ctx, struct fixture *f)
{
	struct iovec iov = { f->buf, f->blk };

	TU_EXPECT(ctx, f->blk, afio_readv(ctx, f->direct, &iov, 1, 0, tu_on_done, &d));
	TU_EXPECT(ctx, f->blk, afio_readv2(ctx, f->direct, &iov, 1, 0, RWF_HIPRI, tu_on_done, &d));
	return 2;
}

static unsigned run_writev(afio_ctx *ctx, struct fixture *f)
{
	struct iovec iov = { f->buf, f->blk };

	TU_EXPECT(ctx, f->blk, afio_writev(ctx, f->direct, &iov, 1, f->blk, tu_on_done, &d));
	TU_EXPECT(ctx, f->blk, afio_writev2(ctx, f->direct, &iov, 1, f->blk, RWF_DSYNC, tu_on_done,
					    &d));
	return 2;
}

static unsigned run_fsync(afio_ctx *ctx, struct fixture *f)
{
	TU_EXPECT(ctx, 0, afio_fsync(ctx, f->file, 0, tu_on_done, &d));
	return 1;
}

static unsigned run_recv(afio_ctx *ctx, struct fixture *f)
{
	char c;

	ck_assert_int_eq(write(f->sv[0], "r", 1), 1);
	TU_EXPECT(ctx, 1, afio_recv(ctx, f->sv[1], &c, 1, 0, tu_on_done, &d));
	return 1;
}

static unsigned run_send(afio_ctx *ctx, struct fixture *f)
{
	TU_EXPECT(ctx, 1, afio_send(ctx, f->sv[0], "s", 1, 0, tu_on_done, &d));
	drain(f->sv[1], 1);
	return 1;
}

static unsigned run_recvmsg(afio_ctx *ctx, struct fixture *f)
{
	char c;
	struct iovec iov = { &c, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	ck_assert_int_eq(write(f->sv[0], "r", 1), 1);
	TU_EXPECT(ctx, 1, afio_recvmsg(ctx, f->sv[1], &m, 0, tu_on_done, &d));
	return 1;
}

static unsigned run_sendmsg(afio_ctx *ctx, struct fixture *f)
{
	struct iovec iov = { "m", 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	TU_EXPECT(ctx, 1, afio_sendmsg(ctx, f->sv[0], &m, 0, tu_on_done, &d));
	drain(f->sv[1], 1);
	return 1;
}

static unsigned run_accept(afio_ctx *ctx, struct fixture *f)
{
	int c = tu_tcp_socket(false);

	tu_connect_to(c, &f->addr);
	close(TU_RUN_FD(ctx, afio_accept(ctx, f->listener, SOCK_CLOEXEC, tu_on_done, &d)));
	close(c);
	return 1;
}

static unsigned run_connect(afio_ctx *ctx, struct fixture *f)
{
	int c = tu_tcp_socket(true);

	TU_EXPECT(ctx, 0, afio_connect(ctx, c, (struct sockaddr *)&f->addr, sizeof(f->addr),
				       tu_on_done, &d));
	close(tu_accept_now(f->listener));
	close(c);
	return 1;
}

static unsigned run_sendfile(afio_ctx *ctx, struct fixture *f)
{
	static const char fresh[100];
	ssize_t res;

	/* Written again just now, the range is dirty and so in the page cache:
	   where the backend sends only cached ranges itself, a page the
	   machine reclaimed meanwhile would send this one to the pool. */
	ck_assert_int_eq(pwrite(f->file, fresh, sizeof(fresh), 0), (ssize_t)sizeof(fresh));
	res = TU_RUN(ctx, afio_sendfile(ctx, f->sv[0], f->file, 0, 100, tu_on_done, &d));

	ck_assert_msg(res > 0 && res <= 100, "sendfile: %s", tu_res_str(res));
	drain(f->sv[1], (size_t)res);
	return 1;
}

static unsigned run_timeout(afio_ctx *ctx, struct fixture *f)
{
	(void)f;
	TU_EXPECT(ctx, -ETIME, afio_timeout(ctx, 1000, tu_on_done, &d));
	return 1;
}

static unsigned run_openat(afio_ctx *ctx, struct fixture *f)
{
	close(TU_RUN_FD(ctx,
			afio_openat(ctx, f->dir.fd, "f", O_RDONLY | O_CLOEXEC, 0, tu_on_done, &d)));
	return 1;
}

static unsigned run_openat2(afio_ctx *ctx, struct fixture *f)
{
	struct open_how how = tu_how_of(O_RDONLY | O_CLOEXEC, 0, RESOLVE_BENEATH);

	close(TU_RUN_FD(ctx, afio_openat2(ctx, f->dir.fd, "f", &how, tu_on_done, &d)));
	return 1;
}

static unsigned run_close(afio_ctx *ctx, struct fixture *f)
{
	int fd = dup(f->file);

	ck_assert_int_ge(fd, 0);
	TU_EXPECT(ctx, 0, afio_close(ctx, fd, tu_on_done, &d));
	return 1;
}

static unsigned run_statx(afio_ctx *ctx, struct fixture *f)
{
	struct statx stx;

	TU_EXPECT(ctx, 0,
		  afio_statx(ctx, f->dir.fd, "f", 0, STATX_BASIC_STATS, &stx, tu_on_done, &d));
	return 1;
}

static unsigned run_fallocate(afio_ctx *ctx, struct fixture *f)
{
	TU_EXPECT(ctx, 0,
		  afio_fallocate(ctx, f->file, FALLOC_FL_KEEP_SIZE, 0, 65536, tu_on_done, &d));
	return 1;
}

static unsigned run_ftruncate(afio_ctx *ctx, struct fixture *f)
{
	TU_EXPECT(ctx, 0, afio_ftruncate(ctx, f->file, 65536, tu_on_done, &d));
	return 1;
}

static unsigned run_sync_range(afio_ctx *ctx, struct fixture *f)
{
	TU_EXPECT(ctx, 0,
		  afio_sync_range(ctx, f->file, 0, 0, SYNC_FILE_RANGE_WRITE, tu_on_done, &d));
	return 1;
}

static unsigned run_renameat(afio_ctx *ctx, struct fixture *f)
{
	TU_EXPECT(ctx, 0, afio_renameat(ctx, f->dir.fd, "f", f->dir.fd, "g", 0, tu_on_done, &d));
	ck_assert_int_eq(renameat(f->dir.fd, "g", f->dir.fd, "f"), 0);
	return 1;
}

static unsigned run_unlinkat(afio_ctx *ctx, struct fixture *f)
{
	tu_put_file(f->dir.fd, "u", "x");
	TU_EXPECT(ctx, 0, afio_unlinkat(ctx, f->dir.fd, "u", 0, tu_on_done, &d));
	return 1;
}

static unsigned run_mkdirat(afio_ctx *ctx, struct fixture *f)
{
	TU_EXPECT(ctx, 0, afio_mkdirat(ctx, f->dir.fd, "m", 0700, tu_on_done, &d));
	ck_assert_int_eq(unlinkat(f->dir.fd, "m", AT_REMOVEDIR), 0);
	return 1;
}

static unsigned run_nop(afio_ctx *ctx, struct fixture *f)
{
	(void)f;
	TU_EXPECT(ctx, 0, afio_nop(ctx, tu_on_done, &d));
	return 1;
}

static void on_pooled(void *data, ssize_t res, unsigned flags)
{
	unsigned *got = data;

	ck_assert_int_eq(res, 1);
	ck_assert(flags & AFIO_CQE_BUFFER);
	*got = afio_cqe_buf(flags) + 1;
}

static unsigned run_recv_pooled(afio_ctx *ctx, struct fixture *f)
{
	unsigned pool, got = 0;
	int64_t until = tu_now_ns() + TU_HANG_MS * TU_NS_PER_MS;

	ck_assert_int_eq(afio_bufpool_create(ctx, 1, 16, &pool), 0);
	ck_assert_int_eq(write(f->sv[0], "p", 1), 1);
	ck_assert_int_eq(afio_recv_pooled(ctx, f->sv[1], pool, 0, 0, on_pooled, &got), 0);
	while (!got) {
		ck_assert_int_ge(afio_poll(ctx, 1, 100), 0);
		ck_assert_msg(tu_now_ns() < until, "recv_pooled on %s hung", tu_target_name());
	}
	ck_assert_int_eq(afio_buf_release(ctx, pool, got - 1), 0);
	return 1;
}

static unsigned run_poll_fd(afio_ctx *ctx, struct fixture *f)
{
	TU_EXPECT(ctx, POLLOUT, afio_poll_fd(ctx, f->sv[1], POLLOUT, tu_on_done, &d));
	return 1;
}

/* Each queues and checks requests of one op; returns how many. */
static const struct {
	const char *op;
	unsigned (*run)(afio_ctx *ctx, struct fixture *f);
} runners[] = {
	{ "read", run_read }, { "write", run_write }, { "readv", run_readv },
	{ "writev", run_writev }, { "fsync", run_fsync }, { "recv", run_recv },
	{ "send", run_send }, { "accept", run_accept }, { "connect", run_connect },
	{ "sendmsg", run_sendmsg }, { "recvmsg", run_recvmsg }, { "sendfile", run_sendfile },
	{ "timeout", run_timeout }, { "openat", run_openat }, { "openat2", run_openat2 },
	{ "close", run_close }, { "statx", run_statx }, { "fallocate", run_fallocate },
	{ "ftruncate", run_ftruncate }, { "sync_range", run_sync_range },
	{ "renameat", run_renameat }, { "unlinkat", run_unlinkat }, { "mkdirat", run_mkdirat },
	{ "nop", run_nop }, { "recv_pooled", run_recv_pooled }, { "poll_fd", run_poll_fd },
};

/*
 * For every op in the table: successful requests on a fresh context move
 * stats.fallbacks by exactly what afio_op_native() said (none native, one
 * each handed to the pool).
 */
START_TEST(test_native_agrees_with_fallbacks)
{
	struct fixture f;

	fixture_make(&f);
	for (unsigned op = 0; op < afio_op_count(); op++) {
		const char *name = afio_op_name(op);
		unsigned (*run)(afio_ctx *, struct fixture *) = NULL;
		char how[256] = "";
		uint64_t before, n;
		afio_ctx *ctx;
		int native;

		for (size_t i = 0; i < sizeof(runners) / sizeof(runners[0]); i++)
			if (!strcmp(runners[i].op, name))
				run = runners[i].run;
		ck_assert_msg(run, "no request here runs op %s: add one", name);
		ctx = tu_new_ctx();
		native = afio_op_native(ctx, op, how, sizeof(how));
		ck_assert_int_ge(native, 0);
		before = tu_fallbacks(ctx);
		n = run(ctx, &f);
		ck_assert_msg(tu_fallbacks(ctx) - before == (native ? 0 : n),
			      "%s on %s: afio_op_native says %d (\"%s\"), "
			      "stats.fallbacks grew by %llu in %llu requests",
			      name, tu_target_name(), native, how,
			      (unsigned long long)(tu_fallbacks(ctx) - before),
			      (unsigned long long)n);
		afio_destroy(ctx);
	}
	fixture_remove(&f);
}
END_TEST

static Suite *optable_suite(void)
{
	Suite *s = suite_create("optable");
	TCase *table = tu_tcase(s, "table");

	tcase_add_test(table, test_op_names);
	tcase_add_test(table, test_op_native_how);
	tcase_add_test(table, test_threads_all_native);
	tcase_add_test(table, test_native_agrees_with_fallbacks);
	return s;
}

int main(int argc, char **argv)
{
	return tu_main(argc, argv, optable_suite);
}
