/* SPDX-License-Identifier: MIT */
/* Request intake, hand-over to the engines, completion delivery, cancel.
   (lib/README.md, "Hand-over and completion") */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "context.h"

int afio_reqq_remove(struct afio_reqq *q, struct afio_req *r)
{
	struct afio_req **pp;

	for (pp = &q->head; *pp; pp = &(*pp)->next) {
		if (*pp != r)
			continue;
		*pp = r->next;
		if (q->tail == &r->next)
			q->tail = pp;
		q->count--;
		r->next = NULL;
		return 0;
	}
	return -ENOENT;
}



static size_t iov_bytes(const struct iovec *iov, size_t cnt)
{
	size_t n = 0;

	for (size_t i = 0; i < cnt; i++)
		n += iov[i].iov_len;
	return n;
}

size_t afio_req_bytes(const struct afio_req *r)
{
	if (r->op != AFIO_OP_READV && r->op != AFIO_OP_WRITEV)
		return r->len;
	return iov_bytes(r->iov, r->len);
}

/* ---- what the engines call ---- */

static void signal_eventfd(struct afio_ctx *ctx)
{
	uint64_t one = 1;

	ctx->evfd_up = true;
	(void)!write(ctx->evfd, &one, sizeof(one));
}

/*
 * An edge-triggered watcher needs a write for each new thing to collect;
 * a level-triggered one (AFIO_LEVEL_EVENTFD) only an eventfd that stays
 * readable, which it is while evfd_up holds: only the core reads it, and
 * it clears evfd_up as it does.
 */
static bool level_and_up(const struct afio_ctx *ctx)
{
	return (ctx->cfg.flags & AFIO_LEVEL_EVENTFD) && ctx->evfd_up;
}

void afio_ctx_clear_eventfd(struct afio_ctx *ctx)
{
	uint64_t v;

	ctx->evfd_up = false;
	(void)!read(ctx->evfd, &v, sizeof(v));
}

/* The most bytes r may report: what it asked for; SIZE_MAX for an op whose
   result is not a count (an fd, 0), and for a receive with MSG_TRUNC,
   which gives a datagram's whole length (recv(2)). */
static size_t most_bytes(const struct afio_req *r)
{
	if ((r->op == AFIO_OP_RECV || r->op == AFIO_OP_RECVMSG) && (r->flags & MSG_TRUNC))
		return SIZE_MAX;
	switch (r->op) {
	case AFIO_OP_READ:
	case AFIO_OP_WRITE:
	case AFIO_OP_RECV:
	case AFIO_OP_SEND:
	case AFIO_OP_SENDFILE:
		return r->len;
	case AFIO_OP_READV:
	case AFIO_OP_WRITEV:
		return iov_bytes(r->iov, r->len);
	case AFIO_OP_SENDMSG:
	case AFIO_OP_RECVMSG:
		return iov_bytes(r->msg->msg_iov, r->msg->msg_iovlen);
	default:
		return SIZE_MAX;
	}
}

/*
 * A count beyond what was asked for, or a code the kernel keeps for
 * itself, is a fault of the library, never a result: the program would
 * read past its buffer, or meet an errno it cannot know.  The request
 * fails with -EIO (bytes moved that were not asked for: the stream or the
 * file is not what the program believes) or -EINTR instead.  The backends
 * keep both from happening; this keeps the promise if one does not.
 */
static ssize_t checked_res(const struct afio_req *r, ssize_t res)
{
	/* Within len is within what was asked for wherever len is not an
	   iovec count; most_bytes() answers for the rest. */
	if (res > 0 &&
	    ((size_t)res > r->len || r->op == AFIO_OP_READV || r->op == AFIO_OP_WRITEV) &&
	    (size_t)res > most_bytes(r))
		return -EIO;
	if (afio_is_restart_code(res))
		return -EINTR;
	return res;
}

static inline __attribute__((always_inline)) void detach(struct afio_req *r)
{
	if (r->engine) {
		r->engine->handed--;
		r->engine = NULL;
	}
}

void afio_req_detach(struct afio_req *r)
{
	detach(r);
}

