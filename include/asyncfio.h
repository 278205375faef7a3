/* SPDX-License-Identifier: MIT */
/*
 * libasyncfio: asynchronous file and socket I/O on Linux over io_uring,
 * Linux AIO or a thread pool, chosen at run time.
 *
 * Conventions: calls that can fail return 0 (or a count) on success and
 * -errno on failure; nothing sets errno.  A context is used by one thread at
 * a time; use one context per thread.  A context belongs to the process
 * that created it: in a child after fork() every call on it fails with
 * -ECHILD, and afio_destroy() frees only the child's copy.
 */
#ifndef ASYNCFIO_H
#define ASYNCFIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define AFIO_API __attribute__((visibility("default")))
#else
#define AFIO_API
#endif

/* The version of this header; afio_version() gives the library's. */
#define AFIO_VERSION_MAJOR	0
#define AFIO_VERSION_MINOR	3
#define AFIO_VERSION_PATCH	0
#define AFIO_VERSION_NUM(major, minor, patch) (((major) << 16) | ((minor) << 8) | (patch))
#define AFIO_VERSION \
	AFIO_VERSION_NUM(AFIO_VERSION_MAJOR, AFIO_VERSION_MINOR, AFIO_VERSION_PATCH)

typedef struct afio_ctx afio_ctx;

/* Only pointed to: <linux/openat2.h> and <sys/stat.h> define them. */
struct open_how;
struct statx;

enum afio_backend {
	AFIO_BACKEND_AUTO,	/* io_uring, else libaio, else threads */
	AFIO_BACKEND_IO_URING,
	AFIO_BACKEND_LIBAIO,
	AFIO_BACKEND_THREADS,
};

enum afio_mode {
	AFIO_MODE_INLINE,	/* try without blocking first, then hand on */
	AFIO_MODE_ASYNC,	/* a worker does every request, blocking */
	AFIO_MODE_HYBRID,	/* a worker tries without blocking, then waits by readiness */
};

/* struct afio_config.flags */
#define AFIO_NO_FALLBACK	(1u << 0) /* the asked backend or an error, never another */
#define AFIO_SQPOLL		(1u << 1) /* io_uring: a kernel thread polls the ring */
#define AFIO_MODE_FIXED		(1u << 2) /* cfg.mode is the program's: AFIO_MODE is ignored */
#define AFIO_LAZY_EVENTFD	(1u << 3) /* afio_eventfd() stays readable while afio_poll() finds work */
#define AFIO_NONBLOCKING_SOCKETS (1u << 4) /* the program's promise: its sockets are O_NONBLOCK and
					     SIGPIPE is ignored, so sendfile is one sendfile(2) */
#define AFIO_CALLER_WRITES	(1u << 5) /* INLINE: buffered file writes are made in the caller,
					     which may wait in them as in pwrite(2) */
#define AFIO_LEVEL_EVENTFD	(1u << 6) /* afio_eventfd() is watched level-triggered: kept
					     readable while work waits, not written again */

/* afio_fsync() flags */
#define AFIO_FSYNC_DATASYNC	(1u << 0) /* fdatasync(2) instead of fsync(2) */

/*
 * Both structures may grow at their end in later versions.  A program
 * says how large they were when it was compiled: afio_config_init() and
 * afio_stats() are macros that pass sizeof, and afio_config_init() keeps
 * it in size, which afio_create() reads.  The library then touches no
 * byte beyond it, and takes a field it does not know only when it is 0.
 */
struct afio_config {
	enum afio_backend backend;	/* default AUTO */
	enum afio_mode mode;		/* default INLINE */
	unsigned entries;		/* requests queued or in flight at most (default 256) */
	unsigned threads;		/* thread-pool workers (default 4; 0: sized for the
					   mode, see afio_limits()), AFIO_MAX_THREADS at most */
	unsigned flags;			/* AFIO_NO_FALLBACK, AFIO_SQPOLL, AFIO_MODE_FIXED, ... */
	unsigned ring_entries;		/* io_uring submission ring size (0: min(entries, 256)) */
	unsigned size;			/* set by afio_config_init(); 0: as in version 0.1 */
	/* Socket requests the program keeps waiting at once at most (0:
	   entries): where each holds a pool worker, threads 0 gives one
	   worker each. */
	unsigned socket_waits;
	unsigned reserved[6];		/* zero */
};

#define AFIO_MAX_THREADS	1024

