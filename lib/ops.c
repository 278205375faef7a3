/* SPDX-License-Identifier: MIT */
/*
 * Request intake: one public wrapper per op, which checks its arguments and
 * fills a slot, and the table that says what kind of op each is.  Nothing
 * here knows which backend runs the context.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include "context.h"

const struct afio_op_desc afio_op_descs[AFIO_OP_COUNT] = {
	[AFIO_OP_READ] = { "read", AFIO_KIND_FILE_RW, 0 },
	[AFIO_OP_WRITE] = { "write", AFIO_KIND_FILE_RW, 0 },
	[AFIO_OP_READV] = { "readv", AFIO_KIND_FILE_RW, 0 },
	[AFIO_OP_WRITEV] = { "writev", AFIO_KIND_FILE_RW, 0 },
	[AFIO_OP_FSYNC] = { "fsync", AFIO_KIND_SYNC, 0 },
	[AFIO_OP_RECV] = { "recv", AFIO_KIND_SOCKET, POLLIN },
	[AFIO_OP_SEND] = { "send", AFIO_KIND_SOCKET, POLLOUT },
	[AFIO_OP_ACCEPT] = { "accept", AFIO_KIND_SOCKET, POLLIN },
	[AFIO_OP_CONNECT] = { "connect", AFIO_KIND_SOCKET, POLLOUT },
	[AFIO_OP_SENDMSG] = { "sendmsg", AFIO_KIND_SOCKET, POLLOUT },
	[AFIO_OP_RECVMSG] = { "recvmsg", AFIO_KIND_SOCKET, POLLIN },
	[AFIO_OP_SENDFILE] = { "sendfile", AFIO_KIND_SOCKET, POLLOUT },
	[AFIO_OP_TIMEOUT] = { "timeout", AFIO_KIND_TIMER, 0 },
	[AFIO_OP_OPENAT] = { "openat", AFIO_KIND_SYNC, 0 },
	[AFIO_OP_OPENAT2] = { "openat2", AFIO_KIND_SYNC, 0 },
	[AFIO_OP_CLOSE] = { "close", AFIO_KIND_SYNC, 0 },
	[AFIO_OP_STATX] = { "statx", AFIO_KIND_SYNC, 0 },
	[AFIO_OP_FALLOCATE] = { "fallocate", AFIO_KIND_SYNC, 0 },
	[AFIO_OP_FTRUNCATE] = { "ftruncate", AFIO_KIND_SYNC, 0 },
	[AFIO_OP_SYNC_RANGE] = { "sync_range", AFIO_KIND_SYNC, 0 },
	[AFIO_OP_RENAMEAT] = { "renameat", AFIO_KIND_SYNC, 0 },
	[AFIO_OP_UNLINKAT] = { "unlinkat", AFIO_KIND_SYNC, 0 },
	[AFIO_OP_MKDIRAT] = { "mkdirat", AFIO_KIND_SYNC, 0 },
	[AFIO_OP_NOP] = { "nop", AFIO_KIND_NOP, 0 },
	[AFIO_OP_RECV_POOL] = { "recv_pooled", AFIO_KIND_SOCKET, POLLIN },
	[AFIO_OP_POLL_FD] = { "poll_fd", AFIO_KIND_SOCKET, 0 },
};

unsigned afio_op_count(void)
{
	return AFIO_OP_COUNT;
}

const char *afio_op_name(unsigned op)
{
	return op < AFIO_OP_COUNT ? afio_op_descs[op].name : NULL;
}

/*
 * The line is the route's (lib/route.c) with the kernel's name for the call
 * where the kernel runs it, or why the kernel has none where a request that
 * it promises goes to the pool.  The threads backend is the pool: nothing
 * it runs is handed on.
 */