/* Inlined into afio_req_done(), the path of every request. */
static inline __attribute__((always_inline)) void finish(struct afio_req *r, ssize_t res)
{
	r->res = res;
	r->state = AFIO_REQ_DONE;
	afio_reqq_push(&r->ctx->done, r);
	/* Inside afio_poll() the callback runs in a later round of it, or
	   afio_poll() signals before it returns; elsewhere (INLINE completion
	   at submit, cancel) the eventfd must say so now. */
	if (!r->ctx->in_poll && r->ctx->evfd_exported && r->ctx->done.count == 1 &&
	    !level_and_up(r->ctx))
		signal_eventfd(r->ctx);
}

void afio_req_finish(struct afio_req *r, ssize_t res)
{
	finish(r, res);
}

/* The engine's part of a pooled receive ends with readiness (the core
   reads), or with -ENOBUFS from a kernel whose ring was empty. */
static bool pooled_goes_on(struct afio_req *r, ssize_t res)
{
	if (res == -ENOBUFS)
		return afio_bufpool_park(r);
	if (res <= 0)
		return false;
	if (r->cancel)
		afio_req_finish(r, -ECANCELED);
	else
		afio_recv_into_pool(r);
	return true;
}

static __attribute__((noinline)) void done_checked(struct afio_req *r, ssize_t res)
{
	res = checked_res(r, res);
	detach(r);
	if (r->op == AFIO_OP_RECV_POOL && pooled_goes_on(r, res))
		return;
	finish(r, res);
}

/* A count within len of an op whose len is a byte count passes
   checked_res() unchanged: the path of most requests, without a frame. */
void afio_req_done(struct afio_req *r, ssize_t res)
{
	if (__builtin_expect(res < 0 || (size_t)res > r->len || r->op == AFIO_OP_READV ||
			     r->op == AFIO_OP_WRITEV || r->op == AFIO_OP_RECV_POOL, 0)) {
		done_checked(r, res);
		return;
	}
	detach(r);
	finish(r, res);
}

void afio_req_shot(struct afio_req *r, ssize_t res)
{
	r->shot |= AFIO_SHOT_ARMED;
	finish(r, res);
}

/* Queued again by the core (a pooled receive to wait once more, the next
   shot of a multishot request): afio_poll() submits it before it sleeps,
   afio_ctx_kick() where no afio_poll() runs. */
void afio_req_requeue(struct afio_req *r)
{
	if (r->op == AFIO_OP_RECV_POOL)
		afio_bufpool_mark(r);
	r->state = AFIO_REQ_QUEUED;
	afio_reqq_push(&r->ctx->queue, r);
	r->ctx->requeued = true;
}

/*
 * A multishot request the core keeps going (no engine does it for it)
 * is submitted again at the end of the next afio_poll(), after that
 * round's callbacks, not at the end of this one: the program's answer to
 * the result it just had (a send of the bytes received) goes first, and
 * the peer's reply to that has a round to come.  Submitted at once, the
 * receive would try a socket its peer cannot have answered yet and wait
 * in the engine, a readiness wait and a wake-up for every message, where
 * a receive that the program asks for again in its send's callback, a
 * round later, finds the reply there; this is that timing.  The eventfd
 * stays readable while any waits here (settle_eventfd()), and afio_poll()
 * submits them all before it sleeps.
 */
static void rearm_later(struct afio_req *r)
{
	r->state = AFIO_REQ_QUEUED;
	r->shot |= AFIO_SHOT_REARM;
	afio_reqq_push(&r->ctx->rearm, r);
}

/* The oldest n (those queued before the current afio_poll() began). */
static void take_rearms(struct afio_ctx *ctx, unsigned n)
{
	struct afio_req *r;

	while (n-- && (r = afio_reqq_pop(&ctx->rearm))) {
		r->shot &= (uint8_t)~AFIO_SHOT_REARM;
		afio_req_requeue(r);
	}
}

void afio_count_nowait(struct afio_ctx *ctx)
{
	ctx->st.nowait++;
}

static int watch_eventfd(struct afio_engine *e)
{
	return e->ops->watch_eventfd ? e->ops->watch_eventfd(e) : 0;
}

static int start_pool(struct afio_ctx *ctx)
{
	char reason[AFIO_REASON_LEN];
	int ret;

	/* The pool wakes the owner by the eventfd, so the core sleeps on it
	   while the pool holds requests, and the primary's must wake it too. */
	ret = watch_eventfd(&ctx->primary);
	if (ret)
		return ret;
	afio_engine_prepare(ctx, &ctx->pool, &afio_backend_threads);
	ret = afio_backend_threads.init(&ctx->pool, &ctx->cfg, reason, sizeof(reason));
	if (ret)
		ctx->pool.ops = NULL;
	else
		(void)watch_eventfd(&ctx->pool);	/* the pool's cannot fail */
	return ret;
}

