/* SPDX-License-Identifier: MIT */
/*
 * The io_uring backend, on liburing (2.3 API; newer setup flags are asked
 * for at run time and dropped when the kernel refuses them).
 *
 * Each request is one SQE whose user_data is its slot index and generation,
 * so a CQE or a late cancel for a reused slot is recognised as stale.  A
 * cancel SQE carries its target's user_data with UD_CANCEL set, so that its
 * answer can be read; UD_RESERVED marks the timeout SQE liburing adds on
 * kernels without IORING_FEAT_EXT_ARG.  The context's eventfd is registered
 * with the ring, so it becomes readable whenever a CQE is posted.
 *
 * Nothing is lost when a ring is full: a request that finds no free SQE
 * stays at the head of the core's queue until a reap made room, and the
 * kernel keeps completions that do not fit the CQ on its overflow list
 * (IORING_FEAT_NODROP) until we reap; without NODROP (before 5.5) we never
 * have more requests in the ring than the CQ holds.  With SQPOLL a full SQ
 * is waited out instead, since no reap need come (wait_sq_room()).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <liburing.h>

#include "backend.h"

/* Setup flags newer than some liburing headers. */
#ifndef IORING_SETUP_SUBMIT_ALL
#define IORING_SETUP_SUBMIT_ALL		(1U << 7)
#endif
#ifndef IORING_SETUP_COOP_TASKRUN
#define IORING_SETUP_COOP_TASKRUN	(1U << 8)
#endif
#ifndef IORING_SETUP_TASKRUN_FLAG
#define IORING_SETUP_TASKRUN_FLAG	(1U << 9)
#endif
#ifndef IORING_SQ_TASKRUN
#define IORING_SQ_TASKRUN		(1U << 2)
#endif
#ifndef RWF_NOSIGNAL
#define RWF_NOSIGNAL			0x00000100	/* Linux 6.18 */
#endif

#define UD_RESERVED	UINT64_MAX	/* low half never a slot index */
#define UD_CANCEL	(1ull << 31)	/* in a cancel's user_data; slots are fewer */
#define UD_RETRY	(1ull << 30)	/* in the user_data of a timer to cancel again */
#define RETRY_NS	1000000		/* how long that timer waits */
#define REAP_BATCH	64
#define SQPOLL_WAIT_MS	10
#define MAX_RING	32768u		/* the kernel's IORING_MAX_ENTRIES */
#define MAX_RW		0x7ffff000u	/* the kernel's MAX_RW_COUNT */

/*
 * Setup flags we ask for, oldest first: on EINVAL the newest one still
 * asked for is dropped and the setup tried again.
 *
 * SINGLE_ISSUER and DEFER_TASKRUN are left out on purpose: they bind the
 * ring to one task, and a context may be created on one thread and later
 * handed to another (one thread at a time), which they would turn into
 * -EEXIST from io_uring_enter, and DEFER_TASKRUN signals the eventfd for
 * deferred work that is not a completion (bench/README.md).
 */
static const struct {
	unsigned flag;
	const char *name;
} setup_flags[] = {
	{ IORING_SETUP_SUBMIT_ALL, "SUBMIT_ALL" },	/* 5.18 */
	{ IORING_SETUP_COOP_TASKRUN, "COOP_TASKRUN" },	/* 5.19 */
	{ IORING_SETUP_TASKRUN_FLAG, "TASKRUN_FLAG" },	/* 5.19 */
};
#define NSETUP_FLAGS (sizeof(setup_flags) / sizeof(setup_flags[0]))

/* The opcode each request kind needs. */
static const uint8_t op_code[AFIO_OP_COUNT] = {
	[AFIO_OP_READ] = IORING_OP_READ,
	[AFIO_OP_WRITE] = IORING_OP_WRITE,
	[AFIO_OP_READV] = IORING_OP_READV,
	[AFIO_OP_WRITEV] = IORING_OP_WRITEV,
	[AFIO_OP_FSYNC] = IORING_OP_FSYNC,
	[AFIO_OP_RECV] = IORING_OP_RECV,
	[AFIO_OP_SEND] = IORING_OP_SEND,
};

