/* SPDX-License-Identifier: MIT */
/*
 * The public contract, checked on one backend in one mode (from argv).
 * meson runs it once per backend and mode; a backend that does not probe as
 * available here exits 77 (skipped) with the probe's reason.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "asyncfio.h"
#include "testutil.h"

/*
 * No request reports more bytes than it asked for: every call with a
 * length below notes it in its tu_done, and tu_on_done() checks.  A call
 * refused at once leaves a note that no callback clears; it only makes
 * the check of a later request on the same record looser.
 */
#define afio_read(c, fd, b, len, off, cb, d) \
	afio_read(c, fd, b, len, off, cb, tu_asking(cb, d, len))
#define afio_write(c, fd, b, len, off, cb, d) \
	afio_write(c, fd, b, len, off, cb, tu_asking(cb, d, len))
#define afio_readv(c, fd, iov, n, off, cb, d) \
	afio_readv(c, fd, iov, n, off, cb, tu_asking(cb, d, tu_iov_len(iov, n)))
#define afio_writev(c, fd, iov, n, off, cb, d) \
	afio_writev(c, fd, iov, n, off, cb, tu_asking(cb, d, tu_iov_len(iov, n)))
#define afio_recv(c, fd, b, len, fl, cb, d) \
	afio_recv(c, fd, b, len, fl, cb, tu_asking(cb, d, len))
#define afio_send(c, fd, b, len, fl, cb, d) \
	afio_send(c, fd, b, len, fl, cb, tu_asking(cb, d, len))

static enum afio_backend target_backend;
static enum afio_mode target_mode;

static afio_ctx *new_ctx(unsigned entries)
{
	return tu_ctx(target_backend, target_mode, entries);
}

/* The target with a pool of one worker, whose order of work is known. */
static afio_ctx *one_worker_ctx(void)
{
	struct afio_config cfg;

	afio_config_init(&cfg);
	cfg.backend = target_backend;
	cfg.mode = target_mode;
	cfg.threads = 1;
	return tu_create(&cfg);
}

static bool fd_readable(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN);
}

static void fill_random(unsigned char *buf, size_t len, unsigned *seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)rand_r(seed);
}

static int new_file(void)
{
	int fd = tu_tmpfile(0);

	ck_assert_msg(fd >= 0, "tmpfile: %s", strerror(-fd));
	return fd;
}

/* ---- files ---- */

#define RW_FILE_SIZE (4u << 20)
#define RW_MAX_CHUNK 65536u

START_TEST(test_write_read_random)
{
	unsigned seed = 12345u + (unsigned)target_mode * 7 + (unsigned)target_backend;
	unsigned char *ref = malloc(RW_FILE_SIZE), *back = calloc(1, RW_FILE_SIZE);
	static struct tu_done d[4096];
	static unsigned want[4096];
	afio_ctx *ctx = new_ctx(512);
	unsigned nchunks = 0, off = 0;
	int fd = new_file();

	ck_assert_ptr_nonnull(ref);
	ck_assert_ptr_nonnull(back);
	fill_random(ref, RW_FILE_SIZE, &seed);

	/* Non-overlapping chunks of random size, written all at once. */
	while (off < RW_FILE_SIZE) {
		unsigned len = 1 + (unsigned)rand_r(&seed) % RW_MAX_CHUNK;

		if (len > RW_FILE_SIZE - off)
			len = RW_FILE_SIZE - off;
		ck_assert_uint_lt(nchunks, 4096);
		while (afio_write(ctx, fd, ref + off, len, off, tu_on_done, &d[nchunks]) == -EAGAIN)
			ck_assert_int_ge(afio_poll(ctx, 1, -1), 0);
		want[nchunks++] = len;
		off += len;
	}
	tu_drain(ctx);
	for (unsigned i = 0; i < nchunks; i++) {
		ck_assert_int_eq(d[i].calls, 1);
		ck_assert_int_eq(d[i].res, want[i]);
	}
	ck_assert_int_eq(pread(fd, back, RW_FILE_SIZE, 0), RW_FILE_SIZE);
	ck_assert_msg(!memcmp(ref, back, RW_FILE_SIZE), "file differs from what was written");

	/* Reads at random offsets and sizes through the library. */
	memset(back, 0, RW_FILE_SIZE);
	for (int i = 0; i < 300; i++) {
		unsigned o = (unsigned)rand_r(&seed) % RW_FILE_SIZE;
		unsigned len = 1 + (unsigned)rand_r(&seed) % RW_MAX_CHUNK;
		unsigned want = len > RW_FILE_SIZE - o ? RW_FILE_SIZE - o : len;
		struct tu_done r = { 0 };

		ck_assert_int_eq(afio_read(ctx, fd, back, len, o, tu_on_done, &r), 0);
		tu_wait_done(ctx, &r);
		ck_assert_int_eq(r.calls, 1);
		ck_assert_int_eq(r.res, want);
		ck_assert_msg(!memcmp(back, ref + o, want), "read at %u+%u differs", o, want);
	}
	afio_destroy(ctx);
	close(fd);
	free(ref);
	free(back);
}
END_TEST

START_TEST(test_readv_writev)
{
	char a[100], b[3000], c[7], out1[1500], out2[1607];
	struct iovec wv[] = { { a, sizeof(a) }, { b, sizeof(b) }, { c, sizeof(c) } };
	struct iovec rv[] = { { out1, sizeof(out1) }, { out2, sizeof(out2) } };
	afio_ctx *ctx = new_ctx(0);
	struct tu_done w = { 0 }, r = { 0 };
	int fd = new_file();
	unsigned seed = 7;
	char all[3107];

	fill_random((unsigned char *)a, sizeof(a), &seed);
	fill_random((unsigned char *)b, sizeof(b), &seed);
	fill_random((unsigned char *)c, sizeof(c), &seed);
	memcpy(all, a, sizeof(a));
	memcpy(all + sizeof(a), b, sizeof(b));
	memcpy(all + sizeof(a) + sizeof(b), c, sizeof(c));

	ck_assert_int_eq(afio_writev(ctx, fd, wv, 3, 4096, tu_on_done, &w), 0);
	tu_wait_done(ctx, &w);
	ck_assert_int_eq(w.res, sizeof(all));
	ck_assert_int_eq(afio_readv(ctx, fd, rv, 2, 4096, tu_on_done, &r), 0);
	tu_wait_done(ctx, &r);
	ck_assert_int_eq(r.res, sizeof(all));
	ck_assert(!memcmp(out1, all, sizeof(out1)));
	ck_assert(!memcmp(out2, all + sizeof(out1), sizeof(out2)));
	afio_destroy(ctx);
	close(fd);
}
END_TEST

START_TEST(test_fsync_fdatasync)
{
	afio_ctx *ctx = new_ctx(0);
	struct tu_done w = { 0 }, s = { 0 }, ds = { 0 };
	char buf[512] = "durable";
	int fd = new_file();

	ck_assert_int_eq(afio_write(ctx, fd, buf, sizeof(buf), 0, tu_on_done, &w), 0);
	tu_wait_done(ctx, &w);
	ck_assert_int_eq(w.res, sizeof(buf));
	ck_assert_int_eq(afio_fsync(ctx, fd, 0, tu_on_done, &s), 0);
	ck_assert_int_eq(afio_fsync(ctx, fd, AFIO_FSYNC_DATASYNC, tu_on_done, &ds), 0);
	tu_wait_done(ctx, &s);
	tu_wait_done(ctx, &ds);
	ck_assert_int_eq(s.res, 0);
	ck_assert_int_eq(ds.res, 0);
	ck_assert_int_eq(s.calls + ds.calls, 2);
	ck_assert_int_eq(afio_fsync(ctx, fd, 0x80, tu_on_done, &s), -EINVAL);
	afio_destroy(ctx);
	close(fd);
}
END_TEST

START_TEST(test_read_past_eof)
{
	afio_ctx *ctx = new_ctx(0);
	struct tu_done past = { 0 }, straddle = { 0 };
	char buf[200];
	int fd = new_file();

	memset(buf, 'x', 100);
	ck_assert_int_eq(pwrite(fd, buf, 100, 0), 100);
	ck_assert_int_eq(afio_read(ctx, fd, buf, sizeof(buf), 4096, tu_on_done, &past), 0);
	ck_assert_int_eq(afio_read(ctx, fd, buf, sizeof(buf), 50, tu_on_done, &straddle), 0);
	tu_wait_done(ctx, &past);
	tu_wait_done(ctx, &straddle);
	ck_assert_int_eq(past.res, 0);
	ck_assert_int_eq(straddle.res, 50);
	afio_destroy(ctx);
	close(fd);
}
END_TEST

START_TEST(test_closed_fd)
{
	afio_ctx *ctx = new_ctx(0);
	struct tu_done r = { 0 }, s = { 0 };
	int fd = new_file(), sv[2];
	char buf[64];

	close(fd);
	ck_assert_int_eq(afio_read(ctx, fd, buf, sizeof(buf), 0, tu_on_done, &r), 0);
	tu_wait_done(ctx, &r);
	ck_assert_int_eq(r.res, -EBADF);

	tu_socketpair(sv);
	close(sv[0]);
	close(sv[1]);
	ck_assert_int_eq(afio_recv(ctx, sv[0], buf, sizeof(buf), 0, tu_on_done, &s), 0);
	tu_wait_done(ctx, &s);
	ck_assert_int_eq(s.res, -EBADF);
	ck_assert_int_eq(r.calls + s.calls, 2);
	afio_destroy(ctx);
}
END_TEST

START_TEST(test_bad_arguments)
{
	afio_ctx *ctx = new_ctx(0);
	struct iovec iov = { NULL, 0 };
	struct afio_stats st;
	struct tu_done d = { 0 };
	int fd = new_file();
	char buf[8];

	ck_assert_int_eq(afio_read(ctx, fd, NULL, 8, 0, tu_on_done, &d), -EINVAL);
	ck_assert_int_eq(afio_write(ctx, fd, NULL, 8, 0, tu_on_done, &d), -EINVAL);
	ck_assert_int_eq(afio_recv(ctx, fd, NULL, 8, 0, tu_on_done, &d), -EINVAL);
	ck_assert_int_eq(afio_send(ctx, fd, NULL, 8, 0, tu_on_done, &d), -EINVAL);
	ck_assert_int_eq(afio_readv(ctx, fd, &iov, -1, 0, tu_on_done, &d), -EINVAL);
	ck_assert_int_eq(afio_writev(ctx, fd, &iov, -1, 0, tu_on_done, &d), -EINVAL);
	ck_assert_int_eq(afio_readv(ctx, fd, NULL, 1, 0, tu_on_done, &d), -EINVAL);
	ck_assert_int_eq(afio_read(ctx, fd, buf, sizeof(buf), 0, NULL, &d), -EINVAL);
	ck_assert_int_eq(afio_read(ctx, -1, buf, sizeof(buf), 0, tu_on_done, &d), -EBADF);
	ck_assert_int_eq(afio_read(ctx, fd, buf, (size_t)SSIZE_MAX + 1, 0, tu_on_done, &d), -EINVAL);
	ck_assert_int_eq(afio_read(ctx, fd, buf, sizeof(buf), UINT64_MAX, tu_on_done, &d), -EINVAL);
	ck_assert_int_eq(afio_read(NULL, fd, buf, sizeof(buf), 0, tu_on_done, &d), -EINVAL);

	/* Refused at once: nothing was queued, no callback will run. */
	ck_assert_int_eq(afio_poll(ctx, 0, 0), 0);
	ck_assert_int_eq(d.calls, 0);
	ck_assert_int_eq(afio_stats(ctx, &st), 0);
	ck_assert_int_eq(st.submitted, 0);
	afio_destroy(ctx);
	close(fd);
}
END_TEST

START_TEST(test_bad_config)
{
	struct afio_config cfg;
	afio_ctx *ctx = NULL;

	afio_config_init(&cfg);
	cfg.backend = (enum afio_backend)42;
	ck_assert_int_eq(afio_create(&ctx, &cfg), -EINVAL);
	afio_config_init(&cfg);
	cfg.flags = 1u << 30;
	ck_assert_int_eq(afio_create(&ctx, &cfg), -EINVAL);
	afio_config_init(&cfg);
	cfg.reserved[0] = 1;
	ck_assert_int_eq(afio_create(&ctx, &cfg), -EINVAL);
	ck_assert_ptr_null(ctx);
	ck_assert_int_eq(afio_create(NULL, NULL), -EINVAL);
}
END_TEST

/* ---- sockets ---- */

