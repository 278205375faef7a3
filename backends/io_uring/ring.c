/* SPDX-License-Identifier: MIT */
/*
 * The path of every request: its SQE into the ring, its CQE back to the
 * core, the requests that go to the kernel again, the waits; and the
 * engine's ops table.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <string.h>

#include "uring.h"

/* Newer than some liburing headers. */
#ifndef IORING_SQ_TASKRUN
#define IORING_SQ_TASKRUN		(1U << 2)
#endif

#define REAP_BATCH	64
#define SQPOLL_WAIT_MS	10

/* Asked at every submit: see self_tid(). */
__thread pid_t uring_self_tid __attribute__((tls_model("initial-exec")));

/* ---- handing SQEs to the kernel ---- */

/* Inlined: the path of every request (a call here was 4% of a nop's
   instructions). */
static inline __attribute__((always_inline)) void
prep(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	uring_ops[r->op].prep(u, sqe, r);
	sqe->flags |= u->sqe_flags[r->op];
	if (__builtin_expect(r->shot, 0))
		prep_native_shot(u, sqe, r);
	io_uring_sqe_set_data64(sqe, ud_of(r));
}

static bool cq_overflowed(const struct uring *u)
{
	return IO_URING_READ_ONCE(*u->ring.sq.kflags) & IORING_SQ_CQ_OVERFLOW;
}

/*
 * SQPOLL: a full SQ only means that the SQ thread has not taken the entries
 * yet, and once it has, nothing would send what we left behind: no CQE need
 * follow to wake an application that sleeps on the eventfd.  So wait for
 * room, as a submitter without SQPOLL waits in io_uring_enter.  Not while
 * completions wait on the overflow list: some 5.x kernels take no SQE then
 * until they are reaped, and they have made the eventfd readable.
 */
int wait_sq_room(struct uring *u)
{
	int ret;

	while (!io_uring_sq_space_left(&u->ring)) {
		if (cq_overflowed(u))
			return -EBUSY;
		ret = io_uring_sqring_wait(&u->ring);
		if (ret == -EINVAL)
			sched_yield();	/* no IORING_ENTER_SQ_WAIT before 5.10 */
		else if (ret < 0 && ret != -EINTR)
			return ret;
	}
	return 0;
}

/* Room in the CQ for r, leaving what cancels may take. */
static bool cq_has_room(const struct uring *u, const struct afio_req *r)
{
	return cq_room(u, r->op == AFIO_OP_SENDFILE ? 2 : 1, CQE_EXTRA);
}

/* SYNC_FILE_RANGE takes a 32-bit length in the SQE; a longer range would
   be cut short (and one of exactly 4 GiB read as "to the end"). */
static bool sqe_fits(const struct afio_req *r)
{
	return r->op != AFIO_OP_SYNC_RANGE || r->len <= UINT32_MAX;
}

/*
 * The kernel would read or write the context's own eventfd as read(2) and
 * write(2) do (afio_read(3)): a read would wait for, and then take, the
 * wake-ups meant for the program.  The other backends give -ESPIPE, as
 * pread(2) does; so does this one, for the price of a compare.
 */
static bool is_own_eventfd(const struct uring *u, const struct afio_req *r)
{
	return r->fd == u->evfd && afio_op_kind(r->op) == AFIO_KIND_FILE_RW;
}

/* The eventfd refused, an op the ring lacks routed to the pool, a sendfile
   done inline, waiting for a pipe or started as its chain.  TAKEN: r left
   q; PREPARED: r's SQEs are made; STOP: no room, r stays. */
static enum special submit_special(struct afio_engine *e, struct afio_reqq *q,
				   struct afio_req *r)
{
	struct uring *u = e->priv;
	struct io_uring_sqe *sqe;

	if (is_own_eventfd(u, r)) {
		afio_req_done(afio_reqq_pop(q), -ESPIPE);
		return SPECIAL_TAKEN;
	}
	if (!u->has_op[r->op] || !sqe_fits(r)) {
		afio_route_to_pool(e, afio_reqq_pop(q));
		return SPECIAL_TAKEN;
	}
	if (!cq_has_room(u, r))
		return SPECIAL_STOP;
	if (r->op != AFIO_OP_SENDFILE) {
		sqe = get_sqe(u);
		if (!sqe)
			return SPECIAL_STOP;
		prep(u, sqe, r);
		return SPECIAL_PREPARED;
	}
	return sendfile_submit(e, q, r);
}

