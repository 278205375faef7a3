/* SPDX-License-Identifier: MIT */
/*
 * Cancel: the list of cancels and retry timers that wait for an SQE, the
 * answers to them, and asking again for requests a cancel missed.
 */
#include <errno.h>

#include "uring.h"

/* Whether the request ud names is still ours in the ring. */
static bool in_ring(const struct uring *u, uint64_t ud)
{
	const struct afio_req *r = u->slots[(uint32_t)ud & UD_INDEX].req;

	return r && r->gen == (uint32_t)(ud >> 32);
}

/* What a cancel of r must name: a chain is canceled at its head. */
static uint64_t cancel_target(const struct uring *u, const struct afio_req *r)
{
	const struct sendfile_state *sf = &u->io[r->index].sendfile;

	if (r->op == AFIO_OP_SENDFILE && sf->step == SF_CHAIN && sf->pending == 2)
		return ud_of(r) | UD_SPLICE_IN;
	return ud_of(r);
}

/* An entry of the cancels list whose request has finished: dropped. */
static bool cancel_is_stale(struct uring *u, uint64_t ud)
{
	if (in_ring(u, ud))
		return false;
	if (ud & UD_RETRY)
		u->slots[(uint32_t)ud & UD_INDEX].retry_armed = false;
	return true;
}

static void prep_cancel(struct uring *u, struct io_uring_sqe *sqe, uint64_t ud)
{
	if (ud & UD_RETRY) {
		io_uring_prep_timeout(sqe, &u->retry_after, 0, 0);
		io_uring_sqe_set_data64(sqe, ud);
		return;
	}
	io_uring_prep_cancel64(sqe, ud, 0);
	io_uring_sqe_set_data64(sqe, ud | UD_CANCEL);
	u->slots[(uint32_t)ud & UD_INDEX].cancel_queued = false;
}

/* Turns a waiting cancel or retry timer into an SQE, or drops it if its
   request has finished meanwhile; false when there is no SQE for it. */
bool cancel_to_sqe(struct uring *u, uint64_t ud)
{
	struct io_uring_sqe *sqe;

	if (cancel_is_stale(u, ud))
		return true;
	if (!cq_room(u, 1, 0))
		return false;
	sqe = get_sqe(u);
	if (!sqe)
		return false;
	prep_cancel(u, sqe, ud);
	return true;
}

/* A full list holds at least one entry whose request has finished (each
   request in the ring has one cancel and one retry timer in it at most,
   see queue_cancel() and queue_retry()): make room by dropping those. */
static void drop_stale_cancels(struct uring *u)
{
	unsigned kept = 0;

	for (unsigned i = 0; i < u->ncancels; i++)
		if (!cancel_is_stale(u, u->cancels[i]))
			u->cancels[kept++] = u->cancels[i];
	u->ncancels = kept;
}

static void queue_entry(struct uring *u, uint64_t entry)
{
	if (u->ncancels == 2 * u->nslots)
		drop_stale_cancels(u);
	u->cancels[u->ncancels++] = entry;
}

/* ud is in the ring.  A second cancel for it while one waits would ask
   nothing new, and could overflow the list: recancel() and
   cancel_answered() may both ask for one request. */
static void queue_cancel(struct uring *u, uint64_t ud)
{
	uint32_t index = (uint32_t)ud & UD_INDEX;

	if (u->slots[index].cancel_queued)
		return;
	queue_entry(u, ud);
	u->slots[index].cancel_queued = true;
}

/* ud is in the ring: cancel it again after RETRY_NS.  The timer belongs to
   the slot, not to the request: whatever request holds the slot when it
   fires is asked again if it was canceled (see retry_due()). */
static void queue_retry(struct uring *u, uint64_t ud)
{
	uint32_t index = (uint32_t)ud & UD_INDEX;

	if (u->slots[index].retry_armed)
		return;
	queue_entry(u, (ud & ~UD_SPLICE_IN) | UD_RETRY);
	u->slots[index].retry_armed = true;
}

