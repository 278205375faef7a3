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
 * The exception is sendfile, a chain of SQEs through a pipe the context
 * owns (see "sendfile" below); its first splice is marked UD_SPLICE_IN.
 * Which opcode each op needs, and how it is prepared, is uring_ops[].
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
#include <poll.h>
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
#define OP_FTRUNCATE			55		/* Linux 6.9, after liburing 2.3 */

#define UD_RESERVED	UINT64_MAX	/* low half never a slot index */
#define UD_CANCEL	(1ull << 31)	/* in a cancel's user_data; slots are fewer */
#define UD_SPLICE_IN	(1ull << 30)	/* sendfile's splice from the file */
#define UD_RETRY	(1ull << 29)	/* a timer to cancel the slot's request again */
#define UD_INDEX	0x1fffffffu
#define RETRY_NS	1000000		/* how long that timer waits */
#define REAP_BATCH	64
#define SQPOLL_WAIT_MS	10
#define MAX_RING	32768u		/* the kernel's IORING_MAX_ENTRIES */
#define MAX_CQ		(2 * MAX_RING)	/* and its IORING_MAX_CQ_ENTRIES */
/* CQEs a request in the ring may make the kernel owe beyond its own: the
   answer to a cancel and a retry timer; and a few spare for liburing's own
   timeout and a cancel asked twice. */
#define CQES_BESIDE_REQ	2
#define CQE_SPARE	8
#define MAX_RW		0x7ffff000u	/* the kernel's MAX_RW_COUNT */

/*
 * Setup flags we ask for, oldest first: on EINVAL the newest one still
 * asked for is dropped and the setup tried again.
 *
 * SINGLE_ISSUER and DEFER_TASKRUN are left out on purpose: they bind the
 * ring to one task, and a context may be created on one thread and later
 * handed to another (one thread at a time), which they would turn into
 * -EEXIST from io_uring_enter, and DEFER_TASKRUN signals the eventfd for
 * deferred work that is not a completion
 * (bench/results/2026-11-30-io_uring-hybrid.md, "Setup flags").
 */
static const struct {
	unsigned flag;
	const char *name;
} setup_flags[] = {
	{ IORING_SETUP_CQSIZE, "CQSIZE" },		/* 5.5 */
	{ IORING_SETUP_SUBMIT_ALL, "SUBMIT_ALL" },	/* 5.18 */
	{ IORING_SETUP_COOP_TASKRUN, "COOP_TASKRUN" },	/* 5.19 */
	{ IORING_SETUP_TASKRUN_FLAG, "TASKRUN_FLAG" },	/* 5.19 */
};
#define NSETUP_FLAGS (sizeof(setup_flags) / sizeof(setup_flags[0]))

struct uring;
typedef void prep_fn(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r);

/* What an op needs from the kernel, since when, and how its SQE is made. */
struct uring_op {
	uint8_t opcode;
	const char *name;
	const char *since;
	prep_fn *prep;
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
	unsigned cqes_owed;		/* SQEs taken whose CQE is not yet reaped */
	bool dropped;			/* the kernel said it dropped completions */
	bool has_op[AFIO_OP_COUNT];
	bool plain_op[AFIO_OP_COUNT];	/* has_op, and one SQE of any length */
	bool has_cancel;
	bool has_poll;
	int write_rwf;			/* RWF_NOSIGNAL where the kernel has it */
	enum afio_mode mode;
	uint8_t sqe_flags[AFIO_OP_COUNT];	/* by op: IOSQE_ASYNC where the route says */
	bool sendfile_try;		/* sendfile_inline() where its range is cached */
	int evfd;			/* the context's, which the kernel signals */
	struct __kernel_timespec *timespecs;	/* by slot index: a TIMEOUT's */
	struct sendfile_state *sendfiles;	/* by slot index */
	struct afio_reqq next_steps;	/* sendfiles whose next SQE waits for room */
	struct afio_reqq pipe_waiters;	/* sendfiles that wait for a pipe */
	unsigned pipes_out;		/* pipes sendfiles hold now */
	struct afio_reqq again;		/* to go to the kernel again (must_go_again(),
					   connect_goes_on()) */
	pid_t *submitters;		/* by slot index: the thread that submitted it */
	bool *connect_waits;		/* by slot index: a connect waits for POLLOUT */
	int (*spare_pipes)[2];		/* emptied pipes, for the next sendfile */
	unsigned nspare;
};

/* ---- setting up a ring ---- */

