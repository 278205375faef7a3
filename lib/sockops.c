/* SPDX-License-Identifier: MIT */
/*
 * The socket ops as the thread pool and the libaio backend do them: one
 * try without blocking after readiness, or, where Linux has no per-call way
 * not to block, the plain call on a thread that may block.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "request.h"

static ssize_t neg_errno(ssize_t n)
{
	return n < 0 ? -errno : n;
}

static ssize_t stream_once(const struct afio_req *r, int fd)
{
	char *buf = (char *)r->buf + r->progress;
	size_t len = r->len - r->progress;
	ssize_t n;

	do {
		if (r->op == AFIO_OP_RECV)
			n = recv(fd, buf, len, r->flags | MSG_DONTWAIT);
		else
			n = send(fd, buf, len, r->flags | MSG_DONTWAIT | MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	return neg_errno(n);
}

/*
 * MSG_WAITALL goes on to the whole length, the end of the stream or an
 * error, as io_uring does in the kernel; the end or an error after some
 * bytes gives those bytes, as recv(2) does.
 */
static ssize_t stream_nowait(struct afio_req *r, int fd)
{
	ssize_t n;

	for (;;) {
		n = stream_once(r, fd);
		if (n <= 0)
			break;
		r->progress += (size_t)n;
		if (!(r->flags & MSG_WAITALL) || r->progress == r->len)
			return (ssize_t)r->progress;
	}
	if (n == -EAGAIN)
		return n;
	return afio_partial(r->progress, n);
}

/*
 * The first call starts the connection; once the socket is writable a
 * second one gives its outcome, as the kernel's own retry does: 0 (and the
 * socket is marked connected, so that a later connect says EISCONN), the
 * error, or EALREADY while it is still under way.  A connection the
 * program had started itself (EALREADY at once) is waited for as well: a
 * connect completes when the connection is made or has failed.
 */
static ssize_t connect_nowait(struct afio_req *r, int fd)
{
	bool again = r->started;

	r->started = 1;
	if (!connect(fd, r->addr, (socklen_t)r->len))
		return 0;
	/* EINTR: the connection goes on being made, as EINPROGRESS. */
	if (errno == EINPROGRESS || errno == EINTR || errno == EALREADY)
		return -EAGAIN;
	return again && errno == EISCONN ? 0 : -errno;
}

/*
 * Positioned: the file's own offset is left alone, as the contract says.
 * sendfile(2) has no MSG_NOSIGNAL: a peer that went away would raise
 * SIGPIPE in this thread, which is the application's.  So SIGPIPE is
 * blocked for the call and the one it raised taken back, unless the
 * thread blocked it already (then it is the thread's to handle).
 */
static ssize_t sendfile_once(struct afio_req *r, int fd)
{
	static const struct timespec no_wait;
	off_t off = (off_t)r->off;
	sigset_t pipe_only, old;
	ssize_t n;
	int err;

	sigemptyset(&pipe_only);
	sigaddset(&pipe_only, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
	do
		n = sendfile(fd, r->fd2, &off, r->len);
	while (n < 0 && errno == EINTR);
	err = errno;
	if (n < 0 && err == EPIPE && !sigismember(&old, SIGPIPE))
		(void)sigtimedwait(&pipe_only, NULL, &no_wait);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return n < 0 ? -err : n;
}

ssize_t afio_req_sock_nowait(struct afio_req *r, int fd)
{
	ssize_t n;

	switch (r->op) {
	case AFIO_OP_RECV:
	case AFIO_OP_SEND:
		return stream_nowait(r, fd);
	case AFIO_OP_CONNECT:
		return connect_nowait(r, fd);
	case AFIO_OP_SENDFILE:
		return sendfile_once(r, fd);
	default:
		break;
	}
	do {
		if (r->op == AFIO_OP_ACCEPT)
			n = accept4(fd, NULL, NULL, r->flags);
		else if (r->op == AFIO_OP_SENDMSG)
			n = sendmsg(fd, r->msg, r->flags | MSG_DONTWAIT | MSG_NOSIGNAL);
		else
			n = recvmsg(fd, r->msg, r->flags | MSG_DONTWAIT);
	} while (n < 0 && errno == EINTR);
	return neg_errno(n);
}

/* The socket ops that have no MSG_DONTWAIT: only O_NONBLOCK keeps them
   from blocking. */
static bool needs_nonblocking_fd(const struct afio_req *r)
{
	return r->op == AFIO_OP_ACCEPT || r->op == AFIO_OP_CONNECT || r->op == AFIO_OP_SENDFILE;
}

bool afio_sock_can_try(const struct afio_req *r, int fd)
{
	int fl;

	if (!needs_nonblocking_fd(r))
		return true;
	fl = fcntl(fd, F_GETFL);
	/* A bad fd is tried, so that it fails at once with EBADF. */
	return fl < 0 || (fl & O_NONBLOCK);
}

#ifndef SYS_cachestat
#define SYS_cachestat 451	/* Linux 6.5, the same number on every architecture */
#endif

struct cachestat_range {
	uint64_t off;
	uint64_t len;
};

struct cachestat {
	uint64_t nr_cache;
	uint64_t nr_dirty;
	uint64_t nr_writeback;
	uint64_t nr_evicted;
	uint64_t nr_recently_evicted;
};

/*
 * sendfile(2) on a non-blocking socket still waits for the disk when the
 * file's pages are not in memory; cachestat(2) says whether they all are,
 * for one system call.  Without it (before 6.5) nothing can be promised.
 */
bool afio_sendfile_cached(const struct afio_req *r)
{
	long page = sysconf(_SC_PAGESIZE);
	struct cachestat_range range = { r->off, r->len };
	struct cachestat cs;
	uint64_t first, last;

	if (!r->len)
		return true;
	if (syscall(SYS_cachestat, r->fd2, &range, &cs, 0) < 0)
		return false;
	first = r->off / (uint64_t)page;
	last = (r->off + r->len - 1) / (uint64_t)page;
	return cs.nr_cache >= last - first + 1;
}

/*
 * accept, connect and sendfile have no MSG_DONTWAIT, and a worker blocked
 * in them could not be canceled: the socket's file description is made
 * O_NONBLOCK for the one call.  Another thread that starts a blocking call
 * on the same socket in that moment gets EAGAIN (asyncfio(7)).
 */
ssize_t afio_req_sock_flagged(struct afio_req *r, int fd)
{
	int fl;
	ssize_t n;

	if (!needs_nonblocking_fd(r))
		return afio_req_sock_nowait(r, fd);
	fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return -errno;
	if ((fl & O_NONBLOCK) || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return afio_req_sock_nowait(r, fd);
	n = afio_req_sock_nowait(r, fd);
	(void)fcntl(fd, F_SETFL, fl);
	return n;
}
