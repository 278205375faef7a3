/* SPDX-License-Identifier: MIT */
/*
 * What a hostile or careless program does to a context: NULL where a
 * context or a configuration belongs, afio_destroy() from a callback,
 * descriptors closed and their numbers reused while requests wait, no
 * descriptor left for the library, the thread that submitted requests
 * exiting.  Each test here once found a hang, a crash or a wrong result.
 * meson runs it once per backend and mode (argv).
 */
#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "asyncfio.h"
#include "testutil.h"

static enum afio_backend target_backend;
static enum afio_mode target_mode;

/* How long a wait that should end at once may take before the test calls
   it a hang: a watchdog for lost completions, not a measure of speed. */
#define HANG_MS 20000

static afio_ctx *new_ctx(unsigned entries)
{
	return tu_ctx(target_backend, target_mode, entries);
}

/* Polls until d has completed, failing the test if that takes HANG_MS. */
static void wait_done_or_hang(afio_ctx *ctx, struct tu_done *d, const char *what)
{
	int64_t end = tu_now_ms() + HANG_MS;

	while (!d->calls) {
		ck_assert_msg(tu_now_ms() < end, "%s: no completion after %d ms", what, HANG_MS);
		ck_assert_int_ge(afio_poll(ctx, 1, 100), 0);
	}
}

/* ---- NULL where a context or a configuration belongs ---- */

START_TEST(test_null_context_and_config)
{
	afio_ctx *ctx = new_ctx(0);

	ck_assert_int_eq(afio_backend(ctx), target_backend);
	ck_assert_int_eq(afio_mode(ctx), target_mode);
	afio_destroy(ctx);
	ck_assert_int_eq((int)afio_backend(NULL), -EINVAL);
	ck_assert_int_eq((int)afio_mode(NULL), -EINVAL);
	afio_config_init(NULL);
	afio_destroy(NULL);
	ck_assert_int_eq(afio_eventfd(NULL), -EINVAL);
	ck_assert_int_eq(afio_poll(NULL, 0, 0), -EINVAL);
	ck_assert_int_eq(afio_submit(NULL), -EINVAL);
	ck_assert_int_eq(afio_cancel(NULL, NULL), -EINVAL);
	ck_assert_str_eq(afio_skip_reason(NULL, AFIO_BACKEND_IO_URING), "");
}
END_TEST

/* AFIO_MODE in the environment replaces INLINE, unless the program says
   that INLINE is its choice. */
START_TEST(test_mode_fixed_against_environment)
{
	struct afio_config cfg;
	afio_ctx *ctx = NULL;

	setenv("AFIO_MODE", "hybrid", 1);
	afio_config_init(&cfg);
	cfg.backend = target_backend;
	cfg.flags = AFIO_NO_FALLBACK;
	ck_assert_int_eq(afio_create(&ctx, &cfg), 0);
	ck_assert_int_eq(afio_mode(ctx), AFIO_MODE_HYBRID);
	afio_destroy(ctx);
	cfg.flags |= AFIO_MODE_FIXED;
	ck_assert_int_eq(afio_create(&ctx, &cfg), 0);
	ck_assert_int_eq(afio_mode(ctx), AFIO_MODE_INLINE);
	afio_destroy(ctx);
	unsetenv("AFIO_MODE");
}
END_TEST

/* ---- structures that grow: what a program of another version passes ---- */

#define GUARD 0x5a

static bool untouched(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != GUARD)
			return false;
	return true;
}

START_TEST(test_version)
{
	ck_assert_uint_eq(afio_version(), AFIO_VERSION);
	ck_assert_uint_eq(AFIO_VERSION, AFIO_VERSION_NUM(AFIO_VERSION_MAJOR, AFIO_VERSION_MINOR,
							 AFIO_VERSION_PATCH));
	ck_assert_uint_gt(AFIO_VERSION_NUM(0, 2, 0), AFIO_VERSION_NUM(0, 1, 9));
}
END_TEST

/*
 * A configuration from a later version, larger than this library's: the
 * library writes only as far as the program said, and creates a context
 * when the fields it does not know are 0, not otherwise.  One from 0.1
 * (size 0) and one made by the plain symbol work as they always did.
 */
START_TEST(test_config_of_other_sizes)
{
	struct {
		struct afio_config cfg;
		unsigned later[4];
		unsigned char guard[16];
	} big;
	struct afio_config old;
	afio_ctx *ctx = NULL;

	memset(&big, GUARD, sizeof(big));
	afio_config_init_sized(&big.cfg, offsetof(typeof(big), guard));
	ck_assert(untouched(big.guard, sizeof(big.guard)));
	ck_assert_uint_eq(big.cfg.size, offsetof(typeof(big), guard));
	ck_assert_uint_eq(big.later[3], 0);
	big.cfg.backend = target_backend;
	big.cfg.mode = target_mode;
	big.cfg.flags = AFIO_NO_FALLBACK;
	big.later[1] = 1;
	ck_assert_int_eq(afio_create(&ctx, &big.cfg), -EINVAL);
	big.later[1] = 0;
	ck_assert_int_eq(afio_create(&ctx, &big.cfg), 0);
	ck_assert_int_eq(afio_backend(ctx), target_backend);
	afio_destroy(ctx);

	memset(&old, GUARD, sizeof(old));
	(afio_config_init)(&old);
	ck_assert_int_eq(old.entries, 256);
	old.size = 0;
	old.backend = target_backend;
	old.mode = target_mode;
	old.flags = AFIO_NO_FALLBACK;
	ck_assert_int_eq(afio_create(&ctx, &old), 0);
	afio_destroy(ctx);
	old.size = 8;
	ck_assert_int_eq(afio_create(&ctx, &old), -EINVAL);
}
END_TEST

/* Stats into a structure smaller or larger than this library's: never a
   byte past its size, and what this library does not fill is 0. */
START_TEST(test_stats_of_other_sizes)
{
	afio_ctx *ctx = new_ctx(0);
	struct {
		struct afio_stats st;
		uint64_t later[2];
		unsigned char guard[16];
	} big;
	struct {
		uint64_t first[2];
		unsigned char guard[16];
	} small;
	struct afio_stats plain;

	memset(&big, GUARD, sizeof(big));
	ck_assert_int_eq(afio_stats_sized(ctx, &big.st, offsetof(typeof(big), guard)), 0);
	ck_assert(untouched(big.guard, sizeof(big.guard)));
	ck_assert_uint_eq(big.later[0], 0);
	ck_assert_uint_eq(big.later[1], 0);
	memset(&small, GUARD, sizeof(small));
	ck_assert_int_eq(afio_stats_sized(ctx, (struct afio_stats *)&small, sizeof(small.first)), 0);
	ck_assert(untouched(small.guard, sizeof(small.guard)));
	ck_assert_uint_eq(small.first[0], 0);
	ck_assert_int_eq((afio_stats)(ctx, &plain), 0);
	ck_assert_uint_eq(plain.submitted, 0);
	afio_destroy(ctx);
}
END_TEST

/* ---- afio_destroy() from a callback ---- */

/*
 * Freed memory is filled, so that a context used after it was freed reads
 * garbage and crashes instead of reading what was there (the Check child
 * then fails the test without AddressSanitizer too).
 */
static void poison_freed_memory(void)
{
	mallopt(M_PERTURB, 0xa5);
}

struct destroy_case {
	afio_ctx *ctx;
	int calls;		/* callbacks run, all requests */
	int in_destroy;		/* of those, while the callback's afio_destroy() ran */
	bool destroying;
	int late_queue;		/* afio_read() from the callback after afio_destroy() */
	struct tu_done silent;
	int fd;
	char buf[16][8];
};

static void count_call(void *data, ssize_t res)
{
	struct destroy_case *c = data;

	(void)res;
	c->calls++;
	c->in_destroy += c->destroying;
}

static void destroy_in_callback(void *data, ssize_t res)
{
	struct destroy_case *c = data;

	count_call(c, res);
	c->destroying = true;
	afio_destroy(c->ctx);
	c->destroying = false;
	c->late_queue = afio_read(c->ctx, c->fd, c->buf[0], 1, 0, count_call, c);
}

/*
 * A callback of afio_poll() destroys the context while a recv waits and
 * file reads are in flight.  The destroy happens when that afio_poll()
 * returns: every other callback runs once, none of them inside the
 * callback's afio_destroy(), and what the callback queues afterwards is
 * refused with -ESHUTDOWN.
 */
START_TEST(test_destroy_from_poll_callback)
{
	struct destroy_case c = { 0 };
	int sv[2];

	poison_freed_memory();
	c.ctx = new_ctx(0);
	c.fd = tu_tmpfile(0);
	ck_assert_int_ge(c.fd, 0);
	ck_assert_int_eq(pwrite(c.fd, "abcdefgh", 8, 0), 8);
	tu_socketpair(sv);
	ck_assert_int_eq(afio_recv(c.ctx, sv[0], c.buf[15], 8, 0, tu_on_done, &c.silent), 0);
	ck_assert_int_eq(afio_read(c.ctx, c.fd, c.buf[1], 8, 0, destroy_in_callback, &c), 0);
	for (int i = 2; i < 10; i++)
		ck_assert_int_eq(afio_read(c.ctx, c.fd, c.buf[i], 8, 0, count_call, &c), 0);
	ck_assert_int_ge(afio_poll(c.ctx, 9, HANG_MS), 1);
	ck_assert_int_eq(c.calls, 9);
	ck_assert_int_eq(c.in_destroy, 0);
	ck_assert_int_eq(c.late_queue, -ESHUTDOWN);
	ck_assert_int_eq(c.silent.calls, 1);
	ck_assert_int_eq(c.silent.res, -ECANCELED);
	close(sv[0]);
	close(sv[1]);
	close(c.fd);
}
END_TEST