int afio_op_native(const afio_ctx *ctx, unsigned op, char *how, size_t len)
{
	const struct afio_engine *e;
	struct afio_route rt;
	char kernel[96] = "", line[256];
	bool pooled, has = false;
	int ret = afio_ctx_check(ctx);

	if (ret)
		return ret;
	if (op >= AFIO_OP_COUNT)
		return -EINVAL;
	e = &ctx->primary;
	rt = e->route[op];
	pooled = afio_route_pooled(rt) && e->ops->caps;
	if (e->ops->op_kernel)
		has = e->ops->op_kernel(e, (enum afio_op)op, kernel, sizeof(kernel)) > 0;
	afio_route_describe(rt, e->ops->caps, (enum afio_op)op, afio_ctx_mode(ctx),
			    afio_ctx_flags(ctx), has && !pooled ? kernel : NULL, line,
			    sizeof(line));
	if (pooled && !has && kernel[0])
		afio_reason(how, len, "%s: %s", line, kernel);
	else
		afio_reason(how, len, "%s", line);
	return !pooled;
}

/* ---- slots ---- */

static struct afio_req *get_slot(struct afio_ctx *ctx, int *err)
{
	struct afio_req *r;

	if (ctx->closing) {
		*err = -ESHUTDOWN;
		return NULL;
	}
	r = ctx->free_slots;
	if (r) {
		ctx->free_slots = r->next;
		return r;
	}
	/* Freed slots first, the lowest never used next: slots_used is
	   where that part begins (init_slots()). */
	if (ctx->slots_used == ctx->cfg.entries) {
		*err = -EAGAIN;
		return NULL;
	}
	r = &ctx->slots[ctx->slots_used];
	r->index = ctx->slots_used++;
	r->ctx = ctx;
	return r;
}

/* A slot for op with everything but its arguments set; NULL and *err when
   none is free. */
static inline __attribute__((always_inline)) struct afio_req *
new_req(struct afio_ctx *ctx, enum afio_op op, int fd, afio_cb cb, void *data, int *err)
{
	struct afio_req *r = get_slot(ctx, err);

	if (!r)
		return NULL;
	memset(&r->buf, 0, offsetof(struct afio_req, op) - offsetof(struct afio_req, buf));
	r->gen++;
	ctx->last = r;
	r->op = op;
	r->fd = fd;
	r->fd2 = -1;
	r->cb = cb;
	r->data = data;
	r->cancel = 0;
	return r;
}

static int enqueue(struct afio_ctx *ctx, struct afio_req *r)
{
	r->state = AFIO_REQ_QUEUED;
	afio_reqq_push(&ctx->queue, r);
	ctx->st.submitted++;
	return 0;
}

/* ---- argument checks ---- */

/* has_cb: the callback, of either type, is not NULL. */
static int check_ctx_cb(afio_ctx *ctx, bool has_cb)
{
	if (!ctx || !has_cb)
		return -EINVAL;
	return afio_ctx_forked(ctx) ? -ECHILD : 0;
}

static int check_ctx(afio_ctx *ctx, afio_cb cb)
{
	return check_ctx_cb(ctx, cb);
}

static int check_fd_cb(afio_ctx *ctx, int fd, bool has_cb)
{
	int ret = check_ctx_cb(ctx, has_cb);

	if (!ret && fd < 0)
		ret = -EBADF;
	return ret;
}

static int check_fd(afio_ctx *ctx, int fd, afio_cb cb)
{
	return check_fd_cb(ctx, fd, cb);
}

static int check_accept_flags(int flags)
{
	return flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC) ? -EINVAL : 0;
}

static int check_dirfd_path(afio_ctx *ctx, int dirfd, const char *path, afio_cb cb)
{
	int ret = check_ctx(ctx, cb);

	if (ret)
		return ret;
	if (dirfd < 0 && dirfd != AT_FDCWD)
		return -EBADF;
	return path ? 0 : -EINVAL;
}

static int check_buf(const void *buf, size_t len, uint64_t off)
{
	if (!buf || len > SSIZE_MAX || off > INT64_MAX)
		return -EINVAL;
	return 0;
}

static int check_iov(const struct iovec *iov, size_t cnt)
{
	size_t total = 0;

	if ((!iov && cnt) || cnt > IOV_MAX)
		return -EINVAL;
	for (size_t i = 0; i < cnt; i++) {
		if (!iov[i].iov_base && iov[i].iov_len)
			return -EINVAL;
		if (iov[i].iov_len > SSIZE_MAX - total)
			return -EINVAL;
		total += iov[i].iov_len;
	}
	return 0;
}

/* A request waits rather than fail with EAGAIN; afio_cancel() stops it. */
static int check_rwf(int rwf)
{
	return rwf & RWF_NOWAIT ? -EINVAL : 0;
}