/* What waits for SQEs beside new requests, oldest kind first: requests
   going again, the next steps of sendfiles, sendfiles that waited for a
   pipe, cancels and retry timers (those whose request has finished are
   dropped).  Each list is taken in order up to the first entry that finds
   no room.  Out of line: it runs rarely (push_waiting()). */
__attribute__((noinline)) void push_waiting_now(struct uring *u)
{
	struct io_uring_sqe *sqe;
	struct afio_req *r;
	unsigned done;

	while ((r = u->again.head) && (sqe = get_sqe(u))) {
		afio_reqq_pop(&u->again);
		prep(u, sqe, r);
		u->slots[r->index].submitter = self_tid();
	}
	while ((r = u->next_steps.head) && sendfile_step(u, r))
		afio_reqq_pop(&u->next_steps);
	while ((r = u->pipe_waiters.head) && sendfile_start_waiter(u, r))
		afio_reqq_pop(&u->pipe_waiters);
	done = 0;
	while (done < u->ncancels && cancel_to_sqe(u, u->cancels[done]))
		done++;
	u->ncancels -= done;
	memmove(u->cancels, u->cancels + done, u->ncancels * sizeof(*u->cancels));
}

/*
 * The next SQE of the ring, where the caller knows that there is one: the
 * room counted once a batch (only the kernel moves the SQ's head, and
 * only to give room) spares liburing's look at the head for every SQE.
 */
static inline struct io_uring_sqe *next_sqe(struct uring *u, unsigned shift)
{
	struct io_uring_sq *sq = &u->ring.sq;
	struct io_uring_sqe *sqe = &sq->sqes[(sq->sqe_tail & sq->ring_mask) << shift];

	sq->sqe_tail++;
	u->cqes_owed++;
	return sqe;
}

static inline void take(struct afio_engine *e, struct afio_req *r, pid_t tid)
{
	struct uring *u = e->priv;

	afio_engine_take(e, r);
	u->slots[r->index].req = r;
	u->slots[r->index].submitter = tid;
}

static int uring_submit(struct afio_engine *e, struct afio_reqq *q)
{
	struct uring *u = e->priv;
	struct io_uring_sqe *sqe;
	struct afio_req *r;
	pid_t tid = self_tid();
	unsigned shift = u->ring.flags & IORING_SETUP_SQE128 ? 1 : 0;
	unsigned sq_room = io_uring_sq_space_left(&u->ring);
	int n = 0, ret;

	while ((r = q->head)) {
		if (!u->plain_op[r->op] || r->fd == u->evfd) {
			enum special how = submit_special(e, q, r);

			sq_room = io_uring_sq_space_left(&u->ring);
			if (how == SPECIAL_STOP)
				break;
			n++;
			if (how == SPECIAL_TAKEN)
				continue;
			afio_reqq_pop(q);
			take(e, r, tid);
		} else {
			/* One SQE, one CQE: plain ops exclude sendfile. */
			if (!cq_room(u, 1, CQE_EXTRA))
				break;
			if (sq_room) {
				sqe = next_sqe(u, shift);
				sq_room--;
			} else {
				sqe = get_sqe(u);
				if (!sqe)
					break;
				sq_room = io_uring_sq_space_left(&u->ring);
			}
			/* Before prep()'s call, after which the compiler
			   would read the queue's head again. */
			afio_reqq_pop_head(q, r);
			take(e, r, tid);
			prep(u, sqe, r);
			n++;
		}
	}
	push_waiting(u);
	ret = push_sq(u);
	/* What is prepared stays in the SQ: a later reap submits it. */
	if (ret == -EBUSY || ret == -EAGAIN)
		ret = 0;
	return n ? n : ret ? ret : q->head ? -EAGAIN : 0;
}