static void destroy_again(void *data, ssize_t res)
{
	struct destroy_case *c = data;

	count_call(c, res);
	ck_assert_int_eq(res, -ECANCELED);
	afio_destroy(c->ctx);
	ck_assert_int_eq(afio_poll(c->ctx, 0, 0), -EBUSY);
}

/* A callback that afio_destroy() runs calls afio_destroy() again: the
   outer one finishes, once. */
START_TEST(test_destroy_from_destroy_callback)
{
	struct destroy_case c = { 0 };
	int sv[2];

	poison_freed_memory();
	c.ctx = new_ctx(0);
	tu_socketpair(sv);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(afio_recv(c.ctx, sv[0], c.buf[i], 8, 0, destroy_again, &c), 0);
	ck_assert_int_eq(afio_submit(c.ctx), 3);
	afio_destroy(c.ctx);
	ck_assert_int_eq(c.calls, 3);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* ---- a descriptor closed and its number reused under a waiting request ---- */

static unsigned reuse_races(void)
{
	const char *v = getenv("AFIO_ROBUST_RACES");

	return v && *v ? (unsigned)strtoul(v, NULL, 10) : 3000;
}

/*
 * A recv waits on a socket, or a read on a pipe (io_uring reads a pipe as
 * read(2) does), whose descriptor the program has closed, its number now
 * a regular file (asyncfio(7), CLOSING A DESCRIPTOR); then it is
 * canceled.  To catch the cancel while a kernel worker runs the request, a
 * byte arrives just before and is taken through another descriptor of the
 * same socket or pipe, so that the request wakes, finds nothing and goes
 * back to waiting.  Whatever the cancel meets, the request completes.
 */
/*
 * A descriptor that takes bytes without waiting, from the same socket or
 * pipe as fd.  Not a dup for a pipe: O_NONBLOCK on fd's own open file
 * would make io_uring give -EAGAIN instead of waiting.
 */
static int another_reader(int fd, bool on_pipe)
{
	char path[32];
	int other;

	if (on_pipe) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		other = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	} else {
		other = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	}
	ck_assert_int_ge(other, 0);
	return other;
}

static void steal_byte(int fd, bool on_pipe)
{
	char c;

	if (on_pipe)
		(void)!read(fd, &c, 1);
	else
		(void)!recv(fd, &c, 1, MSG_DONTWAIT);
}

static void race_reuse(bool on_pipe)
{
	afio_ctx *ctx = new_ctx(4);
	unsigned races = reuse_races();
	int file = tu_tmpfile(0);
	char in[4], what[80];
	int end[2], other;

	ck_assert_int_ge(file, 0);
	for (unsigned i = 0; i < races; i++) {
		struct tu_done d = { 0 };

		if (on_pipe)
			ck_assert_int_eq(pipe2(end, O_CLOEXEC), 0);
		else
			tu_socketpair(end);
		other = another_reader(end[0], on_pipe);
		if (on_pipe)
			ck_assert_int_eq(afio_read(ctx, end[0], in, sizeof(in), 0, tu_on_done, &d), 0);
		else
			ck_assert_int_eq(afio_recv(ctx, end[0], in, sizeof(in), 0, tu_on_done, &d), 0);
		ck_assert_int_eq(afio_submit(ctx), 1);
		/* Give a kernel worker the moment it takes to bind the request
		   to its file; one that has not yet is canceled as well. */
		if (i % 2)
			usleep(50);
		ck_assert_int_eq(dup2(file, end[0]), end[0]);
		ck_assert_int_eq(write(end[1], "x", 1), 1);
		steal_byte(other, on_pipe);
		afio_cancel(ctx, &d);
		snprintf(what, sizeof(what), "race %u: canceled %s on a reused fd", i,
			 on_pipe ? "pipe read" : "recv");
		wait_done_or_hang(ctx, &d, what);
		ck_assert_int_eq(d.calls, 1);
		/* Bound to the file: -ENOTSOCK or its end; threads and libaio
		   refuse a read of a pipe with -ESPIPE. */
		ck_assert_msg(d.res == -ECANCELED || d.res == 1 || d.res == 0 ||
			      d.res == -ENOTSOCK || d.res == -ESPIPE, "%s: %zd", what, d.res);
		close(other);
		close(end[0]);
		close(end[1]);
	}
	afio_destroy(ctx);
	close(file);
}

START_TEST(test_cancel_recv_whose_fd_was_reused)
{
	race_reuse(false);
}
END_TEST

START_TEST(test_cancel_pipe_read_whose_fd_was_reused)
{
	race_reuse(true);
}
END_TEST

/*
 * The pattern of a run that once did not end on io_uring ASYNC: in each
 * of several contexts, rounds of a MSG_WAITALL receive on a socket whose
 * number is then closed and taken by a file, one byte from the peer (the
 * receive takes it and waits for the rest), a cancel; then afio_destroy()
 * with whatever is still in flight.  Every request completes once and
 * every destroy returns, which a watchdog thread checks.
 */
#define REUSE_CONTEXTS	8
#define REUSE_ROUNDS	250

struct watchdog {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool done;
	const char *what;
};

static void *watch(void *arg)
{
	struct watchdog *w = arg;
	struct timespec until;
	int ret = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += HANG_MS / 1000;
	pthread_mutex_lock(&w->lock);
	while (!w->done && ret != ETIMEDOUT)
		ret = pthread_cond_timedwait(&w->wake, &w->lock, &until);
	if (!w->done) {
		fprintf(stderr, "%s: no return after %d ms\n", w->what, HANG_MS);
		abort();
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* afio_destroy(ctx), or the test fails (the process aborts) if it does not
   return within HANG_MS. */
static void destroy_or_hang(afio_ctx *ctx, const char *what)
{
	struct watchdog w = { .what = what };
	pthread_t t;

	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.wake, NULL);
	ck_assert_int_eq(pthread_create(&t, NULL, watch, &w), 0);
	afio_destroy(ctx);
	pthread_mutex_lock(&w.lock);
	w.done = true;
	pthread_cond_signal(&w.wake);
	pthread_mutex_unlock(&w.lock);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	pthread_cond_destroy(&w.wake);
	pthread_mutex_destroy(&w.lock);
}

START_TEST(test_destroy_after_cancels_on_reused_fds)
{
	static struct tu_done d[REUSE_ROUNDS];
	static char in[REUSE_ROUNDS][4];
	int file = open("/dev/null", O_RDONLY | O_CLOEXEC), sv[2];
	char what[64];

	ck_assert_int_ge(file, 0);

	for (int c = 0; c < REUSE_CONTEXTS; c++) {
		afio_ctx *ctx = new_ctx(REUSE_ROUNDS);

		memset(d, 0, sizeof(d));
		for (int i = 0; i < REUSE_ROUNDS; i++) {
			tu_socketpair(sv);
			ck_assert_int_eq(afio_recv(ctx, sv[0], in[i], sizeof(in[i]), MSG_WAITALL,
						   tu_on_done, &d[i]), 0);
			ck_assert_int_eq(afio_submit(ctx), 1);
			if (i % 2)
				ck_assert_int_ge(afio_poll(ctx, 0, 0), 0);
			ck_assert_int_eq(dup2(file, sv[0]), sv[0]);
			/* EPIPE: the receive had not yet taken the socket. */
			ck_assert(send(sv[1], "x", 1, MSG_NOSIGNAL) == 1 || errno == EPIPE);
			afio_cancel(ctx, &d[i]);
			/* Some complete here, the rest are left to the destroy. */
			ck_assert_int_ge(afio_poll(ctx, 0, i % 3 ? 0 : 1), 0);
			close(sv[0]);
			close(sv[1]);
		}
		snprintf(what, sizeof(what), "afio_destroy() of context %d", c);
		destroy_or_hang(ctx, what);
		for (int i = 0; i < REUSE_ROUNDS; i++)
			/* Bound to the socket: canceled, or its byte (and the end
			   once the peer is gone); to the file: ENOTSOCK; to no
			   fd, taken after the round closed it: EBADF. */
			ck_assert_msg(d[i].calls == 1 && (d[i].res == -ECANCELED || d[i].res == 1 ||
				      d[i].res == 0 || d[i].res == -ENOTSOCK || d[i].res == -EBADF),
				      "context %d round %d: %d calls, %zd", c, i, d[i].calls, d[i].res);
	}
	close(file);
}
END_TEST

/*
 * A MSG_WAITALL receive may take several transfers; it works on the socket
 * its call named from the call on, whatever the number names later.  The
 * program closes its number right after the submit, when a pool worker
 * is about to take the request: the receive still gets the peer's bytes,
 * and its own descriptor goes with it.
 */
START_TEST(test_waitall_keeps_its_socket)
{
	afio_ctx *ctx = new_ctx(0);
	struct tu_done d;
	char in[4];
	int sv[2], fds = 0;

	for (int i = 0; i < 20; i++) {
		/* From the second round: the first may start the pool. */
		if (i == 1)
			fds = tu_count_fds();
		memset(&d, 0, sizeof(d));
		tu_socketpair(sv);
		ck_assert_int_eq(afio_recv(ctx, sv[0], in, sizeof(in), MSG_WAITALL, tu_on_done, &d), 0);
		ck_assert_int_eq(afio_submit(ctx), 1);
		close(sv[0]);
		ck_assert_int_eq(send(sv[1], "ab", 2, MSG_NOSIGNAL), 2);
		usleep(1000);
		ck_assert_int_eq(send(sv[1], "cd", 2, MSG_NOSIGNAL), 2);
		tu_wait_once(ctx, &d, "a MSG_WAITALL receive whose number was closed");
		ck_assert_msg(d.res == 4 && !memcmp(in, "abcd", 4), "round %d: %s", i,
			      tu_res_str(d.res));
		close(sv[1]);
	}
	ck_assert_int_eq(tu_count_fds(), fds);
	afio_destroy(ctx);
}
END_TEST

/* ---- no descriptor left ---- */

struct fd_fill {
	struct rlimit old;
	int fds[1024];
	int n;
};

static int highest_fd(void)
{
	int top = -1;

	for (int fd = 0; fd < 4096; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			top = fd;
	return top;
}

/* Lowers RLIMIT_NOFILE to spare numbers above the highest open fd. */
static void lower_fd_limit(struct fd_fill *f, unsigned spare)
{
	struct rlimit rl;

	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &f->old), 0);
	rl = f->old;
	rl.rlim_cur = (rlim_t)highest_fd() + 1 + spare;
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	f->n = 0;
}