/* The library's own flag is the program's answer to the question the
   routing asks (is fd O_DIRECT?), and goes no further. */
static void take_rwf(struct afio_req *r, int rwf)
{
	r->flags = rwf & ~AFIO_RWF_BUFFERED;
	if (rwf & AFIO_RWF_BUFFERED)
		r->dio = AFIO_DIO_OFF;
}

/*
 * MSG_DONTWAIT would make a request fail where every backend otherwise
 * waits for readiness (io_uring honours it, the others add it to every
 * try themselves); afio_cancel() is how to stop waiting.
 *
 * MSG_WAITALL asks for the whole length, which only a byte stream can
 * promise: on a SOCK_SEQPACKET socket io_uring joins messages in some
 * modes and not in others, on a datagram socket it means nothing, and
 * with MSG_PEEK each retry would copy the same bytes again.  Its fd is
 * looked at only then; where it is not a socket, the callback gets the
 * error, as for any request.
 */
static int check_sock_flags(int fd, int flags)
{
	socklen_t len = sizeof(int);
	int type;

	if (flags & (MSG_DONTWAIT | MSG_ERRQUEUE))
		return -EINVAL;
	if (!(flags & MSG_WAITALL))
		return 0;
	if (flags & MSG_PEEK)
		return -EINVAL;
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0)
		return 0;
	return type == SOCK_STREAM ? 0 : -EINVAL;
}

/* ---- file reads and writes ---- */

/* Inlined into each caller, whose op and flags then fold its checks away. */
static inline __attribute__((always_inline)) int
queue_rw(afio_ctx *ctx, enum afio_op op, int fd, const void *buf, size_t len,
	 uint64_t off, int rwf, afio_cb cb, void *data)
{
	struct afio_req *r;
	int ret = check_fd(ctx, fd, cb);

	if (!ret)
		ret = op == AFIO_OP_READV || op == AFIO_OP_WRITEV ?
		      check_iov(buf, len) : check_buf(buf, len, 0);
	if (!ret && off > INT64_MAX)
		ret = -EINVAL;
	if (!ret)
		ret = check_rwf(rwf);
	if (ret)
		return ret;
	r = new_req(ctx, op, fd, cb, data, &ret);
	if (!r)
		return ret;
	r->buf = (void *)buf;
	r->len = len;
	r->off = off;
	take_rwf(r, rwf);
	return enqueue(ctx, r);
}

int afio_read(afio_ctx *ctx, int fd, void *buf, size_t len, uint64_t off,
	      afio_cb cb, void *data)
{
	return queue_rw(ctx, AFIO_OP_READ, fd, buf, len, off, 0, cb, data);
}

int afio_write(afio_ctx *ctx, int fd, const void *buf, size_t len, uint64_t off,
	       afio_cb cb, void *data)
{
	return queue_rw(ctx, AFIO_OP_WRITE, fd, buf, len, off, 0, cb, data);
}

static int queue_iov(afio_ctx *ctx, enum afio_op op, int fd, const struct iovec *iov,
		     int cnt, uint64_t off, int rwf, afio_cb cb, void *data)
{
	int ret = check_fd(ctx, fd, cb);

	if (ret)
		return ret;
	if (!iov || cnt < 0)
		return -EINVAL;
	return queue_rw(ctx, op, fd, iov, (size_t)cnt, off, rwf, cb, data);
}

int afio_readv(afio_ctx *ctx, int fd, const struct iovec *iov, int cnt, uint64_t off,
	       afio_cb cb, void *data)
{
	return queue_iov(ctx, AFIO_OP_READV, fd, iov, cnt, off, 0, cb, data);
}

int afio_writev(afio_ctx *ctx, int fd, const struct iovec *iov, int cnt, uint64_t off,
		afio_cb cb, void *data)
{
	return queue_iov(ctx, AFIO_OP_WRITEV, fd, iov, cnt, off, 0, cb, data);
}

int afio_readv2(afio_ctx *ctx, int fd, const struct iovec *iov, int cnt, uint64_t off,
		int rwf, afio_cb cb, void *data)
{
	return queue_iov(ctx, AFIO_OP_READV, fd, iov, cnt, off, rwf, cb, data);
}

