/* SPDX-License-Identifier: MIT */
/*
 * The routing policy (lib/route.h): every rule about what a mode means is
 * here, with its reason.
 */
#include "backend.h"
#include "route.h"

static struct afio_route rt(enum afio_try first, enum afio_run then)
{
	return (struct afio_route){ .first = first, .then = then };
}

/* Ops with a form that never blocks (openat2's RESOLVE_CACHED; close,
   which does not wait for the file's last user): worth a try in the
   caller.  The rest of the one-call ops have none. */
static bool has_nowait_form(enum afio_op op)
{
	return op == AFIO_OP_OPENAT || op == AFIO_OP_OPENAT2 || op == AFIO_OP_CLOSE;
}

/* Ops that wait for the device whatever the cache holds: a try in the
   submitter would only fail first. */
static bool waits_for_device(enum afio_op op)
{
	return op == AFIO_OP_FSYNC || op == AFIO_OP_SYNC_RANGE ||
	       op == AFIO_OP_FALLOCATE || op == AFIO_OP_FTRUNCATE;
}

/*
 * The thread pool.  INLINE tries what has a non-blocking form in the
 * caller; what would block then goes on: a socket waits in the epoll set,
 * holding no worker, anything else takes a worker.  ASYNC gives every
 * request a worker, which blocks in it (waiting for a socket too: that is
 * what ASYNC means on a pool; a read it tries without waiting first,
 * perform_file()).  HYBRID gives every request a worker that
 * tries without blocking first; a socket that would block leaves it for
 * the epoll set.  Timers wait in the poller's deadline heap in every mode.
 *
 * A buffered write the file system will not try without waiting (ext4
 * refuses RWF_NOWAIT there) goes to a worker in INLINE, a hand-off that
 * costs more than the write when the page cache takes it.  With
 * AFIO_CALLER_WRITES the program accepts what pwrite(2) may wait for
 * (dirty-page throttling, the journal) and INLINE makes them in the
 * caller, as libaio's io_submit() and pwrite(2) do.
 */
static struct afio_route pool_route(enum afio_op op, enum afio_mode mode, unsigned flags)
{
	switch (afio_op_kind(op)) {
	case AFIO_KIND_NOP:
		return rt(AFIO_TRY_NONE, AFIO_RUN_CORE);
	case AFIO_KIND_TIMER:
		return rt(AFIO_TRY_NONE, AFIO_RUN_POOL_TIMER);
	case AFIO_KIND_SOCKET:
		if (mode == AFIO_MODE_ASYNC)
			return rt(AFIO_TRY_NONE, AFIO_RUN_POOL);
		return rt(mode == AFIO_MODE_INLINE ? AFIO_TRY_CALLER : AFIO_TRY_WORKER,
			  AFIO_RUN_POOL_READY);
	case AFIO_KIND_FILE_RW:
		if (mode == AFIO_MODE_INLINE && afio_op_writes(op) && (flags & AFIO_CALLER_WRITES))
			return rt(AFIO_TRY_NONE, AFIO_RUN_CALLER);
		if (mode == AFIO_MODE_INLINE)
			return rt(AFIO_TRY_CALLER, AFIO_RUN_POOL);
		return rt(mode == AFIO_MODE_HYBRID ? AFIO_TRY_WORKER : AFIO_TRY_NONE,
			  AFIO_RUN_POOL);
	default:
		if (mode == AFIO_MODE_INLINE && has_nowait_form(op))
			return rt(AFIO_TRY_CALLER, AFIO_RUN_POOL);
		return rt(AFIO_TRY_NONE, AFIO_RUN_POOL);
	}
}

static bool kernel_runs(unsigned caps, enum afio_op op)
{
	switch (afio_op_kind(op)) {
	case AFIO_KIND_NOP:
		return caps & AFIO_CAP_NOP;
	case AFIO_KIND_TIMER:
		return caps & AFIO_CAP_TIMERS;
	case AFIO_KIND_SOCKET:
		return caps & (AFIO_CAP_SOCKETS | AFIO_CAP_READINESS);
	case AFIO_KIND_FILE_RW:
		return caps & (AFIO_CAP_FILES | AFIO_CAP_DIRECT);
	default:
		return caps & (op == AFIO_OP_FSYNC ? AFIO_CAP_FSYNC | AFIO_CAP_SYNC_OPS :
					  AFIO_CAP_SYNC_OPS);
	}
}

/*
 * A kernel that waits for readiness itself (io_uring): INLINE sends no
 * flag, so the kernel tries each request in the submitter and, if it
 * would block, polls (sockets) or hands it to its workers (files).
 * ASYNC sends everything to the kernel's workers at once.  HYBRID sends
 * sockets there (since Linux 5.16 a worker tries without blocking and
 * then waits by poll, holding nothing; before, it blocks as in ASYNC) and
 * what waits for the device anyway, which would only fail a try first;
 * files and paths go without a flag, since a page-cache hit then finishes
 * in the submitter and a miss is read without blocking it: handing them
 * to the workers, always or past a number in flight, measured slower
 * (lib/README.md, "Choices that were measured").  A timer or a nop has
 * nothing for a worker to do.
 *
 * A sendfile is two splices, which the kernel always gives to its
 * workers: no flag in any mode.  In INLINE a range that is all in the
 * page cache goes by sendfile(2) in the caller instead, which costs less
 * than the workers for small files.
 */