/* Takes every number below the limit, so that the next fd anyone opens
   fails with EMFILE. */
static void take_free_fds(struct fd_fill *f)
{
	int fd;

	while (f->n < 1024 && (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
		f->fds[f->n++] = fd;
	ck_assert_int_lt(f->n, 1024);
	ck_assert_int_lt(dup(0), 0);
}

static void use_up_fds(struct fd_fill *f)
{
	lower_fd_limit(f, 0);
	take_free_fds(f);
}

static void give_back_fds(struct fd_fill *f)
{
	while (f->n)
		close(f->fds[--f->n]);
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &f->old), 0);
}

#define IDLE_SOCKETS	8	/* twice the pool's workers */
#define FILE_OPS	40

/*
 * Socket requests that must wait, with no fd left for the library's dup
 * of the socket, and then file reads and fsyncs: the file requests
 * complete.  (ASYNC holds a worker per waiting socket by design.)  A
 * socket request waits without a worker or fails with -EMFILE; once
 * canceled, each completes once.
 */
START_TEST(test_no_fd_left_for_waiting_sockets)
{
	struct tu_done idle[IDLE_SOCKETS] = { 0 }, ops[FILE_OPS] = { 0 }, warm = { 0 };
	int sv[IDLE_SOCKETS][2], file, done;
	char in[IDLE_SOCKETS][4], buf[FILE_OPS][8];
	struct fd_fill fill;
	afio_ctx *ctx;

	if (target_mode == AFIO_MODE_ASYNC)
		return;
	ctx = new_ctx(0);
	file = tu_tmpfile(0);
	ck_assert_int_ge(file, 0);
	ck_assert_int_eq(pwrite(file, "abcdefgh", 8, 0), 8);
	/* Another backend's pool starts with its first request, not here. */
	ck_assert_int_eq(afio_read(ctx, file, buf[0], 8, 0, tu_on_done, &warm), 0);
	wait_done_or_hang(ctx, &warm, "read before");
	for (int i = 0; i < IDLE_SOCKETS; i++)
		tu_socketpair(sv[i]);

	use_up_fds(&fill);
	for (int i = 0; i < IDLE_SOCKETS; i++)
		ck_assert_int_eq(afio_recv(ctx, sv[i][0], in[i], sizeof(in[i]), 0,
					   tu_on_done, &idle[i]), 0);
	ck_assert_int_ge(afio_submit(ctx), 0);
	for (int i = 0; i < FILE_OPS; i++) {
		if (i % 2)
			ck_assert_int_eq(afio_fsync(ctx, file, 0, tu_on_done, &ops[i]), 0);
		else
			ck_assert_int_eq(afio_read(ctx, file, buf[i], 8, 0, tu_on_done, &ops[i]), 0);
	}
	for (int i = 0; i < FILE_OPS; i++)
		wait_done_or_hang(ctx, &ops[i], "file request with sockets waiting and no fd left");
	for (int i = 0; i < FILE_OPS; i++)
		ck_assert_int_eq(ops[i].res, i % 2 ? 0 : 8);
	for (int i = 0; i < IDLE_SOCKETS; i++) {
		afio_cancel(ctx, &idle[i]);
		wait_done_or_hang(ctx, &idle[i], "canceled recv");
		ck_assert_msg(idle[i].res == -ECANCELED || idle[i].res == -EMFILE,
			      "recv %d: %zd", i, idle[i].res);
	}
	give_back_fds(&fill);
	done = 0;
	for (int i = 0; i < IDLE_SOCKETS; i++) {
		done += idle[i].calls;
		close(sv[i][0]);
		close(sv[i][1]);
	}
	ck_assert_int_eq(done, IDLE_SOCKETS);
	afio_destroy(ctx);
	close(file);
}
END_TEST

/* ---- requests that cannot succeed fail at once, on every backend ---- */

/* A connected TCP pair on 127.0.0.1: MSG_OOB needs TCP. */
static void tcp_pair(int sv[2])
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(lfd, 0);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(lfd, 1), 0);
	ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&a, &len), 0);
	sv[1] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(sv[1], 0);
	ck_assert_int_eq(connect(sv[1], (struct sockaddr *)&a, len), 0);
	sv[0] = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(sv[0], 0);
	close(lfd);
}

/* recv(2) with MSG_OOB and no urgent data fails with EINVAL at once; a
   request must not wait for data that would not change that. */