/* ---- what goes to the kernel again (must_go_again(), uring.h) ---- */

/* A connect the kernel dropped may have been under way: the next one
   may find it so, or made (connect_goes_on()). */
static bool submit_again(struct uring *u, struct afio_req *r, ssize_t res)
{
	if (!must_go_again(u, r, res))
		return false;
	if (r->op == AFIO_OP_CONNECT)
		r->started = 1;
	afio_reqq_push(&u->again, r);
	return true;
}

/*
 * A connect completes once the connection is made or has failed, on every
 * backend.  On a socket with O_NONBLOCK the kernel's CONNECT can end while
 * the connection is under way (EINPROGRESS, EALREADY; EINTR interrupted a
 * connect that goes on): then it waits for POLLOUT and connects again, and
 * that connect says how it ended, as the pool does (connect_nowait()): 0,
 * EISCONN (made meanwhile), the error, or EALREADY (still under way, wait
 * again).  Asking connect rather than SO_ERROR leaves the socket as a
 * blocking connect(2) would (connected, or unconnected after a failure)
 * and gives the same answer as the other backends, from the same call.
 */
static bool connect_goes_on(struct uring *u, struct afio_req *r, ssize_t *res)
{
	bool *waits = &u->slots[r->index].connect_waits;

	if (r->cancel)
		return false;
	if (*waits) {
		*waits = false;
		if (*res < 0)
			return false;
	} else if (*res == -EISCONN && r->started) {
		*res = 0;
		return false;
	} else if (*res == -EINPROGRESS || *res == -EALREADY || *res == -EINTR) {
		r->started = 1;
		*waits = true;
	} else {
		return false;
	}
	afio_reqq_push(&u->again, r);
	return true;
}

/* ---- completions ---- */

/* A canceled request that io-wq had started ends with -EINTR (sockets) or
   a restart code (the rest): either is the cancel's doing. */
static ssize_t finish_res(const struct afio_req *r, ssize_t res)
{
	if (r->cancel && (res == -EINTR || afio_is_restart_code(res)))
		return -ECANCELED;
	return res;
}

/*
 * A CQE of a request the kernel keeps going (prep_native_shot()).  A
 * result with IORING_CQE_F_MORE goes to the core with the request still
 * in the ring; the request holds one result at a time, so the next CQE of
 * it waits in the CQ, and the reap with it (HELD), until the callback of
 * the one before has run.  A first shot refused with -EINVAL goes again
 * without the flag: refused again, the error was the request's; taken,
 * the kernel is older than the flag, and the later ones of its kind go
 * without it too (re-armed by the core).
 */
enum shot_cqe { SHOT_TAKEN, SHOT_LAST, SHOT_HELD };

static enum shot_cqe native_shot_cqe(struct uring *u, struct afio_req *r,
				     const struct io_uring_cqe *cqe)
{
	struct uring_slot *s = &u->slots[r->index];

	if (r->state == AFIO_REQ_DONE)
		return SHOT_HELD;
	if (s->multishot == SHOT_RETRIED) {
		if (cqe->res != -EINVAL) {
			if (r->op == AFIO_OP_ACCEPT)
				u->native_accept = false;
			else
				u->native_recv = false;
		}
		s->multishot = SHOT_NONE;
		return SHOT_LAST;
	}
	if (cqe->flags & IORING_CQE_F_MORE) {
		s->multishot = SHOT_GOING;
		if (cqe->flags & IORING_CQE_F_BUFFER)
			uring_pooled_shot(u, r, cqe->res, cqe->flags >> IORING_CQE_BUFFER_SHIFT);
		else
			afio_req_shot(r, cqe->res);
		return SHOT_TAKEN;
	}
	if (cqe->res == -EINVAL && s->multishot == SHOT_FIRST && !r->cancel) {
		s->multishot = SHOT_RETRIED;
		u->cqes_owed--;
		afio_reqq_push(&u->again, r);
		return SHOT_TAKEN;
	}
	s->multishot = SHOT_NONE;
	return SHOT_LAST;
}

/* Ops whose CQE may not end them even when it is no error: a sendfile's
   splices, a pooled receive's buffer, a connect's wait for POLLOUT. */