static unsigned ring_size(const struct afio_config *cfg)
{
	unsigned n = cfg->ring_entries;

	if (!n)
		n = cfg->entries && cfg->entries < 256 ? cfg->entries : 256;
	/* A sendfile's chain takes two SQEs at once. */
	if (n < 2)
		n = 2;
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

/*
 * A CQ that holds every completion the requests in flight can owe at once
 * (cq_has_room()), so that none waits on the kernel's overflow list, which
 * is allocated atomically and drops completions when that fails.  Up to
 * the kernel's limit; past it requests wait for room in the core's queue.
 */
static unsigned cq_size(const struct afio_config *cfg)
{
	uint64_t want = (uint64_t)(cfg->entries ? cfg->entries : 256) * (1 + CQES_BESIDE_REQ) +
			CQE_SPARE;
	unsigned n = 2 * ring_size(cfg);

	while (n < want && n < MAX_CQ)
		n *= 2;
	return n < MAX_CQ ? n : MAX_CQ;
}

static int ring_setup(struct io_uring *ring, const struct afio_config *cfg)
{
	struct io_uring_params p;
	unsigned flags = wanted_flags(cfg);
	int ret;

	for (;;) {
		memset(&p, 0, sizeof(p));
		p.flags = flags;
		p.cq_entries = cq_size(cfg);
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

static const struct uring_op uring_ops[AFIO_OP_COUNT];

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
		u->has_op[AFIO_OP_NOP] = true;
		return;
	}
	for (int op = 0; op < AFIO_OP_COUNT; op++)
		u->has_op[op] = io_uring_opcode_supported(p, uring_ops[op].opcode);
	u->has_cancel = io_uring_opcode_supported(p, IORING_OP_ASYNC_CANCEL);
	io_uring_free_probe(p);
}

/* Ops that need nothing of submit_special(), eventfd aside. */
static void find_plain_ops(struct uring *u)
{
	for (int op = 0; op < AFIO_OP_COUNT; op++)
		u->plain_op[op] = u->has_op[op] && op != AFIO_OP_SENDFILE &&
				  op != AFIO_OP_SYNC_RANGE;
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
	const struct afio_req *r = u->reqs[(uint32_t)ud & UD_INDEX];

	return r && r->gen == (uint32_t)(ud >> 32);
}

/* r leaves its slot: nothing of its own state may be found there by the
   request that takes the slot next. */
static void release_slot(struct uring *u, const struct afio_req *r)
{
	u->reqs[r->index] = NULL;
	u->cancel_waits[r->index] = false;
	u->connect_waits[r->index] = false;
}

static unsigned clamp_len(size_t len)
{
	/* The SQE length is 32 bits; the kernel moves at most MAX_RW anyway,
	   so a longer request ends short, as read(2) would. */
	return len < MAX_RW ? (unsigned)len : MAX_RW;
}

/* ---- one SQE per op ---- */

/* Without IOPOLL the kernel refuses RWF_HIPRI (EOPNOTSUPP), where
   preadv2(2) takes it as a hint; it is dropped, as preadv2 would ignore it
   on a device that is not polled. */
static int rw_flags(const struct afio_req *r)
{
	return r->flags & ~RWF_HIPRI;
}

static void prep_read(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_read(sqe, r->fd, r->buf, clamp_len(r->len), r->off);
}

static void prep_write(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	io_uring_prep_write(sqe, r->fd, r->buf, clamp_len(r->len), r->off);
	sqe->rw_flags = u->write_rwf;
}

static void prep_readv(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_readv(sqe, r->fd, r->iov, (unsigned)r->len, r->off);
	sqe->rw_flags = rw_flags(r);
}

static void prep_writev(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	io_uring_prep_writev(sqe, r->fd, r->iov, (unsigned)r->len, r->off);
	sqe->rw_flags = rw_flags(r) | u->write_rwf;
}

static void prep_fsync(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_fsync(sqe, r->fd, r->flags & AFIO_FSYNC_DATASYNC ?
			    IORING_FSYNC_DATASYNC : 0);
}

static void prep_recv(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_recv(sqe, r->fd, r->buf, clamp_len(r->len), r->flags);
}

/* A closed peer is an error for the callback, not SIGPIPE. */
static void prep_send(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_send(sqe, r->fd, r->buf, clamp_len(r->len), r->flags | MSG_NOSIGNAL);
}

static void prep_accept(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_accept(sqe, r->fd, NULL, NULL, r->flags);
}

/* The connect, or the wait for its end (connect_goes_on()). */
static void prep_connect(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	if (u->connect_waits[r->index])
		io_uring_prep_poll_add(sqe, r->fd, POLLOUT);
	else
		io_uring_prep_connect(sqe, r->fd, r->addr, (socklen_t)r->len);
}

static void prep_sendmsg(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_sendmsg(sqe, r->fd, r->msg, (unsigned)r->flags | MSG_NOSIGNAL);
}

static void prep_recvmsg(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_recvmsg(sqe, r->fd, r->msg, (unsigned)r->flags);
}

/* The kernel reads the timespec when it takes the SQE, which with SQPOLL
   is later: it lives in the slot.  The deadline is absolute, on
   CLOCK_MONOTONIC (the kernel's default clock for timeouts), since the
   call that queued it. */
static void prep_timeout(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	struct __kernel_timespec *ts = &u->timespecs[r->index];

	ts->tv_sec = (long long)(r->off / 1000000000u);
	ts->tv_nsec = (long long)(r->off % 1000000000u);
	io_uring_prep_timeout(sqe, ts, 0, IORING_TIMEOUT_ABS);
}

static void prep_nop(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	(void)r;
	io_uring_prep_nop(sqe);
}

static void prep_openat(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_openat(sqe, r->fd, r->path, r->flags, (mode_t)r->mode);
}

static void prep_openat2(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_openat2(sqe, r->fd, r->path, (struct open_how *)r->how);
}

static void prep_close(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_close(sqe, r->fd);
}

static void prep_statx(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_statx(sqe, r->fd, r->path, r->flags, r->mode, r->stx);
}

static void prep_fallocate(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_fallocate(sqe, r->fd, (int)r->mode, r->off, r->len);
}

static void prep_ftruncate(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_rw(OP_FTRUNCATE, sqe, r->fd, NULL, 0, r->off);
}

static void prep_sync_range(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_sync_file_range(sqe, r->fd, (unsigned)r->len, r->off, r->flags);
}

static void prep_renameat(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_renameat(sqe, r->fd, r->path, r->fd2, r->path2, (unsigned)r->flags);
}

static void prep_unlinkat(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_unlinkat(sqe, r->fd, r->path, r->flags);
}

static void prep_mkdirat(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_mkdirat(sqe, r->fd, r->path, (mode_t)r->mode);
}

/* What each op needs from the kernel, and since when; an op whose opcode
   the probe does not find goes to the thread pool.  sendfile is prepared
   by sendfile_start(), as a chain. */
static const struct uring_op uring_ops[AFIO_OP_COUNT] = {
	[AFIO_OP_READ] = { IORING_OP_READ, "READ", "5.6", prep_read },
	[AFIO_OP_WRITE] = { IORING_OP_WRITE, "WRITE", "5.6", prep_write },
	[AFIO_OP_READV] = { IORING_OP_READV, "READV", "5.1", prep_readv },
	[AFIO_OP_WRITEV] = { IORING_OP_WRITEV, "WRITEV", "5.1", prep_writev },
	[AFIO_OP_FSYNC] = { IORING_OP_FSYNC, "FSYNC", "5.1", prep_fsync },
	[AFIO_OP_RECV] = { IORING_OP_RECV, "RECV", "5.6", prep_recv },
	[AFIO_OP_SEND] = { IORING_OP_SEND, "SEND", "5.6", prep_send },
	[AFIO_OP_ACCEPT] = { IORING_OP_ACCEPT, "ACCEPT", "5.5", prep_accept },
	[AFIO_OP_CONNECT] = { IORING_OP_CONNECT, "CONNECT", "5.5", prep_connect },
	[AFIO_OP_SENDMSG] = { IORING_OP_SENDMSG, "SENDMSG", "5.3", prep_sendmsg },
	[AFIO_OP_RECVMSG] = { IORING_OP_RECVMSG, "RECVMSG", "5.3", prep_recvmsg },
	[AFIO_OP_SENDFILE] = { IORING_OP_SPLICE, "SPLICE", "5.7", NULL },
	[AFIO_OP_TIMEOUT] = { IORING_OP_TIMEOUT, "TIMEOUT", "5.4", prep_timeout },
	[AFIO_OP_OPENAT] = { IORING_OP_OPENAT, "OPENAT", "5.6", prep_openat },
	[AFIO_OP_OPENAT2] = { IORING_OP_OPENAT2, "OPENAT2", "5.6", prep_openat2 },
	[AFIO_OP_CLOSE] = { IORING_OP_CLOSE, "CLOSE", "5.6", prep_close },
	[AFIO_OP_STATX] = { IORING_OP_STATX, "STATX", "5.6", prep_statx },
	[AFIO_OP_FALLOCATE] = { IORING_OP_FALLOCATE, "FALLOCATE", "5.6", prep_fallocate },
	[AFIO_OP_FTRUNCATE] = { OP_FTRUNCATE, "FTRUNCATE", "6.9", prep_ftruncate },
	[AFIO_OP_SYNC_RANGE] = { IORING_OP_SYNC_FILE_RANGE, "SYNC_FILE_RANGE", "5.2",
				 prep_sync_range },
	[AFIO_OP_RENAMEAT] = { IORING_OP_RENAMEAT, "RENAMEAT", "5.11", prep_renameat },
	[AFIO_OP_UNLINKAT] = { IORING_OP_UNLINKAT, "UNLINKAT", "5.11", prep_unlinkat },
	[AFIO_OP_MKDIRAT] = { IORING_OP_MKDIRAT, "MKDIRAT", "5.15", prep_mkdirat },
	[AFIO_OP_NOP] = { IORING_OP_NOP, "NOP", "5.1", prep_nop },
};

static void prep(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	uring_ops[r->op].prep(u, sqe, r);
	io_uring_sqe_set_flags(sqe, u->sqe_flags[r->op]);
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
/* Every SQE we make posts one CQE (none is multishot). */
static struct io_uring_sqe *take_sqe(struct uring *u)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);

	if (sqe)
		u->cqes_owed++;
	return sqe;
}