/* What a context can hold at once (afio_limits()). */
struct afio_limits {
	unsigned entries;	/* requests queued or in flight */
	unsigned threads;	/* the thread pool's workers, once it runs */
	/* Socket requests that can wait for their peer at once without
	   keeping others waiting: entries, but threads where each waiting
	   one holds a pool worker (ASYNC on the threads and libaio
	   backends).  A server takes no more connections than this. */
	unsigned socket_waits;
	unsigned reserved[5];
};

struct afio_stats {
	uint64_t submitted;	/* requests accepted by afio_read() and friends */
	uint64_t completed;	/* callbacks run */
	uint64_t in_flight;	/* accepted and not yet completed */
	uint64_t fallbacks;	/* requests the backend handed to the thread pool */
	uint64_t canceled;	/* completed with -ECANCELED */
	uint64_t nowait;	/* finished at once, without waiting (INLINE mode) */
	uint64_t reserved[6];
};

/*
 * Completion callback.  res: bytes transferred (0 at end of file or when the
 * peer closed), or -errno.  Runs inside afio_poll() (or afio_destroy()),
 * never elsewhere and never on another thread.  It may queue new requests
 * and cancel others; afio_poll() from a callback fails with -EBUSY.
 * afio_destroy() from a callback of afio_poll() destroys the context when
 * that afio_poll() returns (the context must not be used after it), and
 * from a callback that afio_destroy() runs it does nothing more.
 */
typedef void (*afio_cb)(void *data, ssize_t res);

/* ---- contexts ---- */

/* The running library's version, AFIO_VERSION_NUM() of it. */
AFIO_API unsigned afio_version(void);

AFIO_API void afio_config_init(struct afio_config *cfg);
/* cfg's defaults, for a structure of size bytes (afio_config_init()). */
AFIO_API void afio_config_init_sized(struct afio_config *cfg, size_t size);
#define afio_config_init(cfg) afio_config_init_sized((cfg), sizeof(struct afio_config))

/* cfg may be NULL for the defaults.  The environment (AFIO_BACKEND,
   AFIO_MODE) overrides a backend or mode left at its default, the mode
   only without AFIO_MODE_FIXED. */
AFIO_API int afio_create(afio_ctx **ctx, const struct afio_config *cfg);

/* Cancels everything in flight, runs each pending callback exactly once
   (-ECANCELED or its real result), then frees the context.  In a child
   after fork() it runs no callback: the requests are the parent's. */
AFIO_API void afio_destroy(afio_ctx *ctx);

AFIO_API enum afio_backend afio_backend(const afio_ctx *ctx);
AFIO_API enum afio_mode afio_mode(const afio_ctx *ctx);
AFIO_API const char *afio_backend_name(enum afio_backend b);
AFIO_API const char *afio_mode_name(enum afio_mode m);

/* Parse "io_uring"/"libaio"/"threads"/"auto" or "inline"/"async"/"hybrid";
   -EINVAL for anything else. */
AFIO_API int afio_backend_parse(const char *name, enum afio_backend *b);
AFIO_API int afio_mode_parse(const char *name, enum afio_mode *m);

/* 0 when backend b can run here; else -errno and a one-line reason. */
AFIO_API int afio_probe(enum afio_backend b, char *reason, size_t reason_len);

/* Why backend b was skipped when this context was created ("" if it was
   not tried or not skipped). */
AFIO_API const char *afio_skip_reason(const afio_ctx *ctx, enum afio_backend b);

/* Fills *lim for ctx, in the backend and mode in force; 0 or -EINVAL. */
AFIO_API int afio_limits(const afio_ctx *ctx, struct afio_limits *lim);

/* One line on how the running backend is set up (ring sizes, setup flags,
   workers); returns its length or -errno. */
AFIO_API int afio_describe(const afio_ctx *ctx, char *buf, size_t len);

AFIO_API int afio_stats(const afio_ctx *ctx, struct afio_stats *st);
/* Fills the first size bytes of *st (afio_stats()). */
AFIO_API int afio_stats_sized(const afio_ctx *ctx, struct afio_stats *st, size_t size);
#define afio_stats(ctx, st) afio_stats_sized((ctx), (st), sizeof(struct afio_stats))

/* ---- queueing requests ---- */

/*
 * What every queueing call below has in common: nothing reaches the
 * kernel before afio_submit() or afio_poll(); -errno at once for bad
 * arguments (NULL pointers and callbacks -EINVAL, negative fds -EBADF, a
 * dirfd may be AT_FDCWD); the result or -errno of the Linux call of the
 * same name through the callback, exactly once; canceled by data or by
 * handle.  -EAGAIN when `entries` requests are queued or in flight,
 * -ESHUTDOWN from a callback once afio_destroy() was called.
 * Everything a request points to (paths, msghdr and its iovecs, statx
 * buffers, addresses, struct open_how) stays the caller's and must stay
 * valid until the callback runs.  RWF_NOWAIT and MSG_DONTWAIT: -EINVAL.
 * Where each op runs on each backend: afio_op_native(), asyncfio(7).
 */