int afio_writev2(afio_ctx *ctx, int fd, const struct iovec *iov, int cnt, uint64_t off,
		 int rwf, afio_cb cb, void *data)
{
	return queue_iov(ctx, AFIO_OP_WRITEV, fd, iov, cnt, off, rwf, cb, data);
}

/* ---- one call on an fd: fsync, close, fallocate, ... ---- */

static int queue_fd_op(afio_ctx *ctx, enum afio_op op, int fd, uint64_t off, uint64_t len,
		       int flags, unsigned mode, afio_cb cb, void *data)
{
	struct afio_req *r;
	int ret = check_fd(ctx, fd, cb);

	if (!ret && (off > INT64_MAX || len > INT64_MAX))
		ret = -EINVAL;
	if (ret)
		return ret;
	r = new_req(ctx, op, fd, cb, data, &ret);
	if (!r)
		return ret;
	r->off = off;
	r->len = (size_t)len;
	r->flags = flags;
	r->mode = mode;
	return enqueue(ctx, r);
}

int afio_fsync(afio_ctx *ctx, int fd, unsigned flags, afio_cb cb, void *data)
{
	if (flags & ~AFIO_FSYNC_DATASYNC)
		return check_fd(ctx, fd, cb) ? : -EINVAL;
	return queue_fd_op(ctx, AFIO_OP_FSYNC, fd, 0, 0, (int)flags, 0, cb, data);
}

int afio_close(afio_ctx *ctx, int fd, afio_cb cb, void *data)
{
	int ret = queue_fd_op(ctx, AFIO_OP_CLOSE, fd, 0, 0, 0, 0, cb, data);

	/* Requests queued before it are routed by fcntl then, and find the
	   fd still open: the close is routed after them. */
	if (!ret)
		afio_fd_hint_closed(ctx, fd);
	return ret;
}

int afio_fallocate(afio_ctx *ctx, int fd, int mode, uint64_t off, uint64_t len,
		   afio_cb cb, void *data)
{
	return queue_fd_op(ctx, AFIO_OP_FALLOCATE, fd, off, len, 0, (unsigned)mode, cb, data);
}

int afio_ftruncate(afio_ctx *ctx, int fd, uint64_t len, afio_cb cb, void *data)
{
	return queue_fd_op(ctx, AFIO_OP_FTRUNCATE, fd, len, 0, 0, 0, cb, data);
}

int afio_sync_range(afio_ctx *ctx, int fd, uint64_t off, uint64_t len, unsigned flags,
		    afio_cb cb, void *data)
{
	return queue_fd_op(ctx, AFIO_OP_SYNC_RANGE, fd, off, len, (int)flags, 0, cb, data);
}

/* ---- sockets ---- */

/*
 * A multishot accept waits and is sent again after every result, and a
 * pooled receive that the core reads for (lib/bufpool.c: every pool but
 * an io_uring buffer ring's) is read after its engine saw readiness and
 * let go of the socket: an engine's hold, taken at each wait and released
 * at each result, would leave those steps on whatever the number names by
 * then, another connection's socket after a close and a reuse.  A
 * MSG_WAITALL receive or send that a pool worker starts on the number and,
 * after some bytes, holds to wait for the rest would likewise move the
 * bytes of two connections.  So such a request is bound from the call on,
 * for its whole life: r->fd becomes the core's own dup, which every engine
 * and the core use, and which goes with the last completion (run_ecb()).
 * With no fd left for it (EMFILE, ENFILE) the request stays on the
 * program's number, unbound, as an engine's hold does (lib/sockops.c).  A
 * receive from a buffer ring is bound by the kernel while it is in the
 * ring, and costs no fd.
 */
static void bind_socket(struct afio_req *r)
{
	int fd = fcntl(r->fd, F_DUPFD_CLOEXEC, 0);

	if (fd < 0)
		return;
	r->fd = fd;
	r->shot |= AFIO_SHOT_BOUND;
}

