/* SPDX-License-Identifier: MIT */
/*
 * The io_uring backend: many more requests than ring entries (with SQPOLL
 * too, driven by the eventfd alone), the probe and AUTO under a seccomp
 * filter, the eventfd with completions pending, thread hand-over, and
 * requests routed to the thread pool when the kernel cannot say which
 * opcodes it has, and afio_op_native() native exactly where the kernel
 * has the opcode.  Run per mode (argv); skipped where io_uring does not
 * probe as available.
 */
#include <check.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/io_uring.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asyncfio.h"
#include "testutil.h"

static enum afio_mode target_mode;

#define MANY		4096	/* requests in flight at once */
#define SMALL_RING	8	/* SQ entries; the CQ gets twice that */
#define CHUNK		64
#define PAIRS		128

static afio_ctx *ring_ctx_flags(unsigned entries, unsigned ring_entries, unsigned flags)
{
	struct afio_config cfg;

	afio_config_init(&cfg);
	cfg.backend = AFIO_BACKEND_IO_URING;
	cfg.mode = target_mode;
	cfg.flags = flags;
	cfg.entries = entries;
	cfg.ring_entries = ring_entries;
	return tu_create(&cfg);
}

static afio_ctx *ring_ctx(unsigned entries, unsigned ring_entries)
{
	return ring_ctx_flags(entries, ring_entries, 0);
}

static bool readable(int fd, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, timeout_ms) == 1 && (pfd.revents & POLLIN);
}

static void destroy_with_pair(afio_ctx *ctx, int sv[2])
{
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
}

static unsigned char pattern(size_t i)
{
	return (unsigned char)(i * 7 + i / 251);
}

static int pattern_file(size_t len)
{
	unsigned char *buf = malloc(len);
	int fd = tu_tmpfile(0);

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_ge(fd, 0);
	for (size_t i = 0; i < len; i++)
		buf[i] = pattern(i);
	ck_assert_int_eq(pwrite(fd, buf, len, 0), (ssize_t)len);
	free(buf);
	return fd;
}

/* ---- far more in flight than the rings hold ---- */

/* MANY reads of CHUNK bytes each through ctx, all at once. */
static void read_many(afio_ctx *ctx)
{
	static unsigned char bufs[MANY][CHUNK];
	static struct tu_done d[MANY];
	int fd = pattern_file((size_t)MANY * CHUNK);
	struct afio_stats st;

	memset(d, 0, sizeof(d));
	for (size_t i = 0; i < MANY; i++)
		ck_assert_int_eq(afio_read(ctx, fd, bufs[i], CHUNK, i * CHUNK, tu_on_done, &d[i]), 0);
	ck_assert_int_eq(afio_read(ctx, fd, bufs[0], CHUNK, 0, tu_on_done, &d[0]), -EAGAIN);
	tu_drain(ctx);
	for (size_t i = 0; i < MANY; i++) {
		ck_assert_int_eq(d[i].calls, 1);
		ck_assert_int_eq(d[i].res, CHUNK);
		for (size_t k = 0; k < CHUNK; k++)
			ck_assert_uint_eq(bufs[i][k], pattern(i * CHUNK + k));
	}
	ck_assert_int_eq(afio_stats(ctx, &st), 0);
	ck_assert_uint_eq(st.completed, MANY);
	ck_assert_uint_eq(st.fallbacks, 0);
	close(fd);
}

START_TEST(test_reads_beyond_ring)
{
	afio_ctx *ctx = ring_ctx(MANY, SMALL_RING);
	char desc[256];

	ck_assert_int_gt(afio_describe(ctx, desc, sizeof(desc)), 0);
	ck_assert_msg(strstr(desc, "sq=8 cq=8192 "), "%s", desc);
	read_many(ctx);
	afio_destroy(ctx);
}
END_TEST

START_TEST(test_writes_beyond_ring)
{
	static unsigned char bufs[MANY][CHUNK], back[CHUNK];
	static struct tu_done d[MANY];
	int fd = tu_tmpfile(0);
	afio_ctx *ctx;

	memset(d, 0, sizeof(d));
	ck_assert_int_ge(fd, 0);
	ctx = ring_ctx(MANY, SMALL_RING);
	for (size_t i = 0; i < MANY; i++) {
		for (size_t k = 0; k < CHUNK; k++)
			bufs[i][k] = pattern(i * CHUNK + k);
		ck_assert_int_eq(afio_write(ctx, fd, bufs[i], CHUNK, i * CHUNK, tu_on_done, &d[i]), 0);
	}
	/* Submitted in one go: the SQ fills many times over before a reap. */
	ck_assert_int_eq(afio_submit(ctx), MANY);
	tu_drain(ctx);
	for (size_t i = 0; i < MANY; i++) {
		ck_assert_int_eq(d[i].calls, 1);
		ck_assert_int_eq(d[i].res, CHUNK);
		ck_assert_int_eq(pread(fd, back, CHUNK, (off_t)(i * CHUNK)), CHUNK);
		ck_assert_int_eq(memcmp(back, bufs[i], CHUNK), 0);
	}
	afio_destroy(ctx);
	close(fd);
}
END_TEST