void afio_route_to_pool(struct afio_engine *from, struct afio_req *r)
{
	struct afio_ctx *ctx = from->ctx;

	ctx->st.fallbacks++;
	afio_reqq_push(&ctx->to_pool, r);
}

/* Routed requests go to the pool in one batch: one lock, one wake-up. */
static void flush_to_pool(struct afio_ctx *ctx)
{
	struct afio_req *r;
	int ret = 0;

	if (!ctx->to_pool.head)
		return;
	if (!ctx->pool.ops)
		ret = start_pool(ctx);
	if (!ret)
		ret = ctx->pool.ops->submit(&ctx->pool, &ctx->to_pool);
	if (ret < 0)
		while ((r = afio_reqq_pop(&ctx->to_pool)))
			afio_req_done(r, afio_req_stopped(r, ret));
}

/* ---- hand-over and completion ---- */

static int flush(struct afio_ctx *ctx)
{
	int ret;

	ctx->requeued = false;
	if (!ctx->queue.head)
		return 0;
	ret = ctx->primary.ops->submit(&ctx->primary, &ctx->queue);
	flush_to_pool(ctx);
	/* A full kernel queue is not an error: the rest waits for a reap. */
	if (ret == -EAGAIN || ret == -EBUSY)
		ret = 0;
	return ret;
}

void afio_ctx_kick(struct afio_ctx *ctx)
{
	if (ctx->requeued && !ctx->in_poll)
		(void)flush(ctx);
}

int afio_submit(afio_ctx *ctx)
{
	int ret = afio_ctx_check(ctx);

	if (ret)
		return ret;
	take_rearms(ctx, UINT_MAX);
	return flush(ctx);
}

static void reap_engines(struct afio_ctx *ctx)
{
	ctx->primary.ops->reap(&ctx->primary);
	flush_to_pool(ctx);
	if (ctx->pool.ops)
		ctx->pool.ops->reap(&ctx->pool);
}

static void expect_wakeups(struct afio_ctx *ctx)
{
	if (ctx->primary.ops->expect_wakeup)
		ctx->primary.ops->expect_wakeup(&ctx->primary);
	if (ctx->pool.ops && ctx->pool.ops->expect_wakeup)
		ctx->pool.ops->expect_wakeup(&ctx->pool);
}

/* Clear the eventfd, then look: a completion after the read signals again. */
static void clear_and_reap(struct afio_ctx *ctx)
{
	afio_ctx_clear_eventfd(ctx);
	expect_wakeups(ctx);
	reap_engines(ctx);
}

/*
 * An eventfd nobody else watches is cleared only before the owner sleeps
 * on it: while afio_poll() keeps finding work, completions cost no eventfd
 * write or read.
 *
 * One the application watches is readable whenever completions wait, and
 * each afio_poll() that leaves some waiting leaves a write (the kernel's,
 * a worker's or its own) made after it began, for an edge-triggered
 * epoll.  It need not be read before every look: evfd_up says that it is
 * readable (signaled, not read since), and a look then only asks the
 * engines for their next wake-up; afio_poll() reads it on the way out
 * when it was not read and nothing waits any more (settle_eventfd()).  A
 * busy loop, whose every round leaves completions for the next, thus
 * reads it once when the burst ends, not once a round.  With
 * AFIO_LAZY_EVENTFD only a poll that found nothing clears it: it may
 * stay readable with nothing to collect, never the other way round; each
 * look still asks for the engines' next wake-up, so that the edges come
 * as without it.
 */
static bool lazy_eventfd(const struct afio_ctx *ctx)
{
	return ctx->cfg.flags & AFIO_LAZY_EVENTFD;
}

static void reap(struct afio_ctx *ctx)
{
	if (ctx->evfd_exported) {
		if (!ctx->evfd_up && !lazy_eventfd(ctx))
			afio_ctx_clear_eventfd(ctx);
		expect_wakeups(ctx);
	}
	reap_engines(ctx);
}

static bool engine_ready(const struct afio_engine *e)
{
	return e->ops && e->ops->ready && e->ops->ready(e);
}

/* Something afio_poll() would run at once: the eventfd must say so. */
static bool work_waits(const struct afio_ctx *ctx)
{
	return ctx->done.head || ctx->rearm.head || ctx->primary.held ||
	       engine_ready(&ctx->primary) || engine_ready(&ctx->pool);
}