static int queue_sock(afio_ctx *ctx, enum afio_op op, int fd, const void *buf, size_t len,
		      int flags, afio_cb cb, void *data)
{
	struct afio_req *r;
	int ret = check_fd(ctx, fd, cb);

	if (!ret)
		ret = check_buf(buf, len, 0);
	/* A zero-length receive would complete with 0, which reads as the
	   end of the stream. */
	if (!ret && op == AFIO_OP_RECV && !len)
		ret = -EINVAL;
	if (!ret)
		ret = check_sock_flags(fd, flags);
	if (ret)
		return ret;
	r = new_req(ctx, op, fd, cb, data, &ret);
	if (!r)
		return ret;
	r->buf = (void *)buf;
	r->len = len;
	r->flags = flags;
	if (flags & MSG_WAITALL)
		bind_socket(r);
	return enqueue(ctx, r);
}

int afio_recv(afio_ctx *ctx, int fd, void *buf, size_t len, int flags,
	      afio_cb cb, void *data)
{
	return queue_sock(ctx, AFIO_OP_RECV, fd, buf, len, flags, cb, data);
}

int afio_send(afio_ctx *ctx, int fd, const void *buf, size_t len, int flags,
	      afio_cb cb, void *data)
{
	return queue_sock(ctx, AFIO_OP_SEND, fd, buf, len, flags, cb, data);
}

/* What poll(2) reports without being asked is no event to wait for. */
#define POLL_FD_EVENTS	(POLLIN | POLLPRI | POLLOUT | POLLRDHUP | POLLRDNORM | \
			 POLLRDBAND | POLLWRNORM | POLLWRBAND)

int afio_poll_fd(afio_ctx *ctx, int fd, unsigned events, afio_cb cb, void *data)
{
	struct afio_req *r;
	int ret = check_fd(ctx, fd, cb);

	if (ret)
		return ret;
	if (!events || (events & ~(unsigned)POLL_FD_EVENTS))
		return -EINVAL;
	r = new_req(ctx, AFIO_OP_POLL_FD, fd, cb, data, &ret);
	if (!r)
		return ret;
	r->flags = (int)events;
	return enqueue(ctx, r);
}

int afio_accept(afio_ctx *ctx, int fd, int flags, afio_cb cb, void *data)
{
	struct afio_req *r;
	int ret = check_fd(ctx, fd, cb);

	if (!ret)
		ret = check_accept_flags(flags);
	if (ret)
		return ret;
	r = new_req(ctx, AFIO_OP_ACCEPT, fd, cb, data, &ret);
	if (!r)
		return ret;
	r->flags = flags;
	return enqueue(ctx, r);
}

/* ---- multishot and pooled ---- */

/* new_req() for a request whose callback is an afio_ecb. */
static struct afio_req *new_ecb_req(afio_ctx *ctx, enum afio_op op, int fd, afio_ecb cb,
				    void *data, uint8_t shot, int *err)
{
	struct afio_req *r = new_req(ctx, op, fd, NULL, data, err);

	if (r) {
		r->ecb = cb;
		r->shot = AFIO_SHOT_ECB | shot;
	}
	return r;
}

int afio_accept_multishot(afio_ctx *ctx, int fd, int flags, afio_ecb cb, void *data)
{
	struct afio_req *r;
	int ret = check_fd_cb(ctx, fd, cb);

	if (!ret)
		ret = check_accept_flags(flags);
	if (ret)
		return ret;
	r = new_ecb_req(ctx, AFIO_OP_ACCEPT, fd, cb, data, AFIO_SHOT_MULTI, &ret);
	if (!r)
		return ret;
	r->flags = flags;
	bind_socket(r);
	return enqueue(ctx, r);
}

/*
 * MSG_WAITALL would take more than one buffer, MSG_PEEK would read the
 * same bytes again at every shot and MSG_TRUNC would give a length past
 * the buffer: refused, with what afio_recv() refuses.
 */
