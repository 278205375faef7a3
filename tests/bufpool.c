/* SPDX-License-Identifier: MIT */
/*
 * Buffer pools and multishot requests on one backend in one mode (from
 * argv): a pooled receive waits holding no buffer and completes with one;
 * a multishot receive or accept keeps delivering, each completion but the
 * last saying more follow, and exactly one last completion ends it; an
 * empty pool makes a receive wait for a buffer (or fail, when asked);
 * buffers given back twice or never taken are refused; cancel and
 * destroy with buffers held and receives waiting complete everything once.
 */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "asyncfio.h"
#include "testutil.h"

#define MAX_SHOTS	64

/* Every completion of one request, in order. */
struct shots {
	int n;
	ssize_t res[MAX_SHOTS];
	unsigned flags[MAX_SHOTS];
	int finals;		/* completions without AFIO_CQE_MORE */
};

static void on_shot(void *data, ssize_t res, unsigned flags)
{
	struct shots *s = data;

	ck_assert_msg(s->finals == 0, "a completion after the last one on %s (res %s)",
		      tu_target_name(), tu_res_str(res));
	ck_assert_int_lt(s->n, MAX_SHOTS);
	s->res[s->n] = res;
	s->flags[s->n] = flags;
	s->n++;
	if (!(flags & AFIO_CQE_MORE))
		s->finals++;
}

/* Polls until s has n completions, failing after TU_HANG_MS. */
static void wait_shots(afio_ctx *ctx, struct shots *s, int n)
{
	int64_t until = tu_now_ns() + TU_HANG_MS * TU_NS_PER_MS;

	while (s->n < n) {
		ck_assert_int_ge(afio_poll(ctx, 1, 100), 0);
		ck_assert_msg(tu_now_ns() < until, "%d of %d completions on %s after %d ms",
			      s->n, n, tu_target_name(), TU_HANG_MS);
	}
}

/* Nothing completes for a while. */
static void no_shot(afio_ctx *ctx, struct shots *s)
{
	int before = s->n;

	ck_assert_int_ge(afio_poll(ctx, 1, 50), 0);
	ck_assert_msg(s->n == before, "a completion on %s without data (res %s)",
		      tu_target_name(), tu_res_str(s->res[s->n - 1]));
}

static unsigned new_pool(afio_ctx *ctx, unsigned count, size_t size)
{
	unsigned pool = ~0u;

	ck_assert_int_eq(afio_bufpool_create(ctx, count, size, &pool), 0);
	return pool;
}

/* Completion i holds the bytes want in a buffer of pool; gives it back. */
static void expect_buffer(afio_ctx *ctx, unsigned pool, const struct shots *s, int i,
			  const char *want)
{
	size_t len = strlen(want);
	unsigned id = afio_cqe_buf(s->flags[i]);
	const char *buf;

	ck_assert_msg(s->res[i] == (ssize_t)len, "completion %d on %s: %s, not %zu bytes", i,
		      tu_target_name(), tu_res_str(s->res[i]), len);
	ck_assert_msg(s->flags[i] & AFIO_CQE_BUFFER, "completion %d on %s has no buffer", i,
		      tu_target_name());
	buf = afio_buf(ctx, pool, id);
	ck_assert_ptr_nonnull(buf);
	ck_assert_msg(!memcmp(buf, want, len), "completion %d on %s: other bytes", i,
		      tu_target_name());
	ck_assert_int_eq(afio_buf_release(ctx, pool, id), 0);
}

START_TEST(test_pooled_recv)
{
	afio_ctx *ctx = tu_new_ctx();
	unsigned pool = new_pool(ctx, 4, 64);
	struct shots s = { 0 };
	unsigned id;
	int sv[2];

	tu_socketpair(sv);
	ck_assert_int_eq(afio_recv_pooled(ctx, sv[1], pool, 0, 0, on_shot, &s), 0);
	no_shot(ctx, &s);
	ck_assert_int_eq(write(sv[0], "hello", 5), 5);
	wait_shots(ctx, &s, 1);
	ck_assert_uint_eq(s.flags[0] & AFIO_CQE_MORE, 0);
	id = afio_cqe_buf(s.flags[0]);
	expect_buffer(ctx, pool, &s, 0, "hello");
	/* Back already: twice, never taken, no such buffer or pool. */
	ck_assert_int_eq(afio_buf_release(ctx, pool, id), -EALREADY);
	ck_assert_int_eq(afio_buf_release(ctx, pool, (id + 1) % 4), -EALREADY);
	ck_assert_int_eq(afio_buf_release(ctx, pool, 4), -EINVAL);
	ck_assert_int_eq(afio_buf_release(ctx, pool + 1, 0), -EINVAL);
	ck_assert_ptr_null(afio_buf(ctx, pool, 4));
	ck_assert_ptr_null(afio_buf(ctx, pool + 1, 0));
	/* The end of the stream: 0, no buffer. */
	ck_assert_int_eq(afio_recv_pooled(ctx, sv[1], pool, 0, 0, on_shot, &s), 0);
	s.finals = 0;
	close(sv[0]);
	wait_shots(ctx, &s, 2);
	ck_assert_int_eq(s.res[1], 0);
	ck_assert_uint_eq(s.flags[1], 0);
	afio_destroy(ctx);
	close(sv[1]);
}
END_TEST