#define OPS_WITH_STEPS	(1ull << AFIO_OP_SENDFILE | 1ull << AFIO_OP_RECV_POOL | \
			 1ull << AFIO_OP_CONNECT)
_Static_assert(AFIO_OP_COUNT <= 64, "OPS_WITH_STEPS is one bit per op");

/* False: cqe stays in the CQ for now (native_shot_cqe()). */
static bool complete(struct uring *u, const struct io_uring_cqe *cqe)
{
	uint64_t ud = io_uring_cqe_get_data64(cqe);
	uint32_t index = (uint32_t)ud & UD_INDEX;
	struct afio_req *r;
	ssize_t res = cqe->res;

	/* One test keeps the request's own CQE off the rarer kinds. */
	if (ud & (UD_CANCEL | UD_RETRY)) {
		if (ud == UD_RESERVED)
			return true;	/* liburing's own timeout */
		u->cqes_owed--;
		cancel_cqe(u, ud, cqe->res);
		return true;
	}
	r = index < u->nslots ? u->slots[index].req : NULL;
	if (!r || r->gen != (uint32_t)(ud >> 32)) {
		if (!(cqe->flags & IORING_CQE_F_MORE))
			u->cqes_owed--;
		return true;
	}
	if (__builtin_expect(u->slots[index].multishot, 0)) {
		enum shot_cqe how = native_shot_cqe(u, r, cqe);

		if (how != SHOT_LAST)
			return how == SHOT_TAKEN;
	}
	u->cqes_owed--;
	if (__builtin_expect(res >= 0 && !(OPS_WITH_STEPS >> r->op & 1), 1)) {
		release_slot(u, r);
		afio_req_done(r, res);
		return true;
	}
	if (r->op == AFIO_OP_SENDFILE) {
		sendfile_cqe(u, r, ud, cqe->res);
		return true;
	}
	if (cqe->flags & IORING_CQE_F_BUFFER) {
		uring_pooled_cqe(u, r, res, cqe->flags >> IORING_CQE_BUFFER_SHIFT);
		return true;
	}
	if (res == -ENOBUFS && r->op == AFIO_OP_RECV_POOL && !r->cancel &&
	    uring_pool_ran_dry(u, r)) {
		afio_reqq_push(&u->again, r);
		return true;
	}
	if (res < 0 && submit_again(u, r, res))
		return true;
	if (r->op == AFIO_OP_CONNECT && connect_goes_on(u, r, &res))
		return true;
	release_slot(u, r);
	afio_req_done(r, r->cancel ? finish_res(r, res) : res);
	return true;
}

/* The tail is read once a batch, not once a CQE as liburing's
   io_uring_for_each_cqe() does: uring_reap() comes back for what the
   kernel posted meanwhile. */
static unsigned reap_batch(struct afio_engine *e)
{
	struct uring *u = e->priv;
	struct io_uring_cq *cq = &u->ring.cq;
	/* In locals: each completion's calls could change what the
	   compiler would otherwise read again for every CQE. */
	const struct io_uring_cqe *cqes = cq->cqes;
	unsigned shift = io_uring_cqe_shift(&u->ring), mask = cq->ring_mask;
	unsigned head = *cq->khead, n = 0, ready;

	ready = io_uring_smp_load_acquire(cq->ktail) - head;
	if (ready > REAP_BATCH)
		ready = REAP_BATCH;
	for (; n < ready; n++, head++) {
		if (!complete(u, &cqes[(head & mask) << shift])) {
			e->held = true;
			break;
		}
	}
	io_uring_cq_advance(&u->ring, n);
	return n;
}

/* The kernel holds completions we cannot see until we enter it: CQEs on
   the overflow list, or task work that COOP_TASKRUN left for our next
   entry (flagged when TASKRUN_FLAG is in force). */
static bool kernel_holds_more(const struct uring *u)
{
	unsigned kflags = IO_URING_READ_ONCE(*u->ring.sq.kflags);

	return kflags & (IORING_SQ_CQ_OVERFLOW | IORING_SQ_TASKRUN);
}