int afio_recv_pooled(afio_ctx *ctx, int fd, unsigned pool, int flags, unsigned how,
		     afio_ecb cb, void *data)
{
	struct afio_req *r;
	int ret = check_fd_cb(ctx, fd, cb);

	if (ret)
		return ret;
	if (!afio_bufpool_valid(ctx, pool) || (flags & (MSG_WAITALL | MSG_PEEK | MSG_TRUNC)) ||
	    (how & ~(AFIO_RECV_MULTISHOT | AFIO_RECV_BUF_NOWAIT)))
		return -EINVAL;
	ret = check_sock_flags(fd, flags);
	if (ret)
		return ret;
	r = new_ecb_req(ctx, AFIO_OP_RECV_POOL, fd, cb, data,
			(how & AFIO_RECV_MULTISHOT ? AFIO_SHOT_MULTI : 0) |
			(how & AFIO_RECV_BUF_NOWAIT ? AFIO_SHOT_BUF_NOWAIT : 0), &ret);
	if (!r)
		return ret;
	r->len = afio_bufpool_size(ctx, pool);
	r->mode = pool;
	r->flags = flags;
	afio_bufpool_mark(r);
	if (!afio_bufpool_kernel(ctx, pool))
		bind_socket(r);
	return enqueue(ctx, r);
}

int afio_connect(afio_ctx *ctx, int fd, const struct sockaddr *addr, socklen_t len,
		 afio_cb cb, void *data)
{
	struct afio_req *r;
	int ret = check_fd(ctx, fd, cb);

	if (!ret && (!addr || !len))
		ret = -EINVAL;
	if (ret)
		return ret;
	r = new_req(ctx, AFIO_OP_CONNECT, fd, cb, data, &ret);
	if (!r)
		return ret;
	r->addr = addr;
	r->len = len;
	return enqueue(ctx, r);
}

/* MSG_WAITALL would need the progress through an iovec kept per request on
   every backend; a message is taken as one call takes it. */
static int queue_msg(afio_ctx *ctx, enum afio_op op, int fd, const struct msghdr *msg,
		     int flags, afio_cb cb, void *data)
{
	struct afio_req *r;
	int ret = check_fd(ctx, fd, cb);

	if (!ret && !msg)
		ret = -EINVAL;
	if (!ret)
		ret = check_iov(msg->msg_iov, msg->msg_iovlen);
	if (!ret && (flags & (MSG_DONTWAIT | MSG_WAITALL | MSG_ERRQUEUE)))
		ret = -EINVAL;
	if (ret)
		return ret;
	r = new_req(ctx, op, fd, cb, data, &ret);
	if (!r)
		return ret;
	r->msg = (struct msghdr *)msg;
	r->flags = flags;
	return enqueue(ctx, r);
}

int afio_sendmsg(afio_ctx *ctx, int fd, const struct msghdr *msg, int flags,
		 afio_cb cb, void *data)
{
	return queue_msg(ctx, AFIO_OP_SENDMSG, fd, msg, flags, cb, data);
}

int afio_recvmsg(afio_ctx *ctx, int fd, struct msghdr *msg, int flags,
		 afio_cb cb, void *data)
{
	return queue_msg(ctx, AFIO_OP_RECVMSG, fd, msg, flags, cb, data);
}

int afio_sendfile(afio_ctx *ctx, int sock_fd, int file_fd, uint64_t off, size_t len,
		  afio_cb cb, void *data)
{
	struct afio_req *r;
	int ret = check_fd(ctx, sock_fd, cb);

	if (!ret && file_fd < 0)
		ret = -EBADF;
	if (!ret && (len > SSIZE_MAX || off > INT64_MAX))
		ret = -EINVAL;
	if (ret)
		return ret;
	r = new_req(ctx, AFIO_OP_SENDFILE, sock_fd, cb, data, &ret);
	if (!r)
		return ret;
	r->fd2 = file_fd;
	r->off = off;
	r->len = len;
	return enqueue(ctx, r);
}

/* ---- time ---- */

/* From now, not from when the backend takes it: a timer queued first with
   the earlier deadline fires first, however long the hand-over takes. */
uint64_t afio_deadline_ns(uint64_t ns)
{
	struct timespec now;
	uint64_t t;

	clock_gettime(CLOCK_MONOTONIC, &now);
	t = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
	return ns > INT64_MAX - t ? INT64_MAX : t + ns;
}

int afio_timeout(afio_ctx *ctx, uint64_t ns, afio_cb cb, void *data)
{
	struct afio_req *r;
	int ret = check_ctx(ctx, cb);

	if (!ret && ns > INT64_MAX)
		ret = -EINVAL;
	if (ret)
		return ret;
	r = new_req(ctx, AFIO_OP_TIMEOUT, -1, cb, data, &ret);
	if (!r)
		return ret;
	r->off = afio_deadline_ns(ns);
	return enqueue(ctx, r);
}