static struct afio_route kernel_route(unsigned caps, enum afio_op op, enum afio_mode mode,
				      unsigned flags)
{
	enum afio_op_kind kind = afio_op_kind(op);
	bool workers = caps & AFIO_CAP_WORKERS;

	if (kind == AFIO_KIND_NOP || kind == AFIO_KIND_TIMER)
		return rt(AFIO_TRY_NONE, AFIO_RUN_KERNEL);
	/* A pooled receive on a kernel worker would hold its buffer while it
	   waits for data, which is what the pool is there to avoid; in the
	   submitter the kernel takes a buffer only when data is there.  A
	   poll_fd there would hold a worker only to wait. */
	if ((op == AFIO_OP_RECV_POOL || op == AFIO_OP_POLL_FD) && (caps & AFIO_CAP_SOCKETS))
		return rt(AFIO_TRY_NONE, AFIO_RUN_KERNEL);
	if (op == AFIO_OP_SENDFILE && (caps & AFIO_CAP_SOCKETS))
		return rt(mode == AFIO_MODE_INLINE ? AFIO_TRY_CALLER : AFIO_TRY_NONE,
			  AFIO_RUN_KERNEL);
	/* Linux AIO has readiness and nothing more for sockets: one try
	   first, since a request that fails at once (MSG_OOB without urgent
	   data, an fd that is not a socket) would wait for a readiness that
	   changes nothing.  ASYNC means a worker per request there too. */
	if (kind == AFIO_KIND_SOCKET && !(caps & AFIO_CAP_SOCKETS)) {
		if (mode == AFIO_MODE_ASYNC)
			return pool_route(op, mode, flags);
		return rt(AFIO_TRY_CALLER, AFIO_RUN_KERNEL_READY);
	}
	if (!workers || mode == AFIO_MODE_INLINE)
		return rt(AFIO_TRY_NONE, AFIO_RUN_KERNEL);
	if (mode == AFIO_MODE_ASYNC || kind == AFIO_KIND_SOCKET || waits_for_device(op))
		return rt(AFIO_TRY_NONE, AFIO_RUN_KERNEL_WORKER);
	return rt(AFIO_TRY_NONE, AFIO_RUN_KERNEL);
}

struct afio_route afio_route(unsigned caps, bool kernel_has, enum afio_op op,
			     enum afio_mode mode, unsigned flags)
{
	if (kernel_has && kernel_runs(caps, op))
		return kernel_route(caps, op, mode, flags);
	return pool_route(op, mode, flags);
}

bool afio_route_holds_worker(unsigned caps, enum afio_mode mode)
{
	return afio_route(caps, true, AFIO_OP_RECV, mode, 0).then == AFIO_RUN_POOL;
}

static const char *try_words(struct afio_route r, enum afio_op op)
{
	switch (r.first) {
	case AFIO_TRY_CALLER:
		if (op == AFIO_OP_SENDFILE)
			return "tried in the caller where the range is cached, else ";
		return "tried in the caller without blocking, else ";
	case AFIO_TRY_WORKER:
		return "a worker tries without blocking, else ";
	default:
		return "";
	}
}

static const char *const run_words[] = {
	[AFIO_RUN_CORE] = "the library, at once, no system call",
	[AFIO_RUN_KERNEL] = "the kernel",
	[AFIO_RUN_KERNEL_WORKER] = "the kernel's workers",
	[AFIO_RUN_KERNEL_READY] = "the kernel waits for readiness, the owner moves the bytes",
	[AFIO_RUN_POOL] = "a pool worker",
	[AFIO_RUN_POOL_READY] = "the pool's epoll set",
	[AFIO_RUN_POOL_TIMER] = "the pool's deadline heap",
	[AFIO_RUN_CALLER] = "the caller, which may wait as in pwrite(2) (AFIO_CALLER_WRITES)",
};

/* What one request can find out that bends its route. */
static const char *route_note(struct afio_route r, unsigned caps, enum afio_op op,
			      enum afio_mode mode, unsigned flags)
{
	bool kernel = !afio_route_pooled(r) && r.then != AFIO_RUN_CORE;

	if (kernel && (caps & AFIO_CAP_DIRECT) && afio_op_kind(op) == AFIO_KIND_FILE_RW) {
		if (pool_route(op, mode, flags).then == AFIO_RUN_CALLER)
			return " (aligned O_DIRECT; the rest in io_submit(), which may wait "
			       "(AFIO_CALLER_WRITES))";
		return " (aligned O_DIRECT; the rest the pool)";
	}
	if (op == AFIO_OP_SENDFILE && r.then == AFIO_RUN_KERNEL_READY)
		return " (a range not all cached: the pool)";
	if ((op == AFIO_OP_OPENAT || op == AFIO_OP_OPENAT2) && r.first == AFIO_TRY_CALLER)
		return " (the try with RESOLVE_CACHED)";
	if (afio_route_pooled(r) && (caps & AFIO_CAP_READINESS) &&
	    afio_op_kind(op) == AFIO_KIND_SOCKET)
		return " (ASYNC: a worker for each socket request)";
	if ((op == AFIO_OP_ACCEPT || op == AFIO_OP_CONNECT) && r.first != AFIO_TRY_NONE)
		return " (an O_NONBLOCK socket; else a worker)";
	return "";
}

void afio_route_describe(struct afio_route r, unsigned caps, enum afio_op op,
			 enum afio_mode mode, unsigned flags, const char *kernel, char *buf,
			 size_t len)
{
	/* A close whose try never says "would block" (close(2) does not
	   wait for other users of the file): there is no else. */
	if (op == AFIO_OP_CLOSE && r.first == AFIO_TRY_CALLER) {
		afio_reason(buf, len, "the caller");
		return;
	}
	afio_reason(buf, len, "%s%s%s%s%s%s", try_words(r, op), run_words[r.then],
		    kernel ? " (" : "", kernel ? kernel : "", kernel ? ")" : "",
		    route_note(r, caps, op, mode, flags));
}