struct uring {
	struct io_uring ring;
	struct afio_req **reqs;		/* by slot index, while in the ring */
	uint64_t *cancels;		/* cancels and retry timers waiting for an SQE */
	bool *cancel_waits;		/* by slot index: its request is in cancels */
	bool *retry_armed;		/* by slot index: a retry timer waits or runs */
	unsigned ncancels;
	struct __kernel_timespec retry_after;
	unsigned nslots;
	unsigned flags;			/* setup flags in force */
	unsigned cq_entries;
	bool nodrop;
	bool has_op[AFIO_OP_COUNT];
	bool has_cancel;
	bool has_timeout;
	int write_rwf;			/* RWF_NOSIGNAL where the kernel has it */
	enum afio_mode mode;
};

/* ---- setting up a ring ---- */

static unsigned ring_size(const struct afio_config *cfg)
{
	unsigned n = cfg->ring_entries;

	if (!n)
		n = cfg->entries && cfg->entries < 256 ? cfg->entries : 256;
	return n < MAX_RING ? n : MAX_RING;
}

static unsigned wanted_flags(const struct afio_config *cfg)
{
	unsigned flags = 0;

	for (size_t i = 0; i < NSETUP_FLAGS; i++)
		flags |= setup_flags[i].flag;
	if (cfg->flags & AFIO_SQPOLL)
		flags |= IORING_SETUP_SQPOLL;
	return flags;
}

/* Drops the newest optional flag still in *flags; false when none is left. */
static bool drop_newest(unsigned *flags)
{
	for (size_t i = NSETUP_FLAGS; i-- > 0;) {
		if (*flags & setup_flags[i].flag) {
			*flags &= ~setup_flags[i].flag;
			/* TASKRUN_FLAG is refused without COOP_TASKRUN. */
			if (setup_flags[i].flag == IORING_SETUP_COOP_TASKRUN)
				*flags &= ~IORING_SETUP_TASKRUN_FLAG;
			return true;
		}
	}
	return false;
}

static int ring_setup(struct io_uring *ring, const struct afio_config *cfg)
{
	struct io_uring_params p;
	unsigned flags = wanted_flags(cfg);
	int ret;

	for (;;) {
		memset(&p, 0, sizeof(p));
		p.flags = flags;
		if (flags & IORING_SETUP_SQPOLL)
			p.sq_thread_idle = 100;	/* ms before the poller sleeps */
		ret = io_uring_queue_init_params(ring_size(cfg), ring, &p);
		if (ret != -EINVAL || !drop_newest(&flags))
			return ret;
	}
}

/* ---- saying why not ---- */

static void explain_eperm(const struct afio_config *cfg, char *reason, size_t len)
{
	const char *what = "io_uring_setup: Operation not permitted";
	char val[32], group[32];

	if (afio_read_sysctl("/proc/sys/kernel/io_uring_disabled", val, sizeof(val)))
		strcpy(val, "");
	if (!strcmp(val, "1") &&
	    !afio_read_sysctl("/proc/sys/kernel/io_uring_group", group, sizeof(group)))
		afio_reason(reason, len, "%s (kernel.io_uring_disabled=1 and this process "
			    "is not in kernel.io_uring_group=%s)", what, group);
	else if (*val && strcmp(val, "0"))
		afio_reason(reason, len, "%s (kernel.io_uring_disabled=%s)", what, val);
	else if (cfg->flags & AFIO_SQPOLL)
		afio_reason(reason, len, "%s (older kernels allow SQPOLL only with CAP_SYS_ADMIN "
			    "or CAP_SYS_NICE; or a seccomp filter or policy refused it)", what);
	else
		afio_reason(reason, len, "%s (kernel.io_uring_disabled=%s: a seccomp filter "
			    "or security policy refused io_uring_setup)", what,
			    *val ? val : "absent");
}