/* Socket completions come by poll and task work, a path of their own. */
START_TEST(test_sockets_beyond_ring)
{
	static struct tu_done rd[PAIRS], sd[PAIRS];
	static char in[PAIRS][CHUNK], out[PAIRS][CHUNK];
	int sv[PAIRS][2];
	afio_ctx *ctx;

	memset(rd, 0, sizeof(rd));
	memset(sd, 0, sizeof(sd));
	ctx = ring_ctx(2 * PAIRS, SMALL_RING);
	for (int i = 0; i < PAIRS; i++) {
		ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv[i]), 0);
		memset(out[i], 'a' + i % 26, CHUNK);
		ck_assert_int_eq(afio_recv(ctx, sv[i][1], in[i], CHUNK, MSG_WAITALL,
					   tu_on_done, &rd[i]), 0);
	}
	ck_assert_int_eq(afio_submit(ctx), PAIRS);
	for (int i = 0; i < PAIRS; i++)
		ck_assert_int_eq(afio_send(ctx, sv[i][0], out[i], CHUNK, 0, tu_on_done, &sd[i]), 0);
	tu_drain(ctx);
	for (int i = 0; i < PAIRS; i++) {
		ck_assert_int_eq(rd[i].calls, 1);
		ck_assert_int_eq(sd[i].calls, 1);
		ck_assert_int_eq(rd[i].res, CHUNK);
		ck_assert_int_eq(sd[i].res, CHUNK);
		ck_assert_int_eq(memcmp(in[i], out[i], CHUNK), 0);
		close(sv[i][0]);
		close(sv[i][1]);
	}
	afio_destroy(ctx);
}
END_TEST

/* ---- forked children: a seccomp filter cannot be taken back ---- */

#define CHILD_CHECK(cond)                                                      \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond); \
			_exit(1);                                              \
		}                                                              \
	} while (0)

static void run_in_child(void (*fn)(void))
{
	int status;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		fn();
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "child failed (status 0x%x), see stderr", status);
}

/* One read through ctx must come back whole. */
static void child_read_works(afio_ctx *ctx)
{
	int fd = pattern_file(CHUNK);
	unsigned char buf[CHUNK];
	struct tu_done d = { 0 };

	CHILD_CHECK(afio_read(ctx, fd, buf, CHUNK, 0, tu_on_done, &d) == 0);
	while (!d.calls)
		CHILD_CHECK(afio_poll(ctx, 1, -1) >= 0);
	CHILD_CHECK(d.res == CHUNK);
	for (size_t k = 0; k < CHUNK; k++)
		CHILD_CHECK(buf[k] == pattern(k));
	close(fd);
}

static void seccomp_child(void)
{
	static const long deny[] = { __NR_io_uring_setup };
	enum afio_backend next;
	struct afio_config cfg;
	char reason[256];
	afio_ctx *ctx;

	CHILD_CHECK(tu_deny_syscalls(deny, 1) == 0);
	CHILD_CHECK(afio_probe(AFIO_BACKEND_IO_URING, reason, sizeof(reason)) == -EPERM);
	fprintf(stderr, "probe under seccomp: %s\n", reason);
	CHILD_CHECK(!strncmp(reason, "io_uring_setup: Operation not permitted", 39));
	CHILD_CHECK(strstr(reason, "seccomp filter or security policy"));

	next = afio_probe(AFIO_BACKEND_LIBAIO, NULL, 0) ? AFIO_BACKEND_THREADS
							: AFIO_BACKEND_LIBAIO;
	CHILD_CHECK(afio_create(&ctx, NULL) == 0);
	CHILD_CHECK(afio_backend(ctx) == next);
	CHILD_CHECK(strstr(afio_skip_reason(ctx, AFIO_BACKEND_IO_URING), "seccomp"));
	child_read_works(ctx);
	afio_destroy(ctx);

	afio_config_init(&cfg);
	cfg.backend = AFIO_BACKEND_IO_URING;
	cfg.flags = AFIO_NO_FALLBACK;
	ctx = (afio_ctx *)&cfg;
	CHILD_CHECK(afio_create(&ctx, &cfg) == -EPERM);
	CHILD_CHECK(ctx == NULL);
}

/*
 * A child of fork() that destroys its copy of a context closes its copies
 * of what the context made: here the pipe of a sendfile that waits for
 * room on a socket nobody reads, which the child would otherwise keep
 * open after the parent is done with it.
 */