static void retry_due(struct uring *u, uint32_t index)
{
	struct afio_req *r;

	if (index >= u->nslots)
		return;
	u->slots[index].retry_armed = false;
	r = u->slots[index].req;
	if (!r || !r->cancel)
		return;
	queue_cancel(u, cancel_target(u, r));
	if (u->flags & IORING_SETUP_SQPOLL)
		queue_retry(u, ud_of(r));
}

/*
 * -EALREADY: an io-wq worker was running the request.  The kernel then only
 * interrupts a blocking call; a worker that had just tried without blocking
 * goes on to arm a poll, and there the request would wait, uncanceled, for
 * good.  With SQPOLL the cancel can even miss it on its way there and
 * answer -ENOENT.  So ask again while its completion has not been seen: a
 * poll wait is found and ended.
 *
 * Whether a request can wait by poll follows from what it is, never from
 * what its fd number names now: the program may have closed the fd and
 * the number may be another file (asyncfio(7), CLOSING A DESCRIPTOR).
 * A socket request soon waits by poll: ask again at once.  A read or write
 * may be on a regular file, which io-wq simply finishes, or on a pipe,
 * which waits by poll: ask again after a short timer, whose completion
 * also wakes a program that sleeps on the eventfd, rather than spin for as
 * long as a disk read takes.  fsync, paths and the like never wait by poll.
 */
static void cancel_answered(struct uring *u, uint64_t ud, int res)
{
	struct afio_req *r;

	if ((res != -EALREADY && res != -ENOENT) || !in_ring(u, ud))
		return;
	r = u->slots[(uint32_t)ud & UD_INDEX].req;
	switch (afio_op_kind(r->op)) {
	case AFIO_KIND_SOCKET:
		queue_cancel(u, cancel_target(u, r));
		break;
	case AFIO_KIND_FILE_RW:
		if (u->has_op[AFIO_OP_TIMEOUT])
			queue_retry(u, ud);
		else
			queue_cancel(u, cancel_target(u, r));
		break;
	default:
		break;
	}
}

/* A cancel's answer, or a retry timer that ran out. */
void cancel_cqe(struct uring *u, uint64_t ud, int res)
{
	if (ud & UD_CANCEL)
		cancel_answered(u, ud & ~UD_CANCEL, res);
	else
		retry_due(u, (uint32_t)ud & UD_INDEX);
}

/* Ask again for every canceled request still in the ring, once the
   earlier asks are answered (uring_wait(): with SQPOLL before each slice,
   else after a slice in which nothing came); a repeated ask for one that
   has already finished is answered -ENOENT and changes nothing. */
void recancel(struct uring *u)
{
	if (u->ncancels)
		return;
	for (unsigned i = 0; i < u->nslots; i++) {
		struct afio_req *r = u->slots[i].req;

		if (r && r->cancel)
			queue_cancel(u, cancel_target(u, r));
	}
}

/*
 * The cancel goes to the kernel at once, not at the next afio_poll(): a
 * caller may be waiting on the eventfd for the canceled request.  Without
 * IORING_OP_ASYNC_CANCEL (before 5.5) the request just runs to its end.
 */
void uring_cancel(struct afio_engine *e, struct afio_req *r)
{
	struct uring *u = e->priv;

	if (r->op == AFIO_OP_SENDFILE && sendfile_cancel(u, r))
		return;
	/* Waiting to go again: nothing of it is in the kernel. */
	if (!afio_reqq_remove(&u->again, r)) {
		release_slot(u, r);
		afio_req_done(r, afio_req_stopped(r, -ECANCELED));
		return;
	}
	if (!u->has_cancel)
		return;
	queue_cancel(u, cancel_target(u, r));
	/* With SQPOLL a cancel can miss a request on its way to a poll wait
	   and no CQE comes to say so: ask again on a timer until it
	   completes, which wakes a program that sleeps on the eventfd as
	   recancel() serves one that waits in afio_poll(). */
	if ((u->flags & IORING_SETUP_SQPOLL) && u->has_op[AFIO_OP_TIMEOUT])
		queue_retry(u, ud_of(r));
	push_waiting(u);
	push_sq(u);
}