/* ---- files ---- */

/* For files and block devices; on a pipe or socket io_uring reads or
   writes as read(2) and write(2) would, the other backends give -ESPIPE
   (afio_read(3)).  -EINVAL also for a negative or too large iovec count,
   a length over SSIZE_MAX or an offset over INT64_MAX. */
AFIO_API int afio_read(afio_ctx *ctx, int fd, void *buf, size_t len, uint64_t off,
		       afio_cb cb, void *data);
AFIO_API int afio_write(afio_ctx *ctx, int fd, const void *buf, size_t len, uint64_t off,
			afio_cb cb, void *data);
AFIO_API int afio_readv(afio_ctx *ctx, int fd, const struct iovec *iov, int cnt, uint64_t off,
			afio_cb cb, void *data);
AFIO_API int afio_writev(afio_ctx *ctx, int fd, const struct iovec *iov, int cnt, uint64_t off,
			 afio_cb cb, void *data);
AFIO_API int afio_fsync(afio_ctx *ctx, int fd, unsigned flags, afio_cb cb, void *data);

/* rwf: RWF_HIPRI, RWF_DSYNC, RWF_SYNC, RWF_APPEND, ... as for preadv2(2)
   and pwritev2(2) (RWF_HIPRI is a hint: where the device is not polled
   the I/O is done as without it), and AFIO_RWF_BUFFERED. */
/* The program's word that fd is not O_DIRECT for this request: libaio and
   the pool route it without asking the kernel (fcntl(F_GETFL)), as
   afio_fd_hint()'s AFIO_FD_BUFFERED does for every request on an fd.  A
   wrong word costs waiting, never data.  Not passed to the kernel. */
#define AFIO_RWF_BUFFERED	(1 << 29)
AFIO_API int afio_readv2(afio_ctx *ctx, int fd, const struct iovec *iov, int cnt, uint64_t off,
			 int rwf, afio_cb cb, void *data);
AFIO_API int afio_writev2(afio_ctx *ctx, int fd, const struct iovec *iov, int cnt, uint64_t off,
			  int rwf, afio_cb cb, void *data);
AFIO_API int afio_fallocate(afio_ctx *ctx, int fd, int mode, uint64_t off, uint64_t len,
			    afio_cb cb, void *data);
AFIO_API int afio_ftruncate(afio_ctx *ctx, int fd, uint64_t len, afio_cb cb, void *data);
/* sync_file_range(2); flags: SYNC_FILE_RANGE_*. */
AFIO_API int afio_sync_range(afio_ctx *ctx, int fd, uint64_t off, uint64_t len, unsigned flags,
			     afio_cb cb, void *data);

/* The alignment O_DIRECT I/O on fd needs: statx STATX_DIOALIGN, else the
   device's logical block size.  Synchronous and cheap; 0 or -errno
   (-EOPNOTSUPP: the file system does no direct I/O on this file). */
struct afio_dio_align {
	uint32_t mem;		/* buffer address */
	uint32_t offset;	/* file offset and length */
};
AFIO_API int afio_dio_align(int fd, struct afio_dio_align *out);

/*
 * The program's word on how fd is opened, so that file requests on it
 * skip the fcntl(F_GETFL) (and, for O_DIRECT, the statx) a submit call on
 * libaio or the pool otherwise makes per fd to route them.  Checked
 * against the fd when given; it holds until hint 0 drops it or
 * afio_close() closes fd.  A hint left on a closed and reused fd number
 * costs waiting, never data (afio_fd_hint(3)).
 */
#define AFIO_FD_BUFFERED	(1u << 0) /* not O_DIRECT, and F_SETFL will not make it so */
#define AFIO_FD_DIRECT		(1u << 1) /* O_DIRECT, and stays so: its alignment is kept */
AFIO_API int afio_fd_hint(afio_ctx *ctx, int fd, unsigned hint);

/* ---- paths ---- */

/* res: the new fd. */
AFIO_API int afio_openat(afio_ctx *ctx, int dirfd, const char *path, int flags, mode_t mode,
			 afio_cb cb, void *data);
AFIO_API int afio_openat2(afio_ctx *ctx, int dirfd, const char *path, const struct open_how *how,
			  afio_cb cb, void *data);