START_TEST(test_fork_child_closes_sendfile_pipes)
{
	enum { LEN = 1 << 20 };
	unsigned char *bytes = tu_random_bytes(LEN, 5);
	int file = tu_data_file(bytes, LEN), sv[2], status, fds_before;
	struct tu_done d = { 0 };
	afio_ctx *ctx;
	pid_t pid;

	tu_socketpair(sv);
	/* Full: a sendfile finds no room, on any mode's first try either. */
	while (send(sv[0], bytes, 4096, MSG_DONTWAIT) > 0)
		;
	fds_before = tu_count_fds();
	ctx = ring_ctx(8, 0);
	ck_assert_int_eq(afio_sendfile(ctx, sv[0], file, 0, LEN, tu_on_done, &d), 0);
	ck_assert_int_ge(afio_submit(ctx), 0);
	ck_assert_int_ge(afio_poll(ctx, 1, 100), 0);
	ck_assert_msg(!d.calls, "the sendfile ended: %s", tu_res_str(d.res));
	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		afio_destroy(ctx);
		_exit(tu_count_fds() == fds_before ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && !WEXITSTATUS(status),
		      "the child kept fds of the context (%s)", afio_mode_name(target_mode));
	afio_destroy(ctx);
	ck_assert_int_eq(d.calls, 1);
	close(sv[0]);
	close(sv[1]);
	close(file);
	free(bytes);
}
END_TEST

START_TEST(test_seccomp_denies_setup)
{
	run_in_child(seccomp_child);
}
END_TEST

/*
 * Before 5.6 io_uring_register(IORING_REGISTER_PROBE) fails with EINVAL,
 * and before 5.19 IORING_REGISTER_PBUF_RING does.  A filter that answers
 * so for one opcode makes this kernel look that old to the backend.
 */
static int deny_register(unsigned opcode)
{
	struct sock_filter body[] = {
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_register, 0, 3),
		/* args[1], the opcode: its low word on little-endian x86-64 */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, opcode, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EINVAL),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};

	return tu_seccomp(body, sizeof(body) / sizeof(body[0]));
}

/* io_uring in the mode under test, or the child fails. */
static afio_ctx *child_ring_ctx(void)
{
	struct afio_config cfg;
	afio_ctx *ctx;

	afio_config_init(&cfg);
	cfg.backend = AFIO_BACKEND_IO_URING;
	cfg.mode = target_mode;
	cfg.flags = AFIO_NO_FALLBACK;
	CHILD_CHECK(afio_create(&ctx, &cfg) == 0);
	CHILD_CHECK(afio_backend(ctx) == AFIO_BACKEND_IO_URING);
	return ctx;
}

static void old_kernel_child(void)
{
	int fd = pattern_file(2 * CHUNK), sv[2];
	unsigned char a[CHUNK], b[CHUNK];
	struct iovec iov = { .iov_base = b, .iov_len = CHUNK };
	struct tu_done rd = { 0 }, rv = { 0 }, sd = { 0 }, rc = { 0 };
	struct afio_stats st;
	char desc[256], in[8];
	afio_ctx *ctx;

	/* READ, WRITE, RECV and SEND then go to the thread pool. */
	CHILD_CHECK(deny_register(IORING_REGISTER_PROBE) == 0);
	CHILD_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	ctx = child_ring_ctx();
	CHILD_CHECK(afio_describe(ctx, desc, sizeof(desc)) > 0);
	fprintf(stderr, "without the opcode probe: %s\n", desc);
	CHILD_CHECK(strstr(desc, "thread pool for read,write,recv,send"));

	CHILD_CHECK(afio_read(ctx, fd, a, CHUNK, 0, tu_on_done, &rd) == 0);
	CHILD_CHECK(afio_readv(ctx, fd, &iov, 1, CHUNK, tu_on_done, &rv) == 0);
	CHILD_CHECK(afio_send(ctx, sv[0], "ping", 4, 0, tu_on_done, &sd) == 0);
	CHILD_CHECK(afio_recv(ctx, sv[1], in, 4, MSG_WAITALL, tu_on_done, &rc) == 0);
	while (!rd.calls || !rv.calls || !sd.calls || !rc.calls)
		CHILD_CHECK(afio_poll(ctx, 1, -1) >= 0);
	CHILD_CHECK(rd.res == CHUNK && rv.res == CHUNK && sd.res == 4 && rc.res == 4);
	CHILD_CHECK(!memcmp(in, "ping", 4));
	for (size_t k = 0; k < CHUNK; k++)
		CHILD_CHECK(a[k] == pattern(k) && b[k] == pattern(CHUNK + k));
	CHILD_CHECK(afio_stats(ctx, &st) == 0);
	/* read, send and recv went to the pool; readv stayed in the ring */
	CHILD_CHECK(st.fallbacks == 3);
	afio_destroy(ctx);
	close(fd);
	close(sv[0]);
	close(sv[1]);
}

START_TEST(test_no_opcode_probe_routes_to_pool)
{
	run_in_child(old_kernel_child);
}
END_TEST

struct child_shots {
	int n, finals;
	ssize_t res[8];
	unsigned flags[8];
};

static void on_child_shot(void *data, ssize_t res, unsigned flags)
{
	struct child_shots *s = data;

	CHILD_CHECK(s->n < 8 && !s->finals);
	s->res[s->n] = res;
	s->flags[s->n++] = flags;
	if (!(flags & AFIO_CQE_MORE))
		s->finals++;
}