static void explain_enomem(char *reason, size_t len)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) || rl.rlim_cur == RLIM_INFINITY) {
		afio_reason(reason, len, "io_uring_setup: Cannot allocate memory "
			    "(RLIMIT_MEMLOCK=unlimited)");
		return;
	}
	afio_reason(reason, len, "io_uring_setup: Cannot allocate memory (RLIMIT_MEMLOCK="
		    "%llu KiB; kernels before 5.12 charge rings to it)",
		    (unsigned long long)rl.rlim_cur / 1024);
}

static void explain(int err, const struct afio_config *cfg, char *reason, size_t len)
{
	switch (err) {
	case -EPERM:
		explain_eperm(cfg, reason, len);
		break;
	case -ENOSYS:
		afio_reason(reason, len, "io_uring_setup: Function not implemented (kernel "
			    "older than 5.1 or built without CONFIG_IO_URING)");
		break;
	case -ENOMEM:
		explain_enomem(reason, len);
		break;
	default:
		afio_reason(reason, len, "io_uring_setup: %s", strerror(-err));
		break;
	}
}

/* ---- what this kernel can do ---- */

static void probe_ops(struct uring *u)
{
	struct io_uring_probe *p = io_uring_get_probe_ring(&u->ring);

	if (!p) {
		/* No IORING_REGISTER_PROBE: a 5.1-5.5 kernel, which has
		   READV, WRITEV and FSYNC but not READ, WRITE, RECV, SEND;
		   ASYNC_CANCEL came with 5.5, so do without it. */
		u->has_op[AFIO_OP_READV] = true;
		u->has_op[AFIO_OP_WRITEV] = true;
		u->has_op[AFIO_OP_FSYNC] = true;
		return;
	}
	for (int op = 0; op < AFIO_OP_COUNT; op++)
		u->has_op[op] = io_uring_opcode_supported(p, op_code[op]);
	u->has_cancel = io_uring_opcode_supported(p, IORING_OP_ASYNC_CANCEL);
	u->has_timeout = io_uring_opcode_supported(p, IORING_OP_TIMEOUT);
	io_uring_free_probe(p);
}

/*
 * The kernel does a write to a pipe or socket as write(2) would, offset
 * or not, and one without a reader raises SIGPIPE in the thread that
 * submitted it.  RWF_NOSIGNAL turns that into -EPIPE alone; a kernel
 * without it refuses the flag with EOPNOTSUPP before it looks at the
 * data, and an empty write would not get that far, so one byte goes to a
 * pipe of our own.  The kernel's answer holds for the process: asked once,
 * not per context (threads that ask at once get the same answer).
 */
static int nosignal_rwf(void)
{
	static atomic_int known = -1;
	struct iovec iov = { .iov_base = "", .iov_len = 1 };
	int p[2], rwf = atomic_load_explicit(&known, memory_order_relaxed);

	if (rwf >= 0)
		return rwf;
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK))
		return 0;
	rwf = pwritev2(p[1], &iov, 1, -1, RWF_NOSIGNAL) == 1 ? RWF_NOSIGNAL : 0;
	close(p[0]);
	close(p[1]);
	atomic_store_explicit(&known, rwf, memory_order_relaxed);
	return rwf;
}

static int uring_probe(const struct afio_config *cfg, char *reason, size_t len)
{
	struct io_uring ring;
	int ret;

	ret = ring_setup(&ring, cfg);
	if (ret) {
		explain(ret, cfg, reason, len);
		return ret;
	}
	io_uring_queue_exit(&ring);
	afio_reason(reason, len, "io_uring: available");
	return 0;
}

/* ---- preparing SQEs ---- */

static uint64_t ud_of(const struct afio_req *r)
{
	return (uint64_t)r->gen << 32 | r->index;
}