AFIO_API int afio_close(afio_ctx *ctx, int fd, afio_cb cb, void *data);
/* flags: AT_*; mask: STATX_*; stx is filled in when res is 0. */
AFIO_API int afio_statx(afio_ctx *ctx, int dirfd, const char *path, int flags, unsigned mask,
			struct statx *stx, afio_cb cb, void *data);
/* flags: RENAME_NOREPLACE, RENAME_EXCHANGE, ... (renameat2(2)). */
AFIO_API int afio_renameat(afio_ctx *ctx, int olddirfd, const char *oldpath, int newdirfd,
			   const char *newpath, unsigned flags, afio_cb cb, void *data);
AFIO_API int afio_unlinkat(afio_ctx *ctx, int dirfd, const char *path, int flags,
			   afio_cb cb, void *data);
AFIO_API int afio_mkdirat(afio_ctx *ctx, int dirfd, const char *path, mode_t mode,
			  afio_cb cb, void *data);

/* ---- sockets ---- */

/* flags: the MSG_* of recv(2)/send(2), the same on every backend.
   -EINVAL for MSG_DONTWAIT (a request waits for readiness; afio_cancel()
   gives up on it) and for MSG_WAITALL with MSG_PEEK or on a socket that is
   not SOCK_STREAM.  MSG_WAITALL goes on until the whole length, the end of
   the stream, an error or a cancel, and then gives the bytes it has. */
AFIO_API int afio_recv(afio_ctx *ctx, int fd, void *buf, size_t len, int flags,
		       afio_cb cb, void *data);
AFIO_API int afio_send(afio_ctx *ctx, int fd, const void *buf, size_t len, int flags,
		       afio_cb cb, void *data);
/* res: the new fd.  flags: SOCK_NONBLOCK and SOCK_CLOEXEC only. */
AFIO_API int afio_accept(afio_ctx *ctx, int fd, int flags, afio_cb cb, void *data);
/* res: 0 once connected. */
AFIO_API int afio_connect(afio_ctx *ctx, int fd, const struct sockaddr *addr, socklen_t len,
			  afio_cb cb, void *data);
/* flags: MSG_*; MSG_WAITALL is refused (-EINVAL).  recvmsg writes back
   msg_flags and msg_controllen (SCM_RIGHTS and the rest). */
AFIO_API int afio_sendmsg(afio_ctx *ctx, int fd, const struct msghdr *msg, int flags,
			  afio_cb cb, void *data);
AFIO_API int afio_recvmsg(afio_ctx *ctx, int fd, struct msghdr *msg, int flags,
			  afio_cb cb, void *data);

/* ---- sendfile ---- */

/* len bytes of file_fd from off to the socket, without a copy through
   user memory; the file position is left alone.  res: bytes sent, which
   may be fewer than len (send the rest with another request). */
AFIO_API int afio_sendfile(afio_ctx *ctx, int sock_fd, int file_fd, uint64_t off, size_t len,
			   afio_cb cb, void *data);

/* ---- timers and no-ops ---- */

/* res: -ETIME after ns nanoseconds (CLOCK_MONOTONIC), -ECANCELED when
   canceled.  The expiry makes afio_eventfd() readable like any completion. */
AFIO_API int afio_timeout(afio_ctx *ctx, uint64_t ns, afio_cb cb, void *data);

/* A request that does nothing and completes with res 0: a
   way to wake the loop that watches afio_eventfd(), and the measure of
   what a request costs.  It waits for no other request. */
AFIO_API int afio_nop(afio_ctx *ctx, afio_cb cb, void *data);
/* Completes once fd is ready for one of events (POLLIN, POLLOUT, ...):
   res is the poll(2) revents, or -errno.  A loop that waits inside
   afio_poll() puts its own epoll fd here.  afio_poll_fd(3). */
AFIO_API int afio_poll_fd(afio_ctx *ctx, int fd, unsigned events, afio_cb cb, void *data);

/* ---- buffer pools and multishot requests ---- */

/*
 * A pool holds count buffers of size bytes, owned by the context.  A
 * receive from a pool waits for data holding no buffer; when data comes
 * the library reads it into a free buffer of the pool and hands that
 * buffer to the callback, which owns it until afio_buf_release().  A
 * multishot request keeps delivering: each callback but the last has
 * AFIO_CQE_MORE, and exactly one last callback (an error, the end of the
 * stream, a cancel) ends it.  afio_bufpool_create(3), afio_recv_pooled(3).
 */
#define AFIO_MAX_BUFPOOLS	8
#define AFIO_MAX_POOL_BUFS	65536