static struct io_uring_sqe *get_sqe(struct uring *u)
{
	struct io_uring_sqe *sqe = take_sqe(u);

	if (sqe)
		return sqe;
	if (push_sq(u))
		return NULL;
	if ((u->flags & IORING_SETUP_SQPOLL) && wait_sq_room(u))
		return NULL;
	return take_sqe(u);
}

/* An entry of the cancels list whose request has finished: dropped. */
static bool cancel_is_stale(struct uring *u, uint64_t ud)
{
	if (in_ring(u, ud))
		return false;
	if (ud & UD_RETRY)
		u->retry_armed[(uint32_t)ud & UD_INDEX] = false;
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
	u->cancel_waits[(uint32_t)ud & UD_INDEX] = false;
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

/* Room in the CQ for r and for what each request in the ring may still
   owe beside its own CQE (see cq_size()). */
static bool cq_has_room(const struct uring *u, const struct afio_engine *e,
			const struct afio_req *r)
{
	uint64_t need = (uint64_t)u->cqes_owed + (r->op == AFIO_OP_SENDFILE ? 2 : 1) +
			(uint64_t)CQES_BESIDE_REQ * (e->handed + 1) + CQE_SPARE;

	return need <= u->cq_entries;
}

/*
 * Asked at every submit.  The default TLS model of a shared library looks
 * the variable up through __tls_get_addr() at each use (3% of a nop run);
 * initial-exec reads it at a fixed offset.  Four bytes of static TLS stay
 * within what glibc keeps spare for a library opened later with dlopen()
 * (a fio engine that links this one).
 */
static pid_t self_tid(void)
{
	static __thread pid_t tid __attribute__((tls_model("initial-exec")));

	if (!tid)
		tid = gettid();
	return tid;
}

/* ---- what goes to the kernel again ---- */

/*
 * io_uring cancels what a thread submitted when the thread exits: at once
 * what io-wq had not started, and a request waiting by poll once its file
 * is ready (it completes then without the task).  Such a -ECANCELED,
 * asked for by nobody and reaped by another thread than the one that
 * submitted, means the request did nothing: it goes again, from this
 * thread, as on the other backends, where a thread's exit changes nothing.
 * A timer would start over: it keeps the -ECANCELED.  Reaped by its own
 * submitter it is the kernel's own answer (no io-wq worker could be
 * started), and stays.
 *
 * An io-wq worker interrupted in a blocking call (its submitter exited, or
 * the ring is being torn down) may complete the request with the code the
 * kernel gives a system call to restart (ERESTARTSYS and its kin, 512-516,
 * which net and read/write requests turn into EINTR but splice and others
 * do not): the call did nothing, and the request goes again, in every
 * mode, as a restarted system call would (asyncfio(7)).  A canceled
 * request ends instead (finish_res()).
 */
static bool must_go_again(const struct uring *u, const struct afio_req *r, ssize_t res)
{
	if (r->cancel)
		return false;
	if (afio_is_restart_code(res))
		return true;
	return res == -ECANCELED && !(u->flags & IORING_SETUP_SQPOLL) &&
	       r->op != AFIO_OP_TIMEOUT && u->submitters[r->index] != self_tid();
}

/* ---- sendfile: file -> pipe -> socket, all in the kernel ---- */

/*
 * A sendfile is a splice from the file into a pipe of its own, linked to a
 * splice from the pipe to the socket: the pages go by reference, never
 * through user memory.  What the second splice leaves in the pipe (a full
 * socket buffer, or a short first splice that broke the link) goes on with
 * further splices, after a poll for room where the socket said EAGAIN, so
 * a pipe goes back to the spares empty.  The request completes once none of
 * its SQEs is in the ring; its result is what reached the socket.
 *
 * Pipes cost two fds each: a few empty ones are kept, and a sendfile that
 * finds none to be had waits for one another sendfile gives back.
 */
enum sf_step { SF_CHAIN, SF_OUT, SF_POLL, SF_RESTART };

struct sendfile_state {
	int pipe[2];
	unsigned pipe_size;
	unsigned in_pipe;	/* spliced in, not yet out */
	int in_res;		/* the splice from the file */
	int last_res;		/* the last splice out, or the poll */
	uint8_t pending;	/* its SQEs in the ring */
	uint8_t step;
	bool lost;		/* a step the kernel dropped when its submitter exited */
};

#define SENDFILE_PIPE_SIZE	(1u << 20)
#define SPARE_PIPES		16

static int get_pipe(struct uring *u, struct sendfile_state *sf)
{
	int size;

	if (u->nspare) {
		u->nspare--;
		sf->pipe[0] = u->spare_pipes[u->nspare][0];
		sf->pipe[1] = u->spare_pipes[u->nspare][1];
	} else if (pipe2(sf->pipe, O_CLOEXEC | O_NONBLOCK)) {
		sf->pipe[0] = sf->pipe[1] = -1;
		return -errno;
	} else {
		/* A larger pipe moves a large file in fewer round trips; the
		   default is what an unprivileged process may be limited to. */
		(void)fcntl(sf->pipe[1], F_SETPIPE_SZ, SENDFILE_PIPE_SIZE);
	}
	size = fcntl(sf->pipe[1], F_GETPIPE_SZ);
	sf->pipe_size = size > 0 ? (unsigned)size : 65536;
	u->pipes_out++;
	return 0;
}

/* An empty pipe is kept for the next sendfile; one with bytes left in it
   (a request that stopped early) is closed. */
static void put_pipe(struct uring *u, struct sendfile_state *sf)
{
	if (sf->pipe[0] < 0)
		return;
	u->pipes_out--;
	if (!sf->in_pipe && u->nspare < SPARE_PIPES) {
		u->spare_pipes[u->nspare][0] = sf->pipe[0];
		u->spare_pipes[u->nspare][1] = sf->pipe[1];
		u->nspare++;
	} else {
		close(sf->pipe[0]);
		close(sf->pipe[1]);
	}
	sf->pipe[0] = sf->pipe[1] = -1;
}

/* What a cancel of r must name: a chain is canceled at its head. */
static uint64_t cancel_target(const struct uring *u, const struct afio_req *r)
{
	const struct sendfile_state *sf = &u->sendfiles[r->index];

	if (r->op == AFIO_OP_SENDFILE && sf->step == SF_CHAIN && sf->pending == 2)
		return ud_of(r) | UD_SPLICE_IN;
	return ud_of(r);
}

/*
 * Everything but the pipe starts afresh: a state left by the request that
 * held the slot before (a lost step of one canceled meanwhile, say) would
 * make this one send its range twice.
 */
static void sendfile_clear(struct sendfile_state *sf)
{
	*sf = (struct sendfile_state){
		.pipe = { sf->pipe[0], sf->pipe[1] },
		.pipe_size = sf->pipe_size,
		.step = SF_CHAIN,
	};
}

/* false when the SQ has no room for the whole chain now.  The chain
   takes what is left of the range, so that no byte goes twice and the
   result never exceeds the length asked for. */
static bool sendfile_start(struct uring *u, struct afio_req *r)
{
	struct sendfile_state *sf = &u->sendfiles[r->index];
	size_t left = r->len - r->progress;
	struct io_uring_sqe *in, *out;
	unsigned n;

	if (io_uring_sq_space_left(&u->ring) < 2 && (push_sq(u) ||
	    io_uring_sq_space_left(&u->ring) < 2))
		return false;
	n = (unsigned)(left < sf->pipe_size ? left : sf->pipe_size);
	in = take_sqe(u);
	io_uring_prep_splice(in, r->fd2, (int64_t)(r->off + r->progress), sf->pipe[1], -1, n, 0);
	io_uring_sqe_set_flags(in, IOSQE_IO_LINK);
	io_uring_sqe_set_data64(in, ud_of(r) | UD_SPLICE_IN);
	out = take_sqe(u);
	io_uring_prep_splice(out, sf->pipe[0], -1, r->fd, -1, n, 0);
	io_uring_sqe_set_data64(out, ud_of(r));
	sendfile_clear(sf);
	sf->pending = 2;
	return true;
}

/* The next splice out, the poll before it, or the chain again; false when
   the SQ is full. */
static bool sendfile_step(struct uring *u, struct afio_req *r)
{
	struct sendfile_state *sf = &u->sendfiles[r->index];
	struct io_uring_sqe *sqe;

	u->submitters[r->index] = self_tid();
	if (sf->step == SF_RESTART)
		return sendfile_start(u, r);
	sqe = get_sqe(u);
	if (!sqe)
		return false;
	if (sf->step == SF_POLL)
		io_uring_prep_poll_add(sqe, r->fd, POLLOUT);
	else
		io_uring_prep_splice(sqe, sf->pipe[0], -1, r->fd, -1, sf->in_pipe, 0);
	io_uring_sqe_set_data64(sqe, ud_of(r));
	sf->pending = 1;
	return true;
}

static void push_next_steps(struct uring *u)
{
	struct afio_req *r;

	while ((r = u->next_steps.head) && sendfile_step(u, r))
		afio_reqq_pop(&u->next_steps);
	while ((r = u->pipe_waiters.head) && !get_pipe(u, &u->sendfiles[r->index])) {
		if (!sendfile_start(u, r)) {
			put_pipe(u, &u->sendfiles[r->index]);
			break;
		}
		afio_reqq_pop(&u->pipe_waiters);
	}
}

/* No fd for a pipe: wait for one a sendfile in flight gives back, or,
   with none in flight, let the pool do it (sendfile(2) needs no fd). */
static bool wait_for_pipe(struct afio_engine *e, struct afio_req *r)
{
	struct uring *u = e->priv;

	if (!u->pipes_out)
		return false;
	afio_engine_take(e, r);
	u->reqs[r->index] = r;
	u->submitters[r->index] = self_tid();
	sendfile_clear(&u->sendfiles[r->index]);
	afio_reqq_push(&u->pipe_waiters, r);
	return true;
}

static void sendfile_finish(struct uring *u, struct afio_req *r)
{
	struct sendfile_state *sf = &u->sendfiles[r->index];
	ssize_t res;

	if (r->progress)
		res = (ssize_t)r->progress;
	else if (r->cancel)
		res = -ECANCELED;
	else if (sf->in_res <= 0)
		res = sf->in_res;
	else
		res = sf->last_res;
	/* splice(2) refuses a file it cannot read at an offset with EINVAL,
	   where sendfile(2) says ESPIPE. */
	if (res == -EINVAL && lseek(r->fd2, 0, SEEK_CUR) < 0 && errno == ESPIPE)
		res = -ESPIPE;
	put_pipe(u, sf);
	sendfile_clear(sf);
	release_slot(u, r);
	afio_req_done(r, res);
}

/* Once none of r's SQEs is in the ring: what is left in the pipe goes on,
   unless the request was canceled or the socket failed. */
static void sendfile_next(struct uring *u, struct afio_req *r)
{
	struct sendfile_state *sf = &u->sendfiles[r->index];
	int res = sf->last_res;

	if (sf->lost && !r->cancel && (sf->in_pipe || r->progress < r->len)) {
		sf->lost = false;
		sf->step = sf->in_pipe ? SF_OUT : SF_RESTART;
		afio_reqq_push(&u->next_steps, r);
		return;
	}
	if (r->cancel || !sf->in_pipe ||
	    (res < 0 && res != -EAGAIN && !(sf->step == SF_CHAIN && res == -ECANCELED))) {
		sendfile_finish(u, r);
		return;
	}
	sf->step = res == -EAGAIN ? SF_POLL : SF_OUT;
	afio_reqq_push(&u->next_steps, r);
}

static void sendfile_cqe(struct uring *u, struct afio_req *r, uint64_t ud, int res)
{
	struct sendfile_state *sf = &u->sendfiles[r->index];

	sf->pending--;
	/* The kernel dropped the step or was interrupted in it: it is done
	   again, as must_go_again() has a whole request done again. */
	if (must_go_again(u, r, res))
		sf->lost = true;
	else if (ud & UD_SPLICE_IN) {
		sf->in_res = res;
		if (res > 0)
			sf->in_pipe += (unsigned)res;
	} else if (sf->step == SF_POLL) {
		sf->last_res = res < 0 ? res : 0;
	} else {
		sf->last_res = res;
		if (res > 0) {
			r->progress += (size_t)res;
			sf->in_pipe -= (unsigned)res;
		}
	}
	if (!sf->pending)
		sendfile_next(u, r);
}

/* SYNC_FILE_RANGE takes a 32-bit length in the SQE; a longer range would
   be cut short (and one of exactly 4 GiB read as "to the end"). */
static bool sqe_fits(const struct afio_req *r)
{
	return r->op != AFIO_OP_SYNC_RANGE || r->len <= UINT32_MAX;
}

/*
 * INLINE: the kernel would hand both splices to io-wq, which costs more
 * than the copy-free transfer itself for small files; a file whose pages
 * are all cached lets sendfile(2) do it here without waiting (it moves no
 * more than the socket has room for, afio_sock_can_try()), as the kernel
 * tries other requests in the submitter.
 * false when it must go the long way (it would block, or it did).  r is
 * q's head, and leaves q before it is done: afio_req_done() links it into
 * another queue, which would cut q behind it.
 */
static bool sendfile_inline(struct uring *u, struct afio_reqq *q)
{
	struct afio_req *r = q->head;
	ssize_t n;

	if (!u->sendfile_try || !afio_sock_can_try(r, r->fd) ||
	    !afio_sendfile_cached(r))
		return false;
	n = afio_req_sock_nowait(r, r->fd);
	if (n == -EAGAIN)
		return false;
	afio_reqq_pop(q);
	afio_count_nowait(r->ctx);
	afio_req_done(r, n);
	return true;
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

/* ---- requests of a thread that exited, or interrupted ---- */

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
	bool *waits = &u->connect_waits[r->index];

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

static void push_again(struct uring *u)
{
	struct io_uring_sqe *sqe;
	struct afio_req *r;

	while ((r = u->again.head) && (sqe = get_sqe(u))) {
		afio_reqq_pop(&u->again);
		prep(u, sqe, r);
		u->submitters[r->index] = self_tid();
	}
}

/* What submit does with a request that is not one plain SQE. */
enum special { SPECIAL_TAKEN, SPECIAL_PREPARED, SPECIAL_STOP };

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
	if (!cq_has_room(u, e, r))
		return SPECIAL_STOP;
	if (r->op != AFIO_OP_SENDFILE) {
		sqe = get_sqe(u);
		if (!sqe)
			return SPECIAL_STOP;
		prep(u, sqe, r);
		return SPECIAL_PREPARED;
	}
	if (sendfile_inline(u, q))
		return SPECIAL_TAKEN;
	if (get_pipe(u, &u->sendfiles[r->index])) {
		afio_reqq_pop(q);
		if (!wait_for_pipe(e, r))
			afio_route_to_pool(e, r);
		return SPECIAL_TAKEN;
	}
	if (!sendfile_start(u, r)) {
		put_pipe(u, &u->sendfiles[r->index]);
		return SPECIAL_STOP;
	}
	return SPECIAL_PREPARED;
}

/* What waits for SQEs beside new requests, oldest kind first: requests
   going again, the next steps of sendfiles, cancels and retry timers. */
static __attribute__((noinline)) void prep_waiting_now(struct uring *u)
{
	push_again(u);
	push_next_steps(u);
	push_cancels(u);
}

/* Each kind is rare and this runs twice a round: a look, inline, first. */
static inline void prep_waiting(struct uring *u)
{
	if (u->again.head || u->next_steps.head || u->pipe_waiters.head || u->ncancels)
		prep_waiting_now(u);
}

static int uring_submit(struct afio_engine *e, struct afio_reqq *q)
{
	struct uring *u = e->priv;
	struct io_uring_sqe *sqe;
	struct afio_req *r;
	pid_t tid = self_tid();
	int n = 0, ret;

	while ((r = q->head)) {
		if (!u->plain_op[r->op] || r->fd == u->evfd) {
			enum special how = submit_special(e, q, r);

			if (how == SPECIAL_STOP)
				break;
			n++;
			if (how == SPECIAL_TAKEN)
				continue;
		} else {
			if (!cq_has_room(u, e, r) || !(sqe = get_sqe(u)))
				break;
			prep(u, sqe, r);
			n++;
		}
		afio_reqq_pop(q);
		afio_engine_take(e, r);
		u->reqs[r->index] = r;
		u->submitters[r->index] = tid;
	}
	prep_waiting(u);
	ret = push_sq(u);
	/* What is prepared stays in the SQ: a later reap submits it. */
	if (ret == -EBUSY || ret == -EAGAIN)
		ret = 0;
	return n ? n : ret ? ret : q->head ? -EAGAIN : 0;
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

static void cancel_answered(struct uring *u, uint64_t ud, int res);
static void retry_due(struct uring *u, uint32_t index);

static void complete(struct afio_engine *e, const struct io_uring_cqe *cqe)
{
	struct uring *u = e->priv;
	uint64_t ud = io_uring_cqe_get_data64(cqe);
	uint32_t index = (uint32_t)ud & UD_INDEX;
	struct afio_req *r;
	ssize_t res = cqe->res;

	/* One test keeps the request's own CQE off the rarer kinds. */
	if (ud & (UD_CANCEL | UD_RETRY)) {
		if (ud == UD_RESERVED)
			return;		/* liburing's own timeout */
		u->cqes_owed--;
		if (ud & UD_CANCEL)
			cancel_answered(u, ud & ~UD_CANCEL, cqe->res);
		else
			retry_due(u, index);
		return;
	}
	u->cqes_owed--;
	if (index >= u->nslots)
		return;
	r = u->reqs[index];
	if (!r || r->gen != (uint32_t)(ud >> 32))
		return;
	if (r->op == AFIO_OP_SENDFILE) {
		sendfile_cqe(u, r, ud, cqe->res);
		return;
	}
	if (res < 0 && submit_again(u, r, res))
		return;
	if (r->op == AFIO_OP_CONNECT && connect_goes_on(u, r, &res))
		return;
	release_slot(u, r);
	afio_req_done(r, r->cancel ? finish_res(r, res) : res);
}

static unsigned reap_batch(struct afio_engine *e)
{
	struct uring *u = e->priv;
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;

	io_uring_for_each_cqe(&u->ring, head, cqe) {
		complete(e, cqe);
		if (++n == REAP_BATCH)
			break;
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

	for (;;) {
		while (reap_batch(e))
			;
		if (!kernel_holds_more(u) || io_uring_get_events(&u->ring) < 0)
			break;
		if (!io_uring_cq_ready(&u->ring))
			break;
	}
	/* Room in the CQ again: what an -EBUSY left in the SQ can go now. */
	prep_waiting(u);
	push_sq(u);
}

static void queue_cancel(struct uring *u, uint64_t ud);

/* Ask again for every canceled request still in the ring, once the
   earlier asks are answered (uring_wait(): with SQPOLL before each slice,
   else after a slice in which nothing came); a repeated ask for one that
   has already finished is answered -ENOENT and changes nothing. */
static void recancel(struct uring *u)
{
	if (u->ncancels)
		return;
	for (unsigned i = 0; i < u->nslots; i++)
		if (u->reqs[i] && u->reqs[i]->cancel)
			queue_cancel(u, cancel_target(u, u->reqs[i]));
}

/* Sleeps until a CQE is posted (the eventfd is registered with the ring),
   at most timeout_ms, and clears the eventfd for the next one. */
static int wait_on_eventfd(struct afio_engine *e, int timeout_ms)
{
	struct uring *u = e->priv;
	struct pollfd pfd = { .fd = afio_ctx_eventfd(e->ctx), .events = POLLIN };
	uint64_t v;

	if (io_uring_cq_ready(&u->ring))
		return 0;
	if (poll(&pfd, 1, timeout_ms) < 0)
		return -errno;
	(void)!read(pfd.fd, &v, sizeof(v));
	return 0;
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
	prep_waiting(u);
	if (u->dropped)
		return wait_on_eventfd(e, timeout_ms);
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
		push_cancels(u);
		push_sq(u);
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
	uint32_t index = (uint32_t)ud & UD_INDEX;

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
	uint32_t index = (uint32_t)ud & UD_INDEX;

	if (u->retry_armed[index])
		return;
	queue_entry(u, (ud & ~UD_SPLICE_IN) | UD_RETRY);
	u->retry_armed[index] = true;
}

static void retry_due(struct uring *u, uint32_t index)
{
	struct afio_req *r;

	if (index >= u->nslots)
		return;
	u->retry_armed[index] = false;
	r = u->reqs[index];
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
	r = u->reqs[(uint32_t)ud & UD_INDEX];
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

/*
 * The cancel goes to the kernel at once, not at the next afio_poll(): a
 * caller may be waiting on the eventfd for the canceled request.  Without
 * IORING_OP_ASYNC_CANCEL (before 5.5) the request just runs to its end.
 */
static void uring_cancel(struct afio_engine *e, struct afio_req *r)
{
	struct uring *u = e->priv;

	/* Between two steps nothing of it is in the ring: it stops here. */
	if (r->op == AFIO_OP_SENDFILE && !u->sendfiles[r->index].pending) {
		if (afio_reqq_remove(&u->next_steps, r))
			afio_reqq_remove(&u->pipe_waiters, r);
		sendfile_finish(u, r);
		return;
	}
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
	push_cancels(u);
	push_sq(u);
}

/* ---- life cycle ---- */

static void free_uring(struct uring *u)
{
	for (unsigned i = 0; i < u->nspare; i++) {
		close(u->spare_pipes[i][0]);
		close(u->spare_pipes[i][1]);
	}
	free(u->spare_pipes);
	free(u->sendfiles);
	free(u->timespecs);
	free(u->reqs);
	free(u->cancels);
	free(u->cancel_waits);
	free(u->retry_armed);
	free(u->submitters);
	free(u->connect_waits);
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
	find_plain_ops(u);
	for (unsigned op = 0; op < AFIO_OP_COUNT; op++) {
		if (!u->has_op[op])
			afio_engine_lacks_op(e, (enum afio_op)op);
		u->sqe_flags[op] = e->route[op].then == AFIO_RUN_KERNEL_WORKER ?
				   IOSQE_ASYNC : 0;
	}
	u->sendfile_try = e->route[AFIO_OP_SENDFILE].first == AFIO_TRY_CALLER;
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
	u->submitters = calloc(u->nslots, sizeof(*u->submitters));
	u->connect_waits = calloc(u->nslots, sizeof(*u->connect_waits));
	u->retry_after.tv_nsec = RETRY_NS;
	u->timespecs = calloc(u->nslots, sizeof(*u->timespecs));
	u->sendfiles = calloc(u->nslots, sizeof(*u->sendfiles));
	u->spare_pipes = calloc(SPARE_PIPES, sizeof(*u->spare_pipes));
	afio_reqq_init(&u->next_steps);
	afio_reqq_init(&u->pipe_waiters);
	for (unsigned i = 0; u->sendfiles && i < u->nslots; i++)
		u->sendfiles[i].pipe[0] = u->sendfiles[i].pipe[1] = -1;
	afio_reqq_init(&u->again);
	if (!u->reqs || !u->cancels || !u->cancel_waits || !u->retry_armed || !u->submitters ||
	    !u->connect_waits || !u->timespecs || !u->sendfiles || !u->spare_pipes) {
		free_uring(u);
		return -ENOMEM;
	}
	u->mode = cfg->mode;
	u->evfd = afio_ctx_eventfd(e->ctx);
	ret = ring_setup(&u->ring, cfg);
	if (ret) {
		explain(ret, cfg, reason, len);
		free_uring(u);
		return ret;
	}
	u->flags = u->ring.flags;
	u->cq_entries = u->ring.cq.ring_entries;
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
	const struct uring *u = e->priv;
	char flags[128], pooled[256] = "";
	size_t n = 0;

	flag_names(u->flags, flags, sizeof(flags));
	for (int op = 0; op < AFIO_OP_COUNT && n < sizeof(pooled); op++)
		if (!u->has_op[op])
			n += (size_t)snprintf(pooled + n, sizeof(pooled) - n, "%s%s",
					      n ? "," : ", thread pool for ",
					      afio_op_descs[op].name);
	return snprintf(buf, len, "io_uring: sq=%u cq=%u flags=%s, mode %s%s%s%s",
			u->ring.sq.ring_entries, u->cq_entries, flags,
			afio_mode_name(u->mode), pooled,
			u->has_cancel ? "" : ", no in-kernel cancel",
			u->dropped ? ", the kernel dropped completions" : "");
}

static int uring_op_kernel(const struct afio_engine *e, enum afio_op op, char *buf,
			   size_t len)
{
	const struct uring *u = e->priv;
	const struct uring_op *uo = &uring_ops[op];

	if (!u->has_op[op]) {
		afio_reason(buf, len, "IORING_OP_%s is not in this kernel (Linux %s+)",
			    uo->name, uo->since);
		return 0;
	}
	if (op == AFIO_OP_SENDFILE)
		afio_reason(buf, len, "IORING_OP_SPLICE file->pipe->socket");
	else if (op == AFIO_OP_SYNC_RANGE)
		afio_reason(buf, len, "IORING_OP_SYNC_FILE_RANGE; ranges over 4 GiB the pool");
	else if (op == AFIO_OP_STATX)
		afio_reason(buf, len, "IORING_OP_STATX, which the kernel's workers do in "
			    "every mode");
	else
		afio_reason(buf, len, "IORING_OP_%s", uo->name);
	return 1;
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
	.wait = uring_wait,
	.cancel = uring_cancel,
	.describe = uring_describe,
	.op_kernel = uring_op_kernel,
};