/* Whether the request ud names is still ours in the ring. */
static bool in_ring(const struct uring *u, uint64_t ud)
{
	const struct afio_req *r = u->reqs[(uint32_t)ud];

	return r && r->gen == (uint32_t)(ud >> 32);
}

static unsigned clamp_len(size_t len)
{
	/* The SQE length is 32 bits; the kernel moves at most MAX_RW anyway,
	   so a longer request ends short, as read(2) would. */
	return len < MAX_RW ? (unsigned)len : MAX_RW;
}

static unsigned sqe_flags(struct uring *u, const struct afio_req *r)
{
	switch (u->mode) {
	case AFIO_MODE_ASYNC:
		return IOSQE_ASYNC;
	case AFIO_MODE_HYBRID:
		/*
		 * Sockets: since 5.16 an io-wq worker tries without blocking
		 * and then arms poll, so no worker waits for a silent peer.
		 * Before 5.16 the worker blocks in recv/send, as in ASYNC.
		 * fsync always ends up in io-wq, so skip the failed try.
		 * Regular files go without a flag: a page-cache hit finishes
		 * in the submitter and a miss is read without blocking it;
		 * handing them to io-wq, always or past a number in flight,
		 * measured slower ("io_uring HYBRID policy", bench/README.md).
		 */
		if (afio_op_is_socket(r->op) || r->op == AFIO_OP_FSYNC)
			return IOSQE_ASYNC;
		return 0;
	default:
		return 0;
	}
}

static void prep(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	switch (r->op) {
	case AFIO_OP_READ:
		io_uring_prep_read(sqe, r->fd, r->buf, clamp_len(r->len), r->off);
		break;
	case AFIO_OP_WRITE:
		io_uring_prep_write(sqe, r->fd, r->buf, clamp_len(r->len), r->off);
		sqe->rw_flags = u->write_rwf;
		break;
	case AFIO_OP_READV:
		io_uring_prep_readv(sqe, r->fd, r->iov, (unsigned)r->len, r->off);
		break;
	case AFIO_OP_WRITEV:
		io_uring_prep_writev(sqe, r->fd, r->iov, (unsigned)r->len, r->off);
		sqe->rw_flags = u->write_rwf;
		break;
	case AFIO_OP_FSYNC:
		io_uring_prep_fsync(sqe, r->fd, r->flags & AFIO_FSYNC_DATASYNC ?
				    IORING_FSYNC_DATASYNC : 0);
		break;
	case AFIO_OP_RECV:
		io_uring_prep_recv(sqe, r->fd, r->buf, clamp_len(r->len), r->flags);
		break;
	case AFIO_OP_SEND:
		/* A closed peer is an error for the callback, not SIGPIPE. */
		io_uring_prep_send(sqe, r->fd, r->buf, clamp_len(r->len),
				   r->flags | MSG_NOSIGNAL);
		break;
	}
	io_uring_sqe_set_flags(sqe, sqe_flags(u, r));
	io_uring_sqe_set_data64(sqe, ud_of(r));
}

/* ---- handing SQEs to the kernel ---- */

/* Submits what is in the SQ.  -EBUSY/-EAGAIN: the kernel wants a reap
   first (CQ overflow, memory); what is left stays in the SQ. */
static int push_sq(struct uring *u)
{
	int ret;

	if (!io_uring_sq_ready(&u->ring))
		return 0;
	do
		ret = io_uring_submit(&u->ring);
	while (ret == -EINTR);
	return ret < 0 ? ret : 0;
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
static int wait_sq_room(struct uring *u)
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

/* A free SQE, submitting what is queued to make room; NULL when the
   kernel takes no more for now. */
static struct io_uring_sqe *get_sqe(struct uring *u)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);

	if (sqe)
		return sqe;
	if (push_sq(u))
		return NULL;
	if ((u->flags & IORING_SETUP_SQPOLL) && wait_sq_room(u))
		return NULL;
	return io_uring_get_sqe(&u->ring);
}