START_TEST(test_pooled_args)
{
	afio_ctx *ctx = tu_new_ctx();
	unsigned pool = new_pool(ctx, 1, 16), p;
	struct shots s = { 0 };
	int sv[2];

	tu_socketpair(sv);
	ck_assert_int_eq(afio_bufpool_create(ctx, 0, 16, &p), -EINVAL);
	ck_assert_int_eq(afio_bufpool_create(ctx, 1, 0, &p), -EINVAL);
	ck_assert_int_eq(afio_bufpool_create(ctx, AFIO_MAX_POOL_BUFS + 1, 16, &p), -EINVAL);
	ck_assert_int_eq(afio_bufpool_create(ctx, 1, 16, NULL), -EINVAL);
	ck_assert_int_eq(afio_bufpool_create(NULL, 1, 16, &p), -EINVAL);
	ck_assert_int_eq(afio_recv_pooled(ctx, sv[1], pool + 1, 0, 0, on_shot, &s), -EINVAL);
	ck_assert_int_eq(afio_recv_pooled(ctx, sv[1], pool, MSG_WAITALL, 0, on_shot, &s), -EINVAL);
	ck_assert_int_eq(afio_recv_pooled(ctx, sv[1], pool, MSG_PEEK, 0, on_shot, &s), -EINVAL);
	ck_assert_int_eq(afio_recv_pooled(ctx, sv[1], pool, MSG_DONTWAIT, 0, on_shot, &s), -EINVAL);
	ck_assert_int_eq(afio_recv_pooled(ctx, sv[1], pool, 0, 1u << 7, on_shot, &s), -EINVAL);
	ck_assert_int_eq(afio_recv_pooled(ctx, sv[1], pool, 0, 0, NULL, &s), -EINVAL);
	ck_assert_int_eq(afio_recv_pooled(ctx, -1, pool, 0, 0, on_shot, &s), -EBADF);
	ck_assert_int_eq(afio_accept_multishot(ctx, -1, 0, on_shot, &s), -EBADF);
	ck_assert_int_eq(afio_accept_multishot(ctx, sv[1], MSG_PEEK, on_shot, &s), -EINVAL);
	for (unsigned i = 1; i < AFIO_MAX_BUFPOOLS; i++)
		ck_assert_int_eq(afio_bufpool_create(ctx, 1, 16, &p), 0);
	ck_assert_int_eq(afio_bufpool_create(ctx, 1, 16, &p), -ENOSPC);
	ck_assert_int_eq(s.n, 0);
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

START_TEST(test_multishot_recv)
{
	static const char *const msgs[] = { "one", "two", "three" };
	afio_ctx *ctx = tu_new_ctx();
	unsigned pool = new_pool(ctx, 2, 32);
	struct shots s = { 0 };
	afio_handle h;
	int sv[2];

	tu_socketpair(sv);
	ck_assert_int_eq(afio_recv_pooled(ctx, sv[1], pool, 0, AFIO_RECV_MULTISHOT, on_shot, &s),
			 0);
	h = afio_last_handle(ctx);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(write(sv[0], msgs[i], strlen(msgs[i])), (ssize_t)strlen(msgs[i]));
		wait_shots(ctx, &s, i + 1);
		ck_assert_msg(s.flags[i] & AFIO_CQE_MORE, "shot %d on %s: no AFIO_CQE_MORE", i,
			      tu_target_name());
		expect_buffer(ctx, pool, &s, i, msgs[i]);
	}
	/* Still the same request: its handle cancels it, once. */
	no_shot(ctx, &s);
	ck_assert_int_eq(afio_cancel_handle(ctx, h), 0);
	wait_shots(ctx, &s, 4);
	ck_assert_int_eq(s.res[3], -ECANCELED);
	ck_assert_uint_eq(s.flags[3], 0);
	ck_assert_int_eq(afio_cancel_handle(ctx, h), -ENOENT);
	ck_assert_int_eq(write(sv[0], "x", 1), 1);
	no_shot(ctx, &s);
	ck_assert_int_eq(s.finals, 1);
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* A loop that calls afio_poll() only when the eventfd is readable gets
   every message of a multishot receive, which goes on after each
   callback: whatever is still to be submitted keeps the eventfd readable
   until a poll has submitted it. */
START_TEST(test_multishot_eventfd_loop)
{
	afio_ctx *ctx = tu_new_ctx();
	unsigned pool = new_pool(ctx, 2, 32);
	struct shots s = { 0 };
	int sv[2], evfd = afio_eventfd(ctx);

	ck_assert_int_ge(evfd, 0);
	tu_socketpair(sv);
	ck_assert_int_eq(afio_recv_pooled(ctx, sv[1], pool, 0, AFIO_RECV_MULTISHOT, on_shot, &s),
			 0);
	ck_assert_int_ge(afio_submit(ctx), 0);
	for (int i = 0; i < 20; i++) {
		ck_assert_int_eq(write(sv[0], "m", 1), 1);
		while (s.n < i + 1) {
			struct pollfd p = { .fd = evfd, .events = POLLIN };

			ck_assert_msg(poll(&p, 1, TU_HANG_MS) == 1,
				      "message %d on %s: the eventfd not readable in %d ms", i,
				      tu_target_name(), TU_HANG_MS);
			ck_assert_int_ge(afio_poll(ctx, 0, 0), 0);
		}
		ck_assert_msg(s.flags[i] & AFIO_CQE_MORE, "shot %d on %s: the last", i,
			      tu_target_name());
		expect_buffer(ctx, pool, &s, i, "m");
	}
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* The peer closing ends a multishot receive with 0, its last completion. */
START_TEST(test_multishot_recv_end)
{
	afio_ctx *ctx = tu_new_ctx();
	unsigned pool = new_pool(ctx, 2, 32);
	struct shots s = { 0 };
	struct afio_stats st;
	int sv[2];

	tu_socketpair(sv);
	ck_assert_int_eq(afio_recv_pooled(ctx, sv[1], pool, 0, AFIO_RECV_MULTISHOT, on_shot, &s),
			 0);
	ck_assert_int_eq(write(sv[0], "abc", 3), 3);
	wait_shots(ctx, &s, 1);
	expect_buffer(ctx, pool, &s, 0, "abc");
	close(sv[0]);
	wait_shots(ctx, &s, 2);
	ck_assert_int_eq(s.res[1], 0);
	ck_assert_uint_eq(s.flags[1], 0);
	ck_assert_int_eq(afio_stats(ctx, &st), 0);
	ck_assert_uint_eq(st.in_flight, 0);
	afio_destroy(ctx);
	close(sv[1]);
}
END_TEST

/*
 * A pool of one buffer, which the program holds: the next data waits,
 * neither lost nor an error, until the buffer comes back; with
 * AFIO_RECV_BUF_NOWAIT it is -ENOBUFS at once.
 */
/* A multishot pooled receive on sv[1] whose first completion ("first")
   holds the pool's only buffer, while "second" waits for it. */
static void hold_only_buffer(afio_ctx *ctx, unsigned pool, int sv[2], struct shots *s)
{
	ck_assert_int_eq(afio_recv_pooled(ctx, sv[1], pool, 0, AFIO_RECV_MULTISHOT, on_shot, s),
			 0);
	ck_assert_int_eq(write(sv[0], "first", 5), 5);
	wait_shots(ctx, s, 1);
	ck_assert_int_eq(write(sv[0], "second", 6), 6);
	no_shot(ctx, s);
}

/* Cancels hold_only_buffer()'s receive, two results in, and ends. */
static void cancel_third_and_close(afio_ctx *ctx, struct shots *s, int sv[2], int tv[2])
{
	ck_assert_int_eq(afio_cancel(ctx, s), 1);
	wait_shots(ctx, s, 3);
	ck_assert_int_eq(s->res[2], -ECANCELED);
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
	close(tv[0]);
	close(tv[1]);
}

START_TEST(test_pool_empty_waits)
{
	afio_ctx *ctx = tu_new_ctx();
	unsigned pool = new_pool(ctx, 1, 16);
	struct shots s = { 0 }, t = { 0 };
	int sv[2], tv[2];

	tu_socketpair(sv);
	tu_socketpair(tv);
	hold_only_buffer(ctx, pool, sv, &s);
	ck_assert_int_eq(afio_recv_pooled(ctx, tv[1], pool, 0, AFIO_RECV_BUF_NOWAIT, on_shot, &t),
			 0);
	ck_assert_int_eq(write(tv[0], "y", 1), 1);
	wait_shots(ctx, &t, 1);
	ck_assert_int_eq(t.res[0], -ENOBUFS);
	ck_assert_uint_eq(t.flags[0], 0);
	expect_buffer(ctx, pool, &s, 0, "first");
	wait_shots(ctx, &s, 2);
	expect_buffer(ctx, pool, &s, 1, "second");
	cancel_third_and_close(ctx, &s, sv, tv);
}
END_TEST

/* A callback that gives a buffer back (again). */
struct release_again {
	afio_ctx *ctx;
	unsigned pool, id;
	int ret;
	bool ran;
};

static void on_release_again(void *data, ssize_t res)
{
	struct release_again *a = data;

	ck_assert_int_eq(res, 0);
	a->ret = afio_buf_release(a->ctx, a->pool, a->id);
	a->ran = true;
}

/*
 * A buffer given back twice is refused the second time even where a
 * receive that waited for it has read into it since and its result waits
 * for its callback: inside the first afio_buf_release() (the core's own
 * reads), or in the kernel's ring, answered in the same round as a nop
 * queued before it, whose callback gives the buffer back once more.  The
 * buffer is that result's, not the program's: taken back, it would go to
 * the next receive (here one with bytes waiting) and be filled again under
 * the first one's callback.
 */
START_TEST(test_release_twice_result_waiting)
{
	struct release_again again = { .ret = 1 };
	afio_ctx *ctx = tu_new_ctx();
	unsigned pool = new_pool(ctx, 1, 16), id;
	struct shots s = { 0 }, t = { 0 };
	int64_t until = tu_now_ns() + TU_HANG_MS * TU_NS_PER_MS;
	int sv[2], tv[2];

	tu_socketpair(sv);
	tu_socketpair(tv);
	hold_only_buffer(ctx, pool, sv, &s);
	id = afio_cqe_buf(s.flags[0]);
	again = (struct release_again){ ctx, pool, id, 1, false };
	ck_assert_int_eq(afio_nop(ctx, on_release_again, &again), 0);
	ck_assert_int_eq(afio_buf_release(ctx, pool, id), 0);
	ck_assert_msg(afio_buf_release(ctx, pool, id) == -EALREADY,
		      "%s: a buffer given back twice was taken back", tu_target_name());
	ck_assert_int_eq(write(tv[0], "third", 5), 5);
	ck_assert_int_eq(afio_recv_pooled(ctx, tv[1], pool, 0, 0, on_shot, &t), 0);
	/* Either may have the one buffer first; each its own bytes. */
	while (s.n < 2 || t.n < 1 || !again.ran) {
		int s_had = s.n, t_had = t.n;

		ck_assert_int_ge(afio_poll(ctx, 1, 100), 0);
		if (s.n == 2 && s_had < 2)
			expect_buffer(ctx, pool, &s, 1, "second");
		if (t.n == 1 && t_had < 1)
			expect_buffer(ctx, pool, &t, 0, "third");
		ck_assert_msg(tu_now_ns() < until, "%s: %d and %d completions after %d ms",
			      tu_target_name(), s.n, t.n, TU_HANG_MS);
	}
	ck_assert_msg(again.ret == -EALREADY, "%s: a buffer given back twice, from a callback: %s",
		      tu_target_name(), tu_res_str(again.ret));
	cancel_third_and_close(ctx, &s, sv, tv);
}
END_TEST

/* Two receives wait for the one buffer, the first for an end of stream:
   that one ends without taking the buffer, and the next gets it. */
START_TEST(test_waiter_ends_without_buffer)
{
	afio_ctx *ctx = tu_new_ctx();
	unsigned pool = new_pool(ctx, 1, 16);
	struct shots h = { 0 }, a = { 0 }, b = { 0 };
	int hv[2], av[2], bv[2];

	tu_socketpair(hv);
	tu_socketpair(av);
	tu_socketpair(bv);
	ck_assert_int_eq(afio_recv_pooled(ctx, hv[1], pool, 0, 0, on_shot, &h), 0);
	ck_assert_int_eq(write(hv[0], "held", 4), 4);
	wait_shots(ctx, &h, 1);
	ck_assert_int_eq(afio_recv_pooled(ctx, av[1], pool, 0, 0, on_shot, &a), 0);
	close(av[0]);
	no_shot(ctx, &a);
	ck_assert_int_eq(afio_recv_pooled(ctx, bv[1], pool, 0, 0, on_shot, &b), 0);
	ck_assert_int_eq(write(bv[0], "next", 4), 4);
	no_shot(ctx, &b);
	expect_buffer(ctx, pool, &h, 0, "held");
	wait_shots(ctx, &a, 1);
	ck_assert_int_eq(a.res[0], 0);
	wait_shots(ctx, &b, 1);
	expect_buffer(ctx, pool, &b, 0, "next");
	afio_destroy(ctx);
	close(hv[0]);
	close(hv[1]);
	close(av[1]);
	close(bv[0]);
	close(bv[1]);
}
END_TEST

/* A receive waiting for a buffer, canceled; destroy with buffers held. */
START_TEST(test_cancel_parked_and_destroy)
{
	afio_ctx *ctx = tu_new_ctx();
	unsigned pool = new_pool(ctx, 1, 16);
	struct shots a = { 0 }, b = { 0 }, c = { 0 };
	afio_handle hb;
	int sv[2], tv[2], uv[2];

	tu_socketpair(sv);
	tu_socketpair(tv);
	tu_socketpair(uv);
	ck_assert_int_eq(afio_recv_pooled(ctx, sv[1], pool, 0, 0, on_shot, &a), 0);
	ck_assert_int_eq(write(sv[0], "held", 4), 4);
	wait_shots(ctx, &a, 1);
	ck_assert_int_eq(afio_recv_pooled(ctx, tv[1], pool, 0, 0, on_shot, &b), 0);
	hb = afio_last_handle(ctx);
	ck_assert_int_eq(write(tv[0], "parked", 6), 6);
	no_shot(ctx, &b);
	ck_assert_int_eq(afio_cancel_handle(ctx, hb), 0);
	wait_shots(ctx, &b, 1);
	ck_assert_int_eq(b.res[0], -ECANCELED);
	/* Destroy: the buffer is still the program's; a waiting multishot
	   receive completes once. */
	ck_assert_int_eq(afio_recv_pooled(ctx, uv[1], pool, 0, AFIO_RECV_MULTISHOT, on_shot, &c),
			 0);
	ck_assert_int_ge(afio_poll(ctx, 0, 0), 0);
	afio_destroy(ctx);
	ck_assert_int_eq(c.n, 1);
	ck_assert_int_eq(c.res[0], -ECANCELED);
	ck_assert_int_eq(c.finals, 1);
	close(sv[0]);
	close(sv[1]);
	close(tv[0]);
	close(tv[1]);
	close(uv[0]);
	close(uv[1]);
}
END_TEST

/* Canceled between a result and its callback (from the callback of
   another request of the same round): the result still comes, with
   AFIO_CQE_MORE and its bytes, and -ECANCELED ends the request. */
struct cancel_other {
	afio_ctx *ctx;
	afio_handle target;
	int ret;
};

static void on_cancel_other(void *data, ssize_t res)
{
	struct cancel_other *c = data;

	(void)res;
	c->ret = afio_cancel_handle(c->ctx, c->target);
}

/* Polls until the last completion of s, failing after TU_HANG_MS. */
static void wait_last(afio_ctx *ctx, struct shots *s)
{
	int64_t until = tu_now_ns() + TU_HANG_MS * TU_NS_PER_MS;

	while (!s->finals) {
		ck_assert_int_ge(afio_poll(ctx, 1, 100), 0);
		ck_assert_msg(tu_now_ns() < until, "no last completion on %s after %d ms",
			      tu_target_name(), TU_HANG_MS);
	}
}

START_TEST(test_multishot_cancel_between)
{
	afio_ctx *ctx = tu_new_ctx();
	unsigned pool = new_pool(ctx, 2, 32);
	struct shots s = { 0 };
	struct cancel_other c = { .ctx = ctx, .ret = 1 };
	size_t got = 0;
	int sv[2];

	tu_socketpair(sv);
	ck_assert_int_eq(write(sv[0], "ab", 2), 2);
	/* Queued first, so its callback runs first in the round. */
	ck_assert_int_eq(afio_nop(ctx, on_cancel_other, &c), 0);
	ck_assert_int_eq(afio_recv_pooled(ctx, sv[1], pool, 0, AFIO_RECV_MULTISHOT, on_shot, &s),
			 0);
	c.target = afio_last_handle(ctx);
	wait_last(ctx, &s);
	ck_assert_int_eq(c.ret, 0);
	ck_assert_msg(s.res[s.n - 1] == -ECANCELED, "last result on %s: %s", tu_target_name(),
		      tu_res_str(s.res[s.n - 1]));
	for (int i = 0; i < s.n - 1; i++) {
		ck_assert_uint_eq(s.flags[i] & (AFIO_CQE_MORE | AFIO_CQE_BUFFER),
				  AFIO_CQE_MORE | AFIO_CQE_BUFFER);
		ck_assert_int_gt(s.res[i], 0);
		got += (size_t)s.res[i];
		ck_assert_int_eq(afio_buf_release(ctx, pool, afio_cqe_buf(s.flags[i])), 0);
	}
	ck_assert_uint_eq(s.flags[s.n - 1], 0);
	/* What was received before the cancel took effect, nothing more or
	   less: the rest is still in the socket. */
	if (got < 2) {
		char rest[2];

		ck_assert_int_eq(recv(sv[1], rest, sizeof(rest), MSG_DONTWAIT), (ssize_t)(2 - got));
	}
	ck_assert_int_eq(write(sv[0], "c", 1), 1);
	no_shot(ctx, &s);
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* Buffers of one byte: one burst is a completion per byte, so that the
   kernel's own multishot posts several for one request at once, each of
   which must wait for the callback of the one before. */
START_TEST(test_multishot_tiny_buffers)
{
	static const char msg[] = "abcdefghij";
	afio_ctx *ctx = tu_new_ctx();
	unsigned pool = new_pool(ctx, 16, 1);
	struct shots s = { 0 };
	char got[sizeof(msg)] = { 0 };
	int sv[2];

	tu_socketpair(sv);
	ck_assert_int_eq(afio_recv_pooled(ctx, sv[1], pool, 0, AFIO_RECV_MULTISHOT, on_shot, &s),
			 0);
	ck_assert_int_ge(afio_poll(ctx, 0, 0), 0);
	ck_assert_int_eq(write(sv[0], msg, sizeof(msg) - 1), (ssize_t)sizeof(msg) - 1);
	wait_shots(ctx, &s, (int)sizeof(msg) - 1);
	for (int i = 0; i < s.n; i++) {
		ck_assert_msg(s.res[i] == 1 && (s.flags[i] & AFIO_CQE_MORE),
			      "completion %d on %s: %s, flags %#x", i, tu_target_name(),
			      tu_res_str(s.res[i]), s.flags[i]);
		got[i] = *(const char *)afio_buf(ctx, pool, afio_cqe_buf(s.flags[i]));
		ck_assert_int_eq(afio_buf_release(ctx, pool, afio_cqe_buf(s.flags[i])), 0);
	}
	ck_assert_str_eq(got, msg);
	close(sv[0]);
	wait_last(ctx, &s);
	ck_assert_int_eq(s.res[s.n - 1], 0);
	afio_destroy(ctx);
	close(sv[1]);
}
END_TEST

/* Three connections, one accept; after the first its listener's number
   names another listener, and the accept, bound to the first from the
   call on, still takes the next two from it. */
START_TEST(test_multishot_accept)
{
	afio_ctx *ctx = tu_new_ctx();
	struct sockaddr_in addr, other_addr;
	int listener = tu_tcp_listener(16, true, &addr), clients[3];
	int other = tu_tcp_listener(16, true, &other_addr);
	struct shots s = { 0 };

	ck_assert_int_eq(afio_accept_multishot(ctx, listener, SOCK_CLOEXEC, on_shot, &s), 0);
	for (int i = 0; i < 3; i++) {
		clients[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ck_assert_int_ge(clients[i], 0);
		tu_connect_to(clients[i], &addr);
		wait_shots(ctx, &s, i + 1);
		ck_assert_msg(s.res[i] >= 0, "accept %d on %s: %s", i, tu_target_name(),
			      tu_res_str(s.res[i]));
		ck_assert_msg(s.flags[i] == AFIO_CQE_MORE, "accept %d on %s: flags %#x", i,
			      tu_target_name(), s.flags[i]);
		close((int)s.res[i]);
		if (!i)
			ck_assert_int_eq(dup2(other, listener), listener);
	}
	ck_assert_int_eq(afio_cancel(ctx, &s), 1);
	wait_shots(ctx, &s, 4);
	ck_assert_int_eq(s.res[3], -ECANCELED);
	ck_assert_uint_eq(s.flags[3], 0);
	afio_destroy(ctx);
	for (int i = 0; i < 3; i++)
		close(clients[i]);
	close(listener);
	close(other);
}
END_TEST

/* One receive at a time through a large pool: the buffers given back
   serve again, so that a quiet pool keeps few of its pages resident (on
   io_uring the kernel's ring holds only a few of the free buffers). */
START_TEST(test_quiet_pool_reuses_few_buffers)
{
	enum { ROUNDS_ONE_BY_ONE = MAX_SHOTS - 1, AT_MOST = 17 };
	afio_ctx *ctx = tu_new_ctx();
	unsigned pool = new_pool(ctx, 256, 16);
	bool used[256] = { false };
	struct shots s = { 0 };
	unsigned distinct = 0;
	int sv[2];

	tu_socketpair(sv);
	ck_assert_int_eq(afio_recv_pooled(ctx, sv[1], pool, 0, AFIO_RECV_MULTISHOT, on_shot, &s),
			 0);
	for (int r = 0; r < ROUNDS_ONE_BY_ONE; r++) {
		unsigned id;

		ck_assert_int_eq(write(sv[0], "x", 1), 1);
		wait_shots(ctx, &s, r + 1);
		id = afio_cqe_buf(s.flags[r]);
		distinct += !used[id];
		used[id] = true;
		expect_buffer(ctx, pool, &s, r, "x");
	}
	ck_assert_msg(distinct <= AT_MOST, "%u buffers of the pool used on %s", distinct,
		      tu_target_name());
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* More receives with data at once than a quiet pool keeps ready: each
   gets its bytes all the same, none waits for a buffer given back. */
START_TEST(test_burst_beyond_ready_buffers)
{
	enum { BURST = 64 };
	afio_ctx *ctx = tu_new_ctx();
	unsigned pool = new_pool(ctx, 2 * BURST, 16);
	struct shots s[BURST];
	int sv[BURST][2], have = 0;
	int64_t until;

	memset(s, 0, sizeof(s));
	for (int p = 0; p < BURST; p++) {
		tu_socketpair(sv[p]);
		ck_assert_int_eq(afio_recv_pooled(ctx, sv[p][1], pool, 0, AFIO_RECV_MULTISHOT,
						  on_shot, &s[p]), 0);
	}
	ck_assert_int_ge(afio_poll(ctx, 0, 0), 0);
	for (int p = 0; p < BURST; p++)
		ck_assert_int_eq(write(sv[p][0], "y", 1), 1);
	until = tu_now_ns() + TU_HANG_MS * TU_NS_PER_MS;
	while (have < BURST) {
		ck_assert_int_ge(afio_poll(ctx, 1, 100), 0);
		ck_assert_msg(tu_now_ns() < until, "%d of %d receives on %s", have, BURST,
			      tu_target_name());
		have = 0;
		for (int p = 0; p < BURST; p++)
			have += s[p].n > 0;
	}
	for (int p = 0; p < BURST; p++) {
		ck_assert_int_eq(s[p].n, 1);
		expect_buffer(ctx, pool, &s[p], 0, "y");
		ck_assert_uint_eq(s[p].flags[0] & AFIO_CQE_MORE, AFIO_CQE_MORE);
	}
	afio_destroy(ctx);
	for (int p = 0; p < BURST; p++) {
		close(sv[p][0]);
		close(sv[p][1]);
	}
}
END_TEST

/* The index of the op named name. */
static unsigned op_named(const char *name)
{
	int op = tu_op_number(name);

	ck_assert_msg(op >= 0, "no op %s", name);
	return (unsigned)op;
}

/* A multishot accept on a socket that does not listen ends once, with
   -EINVAL, on every backend; on io_uring (where a first shot refused
   with -EINVAL is tried again without the kernel's multishot, to tell a
   kernel that lacks it from a request that is wrong) the kernel's own
   multishot stays in use after it. */
START_TEST(test_multishot_accept_refused)
{
	afio_ctx *ctx = tu_new_ctx();
	struct shots bad = { 0 }, good = { 0 };
	struct sockaddr_in addr;
	int idle = tu_tcp_socket(true), listener = tu_tcp_listener(4, true, &addr);
	int client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char how[160];

	ck_assert_int_ge(client, 0);
	ck_assert_int_eq(afio_accept_multishot(ctx, idle, SOCK_CLOEXEC, on_shot, &bad), 0);
	wait_shots(ctx, &bad, 1);
	ck_assert_int_eq(bad.res[0], -EINVAL);
	ck_assert_uint_eq(bad.flags[0], 0);
	ck_assert_int_eq(afio_accept_multishot(ctx, listener, SOCK_CLOEXEC, on_shot, &good), 0);
	tu_connect_to(client, &addr);
	wait_shots(ctx, &good, 1);
	ck_assert_int_ge(good.res[0], 0);
	ck_assert_uint_eq(good.flags[0], AFIO_CQE_MORE);
	close((int)good.res[0]);
	ck_assert_int_ge(afio_op_native(ctx, op_named("accept"), how, sizeof(how)), 0);
	if (afio_backend(ctx) == AFIO_BACKEND_IO_URING)
		ck_assert_msg(strstr(how, "kernel multishot"), "accept on io_uring: %s", how);
	afio_destroy(ctx);
	ck_assert_int_eq(good.finals, 1);
	close(client);
	close(listener);
	close(idle);
}
END_TEST

/* A burst from many peers through a small pool: every byte arrives once,
   in order per peer, whatever the pool's size. */
enum { PEERS = 16, ROUNDS = 20 };

/* Checks and gives back what each peer's shots hold; true when every
   peer has had want bytes. */
static bool take_bytes(afio_ctx *ctx, unsigned pool, struct shots *s, unsigned *got,
		       unsigned want)
{
	bool all = true;

	for (int p = 0; p < PEERS; p++) {
		for (int i = 0; i < s[p].n; i++) {
			unsigned id = afio_cqe_buf(s[p].flags[i]);
			const unsigned char *buf = afio_buf(ctx, pool, id);

			ck_assert_msg(s[p].res[i] > 0 && (s[p].flags[i] & AFIO_CQE_MORE),
				      "peer %d on %s: %s, flags %#x", p, tu_target_name(),
				      tu_res_str(s[p].res[i]), s[p].flags[i]);
			for (ssize_t k = 0; k < s[p].res[i]; k++)
				ck_assert_uint_eq(buf[k], got[p]++);
			ck_assert_int_eq(afio_buf_release(ctx, pool, id), 0);
		}
		s[p].n = 0;
		all = all && got[p] >= want;
	}
	return all;
}

START_TEST(test_many_peers_small_pool)
{
	afio_ctx *ctx = tu_new_ctx();
	unsigned pool = new_pool(ctx, 3, 8);
	struct shots s[PEERS];
	int sv[PEERS][2];
	unsigned got[PEERS] = { 0 };

	memset(s, 0, sizeof(s));
	for (int p = 0; p < PEERS; p++) {
		tu_socketpair(sv[p]);
		ck_assert_int_eq(afio_recv_pooled(ctx, sv[p][1], pool, 0, AFIO_RECV_MULTISHOT,
						  on_shot, &s[p]), 0);
	}
	for (unsigned r = 0; r < ROUNDS; r++) {
		int64_t until = tu_now_ns() + TU_HANG_MS * TU_NS_PER_MS;

		for (int p = 0; p < PEERS; p++) {
			unsigned char b = (unsigned char)r;

			ck_assert_int_eq(write(sv[p][0], &b, 1), 1);
		}
		while (!take_bytes(ctx, pool, s, got, r + 1)) {
			ck_assert_int_ge(afio_poll(ctx, 1, 100), 0);
			ck_assert_msg(tu_now_ns() < until, "round %u on %s: bytes missing", r,
				      tu_target_name());
		}
	}
	afio_destroy(ctx);
	for (int p = 0; p < PEERS; p++) {
		ck_assert_int_eq(s[p].finals, 1);
		ck_assert_int_eq(s[p].res[s[p].n - 1], -ECANCELED);
		close(sv[p][0]);
		close(sv[p][1]);
	}
}
END_TEST

/*
 * A pooled receive is bound to its socket from the call on (asyncfio(7),
 * CLOSING A DESCRIPTOR), through its re-arms and the core's own reads:
 * after its number is given to another socket it still receives from
 * the first, and nothing of the other.  Each case: a single receive and
 * a multishot one (whose next result comes after a re-arm), from a small
 * pool and from one too large for io_uring's buffer ring (the core reads
 * there too).  Fails with the other socket's bytes, -EBADF, or a hang,
 * when a step uses the number.
 */
START_TEST(test_pooled_recv_bound)
{
	static const unsigned counts[] = { 4, 40000 };

	for (unsigned c = 0; c < 2; c++) {
		for (int multi = 0; multi < 2; multi++) {
			int fds_before = tu_count_fds(), a[2], b[2], num;
			afio_ctx *ctx = tu_new_ctx();
			unsigned pool = new_pool(ctx, counts[c], 64);
			struct shots s = { 0 };

			tu_socketpair(a);
			tu_socketpair(b);
			num = a[1];
			ck_assert_int_eq(afio_recv_pooled(ctx, num, pool, 0,
							  multi ? AFIO_RECV_MULTISHOT : 0,
							  on_shot, &s), 0);
			no_shot(ctx, &s);
			ck_assert_int_eq(dup2(b[1], num), num);
			ck_assert_int_eq(write(b[0], "other", 5), 5);
			ck_assert_int_eq(write(a[0], "first", 5), 5);
			wait_shots(ctx, &s, 1);
			expect_buffer(ctx, pool, &s, 0, "first");
			if (multi) {
				ck_assert_uint_eq(s.flags[0] & AFIO_CQE_MORE, AFIO_CQE_MORE);
				ck_assert_int_eq(write(a[0], "again", 5), 5);
				wait_shots(ctx, &s, 2);
				expect_buffer(ctx, pool, &s, 1, "again");
				close(a[0]);
				wait_shots(ctx, &s, 3);
				ck_assert_int_eq(s.res[2], 0);
			}
			ck_assert_int_eq(s.finals, 1);
			afio_destroy(ctx);
			if (!multi)
				close(a[0]);
			close(b[0]);
			close(b[1]);
			close(num);
			ck_assert_msg(tu_count_fds() == fds_before,
				      "%d fds on %s after, %d before (pool of %u, %s)", tu_count_fds(),
				      tu_target_name(), fds_before, counts[c],
				      multi ? "multishot" : "single");
		}
	}
}
END_TEST

static Suite *bufpool_suite(void)
{
	Suite *s = suite_create("bufpool");
	TCase *pool = tu_tcase(s, "pool");
	TCase *multi = tu_tcase(s, "multishot");

	tcase_add_test(pool, test_pooled_recv);
	tcase_add_test(pool, test_pooled_args);
	tcase_add_test(pool, test_pool_empty_waits);
	tcase_add_test(pool, test_release_twice_result_waiting);
	tcase_add_test(pool, test_cancel_parked_and_destroy);
	tcase_add_test(pool, test_waiter_ends_without_buffer);
	tcase_add_test(pool, test_pooled_recv_bound);
	tcase_add_test(multi, test_multishot_recv);
	tcase_add_test(multi, test_multishot_recv_end);
	tcase_add_test(multi, test_multishot_eventfd_loop);
	tcase_add_test(multi, test_multishot_accept);
	tcase_add_test(multi, test_multishot_cancel_between);
	tcase_add_test(multi, test_multishot_tiny_buffers);
	tcase_add_test(multi, test_multishot_accept_refused);
	tcase_add_test(multi, test_quiet_pool_reuses_few_buffers);
	tcase_add_test(multi, test_burst_beyond_ready_buffers);
	tcase_add_test(multi, test_many_peers_small_pool);
	return s;
}

int main(int argc, char **argv)
{
	return tu_main(argc, argv, bufpool_suite);
}