static void child_wait_shots(afio_ctx *ctx, struct child_shots *s, int n)
{
	for (int k = 0; s->n < n; k++) {
		CHILD_CHECK(k < 1000);
		CHILD_CHECK(afio_poll(ctx, 1, 10) >= 0);
	}
}

/*
 * A kernel without provided buffer rings: the core keeps the pool, and a
 * pooled receive waits for readiness (IORING_OP_POLL_ADD) before the core
 * reads into a buffer of it; multishot, an empty pool and a cancel behave
 * as with the ring.
 */
static void no_buf_ring_child(void)
{
	static const char *const msgs[] = { "one", "two", "three" };
	struct child_shots s = { 0 };
	unsigned pool, held;
	afio_handle h;
	char how[256];
	afio_ctx *ctx;
	int sv[2], op;

	CHILD_CHECK(deny_register(IORING_REGISTER_PBUF_RING) == 0);
	CHILD_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	ctx = child_ring_ctx();
	CHILD_CHECK(afio_bufpool_create(ctx, 1, 16, &pool) == 0);
	op = tu_op_number("recv_pooled");
	CHILD_CHECK(op >= 0 && afio_op_native(ctx, (unsigned)op, how, sizeof(how)) >= 0);
	fprintf(stderr, "recv_pooled without buffer rings: %s\n", how);
	CHILD_CHECK(afio_recv_pooled(ctx, sv[1], pool, 0, AFIO_RECV_MULTISHOT, on_child_shot,
				     &s) == 0);
	h = afio_last_handle(ctx);
	for (int i = 0; i < 3; i++) {
		size_t len = strlen(msgs[i]);

		CHILD_CHECK(write(sv[0], msgs[i], len) == (ssize_t)len);
		child_wait_shots(ctx, &s, i + 1);
		CHILD_CHECK(s.res[i] == (ssize_t)len);
		CHILD_CHECK((s.flags[i] & AFIO_CQE_MORE) && (s.flags[i] & AFIO_CQE_BUFFER));
		CHILD_CHECK(!memcmp(afio_buf(ctx, pool, afio_cqe_buf(s.flags[i])), msgs[i], len));
		if (i < 2)
			CHILD_CHECK(afio_buf_release(ctx, pool, afio_cqe_buf(s.flags[i])) == 0);
	}
	/* The one buffer held: data waits for it, then comes in it. */
	held = afio_cqe_buf(s.flags[2]);
	CHILD_CHECK(write(sv[0], "four", 4) == 4);
	CHILD_CHECK(afio_poll(ctx, 1, 50) >= 0);
	CHILD_CHECK(s.n == 3);
	CHILD_CHECK(afio_buf_release(ctx, pool, held) == 0);
	child_wait_shots(ctx, &s, 4);
	CHILD_CHECK(s.res[3] == 4 && !memcmp(afio_buf(ctx, pool, afio_cqe_buf(s.flags[3])),
					     "four", 4));
	CHILD_CHECK(afio_buf_release(ctx, pool, afio_cqe_buf(s.flags[3])) == 0);
	CHILD_CHECK(afio_buf_release(ctx, pool, afio_cqe_buf(s.flags[3])) == -EALREADY);
	CHILD_CHECK(afio_cancel_handle(ctx, h) == 0);
	child_wait_shots(ctx, &s, 5);
	CHILD_CHECK(s.res[4] == -ECANCELED && s.flags[4] == 0 && s.finals == 1);
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
}

START_TEST(test_no_buf_ring_core_pool)
{
	run_in_child(no_buf_ring_child);
}
END_TEST

/* ---- the eventfd with completions waiting ---- */

START_TEST(test_eventfd_file_completion)
{
	int fd = pattern_file(CHUNK);
	unsigned char buf[CHUNK];
	struct tu_done d = { 0 };
	afio_ctx *ctx = ring_ctx(0, 0);

	ck_assert_int_eq(afio_read(ctx, fd, buf, CHUNK, 0, tu_on_done, &d), 0);
	ck_assert_int_eq(afio_submit(ctx), 1);
	ck_assert(readable(afio_eventfd(ctx), -1));
	ck_assert_int_eq(d.calls, 0);
	ck_assert_int_eq(afio_poll(ctx, 0, 0), 1);
	ck_assert_int_eq(d.calls, 1);
	ck_assert_int_eq(d.res, CHUNK);
	afio_destroy(ctx);
	close(fd);
}
END_TEST

static void *send_later(void *arg)
{
	int fd = *(int *)arg;

	ck_assert_int_eq(write(fd, "hello", 5), 5);
	return NULL;
}

/* The recv completes while this thread sleeps in poll(2) on the eventfd,
   not in io_uring_enter: the ring must still post the CQE and signal. */