/* ---- paths ---- */

static struct afio_req *new_path_req(afio_ctx *ctx, enum afio_op op, int dirfd,
				     const char *path, afio_cb cb, void *data, int *err)
{
	struct afio_req *r;

	*err = check_dirfd_path(ctx, dirfd, path, cb);
	if (*err)
		return NULL;
	r = new_req(ctx, op, dirfd, cb, data, err);
	if (r)
		r->path = path;
	return r;
}

static int queue_path(afio_ctx *ctx, enum afio_op op, int dirfd, const char *path, int flags,
		      unsigned mode, afio_cb cb, void *data)
{
	int ret;
	struct afio_req *r = new_path_req(ctx, op, dirfd, path, cb, data, &ret);

	if (!r)
		return ret;
	r->flags = flags;
	r->mode = mode;
	return enqueue(ctx, r);
}

int afio_openat(afio_ctx *ctx, int dirfd, const char *path, int flags, mode_t mode,
		afio_cb cb, void *data)
{
	return queue_path(ctx, AFIO_OP_OPENAT, dirfd, path, flags, mode, cb, data);
}

int afio_openat2(afio_ctx *ctx, int dirfd, const char *path, const struct open_how *how,
		 afio_cb cb, void *data)
{
	struct afio_req *r;
	int ret;

	if (!how)
		return check_dirfd_path(ctx, dirfd, path, cb) ? : -EINVAL;
	r = new_path_req(ctx, AFIO_OP_OPENAT2, dirfd, path, cb, data, &ret);
	if (!r)
		return ret;
	r->how = how;
	return enqueue(ctx, r);
}

int afio_statx(afio_ctx *ctx, int dirfd, const char *path, int flags, unsigned mask,
	       struct statx *stx, afio_cb cb, void *data)
{
	struct afio_req *r;
	int ret;

	if (!stx)
		return check_dirfd_path(ctx, dirfd, path, cb) ? : -EINVAL;
	r = new_path_req(ctx, AFIO_OP_STATX, dirfd, path, cb, data, &ret);
	if (!r)
		return ret;
	r->flags = flags;
	r->mode = mask;
	r->stx = stx;
	return enqueue(ctx, r);
}

int afio_renameat(afio_ctx *ctx, int olddirfd, const char *oldpath, int newdirfd,
		  const char *newpath, unsigned flags, afio_cb cb, void *data)
{
	struct afio_req *r;
	int ret = check_dirfd_path(ctx, newdirfd, newpath, cb);

	if (ret)
		return ret;
	r = new_path_req(ctx, AFIO_OP_RENAMEAT, olddirfd, oldpath, cb, data, &ret);
	if (!r)
		return ret;
	r->fd2 = newdirfd;
	r->path2 = newpath;
	r->flags = (int)flags;
	return enqueue(ctx, r);
}

int afio_unlinkat(afio_ctx *ctx, int dirfd, const char *path, int flags,
		  afio_cb cb, void *data)
{
	return queue_path(ctx, AFIO_OP_UNLINKAT, dirfd, path, flags, 0, cb, data);
}

int afio_mkdirat(afio_ctx *ctx, int dirfd, const char *path, mode_t mode,
		 afio_cb cb, void *data)
{
	return queue_path(ctx, AFIO_OP_MKDIRAT, dirfd, path, 0, mode, cb, data);
}

/* ---- nothing ---- */

/*
 * A backend without a nop of its own would spend a hand-off (or a worker)
 * on doing nothing; the core finishes the request as it is queued, which
 * costs no system call, and its callback runs in the next afio_poll().
 */
int afio_nop(afio_ctx *ctx, afio_cb cb, void *data)
{
	struct afio_req *r;
	int ret = check_ctx(ctx, cb);

	if (ret)
		return ret;
	r = new_req(ctx, AFIO_OP_NOP, -1, cb, data, &ret);
	if (!r)
		return ret;
	if (ctx->primary.ops->caps & AFIO_CAP_NOP)
		return enqueue(ctx, r);
	ctx->st.submitted++;
	afio_count_nowait(ctx);
	afio_req_done(r, 0);
	return 0;
}