/* flags of an afio_ecb */
#define AFIO_CQE_MORE		(1u << 0) /* more completions of this request follow */
#define AFIO_CQE_BUFFER		(1u << 1) /* res bytes are in buffer afio_cqe_buf(flags) */
#define AFIO_CQE_BUF_SHIFT	16
static inline unsigned afio_cqe_buf(unsigned flags)
{
	return flags >> AFIO_CQE_BUF_SHIFT;
}

/* The callback of a request that may complete more than once, or with a
   pool buffer. */
typedef void (*afio_ecb)(void *data, ssize_t res, unsigned flags);

/* how of afio_recv_pooled() */
#define AFIO_RECV_MULTISHOT	(1u << 0) /* keep receiving until the last completion */
#define AFIO_RECV_BUF_NOWAIT	(1u << 1) /* an empty pool completes with -ENOBUFS */

/* A pool of count buffers of size bytes; *pool gets its number. */
AFIO_API int afio_bufpool_create(afio_ctx *ctx, unsigned count, size_t size, unsigned *pool);
/* Buffer id of pool, or NULL when there is no such buffer. */
AFIO_API void *afio_buf(const afio_ctx *ctx, unsigned pool, unsigned id);
/* Gives a buffer the program holds back to its pool: -EALREADY when the
   program does not hold it (given back twice, or never taken). */
AFIO_API int afio_buf_release(afio_ctx *ctx, unsigned pool, unsigned id);
/* recv(2) into a buffer of pool once data is there.  res: bytes, with
   AFIO_CQE_BUFFER (none when res is 0 or -errno). */
AFIO_API int afio_recv_pooled(afio_ctx *ctx, int fd, unsigned pool, int flags, unsigned how,
			      afio_ecb cb, void *data);
/* afio_accept() that goes on accepting: res is each new fd, with
   AFIO_CQE_MORE, until an error or a cancel ends it. */
AFIO_API int afio_accept_multishot(afio_ctx *ctx, int fd, int flags, afio_ecb cb, void *data);

/* ---- running, waiting and canceling ---- */

/* Hand queued requests over to the backend; returns how many went. */
AFIO_API int afio_submit(afio_ctx *ctx);

/* Submits what is queued, waits until at least min_complete requests are
   done, nothing is left in flight, or timeout_ms passed (-1: no limit, 0:
   do not wait), runs the callbacks of the finished ones and returns how
   many ran.  -EBUSY when called from a callback. */
AFIO_API int afio_poll(afio_ctx *ctx, unsigned min_complete, int timeout_ms);

/* Non-blocking eventfd, readable while completions wait for afio_poll().
   Owned by the context: do not read or close it. */
AFIO_API int afio_eventfd(afio_ctx *ctx);

/* Every request queued with `data` completes with -ECANCELED unless it
   finishes first.  Returns how many requests matched, -ENOENT if none. */
AFIO_API int afio_cancel(afio_ctx *ctx, void *data);

/* Names one request of a context; 0 names none. */
typedef uint64_t afio_handle;

/* The handle of the request the latest successful queueing call on ctx
   accepted; 0 before the first. */
AFIO_API afio_handle afio_last_handle(const afio_ctx *ctx);

/* Cancel the request h names, in O(1): it completes with -ECANCELED
   unless it finishes first.  0 when asked (a multishot request whose
   result waits for its callback gets that callback, AFIO_CQE_MORE, then
   -ECANCELED); -EALREADY when its result is known (or its cancel was
   asked) and its callback is still to run; -ENOENT when no such request
   is in flight (it completed, its slot serves another since, or h was
   never issued in a slot ctx has); -EINVAL for 0 or a slot ctx does not
   have. */
AFIO_API int afio_cancel_handle(afio_ctx *ctx, afio_handle h);

/* ---- the op table ---- */

/* The ops by number, 0 up to afio_op_count() - 1, for tools that list
   them: the call's name without "afio_" ("read", "sendfile", ...);
   afio_readv2() and afio_writev2() are the readv and writev ops. */
AFIO_API unsigned afio_op_count(void);
AFIO_API const char *afio_op_name(unsigned op);
/* 1 when ctx's backend runs op natively, 0 when it hands it to the thread
   pool (counted in stats.fallbacks), -EINVAL for no such op.  how gets
   one line on how or why not, e.g. "IORING_OP_FTRUNCATE: not in this
   kernel (Linux 6.9+)"; it may be NULL. */
AFIO_API int afio_op_native(const afio_ctx *ctx, unsigned op, char *how, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* ASYNCFIO_H */