/* An entry of the cancels list whose request has finished: dropped. */
static bool cancel_is_stale(struct uring *u, uint64_t ud)
{
	if (in_ring(u, ud & ~UD_RETRY))
		return false;
	if (ud & UD_RETRY)
		u->retry_armed[(uint32_t)(ud & ~UD_RETRY)] = false;
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
	u->cancel_waits[(uint32_t)ud] = false;
}

/* Turns waiting cancels and retry timers into SQEs, oldest first; those
   whose request has finished meanwhile are dropped. */
static void push_cancels(struct uring *u)
{
	struct io_uring_sqe *sqe;
	unsigned done = 0;
	uint64_t ud;

	for (; done < u->ncancels; done++) {
		ud = u->cancels[done];
		if (cancel_is_stale(u, ud))
			continue;
		sqe = get_sqe(u);
		if (!sqe)
			break;
		prep_cancel(u, sqe, ud);
	}
	u->ncancels -= done;
	memmove(u->cancels, u->cancels + done, u->ncancels * sizeof(*u->cancels));
}

static bool ring_has_room(const struct uring *u, const struct afio_engine *e)
{
	/* Without NODROP a CQE that does not fit is lost: stay within the CQ. */
	return u->nodrop || e->handed < u->cq_entries;
}

static int uring_submit(struct afio_engine *e, struct afio_reqq *q)
{
	struct uring *u = e->priv;
	struct io_uring_sqe *sqe;
	struct afio_req *r;
	int n = 0, ret;

	while ((r = q->head)) {
		if (!u->has_op[r->op]) {
			afio_route_to_pool(e, afio_reqq_pop(q));
			n++;
			continue;
		}
		if (!ring_has_room(u, e) || !(sqe = get_sqe(u)))
			break;
		afio_reqq_pop(q);
		prep(u, sqe, r);
		afio_engine_take(e, r);
		u->reqs[r->index] = r;
		n++;
	}
	push_cancels(u);
	ret = push_sq(u);
	/* What is prepared stays in the SQ: a later reap submits it. */
	if (ret == -EBUSY || ret == -EAGAIN)
		ret = 0;
	return n ? n : ret ? ret : q->head ? -EAGAIN : 0;
}

/* ---- completions ---- */

static void cancel_answered(struct uring *u, uint64_t ud, int res);
static void retry_due(struct uring *u, uint32_t index);

static void complete(struct afio_engine *e, const struct io_uring_cqe *cqe)
{
	struct uring *u = e->priv;
	uint64_t ud = io_uring_cqe_get_data64(cqe);
	uint32_t index = (uint32_t)ud;
	struct afio_req *r;
	ssize_t res = cqe->res;

	if (ud == UD_RESERVED)
		return;		/* liburing's own timeout */
	if (ud & UD_CANCEL) {
		cancel_answered(u, ud & ~UD_CANCEL, cqe->res);
		return;
	}
	if (ud & UD_RETRY) {
		retry_due(u, index & ~(uint32_t)UD_RETRY);
		return;
	}
	if (index >= u->nslots)
		return;
	r = u->reqs[index];
	if (!r || r->gen != (uint32_t)(ud >> 32))
		return;
	u->reqs[index] = NULL;
	u->cancel_waits[index] = false;
	/* A canceled socket request that io-wq had started ends with -EINTR. */
	if (r->cancel && res == -EINTR)
		res = -ECANCELED;
	afio_req_done(r, res);
}

static unsigned reap_batch(struct afio_engine *e)
{
	struct uring *u = e->priv;
	struct io_uring_cqe *cqes[REAP_BATCH];
	unsigned n;

	n = io_uring_peek_batch_cqe(&u->ring, cqes, REAP_BATCH);
	for (unsigned i = 0; i < n; i++)
		complete(e, cqes[i]);
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

	for (;;) {
		while (reap_batch(e))
			;
		if (!kernel_holds_more(u) || io_uring_get_events(&u->ring) < 0)
			break;
		if (!io_uring_cq_ready(&u->ring))
			break;
	}
	/* Room in the CQ again: what an -EBUSY left in the SQ can go now. */
	push_cancels(u);
	push_sq(u);
}

