/* SPDX-License-Identifier: MIT */
/*
 * Timers and nops on one backend in one mode (from argv): a timer fires
 * no sooner than asked, beside waiting I/O and through the eventfd alone;
 * timers canceled as they fire complete once; nops complete once with 0,
 * wake a loop that watches the eventfd, and are canceled and destroyed
 * like any request.
 */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "asyncfio.h"
#include "testutil.h"

/* ---- timers ---- */

struct stamp {
	struct tu_done d;	/* first: tu_on_done's data */
	int64_t at_ns;
};

static void on_stamp(void *data, ssize_t res)
{
	struct stamp *s = data;

	s->at_ns = tu_now_ns();
	tu_on_done(&s->d, res);
}

/* No sooner than asked; "seconds late" only as a hang bound. */
static void on_time(const struct stamp *s, int64_t start_ns, int64_t ms, const char *what)
{
	int64_t elapsed = s->at_ns - start_ns;

	ck_assert_msg(s->d.calls == 1, "%s on %s: %d callbacks", what, tu_target_name(),
		      s->d.calls);
	tu_expect_eq(s->d.res, -ETIME, what);
	ck_assert_msg(elapsed >= ms * TU_NS_PER_MS, "a %lld ms %s on %s fired after %lld us",
		      (long long)ms, what, tu_target_name(), (long long)(elapsed / 1000));
	ck_assert_msg(elapsed < ms * TU_NS_PER_MS + 2000 * TU_NS_PER_MS,
		      "a %lld ms %s on %s took %lld ms: it hung", (long long)ms, what,
		      tu_target_name(), (long long)(elapsed / TU_NS_PER_MS));
}

START_TEST(test_timeout)
{
	static const int64_t ms[] = { 20, 5, 12, 0 };
	enum { N = sizeof(ms) / sizeof(ms[0]) };
	afio_ctx *ctx = tu_new_ctx();
	struct stamp s[N];
	int64_t start;

	memset(s, 0, sizeof(s));
	start = tu_now_ns();
	for (int i = 0; i < N; i++)
		tu_queued(afio_timeout(ctx, (uint64_t)(ms[i] * TU_NS_PER_MS), on_stamp, &s[i]),
			  "timeout");
	for (int i = 0; i < N; i++)
		tu_wait_for(ctx, &s[i].d, "timeout");
	for (int i = 0; i < N; i++)
		on_time(&s[i], start, ms[i], "timer");
	/* One after another on the same context. */
	for (int i = 0; i < 3; i++) {
		memset(&s[0], 0, sizeof(s[0]));
		start = tu_now_ns();
		tu_queued(afio_timeout(ctx, 3 * TU_NS_PER_MS, on_stamp, &s[0]), "timeout");
		tu_wait_for(ctx, &s[0].d, "timeout");
		on_time(&s[0], start, 3, "timer");
	}
	afio_destroy(ctx);
}
END_TEST