START_TEST(test_eventfd_socket_completion)
{
	struct tu_done d = { 0 };
	afio_ctx *ctx = ring_ctx(0, 0);
	pthread_t t;
	char in[8];
	int sv[2];

	tu_socketpair(sv);
	ck_assert_int_eq(afio_recv(ctx, sv[1], in, 5, MSG_WAITALL, tu_on_done, &d), 0);
	ck_assert_int_eq(afio_submit(ctx), 1);
	ck_assert_int_eq(pthread_create(&t, NULL, send_later, &sv[0]), 0);
	ck_assert(readable(afio_eventfd(ctx), -1));
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	while (!d.calls)
		ck_assert_int_ge(afio_poll(ctx, 1, -1), 0);
	ck_assert_int_eq(d.res, 5);
	ck_assert_int_eq(memcmp(in, "hello", 5), 0);
	destroy_with_pair(ctx, sv);
}
END_TEST

/* ---- one thread at a time, not always the same one ---- */

static void *create_ctx(void *arg)
{
	*(afio_ctx **)arg = ring_ctx(0, 0);
	return NULL;
}

static void round_trip(afio_ctx *ctx)
{
	struct tu_done s = { 0 }, r = { 0 };
	char in[4];
	int sv[2];

	tu_socketpair(sv);
	ck_assert_int_eq(afio_recv(ctx, sv[1], in, 4, MSG_WAITALL, tu_on_done, &r), 0);
	ck_assert_int_eq(afio_send(ctx, sv[0], "pong", 4, 0, tu_on_done, &s), 0);
	while (!r.calls || !s.calls)
		ck_assert_int_ge(afio_poll(ctx, 1, -1), 0);
	ck_assert_int_eq(r.res, 4);
	ck_assert_int_eq(memcmp(in, "pong", 4), 0);
	close(sv[0]);
	close(sv[1]);
}