START_TEST(test_recv_oob_without_urgent_data)
{
	afio_ctx *ctx = new_ctx(0);
	struct tu_done d = { 0 };
	char c;
	int sv[2];

	tcp_pair(sv);
	ck_assert_int_eq(afio_recv(ctx, sv[0], &c, 1, MSG_OOB, tu_on_done, &d), 0);
	wait_done_or_hang(ctx, &d, "MSG_OOB recv without urgent data");
	ck_assert_int_eq(d.res, -EINVAL);
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* An epoll fd is not a socket, and an afio_recv on it says so. */
START_TEST(test_recv_on_epoll_fd)
{
	afio_ctx *ctx = new_ctx(0);
	struct tu_done d = { 0 };
	int ep = epoll_create1(EPOLL_CLOEXEC);
	char c;

	ck_assert_int_ge(ep, 0);
	ck_assert_int_eq(afio_recv(ctx, ep, &c, 1, 0, tu_on_done, &d), 0);
	wait_done_or_hang(ctx, &d, "recv on an epoll fd");
	ck_assert_int_eq(d.res, -ENOTSOCK);
	afio_destroy(ctx);
	close(ep);
}
END_TEST

/*
 * The context's own eventfd is no file to read or write: on every backend
 * that is -ESPIPE, as pread(2) says, where io_uring would read it as
 * read(2) does, waiting for and then taking the wake-ups meant for the
 * program.
 */
START_TEST(test_read_write_own_eventfd)
{
	afio_ctx *ctx = new_ctx(0);
	struct tu_done d[2] = { 0 };
	uint64_t v = 1, w;

	ck_assert_int_eq(afio_read(ctx, afio_eventfd(ctx), &w, sizeof(w), 0, tu_on_done, &d[0]), 0);
	ck_assert_int_eq(afio_write(ctx, afio_eventfd(ctx), &v, sizeof(v), 0, tu_on_done, &d[1]), 0);
	wait_done_or_hang(ctx, &d[0], "read of the context's eventfd");
	wait_done_or_hang(ctx, &d[1], "write of the context's eventfd");
	ck_assert_int_eq(d[0].res, -ESPIPE);
	ck_assert_int_eq(d[1].res, -ESPIPE);
	afio_destroy(ctx);
}
END_TEST

/*
 * An epoll fd cannot be read at an offset: -ESPIPE, as pread(2) says.
 * io_uring reads what is not a regular file as read(2) would (afio_read(3))
 * but first waits for it to be readable, and for an epoll set read(2) then
 * fails with EINVAL: the request ends once the set has something ready, or
 * when it is canceled.
 */
START_TEST(test_read_epoll_fd)
{
	afio_ctx *ctx = new_ctx(0);
	struct epoll_event ev = { .events = EPOLLIN };
	struct tu_done d = { 0 };
	int ep = epoll_create1(EPOLL_CLOEXEC), sv[2];
	uint64_t v;

	ck_assert_int_ge(ep, 0);
	tu_socketpair(sv);
	ck_assert_int_eq(epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &ev), 0);
	ck_assert_int_eq(afio_read(ctx, ep, &v, sizeof(v), 0, tu_on_done, &d), 0);
	ck_assert_int_ge(afio_poll(ctx, 0, 0), 0);
	if (target_backend == AFIO_BACKEND_IO_URING) {
		ck_assert_int_eq(d.calls, 0);
		ck_assert_int_eq(write(sv[1], "x", 1), 1);
	}
	wait_done_or_hang(ctx, &d, "read of an epoll fd");
	ck_assert_int_eq(d.res, target_backend == AFIO_BACKEND_IO_URING ? -EINVAL : -ESPIPE);
	afio_destroy(ctx);
	close(ep);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* ---- what the core queue holds ---- */

/*
 * A sendfile that finishes at once while it is handed over (INLINE, a
 * non-blocking socket, a cached file) between other requests: those
 * queued behind it still go.  io_uring once finished it while it was still
 * linked in the queue, which cut off everything behind it for good.
 */
START_TEST(test_requests_behind_a_sendfile_done_at_once)
{
	afio_ctx *ctx = new_ctx(0);
	struct tu_done d[6] = { 0 };
	int file = tu_tmpfile(0), sv[2];
	char buf[6][8];

	ck_assert_int_ge(file, 0);
	ck_assert_int_eq(pwrite(file, "abcdefgh", 8, 0), 8);
	tu_socketpair(sv);
	ck_assert_int_eq(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
	for (int i = 0; i < 6; i++) {
		if (i == 1)
			ck_assert_int_eq(afio_sendfile(ctx, sv[0], file, 0, 8, tu_on_done, &d[i]), 0);
		else
			ck_assert_int_eq(afio_read(ctx, file, buf[i], 8, 0, tu_on_done, &d[i]), 0);
	}
	for (int i = 0; i < 6; i++) {
		wait_done_or_hang(ctx, &d[i], "a request queued behind a sendfile");
		ck_assert_int_eq(d[i].res, 8);
	}
	ck_assert_int_eq(recv(sv[1], buf[0], 8, MSG_DONTWAIT), 8);
	ck_assert(!memcmp(buf[0], "abcdefgh", 8));
	afio_destroy(ctx);
	close(file);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* Timers that expired, counted in the low half, and the others. */
static void count_timer(void *data, ssize_t res)
{
	*(long *)data += res == -ETIME ? 1 : 1L << 32;
}

static void count_canceled(void *data, ssize_t res)
{
	*(long *)data += res == -ECANCELED ? 1 : 1L << 32;
}

/* ---- io_uring's completion ring ---- */

#define MANY_TIMERS 30000

/* n timers that would wait a minute, each canceled while in the ring: a
   cancel each beside them, more than the completion ring has room for. */
static void cancel_every_entry(afio_ctx *ctx, unsigned n)
{
	struct afio_stats st;
	long done = 0;
	int64_t end;

	for (unsigned i = 0; i < n; i++)
		ck_assert_int_eq(afio_timeout(ctx, 60000000000ull, count_canceled, &done), 0);
	ck_assert_int_ge(afio_poll(ctx, 0, 0), 0);
	ck_assert_int_eq(afio_cancel(ctx, &done), (int)n);
	end = tu_now_ms() + HANG_MS;
	while (done < n) {
		ck_assert_msg(tu_now_ms() < end, "%ld of %u canceled timers after %d ms", done, n,
			      HANG_MS);
		ck_assert_int_ge(afio_poll(ctx, n, 100), 0);
	}
	ck_assert_int_eq(done, n);
	ck_assert_int_eq(afio_stats(ctx, &st), 0);
	ck_assert_uint_eq(st.canceled, n);
}

/*
 * The completion ring has room for a completion per entry and a few more
 * for cancels (up to the kernel's 65536), so that none waits on the
 * kernel's overflow list; past that, requests wait in the queue: 30000
 * timers in flight through an 8-entry submission ring all expire, once
 * each, and are canceled at once without overflowing it.
 */
START_TEST(test_completion_ring_holds_what_is_in_flight)
{
	struct afio_config cfg;
	struct afio_stats st;
	char desc[256], want[32];
	afio_ctx *ctx;
	long done = 0;
	int64_t end;

	if (target_backend != AFIO_BACKEND_IO_URING)
		return;
	afio_config_init(&cfg);
	cfg.backend = target_backend;
	cfg.mode = target_mode;
	cfg.entries = 4096;
	cfg.ring_entries = 8;
	ctx = tu_create(&cfg);
	ck_assert_int_gt(afio_describe(ctx, desc, sizeof(desc)), 0);
	ck_assert_msg(strstr(desc, "sq=8 cq=8192 "), "%s", desc);
	cancel_every_entry(ctx, cfg.entries);
	afio_destroy(ctx);
	cfg.entries = 1u << 16;
	ctx = tu_create(&cfg);
	ck_assert_int_gt(afio_describe(ctx, desc, sizeof(desc)), 0);
	snprintf(want, sizeof(want), "cq=%u ", 65536);
	ck_assert_msg(strstr(desc, want), "%s", desc);
	for (int i = 0; i < MANY_TIMERS; i++)
		ck_assert_int_eq(afio_timeout(ctx, 1000000, count_timer, &done), 0);
	end = tu_now_ms() + HANG_MS;
	while (done < MANY_TIMERS) {
		ck_assert_msg(tu_now_ms() < end, "%ld of %d timers after %d ms", done, MANY_TIMERS,
			      HANG_MS);
		ck_assert_int_ge(afio_poll(ctx, MANY_TIMERS, 100), 0);
	}
	ck_assert_int_eq(afio_stats(ctx, &st), 0);
	ck_assert_uint_eq(st.completed, MANY_TIMERS);
	afio_destroy(ctx);
}
END_TEST

/* ---- SQPOLL, driven by the eventfd alone ---- */

#define SQPOLL_CANCELS 2000

/*
 * With AFIO_SQPOLL a cancel can miss a recv on its way to a poll wait.  A
 * program that sleeps on the eventfd, and calls afio_poll() only with no
 * wait when it is readable, still sees each canceled recv complete.
 */
START_TEST(test_sqpoll_cancel_with_eventfd_alone)
{
	struct afio_config cfg;
	struct pollfd pfd = { .events = POLLIN };
	char in[4], what[64];
	afio_ctx *ctx = NULL;
	int sv[2];

	if (target_backend != AFIO_BACKEND_IO_URING)
		return;
	afio_config_init(&cfg);
	cfg.backend = target_backend;
	cfg.mode = target_mode;
	cfg.entries = 4;
	cfg.flags = AFIO_NO_FALLBACK | AFIO_SQPOLL;
	if (afio_create(&ctx, &cfg)) {
		printf("SQPOLL refused here: not tested\n");
		return;
	}
	pfd.fd = afio_eventfd(ctx);
	tu_socketpair(sv);
	for (int i = 0; i < SQPOLL_CANCELS; i++) {
		struct tu_done d = { 0 };

		ck_assert_int_eq(afio_recv(ctx, sv[0], in, sizeof(in), 0, tu_on_done, &d), 0);
		ck_assert_int_eq(afio_submit(ctx), 1);
		ck_assert_int_eq(afio_cancel(ctx, &d), 1);
		snprintf(what, sizeof(what), "cancel %d, with the eventfd alone", i);
		int64_t end = tu_now_ms() + HANG_MS;

		while (!d.calls) {
			ck_assert_msg(tu_now_ms() < end, "%s: no completion after %d ms", what,
				      HANG_MS);
			if (poll(&pfd, 1, 100) == 1)
				ck_assert_int_ge(afio_poll(ctx, 0, 0), 0);
		}
		ck_assert_int_eq(d.res, -ECANCELED);
	}
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* ---- the thread that submitted requests exits ---- */

struct exiting {
	afio_ctx *ctx;
	int sock, file;
	char in[8], buf[8];
	struct tu_done recv, read;
};

static void *submit_and_exit(void *arg)
{
	struct exiting *x = arg;

	ck_assert_int_eq(afio_recv(x->ctx, x->sock, x->in, 4, MSG_WAITALL, tu_on_done, &x->recv), 0);
	ck_assert_int_eq(afio_read(x->ctx, x->file, x->buf, 8, 0, tu_on_done, &x->read), 0);
	ck_assert_int_eq(afio_submit(x->ctx), 2);
	return NULL;
}

/*
 * A thread takes the context, submits a recv and a read, and exits; the
 * main thread goes on with the context.  The requests complete as if the
 * thread were still there: the recv with the bytes that come after the
 * thread is gone, the read with the file's.  (io_uring cancels what a
 * thread submitted when it exits; the library submits it again.)
 */
START_TEST(test_requests_outlive_their_thread)
{
	struct exiting x = { 0 };
	pthread_t t;
	int sv[2];

	x.ctx = new_ctx(0);
	x.file = tu_tmpfile(0);
	ck_assert_int_ge(x.file, 0);
	ck_assert_int_eq(pwrite(x.file, "abcdefgh", 8, 0), 8);
	tu_socketpair(sv);
	x.sock = sv[0];
	ck_assert_int_eq(pthread_create(&t, NULL, submit_and_exit, &x), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	/* Let the kernel finish with the thread before the bytes come. */
	ck_assert_int_ge(afio_poll(x.ctx, 0, 10), 0);
	ck_assert_int_eq(write(sv[1], "ping", 4), 4);
	wait_done_or_hang(x.ctx, &x.read, "read of a thread that exited");
	wait_done_or_hang(x.ctx, &x.recv, "recv of a thread that exited");
	ck_assert_int_eq(x.read.res, 8);
	ck_assert(!memcmp(x.buf, "abcdefgh", 8));
	ck_assert_int_eq(x.recv.res, 4);
	ck_assert(!memcmp(x.in, "ping", 4));
	afio_destroy(x.ctx);
	close(sv[0]);
	close(sv[1]);
	close(x.file);
}
END_TEST

/*
 * A sendfile submitted by a thread that exits while the socket is full.
 * io_uring cancels the thread's requests at its exit: the splice into the
 * socket that an io-wq worker was blocked in ends with the kernel's
 * ERESTARTSYS, a step not yet started with -ECANCELED.
 */
#define EXIT_SF_LEN	(256 * 1024)
#define EXIT_SF_ROUNDS	20

struct exiting_sendfile {
	afio_ctx *ctx;
	int sock, file;
	bool linger;
	struct tu_done d;
};

static void *sendfile_and_exit(void *arg)
{
	struct exiting_sendfile *x = arg;

	ck_assert_int_eq(afio_sendfile(x->ctx, x->sock, x->file, 0, EXIT_SF_LEN, tu_on_done,
				       &x->d), 0);
	ck_assert_int_eq(afio_submit(x->ctx), 1);
	/* linger: the moment a kernel worker takes to be in the splice when
	   the thread goes, the case that ended with ERESTARTSYS; else the
	   thread goes before the kernel has begun. */
	if (x->linger)
		usleep(2000);
	return NULL;
}

static unsigned char *pattern_file(int *fd, size_t len)
{
	unsigned char *bytes = malloc(len);

	ck_assert_ptr_nonnull(bytes);
	for (size_t i = 0; i < len; i++)
		bytes[i] = (unsigned char)(i * 7 + i / 251);
	*fd = tu_tmpfile(0);
	ck_assert_int_ge(*fd, 0);
	ck_assert_int_eq(pwrite(*fd, bytes, len, 0), (ssize_t)len);
	return bytes;
}

/* Fills fd's send buffer (and the peer's receive buffer); returns how
   many bytes that took. */
static size_t fill_socket(int fd)
{
	static char junk[65536];
	int fl = fcntl(fd, F_GETFL);
	size_t n = 0;
	ssize_t got;

	ck_assert_int_eq(fcntl(fd, F_SETFL, fl | O_NONBLOCK), 0);
	while ((got = send(fd, junk, sizeof(junk), MSG_DONTWAIT)) > 0)
		n += (size_t)got;
	ck_assert_int_eq(fcntl(fd, F_SETFL, fl), 0);
	return n;
}

/* Reads from the peer of sender until the callback d has run, and then,
   the sender shut down, to the end of the stream; what came after the
   first skip bytes goes to out (up to out_len).  Returns how much came
   after skip. */
static size_t read_while_waiting(afio_ctx *ctx, int sender, int peer, struct tu_done *d,
				 size_t skip, unsigned char *out, size_t out_len)
{
	static unsigned char buf[65536];
	size_t total = 0, kept = 0;
	bool shut = false;
	ssize_t n;

	for (int idle = 0;; ) {
		if (d->calls && !shut) {
			ck_assert_int_eq(shutdown(sender, SHUT_WR), 0);
			shut = true;
		}
		n = recv(peer, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0)
			break;
		if (n > 0) {
			for (ssize_t i = 0; i < n; i++, total++)
				if (total >= skip && kept < out_len)
					out[kept++] = buf[i];
			idle = 0;
			continue;
		}
		ck_assert_int_eq(errno, EAGAIN);
		ck_assert_msg(++idle < HANG_MS, "no end of the stream after %d ms", HANG_MS);
		ck_assert_int_ge(afio_poll(ctx, 0, 1), 0);
	}
	return total - skip;
}

/*
 * The sendfile of a thread that exited while the (blocking) socket was
 * full completes once the peer reads, with a count of what it sent, never
 * a code of the kernel's own (io_uring gave -512 "Unknown error 512"), and
 * the peer gets the file's bytes from its start, each once.
 */
START_TEST(test_sendfile_outlives_its_thread)
{
	struct exiting_sendfile x = { 0 };
	unsigned char *bytes = pattern_file(&x.file, EXIT_SF_LEN);
	unsigned char *got = malloc(EXIT_SF_LEN);
	char what[64];
	pthread_t t;
	int sv[2];

	ck_assert_ptr_nonnull(got);
	x.ctx = new_ctx(0);
	x.linger = true;
	for (int i = 0; i < EXIT_SF_ROUNDS; i++) {
		size_t before, after;

		snprintf(what, sizeof(what), "round %d", i);
		tcp_pair(sv);
		x.sock = sv[1];
		memset(&x.d, 0, sizeof(x.d));
		before = fill_socket(x.sock);
		ck_assert_int_eq(pthread_create(&t, NULL, sendfile_and_exit, &x), 0);
		ck_assert_int_eq(pthread_join(t, NULL), 0);
		ck_assert_int_ge(afio_poll(x.ctx, 0, 0), 0);
		after = read_while_waiting(x.ctx, x.sock, sv[0], &x.d, before, got, EXIT_SF_LEN);
		ck_assert_int_eq(x.d.calls, 1);
		ck_assert_msg(x.d.res > 0 && x.d.res <= EXIT_SF_LEN, "%s: sendfile of %d: %zd",
			      what, EXIT_SF_LEN, x.d.res);
		ck_assert_msg(after == (size_t)x.d.res, "%s: the peer got %zu bytes, the "
			      "callback said %zd", what, after, x.d.res);
		ck_assert_msg(!memcmp(got, bytes, after), "%s: not the file's bytes", what);
		close(sv[0]);
		close(sv[1]);
	}
	afio_destroy(x.ctx);
	close(x.file);
	free(bytes);
	free(got);
}
END_TEST

/*
 * One slot (a context of 1 entry): a sendfile of a thread that exited on
 * a full socket, canceled before or after its first completions were
 * reaped, and then a plain sendfile in the same slot to a reading peer.
 * The second sends its range once and says so: a step the first had
 * lost (io_uring) was once left in the slot, and the second sent its
 * range again and reported twice its length.
 */
START_TEST(test_sendfile_after_canceled_one_of_a_gone_thread)
{
	enum { SECOND = 1000 };
	struct exiting_sendfile x = { 0 };
	unsigned char *bytes = pattern_file(&x.file, EXIT_SF_LEN);
	unsigned char got[2 * SECOND];
	char what[64];
	pthread_t t;
	int sv[2];

	x.ctx = new_ctx(1);
	for (int i = 0; i < 2 * EXIT_SF_ROUNDS; i++) {
		struct tu_done d = { 0 };
		size_t n;

		snprintf(what, sizeof(what), "round %d", i);
		tcp_pair(sv);
		x.sock = sv[1];
		memset(&x.d, 0, sizeof(x.d));
		ck_assert_int_eq(fcntl(x.sock, F_SETFL, O_NONBLOCK), 0);
		fill_socket(x.sock);
		ck_assert_int_eq(pthread_create(&t, NULL, sendfile_and_exit, &x), 0);
		ck_assert_int_eq(pthread_join(t, NULL), 0);
		if (i % 2)
			ck_assert_int_ge(afio_poll(x.ctx, 0, 0), 0);
		afio_cancel(x.ctx, &x.d);
		wait_done_or_hang(x.ctx, &x.d, what);
		ck_assert_msg(x.d.res == -ECANCELED || (x.d.res > 0 && x.d.res <= EXIT_SF_LEN),
			      "%s: canceled sendfile: %zd", what, x.d.res);
		close(sv[0]);
		close(sv[1]);

		tcp_pair(sv);
		ck_assert_int_eq(afio_sendfile(x.ctx, sv[1], x.file, 0, SECOND, tu_on_done, &d), 0);
		n = read_while_waiting(x.ctx, sv[1], sv[0], &d, 0, got, sizeof(got));
		ck_assert_msg(d.res == SECOND && n == SECOND, "%s: a sendfile of %d after it: "
			      "%zd, the peer got %zu", what, SECOND, d.res, n);
		ck_assert_msg(!memcmp(got, bytes, SECOND), "%s: not the file's bytes", what);
		close(sv[0]);
		close(sv[1]);
	}
	afio_destroy(x.ctx);
	close(x.file);
	free(bytes);
}
END_TEST

struct exiting_connect {
	afio_ctx *ctx;
	int sock;
	struct sockaddr_in addr;
	struct tu_done d;
};

static void *connect_and_exit(void *arg)
{
	struct exiting_connect *x = arg;

	ck_assert_int_eq(afio_connect(x->ctx, x->sock, (struct sockaddr *)&x->addr,
				      sizeof(x->addr), tu_on_done, &x->d), 0);
	ck_assert_int_eq(afio_submit(x->ctx), 1);
	return NULL;
}

/*
 * A connect submitted by a thread that exits while its SYN goes
 * unanswered (the listener's queue is full): once the queue has room and
 * the SYN is sent again, the connect completes with 0, as it would had
 * the thread stayed (io_uring gave -ECANCELED).
 */
START_TEST(test_connect_outlives_its_thread)
{
	struct exiting_connect x = { 0 };
	socklen_t len = sizeof(x.addr);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), first, s;
	pthread_t t;

	x.addr.sin_family = AF_INET;
	x.addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_ge(l, 0);
	ck_assert_int_eq(bind(l, (struct sockaddr *)&x.addr, sizeof(x.addr)), 0);
	/* Backlog 0 holds one connection; a SYN beyond it is dropped. */
	ck_assert_int_eq(listen(l, 0), 0);
	ck_assert_int_eq(getsockname(l, (struct sockaddr *)&x.addr, &len), 0);
	first = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(connect(first, (struct sockaddr *)&x.addr, len), 0);
	x.ctx = new_ctx(0);
	x.sock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(x.sock, 0);
	ck_assert_int_eq(pthread_create(&t, NULL, connect_and_exit, &x), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_ge(afio_poll(x.ctx, 0, 10), 0);
	s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(s, 0);
	close(s);
	wait_done_or_hang(x.ctx, &x.d, "connect of a thread that exited");
	ck_assert_int_eq(x.d.calls, 1);
	ck_assert_int_eq(x.d.res, 0);
	s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(s, 0);
	afio_destroy(x.ctx);
	close(s);
	close(x.sock);
	close(first);
	close(l);
}
END_TEST

/* ---- a cancel reaches every request on a blocking socket ---- */

/* Runs fn(arg) on a thread and fails the test if it has not returned
   after HANG_MS: a watchdog for a call stuck for good. */
static void run_or_hang(void *(*fn)(void *), void *arg, const char *what)
{
	struct timespec until;
	pthread_t t;

	ck_assert_int_eq(pthread_create(&t, NULL, fn, arg), 0);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += HANG_MS / 1000;
	ck_assert_msg(pthread_timedjoin_np(t, NULL, &until) == 0, "%s did not return after %d ms",
		      what, HANG_MS);
}

#define BLOCKING_SENDFILES 24
#define BLOCKING_FILE_LEN (1u << 20)
#define BLOCKING_ROUNDS 12

struct blocking_round {
	afio_ctx *ctx;
	int calls;
	ssize_t odd;		/* a result neither -ECANCELED nor a count in range */
	int sv[2];
	int file;
	bool clear_nonblock;	/* the program's own flags change under it */
};

/* A TCP pair whose buffers hold little: SO_RCVBUF before connect fixes the
   window, SO_SNDBUF keeps the sender's from growing. */
static void small_tcp_pair(int sv[2])
{
	int small = 64 << 10;

	tcp_pair(sv);
	ck_assert_int_eq(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	ck_assert_int_eq(setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
}

static void on_blocking_sendfile(void *data, ssize_t res)
{
	struct blocking_round *b = data;

	b->calls++;
	if (res != -ECANCELED && (res < 0 || res > BLOCKING_FILE_LEN))
		b->odd = res;
}

static void *cancel_and_destroy(void *arg)
{
	struct blocking_round *b = arg;
	char sink[16 << 10];
	size_t got = 0;
	int ret;

	ck_assert_int_ge(afio_submit(b->ctx), 0);
	for (int i = 0; i < 20; i++)
		ck_assert_int_ge(afio_poll(b->ctx, 0, 1), 0);
	if (b->clear_nonblock) {
		/* Another holder of the open file makes it blocking, and
		   the peer reads some: the socket has room again. */
		ck_assert_int_eq(fcntl(b->sv[0], F_SETFL, 0), 0);
		for (int i = 0; i < 1000; i++) {
			ssize_t n = recv(b->sv[1], sink, sizeof(sink), MSG_DONTWAIT);

			if (n < 0 && errno == EAGAIN && got)
				break;
			if (n < 0 && errno == EAGAIN)
				ck_assert_int_ge(afio_poll(b->ctx, 0, 1), 0);
			else
				ck_assert_int_gt(n, 0);
			got += n > 0 ? (size_t)n : 0;
		}
		for (int i = 0; i < 20; i++)
			ck_assert_int_ge(afio_poll(b->ctx, 0, 1), 0);
	}
	ret = afio_cancel(b->ctx, b);
	ck_assert_msg(ret >= 0 || ret == -ENOENT, "afio_cancel: %s", strerror(-ret));
	for (int i = 0; i < 4; i++)
		ck_assert_int_ge(afio_poll(b->ctx, 0, 0), 0);
	afio_destroy(b->ctx);
	return NULL;
}

/*
 * Many sendfiles of a large file on one socket whose peer reads nothing,
 * then cancel and destroy; with clear_nonblock, the socket starts
 * non-blocking and the program clears O_NONBLOCK while they wait.  The
 * pool once set O_NONBLOCK on the open file for one call, another worker
 * took the flag for the program's and called sendfile(2) directly, and
 * that call blocked in the kernel for good, out of reach of any cancel;
 * destroy never returned.  Every request completes once, with at most its
 * length.
 */
static void sendfiles_on_blocking_socket(bool clear_nonblock)
{
	static char chunk[64 << 10];
	struct blocking_round b;

	memset(chunk, 'x', sizeof(chunk));
	for (int round = 0; round < BLOCKING_ROUNDS; round++) {
		memset(&b, 0, sizeof(b));
		b.clear_nonblock = clear_nonblock;
		b.file = tu_tmpfile(0);
		ck_assert_int_ge(b.file, 0);
		for (unsigned off = 0; off < BLOCKING_FILE_LEN; off += sizeof(chunk))
			ck_assert_int_eq(pwrite(b.file, chunk, sizeof(chunk), off), sizeof(chunk));
		small_tcp_pair(b.sv);
		if (clear_nonblock)
			ck_assert_int_eq(fcntl(b.sv[0], F_SETFL, O_NONBLOCK), 0);
		b.ctx = new_ctx(BLOCKING_SENDFILES);
		for (int i = 0; i < BLOCKING_SENDFILES; i++)
			ck_assert_int_eq(afio_sendfile(b.ctx, b.sv[0], b.file, 0, BLOCKING_FILE_LEN,
						       on_blocking_sendfile, &b), 0);
		run_or_hang(cancel_and_destroy, &b, "cancel and destroy of sendfiles on a blocking socket");
		ck_assert_int_eq(b.calls, BLOCKING_SENDFILES);
		ck_assert_msg(!b.odd, "round %d: a sendfile said %zd", round, b.odd);
		close(b.sv[0]);
		close(b.sv[1]);
		close(b.file);
	}
}

START_TEST(test_cancel_sendfiles_on_blocking_socket)
{
	sendfiles_on_blocking_socket(false);
}
END_TEST

START_TEST(test_cancel_sendfiles_after_nonblock_cleared)
{
	sendfiles_on_blocking_socket(true);
}
END_TEST

/* ---- buffer pools and multishot requests ---- */

#define MAX_SHOTS	16

/* Every completion of one request, in order; a completion after the last
   one fails the test. */
struct shots {
	afio_ctx *ctx;
	unsigned pool;
	bool release;		/* give each buffer back from the callback */
	struct shots *peer;
	afio_handle other;	/* the peer's: canceled by the first callback of the two */
	int other_ret;
	bool canceled_peer;
	struct fd_fill *fill;	/* used up by the first callback */
	int n, finals;
	ssize_t res[MAX_SHOTS];
	unsigned flags[MAX_SHOTS];
	char got[MAX_SHOTS][8];
};

static void on_shot(void *data, ssize_t res, unsigned flags)
{
	struct shots *s = data;

	ck_assert_msg(!s->finals, "a completion after the last one (res %zd)", res);
	ck_assert_int_lt(s->n, MAX_SHOTS);
	s->res[s->n] = res;
	s->flags[s->n] = flags;
	if (flags & AFIO_CQE_BUFFER) {
		ck_assert_int_gt(res, 0);
		memcpy(s->got[s->n], afio_buf(s->ctx, s->pool, afio_cqe_buf(flags)),
		       (size_t)res < sizeof(s->got[0]) ? (size_t)res : sizeof(s->got[0]));
		if (s->release)
			ck_assert_int_eq(afio_buf_release(s->ctx, s->pool, afio_cqe_buf(flags)), 0);
	}
	if (s->fill && !s->n && res >= 0) {
		close((int)res);
		take_free_fds(s->fill);
	}
	if (s->other && !s->n && !s->peer->n) {
		s->other_ret = afio_cancel_handle(s->ctx, s->other);
		s->canceled_peer = true;
	}
	s->n++;
	if (!(flags & AFIO_CQE_MORE))
		s->finals++;
}

static void wait_shots_or_hang(afio_ctx *ctx, struct shots *s, int n, const char *what)
{
	int64_t end = tu_now_ms() + HANG_MS;

	while (s->n < n) {
		ck_assert_msg(tu_now_ms() < end, "%s: %d of %d completions after %d ms", what,
			      s->n, n, HANG_MS);
		ck_assert_int_ge(afio_poll(ctx, 1, 100), 0);
	}
}

static void nothing_in_flight(afio_ctx *ctx)
{
	struct afio_stats st;

	ck_assert_int_eq(afio_stats(ctx, &st), 0);
	ck_assert_uint_eq(st.in_flight, 0);
}

/* Nothing is left in flight; the context goes, and the two pairs. */
static void end_with_pairs(afio_ctx *ctx, int sa[2], int sb[2])
{
	nothing_in_flight(ctx);
	afio_destroy(ctx);
	close(sa[0]);
	close(sa[1]);
	close(sb[0]);
	close(sb[1]);
}

/*
 * A multishot accept that finds no descriptor left ends with one last
 * -EMFILE, not a completion per try: the connection stays in the backlog,
 * and a request that went on would fail at once again, for ever.
 */
START_TEST(test_multishot_accept_without_fds)
{
	struct shots s = { 0 };
	struct sockaddr_in addr;
	int lfd = tu_tcp_listener(8, true, &addr), c1 = tu_tcp_socket(false);
	int c2 = tu_tcp_socket(false);
	struct fd_fill fill;
	afio_ctx *ctx = new_ctx(0);

	s.ctx = ctx;
	s.fill = &fill;
	/* Lowered before the accept starts, since the kernel's own multishot
	   accept keeps the limit it started with; the numbers below it are
	   used up from the first callback. */
	lower_fd_limit(&fill, 8);
	ck_assert_int_eq(afio_accept_multishot(ctx, lfd, SOCK_CLOEXEC, on_shot, &s), 0);
	tu_connect_to(c1, &addr);
	wait_shots_or_hang(ctx, &s, 1, "multishot accept");
	ck_assert_int_ge(s.res[0], 0);
	ck_assert_uint_eq(s.flags[0], AFIO_CQE_MORE);
	tu_connect_to(c2, &addr);
	wait_shots_or_hang(ctx, &s, 2, "multishot accept with no fd left");
	ck_assert_int_eq(s.res[1], -EMFILE);
	ck_assert_uint_eq(s.flags[1], 0);
	ck_assert_int_eq(afio_poll(ctx, 1, 50), 0);
	ck_assert_int_eq(s.n, 2);
	nothing_in_flight(ctx);
	give_back_fds(&fill);
	afio_destroy(ctx);
	close(c1);
	close(c2);
	close(lfd);
}
END_TEST

/* A pooled receive, single or multishot, whose fd the program closes
   while it waits: data for the socket comes all the same; it ends once,
   canceled, on a bad fd, or (where the kernel holds the file while the
   request waits, as io_uring does) with the byte in a buffer. */
static void pooled_recv_on_closed_fd(unsigned how)
{
	struct shots s = { 0 };
	afio_ctx *ctx = new_ctx(0);
	int sv[2];

	s.ctx = ctx;
	s.pool = 0;
	s.release = true;
	ck_assert_int_eq(afio_bufpool_create(ctx, 2, 8, &s.pool), 0);
	tu_socketpair(sv);
	ck_assert_int_eq(afio_recv_pooled(ctx, sv[0], s.pool, 0, how, on_shot, &s), 0);
	ck_assert_int_ge(afio_poll(ctx, 0, 0), 0);
	close(sv[0]);
	/* Its peer is gone unless the library holds the socket. */
	(void)!send(sv[1], "x", 1, MSG_NOSIGNAL);
	ck_assert_int_ge(afio_poll(ctx, 1, 50), 0);
	if (!s.finals)
		afio_cancel(ctx, &s);
	wait_shots_or_hang(ctx, &s, 1, "pooled receive on a closed fd");
	if (!s.finals)
		afio_cancel(ctx, &s);
	while (!s.finals)
		ck_assert_int_ge(afio_poll(ctx, 1, 50), 0);
	for (int i = 0; i < s.n - 1; i++)
		ck_assert_msg(s.res[i] == 1 && s.flags[i] & AFIO_CQE_BUFFER, "res %zd", s.res[i]);
	/* -ENOTSOCK: the number went to a pool worker's file meanwhile. */
	ck_assert_msg(s.res[s.n - 1] == -ECANCELED || s.res[s.n - 1] == -EBADF ||
		      s.res[s.n - 1] == -ENOTSOCK ||
		      (s.res[s.n - 1] == 1 && (s.flags[s.n - 1] & AFIO_CQE_BUFFER)),
		      "res %zd, flags %#x", s.res[s.n - 1], s.flags[s.n - 1]);
	ck_assert_uint_eq(s.flags[s.n - 1] & AFIO_CQE_MORE, 0);
	ck_assert_int_eq(afio_poll(ctx, 1, 20), 0);
	nothing_in_flight(ctx);
	afio_destroy(ctx);
	close(sv[1]);
}

START_TEST(test_pooled_recv_on_closed_fd)
{
	pooled_recv_on_closed_fd(0);
	pooled_recv_on_closed_fd(AFIO_RECV_MULTISHOT);
}
END_TEST

/*
 * One buffer for two receives: the second parks until the first one's
 * buffer comes back, given back from its callback or, later, outside
 * afio_poll(); either way the parked receive then completes with its data.
 */
static void release_unparks(bool from_callback)
{
	struct shots a = { 0 }, b = { 0 };
	afio_ctx *ctx = new_ctx(0);
	unsigned pool = 0;
	int sa[2], sb[2];

	ck_assert_int_eq(afio_bufpool_create(ctx, 1, 8, &pool), 0);
	a = (struct shots){ .ctx = ctx, .pool = pool, .release = from_callback };
	b = (struct shots){ .ctx = ctx, .pool = pool, .release = true };
	tu_socketpair(sa);
	tu_socketpair(sb);
	ck_assert_int_eq(afio_recv_pooled(ctx, sa[0], pool, 0, 0, on_shot, &a), 0);
	ck_assert_int_eq(write(sa[1], "abc", 3), 3);
	wait_shots_or_hang(ctx, &a, 1, "pooled receive");
	ck_assert_int_eq(a.res[0], 3);
	ck_assert_int_eq(memcmp(a.got[0], "abc", 3), 0);
	ck_assert_int_eq(afio_recv_pooled(ctx, sb[0], pool, 0, 0, on_shot, &b), 0);
	ck_assert_int_eq(write(sb[1], "defg", 4), 4);
	if (!from_callback) {
		/* The pool is empty: it waits for the buffer. */
		ck_assert_int_ge(afio_poll(ctx, 1, 50), 0);
		ck_assert_int_eq(b.n, 0);
		ck_assert_int_eq(afio_buf_release(ctx, pool, afio_cqe_buf(a.flags[0])), 0);
	}
	wait_shots_or_hang(ctx, &b, 1, "receive parked until a buffer came back");
	ck_assert_int_eq(b.res[0], 4);
	ck_assert_uint_eq(b.flags[0] & ~(0xffffu << AFIO_CQE_BUF_SHIFT), AFIO_CQE_BUFFER);
	ck_assert_int_eq(memcmp(b.got[0], "defg", 4), 0);
	ck_assert_int_eq(afio_buf_release(ctx, pool, 0), -EALREADY);
	end_with_pairs(ctx, sa, sb);
}

/*
 * A pooled receive whose socket was readable, but whose bytes another
 * thread took before the core could read them, waits again: it is queued
 * once more.  When that happens in the reap on the way out of afio_poll()
 * (the eventfd read there, then a look), after the poll's last submit, it
 * must still reach its engine: nothing else would wake a loop for it, and
 * the next byte would never come.  The window is widened by slowing the
 * owner's eventfd reads (this file's read() stands in for libc's) while a
 * thread writes a byte and takes it back, over and over.
 */
#define ANY_EVENTFD (-2)	/* a context's own, not exported: an 8-byte read */
/* Workers call read() too: all of it atomic. */
static atomic_int slow_read_fd = -1, slow_read_tid;
static atomic_bool slow_reads, in_slow_read;
static ssize_t (*_Atomic libc_read)(int, void *, size_t);

ssize_t read(int fd, void *buf, size_t n)
{
	ssize_t (*real)(int, void *, size_t) = atomic_load(&libc_read);
	int slow_fd = atomic_load(&slow_read_fd);

	if (!real) {
		real = (ssize_t (*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
		atomic_store(&libc_read, real);
	}
	if ((fd == slow_fd || (slow_fd == ANY_EVENTFD && n == sizeof(uint64_t))) &&
	    atomic_load(&slow_reads) && (int)syscall(SYS_gettid) == atomic_load(&slow_read_tid)) {
		atomic_store(&in_slow_read, true);
		usleep(1000);
	}
	return real(fd, buf, n);
}

/*
 * The test stops the thief before it sends the byte that must stay: it
 * bumps pauses after clearing taking, and waits until the thief says it
 * saw that pause with taking clear (pauses read first).  A plain "idle"
 * flag would not do: one set from a look at taking just before a round
 * began lets the test go on while the thief, in the round's next pass,
 * takes that byte.
 */
struct thief {
	int sv[2];
	atomic_bool taking, stop;
	atomic_uint pauses, paused;
};

static void *take_back_bytes(void *arg)
{
	struct thief *t = arg;
	char byte = 't', sink[64];

	while (!atomic_load(&t->stop)) {
		unsigned pauses = atomic_load(&t->pauses);

		if (!atomic_load(&t->taking)) {
			atomic_store(&t->paused, pauses);
			usleep(50);
			continue;
		}
		(void)!write(t->sv[0], &byte, 1);
		usleep(30);
		(void)!recv(t->sv[1], sink, sizeof(sink), MSG_DONTWAIT);
		usleep(100);
	}
	return NULL;
}

struct requeued_recv {
	afio_ctx *ctx;
	unsigned pool;
	bool armed;
	int calls;
	ssize_t first_error;
};

static void on_requeued_recv(void *data, ssize_t res, unsigned flags)
{
	struct requeued_recv *q = data;

	q->armed = false;
	q->calls++;
	if (flags & AFIO_CQE_BUFFER)
		ck_assert_int_eq(afio_buf_release(q->ctx, q->pool, afio_cqe_buf(flags)), 0);
	else if (res < 0 && !q->first_error)
		q->first_error = res;
}

#define REQUEUE_ROUNDS 60
#define REQUEUE_SILENCE_MS 10000

START_TEST(test_pooled_recv_requeued_on_the_way_out)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
	struct requeued_recv q = { .ctx = new_ctx(0) };
	struct tu_done nop;
	struct thief t;
	pthread_t thread;
	int ep = epoll_create1(EPOLL_CLOEXEC);

	ck_assert_int_ge(ep, 0);
	ck_assert_int_eq(afio_bufpool_create(q.ctx, 4, 64, &q.pool), 0);
	memset(&t, 0, sizeof(t));
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, t.sv), 0);
	atomic_store(&slow_read_fd, afio_eventfd(q.ctx));
	atomic_store(&slow_read_tid, (int)syscall(SYS_gettid));
	ck_assert_int_eq(epoll_ctl(ep, EPOLL_CTL_ADD, afio_eventfd(q.ctx), &ev), 0);
	ck_assert_int_eq(pthread_create(&thread, NULL, take_back_bytes, &t), 0);
	for (int round = 0; round < REQUEUE_ROUNDS; round++) {
		unsigned pause;
		int calls;

		if (!q.armed) {
			ck_assert_int_eq(afio_recv_pooled(q.ctx, t.sv[1], q.pool, 0, 0,
							  on_requeued_recv, &q), 0);
			q.armed = true;
		}
		/* Finished outside afio_poll(): the eventfd is known readable. */
		memset(&nop, 0, sizeof(nop));
		ck_assert_int_eq(afio_nop(q.ctx, tu_on_done, &nop), 0);
		ck_assert_int_ge(afio_submit(q.ctx), 0);
		atomic_store(&t.taking, true);
		atomic_store(&slow_reads, true);
		while (!nop.calls) {
			ck_assert_msg(tu_wait_edge(ep, REQUEUE_SILENCE_MS) == 1,
				      "round %d: no edge for the nop", round);
			ck_assert_int_ge(afio_poll(q.ctx, 0, 0), 0);
		}
		atomic_store(&slow_reads, false);
		atomic_store(&t.taking, false);
		pause = atomic_fetch_add(&t.pauses, 1) + 1;
		while (atomic_load(&t.paused) != pause)
			usleep(20);
		if (!q.armed)
			continue;
		/* A byte nobody takes: the receive, armed, must get it. */
		calls = q.calls;
		ck_assert_int_eq(write(t.sv[0], "b", 1), 1);
		while (q.calls == calls) {
			ck_assert_msg(tu_wait_edge(ep, REQUEUE_SILENCE_MS) == 1,
				      "round %d: the pooled receive never got its byte", round);
			ck_assert_int_ge(afio_poll(q.ctx, 0, 0), 0);
		}
	}
	atomic_store(&t.stop, true);
	pthread_join(thread, NULL);
	ck_assert_int_eq(q.first_error, 0);
	afio_destroy(q.ctx);
	atomic_store(&slow_read_fd, -1);
	close(t.sv[0]);
	close(t.sv[1]);
	close(ep);
}
END_TEST

/*
 * The same, for a program that waits in afio_poll(ctx, 1, timeout), the
 * eventfd its own: the reap just before the poll sleeps on it may queue
 * the receive again, and it must go before the sleep, or the byte that
 * comes next wakes nothing.  While the owner's eventfd read is held up,
 * another thread makes the socket readable and takes the byte back; then
 * it sends one that stays.
 */
static void *steal_then_send(void *arg)
{
	int *sv = arg;
	char sink[8];

	while (!atomic_load(&in_slow_read))
		usleep(10);
	(void)!write(sv[0], "s", 1);
	usleep(300);		/* the pool sees it readable and tells the owner */
	(void)!recv(sv[1], sink, sizeof(sink), MSG_DONTWAIT);
	usleep(3000);		/* the owner's reap, then its sleep */
	(void)!write(sv[0], "k", 1);
	return NULL;
}

#define LATE_BYTE_ROUNDS 20

START_TEST(test_pooled_recv_requeued_before_the_sleep)
{
	struct requeued_recv q;
	pthread_t thread;
	char sink[64];
	int sv[2];

	/* Only where the owner sleeps on its eventfd: beside libaio's pool
	   (ASYNC).  io_uring waits in the kernel, on a receive from its
	   buffer ring; libaio too otherwise, in io_getevents() on the
	   receive's readiness poll; the pool, alone, on a futex its
	   workers wake. */
	if (target_backend != AFIO_BACKEND_LIBAIO || target_mode != AFIO_MODE_ASYNC)
		return;
	q = (struct requeued_recv){ .ctx = new_ctx(0) };
	ck_assert_int_eq(afio_bufpool_create(q.ctx, 4, 64, &q.pool), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
	atomic_store(&slow_read_fd, ANY_EVENTFD);
	atomic_store(&slow_read_tid, (int)syscall(SYS_gettid));
	for (int round = 0; round < LATE_BYTE_ROUNDS; round++) {
		int calls = q.calls;

		while (recv(sv[1], sink, sizeof(sink), MSG_DONTWAIT) > 0)
			;
		ck_assert_int_eq(afio_recv_pooled(q.ctx, sv[1], q.pool, 0, 0, on_requeued_recv, &q), 0);
		ck_assert_int_ge(afio_submit(q.ctx), 0);
		atomic_store(&in_slow_read, false);
		atomic_store(&slow_reads, true);
		ck_assert_int_eq(pthread_create(&thread, NULL, steal_then_send, sv), 0);
		while (q.calls == calls && afio_poll(q.ctx, 1, REQUEUE_SILENCE_MS) > 0)
			;
		atomic_store(&slow_reads, false);
		atomic_store(&in_slow_read, true);	/* a thread still waiting goes on */
		pthread_join(thread, NULL);
		ck_assert_msg(q.calls > calls, "round %d: a poll slept with the receive queued "
			      "and its byte there", round);
	}
	ck_assert_int_eq(q.first_error, 0);
	afio_destroy(q.ctx);
	atomic_store(&slow_read_fd, -1);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

START_TEST(test_buf_release_unparks)
{
	release_unparks(true);
	release_unparks(false);
}
END_TEST

/* An id that is another pool's, past this one's count: refused, and the
   other pool's buffer of that id stays the program's. */
START_TEST(test_buf_release_of_other_pool_range)
{
	struct shots s = { 0 };
	afio_ctx *ctx = new_ctx(0);
	unsigned small = 0, big = 0, id;
	int sv[2];

	ck_assert_int_eq(afio_bufpool_create(ctx, 2, 8, &small), 0);
	ck_assert_int_eq(afio_bufpool_create(ctx, 8, 8, &big), 0);
	s.ctx = ctx;
	s.pool = big;
	tu_socketpair(sv);
	ck_assert_int_eq(afio_recv_pooled(ctx, sv[0], big, 0, 0, on_shot, &s), 0);
	ck_assert_int_eq(write(sv[1], "x", 1), 1);
	wait_shots_or_hang(ctx, &s, 1, "pooled receive");
	ck_assert_uint_ne(s.flags[0] & AFIO_CQE_BUFFER, 0);
	id = afio_cqe_buf(s.flags[0]);
	for (unsigned i = 2; i < 8; i++)
		ck_assert_int_eq(afio_buf_release(ctx, small, i), -EINVAL);
	ck_assert_int_eq(afio_buf_release(ctx, small, 0), -EALREADY);
	ck_assert_int_eq(afio_buf_release(ctx, big + 1, id), -EINVAL);
	ck_assert_ptr_null(afio_buf(ctx, small, 5));
	ck_assert_int_eq(afio_buf_release(ctx, big, id), 0);
	ck_assert_int_eq(afio_buf_release(ctx, big, id), -EALREADY);
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/*
 * Two multishot receives with data at once: the callback that runs first
 * cancels the other by its handle, whose result may already wait for its
 * callback.  The cancel is taken, not -EALREADY; the other's result still
 * comes, with AFIO_CQE_MORE, and one -ECANCELED ends it: a multishot
 * request must not go on after it.
 */
START_TEST(test_cancel_multishot_whose_result_waits)
{
	struct shots a = { 0 }, b = { 0 }, *victim, *killer;
	afio_ctx *ctx = new_ctx(0);
	unsigned pool = 0;
	int sa[2], sb[2];

	ck_assert_int_eq(afio_bufpool_create(ctx, 4, 8, &pool), 0);
	a = (struct shots){ .ctx = ctx, .pool = pool, .release = true, .peer = &b };
	b = (struct shots){ .ctx = ctx, .pool = pool, .release = true, .peer = &a };
	tu_socketpair(sa);
	tu_socketpair(sb);
	ck_assert_int_eq(write(sa[1], "a", 1), 1);
	ck_assert_int_eq(write(sb[1], "b", 1), 1);
	ck_assert_int_eq(afio_recv_pooled(ctx, sa[0], pool, 0, AFIO_RECV_MULTISHOT, on_shot, &a),
			 0);
	b.other = afio_last_handle(ctx);
	ck_assert_int_eq(afio_recv_pooled(ctx, sb[0], pool, 0, AFIO_RECV_MULTISHOT, on_shot, &b),
			 0);
	a.other = afio_last_handle(ctx);
	while (!a.canceled_peer && !b.canceled_peer)
		ck_assert_int_ge(afio_poll(ctx, 1, 100), 0);
	killer = a.canceled_peer ? &a : &b;
	victim = killer->peer;
	ck_assert_int_eq(killer->other_ret, 0);
	while (!victim->finals)
		wait_shots_or_hang(ctx, victim, victim->n + 1, "multishot receive canceled");
	ck_assert_int_eq(afio_poll(ctx, 0, 20), 0);
	ck_assert_int_eq(victim->res[victim->n - 1], -ECANCELED);
	for (int i = 0; i < victim->n - 1; i++)
		ck_assert_uint_eq(victim->flags[i] & AFIO_CQE_MORE, AFIO_CQE_MORE);
	ck_assert_int_eq(afio_cancel(ctx, killer), 1);
	while (!killer->finals)
		wait_shots_or_hang(ctx, killer, killer->n + 1, "multishot receive");
	end_with_pairs(ctx, sa, sb);
}
END_TEST

static Suite *robust_suite(void)
{
	Suite *s = suite_create("robust");
	TCase *args = tcase_create("arguments");
	TCase *destroy = tcase_create("destroy");
	TCase *reuse = tcase_create("fd-reuse");
	TCase *nofd = tcase_create("no-fd");
	TCase *fail = tcase_create("fail-at-once");
	TCase *queue = tcase_create("queue");
	TCase *exiting = tcase_create("thread-exit");
	TCase *blocking = tcase_create("blocking-socket");
	TCase *pools = tcase_create("pools");

	tcase_add_test(args, test_null_context_and_config);
	tcase_add_test(args, test_mode_fixed_against_environment);
	tcase_add_test(args, test_version);
	tcase_add_test(args, test_config_of_other_sizes);
	tcase_add_test(args, test_stats_of_other_sizes);
	suite_add_tcase(s, args);
	tcase_add_test(destroy, test_destroy_from_poll_callback);
	tcase_add_test(destroy, test_destroy_from_destroy_callback);
	suite_add_tcase(s, destroy);
	tcase_add_test(reuse, test_cancel_recv_whose_fd_was_reused);
	tcase_add_test(reuse, test_cancel_pipe_read_whose_fd_was_reused);
	tcase_add_test(reuse, test_destroy_after_cancels_on_reused_fds);
	tcase_add_test(reuse, test_waitall_keeps_its_socket);
	suite_add_tcase(s, reuse);
	tcase_add_test(nofd, test_no_fd_left_for_waiting_sockets);
	suite_add_tcase(s, nofd);
	tcase_add_test(fail, test_recv_oob_without_urgent_data);
	tcase_add_test(fail, test_recv_on_epoll_fd);
	tcase_add_test(fail, test_read_write_own_eventfd);
	tcase_add_test(fail, test_read_epoll_fd);
	suite_add_tcase(s, fail);
	tcase_add_test(queue, test_requests_behind_a_sendfile_done_at_once);
	tcase_add_test(queue, test_completion_ring_holds_what_is_in_flight);
	tcase_add_test(queue, test_sqpoll_cancel_with_eventfd_alone);
	suite_add_tcase(s, queue);
	tcase_add_test(exiting, test_requests_outlive_their_thread);
	tcase_add_test(exiting, test_sendfile_outlives_its_thread);
	tcase_add_test(exiting, test_sendfile_after_canceled_one_of_a_gone_thread);
	tcase_add_test(exiting, test_connect_outlives_its_thread);
	suite_add_tcase(s, exiting);
	tcase_add_test(blocking, test_cancel_sendfiles_on_blocking_socket);
	tcase_add_test(blocking, test_cancel_sendfiles_after_nonblock_cleared);
	suite_add_tcase(s, blocking);
	tcase_add_test(pools, test_multishot_accept_without_fds);
	tcase_add_test(pools, test_pooled_recv_on_closed_fd);
	tcase_add_test(pools, test_buf_release_unparks);
	tcase_add_test(pools, test_pooled_recv_requeued_on_the_way_out);
	tcase_add_test(pools, test_pooled_recv_requeued_before_the_sleep);
	tcase_add_test(pools, test_buf_release_of_other_pool_range);
	tcase_add_test(pools, test_cancel_multishot_whose_result_waits);
	suite_add_tcase(s, pools);
	return s;
}

int main(int argc, char **argv)
{
	int ret;

	ret = tu_parse_target(argc, argv, AFIO_BACKEND_AUTO, &target_backend, &target_mode);
	if (ret)
		return ret;
	return tu_run_suite(robust_suite());
}