START_TEST(test_send_recv)
{
	afio_ctx *ctx = new_ctx(0);
	struct tu_done s = { 0 }, r = { 0 };
	char in[64] = "";
	int sv[2];

	tu_socketpair(sv);
	ck_assert_int_eq(afio_send(ctx, sv[0], "hello", 5, 0, tu_on_done, &s), 0);
	ck_assert_int_eq(afio_recv(ctx, sv[1], in, sizeof(in), 0, tu_on_done, &r), 0);
	tu_wait_done(ctx, &s);
	tu_wait_done(ctx, &r);
	ck_assert_int_eq(s.res, 5);
	ck_assert_int_eq(r.res, 5);
	ck_assert(!memcmp(in, "hello", 5));
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

START_TEST(test_recv_waits_for_data)
{
	afio_ctx *ctx = new_ctx(0);
	struct tu_done r = { 0 };
	char in[64] = "";
	int sv[2];

	tu_socketpair(sv);
	ck_assert_int_eq(afio_recv(ctx, sv[1], in, sizeof(in), 0, tu_on_done, &r), 0);
	ck_assert_int_eq(afio_poll(ctx, 1, 50), 0);
	ck_assert_int_eq(r.calls, 0);
	ck_assert_int_eq(write(sv[0], "late", 4), 4);
	tu_wait_done(ctx, &r);
	ck_assert_int_eq(r.calls, 1);
	ck_assert_int_eq(r.res, 4);
	ck_assert(!memcmp(in, "late", 4));
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/*
 * Reads queued around a recv that waits: the reads' results must arrive
 * while the recv waits, however the backend runs them.  With one pool
 * worker in ASYNC mode the worker finishes the first reads, then sits in
 * the recv: it must say what it finished before it waits (else the
 * afio_poll() below waits out its 10 s and the test fails).
 */
START_TEST(test_results_while_a_recv_waits)
{
	struct tu_done reads[8] = { 0 }, r = { 0 };
	char buf[8][16], in[16];
	int fd = new_file(), sv[2];
	afio_ctx *ctx = one_worker_ctx();

	ck_assert_int_eq(pwrite(fd, "0123456789abcdef", 16, 0), 16);
	tu_socketpair(sv);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(afio_read(ctx, fd, buf[i], 16, 0, tu_on_done, &reads[i]), 0);
	ck_assert_int_eq(afio_recv(ctx, sv[1], in, sizeof(in), 0, tu_on_done, &r), 0);
	for (int i = 4; i < 8; i++)
		ck_assert_int_eq(afio_read(ctx, fd, buf[i], 16, 0, tu_on_done, &reads[i]), 0);
	while (!reads[0].calls || !reads[1].calls || !reads[2].calls || !reads[3].calls)
		ck_assert_msg(afio_poll(ctx, 1, 10000) >= 1,
			      "no read finished in 10 s while a recv waited");
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(reads[i].calls, 1);
		ck_assert_int_eq(reads[i].res, 16);
	}
	ck_assert_int_eq(r.calls, 0);
	ck_assert_int_eq(write(sv[0], "wake", 4), 4);
	tu_drain(ctx);
	ck_assert_int_eq(r.calls, 1);
	ck_assert_int_eq(r.res, 4);
	for (int i = 4; i < 8; i++) {
		ck_assert_int_eq(reads[i].calls, 1);
		ck_assert_int_eq(reads[i].res, 16);
		ck_assert(!memcmp(buf[i], "0123456789abcdef", 16));
	}
	afio_destroy(ctx);
	close(fd);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

START_TEST(test_recv_after_peer_close)
{
	afio_ctx *ctx = new_ctx(0);
	struct tu_done before = { 0 }, after = { 0 };
	char in[16];
	int sv[2];

	tu_socketpair(sv);
	/* One recv already waiting when the peer goes, one queued after. */
	ck_assert_int_eq(afio_recv(ctx, sv[1], in, sizeof(in), 0, tu_on_done, &before), 0);
	ck_assert_int_eq(afio_submit(ctx), 1);
	close(sv[0]);
	tu_wait_done(ctx, &before);
	ck_assert_int_eq(before.res, 0);
	ck_assert_int_eq(afio_recv(ctx, sv[1], in, sizeof(in), 0, tu_on_done, &after), 0);
	tu_wait_done(ctx, &after);
	ck_assert_int_eq(after.res, 0);
	afio_destroy(ctx);
	close(sv[1]);
}
END_TEST

/*
 * Whether the backend holds the file of the socket a submitted request
 * waits on, so that the test may close the fd: a request that waits in the
 * kernel holds it from afio_submit() on, one that waits in the pool from
 * when the pool has its own descriptor for the socket.  false where that
 * moment cannot be seen from here.
 */
static bool socket_held(int fd)
{
	/* The no-wait try and the arming both happen in afio_submit(). */
	if (target_mode == AFIO_MODE_INLINE)
		return true;
	/* libaio's poll went to the kernel in io_submit(). */
	if (target_backend == AFIO_BACKEND_LIBAIO && target_mode == AFIO_MODE_HYBRID)
		return true;
	/* An io-wq worker looks the fd up, at a moment not seen from here. */
	if (target_backend == AFIO_BACKEND_IO_URING)
		return false;
	/* The pool (threads, and libaio in ASYNC): its dup of the socket. */
	for (int i = 0; i < 10000; i++) {
		if (tu_file_held_elsewhere(fd))
			return true;
		usleep(1000);
	}
	ck_abort_msg("the pool took no reference to a waiting socket in 10 s");
	return false;
}

/*
 * The application closes the fd of a waiting recv and the number goes to
 * another socket (after afio_cancel() lost the race, or by mistake): the
 * request stays on the socket it was submitted on, as io_uring's do, and
 * leaves the data of the other one alone.
 */
START_TEST(test_recv_keeps_its_socket)
{
	afio_ctx *ctx = new_ctx(0);
	struct tu_done r = { 0 };
	char in[16] = "", other[16] = "";
	int a[2], b[2];

	tu_socketpair(a);
	tu_socketpair(b);
	ck_assert_int_eq(afio_recv(ctx, a[1], in, sizeof(in), 0, tu_on_done, &r), 0);
	ck_assert_int_eq(afio_submit(ctx), 1);
	if (!socket_held(a[1])) {
		afio_destroy(ctx);
		ck_assert_int_eq(r.res, -ECANCELED);
		goto out;
	}
	/* The other socket has data first: a recv on the number takes it. */
	ck_assert_int_eq(write(b[0], "other", 5), 5);
	ck_assert_int_eq(dup2(b[1], a[1]), a[1]);
	close(b[1]);
	ck_assert_int_eq(write(a[0], "mine", 4), 4);
	for (int i = 0; i < 10 && !r.calls; i++)
		ck_assert_int_ge(afio_poll(ctx, 1, 1000), 0);
	ck_assert_msg(r.calls == 1, "the recv did not complete in 10 s");
	ck_assert_msg(r.res == 4 && !memcmp(in, "mine", 4),
		      "the recv took %zd bytes \"%.*s\", not its own socket's \"mine\"",
		      r.res, r.res > 0 ? (int)r.res : 0, in);
	ck_assert_int_eq(recv(a[1], other, sizeof(other), MSG_DONTWAIT), 5);
	ck_assert(!memcmp(other, "other", 5));
	afio_destroy(ctx);
out:
	close(a[0]);
	close(a[1]);
	close(b[0]);
}
END_TEST

START_TEST(test_cancel_waiting_recv)
{
	afio_ctx *ctx = new_ctx(0);
	struct tu_done r = { 0 };
	struct afio_stats st;
	char in[16];
	int sv[2];

	tu_socketpair(sv);
	ck_assert_int_eq(afio_recv(ctx, sv[1], in, sizeof(in), 0, tu_on_done, &r), 0);
	ck_assert_int_eq(afio_poll(ctx, 1, 50), 0);
	ck_assert_int_eq(r.calls, 0);
	ck_assert_int_eq(afio_cancel(ctx, &r), 1);
	tu_wait_done(ctx, &r);
	ck_assert_int_eq(r.res, -ECANCELED);
	/* Once, and only once: later data and polls change nothing. */
	ck_assert_int_eq(write(sv[0], "x", 1), 1);
	ck_assert_int_eq(afio_poll(ctx, 1, 50), 0);
	ck_assert_int_eq(r.calls, 1);
	ck_assert_int_eq(afio_cancel(ctx, &r), -ENOENT);
	ck_assert_int_eq(afio_stats(ctx, &st), 0);
	ck_assert_int_eq(st.canceled, 1);
	ck_assert_int_eq(st.in_flight, 0);
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

START_TEST(test_cancel_queued)
{
	afio_ctx *ctx = new_ctx(0);
	struct tu_done r = { 0 };
	char in[16];
	int sv[2];

	tu_socketpair(sv);
	/* Never submitted: it completes with -ECANCELED, in afio_poll(). */
	ck_assert_int_eq(afio_recv(ctx, sv[1], in, sizeof(in), 0, tu_on_done, &r), 0);
	ck_assert_int_eq(afio_cancel(ctx, &r), 1);
	ck_assert_int_eq(r.calls, 0);
	ck_assert(fd_readable(afio_eventfd(ctx)));
	ck_assert_int_eq(afio_poll(ctx, 1, -1), 1);
	ck_assert_int_eq(r.calls, 1);
	ck_assert_int_eq(r.res, -ECANCELED);
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/*
 * By handle: the request the queueing call accepted, and no other.  Two
 * recvs share one data pointer, which afio_cancel() could not tell apart;
 * a handle whose request completed stays refused after its slot is taken
 * again, and the request that took it is untouched.
 */
START_TEST(test_cancel_by_handle)
{
	afio_ctx *ctx = new_ctx(1);
	struct tu_done a = { 0 }, b = { 0 };
	afio_handle ha, hb;
	char in[2][16];
	int sv[2];

	tu_socketpair(sv);
	ck_assert_uint_eq(afio_last_handle(ctx), 0);
	ck_assert_uint_eq(afio_last_handle(NULL), 0);
	ck_assert_int_eq(afio_recv(ctx, sv[1], in[0], sizeof(in[0]), 0, tu_on_done, &a), 0);
	ha = afio_last_handle(ctx);
	ck_assert_uint_ne(ha, 0);
	ck_assert_int_eq(afio_poll(ctx, 1, 20), 0);
	ck_assert_int_eq(afio_cancel_handle(ctx, ha), 0);
	ck_assert_int_eq(afio_cancel_handle(ctx, ha), -EALREADY);
	tu_wait_done(ctx, &a);
	ck_assert_int_eq(a.res, -ECANCELED);
	ck_assert_int_eq(afio_cancel_handle(ctx, ha), -ENOENT);

	/* The one slot again, for another request. */
	ck_assert_int_eq(afio_recv(ctx, sv[1], in[1], sizeof(in[1]), 0, tu_on_done, &b), 0);
	hb = afio_last_handle(ctx);
	ck_assert_uint_ne(hb, ha);
	ck_assert_int_eq(afio_poll(ctx, 1, 20), 0);
	ck_assert_int_eq(afio_cancel_handle(ctx, ha), -ENOENT);
	ck_assert_int_eq(write(sv[0], "xy", 2), 2);
	tu_wait_done(ctx, &b);
	ck_assert_int_eq(b.res, 2);
	ck_assert_int_eq(a.calls, 1);

	ck_assert_int_eq(afio_cancel_handle(ctx, 0), -EINVAL);
	ck_assert_int_eq(afio_cancel_handle(ctx, hb + 1), -EINVAL);
	ck_assert_int_eq(afio_cancel_handle(NULL, hb), -EINVAL);
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* Canceled before it was submitted: done at once, its callback to run. */
START_TEST(test_cancel_handle_queued)
{
	afio_ctx *ctx = new_ctx(0);
	struct tu_done r = { 0 };
	afio_handle h;
	char in[16];
	int sv[2];

	tu_socketpair(sv);
	ck_assert_int_eq(afio_recv(ctx, sv[1], in, sizeof(in), 0, tu_on_done, &r), 0);
	h = afio_last_handle(ctx);
	ck_assert_int_eq(afio_cancel_handle(ctx, h), 0);
	ck_assert_int_eq(afio_cancel_handle(ctx, h), -EALREADY);
	ck_assert_int_eq(r.calls, 0);
	ck_assert_int_eq(afio_poll(ctx, 1, -1), 1);
	ck_assert_int_eq(r.res, -ECANCELED);
	ck_assert_int_eq(afio_cancel_handle(ctx, h), -ENOENT);
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

static bool holds_worker_per_socket(void)
{
	return target_mode == AFIO_MODE_ASYNC && target_backend != AFIO_BACKEND_IO_URING;
}

/* What a server sizes itself by, and threads 0 sized for the mode. */
START_TEST(test_limits)
{
	struct afio_config cfg;
	struct afio_limits lim;
	afio_ctx *ctx;

	afio_config_init(&cfg);
	cfg.backend = target_backend;
	cfg.mode = target_mode;
	cfg.entries = 64;
	ctx = tu_create(&cfg);
	ck_assert_int_eq(afio_limits(ctx, &lim), 0);
	ck_assert_uint_eq(lim.entries, 64);
	ck_assert_uint_eq(lim.threads, 4);
	ck_assert_uint_eq(lim.socket_waits, holds_worker_per_socket() ? 4 : 64);
	ck_assert_int_eq(afio_limits(ctx, NULL), -EINVAL);
	ck_assert_int_eq(afio_limits(NULL, &lim), -EINVAL);
	afio_destroy(ctx);

	cfg.threads = 0;
	ctx = tu_create(&cfg);
	ck_assert_int_eq(afio_limits(ctx, &lim), 0);
	ck_assert_uint_eq(lim.threads, holds_worker_per_socket() ? 64 : 4);
	ck_assert_uint_eq(lim.socket_waits, 64);
	afio_destroy(ctx);

	cfg.socket_waits = 10;
	ctx = tu_create(&cfg);
	ck_assert_int_eq(afio_limits(ctx, &lim), 0);
	ck_assert_uint_eq(lim.threads, holds_worker_per_socket() ? 10 : 4);
	ck_assert_uint_eq(lim.socket_waits, holds_worker_per_socket() ? 10 : 64);
	afio_destroy(ctx);

	cfg.socket_waits = 0;
	cfg.entries = 4 * AFIO_MAX_THREADS;
	ctx = tu_create(&cfg);
	ck_assert_int_eq(afio_limits(ctx, &lim), 0);
	ck_assert_uint_eq(lim.threads, holds_worker_per_socket() ? AFIO_MAX_THREADS : 4);
	ck_assert_uint_eq(lim.socket_waits, holds_worker_per_socket() ? AFIO_MAX_THREADS :
					    4 * AFIO_MAX_THREADS);
	afio_destroy(ctx);
}
END_TEST

START_TEST(test_destroy_with_recv_pending)
{
	afio_ctx *ctx = new_ctx(0);
	struct tu_done waiting = { 0 }, queued = { 0 };
	char in[16], in2[16];
	int sv[2];

	tu_socketpair(sv);
	ck_assert_int_eq(afio_recv(ctx, sv[1], in, sizeof(in), 0, tu_on_done, &waiting), 0);
	ck_assert_int_eq(afio_poll(ctx, 1, 50), 0);
	ck_assert_int_eq(afio_recv(ctx, sv[0], in2, sizeof(in2), 0, tu_on_done, &queued), 0);
	afio_destroy(ctx);
	ck_assert_int_eq(waiting.calls, 1);
	ck_assert_int_eq(waiting.res, -ECANCELED);
	ck_assert_int_eq(queued.calls, 1);
	ck_assert_int_eq(queued.res, -ECANCELED);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* Refused at once, on every backend: nothing is queued. */
START_TEST(test_sock_flags_refused)
{
	afio_ctx *ctx = new_ctx(0);
	struct tu_done d = { 0 };
	struct afio_stats st;
	int sv[2], dg[2], sp[2];
	char buf[16] = "";

	tu_socketpair(sv);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, dg), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
	ck_assert_int_eq(afio_recv(ctx, sv[1], buf, sizeof(buf), MSG_DONTWAIT, tu_on_done, &d),
			 -EINVAL);
	ck_assert_int_eq(afio_send(ctx, sv[0], buf, sizeof(buf), MSG_DONTWAIT, tu_on_done, &d),
			 -EINVAL);
	ck_assert_int_eq(afio_recv(ctx, sv[1], buf, sizeof(buf), MSG_WAITALL | MSG_PEEK,
				   tu_on_done, &d), -EINVAL);
	ck_assert_int_eq(afio_recv(ctx, dg[1], buf, sizeof(buf), MSG_WAITALL, tu_on_done, &d),
			 -EINVAL);
	ck_assert_int_eq(afio_recv(ctx, sp[1], buf, sizeof(buf), MSG_WAITALL, tu_on_done, &d),
			 -EINVAL);
	ck_assert_int_eq(afio_send(ctx, sp[0], buf, sizeof(buf), MSG_WAITALL, tu_on_done, &d),
			 -EINVAL);
	ck_assert_int_eq(afio_poll(ctx, 0, 0), 0);
	ck_assert_int_eq(d.calls, 0);
	ck_assert_int_eq(afio_stats(ctx, &st), 0);
	ck_assert_uint_eq(st.submitted, 0);
	afio_destroy(ctx);
	for (int i = 0; i < 2; i++) {
		close(sv[i]);
		close(dg[i]);
		close(sp[i]);
	}
}
END_TEST

/* MSG_WAITALL: the whole length, or what came before the end or a cancel. */
START_TEST(test_recv_waitall)
{
	afio_ctx *ctx = new_ctx(0);
	struct tu_done full = { 0 }, eof = { 0 }, cut = { 0 };
	char in[16] = "";
	int sv[2];

	tu_socketpair(sv);
	ck_assert_int_eq(write(sv[0], "abcd", 4), 4);
	ck_assert_int_eq(afio_recv(ctx, sv[1], in, 10, MSG_WAITALL, tu_on_done, &full), 0);
	ck_assert_int_eq(afio_poll(ctx, 1, 50), 0);
	ck_assert_int_eq(full.calls, 0);
	ck_assert_int_eq(write(sv[0], "efg", 3), 3);
	ck_assert_int_eq(afio_poll(ctx, 1, 50), 0);
	ck_assert_int_eq(write(sv[0], "hijk", 4), 4);
	tu_wait_done(ctx, &full);
	ck_assert_int_eq(full.res, 10);
	ck_assert(!memcmp(in, "abcdefghij", 10));

	/* "k" is still there; the cancel comes before the rest.  Only once
	   the receive has taken it (a pool worker may start late under
	   load: a fixed sleep here made the test flaky). */
	ck_assert_int_eq(afio_recv(ctx, sv[1], in, 10, MSG_WAITALL, tu_on_done, &cut), 0);
	for (int64_t until = tu_now_ns() + TU_HANG_MS * TU_NS_PER_MS;;) {
		int unread = -1;

		ck_assert_int_eq(afio_poll(ctx, 1, 10), 0);
		ck_assert_int_eq(ioctl(sv[1], FIONREAD, &unread), 0);
		if (!unread)
			break;
		ck_assert_msg(tu_now_ns() < until, "the receive never took its byte");
	}
	ck_assert_int_eq(afio_cancel(ctx, &cut), 1);
	tu_wait_done(ctx, &cut);
	/* Older kernels drop what io_uring had received at a cancel. */
	if (!(target_backend == AFIO_BACKEND_IO_URING && cut.res == -ECANCELED)) {
		ck_assert_int_eq(cut.res, 1);
		ck_assert_int_eq(in[0], 'k');
	}

	ck_assert_int_eq(write(sv[0], "xy", 2), 2);
	ck_assert_int_eq(afio_recv(ctx, sv[1], in, 10, MSG_WAITALL, tu_on_done, &eof), 0);
	ck_assert_int_eq(afio_poll(ctx, 1, 50), 0);
	close(sv[0]);
	tu_wait_done(ctx, &eof);
	ck_assert_int_eq(eof.res, 2);
	ck_assert(!memcmp(in, "xy", 2));
	afio_destroy(ctx);
	close(sv[1]);
}
END_TEST

#define WAITALL_SEND (256u << 10)

/* A send larger than the socket buffer goes out whole with MSG_WAITALL,
   while the peer reads slowly. */
START_TEST(test_send_waitall)
{
	unsigned char *out = malloc(WAITALL_SEND), *back = malloc(WAITALL_SEND);
	afio_ctx *ctx = new_ctx(0);
	struct tu_done s = { 0 };
	unsigned seed = 99;
	int sv[2], small = 4096;
	size_t got = 0;
	ssize_t n;

	ck_assert_ptr_nonnull(out);
	ck_assert_ptr_nonnull(back);
	fill_random(out, WAITALL_SEND, &seed);
	tu_socketpair(sv);
	ck_assert_int_eq(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	ck_assert_int_eq(afio_send(ctx, sv[0], out, WAITALL_SEND, MSG_WAITALL, tu_on_done, &s), 0);
	while (!s.calls || (s.res > 0 && got < (size_t)s.res)) {
		ck_assert_int_ge(afio_poll(ctx, 0, s.calls ? 0 : 5), 0);
		n = recv(sv[1], back + got, 8192, MSG_DONTWAIT);
		if (n > 0)
			got += (size_t)n;
		else
			ck_assert_msg(n < 0 && errno == EAGAIN, "recv: %zd %s", n, strerror(errno));
		ck_assert_uint_le(got, WAITALL_SEND);
	}
	ck_assert_int_eq(s.calls, 1);
	ck_assert_int_eq(s.res, WAITALL_SEND);
	ck_assert(!memcmp(out, back, WAITALL_SEND));
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
	free(out);
	free(back);
}
END_TEST

/* ---- pipes and sockets through afio_read()/afio_write() ---- */

/*
 * Whether a read or write on a pipe or socket ran in the io_uring kernel
 * code, which does it as read(2)/write(2) would and ignores the offset.
 * The pool and libaio do pread(2)/pwrite(2), which refuse it: -ESPIPE.
 * io_uring hands the pool only opcodes its kernel lacks.
 */
static bool ran_as_stream(afio_ctx *ctx, uint64_t fallbacks_before)
{
	struct afio_stats st;

	ck_assert_int_eq(afio_stats(ctx, &st), 0);
	return target_backend == AFIO_BACKEND_IO_URING && st.fallbacks == fallbacks_before;
}

static uint64_t fallbacks(afio_ctx *ctx)
{
	struct afio_stats st;

	ck_assert_int_eq(afio_stats(ctx, &st), 0);
	return st.fallbacks;
}

START_TEST(test_read_pipe_and_socket)
{
	afio_ctx *ctx = new_ctx(0);
	struct tu_done p = { 0 }, s = { 0 }, empty = { 0 };
	char buf[8] = "";
	int pp[2], sv[2];
	uint64_t fb;

	ck_assert_int_eq(pipe2(pp, O_CLOEXEC), 0);
	tu_socketpair(sv);
	ck_assert_int_eq(write(pp[1], "abc", 3), 3);
	ck_assert_int_eq(write(sv[0], "z", 1), 1);

	fb = fallbacks(ctx);
	ck_assert_int_eq(afio_read(ctx, pp[0], buf, 3, 4096, tu_on_done, &p), 0);
	tu_wait_done(ctx, &p);
	if (ran_as_stream(ctx, fb)) {
		ck_assert_int_eq(p.res, 3);
		ck_assert(!memcmp(buf, "abc", 3));
	} else {
		ck_assert_int_eq(p.res, -ESPIPE);
	}

	fb = fallbacks(ctx);
	ck_assert_int_eq(afio_read(ctx, sv[1], buf, 1, 0, tu_on_done, &s), 0);
	tu_wait_done(ctx, &s);
	ck_assert_int_eq(s.res, ran_as_stream(ctx, fb) ? 1 : -ESPIPE);

	/* io_uring waits for data on an empty pipe, as read(2): cancel it. */
	fb = fallbacks(ctx);
	ck_assert_int_eq(afio_read(ctx, pp[0], buf, 3, 0, tu_on_done, &empty), 0);
	afio_poll(ctx, 1, 50);
	if (!empty.calls)
		ck_assert_int_eq(afio_cancel(ctx, &empty), 1);
	tu_wait_done(ctx, &empty);
	ck_assert_int_eq(empty.res, ran_as_stream(ctx, fb) ? -ECANCELED : -ESPIPE);
	afio_destroy(ctx);
	for (int i = 0; i < 2; i++) {
		close(pp[i]);
		close(sv[i]);
	}
}
END_TEST

static volatile sig_atomic_t sigpipes;

static void on_sigpipe(int sig)
{
	(void)sig;
	sigpipes++;
}

/* Counts SIGPIPE in sigpipes, from 0, until restore_sigpipe(old). */
static void count_sigpipes(struct sigaction *old)
{
	struct sigaction sa = { .sa_handler = on_sigpipe };

	ck_assert_int_eq(sigaction(SIGPIPE, &sa, old), 0);
	sigpipes = 0;
}

static void restore_sigpipe(const struct sigaction *old)
{
	ck_assert_int_eq(sigaction(SIGPIPE, old, NULL), 0);
}

/* RWF_NOSIGNAL (Linux 6.18) keeps a write to a pipe without a reader from
   raising SIGPIPE; older kernels refuse the flag. */
static bool kernel_has_rwf_nosignal(void)
{
	struct iovec iov = { .iov_base = "", .iov_len = 1 };
	int p[2];
	bool ok;

	ck_assert_int_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
	ok = pwritev2(p[1], &iov, 1, -1, 0x100) == 1;
	close(p[0]);
	close(p[1]);
	return ok;
}

/*
 * A write to a pipe whose reader has gone: -EPIPE from io_uring, -ESPIPE
 * from the others.  io_uring on a kernel without RWF_NOSIGNAL also raises
 * SIGPIPE in the submitting thread, which the documentation tells
 * programs to ignore; here a handler counts it.
 */
START_TEST(test_write_widowed_pipe)
{
	afio_ctx *ctx = new_ctx(0);
	struct tu_done w = { 0 };
	struct sigaction old;
	int pp[2];
	uint64_t fb;

	count_sigpipes(&old);
	ck_assert_int_eq(pipe2(pp, O_CLOEXEC), 0);
	close(pp[0]);
	fb = fallbacks(ctx);
	ck_assert_int_eq(afio_write(ctx, pp[1], "x", 1, 0, tu_on_done, &w), 0);
	tu_wait_done(ctx, &w);
	if (ran_as_stream(ctx, fb)) {
		ck_assert_int_eq(w.res, -EPIPE);
		if (kernel_has_rwf_nosignal())
			ck_assert_int_eq(sigpipes, 0);
	} else {
		ck_assert_int_eq(w.res, -ESPIPE);
		ck_assert_int_eq(sigpipes, 0);
	}
	afio_destroy(ctx);
	close(pp[1]);
	restore_sigpipe(&old);
}
END_TEST

/* A send to a closed peer is -EPIPE everywhere, never SIGPIPE. */
START_TEST(test_send_closed_peer)
{
	afio_ctx *ctx = new_ctx(0);
	struct tu_done s = { 0 };
	struct sigaction old;
	int sv[2];

	count_sigpipes(&old);
	tu_socketpair(sv);
	close(sv[1]);
	ck_assert_int_eq(afio_send(ctx, sv[0], "x", 1, 0, tu_on_done, &s), 0);
	tu_wait_done(ctx, &s);
	ck_assert_int_eq(s.res, -EPIPE);
	ck_assert_int_eq(sigpipes, 0);
	afio_destroy(ctx);
	close(sv[0]);
	restore_sigpipe(&old);
}
END_TEST

/* ---- queue limits, eventfd, volume, stats ---- */

START_TEST(test_full_queue)
{
	enum { ENTRIES = 8 };
	afio_ctx *ctx = new_ctx(ENTRIES);
	struct tu_done d[ENTRIES + 1] = { { 0 } };
	char buf[ENTRIES + 1][512];
	int fd = new_file();

	for (int i = 0; i < ENTRIES; i++)
		ck_assert_int_eq(afio_read(ctx, fd, buf[i], 512, 0, tu_on_done, &d[i]), 0);
	ck_assert_int_eq(afio_read(ctx, fd, buf[ENTRIES], 512, 0, tu_on_done, &d[ENTRIES]), -EAGAIN);
	ck_assert_int_ge(afio_poll(ctx, 1, -1), 1);
	ck_assert_int_eq(afio_read(ctx, fd, buf[ENTRIES], 512, 0, tu_on_done, &d[ENTRIES]), 0);
	tu_drain(ctx);
	for (int i = 0; i <= ENTRIES; i++)
		ck_assert_int_eq(d[i].calls, 1);
	afio_destroy(ctx);
	close(fd);
}
END_TEST

START_TEST(test_eventfd)
{
	afio_ctx *ctx = new_ctx(0);
	int efd = afio_eventfd(ctx), sv[2];
	struct pollfd pfd = { .fd = efd, .events = POLLIN };
	struct tu_done r = { 0 };
	char in[16];

	ck_assert_int_ge(efd, 0);
	tu_socketpair(sv);
	ck_assert(!fd_readable(efd));
	ck_assert_int_eq(afio_recv(ctx, sv[1], in, sizeof(in), 0, tu_on_done, &r), 0);
	ck_assert_int_eq(afio_submit(ctx), 1);
	ck_assert_int_eq(afio_poll(ctx, 0, 0), 0);
	/* Nothing is done while the peer is silent. */
	ck_assert(!fd_readable(efd));
	ck_assert_int_eq(write(sv[0], "ping", 4), 4);
	ck_assert_int_eq(poll(&pfd, 1, 60000), 1);
	ck_assert_int_eq(r.calls, 0);
	ck_assert_int_eq(afio_poll(ctx, 0, 0), 1);
	ck_assert_int_eq(r.res, 4);
	ck_assert(!fd_readable(efd));
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

static long thread_cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct late_byte {
	int fd;
	useconds_t after;
};

static void *send_late_byte(void *arg)
{
	struct late_byte *b = arg;

	usleep(b->after);
	(void)!write(b->fd, "x", 1);
	return NULL;
}

/*
 * A program that never asks for the eventfd waits inside afio_poll(),
 * where each engine sleeps its own way (io_uring and libaio in the
 * kernel, the pool on a futex its threads wake): it sleeps rather than
 * spins while nothing comes, and what another thread makes happen, a
 * byte on a socket or a worker's read, wakes it.
 */
START_TEST(test_wait_inside_poll)
{
	afio_ctx *ctx = new_ctx(0);
	struct pollfd pfd = { .events = POLLIN };
	struct late_byte late;
	struct tu_done r[3] = { { 0 } };
	char in[2][16], out[4096], back[4096];
	pthread_t thread;
	long cpu;
	int sv[2], fd;

	tu_socketpair(sv);
	ck_assert_int_eq(afio_recv(ctx, sv[1], in[0], sizeof(in[0]), 0, tu_on_done, &r[0]), 0);
	cpu = thread_cpu_ms();
	ck_assert_int_eq(afio_poll(ctx, 1, 300), 0);
	ck_assert_msg(thread_cpu_ms() - cpu < 150, "afio_poll() spun for %ld ms of a 300 ms wait",
		      thread_cpu_ms() - cpu);
	ck_assert_int_eq(r[0].calls, 0);

	late = (struct late_byte){ .fd = sv[0], .after = 20000 };
	ck_assert_int_eq(pthread_create(&thread, NULL, send_late_byte, &late), 0);
	ck_assert_int_eq(afio_poll(ctx, 1, 60000), 1);
	pthread_join(thread, NULL);
	ck_assert_int_eq(r[0].res, 1);

	fd = tu_tmpfile(0);
	memset(out, 'w', sizeof(out));
	ck_assert_int_eq(pwrite(fd, out, sizeof(out), 0), (ssize_t)sizeof(out));
	ck_assert_int_eq(afio_read(ctx, fd, back, sizeof(back), 0, tu_on_done, &r[1]), 0);
	ck_assert_int_eq(afio_poll(ctx, 1, 60000), 1);
	ck_assert_int_eq(r[1].res, (ssize_t)sizeof(back));
	ck_assert(!memcmp(out, back, sizeof(out)));

	/* Asked for afterwards, the eventfd wakes a poll(2) of it. */
	ck_assert_int_eq(afio_recv(ctx, sv[1], in[1], sizeof(in[1]), 0, tu_on_done, &r[2]), 0);
	ck_assert_int_eq(afio_submit(ctx), 1);
	pfd.fd = afio_eventfd(ctx);
	ck_assert_int_ge(pfd.fd, 0);
	ck_assert_int_eq(pthread_create(&thread, NULL, send_late_byte, &late), 0);
	ck_assert_int_eq(poll(&pfd, 1, 60000), 1);
	pthread_join(thread, NULL);
	ck_assert_int_eq(afio_poll(ctx, 0, 0), 1);
	ck_assert_int_eq(r[2].res, 1);
	afio_destroy(ctx);
	close(fd);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* Bytes this thread has read by read(2) and its kin (rchar). */
static long long thread_rchar(void)
{
	char buf[512], *at;
	long long n = -1;
	FILE *f = fopen("/proc/thread-self/io", "r");

	ck_assert_ptr_nonnull(f);
	buf[fread(buf, 1, sizeof(buf) - 1, f)] = 0;
	fclose(f);
	at = strstr(buf, "rchar:");
	ck_assert_ptr_nonnull(at);
	ck_assert_int_eq(sscanf(at, "rchar: %lld", &n), 1);
	return n;
}

/* A file of len bytes of 'f', not in the page cache (tu_file_of()). */
static int uncached_file(size_t len)
{
	char *out = malloc(len);
	int fd;

	ck_assert_ptr_nonnull(out);
	memset(out, 'f', len);
	fd = tu_file_of(out, len, true);
	free(out);
	return fd;
}

struct eventfd_asker {
	struct tu_done done;
	afio_ctx *ctx;
	int efd;
};

static void eventfd_from_callback(void *data, ssize_t res)
{
	struct eventfd_asker *a = data;

	tu_on_done(&a->done, res);
	a->efd = afio_eventfd(a->ctx);
}

struct log_writer {
	int fd;
	atomic_bool stop;
};

/* A line to the kernel's log every 20 ms until told to stop (2 s at most). */
static void *write_log_lines(void *arg)
{
	static const char line[] = "<7>asyncfio test: a line that ends a read of /dev/kmsg\n";
	struct log_writer *lw = arg;
	int i;

	for (i = 0; i < 100 && !atomic_load(&lw->stop); i++) {
		usleep(20000);
		(void)!write(lw->fd, line, sizeof(line) - 1);
	}
	return NULL;
}

/*
 * afio_poll() that submits and then waits without a time limit, on a
 * context whose eventfd nobody watches: the pool may keep a queued file
 * request for the caller to run in that wait (backends/threads.c,
 * settle_kept()).  Whatever ends the call first, the request is never
 * left without someone to run it: a completion that satisfies the call
 * at once, an eventfd asked for in a callback; and a request that may
 * wait for ever is left to a worker, not run by the caller.
 */
START_TEST(test_poll_that_waits_runs_or_starts_queued)
{
	enum { LEN = 65536 };
	afio_ctx *ctx = new_ctx(0);
	struct tu_done r[4] = { { 0 } };
	struct eventfd_asker asker = { .efd = -1 };
	char *back = malloc(LEN);
	long long rchar, rchar_own;
	int64_t end;
	int fd, kfd;

	ck_assert_ptr_nonnull(back);
	/* Alone: on the pool, the caller's thread reads it. */
	fd = uncached_file(LEN);
	rchar = thread_rchar();
	ck_assert_int_eq(afio_read(ctx, fd, back, LEN, 0, tu_on_done, &r[0]), 0);
	ck_assert_int_eq(afio_poll(ctx, 1, -1), 1);
	ck_assert_int_eq(r[0].res, LEN);
	ck_assert(back[0] == 'f' && back[LEN - 1] == 'f');
	if (afio_backend(ctx) == AFIO_BACKEND_THREADS)
		ck_assert_msg(thread_rchar() - rchar >= LEN,
			      "the caller read %lld bytes while it waited for a %d-byte read",
			      thread_rchar() - rchar, LEN);

	/* A nop (which the pool's context completes as it is queued)
	   satisfies the call before it waits: the read must go on without
	   it. */
	ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	ck_assert_int_eq(afio_nop(ctx, tu_on_done, &r[1]), 0);
	ck_assert_int_eq(afio_read(ctx, fd, back, LEN, 0, tu_on_done, &r[2]), 0);
	ck_assert_int_ge(afio_poll(ctx, 1, -1), 1);
	end = tu_now_ms() + TU_HANG_MS;
	while (!r[2].calls && tu_now_ms() < end) {
		usleep(1000);
		ck_assert_int_ge(afio_poll(ctx, 0, 0), 0);
	}
	ck_assert_int_eq(r[1].calls, 1);
	ck_assert_msg(r[2].calls == 1, "a read queued after a nop never ran");
	ck_assert_int_eq(r[2].res, LEN);

	/* A read that may wait for ever (/dev/kmsg at its end: a character
	   device that takes offsets) is not the caller's to run: a worker
	   reads, and the caller's thread reads nothing.  Lines another thread
	   logs end the read: the first fills part of its 100 bytes, and the
	   worker's read for the rest fails (EINVAL) on a line too long for
	   what is left, so the read gives what it has. */
	kfd = open("/dev/kmsg", O_RDWR | O_CLOEXEC);
	if (kfd >= 0) {
		struct log_writer lw = { .fd = kfd };
		pthread_t thread;

		memset(r, 0, sizeof(r));
		ck_assert_int_ge(lseek(kfd, 0, SEEK_END), 0);
		ck_assert_int_eq(afio_read(ctx, kfd, back, 100, 0, tu_on_done, &r[0]), 0);
		ck_assert_int_eq(pthread_create(&thread, NULL, write_log_lines, &lw), 0);
		/* What reading /proc/thread-self/io adds itself. */
		rchar = thread_rchar();
		rchar_own = thread_rchar() - rchar;
		rchar = thread_rchar();
		ck_assert_int_eq(afio_poll(ctx, 1, -1), 1);
		rchar = thread_rchar() - rchar - rchar_own;
		atomic_store(&lw.stop, true);
		pthread_join(thread, NULL);
		ck_assert_int_gt(r[0].res, 0);
		ck_assert_msg(rchar < r[0].res / 2, "the caller read %lld bytes of a %zd-byte record",
			      rchar, r[0].res);
	} else {
		fprintf(stderr, "%s: /dev/kmsg: %s, its part skipped\n", __func__, strerror(errno));
	}

	/* The eventfd asked for by a callback of the call that kept the
	   read: the call must still see the read finish. */
	ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	memset(r, 0, sizeof(r));
	asker.ctx = ctx;
	ck_assert_int_eq(afio_nop(ctx, eventfd_from_callback, &asker), 0);
	ck_assert_int_eq(afio_read(ctx, fd, back, LEN, 0, tu_on_done, &r[3]), 0);
	ck_assert_int_eq(afio_poll(ctx, 2, -1), 2);
	ck_assert_int_ge(asker.efd, 0);
	ck_assert_int_eq(r[3].res, LEN);
	afio_destroy(ctx);
	if (kfd >= 0)
		close(kfd);
	close(fd);
	free(back);
}
END_TEST

/*
 * The pool keeps no more workers running than there are CPUs: a worker
 * about to wait must let another take the queue.  On every worker but
 * one a request that waits (in ASYNC a receive holds its worker until
 * data comes; in any mode a sendfile into a full pipe waits for the
 * pipe's reader), then a read: the read finishes while the others still
 * wait, and they finish once their peers move.  The context is made on
 * two CPUs, where the limit is below the workers.
 */
enum { NWAITING = 3 };

static afio_ctx *ctx_on_two_cpus(void)
{
	struct afio_config cfg;
	cpu_set_t old, two;
	afio_ctx *ctx;
	int cpu, n = 0;

	afio_config_init(&cfg);
	cfg.backend = target_backend;
	cfg.mode = target_mode;
	cfg.threads = NWAITING + 1;
	ck_assert_int_eq(sched_getaffinity(0, sizeof(old), &old), 0);
	CPU_ZERO(&two);
	for (cpu = 0; cpu < CPU_SETSIZE && n < 2; cpu++)
		if (CPU_ISSET(cpu, &old)) {
			CPU_SET(cpu, &two);
			n++;
		}
	ck_assert_int_eq(sched_setaffinity(0, sizeof(two), &two), 0);
	ctx = tu_create(&cfg);
	ck_assert_int_eq(sched_setaffinity(0, sizeof(old), &old), 0);
	return ctx;
}

static void read_passes_waiters(afio_ctx *ctx, struct tu_done *waiting)
{
	struct tu_done read_done = { 0 };
	char back[4096];
	int fd;

	fd = uncached_file(sizeof(back));
	ck_assert_int_eq(afio_read(ctx, fd, back, sizeof(back), 0, tu_on_done, &read_done), 0);
	tu_wait_once(ctx, &read_done, "a read beside requests that hold workers");
	tu_expect_eq(read_done.res, sizeof(back), "a read beside requests that hold workers");
	for (int i = 0; i < NWAITING; i++)
		ck_assert_int_eq(waiting[i].calls, 0);
	close(fd);
}

static void wait_all(afio_ctx *ctx, struct tu_done *done, ssize_t res)
{
	for (int i = 0; i < NWAITING; i++) {
		tu_wait_once(ctx, &done[i], "a request that waited");
		tu_expect_eq(done[i].res, res, "a request that waited");
	}
}

START_TEST(test_waiting_workers_leave_one_for_the_queue)
{
	struct tu_done recv_done[NWAITING] = { { 0 } }, sent[NWAITING] = { { 0 } };
	char got[NWAITING], page[4096];
	int sv[NWAITING][2], pipes[NWAITING][2], fd;
	afio_ctx *ctx = ctx_on_two_cpus();

	for (int i = 0; i < NWAITING; i++) {
		tu_socketpair(sv[i]);
		ck_assert_int_eq(afio_recv(ctx, sv[i][0], &got[i], 1, 0, tu_on_done, &recv_done[i]), 0);
	}
	ck_assert_int_ge(afio_submit(ctx), 0);
	read_passes_waiters(ctx, recv_done);
	for (int i = 0; i < NWAITING; i++)
		ck_assert_int_eq(write(sv[i][1], "x", 1), 1);
	wait_all(ctx, recv_done, 1);

	/* A worker's sendfile into a full pipe waits for sure (a socket's is
	   bounded by its room); a pipe is not afio_sendfile(3)'s socket, and
	   only where a pool worker makes the first try (HYBRID, ASYNC) is
	   the try sure not to be the caller's. */
	if (afio_backend(ctx) != AFIO_BACKEND_THREADS || target_mode == AFIO_MODE_INLINE)
		goto out;
	memset(page, 's', sizeof(page));
	fd = tu_file_of(page, sizeof(page), false);
	for (int i = 0; i < NWAITING; i++) {
		ck_assert_int_eq(pipe2(pipes[i], O_CLOEXEC | O_NONBLOCK), 0);
		while (write(pipes[i][1], page, sizeof(page)) > 0)
			;
		ck_assert_int_eq(fcntl(pipes[i][1], F_SETFL, 0), 0);
		ck_assert_int_eq(afio_sendfile(ctx, pipes[i][1], fd, 0, sizeof(page), tu_on_done, &sent[i]), 0);
	}
	ck_assert_int_ge(afio_submit(ctx), 0);
	usleep(50 * 1000);
	read_passes_waiters(ctx, sent);
	for (int i = 0; i < NWAITING; i++)
		while (read(pipes[i][0], page, sizeof(page)) > 0)
			;
	wait_all(ctx, sent, sizeof(page));
	for (int i = 0; i < NWAITING; i++) {
		close(pipes[i][0]);
		close(pipes[i][1]);
	}
	close(fd);
out:
	afio_destroy(ctx);
	for (int i = 0; i < NWAITING; i++) {
		close(sv[i][0]);
		close(sv[i][1]);
	}
}
END_TEST

/*
 * Asked for late: a context that was run only by afio_poll() waits may
 * hold completions nobody was told of and requests in the kernel.  From
 * the call on the eventfd must say so: readable at once for what waits,
 * and again for a request that completes later (which fails where the
 * engine never starts signaling it).
 */
START_TEST(test_eventfd_taken_late)
{
	afio_ctx *ctx = new_ctx(0);
	struct tu_done r[3] = { { 0 } };
	struct pollfd pfd = { .events = POLLIN };
	char in[3][16];
	int sv[2];

	tu_socketpair(sv);
	ck_assert_int_eq(afio_nop(ctx, tu_on_done, &r[0]), 0);
	ck_assert_int_eq(afio_poll(ctx, 1, 60000), 1);
	ck_assert_int_eq(afio_recv(ctx, sv[1], in[1], sizeof(in[1]), 0, tu_on_done, &r[1]), 0);
	ck_assert_int_eq(afio_recv(ctx, sv[1], in[2], sizeof(in[2]), 0, tu_on_done, &r[2]), 0);
	ck_assert_int_eq(afio_submit(ctx), 2);
	/* One completes, most likely before anyone watches the eventfd
	   (20 ms); either way the eventfd must say so. */
	ck_assert_int_eq(write(sv[0], "a", 1), 1);
	usleep(20000);
	pfd.fd = afio_eventfd(ctx);
	ck_assert_int_ge(pfd.fd, 0);
	ck_assert_int_eq(poll(&pfd, 1, 60000), 1);
	ck_assert_int_eq(afio_poll(ctx, 0, 0), 1);
	ck_assert(!fd_readable(pfd.fd));
	/* The other after: the eventfd alone must wake the caller. */
	ck_assert_int_eq(write(sv[0], "b", 1), 1);
	ck_assert_int_eq(poll(&pfd, 1, 60000), 1);
	ck_assert_int_eq(afio_poll(ctx, 0, 0), 1);
	ck_assert_int_eq(r[1].calls + r[2].calls, 2);
	ck_assert_int_eq(r[1].res + r[2].res, 2);
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* AFIO_LAZY_EVENTFD: readable whenever completions wait, as without it;
   left readable by a poll that ran callbacks, cleared by one that found
   nothing, and by a poll that waits (else it would spin on it). */
START_TEST(test_lazy_eventfd)
{
	struct afio_config cfg;
	struct tu_done r[3] = { { 0 } };
	struct pollfd pfd;
	afio_ctx *ctx;
	char in[3][16];
	int efd, sv[2];
	long slept;

	afio_config_init(&cfg);
	cfg.backend = target_backend;
	cfg.mode = target_mode;
	cfg.flags = AFIO_LAZY_EVENTFD;
	ctx = tu_create(&cfg);
	efd = afio_eventfd(ctx);
	pfd = (struct pollfd){ .fd = efd, .events = POLLIN };
	tu_socketpair(sv);
	ck_assert(!fd_readable(efd));
	ck_assert_int_eq(afio_recv(ctx, sv[1], in[0], sizeof(in[0]), 0, tu_on_done, &r[0]), 0);
	ck_assert_int_eq(afio_poll(ctx, 0, 0), 0);
	ck_assert(!fd_readable(efd));
	ck_assert_int_eq(write(sv[0], "ping", 4), 4);
	ck_assert_int_eq(poll(&pfd, 1, 60000), 1);
	ck_assert_int_eq(afio_poll(ctx, 0, 0), 1);
	ck_assert_int_eq(r[0].res, 4);

	/* A completion after a poll that left the eventfd as it was: a loop
	   that sleeps on it hears of it (a lost wake-up fails the poll). */
	ck_assert_int_eq(afio_recv(ctx, sv[1], in[1], sizeof(in[1]), 0, tu_on_done, &r[1]), 0);
	ck_assert_int_eq(afio_submit(ctx), 1);
	ck_assert_int_eq(write(sv[0], "pong", 4), 4);
	while (!r[1].calls) {
		ck_assert_int_eq(poll(&pfd, 1, 60000), 1);
		ck_assert_int_ge(afio_poll(ctx, 0, 0), 0);
	}
	ck_assert_int_eq(r[1].res, 4);

	/* A poll that waits for a silent peer clears it before it sleeps:
	   a readable eventfd would end every wait at once, and the poll
	   would spin until its timeout without ever sleeping. */
	ck_assert_int_eq(afio_recv(ctx, sv[1], in[2], sizeof(in[2]), 0, tu_on_done, &r[2]), 0);
	slept = tu_voluntary_switches();
	ck_assert_int_eq(afio_poll(ctx, 1, 200), 0);
	ck_assert_int_gt(tu_voluntary_switches() - slept, 0);
	ck_assert(!fd_readable(efd));
	ck_assert_int_eq(r[2].calls, 0);
	afio_destroy(ctx);
	ck_assert_int_eq(r[2].calls, 1);
	ck_assert_int_eq(r[2].res, -ECANCELED);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/*
 * An event loop on an edge-triggered epoll that calls afio_poll(ctx, 0, 0)
 * once per wake-up, the strictest there is: every round of chains that
 * submit their next request from the callback must give it a new edge,
 * though the eventfd is read once when a burst ends, not before each look
 * (nops: the kernel's CQEs or the core's; file reads: also the pool's
 * workers, whose results come in while other callbacks run).  When the
 * chains are over the eventfd goes quiet: at once after nops, within a
 * few empty polls after reads (a worker may tell of a result after the
 * poll that ran it) or with AFIO_LAZY_EVENTFD.
 */
#define CHAINS 4
#define CHAIN_LENGTH 500
#define CHAIN_SILENCE_MS 10000	/* far more than a round takes: an edge was lost */

struct evfd_chain {
	afio_ctx *ctx;
	int fd;			/* -1: nops */
	char buf[512];
	int left;
	ssize_t res;
};

static int evfd_chain_issue(struct evfd_chain *c);

static void evfd_chain_step(void *data, ssize_t res)
{
	struct evfd_chain *c = data;

	if (res < 0 && !c->res)
		c->res = res;
	if (--c->left > 0)
		ck_assert_int_eq(evfd_chain_issue(c), 0);
	/* Long enough for another chain's read to finish meanwhile. */
	if (c->fd >= 0)
		usleep(100);
}

static int evfd_chain_issue(struct evfd_chain *c)
{
	if (c->fd < 0)
		return afio_nop(c->ctx, evfd_chain_step, c);
	return afio_read(c->ctx, c->fd, c->buf, sizeof(c->buf), 0, evfd_chain_step, c);
}

static int chains_left(const struct evfd_chain *c)
{
	int left = 0;

	for (int i = 0; i < CHAINS; i++)
		left += c[i].left;
	return left;
}

static void run_chains_edge_triggered(int fd, unsigned flags)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
	struct evfd_chain c[CHAINS];
	afio_ctx *ctx = tu_ctx_flagged(target_backend, target_mode, 0, flags);
	int ep = epoll_create1(EPOLL_CLOEXEC), efd = afio_eventfd(ctx), empty = 0;

	ck_assert_int_ge(ep, 0);
	ck_assert_int_ge(efd, 0);
	ck_assert_int_eq(epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev), 0);
	for (int i = 0; i < CHAINS; i++) {
		c[i] = (struct evfd_chain){ .ctx = ctx, .fd = fd, .left = CHAIN_LENGTH };
		ck_assert_int_eq(evfd_chain_issue(&c[i]), 0);
	}
	ck_assert_int_ge(afio_submit(ctx), 0);
	while (chains_left(c)) {
		ck_assert_msg(tu_wait_edge(ep, CHAIN_SILENCE_MS) == 1,
			      "no edge for %d ms with %d of %d requests to go",
			      CHAIN_SILENCE_MS, chains_left(c), CHAINS * CHAIN_LENGTH);
		ck_assert_int_ge(afio_poll(ctx, 0, 0), 0);
	}
	for (int i = 0; i < CHAINS; i++)
		ck_assert_int_eq(c[i].res, 0);
	/* Lazily cleared, it may stay readable until a poll finds nothing. */
	if (fd < 0 && !(flags & AFIO_LAZY_EVENTFD))
		ck_assert(!fd_readable(efd));
	while (fd_readable(efd) && empty++ < 3)
		ck_assert_int_eq(afio_poll(ctx, 0, 0), 0);
	ck_assert(!fd_readable(efd));
	close(ep);
	afio_destroy(ctx);
}

/* What the eventfd holds, read without taking it (its fdinfo). */
static uint64_t eventfd_count(int efd)
{
	char path[64], line[128];
	unsigned long long count = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", efd);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "eventfd-count: %llx", &count) == 1)
			break;
	fclose(f);
	return count;
}

/*
 * The same chains, watched level-triggered with poll(2) and
 * AFIO_LEVEL_EVENTFD: no wake-up lost, and where the core completes the
 * nops (no kernel writes the eventfd for them) the chains cost a write or
 * two, not one per poll as for an edge-triggered watcher.
 */
static void run_chains_level_triggered(int fd, unsigned flags)
{
	struct evfd_chain c[CHAINS];
	afio_ctx *ctx = tu_ctx_flagged(target_backend, target_mode, 0, flags);
	struct pollfd pfd = { .fd = afio_eventfd(ctx), .events = POLLIN };
	unsigned polls = 0;
	uint64_t writes = 0;
	int empty = 0;

	ck_assert_int_ge(pfd.fd, 0);
	for (int i = 0; i < CHAINS; i++) {
		c[i] = (struct evfd_chain){ .ctx = ctx, .fd = fd, .left = CHAIN_LENGTH };
		ck_assert_int_eq(evfd_chain_issue(&c[i]), 0);
	}
	ck_assert_int_ge(afio_submit(ctx), 0);
	while (chains_left(c)) {
		ck_assert_msg(poll(&pfd, 1, CHAIN_SILENCE_MS) == 1,
			      "not readable for %d ms with %d of %d requests to go",
			      CHAIN_SILENCE_MS, chains_left(c), CHAINS * CHAIN_LENGTH);
		/* Not read while the chains go on: it counts the writes. */
		if (eventfd_count(pfd.fd) > writes)
			writes = eventfd_count(pfd.fd);
		ck_assert_int_ge(afio_poll(ctx, 0, 0), 0);
		polls++;
	}
	for (int i = 0; i < CHAINS; i++)
		ck_assert_int_eq(c[i].res, 0);
	if (fd < 0 && afio_backend(ctx) != AFIO_BACKEND_IO_URING) {
		if (flags & AFIO_LEVEL_EVENTFD)
			ck_assert_msg(writes <= 2, "%llu eventfd writes in %u polls",
				      (unsigned long long)writes, polls);
		else
			ck_assert_uint_ge(writes, polls / 2);
	}
	while (fd_readable(pfd.fd) && empty++ < 3)
		ck_assert_int_eq(afio_poll(ctx, 0, 0), 0);
	ck_assert(!fd_readable(pfd.fd));
	afio_destroy(ctx);
}

START_TEST(test_eventfd_level_triggered_chains)
{
	int fd = new_file();
	char block[512] = { 1 };

	ck_assert_int_eq(pwrite(fd, block, sizeof(block), 0), (ssize_t)sizeof(block));
	for (unsigned lazy = 0; lazy <= AFIO_LAZY_EVENTFD; lazy += AFIO_LAZY_EVENTFD) {
		run_chains_level_triggered(-1, lazy);
		run_chains_level_triggered(-1, lazy | AFIO_LEVEL_EVENTFD);
		run_chains_level_triggered(fd, lazy | AFIO_LEVEL_EVENTFD);
	}
	close(fd);
}
END_TEST

START_TEST(test_eventfd_edge_triggered_chains)
{
	int fd = new_file();
	char block[512] = { 1 };

	ck_assert_int_eq(pwrite(fd, block, sizeof(block), 0), (ssize_t)sizeof(block));
	/* AFIO_LAZY_EVENTFD leaves it readable more often, never with fewer
	   edges. */
	for (unsigned lazy = 0; lazy <= AFIO_LAZY_EVENTFD; lazy += AFIO_LAZY_EVENTFD) {
		run_chains_edge_triggered(-1, lazy);
		run_chains_edge_triggered(fd, lazy);
	}
	close(fd);
}
END_TEST

#define MANY_READS 20000
#define MANY_ENTRIES 64
#define MANY_BLOCKS 256

static unsigned char many_calls[MANY_READS];
/* A buffer of its own for every read: with several pool workers they
   finish out of order, and one read can still be in flight when many
   queued after it are done. */
static unsigned char many_buf[MANY_READS][64];
static ssize_t many_res[MANY_READS];

static void on_many(void *data, ssize_t res)
{
	uintptr_t i = (uintptr_t)data;

	many_calls[i]++;
	many_res[i] = res;
}

START_TEST(test_many_reads)
{
	afio_ctx *ctx = new_ctx(MANY_ENTRIES);
	struct afio_stats st;
	unsigned char block[4096];
	int fd = new_file();
	unsigned next = 0;

	for (int b = 0; b < MANY_BLOCKS; b++) {
		memset(block, b, sizeof(block));
		ck_assert_int_eq(pwrite(fd, block, sizeof(block), (off_t)b * 4096), 4096);
	}
	while (next < MANY_READS) {
		uint64_t off = (uint64_t)(next % MANY_BLOCKS) * 4096 + 100;
		int ret = afio_read(ctx, fd, many_buf[next], 64, off, on_many,
				    (void *)(uintptr_t)next);

		if (ret == -EAGAIN) {
			ck_assert_int_eq(afio_stats(ctx, &st), 0);
			ck_assert_uint_eq(st.in_flight, MANY_ENTRIES);
			ck_assert_int_ge(afio_poll(ctx, 1, -1), 1);
			continue;
		}
		ck_assert_int_eq(ret, 0);
		next++;
	}
	tu_drain(ctx);
	for (unsigned i = 0; i < MANY_READS; i++) {
		ck_assert_msg(many_calls[i] == 1, "read %u completed %d times", i, many_calls[i]);
		ck_assert_int_eq(many_res[i], 64);
		ck_assert_msg(many_buf[i][0] == (unsigned char)(i % MANY_BLOCKS) &&
			      many_buf[i][63] == (unsigned char)(i % MANY_BLOCKS),
			      "read %u got the bytes of block %u", i, many_buf[i][0]);
	}
	ck_assert_int_eq(afio_stats(ctx, &st), 0);
	ck_assert_uint_eq(st.submitted, MANY_READS);
	ck_assert_uint_eq(st.completed, MANY_READS);
	afio_destroy(ctx);
	close(fd);
}
END_TEST

struct chain {
	afio_ctx *ctx;
	int fd;
	int left;
	int errors;
	char buf[256];
};

static void on_chain(void *data, ssize_t res)
{
	struct chain *c = data;

	if (res != (ssize_t)sizeof(c->buf) || afio_poll(c->ctx, 0, 0) != -EBUSY)
		c->errors++;
	if (--c->left > 0 &&
	    afio_read(c->ctx, c->fd, c->buf, sizeof(c->buf), 0, on_chain, c))
		c->errors++;
}

START_TEST(test_resubmit_from_callback)
{
	struct chain c = { .ctx = new_ctx(1), .left = 50 };

	c.fd = new_file();
	memset(c.buf, 1, sizeof(c.buf));
	ck_assert_int_eq(pwrite(c.fd, c.buf, sizeof(c.buf), 0), sizeof(c.buf));
	ck_assert_int_eq(afio_read(c.ctx, c.fd, c.buf, sizeof(c.buf), 0, on_chain, &c), 0);
	while (c.left > 0)
		ck_assert_int_ge(afio_poll(c.ctx, 1, -1), 0);
	ck_assert_int_eq(c.errors, 0);
	afio_destroy(c.ctx);
	close(c.fd);
}
END_TEST

/* A chain that one afio_poll() must run to its end: each callback queues
   the next request (a read, or a nop), and nothing else would wake the
   poll for it. */
struct poll_chain {
	afio_ctx *ctx;
	int fd;
	bool nops;
	bool forever, stop;	/* forever: until stop */
	int ran, errors;
	char buf[256];
};

#define POLL_CHAIN 20

static void on_poll_chain(void *data, ssize_t res)
{
	struct poll_chain *c = data;
	int ret;

	if (res != (c->nops ? 0 : (ssize_t)sizeof(c->buf)))
		c->errors++;
	c->ran++;
	if (c->forever ? c->stop : c->ran == POLL_CHAIN)
		return;
	if (c->nops)
		ret = afio_nop(c->ctx, on_poll_chain, c);
	else
		ret = afio_read(c->ctx, c->fd, c->buf, sizeof(c->buf), 0, on_poll_chain, c);
	if (ret)
		c->errors++;
}

/* With a receive that waits for good in flight beside it, when asked:
   the poll must not sleep on that one. */
static void run_poll_chain(bool nops, bool beside_a_waiting_recv)
{
	struct poll_chain c = { .ctx = new_ctx(4), .nops = nops };
	struct tu_done recv_done = { 0 };
	char recv_buf[16];
	int sv[2], ret;

	c.fd = new_file();
	ck_assert_int_eq(pwrite(c.fd, c.buf, sizeof(c.buf), 0), sizeof(c.buf));
	if (beside_a_waiting_recv) {
		tu_socketpair(sv);
		ck_assert_int_eq(afio_recv(c.ctx, sv[0], recv_buf, sizeof(recv_buf), 0,
					   tu_on_done, &recv_done), 0);
	}
	on_poll_chain(&c, nops ? 0 : (ssize_t)sizeof(c.buf));
	c.ran = 0;
	ret = afio_poll(c.ctx, POLL_CHAIN, TU_HANG_MS);
	ck_assert_msg(ret == POLL_CHAIN && c.ran == POLL_CHAIN,
		      "%s: one afio_poll(%d) ran %d callbacks of the chain, returned %d",
		      tu_target_name(), POLL_CHAIN, c.ran, ret);
	ck_assert_int_eq(c.errors, 0);
	if (beside_a_waiting_recv) {
		ck_assert_int_eq(recv_done.calls, 0);
		ck_assert_int_eq(afio_cancel(c.ctx, &recv_done), 1);
		tu_wait_done(c.ctx, &recv_done);
		close(sv[0]);
		close(sv[1]);
	}
	afio_destroy(c.ctx);
	close(c.fd);
}

START_TEST(test_poll_runs_what_callbacks_queue)
{
	run_poll_chain(false, false);
	run_poll_chain(true, false);
}
END_TEST

START_TEST(test_poll_runs_what_callbacks_queue_beside_a_wait)
{
	run_poll_chain(false, true);
	run_poll_chain(true, true);
}
END_TEST

/* A chain that never ends does not hold afio_poll() past its timeout,
   however many callbacks it asks for. */
START_TEST(test_poll_chain_ends_at_the_timeout)
{
	for (int nops = 0; nops < 2; nops++) {
		struct poll_chain c = { .ctx = new_ctx(4), .nops = nops, .forever = true };
		int ret;

		c.fd = new_file();
		ck_assert_int_eq(pwrite(c.fd, c.buf, sizeof(c.buf), 0), sizeof(c.buf));
		on_poll_chain(&c, nops ? 0 : (ssize_t)sizeof(c.buf));
		/* The failure is a hang; how many ran depends on the load. */
		ret = afio_poll(c.ctx, UINT_MAX, 50);
		ck_assert_msg(ret >= 0, "%s: afio_poll(UINT_MAX, 50) over an endless chain: %d",
			      tu_target_name(), ret);
		c.stop = true;
		tu_drain(c.ctx);
		ck_assert_int_eq(c.errors, 0);
		afio_destroy(c.ctx);
		close(c.fd);
	}
}
END_TEST

#define ONE_FILE_WRITES 48

/* Over zeros, block i filled with i + 1, all handed to the backend. */
static void submit_block_writes(afio_ctx *ctx, int fd, unsigned char (*blocks)[4096],
				struct tu_done *d)
{
	unsigned char zero[4096] = { 0 };

	for (unsigned i = 0; i < ONE_FILE_WRITES; i++)
		ck_assert_int_eq(pwrite(fd, zero, sizeof(zero), (off_t)i * 4096), 4096);
	for (unsigned i = 0; i < ONE_FILE_WRITES; i++) {
		memset(blocks[i], (int)i + 1, sizeof(blocks[i]));
		ck_assert_int_eq(afio_write(ctx, fd, blocks[i], sizeof(blocks[i]),
					    (uint64_t)i * 4096, tu_on_done, &d[i]), 0);
	}
	ck_assert_int_ge(afio_submit(ctx), 0);
}

/* A block a write finished is its pattern; one it never started, zeros. */
static void check_block_writes(int fd, const struct tu_done *d)
{
	unsigned char got[4096], want[4096];

	for (unsigned i = 0; i < ONE_FILE_WRITES; i++) {
		ck_assert_msg(d[i].calls == 1, "write %u completed %d times", i, d[i].calls);
		ck_assert_msg(d[i].res == 4096 || d[i].res == -ECANCELED,
			      "write %u: %zd", i, d[i].res);
		memset(want, d[i].res == 4096 ? (int)i + 1 : 0, sizeof(want));
		ck_assert_int_eq(pread(fd, got, sizeof(got), (off_t)i * 4096), 4096);
		ck_assert_msg(!memcmp(got, want, sizeof(got)), "block %u: result %zd, data %u",
			      i, d[i].res, got[0]);
	}
}

/* Many writes to one file wait for each other (the pool runs them one after
   another): canceled there, the head of them or one behind, each still
   completes once, and only what completed with its length was written. */
START_TEST(test_cancel_writes_to_one_file)
{
	static unsigned char blocks[ONE_FILE_WRITES][4096];
	afio_ctx *ctx = new_ctx(64);
	struct tu_done d[ONE_FILE_WRITES] = { 0 };
	int fd = new_file();
	int ret;

	submit_block_writes(ctx, fd, blocks, d);
	for (unsigned i = 0; i < ONE_FILE_WRITES; i += 2) {
		ret = afio_cancel(ctx, &d[i]);
		ck_assert_msg(ret == 1 || ret == -ENOENT, "cancel %u: %d", i, ret);
	}
	tu_drain(ctx);
	for (unsigned i = 1; i < ONE_FILE_WRITES; i += 2)
		ck_assert_int_eq(d[i].res, 4096);
	check_block_writes(fd, d);
	afio_destroy(ctx);
	close(fd);
}
END_TEST

/* Destroyed with them queued: each completes once, before destroy returns. */
START_TEST(test_destroy_with_writes_to_one_file)
{
	static unsigned char blocks[ONE_FILE_WRITES][4096];
	afio_ctx *ctx = new_ctx(64);
	struct tu_done d[ONE_FILE_WRITES] = { 0 };
	int fd = new_file();

	submit_block_writes(ctx, fd, blocks, d);
	afio_destroy(ctx);
	check_block_writes(fd, d);
	close(fd);
}
END_TEST

struct in_order {
	int seq;		/* callbacks run so far */
	int read_at;		/* when the read's ran */
	int last_write_at;
};

static void on_write_in_order(void *data, ssize_t res)
{
	struct in_order *o = data;

	ck_assert_int_eq(res, 4096);
	o->last_write_at = o->seq++;
}

static void on_read_in_order(void *data, ssize_t res)
{
	struct in_order *o = data;

	ck_assert_int_eq(res, 4096);
	o->read_at = o->seq++;
}

/* With one worker, a read queued behind many writes to one file is not
   kept waiting until the file's last write (the pool runs those one after
   another, and what else is queued takes its turn between them). */
START_TEST(test_read_not_starved_by_writes_to_one_file)
{
	static unsigned char blocks[ONE_FILE_WRITES][4096];
	unsigned char in[4096];
	struct in_order o = { .read_at = -1, .last_write_at = -1 };
	int wfd = new_file(), rfd = new_file();
	afio_ctx *ctx = one_worker_ctx();

	memset(in, 7, sizeof(in));
	ck_assert_int_eq(pwrite(rfd, in, sizeof(in), 0), 4096);
	for (unsigned i = 0; i < ONE_FILE_WRITES; i++)
		ck_assert_int_eq(afio_write(ctx, wfd, blocks[i], sizeof(blocks[i]),
					    (uint64_t)i * 4096, on_write_in_order, &o), 0);
	ck_assert_int_eq(afio_read(ctx, rfd, in, sizeof(in), 0, on_read_in_order, &o), 0);
	tu_drain(ctx);
	ck_assert_int_eq(o.seq, ONE_FILE_WRITES + 1);
	/* On the pool all of them are handed over at once, in this order;
	   elsewhere the kernel orders them. */
	if (target_backend == AFIO_BACKEND_THREADS)
		ck_assert_msg(o.read_at < o.last_write_at, "the read finished %dth of %d",
			      o.read_at + 1, o.seq);
	afio_destroy(ctx);
	close(wfd);
	close(rfd);
}
END_TEST

START_TEST(test_stats_balance)
{
	afio_ctx *ctx = new_ctx(32);
	struct tu_done d[40] = { { 0 } };
	struct afio_stats st;
	char buf[40][128] = { "" }, in[8];
	int fd = new_file(), sv[2];

	tu_socketpair(sv);
	for (int i = 0; i < 30; i++)
		ck_assert_int_eq(afio_write(ctx, fd, buf[i], 128, (uint64_t)i * 128, tu_on_done, &d[i]), 0);
	ck_assert_int_eq(afio_recv(ctx, sv[1], in, sizeof(in), 0, tu_on_done, &d[30]), 0);
	ck_assert_int_eq(afio_fsync(ctx, fd, 0, tu_on_done, &d[31]), 0);
	ck_assert_int_eq(afio_stats(ctx, &st), 0);
	ck_assert_uint_eq(st.submitted, 32);
	ck_assert_uint_eq(st.in_flight, 32);
	ck_assert_int_eq(afio_cancel(ctx, &d[30]), 1);
	tu_drain(ctx);
	ck_assert_int_eq(afio_stats(ctx, &st), 0);
	ck_assert_uint_eq(st.submitted, st.completed);
	ck_assert_uint_eq(st.in_flight, 0);
	ck_assert_uint_eq(st.canceled, 1);
	for (int i = 0; i < 32; i++)
		ck_assert_int_eq(d[i].calls, 1);
	afio_destroy(ctx);
	close(fd);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* Destroy gives back every thread and fd, whatever was running. */
START_TEST(test_destroy_leaks_nothing)
{
	int fds, threads, sv[2], fd = new_file();
	struct tu_done r = { 0 }, w = { 0 };
	char in[16], out[4096] = "";
	afio_ctx *ctx;

	tu_socketpair(sv);
	tu_warm_up_threads();
	fds = tu_count_fds();
	threads = tu_count_threads_steady();
	ctx = new_ctx(0);
	ck_assert_int_eq(afio_recv(ctx, sv[1], in, sizeof(in), 0, tu_on_done, &r), 0);
	ck_assert_int_eq(afio_write(ctx, fd, out, sizeof(out), 0, tu_on_done, &w), 0);
	tu_wait_done(ctx, &w);
	afio_destroy(ctx);
	ck_assert_int_eq(r.calls, 1);
	ck_assert_int_eq(w.calls, 1);
	ck_assert_int_eq(tu_count_fds(), fds);
	ck_assert_int_eq(tu_count_threads_settled(threads), threads);
	close(fd);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* ---- fork ---- */

#define FORK_READS 4

struct forked {
	afio_ctx *ctx;
	int fd;
	int sock;
	struct tu_done recv, fsync, reads[FORK_READS];
};

/* Every call on the parent's context, in the child: which did not give
   -ECHILD (1-based), or 0. */
static int child_calls(struct forked *f)
{
	char buf[64] = "";
	struct iovec iov = { buf, sizeof(buf) };
	struct tu_done d = { 0 };
	struct afio_stats st;
	int got[] = {
		afio_read(f->ctx, f->fd, buf, sizeof(buf), 0, tu_on_done, &d),
		afio_write(f->ctx, f->fd, buf, sizeof(buf), 0, tu_on_done, &d),
		afio_readv(f->ctx, f->fd, &iov, 1, 0, tu_on_done, &d),
		afio_writev(f->ctx, f->fd, &iov, 1, 0, tu_on_done, &d),
		afio_fsync(f->ctx, f->fd, 0, tu_on_done, &d),
		afio_recv(f->ctx, f->sock, buf, sizeof(buf), 0, tu_on_done, &d),
		afio_send(f->ctx, f->sock, buf, sizeof(buf), 0, tu_on_done, &d),
		afio_submit(f->ctx),
		afio_poll(f->ctx, 1, 1000),
		afio_cancel(f->ctx, &f->recv),
		afio_eventfd(f->ctx),
		afio_stats(f->ctx, &st),
		afio_describe(f->ctx, buf, sizeof(buf)),
	};

	for (size_t i = 0; i < sizeof(got) / sizeof(got[0]); i++) {
		if (got[i] != -ECHILD) {
			fprintf(stderr, "child: call %zu gave %d, not -ECHILD\n", i + 1, got[i]);
			return (int)i + 1;
		}
	}
	return d.calls ? 20 : 0;
}

/* A context of the child's own works as anywhere. */
static int child_own_ctx(int fd)
{
	struct afio_config cfg;
	struct tu_done d = { 0 };
	char buf[16];
	afio_ctx *ctx;

	afio_config_init(&cfg);
	cfg.backend = target_backend;
	cfg.mode = target_mode;
	cfg.flags = AFIO_NO_FALLBACK;
	if (afio_create(&ctx, &cfg))
		return 30;
	if (afio_read(ctx, fd, buf, sizeof(buf), 0, tu_on_done, &d))
		return 31;
	while (!d.calls)
		if (afio_poll(ctx, 1, -1) < 0)
			return 32;
	afio_destroy(ctx);
	return d.res == sizeof(buf) && !memcmp(buf, "0123456789abcdef", 16) ? 0 : 33;
}

/*
 * AddressSanitizer's allocator has no fork handlers: a lock that another
 * thread held at fork() stays held in the child, and a child that frees or
 * allocates may wait for it for good (glibc's malloc takes care of fork;
 * POSIX promises a child of a threaded process only async-signal-safe
 * calls).  There the child makes only the calls that fail at once.
 * ThreadSanitizer cannot start threads in a child of a threaded process.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CHILD_MAY_ALLOCATE 0
#else
#define CHILD_MAY_ALLOCATE 1
#endif

/* Exits with 0, or with what went wrong; never returns. */
static void run_child(struct forked *f)
{
	int ret;

	/* A hang ends the child, not the test run. */
	signal(SIGALRM, SIG_DFL);
	alarm(30);
	ret = child_calls(f);
	if (ret || !CHILD_MAY_ALLOCATE)
		_exit(ret);
	/* The parent's requests are not the child's to complete. */
	afio_destroy(f->ctx);
	if (f->recv.calls || f->fsync.calls || f->reads[0].calls)
		_exit(40);
	_exit(child_own_ctx(f->fd));
}

static void wait_child(pid_t pid)
{
	int status;
	pid_t ret;

	do
		ret = waitpid(pid, &status, 0);
	while (ret < 0 && errno == EINTR);
	ck_assert_int_eq(ret, pid);
	ck_assert_msg(!WIFSIGNALED(status), "child killed by signal %d", WTERMSIG(status));
	ck_assert_msg(WIFEXITED(status) && !WEXITSTATUS(status),
		      "child exited with %d", WEXITSTATUS(status));
}

/*
 * A context belongs to the process that made it.  In a child of fork()
 * every call on it fails with -ECHILD and afio_destroy() returns without
 * touching the parent's kernel objects or threads; the parent's requests,
 * in flight across the fork, complete there once, and its context goes on.
 */
START_TEST(test_fork_child_gets_echild)
{
	struct forked f = { .ctx = new_ctx(0), .fd = new_file() };
	struct tu_done again = { 0 }, more = { 0 };
	char bufs[FORK_READS][16], in[16], buf[16];
	int sv[2];
	pid_t pid;

	tu_socketpair(sv);
	f.sock = sv[1];
	ck_assert_int_eq(pwrite(f.fd, "0123456789abcdef", 16, 0), 16);
	ck_assert_int_eq(afio_recv(f.ctx, sv[1], in, sizeof(in), 0, tu_on_done, &f.recv), 0);
	ck_assert_int_eq(afio_fsync(f.ctx, f.fd, 0, tu_on_done, &f.fsync), 0);
	for (int i = 0; i < FORK_READS; i++)
		ck_assert_int_eq(afio_read(f.ctx, f.fd, bufs[i], 16, 0, tu_on_done, &f.reads[i]), 0);
	ck_assert_int_eq(afio_submit(f.ctx), FORK_READS + 2);

	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid)
		run_child(&f);
	wait_child(pid);

	ck_assert_int_eq(write(sv[0], "ping", 4), 4);
	tu_drain(f.ctx);
	ck_assert_int_eq(f.recv.calls, 1);
	ck_assert_int_eq(f.recv.res, 4);
	ck_assert_int_eq(f.fsync.calls, 1);
	ck_assert_int_eq(f.fsync.res, 0);
	for (int i = 0; i < FORK_READS; i++) {
		ck_assert_int_eq(f.reads[i].calls, 1);
		ck_assert_int_eq(f.reads[i].res, 16);
	}

	/* And the parent's context does new work. */
	ck_assert_int_ge(afio_eventfd(f.ctx), 0);
	ck_assert_int_eq(afio_read(f.ctx, f.fd, buf, sizeof(buf), 0, tu_on_done, &again), 0);
	ck_assert_int_eq(afio_recv(f.ctx, sv[1], in, sizeof(in), 0, tu_on_done, &more), 0);
	ck_assert_int_eq(write(sv[0], "pong", 4), 4);
	tu_wait_done(f.ctx, &again);
	tu_wait_done(f.ctx, &more);
	ck_assert_int_eq(again.res, 16);
	ck_assert(!memcmp(buf, "0123456789abcdef", 16));
	ck_assert_int_eq(more.res, 4);
	ck_assert(!memcmp(in, "pong", 4));
	afio_destroy(f.ctx);
	close(f.fd);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* ---- order ---- */

#define ORDER_ROUNDS	50
#define ORDER_LEN	65536u
#define ORDER_SECOND	4096u

struct ordered {
	afio_ctx *ctx;
	int fd, errors;
	struct tu_done second;
	unsigned char first_bytes[ORDER_LEN], second_bytes[ORDER_SECOND];
};

/* The first write's callback queues the second, over its middle. */
static void on_first_write(void *data, ssize_t res)
{
	struct ordered *o = data;

	if (res != ORDER_LEN ||
	    afio_write(o->ctx, o->fd, o->second_bytes, ORDER_SECOND, ORDER_SECOND, tu_on_done,
		       &o->second))
		o->errors++;
}

/*
 * asyncfio(7), ORDER: requests are not ordered with each other, and the
 * way to order two writes is to queue the second from the callback of the
 * first.  Rounds of a write and an overlapping one queued so: the second
 * is on top every time, on every backend and mode.
 */
START_TEST(test_overlapping_write_from_callback_lands_on_top)
{
	static struct ordered o;
	unsigned char got[ORDER_LEN];

	o.ctx = new_ctx(0);
	o.fd = new_file();
	o.errors = 0;
	for (int i = 0; i < ORDER_ROUNDS; i++) {
		memset(o.first_bytes, 'a' + i % 26, sizeof(o.first_bytes));
		memset(o.second_bytes, 'A' + i % 26, sizeof(o.second_bytes));
		memset(&o.second, 0, sizeof(o.second));
		ck_assert_int_eq(afio_write(o.ctx, o.fd, o.first_bytes, ORDER_LEN, 0,
					    on_first_write, &o), 0);
		tu_wait_done(o.ctx, &o.second);
		ck_assert_int_eq(o.errors, 0);
		ck_assert_int_eq(o.second.res, ORDER_SECOND);
		ck_assert_int_eq(pread(o.fd, got, sizeof(got), 0), sizeof(got));
		memcpy(o.first_bytes + ORDER_SECOND, o.second_bytes, ORDER_SECOND);
		ck_assert_msg(!memcmp(got, o.first_bytes, sizeof(got)),
			      "round %d: the first write is on top of the second", i);
	}
	afio_destroy(o.ctx);
	close(o.fd);
}
END_TEST

/* ---- no count beyond what was asked for ---- */

/* res of a request that asked for len bytes: a count of at least one and
   at most len. */
static void expect_count(const char *op, ssize_t res, size_t len)
{
	ck_assert_msg(res > 0 && (size_t)res <= len, "%s of %zu: %zd", op, len, res);
}

/*
 * Every op that takes a length reports no more than it asked for: read,
 * write, readv, writev (the sum of their iovecs), readv2, writev2, send,
 * recv, sendmsg, recvmsg and sendfile.
 */
START_TEST(test_counts_within_length)
{
	enum { LEN = 3000 };
	static char out[LEN], in[2 * LEN];
	struct iovec wv[] = { { out, 1000 }, { out + 1000, LEN - 1000 } };
	struct iovec rv[] = { { in, 500 }, { in + 500, LEN - 500 } };
	struct msghdr wm = { .msg_iov = wv, .msg_iovlen = 2 };
	struct msghdr rm = { .msg_iov = rv, .msg_iovlen = 2 };
	afio_ctx *ctx = new_ctx(0);
	int fd = new_file(), sv[2];
	struct tu_done d;

#define COUNT(call, len) do {						\
		memset(&d, 0, sizeof(d));				\
		ck_assert_int_eq((call), 0);				\
		tu_wait_done(ctx, &d);					\
		ck_assert_int_eq(d.calls, 1);				\
		expect_count(#call, d.res, (len));			\
	} while (0)

	memset(out, 'x', sizeof(out));
	tu_socketpair(sv);
	COUNT(afio_write(ctx, fd, out, LEN, 0, tu_on_done, &d), LEN);
	COUNT(afio_writev(ctx, fd, wv, 2, LEN, tu_on_done, &d), LEN);
	COUNT(afio_writev2(ctx, fd, wv, 2, 2 * LEN, 0, tu_on_done, &d), LEN);
	COUNT(afio_read(ctx, fd, in, LEN, 0, tu_on_done, &d), LEN);
	COUNT(afio_readv(ctx, fd, rv, 2, 0, tu_on_done, &d), LEN);
	COUNT(afio_readv2(ctx, fd, rv, 2, LEN, 0, tu_on_done, &d), LEN);
	COUNT(afio_send(ctx, sv[0], out, LEN, 0, tu_on_done, &d), LEN);
	COUNT(afio_sendmsg(ctx, sv[0], &wm, 0, tu_on_done, &d), LEN);
	COUNT(afio_sendfile(ctx, sv[0], fd, 0, LEN, tu_on_done, &d), LEN);
	/* 3 * LEN bytes wait in the socket: each receive takes its length. */
	COUNT(afio_recv(ctx, sv[1], in, LEN, 0, tu_on_done, &d), LEN);
	COUNT(afio_recvmsg(ctx, sv[1], &rm, 0, tu_on_done, &d), LEN);
	COUNT(afio_recv(ctx, sv[1], in, LEN, MSG_WAITALL, tu_on_done, &d), LEN);
#undef COUNT
	afio_destroy(ctx);
	close(fd);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

static Suite *contract_suite(void)
{
	Suite *s = suite_create("contract");
	TCase *files = tcase_create("files");
	TCase *sockets = tcase_create("sockets");
	TCase *queue = tcase_create("queue");
	TCase *forks = tcase_create("fork");

	tcase_add_test(files, test_write_read_random);
	tcase_add_test(files, test_readv_writev);
	tcase_add_test(files, test_fsync_fdatasync);
	tcase_add_test(files, test_read_past_eof);
	tcase_add_test(files, test_closed_fd);
	tcase_add_test(files, test_bad_arguments);
	tcase_add_test(files, test_bad_config);
	tcase_add_test(sockets, test_send_recv);
	tcase_add_test(sockets, test_recv_waits_for_data);
	tcase_add_test(sockets, test_recv_after_peer_close);
	tcase_add_test(sockets, test_results_while_a_recv_waits);
	tcase_add_test(sockets, test_recv_keeps_its_socket);
	tcase_add_test(sockets, test_cancel_waiting_recv);
	tcase_add_test(sockets, test_cancel_queued);
	tcase_add_test(sockets, test_cancel_by_handle);
	tcase_add_test(sockets, test_cancel_handle_queued);
	tcase_add_test(sockets, test_limits);
	tcase_add_test(sockets, test_destroy_with_recv_pending);
	tcase_add_test(sockets, test_destroy_leaks_nothing);
	tcase_add_test(sockets, test_sock_flags_refused);
	tcase_add_test(sockets, test_recv_waitall);
	tcase_add_test(sockets, test_send_waitall);
	tcase_add_test(sockets, test_send_closed_peer);
	tcase_add_test(sockets, test_read_pipe_and_socket);
	tcase_add_test(sockets, test_write_widowed_pipe);
	tcase_add_test(queue, test_full_queue);
	tcase_add_test(queue, test_eventfd);
	tcase_add_test(queue, test_lazy_eventfd);
	tcase_add_test(queue, test_eventfd_taken_late);
	tcase_add_test(queue, test_wait_inside_poll);
	tcase_add_test(queue, test_poll_that_waits_runs_or_starts_queued);
	tcase_add_test(queue, test_waiting_workers_leave_one_for_the_queue);
	tcase_add_test(queue, test_eventfd_edge_triggered_chains);
	tcase_add_test(queue, test_eventfd_level_triggered_chains);
	tcase_add_test(queue, test_many_reads);
	tcase_add_test(queue, test_resubmit_from_callback);
	tcase_add_test(queue, test_poll_runs_what_callbacks_queue);
	tcase_add_test(queue, test_poll_runs_what_callbacks_queue_beside_a_wait);
	tcase_add_test(queue, test_poll_chain_ends_at_the_timeout);
	tcase_add_test(queue, test_cancel_writes_to_one_file);
	tcase_add_test(queue, test_destroy_with_writes_to_one_file);
	tcase_add_test(queue, test_read_not_starved_by_writes_to_one_file);
	tcase_add_test(queue, test_stats_balance);
	tcase_add_test(queue, test_overlapping_write_from_callback_lands_on_top);
	tcase_add_test(queue, test_counts_within_length);
	suite_add_tcase(s, files);
	suite_add_tcase(s, sockets);
	tcase_add_test(forks, test_fork_child_gets_echild);
	suite_add_tcase(s, queue);
	suite_add_tcase(s, forks);
	return s;
}

int main(int argc, char **argv)
{
	int ret;

	ret = tu_parse_target(argc, argv, AFIO_BACKEND_AUTO, &target_backend, &target_mode);
	if (ret)
		return ret;
	return tu_run_suite(contract_suite());
}