/* A timer fires while a recv waits, and does not complete the recv. */
START_TEST(test_timeout_beside_io)
{
	afio_ctx *ctx = tu_new_ctx();
	struct tu_done r = { 0 };
	struct stamp s = { 0 };
	char in[8];
	int64_t start;
	int sv[2];

	tu_socketpair(sv);
	tu_queued(afio_recv(ctx, sv[1], in, sizeof(in), 0, tu_on_done, &r), "recv");
	start = tu_now_ns();
	tu_queued(afio_timeout(ctx, 10 * TU_NS_PER_MS, on_stamp, &s), "timeout");
	tu_wait_for(ctx, &s.d, "timeout");
	on_time(&s, start, 10, "timer");
	ck_assert_int_eq(r.calls, 0);
	ck_assert_int_eq(write(sv[0], "x", 1), 1);
	tu_wait_once(ctx, &r, "recv");
	tu_expect_eq(r.res, 1, "recv");
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/*
 * Many short timers, all canceled while some fire: each completes once,
 * -ETIME or -ECANCELED, and stats.canceled counts the second kind.
 */
START_TEST(test_timeout_cancel_race)
{
	enum { N = 200 };
	static struct tu_done d[N];
	afio_ctx *ctx = tu_ctx(tu_backend, tu_mode, 2 * N);
	unsigned seed = 5 + (unsigned)tu_mode;
	struct afio_stats st;
	uint64_t canceled = 0;

	memset(d, 0, sizeof(d));
	for (int i = 0; i < N; i++)
		tu_queued(afio_timeout(ctx, (uint64_t)(rand_r(&seed) % 3000) * 1000, tu_on_done,
				       &d[i]), "timeout");
	ck_assert_int_ge(afio_poll(ctx, N / 4, 1), 0);
	for (int i = 0; i < N; i++) {
		int ret = afio_cancel(ctx, &d[i]);

		/* One that fired but is not yet told may count either way. */
		ck_assert_msg(ret == -ENOENT || (ret == 1 && !d[i].calls),
			      "afio_cancel of timer %d (%d callbacks): %d", i, d[i].calls, ret);
	}
	tu_drain(ctx);
	for (int i = 0; i < N; i++) {
		ck_assert_msg(d[i].calls == 1, "timer %d on %s: %d callbacks", i, tu_target_name(),
			      d[i].calls);
		ck_assert_msg(d[i].res == -ETIME || d[i].res == -ECANCELED, "timer %d on %s: %s", i,
			      tu_target_name(), tu_res_str(d[i].res));
		canceled += d[i].res == -ECANCELED;
	}
	ck_assert_int_eq(afio_stats(ctx, &st), 0);
	ck_assert_uint_eq(st.canceled, canceled);
	ck_assert_uint_eq(st.in_flight, 0);
	ck_assert_uint_eq(st.completed, N);
	afio_destroy(ctx);
}
END_TEST

static void on_tick(void *data, ssize_t res);

struct ticker {
	afio_ctx *ctx;
	int ticks;
	int64_t queued_ns, fired_ns;
	ssize_t res;
	int early;	/* ticks that came before their time */
};

#define TICK_MS 10

static void tick_again(struct ticker *t)
{
	t->queued_ns = tu_now_ns();
	tu_queued(afio_timeout(t->ctx, TICK_MS * TU_NS_PER_MS, on_tick, t), "timeout");
}

static void on_tick(void *data, ssize_t res)
{
	struct ticker *t = data;

	t->fired_ns = tu_now_ns();
	t->res = res;
	t->early += t->fired_ns - t->queued_ns < TICK_MS * TU_NS_PER_MS;
	if (++t->ticks < 3 && res == -ETIME)
		tick_again(t);
}

/*
 * A program that watches only the eventfd, in its own epoll set, and calls
 * afio_poll(ctx, 0, 0) when it is readable (afio_submit() after it, for
 * what its callbacks queued): the timer fires through the eventfd, not
 * early, three times in a row.
 */
START_TEST(test_timeout_by_eventfd)
{
	afio_ctx *ctx = tu_new_ctx();
	int efd = afio_eventfd(ctx), ep = epoll_create1(EPOLL_CLOEXEC), idle = 0;
	struct epoll_event ev = { .events = EPOLLIN };
	struct ticker t = { .ctx = ctx };
	int64_t start = tu_now_ns();

	ck_assert_int_ge(efd, 0);
	ck_assert_int_ge(ep, 0);
	ck_assert_int_eq(epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev), 0);
	tick_again(&t);
	ck_assert_int_ge(afio_submit(ctx), 0);
	while (t.ticks < 3) {
		int64_t hang = tu_now_ns() + 2000 * TU_NS_PER_MS;
		int n, ran;

		/* EINTR: io_uring's task work for the owner thread interrupts
		   its waits, as a signal would; a program waits again. */
		do
			n = epoll_wait(ep, &ev, 1, 100);
		while ((n == 0 || (n < 0 && errno == EINTR)) && tu_now_ns() < hang);
		ck_assert_msg(n == 1, "tick %d on %s: the eventfd was not readable in 2 s: a hang",
			      t.ticks + 1, tu_target_name());
		ran = afio_poll(ctx, 0, 0);
		ck_assert_int_ge(ran, 0);
		ck_assert_int_ge(afio_submit(ctx), 0);
		/* Readable with nothing to run, over and over: a busy loop. */
		idle = ran ? 0 : idle + 1;
		ck_assert_msg(idle < 1000, "on %s the eventfd stays readable with nothing done",
			      tu_target_name());
	}
	ck_assert_msg(!t.early, "on %s %d of 3 ticks of %d ms came early", tu_target_name(),
		      t.early, TICK_MS);
	tu_expect_eq(t.res, -ETIME, "timer");
	ck_assert(t.fired_ns - start >= 3 * TICK_MS * TU_NS_PER_MS);
	close(ep);
	afio_destroy(ctx);
}
END_TEST

/* ---- nop ---- */

struct nop_chain {
	afio_ctx *ctx;
	int left, calls;
	ssize_t bad;		/* the first result that was not 0 */
};

static void on_nop_chain(void *data, ssize_t res)
{
	struct nop_chain *c = data;

	c->calls++;
	if (res && !c->bad)
		c->bad = res;
	if (--c->left > 0)
		tu_queued(afio_nop(c->ctx, on_nop_chain, c), "nop from its own callback");
}

/*
 * A context's worth of nops each complete once with 0, as does a chain of
 * nops each queued from the last one's callback; with entries in use the
 * next is refused with -EAGAIN, and bad arguments fail at once.
 */