/*
 * The way out of afio_poll(), application watching: what the engines hold
 * was posted since the look that took everything before it, and signaled
 * when posted; what the core holds (results of the last round, a CQE held
 * behind a callback) it signals itself.
 */
static void settle_eventfd(struct afio_ctx *ctx, unsigned ran)
{
	/* Readable since before this poll (the branches below may clear
	   it, or mark it up for a write still to come). */
	bool was_up = level_and_up(ctx);

	if (lazy_eventfd(ctx)) {
		if (!ran)
			clear_and_reap(ctx);
	} else if (work_waits(ctx)) {
		ctx->evfd_up = true;
	} else if (ctx->evfd_up) {
		clear_and_reap(ctx);
	}
	/* What that reap queued again (a pooled receive whose socket had
	   nothing after all) goes now: nothing may wake a poll for it. */
	if (ctx->requeued)
		(void)flush(ctx);
	if ((ctx->done.head || ctx->rearm.head || ctx->primary.held) &&
	    !(was_up && ctx->evfd_up))
		signal_eventfd(ctx);
}

int afio_export_eventfd(struct afio_ctx *ctx)
{
	int ret = watch_eventfd(&ctx->primary);

	if (ret)
		return ret;
	ctx->evfd_exported = true;
	ctx->in_poll = true;
	clear_and_reap(ctx);
	ctx->in_poll = false;
	afio_ctx_kick(ctx);
	if (ctx->done.head && !ctx->in_poll)
		signal_eventfd(ctx);
	return 0;
}

/*
 * Only what was done when the round began: a callback whose next request
 * finishes at once (INLINE, a cached read submitted from the callback)
 * would otherwise keep one afio_poll(ctx, 0, 0) running for as long as the
 * chain goes on, and the caller's event loop with it.  What finishes
 * meanwhile runs in the next round.
 */
static void free_slot(struct afio_ctx *ctx, struct afio_req *r)
{
	r->state = AFIO_REQ_FREE;
	r->next = ctx->free_slots;
	ctx->free_slots = r;
	ctx->st.completed++;
	if (r->res == -ECANCELED)
		ctx->st.canceled++;
}

/* A result that a multishot request goes on after: bytes received, or an
   accepted fd; not the end of the stream or an error. */
static bool shot_goes_on(const struct afio_req *r)
{
	if (!(r->shot & AFIO_SHOT_MULTI))
		return false;
	return r->op == AFIO_OP_ACCEPT ? r->res >= 0 : r->res > 0;
}

/*
 * The callback of a request that may complete more than once or with a
 * buffer, or that is bound to its own dup of a socket (bind_socket()).
 * Whether more follow is settled by the result itself, as the
 * kernel's own multishot settles it (AFIO_SHOT_ARMED: the engine still
 * holds the request); a cancel, or the context closing, meanwhile ends
 * the request with one more completion, -ECANCELED, and loses nothing
 * received.  The request goes on once its callback has run
 * (rearm_later()); the callback can cancel it by its handle, which stays
 * the same (multi_done()).
 */
static void run_ecb(struct afio_ctx *ctx, struct afio_req *r)
{
	afio_ecb cb = r->ecb;
	void *data = r->data;
	ssize_t res = r->res;
	unsigned flags = 0;

	if (!(r->shot & AFIO_SHOT_ECB)) {
		/* A plain callback, bound (MSG_WAITALL): it completes once. */
		afio_cb plain = r->cb;

		close(r->fd);
		free_slot(ctx, r);
		plain(data, res);
		return;
	}

	if (r->shot & AFIO_SHOT_HAS_BUF) {
		afio_bufpool_deliver(r);
		flags |= AFIO_CQE_BUFFER | r->buf_id << AFIO_CQE_BUF_SHIFT;
		r->shot &= (uint8_t)~AFIO_SHOT_HAS_BUF;
	}
	if (r->shot & AFIO_SHOT_ARMED) {
		flags |= AFIO_CQE_MORE;
		r->shot &= (uint8_t)~AFIO_SHOT_ARMED;
		r->state = AFIO_REQ_HANDED;
	} else if (shot_goes_on(r)) {
		/* After the callback, which may cancel it (cancel_req()). */
		cb(data, res, flags | AFIO_CQE_MORE);
		if (r->cancel || ctx->closing)
			finish(r, -ECANCELED);
		else
			rearm_later(r);
		return;
	} else {
		if (r->shot & AFIO_SHOT_BOUND)
			close(r->fd);
		free_slot(ctx, r);
	}
	cb(data, res, flags);
}

