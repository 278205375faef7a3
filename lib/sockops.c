/* SPDX-License-Identifier: MIT */
/*
 * The socket ops as the thread pool and the libaio backend do them: one
 * try without blocking after readiness, or, where Linux has no per-call way
 * not to block, the plain call on a thread that may block.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sock_diag.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "backend.h"

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

/* Positioned: the file's own offset is left alone, as the contract says. */
static ssize_t sendfile_once(int fd, int file_fd, uint64_t at, size_t len)
{
	off_t off = (off_t)at;
	ssize_t n;

	do
		n = sendfile(fd, file_fd, &off, len);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

/*
 * sendfile(2) has no MSG_NOSIGNAL: a peer that went away would raise
 * SIGPIPE in this thread, which is the application's.  So SIGPIPE is
 * blocked for the call and the one it raised taken back, unless the
 * thread blocked it already (then the thread handles it).
 */
static ssize_t sendfile_at(int fd, int file_fd, uint64_t at, size_t len)
{
	static const struct timespec no_wait;
	sigset_t pipe_only, old;
	ssize_t n;

	sigemptyset(&pipe_only);
	sigaddset(&pipe_only, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
	n = sendfile_once(fd, file_fd, at, len);
	if (n == -EPIPE && !sigismember(&old, SIGPIPE))
		(void)sigtimedwait(&pipe_only, NULL, &no_wait);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return n;
}

/*
 * sendfile(2) has no per-call way not to block: the socket side waits
 * unless the open file has O_NONBLOCK (splice(2) with SPLICE_F_NONBLOCK
 * too: that flag covers the pipe, not the socket).  Those flags belong to
 * every descriptor of the open file, in this process and in others, and
 * can change between a look and the call, so nothing here reads or sets
 * them.  Instead a call moves no more than the socket has room for: the
 * kernel makes a sender wait only when it starts a new segment (TCP) or
 * buffer (AF_UNIX) while the bytes it holds for the socket reach its send
 * buffer size, and SO_MEMINFO says both.  Half of the room goes per call,
 * so that the other half covers the segments' own overhead; the room is
 * asked again after each full call, a few times, to use most of it.  What
 * the kernel does not count there is not covered: TCP_NOTSENT_LOWAT set
 * on the socket, TCP's memory pressure across the whole system, or a
 * blocking writer outside this library taking the room in the meantime.
 */
#define SENDFILE_ROUNDS 4

static ssize_t sendfile_room(int fd)
{
	uint32_t mem[SK_MEMINFO_VARS];
	socklen_t len = sizeof(mem);
	uint32_t held;

	if (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mem, &len) < 0)
		return -errno;
	held = mem[SK_MEMINFO_WMEM_QUEUED] > mem[SK_MEMINFO_WMEM_ALLOC] ?
	       mem[SK_MEMINFO_WMEM_QUEUED] : mem[SK_MEMINFO_WMEM_ALLOC];
	return held < mem[SK_MEMINFO_SNDBUF] ? (mem[SK_MEMINFO_SNDBUF] - held) / 2 : 0;
}

/*
 * Two threads of this process measuring the same room at once would each
 * send into it: sends on one socket take turns, by a lock striped by the
 * socket's inode (each dup of the socket has the same).  A child of fork()
 * gets fresh locks: the threads that held them are not there.
 */
#define SENDFILE_STRIPES 64

static pthread_mutex_t sendfile_locks[SENDFILE_STRIPES];
static pthread_once_t sendfile_locks_once = PTHREAD_ONCE_INIT;

static void sendfile_locks_init(void)
{
	for (unsigned i = 0; i < SENDFILE_STRIPES; i++)
		pthread_mutex_init(&sendfile_locks[i], NULL);
}

static void sendfile_locks_setup(void)
{
	sendfile_locks_init();
	(void)pthread_atfork(NULL, NULL, sendfile_locks_init);
}

static ssize_t sendfile_bounded(struct afio_req *r, int fd)
{
	pthread_mutex_t *lock;
	ssize_t n = 0, room;
	size_t sent = 0;
	struct stat st;

	/* AFIO_NONBLOCKING_SOCKETS: the program has promised what the room,
	   the lock and the signal mask are there for (a socket that says
	   EAGAIN rather than wait, no SIGPIPE to raise). */
	if (afio_ctx_flags(r->ctx) & AFIO_NONBLOCKING_SOCKETS)
		return sendfile_once(fd, r->fd2, r->off, r->len);
	if (fstat(fd, &st) < 0)
		return -errno;
	/* Not a socket: sendfile(2) says what it does with it. */
	if (!S_ISSOCK(st.st_mode))
		return sendfile_at(fd, r->fd2, r->off, r->len);
	pthread_once(&sendfile_locks_once, sendfile_locks_setup);
	lock = &sendfile_locks[st.st_ino % SENDFILE_STRIPES];
	pthread_mutex_lock(lock);
	for (unsigned i = 0; i < SENDFILE_ROUNDS && (sent < r->len || !r->len); i++) {
		room = sendfile_room(fd);
		if (room <= 0) {
			n = room ? room : -EAGAIN;
			break;
		}
		if ((size_t)room > r->len - sent)
			room = (ssize_t)(r->len - sent);
		n = sendfile_at(fd, r->fd2, r->off + sent, (size_t)room);
		if (n <= 0)
			break;
		sent += (size_t)n;
		if (n < room)
			break;
	}
	pthread_mutex_unlock(lock);
	return sent ? (ssize_t)sent : n;
}

/* A pooled receive's part in the engine, and a poll_fd: readiness, with
   no buffer. */
static ssize_t ready_now(int fd, short events)
{
	struct pollfd pfd = { .fd = fd, .events = events };
	int n;

	do
		n = poll(&pfd, 1, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (pfd.revents & POLLNVAL)
		return -EBADF;
	return n ? pfd.revents : -EAGAIN;
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
		return sendfile_bounded(r, fd);
	case AFIO_OP_RECV_POOL:
	case AFIO_OP_POLL_FD:
		return ready_now(fd, afio_req_wait_events(r));
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

/* The socket ops that have no MSG_DONTWAIT and no other bound: only
   O_NONBLOCK keeps them from blocking. */
static bool needs_nonblocking_fd(const struct afio_req *r)
{
	return r->op == AFIO_OP_ACCEPT || r->op == AFIO_OP_CONNECT;
}

/*
 * accept and connect on a socket without O_NONBLOCK get it for one call
 * (afio_req_sock_flagged); every look at the flags for them, and every
 * such call, takes this lock, so that no thread of this process ever sees
 * an O_NONBLOCK that a pool worker set for a moment and takes it for the
 * application's own: it would call accept(2) or connect(2) as if they
 * could not block, and the flag gone again they would, where no cancel
 * reaches.  Held only around calls that cannot block.
 */
static pthread_mutex_t nonblock_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t nonblock_lock_once = PTHREAD_ONCE_INIT;

static void nonblock_lock_reset(void)
{
	pthread_mutex_init(&nonblock_lock, NULL);
}

static void nonblock_lock_setup(void)
{
	(void)pthread_atfork(NULL, NULL, nonblock_lock_reset);
}

static void nonblock_lock_take(void)
{
	pthread_once(&nonblock_lock_once, nonblock_lock_setup);
	pthread_mutex_lock(&nonblock_lock);
}

bool afio_sock_can_try(const struct afio_req *r, int fd)
{
	int fl;

	if (!needs_nonblocking_fd(r))
		return true;
	nonblock_lock_take();
	fl = fcntl(fd, F_GETFL);
	pthread_mutex_unlock(&nonblock_lock);
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
 * Set once cachestat(2) has refused the process (EPERM: the kernel answers
 * only for a file the caller may write or owns, so a server's unprivileged
 * workers are refused for the files they serve) or is missing (ENOSYS,
 * before 6.5): from then on the process does not ask it again, and saves
 * the refused call.  Relaxed: a thread that has not seen it yet asks once
 * more.
 */
static atomic_bool cachestat_refused;

/*
 * Whether the page holding off is in the page cache, for any reader: a
 * one-byte read with RWF_NOWAIT, which fails with EAGAIN rather than wait
 * (also where the file system has no such read, or the file is O_DIRECT),
 * though, as the pool's and libaio's tries of buffered reads, it may start
 * the readahead of a page that is not there.  0 bytes (at or past the end
 * of the file) is not an answer for the pages sendfile(2) would read.
 */
static bool page_cached(int fd, uint64_t off)
{
	char byte;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };

	return preadv2(fd, &iov, 1, (off_t)off, RWF_NOWAIT) == 1;
}

/*
 * sendfile(2) on a non-blocking socket still waits for the disk when the
 * file's pages are not in memory.  cachestat(2) says whether they all are,
 * for one system call.  Where it is refused and the caller allows it
 * (ask_pages), the range's first and last pages are asked (one call each);
 * a hole between them is not seen, and then the sendfile waits for those
 * pages as a plain sendfile would.
 */
static bool range_cached(const struct afio_req *r, bool ask_pages)
{
	long page = sysconf(_SC_PAGESIZE);
	struct cachestat_range range = { r->off, r->len };
	struct cachestat cs;
	uint64_t first, last;

	if (!r->len)
		return true;
	first = r->off / (uint64_t)page;
	last = (r->off + r->len - 1) / (uint64_t)page;
	if (!atomic_load_explicit(&cachestat_refused, memory_order_relaxed)) {
		if (!syscall(SYS_cachestat, r->fd2, &range, &cs, 0))
			return cs.nr_cache >= last - first + 1;
		if (errno != EPERM && errno != ENOSYS)
			return false;
		atomic_store_explicit(&cachestat_refused, true, memory_order_relaxed);
	}
	return ask_pages && page_cached(r->fd2, r->off) &&
	       (last == first || page_cached(r->fd2, last * (uint64_t)page));
}

bool afio_sendfile_cached(const struct afio_req *r)
{
	return range_cached(r, true);
}

bool afio_sendfile_surely_cached(const struct afio_req *r)
{
	return range_cached(r, false);
}

/*
 * accept and connect have no MSG_DONTWAIT, and a worker blocked in them
 * could not be canceled: the socket's file description is made O_NONBLOCK
 * for the one call, under nonblock_lock.  Another thread that starts a
 * blocking call on the same socket in that moment gets EAGAIN
 * (asyncfio(7)).
 */
ssize_t afio_req_sock_flagged(struct afio_req *r, int fd)
{
	int fl;
	ssize_t n;

	if (!needs_nonblocking_fd(r))
		return afio_req_sock_nowait(r, fd);
	nonblock_lock_take();
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)) {
		n = -errno;
	} else {
		n = afio_req_sock_nowait(r, fd);
		if (!(fl & O_NONBLOCK))
			(void)fcntl(fd, F_SETFL, fl);
	}
	pthread_mutex_unlock(&nonblock_lock);
	return n;
}

/*
 * A poll, an epoll registration and every later try name the socket by
 * its number, which the application may close, or give to another file,
 * while the request waits.  So from the moment a request has to wait,
 * the engine that owns it holds a dup and polls and transfers on that:
 * the request stays with the open file it began on (asyncfio(7), "bound")
 * and the file stays open until the request completes, as io_uring's
 * reference keeps it.  The dup is also each request's own number, so two
 * requests waiting on one socket each have their own epoll registration.
 *
 * The rules, for every engine that holds one:
 * - The hold belongs to the request's engine: it is taken when the
 *   request first has to wait and kept for every wait and try after that;
 *   the engine releases it before the request completes, and on every
 *   path that gives the request back unfinished (libaio's give_back()).
 *   Whoever may change it is whoever may touch the request's slot: the
 *   owner thread (libaio), or in the pool the thread that runs or
 *   watches the request, under the pool's lock.
 * - Borrowed: with no fd left for the dup (EMFILE, ENFILE) the request
 *   waits on r->fd itself, unbound, rather than hold a pool worker; the
 *   hold says so, and release leaves r->fd alone, as it is the
 *   application's.
 * - Bound by the core: a request that waits again after results, or
 *   that the core reads for (AFIO_SHOT_BOUND, bind_socket() in
 *   lib/ops.c), already works on the core's own dup for its whole life;
 *   the hold takes that one and release leaves it to the core.
 * - O_CLOEXEC: a program exec'd by the application does not inherit it.
 * - fork(): the child gets a copy of every dup, for requests that go on
 *   in the parent only.  In its forget op an engine whose holds only the
 *   forking thread changes (libaio) closes the child's copies, which would
 *   otherwise keep the parent's connections open after the parent closed
 *   them.
 *   The pool cannot: its poller or a worker may have been releasing a
 *   hold when the copy was taken, so a slot may name a dup that is
 *   already closed and whose number the child may reuse; those copies go
 *   when the child exits or execs.
 */
int afio_sock_hold(struct afio_sock_hold *h, const struct afio_req *r)
{
	int fd;

	if (h->fd_plus1)
		return h->borrowed;
	if (r->shot & AFIO_SHOT_BOUND) {
		/* Bound for its whole life by the core (bind_socket(),
		   lib/ops.c), whose dup it is. */
		h->fd_plus1 = r->fd + 1;
		h->request_owns = true;
		return 0;
	}
	fd = fcntl(r->fd, F_DUPFD_CLOEXEC, 0);
	if (fd >= 0) {
		h->fd_plus1 = fd + 1;
		return 0;
	}
	if (errno != EMFILE && errno != ENFILE)
		return -errno;
	h->fd_plus1 = r->fd + 1;
	h->borrowed = (int8_t)-errno;
	return h->borrowed;
}

void afio_sock_release(struct afio_sock_hold *h)
{
	if (h->fd_plus1 && !h->borrowed && !h->request_owns)
		close(afio_sock_held_fd(h));
	afio_sock_hold_init(h);
}