START_TEST(test_created_on_another_thread)
{
	afio_ctx *ctx = NULL;
	pthread_t t;

	ck_assert_int_eq(pthread_create(&t, NULL, create_ctx, &ctx), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_ptr_nonnull(ctx);
	round_trip(ctx);
	afio_destroy(ctx);
}
END_TEST

struct handover {
	afio_ctx *ctx;
	int fd;
	char in[8];
	struct tu_done d;
	int release[2];		/* the submitter lives until this is written */
	int submitted[2];
};

static void *submit_then_wait(void *arg)
{
	struct handover *h = arg;
	char c = 0;

	ck_assert_int_eq(afio_recv(h->ctx, h->fd, h->in, 5, MSG_WAITALL, tu_on_done, &h->d), 0);
	ck_assert_int_eq(afio_submit(h->ctx), 1);
	ck_assert_int_eq(write(h->submitted[1], &c, 1), 1);
	ck_assert_int_eq(read(h->release[0], &c, 1), 1);
	return NULL;
}

/* Submitted on one thread, completed on another while the first lives
   (io_uring cancels what a thread submitted when that thread exits). */
START_TEST(test_reaped_on_another_thread)
{
	struct handover h = { 0 };
	pthread_t t;
	int sv[2];
	char c;

	tu_socketpair(sv);
	ck_assert_int_eq(pipe(h.release), 0);
	ck_assert_int_eq(pipe(h.submitted), 0);
	h.ctx = ring_ctx(0, 0);
	h.fd = sv[1];
	ck_assert_int_eq(pthread_create(&t, NULL, submit_then_wait, &h), 0);
	ck_assert_int_eq(read(h.submitted[0], &c, 1), 1);
	ck_assert_int_eq(write(sv[0], "later", 5), 5);
	while (!h.d.calls)
		ck_assert_int_ge(afio_poll(h.ctx, 1, -1), 0);
	ck_assert_int_eq(h.d.res, 5);
	ck_assert_int_eq(memcmp(h.in, "later", 5), 0);
	round_trip(h.ctx);
	ck_assert_int_eq(write(h.release[1], &c, 1), 1);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	afio_destroy(h.ctx);
	close(sv[0]);
	close(sv[1]);
	close(h.release[0]);
	close(h.release[1]);
	close(h.submitted[0]);
	close(h.submitted[1]);
}
END_TEST

/* ---- SQPOLL, only when asked ---- */

START_TEST(test_sqpoll)
{
	afio_ctx *ctx = ring_ctx_flags(MANY, SMALL_RING, AFIO_SQPOLL);
	struct tu_done r = { 0 };
	char desc[256], in[4];
	int sv[2];

	ck_assert_int_gt(afio_describe(ctx, desc, sizeof(desc)), 0);
	ck_assert_msg(strstr(desc, "flags=SQPOLL"), "%s", desc);
	read_many(ctx);
	round_trip(ctx);
	tu_socketpair(sv);
	ck_assert_int_eq(afio_recv(ctx, sv[1], in, sizeof(in), 0, tu_on_done, &r), 0);
	ck_assert_int_eq(afio_submit(ctx), 1);
	ck_assert_int_eq(afio_cancel(ctx, &r), 1);
	tu_drain(ctx);
	ck_assert_int_eq(r.calls, 1);
	ck_assert_int_eq(r.res, -ECANCELED);
	destroy_with_pair(ctx, sv);
}
END_TEST

/*
 * SQPOLL with a one-entry SQ: each request fills it until the SQ thread has
 * taken it.  The application below sleeps only on the eventfd and calls
 * afio_poll(ctx, 0, 0) when it is readable, as an event loop does; what the
 * library accepted must reach the kernel all the same.
 */
#define TINY_RING	1
#define WAITERS		16
#define SILENCE_MS	10000	/* far more than needed: the eventfd was lost */

/* False when the eventfd stayed silent for SILENCE_MS before d completed. */
static bool evloop_until(afio_ctx *ctx, const struct tu_done *d)
{
	int efd = afio_eventfd(ctx);

	while (!d->calls) {
		if (!readable(efd, SILENCE_MS))
			return false;
		ck_assert_int_ge(afio_poll(ctx, 0, 0), 0);
	}
	return true;
}

struct waiters {
	afio_ctx *ctx;
	struct tu_done d[WAITERS];
	char in[WAITERS][4];
	int sv[WAITERS][2];
};

/* WAITERS recvs on sockets nobody writes to yet, submitted at once. */
static void start_waiters(struct waiters *w)
{
	memset(w, 0, sizeof(*w));
	w->ctx = ring_ctx_flags(WAITERS, TINY_RING, AFIO_SQPOLL);
	afio_eventfd(w->ctx);
	for (int i = 0; i < WAITERS; i++) {
		tu_socketpair(w->sv[i]);
		ck_assert_int_eq(afio_recv(w->ctx, w->sv[i][1], w->in[i], sizeof(w->in[i]), 0,
					   tu_on_done, &w->d[i]), 0);
	}
	ck_assert_int_gt(afio_submit(w->ctx), 0);
}

/* Destroy cancels the rest: every recv completes exactly once. */
static void end_waiters(struct waiters *w)
{
	afio_destroy(w->ctx);
	for (int i = 0; i < WAITERS; i++) {
		ck_assert_int_eq(w->d[i].calls, 1);
		close(w->sv[i][0]);
		close(w->sv[i][1]);
	}
}

/* Only the last recv gets data: no earlier completion wakes the loop. */
START_TEST(test_sqpoll_full_sq_request)
{
	static struct waiters w;

	start_waiters(&w);
	ck_assert_int_eq(write(w.sv[WAITERS - 1][0], "last", 4), 4);
	ck_assert_msg(evloop_until(w.ctx, &w.d[WAITERS - 1]),
		      "the last recv never reached the kernel");
	ck_assert_int_eq(w.d[WAITERS - 1].res, 4);
	ck_assert_int_eq(memcmp(w.in[WAITERS - 1], "last", 4), 0);
	end_waiters(&w);
}
END_TEST

/* The first recv is in the ring, so its cancel needs an SQE of its own. */
START_TEST(test_sqpoll_full_sq_cancel)
{
	static struct waiters w;

	start_waiters(&w);
	ck_assert_int_eq(afio_cancel(w.ctx, &w.d[0]), 1);
	ck_assert_msg(evloop_until(w.ctx, &w.d[0]), "the cancel never reached the kernel");
	ck_assert_int_eq(w.d[0].res, -ECANCELED);
	end_waiters(&w);
}
END_TEST

/* ---- cancel ---- */

/* A recv nobody answers, canceled among many that finish: exactly one
   callback each, the canceled one with -ECANCELED. */
START_TEST(test_cancel_with_full_ring)
{
	static unsigned char bufs[MANY][CHUNK];
	static struct tu_done d[MANY];
	int fd = pattern_file((size_t)MANY * CHUNK), sv[2];
	struct tu_done r = { 0 };
	afio_ctx *ctx;
	char in[4];

	memset(d, 0, sizeof(d));
	tu_socketpair(sv);
	ctx = ring_ctx(MANY + 1, SMALL_RING);
	ck_assert_int_eq(afio_recv(ctx, sv[1], in, sizeof(in), 0, tu_on_done, &r), 0);
	for (size_t i = 0; i < MANY; i++)
		ck_assert_int_eq(afio_read(ctx, fd, bufs[i], CHUNK, i * CHUNK, tu_on_done, &d[i]), 0);
	ck_assert_int_eq(afio_submit(ctx), MANY + 1);
	ck_assert_int_eq(afio_cancel(ctx, &r), 1);
	tu_drain(ctx);
	ck_assert_int_eq(r.calls, 1);
	ck_assert_int_eq(r.res, -ECANCELED);
	for (size_t i = 0; i < MANY; i++) {
		ck_assert_int_eq(d[i].calls, 1);
		ck_assert_int_eq(d[i].res, CHUNK);
	}
	afio_destroy(ctx);
	close(fd);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* Destroy with recvs that will never finish: each completes once. */
START_TEST(test_destroy_cancels_in_ring)
{
	static struct tu_done d[PAIRS];
	static char in[PAIRS][4];
	int sv[2];
	afio_ctx *ctx;

	memset(d, 0, sizeof(d));
	tu_socketpair(sv);
	ctx = ring_ctx(PAIRS, SMALL_RING);
	for (int i = 0; i < PAIRS; i++)
		ck_assert_int_eq(afio_recv(ctx, sv[1], in[i], 4, 0, tu_on_done, &d[i]), 0);
	ck_assert_int_eq(afio_submit(ctx), PAIRS);
	afio_destroy(ctx);
	for (int i = 0; i < PAIRS; i++) {
		ck_assert_int_eq(d[i].calls, 1);
		ck_assert_int_eq(d[i].res, -ECANCELED);
	}
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/*
 * A recv canceled right after it went to the kernel: in ASYNC and HYBRID an
 * io-wq worker may be moving it to a poll wait just then, and the kernel
 * answers the cancel with -EALREADY, or with SQPOLL even -ENOENT, yet leaves
 * the recv waiting.  It must still complete, once, with -ECANCELED (a lost
 * one hangs here).  Without and with SQPOLL.
 */
#define RACES 20000

START_TEST(test_cancel_racing_io_wq)
{
	afio_ctx *ctx = ring_ctx_flags(4, 0, _i ? AFIO_SQPOLL : 0);
	int sv[2];
	char in[4];

	tu_socketpair(sv);
	for (int i = 0; i < RACES; i++) {
		struct tu_done d = { 0 };

		ck_assert_int_eq(afio_recv(ctx, sv[1], in, sizeof(in), 0, tu_on_done, &d), 0);
		ck_assert_int_eq(afio_submit(ctx), 1);
		ck_assert_int_eq(afio_cancel(ctx, &d), 1);
		tu_wait_done(ctx, &d);
		ck_assert_int_eq(d.calls, 1);
		ck_assert_int_eq(d.res, -ECANCELED);
	}
	destroy_with_pair(ctx, sv);
}
END_TEST

/*
 * Two recvs canceled together, over and over, with SQPOLL: a cancel
 * answered -EALREADY or -ENOENT is asked again, and asks may also come
 * while an earlier one for the same recv still waits for an SQE.  The list
 * of waiting cancels has room for one per request; a second one for the
 * same recv would run past it (AddressSanitizer shows it in the ASAN
 * build; before the fix HYBRID hit it in about half the runs).
 */
#define PAIR_RACES 5000

START_TEST(test_cancel_pairs_racing_io_wq)
{
	afio_ctx *ctx = ring_ctx_flags(2, 4, AFIO_SQPOLL);
	int sv[2];
	char in[2][4];

	tu_socketpair(sv);
	for (int i = 0; i < PAIR_RACES; i++) {
		struct tu_done d = { 0 };

		for (int k = 0; k < 2; k++)
			ck_assert_int_eq(afio_recv(ctx, sv[1], in[k], sizeof(in[k]), 0,
						   tu_on_done, &d), 0);
		ck_assert_int_ge(afio_submit(ctx), 0);
		ck_assert_int_eq(afio_cancel(ctx, &d), 2);
		while (d.calls < 2)
			ck_assert_int_ge(afio_poll(ctx, 1, -1), 0);
		ck_assert_int_eq(d.calls, 2);
		ck_assert_int_eq(d.res, -ECANCELED);
	}
	destroy_with_pair(ctx, sv);
}
END_TEST

/* ---- setup ---- */

START_TEST(test_describe_and_no_sqpoll_by_default)
{
	afio_ctx *ctx = ring_ctx(0, 0);
	char desc[256];

	ck_assert_int_gt(afio_describe(ctx, desc, sizeof(desc)), 0);
	ck_assert_msg(!strncmp(desc, "io_uring: sq=256 cq=512 flags=", 30), "%s", desc);
	ck_assert_msg(!strstr(desc, "SQPOLL"), "%s", desc);
	ck_assert_msg(strstr(desc, afio_mode_name(target_mode)), "%s", desc);
	afio_destroy(ctx);
}
END_TEST

/* Whether this kernel's io_uring has an opcode, by the probe the library
   reads: 1, 0, or -1 where it cannot be asked (no io_uring here). */
static int kernel_has_opcode(unsigned opcode)
{
	size_t size = sizeof(struct io_uring_probe) + 256 * sizeof(struct io_uring_probe_op);
	struct io_uring_probe *probe = calloc(1, size);
	struct io_uring_params p;
	int fd, ret = -1;

	ck_assert_ptr_nonnull(probe);
	memset(&p, 0, sizeof(p));
	fd = (int)syscall(__NR_io_uring_setup, 2, &p);
	if (fd >= 0 && !syscall(__NR_io_uring_register, fd, IORING_REGISTER_PROBE, probe, 256))
		ret = opcode <= probe->last_op && (probe->ops[opcode].flags & IO_URING_OP_SUPPORTED);
	if (fd >= 0)
		close(fd);
	free(probe);
	return ret;
}

/* IORING_OP_FTRUNCATE, Linux 6.9: newer than some headers' enum. */
#define OPCODE_FTRUNCATE 55

/*
 * io_uring runs an op natively wherever the kernel has its opcode, and
 * only there (sendfile is left out: how it runs is the backend's choice).
 */
START_TEST(test_io_uring_native_where_kernel_has_it)
{
	static const struct {
		const char *op;
		unsigned opcode;
	} map[] = {
		{ "accept", IORING_OP_ACCEPT }, { "connect", IORING_OP_CONNECT },
		{ "sendmsg", IORING_OP_SENDMSG }, { "recvmsg", IORING_OP_RECVMSG },
		{ "timeout", IORING_OP_TIMEOUT }, { "openat", IORING_OP_OPENAT },
		{ "openat2", IORING_OP_OPENAT2 }, { "close", IORING_OP_CLOSE },
		{ "statx", IORING_OP_STATX }, { "readv", IORING_OP_READV },
		{ "writev", IORING_OP_WRITEV }, { "fallocate", IORING_OP_FALLOCATE },
		{ "ftruncate", OPCODE_FTRUNCATE }, { "sync_range", IORING_OP_SYNC_FILE_RANGE },
		{ "renameat", IORING_OP_RENAMEAT }, { "unlinkat", IORING_OP_UNLINKAT },
		{ "mkdirat", IORING_OP_MKDIRAT },
	};
	afio_ctx *ctx;

	if (kernel_has_opcode(IORING_OP_NOP) < 0)
		return;
	ctx = tu_ctx(AFIO_BACKEND_IO_URING, target_mode, 0);
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		int op = tu_op_number(map[i].op), has = kernel_has_opcode(map[i].opcode);
		char how[256] = "";
		int native;

		ck_assert_msg(op >= 0, "afio_%s is not in the op table", map[i].op);
		native = afio_op_native(ctx, (unsigned)op, how, sizeof(how));
		ck_assert_msg(native == has,
			      "%s on %s: afio_op_native %d (\"%s\"), the kernel %s opcode %u",
			      map[i].op, tu_target_name(), native, how, has ? "has" : "lacks",
			      map[i].opcode);
	}
	afio_destroy(ctx);
}
END_TEST

static Suite *io_uring_suite(void)
{
	Suite *s = suite_create("io_uring");
	TCase *rings = tcase_create("rings");
	TCase *probe = tcase_create("probe");
	TCase *evfd = tcase_create("eventfd");
	TCase *threads = tcase_create("threads");
	TCase *cancel = tcase_create("cancel");
	TCase *race = tcase_create("cancel-race");

	tcase_add_test(rings, test_reads_beyond_ring);
	tcase_add_test(rings, test_writes_beyond_ring);
	tcase_add_test(rings, test_sockets_beyond_ring);
	tcase_add_test(rings, test_describe_and_no_sqpoll_by_default);
	tcase_add_test(probe, test_seccomp_denies_setup);
	tcase_add_test(probe, test_no_opcode_probe_routes_to_pool);
	tcase_add_test(probe, test_no_buf_ring_core_pool);
	tcase_add_test(probe, test_io_uring_native_where_kernel_has_it);
	tcase_add_test(evfd, test_eventfd_file_completion);
	tcase_add_test(evfd, test_eventfd_socket_completion);
	tcase_add_test(threads, test_created_on_another_thread);
	tcase_add_test(threads, test_reaped_on_another_thread);
	tcase_add_test(rings, test_sqpoll);
	tcase_add_test(rings, test_sqpoll_full_sq_request);
	tcase_add_test(rings, test_sqpoll_full_sq_cancel);
	tcase_add_test(cancel, test_cancel_with_full_ring);
	tcase_add_test(cancel, test_destroy_cancels_in_ring);
	tcase_add_test(cancel, test_fork_child_closes_sendfile_pipes);
	tcase_set_timeout(rings, 300);
	tcase_set_timeout(probe, 120);
	tcase_set_timeout(evfd, 120);
	tcase_set_timeout(threads, 120);
	tcase_set_timeout(cancel, 300);
	/* Far more than the race needs: past it, a request was lost. */
	tcase_add_loop_test(race, test_cancel_racing_io_wq, 0, 2);
	tcase_add_test(race, test_cancel_pairs_racing_io_wq);
	tcase_set_timeout(race, 60);
	suite_add_tcase(s, rings);
	suite_add_tcase(s, probe);
	suite_add_tcase(s, evfd);
	suite_add_tcase(s, threads);
	suite_add_tcase(s, cancel);
	suite_add_tcase(s, race);
	return s;
}

int main(int argc, char **argv)
{
	enum afio_backend b;
	int ret;

	ret = tu_parse_target(argc, argv, AFIO_BACKEND_IO_URING, &b, &target_mode);
	if (ret)
		return ret;
	return tu_run_suite(io_uring_suite());
}