static void queue_cancel(struct uring *u, uint64_t ud);

/* SQPOLL: ask again for every canceled request still in the ring, once
   the earlier asks are answered; a repeated ask for one that has already
   finished is answered -ENOENT and changes nothing. */
static void recancel(struct uring *u)
{
	if (u->ncancels)
		return;
	for (unsigned i = 0; i < u->nslots; i++)
		if (u->reqs[i] && u->reqs[i]->cancel)
			queue_cancel(u, ud_of(u->reqs[i]));
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
	push_cancels(u);
	ret = io_uring_submit_and_wait_timeout(&u->ring, &cqe, 1, tsp, NULL);
	if (ret == -EBUSY) {
		/* Overflowed: completions are waiting, the core reaps them. */
		return 0;
	}
	return ret < 0 ? ret : 0;
}

/* ---- cancel ---- */

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
	uint32_t index = (uint32_t)ud;

	if (u->cancel_waits[index])
		return;
	queue_entry(u, ud);
	u->cancel_waits[index] = true;
}

/* ud is in the ring: cancel it again after RETRY_NS.  The timer belongs to
   the slot, not to the request: whatever request holds the slot when it
   fires is asked again if it was canceled (see retry_due()). */
static void queue_retry(struct uring *u, uint64_t ud)
{
	uint32_t index = (uint32_t)ud;

	if (u->retry_armed[index])
		return;
	queue_entry(u, ud | UD_RETRY);
	u->retry_armed[index] = true;
}

