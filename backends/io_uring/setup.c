/* SPDX-License-Identifier: MIT */
/*
 * Setting up a ring, and saying why it could not be; what this kernel can
 * do; the engine's memory, its teardown, and the line that describes it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/uio.h>

#include "uring.h"

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
#ifndef RWF_NOSIGNAL
#define RWF_NOSIGNAL			0x00000100	/* Linux 6.18 */
#endif

#define MAX_RING	32768u		/* the kernel's IORING_MAX_ENTRIES */
#define MAX_CQ		(2 * MAX_RING)	/* and its IORING_MAX_CQ_ENTRIES */

/*
 * Setup flags we ask for, oldest first: on EINVAL the newest one still
 * asked for is dropped and the setup tried again.
 *
 * SINGLE_ISSUER and DEFER_TASKRUN are left out on purpose: they bind the
 * ring to one task, and a context may be created on one thread and later
 * handed to another (one thread at a time), which they would turn into
 * -EEXIST from io_uring_enter, and DEFER_TASKRUN signals the eventfd for
 * deferred work that is not a completion, for 10-19% less CPU where the
 * kernel's workers do the work and nothing elsewhere (lib/README.md,
 * "Choices that were measured").
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
	uint64_t want = (uint64_t)(cfg->entries ? cfg->entries : 256) + CQE_EXTRA + CQE_SPARE;
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

int uring_probe(const struct afio_config *cfg, char *reason, size_t len)
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

/* ---- life cycle ---- */

static void free_uring(struct uring *u)
{
	for (unsigned i = 0; i < u->nspare; i++) {
		close(u->spare_pipes[i].fd[0]);
		close(u->spare_pipes[i].fd[1]);
	}
	munmap(u->io, u->io_map_len);
	free(u);
}

/*
 * The engine and its slots in one block, touched as requests use them.
 * The timer and sendfile state, the cancel list and the spare pipes in a
 * mapping of their own, all zero to start with: its pages are made only
 * where those are used, so that a context with many entries, most of them
 * connections that wait, holds 16 bytes per entry here.
 */
static struct uring *alloc_uring(unsigned nslots)
{
	struct uring *u;
	size_t io = (size_t)nslots * sizeof(*u->io);
	size_t cancels = 2 * (size_t)nslots * sizeof(*u->cancels);
	size_t len = io + cancels + (size_t)nslots * sizeof(*u->spare_pipes);
	void *map;

	map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED)
		return NULL;
	u = calloc(1, sizeof(*u) + (size_t)nslots * sizeof(*u->slots));
	if (!u) {
		munmap(map, len);
		return NULL;
	}
	u->nslots = nslots;
	u->io = map;
	u->io_map_len = len;
	u->cancels = (uint64_t *)((char *)map + io);
	u->spare_pipes = (struct spare_pipe *)((char *)u->cancels + cancels);
	return u;
}

static void attach(struct afio_engine *e, struct uring *u)
{
	probe_ops(u);
	find_plain_ops(u);
	for (unsigned op = 0; op < AFIO_OP_COUNT; op++) {
		if (!u->has_op[op])
			afio_engine_lacks_op(e, (enum afio_op)op);
		u->sqe_flags[op] = e->route[op].then == AFIO_RUN_KERNEL_WORKER ?
				   IOSQE_ASYNC : 0;
	}
	u->sendfile_try = e->route[AFIO_OP_SENDFILE].first == AFIO_TRY_CALLER;
	u->native_accept = true;
	u->native_recv = true;
	u->write_rwf = nosignal_rwf();
}

/*
 * Before 5.18 registering an eventfd quiesced the ring: the call waited
 * for every request in flight, so a late one, with a receive waiting,
 * would hang the caller.  Such a kernel has it from init, as before.
 * COOP_TASKRUN (5.19) tells a kernel that registers it without waiting.
 */
static bool late_eventfd_is_safe(const struct uring *u)
{
	return u->flags & IORING_SETUP_COOP_TASKRUN;
}

/*
 * The kernel signals a registered eventfd at every flush of completions,
 * which costs a program that waits only inside afio_poll() (whose wait is
 * io_uring_enter) an eventfd write per flush, and a wake-up of whatever
 * polls it: so the eventfd is registered only once something watches it.
 * The core reaps after this and before it relies on the eventfd, so a CQE
 * posted before the registration is not missed.
 */
int uring_watch_eventfd(struct afio_engine *e)
{
	struct uring *u = e->priv;
	int ret;

	if (u->evfd_watched)
		return 0;
	ret = io_uring_register_eventfd(&u->ring, u->evfd);
	if (ret)
		return ret;
	u->evfd_watched = true;
	return 0;
}

int uring_init(struct afio_engine *e, const struct afio_config *cfg,
	       char *reason, size_t len)
{
	struct uring *u;
	int ret;

	u = alloc_uring(afio_ctx_entries(e->ctx));
	if (!u)
		return -ENOMEM;
	u->retry_after.tv_nsec = RETRY_NS;
	afio_reqq_init(&u->again);
	afio_reqq_init(&u->next_steps);
	afio_reqq_init(&u->pipe_waiters);
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
	attach(e, u);
	e->priv = u;
	if (!late_eventfd_is_safe(u)) {
		ret = uring_watch_eventfd(e);
		if (ret) {
			afio_reason(reason, len, "io_uring_register_eventfd: %s", strerror(-ret));
			uring_exit(e);
			return ret;
		}
	}
	return 0;
}

void uring_exit(struct afio_engine *e)
{
	struct uring *u = e->priv;

	io_uring_queue_exit(&u->ring);
	uring_bufrings_free(u);
	free_uring(u);
	e->priv = NULL;
}

/*
 * In a child of fork() the ring is the parent's.  io_uring_queue_exit()
 * does no more than unmap this process's view of it and close this
 * process's copy of the fd (it would also unregister a registered ring
 * fd, which we never register): no io_uring_enter, nothing the parent's
 * requests notice.  Left mapped, the view would keep the ring's memory
 * alive after the parent closed it.  The pipes of sendfiles in flight are
 * copies too, which would keep the parent's pipes open (taken and put
 * only inside calls on the context, like libaio's socket holds).
 */
void uring_forget(struct afio_engine *e)
{
	struct uring *u = e->priv;

	for (unsigned i = 0; u->pipes_out && i < u->nslots; i++) {
		struct sendfile_state *sf = &u->io[i].sendfile;

		if (sf->pipe_size) {
			close(sf->pipe[0]);
			close(sf->pipe[1]);
			u->pipes_out--;
		}
	}
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

int uring_describe(const struct afio_engine *e, char *buf, size_t len)
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