static void uring_reap(struct afio_engine *e)
{
	struct uring *u = e->priv;

	e->held = false;
	for (;;) {
		while (reap_batch(e))
			;
		if (e->held)
			break;
		if (!kernel_holds_more(u) || io_uring_get_events(&u->ring) < 0)
			break;
		if (!io_uring_cq_ready(&u->ring))
			break;
	}
	/* Room in the CQ again: what an -EBUSY left in the SQ can go now. */
	push_waiting(u);
	push_sq(u);
}

/* ---- waiting ---- */

/* Sleeps until a CQE is posted (the eventfd is registered with the ring),
   at most timeout_ms, and clears the eventfd for the next one. */
static int wait_on_eventfd(struct afio_engine *e, int timeout_ms)
{
	struct uring *u = e->priv;
	struct pollfd pfd = { .fd = afio_ctx_eventfd(e->ctx), .events = POLLIN };

	if (io_uring_cq_ready(&u->ring))
		return 0;
	if (poll(&pfd, 1, timeout_ms) < 0)
		return -errno;
	afio_ctx_clear_eventfd(e->ctx);
	return 0;
}

static bool uring_ready(const struct afio_engine *e)
{
	const struct uring *u = e->priv;

	return io_uring_cq_ready(&u->ring);
}

static int uring_wait(struct afio_engine *e, int timeout_ms)
{
	struct uring *u = e->priv;
	struct __kernel_timespec ts, *tsp = NULL;
	struct io_uring_cqe *cqe;
	int ret;

	/* With SQPOLL a request can sit between the SQ thread and its poll
	   wait without a CQE to wake us (seen as a rare hang of the SQPOLL
	   test): wait in short slices, and the core looks again after each. */
	if (u->flags & IORING_SETUP_SQPOLL) {
		if (timeout_ms < 0 || timeout_ms > SQPOLL_WAIT_MS)
			timeout_ms = SQPOLL_WAIT_MS;
		recancel(u);
	}
	if (timeout_ms >= 0) {
		ts.tv_sec = timeout_ms / 1000;
		ts.tv_nsec = (long long)(timeout_ms % 1000) * 1000000;
		tsp = &ts;
	}
	push_waiting(u);
	if (u->dropped) {
		ret = uring_watch_eventfd(e);
		return ret ? ret : wait_on_eventfd(e, timeout_ms);
	}
	ret = io_uring_submit_and_wait_timeout(&u->ring, &cqe, 1, tsp, NULL);
	if (ret == -EBUSY) {
		/* Overflowed: completions are waiting, the core reaps them. */
		return 0;
	}
	if (ret == -EBADR) {
		/* Dropped completions, which cq_has_room() keeps from
		   happening: the kernel says so at every wait from now on,
		   so wait on what still works. */
		u->dropped = true;
		return 0;
	}
	/* A wait that ran out with canceled requests still in the ring:
	   each is asked again, so that one a cancel missed (answered while
	   the kernel moved it from a worker to a poll wait, say) cannot keep
	   afio_destroy(), which waits in slices, waiting for good. */
	if (ret == -ETIME) {
		recancel(u);
		push_waiting(u);
		push_sq(u);
	}
	return ret < 0 ? ret : 0;
}

const struct afio_backend_ops afio_backend_io_uring = {
	.id = AFIO_BACKEND_IO_URING,
	.name = "io_uring",
	.caps = AFIO_CAP_NOP | AFIO_CAP_FILES | AFIO_CAP_SOCKETS | AFIO_CAP_FSYNC |
		AFIO_CAP_SYNC_OPS | AFIO_CAP_TIMERS | AFIO_CAP_WORKERS,
	.probe = uring_probe,
	.init = uring_init,
	.exit = uring_exit,
	.forget = uring_forget,
	.submit = uring_submit,
	.reap = uring_reap,
	.ready = uring_ready,
	.wait = uring_wait,
	.watch_eventfd = uring_watch_eventfd,
	.cancel = uring_cancel,
	.describe = uring_describe,
	.op_kernel = uring_op_kernel,
	.pool_attach = uring_pool_attach,
	.pool_return = uring_pool_return,
};