static void retry_due(struct uring *u, uint32_t index)
{
	struct afio_req *r;

	if (index >= u->nslots)
		return;
	u->retry_armed[index] = false;
	r = u->reqs[index];
	if (r && r->cancel)
		queue_cancel(u, ud_of(r));
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
 * fsync never waits by poll, and a socket request soon does: ask again at
 * once.  A read or write may be on a regular file, which io-wq simply
 * finishes, or on a pipe, which waits by poll: ask again after a short
 * timer, whose completion also wakes a program that sleeps on the eventfd,
 * rather than spin for as long as a disk read takes.
 */
static void cancel_answered(struct uring *u, uint64_t ud, int res)
{
	const struct afio_req *r;

	if ((res != -EALREADY && res != -ENOENT) || !in_ring(u, ud))
		return;
	r = u->reqs[(uint32_t)ud];
	if (r->op == AFIO_OP_FSYNC)
		return;
	if (afio_op_is_socket(r->op) || !u->has_timeout)
		queue_cancel(u, ud);
	else
		queue_retry(u, ud);
}

/*
 * The cancel goes to the kernel at once, not at the next afio_poll(): a
 * caller may be waiting on the eventfd for the canceled request.  Without
 * IORING_OP_ASYNC_CANCEL (before 5.5) the request just runs to its end.
 */
static void uring_cancel(struct afio_engine *e, struct afio_req *r)
{
	struct uring *u = e->priv;

	if (!u->has_cancel)
		return;
	queue_cancel(u, ud_of(r));
	push_cancels(u);
	push_sq(u);
}

/* ---- life cycle ---- */

static void free_uring(struct uring *u)
{
	free(u->reqs);
	free(u->cancels);
	free(u->cancel_waits);
	free(u->retry_armed);
	free(u);
}

static int attach(struct afio_engine *e, struct uring *u, char *reason, size_t len)
{
	int ret;

	ret = io_uring_register_eventfd(&u->ring, afio_ctx_eventfd(e->ctx));
	if (ret) {
		afio_reason(reason, len, "io_uring_register_eventfd: %s", strerror(-ret));
		return ret;
	}
	probe_ops(u);
	u->write_rwf = nosignal_rwf();
	return 0;
}

static int uring_init(struct afio_engine *e, const struct afio_config *cfg,
		      char *reason, size_t len)
{
	struct uring *u;
	int ret;

	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->nslots = afio_ctx_entries(e->ctx);
	u->reqs = calloc(u->nslots, sizeof(*u->reqs));
	u->cancels = calloc(2 * (size_t)u->nslots, sizeof(*u->cancels));
	u->cancel_waits = calloc(u->nslots, sizeof(*u->cancel_waits));
	u->retry_armed = calloc(u->nslots, sizeof(*u->retry_armed));
	u->retry_after.tv_nsec = RETRY_NS;
	if (!u->reqs || !u->cancels || !u->cancel_waits || !u->retry_armed) {
		free_uring(u);
		return -ENOMEM;
	}
	u->mode = cfg->mode;
	ret = ring_setup(&u->ring, cfg);
	if (ret) {
		explain(ret, cfg, reason, len);
		free_uring(u);
		return ret;
	}
	u->flags = u->ring.flags;
	u->cq_entries = u->ring.cq.ring_entries;
	u->nodrop = u->ring.features & IORING_FEAT_NODROP;
	ret = attach(e, u, reason, len);
	if (ret) {
		io_uring_queue_exit(&u->ring);
		free_uring(u);
		return ret;
	}
	e->priv = u;
	return 0;
}

static void uring_exit(struct afio_engine *e)
{
	struct uring *u = e->priv;

	io_uring_queue_exit(&u->ring);
	free_uring(u);
	e->priv = NULL;
}

/*
 * In a child of fork() the ring is the parent's.  io_uring_queue_exit()
 * does no more than unmap this process's view of it and close this
 * process's copy of the fd (it would also unregister a registered ring
 * fd, which we never register): no io_uring_enter, nothing the parent's
 * requests notice.  Left mapped, the view would keep the ring's memory
 * alive after the parent closed it.
 */
static void uring_forget(struct afio_engine *e)
{
	uring_exit(e);
}

/* "SQPOLL|COOP_TASKRUN|..." into buf, which is large enough for all. */
static void flag_names(unsigned flags, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	if (flags & IORING_SETUP_SQPOLL)
		n += (size_t)snprintf(buf, len, "SQPOLL");
	for (size_t i = 0; i < NSETUP_FLAGS && n < len; i++)
		if (flags & setup_flags[i].flag)
			n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "|" : "",
					      setup_flags[i].name);
	if (!n)
		snprintf(buf, len, "none");
}

static int uring_describe(const struct afio_engine *e, char *buf, size_t len)
{
	static const char *const op_names[AFIO_OP_COUNT] = {
		"read", "write", "readv", "writev", "fsync", "recv", "send",
	};
	const struct uring *u = e->priv;
	char flags[128], pooled[64] = "";
	size_t n = 0;

	flag_names(u->flags, flags, sizeof(flags));
	for (int op = 0; op < AFIO_OP_COUNT && n < sizeof(pooled); op++)
		if (!u->has_op[op])
			n += (size_t)snprintf(pooled + n, sizeof(pooled) - n, "%s%s",
					      n ? "," : ", thread pool for ", op_names[op]);
	return snprintf(buf, len, "io_uring: sq=%u cq=%u flags=%s, mode %s%s%s",
			u->ring.sq.ring_entries, u->cq_entries, flags,
			afio_mode_name(u->mode), pooled,
			u->has_cancel ? "" : ", no in-kernel cancel");
}

const struct afio_backend_ops afio_backend_io_uring = {
	.id = AFIO_BACKEND_IO_URING,
	.name = "io_uring",
	.probe = uring_probe,
	.init = uring_init,
	.exit = uring_exit,
	.forget = uring_forget,
	.submit = uring_submit,
	.reap = uring_reap,
	.wait = uring_wait,
	.cancel = uring_cancel,
	.describe = uring_describe,
};