START_TEST(test_nop)
{
	enum { ENTRIES = 16, CHAIN = 1000 };
	afio_ctx *ctx = tu_ctx(tu_backend, tu_mode, ENTRIES);
	struct tu_done d[ENTRIES], extra = { 0 };
	struct nop_chain c = { .ctx = ctx, .left = CHAIN };
	struct afio_stats st;
	int64_t end;

	memset(d, 0, sizeof(d));
	for (int i = 0; i < ENTRIES; i++)
		tu_queued(afio_nop(ctx, tu_on_done, &d[i]), "nop");
	tu_expect_eq(afio_nop(ctx, tu_on_done, &extra), -EAGAIN, "nop past entries");
	for (int i = 0; i < ENTRIES; i++) {
		tu_wait_once(ctx, &d[i], "nop");
		tu_expect_eq(d[i].res, 0, "nop");
	}
	ck_assert_int_eq(extra.calls, 0);

	tu_queued(afio_nop(ctx, on_nop_chain, &c), "nop");
	end = tu_now_ns() + TU_HANG_MS * TU_NS_PER_MS;
	while (c.left > 0) {
		ck_assert_msg(tu_now_ns() < end, "a chain of nops on %s stopped at %d of %d",
			      tu_target_name(), CHAIN - c.left, CHAIN);
		ck_assert_int_ge(afio_poll(ctx, 1, 100), 0);
	}
	ck_assert_int_eq(c.calls, CHAIN);
	tu_expect_eq(c.bad, 0, "a nop of the chain");
	ck_assert_int_eq(afio_stats(ctx, &st), 0);
	ck_assert_uint_eq(st.in_flight, 0);
	ck_assert_uint_eq(st.completed, ENTRIES + CHAIN);
	ck_assert_uint_eq(st.fallbacks, 0);

	tu_expect_eq(afio_nop(NULL, tu_on_done, &extra), -EINVAL, "nop without a context");
	tu_expect_eq(afio_nop(ctx, NULL, &extra), -EINVAL, "nop without a callback");
	ck_assert_int_eq(extra.calls, 0);
	afio_destroy(ctx);
}
END_TEST

/*
 * What a program queues a nop for: to wake its own loop.  The loop
 * watches only the eventfd; after a nop is submitted it becomes readable
 * and the callback runs in the afio_poll() that follows.
 */
START_TEST(test_nop_wakes_eventfd)
{
	afio_ctx *ctx = tu_new_ctx();
	int efd = afio_eventfd(ctx);
	struct pollfd pfd = { .fd = efd, .events = POLLIN };
	struct tu_done d = { 0 };

	ck_assert_int_ge(efd, 0);
	for (int round = 0; round < 3; round++) {
		int n;

		memset(&d, 0, sizeof(d));
		tu_queued(afio_nop(ctx, tu_on_done, &d), "nop");
		ck_assert_int_ge(afio_submit(ctx), 0);
		do
			n = poll(&pfd, 1, TU_HANG_MS);
		while (n < 0 && errno == EINTR);
		ck_assert_msg(n == 1, "round %d on %s: the eventfd was not readable after a nop",
			      round, tu_target_name());
		ck_assert_int_eq(d.calls, 0);
		ck_assert_int_eq(afio_poll(ctx, 0, 0), 1);
		ck_assert_int_eq(d.calls, 1);
		tu_expect_eq(d.res, 0, "nop");
		/* Nothing left to run: the eventfd is quiet again. */
		ck_assert_int_eq(poll(&pfd, 1, 0), 0);
	}
	afio_destroy(ctx);
}
END_TEST

/* A nop canceled before it is submitted gives -ECANCELED, one already
   finished keeps its 0: either way exactly one callback; destroy with
   nops queued runs each once. */
START_TEST(test_nop_cancel_destroy)
{
	afio_ctx *ctx = tu_new_ctx();
	struct tu_done d = { 0 }, q[4];
	int n;

	tu_queued(afio_nop(ctx, tu_on_done, &d), "nop");
	n = afio_cancel(ctx, &d);
	ck_assert_msg(n == 1 || n == -ENOENT, "cancel of a nop on %s: %s", tu_target_name(),
		      tu_res_str(n));
	tu_wait_once(ctx, &d, "canceled nop");
	tu_expect_eq(d.res, n == 1 ? -ECANCELED : 0, "canceled nop");

	memset(q, 0, sizeof(q));
	for (int i = 0; i < 4; i++)
		tu_queued(afio_nop(ctx, tu_on_done, &q[i]), "nop");
	afio_destroy(ctx);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(q[i].calls, 1);
		ck_assert_msg(q[i].res == 0 || q[i].res == -ECANCELED,
			      "nop destroyed on %s: %s", tu_target_name(), tu_res_str(q[i].res));
	}
}
END_TEST

static Suite *timers_suite(void)
{
	Suite *s = suite_create("timers");
	TCase *timers = tu_tcase(s, "timers");
	TCase *nop = tu_tcase(s, "nop");

	tcase_add_test(timers, test_timeout);
	tcase_add_test(timers, test_timeout_beside_io);
	tcase_add_test(timers, test_timeout_cancel_race);
	tcase_add_test(timers, test_timeout_by_eventfd);
	tcase_add_test(nop, test_nop);
	tcase_add_test(nop, test_nop_wakes_eventfd);
	tcase_add_test(nop, test_nop_cancel_destroy);
	return s;
}

int main(int argc, char **argv)
{
	return tu_main(argc, argv, timers_suite);
}