static unsigned run_callbacks(struct afio_ctx *ctx)
{
	struct afio_req *r = ctx->done.head, *next;
	unsigned ran = 0;

	if (!r)
		return 0;
	afio_reqq_init(&ctx->done);
	for (; r; r = next) {
		afio_cb cb = r->cb;
		void *data = r->data;

		next = r->next;
		ran++;
		if (__builtin_expect(r->shot, 0)) {
			run_ecb(ctx, r);
			continue;
		}
		/* Free the slot first so that the callback can reuse it. */
		free_slot(ctx, r);
		cb(data, r->res);
	}
	return ran;
}

static unsigned in_engines(const struct afio_ctx *ctx)
{
	return ctx->primary.handed + ctx->pool.handed;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int wait_some(struct afio_ctx *ctx, int timeout_ms)
{
	struct pollfd pfd = { .fd = ctx->evfd, .events = POLLIN };
	struct afio_engine *e = &ctx->primary;
	int ret;

	if (e->held)
		return 0;
	/* The engine's own wait cannot see the pool, so use it only alone. */
	if (e->ops->wait && !ctx->pool.handed) {
		ret = e->ops->wait(e, timeout_ms);
		if (ret != 1)
			return ret;
	}
	if (!ctx->evfd_exported || lazy_eventfd(ctx) || ctx->evfd_up) {
		clear_and_reap(ctx);
		/* What the reap queued again must go before the sleep. */
		if (ctx->done.head || ctx->requeued)
			return 0;
	}
	if (poll(&pfd, 1, timeout_ms) < 0)
		return -errno;
	return 0;
}

/* How long to wait next: -1 forever, 0 not at all. */
static int time_left(int timeout_ms, int64_t deadline)
{
	int64_t left;

	if (timeout_ms <= 0)
		return timeout_ms;
	left = deadline - now_ms();
	if (left <= 0)
		return 0;
	return left > INT_MAX ? INT_MAX : (int)left;
}

int afio_poll(afio_ctx *ctx, unsigned min_complete, int timeout_ms)
{
	struct afio_req *left;
	int64_t deadline = 0;
	unsigned ran = 0, rearms_due;
	int ret, wait_ms;

	ret = afio_ctx_check(ctx);
	if (ret)
		return ret;
	if (ctx->in_poll)
		return -EBUSY;
	ctx->in_poll = true;
	if (timeout_ms > 0)
		deadline = now_ms() + timeout_ms;
	rearms_due = ctx->rearm.count;
	for (;;) {
		ctx->primary.caller_waits = timeout_ms < 0 && ran < min_complete;
		ret = flush(ctx);
		ctx->primary.caller_waits = false;
		if (ret < 0)
			break;
		/* What the engine could not take now (a full ring): a
		   completion will come before there is room. */
		left = ctx->queue.head;
		reap(ctx);
		ran += run_callbacks(ctx);
		if (ran >= min_complete || ctx->destroy_deferred)
			break;
		wait_ms = time_left(timeout_ms, deadline);
		if (!wait_ms)
			break;
		/* What the callbacks or the core queued goes before the sleep,
		   and so does what an engine that holds nothing any more left,
		   and a result the core holds has its callback run: no
		   completion would end the sleep for them. */
		if (ctx->rearm.head) {
			take_rearms(ctx, UINT_MAX);
			continue;
		}
		if (ctx->requeued || ctx->done.head ||
		    (ctx->queue.head && (ctx->queue.head != left || !in_engines(ctx))))
			continue;
		if (!in_engines(ctx))
			break;
		ret = wait_some(ctx, wait_ms);
		if (ret < 0 && ret != -EINTR && ret != -ETIME && ret != -ETIMEDOUT)
			break;
	}
	/* Only a call that waits without limit lets the engine keep one. */
	if (timeout_ms < 0 && ctx->primary.ops->start_kept)
		ctx->primary.ops->start_kept(&ctx->primary);
	/* What the callbacks queued goes now, not at some later call. */
	take_rearms(ctx, rearms_due);
	if (ret >= 0)
		ret = flush(ctx);
	if (ctx->evfd_exported && !ctx->destroy_deferred)
		settle_eventfd(ctx, ran);
	ctx->in_poll = false;
	if (ctx->destroy_deferred) {
		afio_destroy(ctx);
		return (int)ran;
	}
	if (ran)
		return (int)ran;
	return ret < 0 ? ret : 0;
}

/* ---- cancel ---- */

/* A multishot request whose result waits for its callback: run_ecb()
   lets it go on, so a cancel has something to end. */
static bool multi_done(const struct afio_req *r)
{
	return r->state == AFIO_REQ_DONE && (r->shot & AFIO_SHOT_MULTI);
}

static void cancel_req(struct afio_ctx *ctx, struct afio_req *r)
{
	if (r->state == AFIO_REQ_QUEUED) {
		afio_reqq_remove(r->shot & AFIO_SHOT_REARM ? &ctx->rearm : &ctx->queue, r);
		r->shot &= (uint8_t)~AFIO_SHOT_REARM;
		afio_req_finish(r, afio_req_stopped(r, -ECANCELED));
	} else if (r->state == AFIO_REQ_PARKED) {
		afio_bufpool_unpark(ctx, r);
		afio_req_finish(r, -ECANCELED);
	} else if (r->state == AFIO_REQ_HANDED && !r->cancel) {
		r->cancel = 1;
		r->engine->ops->cancel(r->engine, r);
	} else if (multi_done(r)) {
		/* Its pending callback says more will come: the -ECANCELED
		   of run_ecb(), or of the engine that still holds it. */
		r->cancel = 1;
		if (r->shot & AFIO_SHOT_ARMED)
			r->engine->ops->cancel(r->engine, r);
	}
}

static bool cancelable(const struct afio_req *r)
{
	return r->state == AFIO_REQ_QUEUED || r->state == AFIO_REQ_HANDED ||
	       r->state == AFIO_REQ_PARKED || (multi_done(r) && !r->cancel);
}

int afio_cancel(afio_ctx *ctx, void *data)
{
	int n = 0, ret;

	ret = afio_ctx_check(ctx);
	if (ret)
		return ret;
	for (unsigned i = 0; i < ctx->slots_used; i++) {
		struct afio_req *r = &ctx->slots[i];

		if (r->data != data || !cancelable(r))
			continue;
		cancel_req(ctx, r);
		n++;
	}
	return n ? n : -ENOENT;
}

/*
 * A handle is the slot's generation (bumped each time the slot is taken)
 * and its index plus one, so that 0 names nothing.  A slot taken again
 * since has another generation: a stale handle never names the request
 * that reuses its slot.
 */
static afio_handle handle_of(const struct afio_req *r)
{
	return (afio_handle)r->gen << 32 | (r->index + 1);
}

afio_handle afio_last_handle(const afio_ctx *ctx)
{
	if (!ctx || afio_ctx_forked(ctx) || !ctx->last)
		return 0;
	return handle_of(ctx->last);
}

int afio_cancel_handle(afio_ctx *ctx, afio_handle h)
{
	uint32_t index = (uint32_t)h - 1;
	struct afio_req *r;
	int ret;

	ret = afio_ctx_check(ctx);
	if (ret)
		return ret;
	if (!(uint32_t)h || index >= ctx->cfg.entries)
		return -EINVAL;
	if (index >= ctx->slots_used)
		return -ENOENT;
	r = &ctx->slots[index];
	if (r->state == AFIO_REQ_FREE || handle_of(r) != h)
		return -ENOENT;
	if (!cancelable(r) || r->cancel)
		return -EALREADY;
	cancel_req(ctx, r);
	return 0;
}

void afio_cancel_all(struct afio_ctx *ctx)
{
	for (unsigned i = 0; i < ctx->slots_used; i++)
		cancel_req(ctx, &ctx->slots[i]);
}

void afio_drain(struct afio_ctx *ctx)
{
	struct afio_req *r;

	ctx->in_poll = true;
	for (;;) {
		reap(ctx);
		/* What the core queued again (a pooled receive that found
		   nothing after all) is not submitted any more. */
		take_rearms(ctx, UINT_MAX);
		while ((r = afio_reqq_pop(&ctx->queue)))
			afio_req_finish(r, -ECANCELED);
		run_callbacks(ctx);
		if (ctx->done.head)
			continue;
		if (!in_engines(ctx))
			break;
		wait_some(ctx, 100);
	}
	ctx->in_poll = false;
}
