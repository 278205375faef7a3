/* SPDX-License-Identifier: MIT */
/*
 * The version 0.2 ops on one backend in one mode (from argv).  For each op:
 * a success whose result is checked against what the system says about it,
 * errors of the call through the callback, bad arguments refused at once,
 * and for the ones that wait (accept, recvmsg, connect, sendfile, timers)
 * cancel and destroy: -ECANCELED exactly once.  Also the op table, and
 * whether afio_op_native() tells the truth about stats.fallbacks.  meson
 * runs it once per backend and mode; a backend that does not probe as
 * available here exits 77 (skipped) with the probe's reason.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <linux/falloc.h>
#include <linux/openat2.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "asyncfio.h"
#include "testutil.h"

/* ---- waiting for results ---- */

/* Refused at once, with want. */
#define REFUSED(want, call)	tu_expect_eq((call), (want), #call)

/* ---- files and directories ---- */

/* t's path joined with name, in one of a few buffers. */
static const char *tdir_abs(const struct tu_dir *t, const char *name)
{
	static char bufs[4][PATH_MAX + 64];
	static unsigned next;
	char *b = bufs[next++ % 4];

	snprintf(b, sizeof(bufs[0]), "%s/%s", t->path, name);
	return b;
}

/* A new directory name in dirfd, open. */
static int make_dir(int dirfd, const char *name)
{
	int fd;

	ck_assert_int_eq(mkdirat(dirfd, name, 0700), 0);
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	return fd;
}

static struct stat stat_at(int dirfd, const char *name)
{
	struct stat st;

	ck_assert_msg(!fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW), "stat %s: %s", name,
		      strerror(errno));
	return st;
}

static void read_whole(int fd, void *buf, size_t len, off_t off)
{
	ck_assert_int_eq(pread(fd, buf, len, off), len);
}

/* cachestat(2), Linux 6.5; not in every libc's headers. */
#ifndef SYS_cachestat
#define SYS_cachestat 451
#endif
struct cachestat_range {
	uint64_t off, len;
};
struct cachestat {
	uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

/* Pages of fd's [off, off + len) not yet on the device (dirty or being
   written); -1 where the kernel cannot say. */
static long unsynced_pages(int fd, uint64_t off, uint64_t len)
{
	struct cachestat_range range = { off, len };
	struct cachestat cs;

	if (syscall(SYS_cachestat, fd, &range, &cs, 0))
		return -1;
	return (long)(cs.nr_dirty + cs.nr_writeback);
}

/* ---- sockets ---- */

/* A connected TCP pair on loopback. */
static void tcp_pair(int *client, int *server)
{
	struct sockaddr_in addr;
	int l = tu_tcp_listener(1, false, &addr);

	*client = tu_tcp_socket(false);
	tu_connect_to(*client, &addr);
	*server = tu_accept_now(l);
	close(l);
}

/*
 * An address where nothing listens, kept so by a bound socket (no one else
 * can take the port): a SYN to it is answered with a reset.
 */
static int refusing_port(struct sockaddr_in *addr)
{
	int fd = tu_tcp_socket(false);

	*addr = tu_loopback();
	ck_assert_int_eq(bind(fd, (struct sockaddr *)addr, sizeof(*addr)), 0);
	*addr = tu_sock_addr(fd, false);
	return fd;
}

/* Sends into fd until a send would block: its peer reads nothing, so fd
   stays full.  Returns the bytes sent, all `byte`. */
static size_t fill_socket(int fd, unsigned char byte)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	unsigned char chunk[4096];
	size_t total = 0;

	memset(chunk, byte, sizeof(chunk));
	for (int i = 0; i < 100000; i++) {
		ssize_t n = send(fd, chunk, sizeof(chunk), MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0) {
			ck_assert_int_eq(errno, EAGAIN);
			ck_assert_msg(poll(&pfd, 1, 0) == 0, "a full socket polls as writable");
			return total;
		}
		total += (size_t)n;
	}
	ck_abort_msg("the socket never filled");
	return 0;
}

/* Reads fd to its end and checks it got exactly len bytes, all `byte`. */
static void expect_stream_of(int fd, size_t len, unsigned char byte)
{
	unsigned char buf[65536];
	size_t got = 0;

	for (;;) {
		ssize_t n;

		ck_assert_msg(tu_wait_readable(fd), "the stream did not end");
		n = read(fd, buf, sizeof(buf));
		ck_assert_int_ge(n, 0);
		if (!n)
			break;
		for (ssize_t i = 0; i < n; i++)
			ck_assert_msg(buf[i] == byte, "byte %zu of the stream is not what was sent",
				      got + (size_t)i);
		got += (size_t)n;
	}
	ck_assert_msg(got == len, "the peer got %zu bytes, %zu were sent", got, len);
}

/* ---- accept ---- */

/* fd, accepted from a listener at listen_addr with flags, is client's
   peer, with the flags asked for, and carries data. */
static void check_accepted(int fd, int client, const struct sockaddr_in *listen_addr, int flags)
{
	int fdfl = fcntl(fd, F_GETFD), fl = fcntl(fd, F_GETFL);
	char buf[8];

	tu_same_addr(tu_sock_addr(fd, true), tu_sock_addr(client, false),
		     "the accepted socket's peer against the client's own address");
	tu_same_addr(tu_sock_addr(fd, false), *listen_addr,
		     "the accepted socket's address against the listener's");
	ck_assert_int_ge(fdfl, 0);
	ck_assert_int_ge(fl, 0);
	ck_assert_msg(!(fdfl & FD_CLOEXEC) == !(flags & SOCK_CLOEXEC),
		      "accept(flags %#x) on %s: FD_CLOEXEC is %s", flags, tu_target_name(),
		      fdfl & FD_CLOEXEC ? "set" : "clear");
	ck_assert_msg(!(fl & O_NONBLOCK) == !(flags & SOCK_NONBLOCK),
		      "accept(flags %#x) on %s: O_NONBLOCK is %s", flags, tu_target_name(),
		      fl & O_NONBLOCK ? "set" : "clear");
	ck_assert_int_eq(write(client, "ping", 4), 4);
	ck_assert(tu_wait_readable(fd));
	ck_assert_int_eq(read(fd, buf, sizeof(buf)), 4);
	ck_assert(!memcmp(buf, "ping", 4));
}

/*
 * One accept that waits for its client, then three with the client already
 * queued, each with other flags.  _i: the listener is O_NONBLOCK (where the
 * pool may try accept4 in the caller) or not.
 */
START_TEST(test_accept)
{
	static const int flags[] = { SOCK_CLOEXEC, SOCK_NONBLOCK, 0, SOCK_NONBLOCK | SOCK_CLOEXEC };
	afio_ctx *ctx = tu_new_ctx();
	struct sockaddr_in addr;
	int l = tu_tcp_listener(8, _i, &addr);

	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		struct tu_done d = { 0 };
		int client = tu_tcp_socket(false), fd;

		tu_queued(afio_accept(ctx, l, flags[i], tu_on_done, &d), "accept");
		if (i == 0)
			tu_still_waiting(ctx, &d, "accept with no client");
		tu_connect_to(client, &addr);
		tu_wait_once(ctx, &d, "accept");
		fd = tu_expect_fd(d.res, "accept");
		check_accepted(fd, client, &addr, flags[i]);
		tu_no_second_callback(ctx, &d, "accept");
		close(fd);
		close(client);
	}
	afio_destroy(ctx);
	close(l);
}
END_TEST

/* Several accepts waiting on one listener: each takes its own connection
   (a readiness wake-up for all of them is not a connection for each). */
START_TEST(test_accept_several)
{
	enum { N = 3 };
	afio_ctx *ctx = tu_new_ctx();
	struct sockaddr_in addr;
	int l = tu_tcp_listener(8, _i, &addr), client[N], fd[N];
	struct tu_done d[N];
	struct pollfd pfd = { .fd = l, .events = POLLIN };

	memset(d, 0, sizeof(d));
	for (int i = 0; i < N; i++)
		tu_queued(afio_accept(ctx, l, SOCK_CLOEXEC, tu_on_done, &d[i]), "accept");
	tu_still_waiting(ctx, &d[0], "accept with no client");
	for (int i = 0; i < N; i++) {
		client[i] = tu_tcp_socket(false);
		tu_connect_to(client[i], &addr);
	}
	for (int i = 0; i < N; i++) {
		tu_wait_once(ctx, &d[i], "one of several accepts");
		fd[i] = tu_expect_fd(d[i].res, "one of several accepts");
	}
	/* Each client's connection came out of exactly one accept. */
	for (int c = 0; c < N; c++) {
		struct sockaddr_in mine = tu_sock_addr(client[c], false);
		int found = 0;

		for (int i = 0; i < N; i++) {
			struct sockaddr_in peer = tu_sock_addr(fd[i], true);

			found += peer.sin_port == mine.sin_port;
		}
		ck_assert_msg(found == 1, "client %d's connection came out of %d accepts on %s", c,
			      found, tu_target_name());
	}
	ck_assert_msg(poll(&pfd, 1, 0) == 0, "a connection was left over");
	for (int i = 0; i < N; i++) {
		close(fd[i]);
		close(client[i]);
	}
	afio_destroy(ctx);
	close(l);
}
END_TEST

START_TEST(test_accept_errors)
{
	afio_ctx *ctx = tu_new_ctx();
	int unlistened = tu_tcp_socket(_i), file = tu_new_file(0);
	struct sockaddr_in addr = tu_loopback();

	/* accept(2) on a socket that does not listen: EINVAL, bound or not. */
	TU_EXPECT(ctx, -EINVAL, afio_accept(ctx, unlistened, 0, tu_on_done, &d));
	ck_assert_int_eq(bind(unlistened, (struct sockaddr *)&addr, sizeof(addr)), 0);
	TU_EXPECT(ctx, -EINVAL, afio_accept(ctx, unlistened, SOCK_CLOEXEC, tu_on_done, &d));
	TU_EXPECT(ctx, -ENOTSOCK, afio_accept(ctx, file, 0, tu_on_done, &d));
	TU_EXPECT(ctx, -EBADF, afio_accept(ctx, tu_closed_fd(), 0, tu_on_done, &d));
	afio_destroy(ctx);
	close(unlistened);
	close(file);
}
END_TEST

/* ---- connect ---- */

/* _i: the connecting socket is O_NONBLOCK (connect(2) would say
   EINPROGRESS; the op waits for the end) or not. */
START_TEST(test_connect)
{
	afio_ctx *ctx = tu_new_ctx();
	struct sockaddr_in addr;
	int l = tu_tcp_listener(8, false, &addr), c = tu_tcp_socket(_i), s;
	struct tu_done a = { 0 }, k = { 0 };
	char buf[8];

	TU_EXPECT(ctx, 0,
		  afio_connect(ctx, c, (struct sockaddr *)&addr, sizeof(addr), tu_on_done, &d));
	s = tu_accept_now(l);
	tu_same_addr(tu_sock_addr(s, true), tu_sock_addr(c, false),
		     "the accepted peer against the connected socket's own address");
	tu_same_addr(tu_sock_addr(c, true), addr,
		     "the connected socket's peer against the listener");
	ck_assert_int_eq(write(c, "hi", 2), 2);
	ck_assert(tu_wait_readable(s));
	ck_assert_int_eq(read(s, buf, sizeof(buf)), 2);
	/* connect(2) on a connected socket: EISCONN. */
	TU_EXPECT(ctx, -EISCONN, afio_connect(ctx, c, (struct sockaddr *)&addr, sizeof(addr),
					      tu_on_done, &d));
	close(s);
	close(c);

	/* Both ends through the library at once. */
	c = tu_tcp_socket(_i);
	tu_queued(afio_accept(ctx, l, SOCK_CLOEXEC, tu_on_done, &a), "accept");
	tu_queued(afio_connect(ctx, c, (struct sockaddr *)&addr, sizeof(addr), tu_on_done, &k),
		  "connect");
	tu_wait_once(ctx, &a, "accept");
	tu_wait_once(ctx, &k, "connect");
	tu_expect_eq(k.res, 0, "connect");
	s = tu_expect_fd(a.res, "accept");
	tu_same_addr(tu_sock_addr(s, true), tu_sock_addr(c, false),
		     "accept's peer against connect's");
	close(s);
	close(c);
	afio_destroy(ctx);
	close(l);
}
END_TEST

/* The address length is the caller's: an AF_UNIX path, not a sockaddr_in. */
START_TEST(test_connect_unix)
{
	afio_ctx *ctx = tu_new_ctx();
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct tu_dir dir;
	socklen_t len;
	int l, c, s, cwd;

	tu_dir_make(&dir);
	/* Relative to the directory: sun_path is short. */
	cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(cwd, 0);
	ck_assert_int_eq(fchdir(dir.fd), 0);
	strcpy(sun.sun_path, "sock");
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(sun.sun_path) + 1);
	l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(bind(l, (struct sockaddr *)&sun, len), 0);
	ck_assert_int_eq(listen(l, 4), 0);
	c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (_i ? SOCK_NONBLOCK : 0), 0);
	TU_EXPECT(ctx, 0, afio_connect(ctx, c, (struct sockaddr *)&sun, len, tu_on_done, &d));
	s = tu_accept_now(l);
	ck_assert_int_eq(write(c, "u", 1), 1);
	ck_assert(tu_wait_readable(s));
	/* A path nobody is bound to: ENOENT, as connect(2) says. */
	close(c);
	c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	strcpy(sun.sun_path, "nobody");
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(sun.sun_path) + 1);
	TU_EXPECT(ctx, -ENOENT, afio_connect(ctx, c, (struct sockaddr *)&sun, len, tu_on_done, &d));
	afio_destroy(ctx);
	close(s);
	close(c);
	close(l);
	ck_assert_int_eq(fchdir(cwd), 0);
	close(cwd);
	tu_dir_remove(&dir);
}
END_TEST

START_TEST(test_connect_errors)
{
	afio_ctx *ctx = tu_new_ctx();
	struct sockaddr_in addr;
	int keep = refusing_port(&addr), c = tu_tcp_socket(_i), file = tu_new_file(0);

	TU_EXPECT(ctx, -ECONNREFUSED, afio_connect(ctx, c, (struct sockaddr *)&addr, sizeof(addr),
						   tu_on_done, &d));
	TU_EXPECT(ctx, -EBADF,
		  afio_connect(ctx, tu_closed_fd(), (struct sockaddr *)&addr, sizeof(addr),
			       tu_on_done, &d));
	TU_EXPECT(ctx, -ENOTSOCK, afio_connect(ctx, file, (struct sockaddr *)&addr, sizeof(addr),
					       tu_on_done, &d));
	close(c);
	/* A length too short for the family: connect(2) says EINVAL. */
	c = tu_tcp_socket(_i);
	TU_EITHER(ctx, -EINVAL, afio_connect(ctx, c, (struct sockaddr *)&addr, 2, tu_on_done, &d));
	afio_destroy(ctx);
	close(c);
	close(keep);
	close(file);
}
END_TEST

/*
 * A connection the program started itself on a non-blocking socket
 * (connect(2): EINPROGRESS) to a listener whose full queue drops its SYN:
 * the connect completes when that connection is made (_i 0: the queue
 * has room when the SYN is sent again, after a second) or has failed (_i
 * 1: nothing listens then), as connect(2) on a blocking socket would,
 * not at once with EALREADY; the same on every backend.
 */
START_TEST(test_connect_under_way)
{
	afio_ctx *ctx = tu_new_ctx();
	struct sockaddr_in addr;
	int first, l = tu_full_listener(&addr, &first), c = tu_tcp_socket(true), s;
	struct tu_done k = { 0 };

	ck_assert_int_eq(connect(c, (struct sockaddr *)&addr, sizeof(addr)), -1);
	ck_assert_int_eq(errno, EINPROGRESS);
	tu_queued(afio_connect(ctx, c, (struct sockaddr *)&addr, sizeof(addr), tu_on_done, &k),
		  "connect under way");
	ck_assert_int_ge(afio_poll(ctx, 0, 0), 0);
	if (_i) {
		close(l);
		l = -1;
	} else {
		close(tu_accept_now(l));
	}
	tu_wait_once(ctx, &k, "connect under way");
	tu_expect_eq(k.res, _i ? -ECONNREFUSED : 0, "connect under way");
	if (!_i) {
		s = tu_accept_now(l);
		tu_same_addr(tu_sock_addr(s, true), tu_sock_addr(c, false), "the connection made");
		close(s);
		close(l);
	}
	afio_destroy(ctx);
	close(c);
	close(first);
}
END_TEST

/* ---- sendmsg, recvmsg ---- */

START_TEST(test_msg_stream)
{
	afio_ctx *ctx = tu_new_ctx();
	struct iovec out[] = { { "hello ", 6 }, { "world", 5 } };
	struct msghdr smsg = { .msg_iov = out, .msg_iovlen = 2 };
	char a[4], b[20], peek[16] = "";
	struct iovec in[] = { { a, sizeof(a) }, { b, sizeof(b) } };
	struct iovec pin = { peek, sizeof(peek) };
	struct msghdr rmsg = { .msg_iov = in, .msg_iovlen = 2 };
	struct msghdr pmsg = { .msg_iov = &pin, .msg_iovlen = 1 };
	struct tu_done r = { 0 }, r2 = { 0 };
	int sv[2];

	tu_socketpair(sv);
	if (_i) {
		tu_set_nonblock(sv[0], true);
		tu_set_nonblock(sv[1], true);
	}
	/* A recvmsg that waits for the data, and one that peeks. */
	rmsg.msg_flags = MSG_TRUNC | MSG_CTRUNC | MSG_EOR;
	tu_queued(afio_recvmsg(ctx, sv[1], &pmsg, MSG_PEEK, tu_on_done, &r), "recvmsg(MSG_PEEK)");
	tu_still_waiting(ctx, &r, "recvmsg with no data");
	TU_EXPECT(ctx, 11, afio_sendmsg(ctx, sv[0], &smsg, 0, tu_on_done, &d));
	tu_wait_once(ctx, &r, "recvmsg(MSG_PEEK)");
	tu_expect_eq(r.res, 11, "recvmsg(MSG_PEEK)");
	ck_assert(!memcmp(peek, "hello world", 11));
	TU_EXPECT(ctx, 11, afio_recvmsg(ctx, sv[1], &rmsg, 0, tu_on_done, &d));
	ck_assert(!memcmp(a, "hell", 4));
	ck_assert(!memcmp(b, "o world", 7));
	ck_assert_msg(rmsg.msg_flags == 0, "recvmsg on %s left msg_flags %#x", tu_target_name(),
		      (unsigned)rmsg.msg_flags);

	/* To a closed peer: EPIPE (MSG_NOSIGNAL: no SIGPIPE for this test);
	   from one: the end of the stream, 0.  Shut down first: io_uring's
	   reference to the socket may go after the completion, and close()
	   reaches the peer only with the last one. */
	shutdown(sv[1], SHUT_RDWR);
	close(sv[1]);
	TU_EXPECT(ctx, -EPIPE, afio_sendmsg(ctx, sv[0], &smsg, MSG_NOSIGNAL, tu_on_done, &d));
	close(sv[0]);
	tu_socketpair(sv);
	tu_set_nonblock(sv[1], _i);
	tu_queued(afio_recvmsg(ctx, sv[1], &rmsg, 0, tu_on_done, &r2), "recvmsg");
	tu_still_waiting(ctx, &r2, "recvmsg with no data");
	close(sv[0]);
	tu_wait_once(ctx, &r2, "recvmsg at the end of the stream");
	tu_expect_eq(r2.res, 0, "recvmsg at the end of the stream");
	afio_destroy(ctx);
	close(sv[1]);
}
END_TEST

/* What recvmsg(2) wrote back, to set against the library's. */
static void same_msg_result(const struct msghdr *got, ssize_t got_res, const struct msghdr *want,
			    ssize_t want_res, const char *what)
{
	tu_expect_eq(got_res, want_res, what);
	ck_assert_msg(got->msg_flags == want->msg_flags,
		      "%s on %s: msg_flags %#x, recvmsg(2) says %#x", what, tu_target_name(),
		      (unsigned)got->msg_flags, (unsigned)want->msg_flags);
	ck_assert_msg(got->msg_controllen == want->msg_controllen,
		      "%s on %s: msg_controllen %zu, recvmsg(2) says %zu", what, tu_target_name(),
		      (size_t)got->msg_controllen, (size_t)want->msg_controllen);
	ck_assert_msg(got->msg_namelen == want->msg_namelen,
		      "%s on %s: msg_namelen %u, recvmsg(2) says %u", what, tu_target_name(),
		      (unsigned)got->msg_namelen, (unsigned)want->msg_namelen);
}

/*
 * A datagram or packet longer than the buffer: the rest is lost and
 * msg_flags says MSG_TRUNC; with MSG_TRUNC in flags the result is the real
 * length.  Set against recvmsg(2) on an identical message.  _i: datagram
 * or sequenced packets.
 */
START_TEST(test_msg_trunc)
{
	afio_ctx *ctx = tu_new_ctx();
	unsigned char msg[100], small[10];
	struct sockaddr_un name[2];
	struct iovec iov[2] = { { small, sizeof(small) }, { small, sizeof(small) } };
	struct msghdr ref = { .msg_name = &name[0], .msg_namelen = sizeof(name[0]),
			      .msg_iov = &iov[0], .msg_iovlen = 1 };
	struct msghdr got = { .msg_name = &name[1], .msg_namelen = sizeof(name[1]),
			      .msg_iov = &iov[1], .msg_iovlen = 1 };
	ssize_t ref_res;
	int sv[2];

	ck_assert_int_eq(socketpair(AF_UNIX, (_i ? SOCK_SEQPACKET : SOCK_DGRAM) | SOCK_CLOEXEC, 0,
				    sv), 0);
	memset(msg, 'm', sizeof(msg));
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(send(sv[0], msg, sizeof(msg), 0), sizeof(msg));
	ref_res = tu_sys_res(recvmsg(sv[1], &ref, 0));
	ck_assert_int_eq(ref_res, sizeof(small));
	ck_assert(ref.msg_flags & MSG_TRUNC);
	got.msg_flags = MSG_EOR;
	TU_EXPECT(ctx, sizeof(small), afio_recvmsg(ctx, sv[1], &got, 0, tu_on_done, &d));
	same_msg_result(&got, (ssize_t)sizeof(small), &ref, ref_res, "recvmsg into a short buffer");

	ref.msg_namelen = got.msg_namelen = sizeof(name[0]);
	ref_res = tu_sys_res(recvmsg(sv[1], &ref, MSG_TRUNC));
	ck_assert_int_eq(ref_res, sizeof(msg));
	got.msg_flags = 0;
	TU_EXPECT(ctx, sizeof(msg), afio_recvmsg(ctx, sv[1], &got, MSG_TRUNC, tu_on_done, &d));
	same_msg_result(&got, (ssize_t)sizeof(msg), &ref, ref_res, "recvmsg(MSG_TRUNC)");
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* A datagram to an address in msg_name; recvmsg writes back the sender's
   address and its length, waiting for it or not. */
START_TEST(test_msg_udp_address)
{
	afio_ctx *ctx = tu_new_ctx();
	int a = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int b = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | (_i ? SOCK_NONBLOCK : 0), 0);
	struct sockaddr_in addr_a = tu_loopback(), addr_b = tu_loopback();
	struct sockaddr_storage from;
	char in[16] = "";
	struct iovec out = { "datagram", 8 }, iov = { in, sizeof(in) };
	struct msghdr smsg = { .msg_name = &addr_b, .msg_namelen = sizeof(addr_b),
			       .msg_iov = &out, .msg_iovlen = 1 };
	struct msghdr rmsg = { .msg_name = &from, .msg_namelen = sizeof(from),
			       .msg_iov = &iov, .msg_iovlen = 1 };
	struct tu_done r = { 0 };

	ck_assert_int_eq(bind(a, (struct sockaddr *)&addr_a, sizeof(addr_a)), 0);
	ck_assert_int_eq(bind(b, (struct sockaddr *)&addr_b, sizeof(addr_b)), 0);
	addr_a = tu_sock_addr(a, false);
	addr_b = tu_sock_addr(b, false);
	for (int round = 0; round < 2; round++) {
		memset(&from, 0, sizeof(from));
		rmsg.msg_namelen = sizeof(from);
		r.calls = 0;
		tu_queued(afio_recvmsg(ctx, b, &rmsg, 0, tu_on_done, &r), "recvmsg");
		if (round == 0)
			tu_still_waiting(ctx, &r, "recvmsg with no datagram");
		TU_EXPECT(ctx, 8, afio_sendmsg(ctx, a, &smsg, 0, tu_on_done, &d));
		tu_wait_once(ctx, &r, "recvmsg");
		tu_expect_eq(r.res, 8, "recvmsg");
		ck_assert(!memcmp(in, "datagram", 8));
		ck_assert_msg(rmsg.msg_namelen == sizeof(struct sockaddr_in),
			      "recvmsg on %s: msg_namelen %u", tu_target_name(),
			      (unsigned)rmsg.msg_namelen);
		tu_same_addr(*(struct sockaddr_in *)&from, addr_a, "recvmsg's msg_name");
	}
	afio_destroy(ctx);
	close(a);
	close(b);
}
END_TEST

/* Several recvmsg waiting on one datagram socket: each gets one datagram,
   none twice. */
START_TEST(test_msg_several)
{
	enum { N = 3 };
	afio_ctx *ctx = tu_new_ctx();
	char in[N][8];
	struct iovec iov[N];
	struct msghdr m[N];
	struct tu_done d[N];
	unsigned seen = 0;
	int sv[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv), 0);
	tu_set_nonblock(sv[1], _i);
	memset(d, 0, sizeof(d));
	for (int i = 0; i < N; i++) {
		iov[i] = (struct iovec){ in[i], sizeof(in[i]) };
		m[i] = (struct msghdr){ .msg_iov = &iov[i], .msg_iovlen = 1 };
		tu_queued(afio_recvmsg(ctx, sv[1], &m[i], 0, tu_on_done, &d[i]), "recvmsg");
	}
	tu_still_waiting(ctx, &d[0], "recvmsg with no datagram");
	for (int i = 0; i < N; i++) {
		char msg = (char)('0' + i);

		ck_assert_int_eq(send(sv[0], &msg, 1, 0), 1);
	}
	for (int i = 0; i < N; i++) {
		tu_wait_once(ctx, &d[i], "one of several recvmsg");
		tu_expect_eq(d[i].res, 1, "one of several recvmsg");
		ck_assert(in[i][0] >= '0' && in[i][0] < '0' + N);
		ck_assert_msg(!(seen & 1u << (in[i][0] - '0')), "datagram %c received twice on %s",
			      in[i][0], tu_target_name());
		seen |= 1u << (in[i][0] - '0');
	}
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

union fd_control {
	struct cmsghdr align;
	char buf[2 * CMSG_SPACE(sizeof(int))];
};

/* A one-byte message carrying fd (SCM_RIGHTS). */
static void fd_message(struct msghdr *m, struct iovec *iov, union fd_control *ctl, int fd)
{
	struct cmsghdr *c;

	memset(ctl, 0, sizeof(*ctl));
	*iov = (struct iovec){ "F", 1 };
	*m = (struct msghdr){ .msg_iov = iov, .msg_iovlen = 1, .msg_control = ctl->buf,
			      .msg_controllen = CMSG_SPACE(sizeof(int)) };
	c = CMSG_FIRSTHDR(m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
}

/* Room for one byte and ctl_len bytes of control data. */
static void recv_message(struct msghdr *m, struct iovec *iov, char *byte, union fd_control *ctl,
			 size_t ctl_len)
{
	memset(ctl, 0, sizeof(*ctl));
	*iov = (struct iovec){ byte, 1 };
	*m = (struct msghdr){ .msg_iov = iov, .msg_iovlen = 1, .msg_control = ctl->buf,
			      .msg_controllen = ctl_len };
}

static int received_fd(struct msghdr *m)
{
	struct cmsghdr *c = CMSG_FIRSTHDR(m);
	int fd;

	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(c->cmsg_level, SOL_SOCKET);
	ck_assert_int_eq(c->cmsg_type, SCM_RIGHTS);
	ck_assert_int_eq(c->cmsg_len, CMSG_LEN(sizeof(int)));
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

/*
 * An fd passed through sendmsg and recvmsg: the received one is the same
 * file, MSG_CMSG_CLOEXEC honoured, msg_controllen and msg_flags as
 * recvmsg(2) gives them; a control buffer too small for it: MSG_CTRUNC.
 */
START_TEST(test_msg_scm_rights)
{
	afio_ctx *ctx = tu_new_ctx();
	int file = tu_new_file(0), sv[2], got_fd, ref_fd;
	union fd_control sctl, rctl, refctl;
	struct msghdr smsg, rmsg, ref;
	struct iovec siov, riov, refiov;
	char byte = 0, refbyte = 0;
	struct stat want = tu_stat_fd(file);
	struct tu_done r = { 0 };
	ssize_t ref_res;

	tu_socketpair(sv);
	/* What the system does, for reference. */
	fd_message(&smsg, &siov, &sctl, file);
	ck_assert_int_eq(sendmsg(sv[0], &smsg, 0), 1);
	recv_message(&ref, &refiov, &refbyte, &refctl, sizeof(refctl.buf));
	ref_res = tu_sys_res(recvmsg(sv[1], &ref, MSG_CMSG_CLOEXEC));
	ck_assert_int_eq(ref_res, 1);
	ref_fd = received_fd(&ref);

	/* The same through the library, the recvmsg waiting first. */
	recv_message(&rmsg, &riov, &byte, &rctl, sizeof(rctl.buf));
	rmsg.msg_flags = MSG_TRUNC;
	tu_queued(afio_recvmsg(ctx, sv[1], &rmsg, MSG_CMSG_CLOEXEC, tu_on_done, &r), "recvmsg");
	tu_still_waiting(ctx, &r, "recvmsg with no message");
	fd_message(&smsg, &siov, &sctl, file);
	TU_EXPECT(ctx, 1, afio_sendmsg(ctx, sv[0], &smsg, 0, tu_on_done, &d));
	tu_wait_once(ctx, &r, "recvmsg");
	same_msg_result(&rmsg, r.res, &ref, ref_res, "recvmsg of SCM_RIGHTS");
	ck_assert_int_eq(byte, 'F');
	got_fd = received_fd(&rmsg);
	ck_assert_msg(tu_same_file(got_fd, &want), "the fd received is not the file sent");
	ck_assert_msg(fcntl(got_fd, F_GETFD) == FD_CLOEXEC,
		      "recvmsg(MSG_CMSG_CLOEXEC) on %s: no FD_CLOEXEC", tu_target_name());
	close(got_fd);
	close(ref_fd);

	/* No room for the fd: MSG_CTRUNC, as recvmsg(2) says. */
	fd_message(&smsg, &siov, &sctl, file);
	ck_assert_int_eq(sendmsg(sv[0], &smsg, 0), 1);
	recv_message(&ref, &refiov, &refbyte, &refctl, sizeof(struct cmsghdr));
	ref_res = tu_sys_res(recvmsg(sv[1], &ref, 0));
	ck_assert(ref.msg_flags & MSG_CTRUNC);
	TU_EXPECT(ctx, 1, afio_sendmsg(ctx, sv[0], &smsg, 0, tu_on_done, &d));
	recv_message(&rmsg, &riov, &byte, &rctl, sizeof(struct cmsghdr));
	TU_EXPECT(ctx, 1, afio_recvmsg(ctx, sv[1], &rmsg, 0, tu_on_done, &d));
	same_msg_result(&rmsg, 1, &ref, ref_res, "recvmsg with no room for the fd");
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
	close(file);
}
END_TEST

START_TEST(test_msg_errors)
{
	afio_ctx *ctx = tu_new_ctx();
	char buf[4];
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	int file = tu_new_file(0), fd = tu_closed_fd();

	TU_EXPECT(ctx, -EBADF, afio_sendmsg(ctx, fd, &m, 0, tu_on_done, &d));
	TU_EXPECT(ctx, -EBADF, afio_recvmsg(ctx, fd, &m, 0, tu_on_done, &d));
	TU_EXPECT(ctx, -ENOTSOCK, afio_sendmsg(ctx, file, &m, 0, tu_on_done, &d));
	TU_EXPECT(ctx, -ENOTSOCK, afio_recvmsg(ctx, file, &m, 0, tu_on_done, &d));
	afio_destroy(ctx);
	close(file);
}
END_TEST

/* ---- sendfile ---- */

#define BIG_FILE (4u << 20)

/*
 * A 4 MiB file over TCP loopback, in as many sendfiles as it takes, read by
 * a thread: the peer gets the file byte for byte and nothing more, and the
 * file position stays where it was.  _i: the socket is O_NONBLOCK.
 */
START_TEST(test_sendfile_tcp)
{
	unsigned char *bytes = tu_random_bytes(BIG_FILE, 42);
	afio_ctx *ctx = tu_new_ctx();
	int file = tu_data_file(bytes, BIG_FILE), client, server;
	struct tu_reader r;
	unsigned rounds;

	tcp_pair(&client, &server);
	if (_i)
		tu_set_nonblock(client, true);
	ck_assert_int_eq(lseek(file, 777, SEEK_SET), 777);
	tu_reader_start(&r, server, BIG_FILE);
	rounds = tu_sendfile_all(ctx, client, file, 0, BIG_FILE);
	ck_assert_int_eq(shutdown(client, SHUT_WR), 0);
	tu_reader_join(&r);
	ck_assert_msg(r.got == BIG_FILE, "the peer got %zu bytes of %u (%u sendfiles)", r.got,
		      BIG_FILE, rounds);
	ck_assert_msg(!memcmp(r.buf, bytes, BIG_FILE), "the peer got other bytes than the file's");
	ck_assert_msg(lseek(file, 0, SEEK_CUR) == 777,
		      "sendfile on %s moved the file position to %lld", tu_target_name(),
		      (long long)lseek(file, 0, SEEK_CUR));
	afio_destroy(ctx);
	free(r.buf);
	free(bytes);
	close(file);
	close(client);
	close(server);
}
END_TEST

/* Ranges: from an offset, past the end (a short count), at the end (0). */
START_TEST(test_sendfile_ranges)
{
	enum { LEN = 100000 };
	unsigned char *bytes = tu_random_bytes(LEN, 7);
	afio_ctx *ctx = tu_new_ctx();
	int file = tu_data_file(bytes, LEN), client, server;

	tcp_pair(&client, &server);
	if (_i)
		tu_set_nonblock(client, true);
	tu_sendfile_all(ctx, client, file, 1000, 5000);
	tu_expect_bytes(server, bytes + 1000, 5000);
	/* Asked for more than is left: the rest, then 0 at the end. */
	tu_sendfile_all(ctx, client, file, LEN - 10, 10);
	tu_expect_bytes(server, bytes + LEN - 10, 10);
	{
		ssize_t res = TU_RUN(ctx, afio_sendfile(ctx, client, file, LEN - 10, 100,
							tu_on_done, &d));

		ck_assert_msg(res > 0 && res <= 10, "sendfile over the end on %s: %s",
			      tu_target_name(), tu_res_str(res));
		tu_expect_bytes(server, bytes + LEN - 10, (size_t)res);
	}
	TU_EXPECT(ctx, 0, afio_sendfile(ctx, client, file, LEN, 100, tu_on_done, &d));
	TU_EXPECT(ctx, 0, afio_sendfile(ctx, client, file, LEN + 4096, 100, tu_on_done, &d));
	afio_destroy(ctx);
	free(bytes);
	close(file);
	close(client);
	close(server);
}
END_TEST

START_TEST(test_sendfile_errors)
{
	afio_ctx *ctx = tu_new_ctx();
	int file = tu_new_file(0), sv[2], other[2], wronly;
	char path[64];
	off_t off = 0;
	ssize_t want;

	ck_assert_int_eq(pwrite(file, "abc", 3, 0), 3);
	tu_socketpair(sv);
	tu_socketpair(other);
	TU_EXPECT(ctx, -EBADF, afio_sendfile(ctx, tu_closed_fd(), file, 0, 3, tu_on_done, &d));
	TU_EXPECT(ctx, -EBADF, afio_sendfile(ctx, sv[0], tu_closed_fd(), 0, 3, tu_on_done, &d));
	/* A file not open for reading: EBADF, as sendfile(2) says. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", file);
	wronly = open(path, O_WRONLY | O_CLOEXEC);
	ck_assert_int_ge(wronly, 0);
	want = tu_sys_res(sendfile(sv[0], wronly, &off, 3));
	ck_assert_int_lt(want, 0);
	TU_EXPECT(ctx, want, afio_sendfile(ctx, sv[0], wronly, 0, 3, tu_on_done, &d));
	/* Bytes from a socket, which has no offsets: what sendfile(2) says. */
	ck_assert_int_eq(write(other[1], "xyz", 3), 3);
	off = 0;
	want = tu_sys_res(sendfile(sv[0], other[0], &off, 3));
	ck_assert_int_lt(want, 0);
	TU_EXPECT(ctx, want, afio_sendfile(ctx, sv[0], other[0], 0, 3, tu_on_done, &d));
	afio_destroy(ctx);
	close(wronly);
	close(file);
	close(sv[0]);
	close(sv[1]);
	close(other[0]);
	close(other[1]);
}
END_TEST

static volatile sig_atomic_t sigpipes;

static void on_sigpipe(int sig)
{
	(void)sig;
	sigpipes++;
}

/*
 * "No request raises SIGPIPE" (asyncfio(7)), sendmsg without MSG_NOSIGNAL
 * and sendfile included, where sendfile(2) itself would raise it: -EPIPE
 * and no signal.  _i: the socket is O_NONBLOCK (tried in the caller).
 */
START_TEST(test_no_sigpipe)
{
	struct sigaction count = { .sa_handler = on_sigpipe }, old;
	afio_ctx *ctx = tu_new_ctx();
	struct iovec iov = { "x", 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	int file = tu_new_file(0), sv[2];

	ck_assert_int_eq(pwrite(file, "abc", 3, 0), 3);
	ck_assert_int_eq(sigaction(SIGPIPE, &count, &old), 0);
	sigpipes = 0;
	tu_socketpair(sv);
	tu_set_nonblock(sv[0], _i);
	close(sv[1]);
	TU_EXPECT(ctx, -EPIPE, afio_sendmsg(ctx, sv[0], &m, 0, tu_on_done, &d));
	ck_assert_msg(sigpipes == 0, "sendmsg on %s raised SIGPIPE", tu_target_name());
	TU_EXPECT(ctx, -EPIPE, afio_sendfile(ctx, sv[0], file, 0, 3, tu_on_done, &d));
	ck_assert_msg(sigpipes == 0, "sendfile on %s raised SIGPIPE", tu_target_name());
	ck_assert_int_eq(sigaction(SIGPIPE, &old, NULL), 0);
	afio_destroy(ctx);
	close(sv[0]);
	close(file);
}
END_TEST

/* ---- timers ---- */

struct stamp {
	struct tu_done d;	/* first: tu_on_done's data */
	int64_t at_ns;
};

static void on_stamp(void *data, ssize_t res)
{
	struct stamp *s = data;

	s->at_ns = tu_now_ns();
	tu_on_done(&s->d, res);
}

/* No sooner than asked; "seconds late" only as a hang bound. */
static void on_time(const struct stamp *s, int64_t start_ns, int64_t ms, const char *what)
{
	int64_t elapsed = s->at_ns - start_ns;

	ck_assert_msg(s->d.calls == 1, "%s on %s: %d callbacks", what, tu_target_name(),
		      s->d.calls);
	tu_expect_eq(s->d.res, -ETIME, what);
	ck_assert_msg(elapsed >= ms * TU_NS_PER_MS, "a %lld ms %s on %s fired after %lld us",
		      (long long)ms, what, tu_target_name(), (long long)(elapsed / 1000));
	ck_assert_msg(elapsed < ms * TU_NS_PER_MS + 2000 * TU_NS_PER_MS,
		      "a %lld ms %s on %s took %lld ms: it hung", (long long)ms, what,
		      tu_target_name(), (long long)(elapsed / TU_NS_PER_MS));
}

START_TEST(test_timeout)
{
	static const int64_t ms[] = { 20, 5, 12, 0 };
	enum { N = sizeof(ms) / sizeof(ms[0]) };
	afio_ctx *ctx = tu_new_ctx();
	struct stamp s[N];
	int64_t start;

	memset(s, 0, sizeof(s));
	start = tu_now_ns();
	for (int i = 0; i < N; i++)
		tu_queued(afio_timeout(ctx, (uint64_t)(ms[i] * TU_NS_PER_MS), on_stamp, &s[i]),
			  "timeout");
	for (int i = 0; i < N; i++)
		tu_wait_for(ctx, &s[i].d, "timeout");
	for (int i = 0; i < N; i++)
		on_time(&s[i], start, ms[i], "timer");
	/* One after another on the same context. */
	for (int i = 0; i < 3; i++) {
		memset(&s[0], 0, sizeof(s[0]));
		start = tu_now_ns();
		tu_queued(afio_timeout(ctx, 3 * TU_NS_PER_MS, on_stamp, &s[0]), "timeout");
		tu_wait_for(ctx, &s[0].d, "timeout");
		on_time(&s[0], start, 3, "timer");
	}
	afio_destroy(ctx);
}
END_TEST

/* A timer fires while a recv waits, and does not complete the recv. */
START_TEST(test_timeout_beside_io)
{
	afio_ctx *ctx = tu_new_ctx();
	struct tu_done r = { 0 };
	struct stamp s = { 0 };
	char in[8];
	int64_t start;
	int sv[2];

	tu_socketpair(sv);
	tu_queued(afio_recv(ctx, sv[1], in, sizeof(in), 0, tu_on_done, &r), "recv");
	start = tu_now_ns();
	tu_queued(afio_timeout(ctx, 10 * TU_NS_PER_MS, on_stamp, &s), "timeout");
	tu_wait_for(ctx, &s.d, "timeout");
	on_time(&s, start, 10, "timer");
	ck_assert_int_eq(r.calls, 0);
	ck_assert_int_eq(write(sv[0], "x", 1), 1);
	tu_wait_once(ctx, &r, "recv");
	tu_expect_eq(r.res, 1, "recv");
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/*
 * Many short timers, all canceled while some fire: each completes once,
 * -ETIME or -ECANCELED, and stats.canceled counts the second kind.
 */
START_TEST(test_timeout_cancel_race)
{
	enum { N = 200 };
	static struct tu_done d[N];
	afio_ctx *ctx = tu_ctx(tu_backend, tu_mode, 2 * N);
	unsigned seed = 5 + (unsigned)tu_mode;
	struct afio_stats st;
	uint64_t canceled = 0;

	memset(d, 0, sizeof(d));
	for (int i = 0; i < N; i++)
		tu_queued(afio_timeout(ctx, (uint64_t)(rand_r(&seed) % 3000) * 1000, tu_on_done,
				       &d[i]), "timeout");
	ck_assert_int_ge(afio_poll(ctx, N / 4, 1), 0);
	for (int i = 0; i < N; i++) {
		int ret = afio_cancel(ctx, &d[i]);

		/* One that fired but is not yet told may count either way. */
		ck_assert_msg(ret == -ENOENT || (ret == 1 && !d[i].calls),
			      "afio_cancel of timer %d (%d callbacks): %d", i, d[i].calls, ret);
	}
	tu_drain(ctx);
	for (int i = 0; i < N; i++) {
		ck_assert_msg(d[i].calls == 1, "timer %d on %s: %d callbacks", i, tu_target_name(),
			      d[i].calls);
		ck_assert_msg(d[i].res == -ETIME || d[i].res == -ECANCELED, "timer %d on %s: %s", i,
			      tu_target_name(), tu_res_str(d[i].res));
		canceled += d[i].res == -ECANCELED;
	}
	ck_assert_int_eq(afio_stats(ctx, &st), 0);
	ck_assert_uint_eq(st.canceled, canceled);
	ck_assert_uint_eq(st.in_flight, 0);
	ck_assert_uint_eq(st.completed, N);
	afio_destroy(ctx);
}
END_TEST

static void on_tick(void *data, ssize_t res);

struct ticker {
	afio_ctx *ctx;
	int ticks;
	int64_t queued_ns, fired_ns;
	ssize_t res;
	int early;	/* ticks that came before their time */
};

#define TICK_MS 10

static void tick_again(struct ticker *t)
{
	t->queued_ns = tu_now_ns();
	tu_queued(afio_timeout(t->ctx, TICK_MS * TU_NS_PER_MS, on_tick, t), "timeout");
}

static void on_tick(void *data, ssize_t res)
{
	struct ticker *t = data;

	t->fired_ns = tu_now_ns();
	t->res = res;
	t->early += t->fired_ns - t->queued_ns < TICK_MS * TU_NS_PER_MS;
	if (++t->ticks < 3 && res == -ETIME)
		tick_again(t);
}

/*
 * A program that watches only the eventfd, in its own epoll set, and calls
 * afio_poll(ctx, 0, 0) when it is readable (afio_submit() after it, for
 * what its callbacks queued): the timer fires through the eventfd, not
 * early, three times in a row.
 */
START_TEST(test_timeout_by_eventfd)
{
	afio_ctx *ctx = tu_new_ctx();
	int efd = afio_eventfd(ctx), ep = epoll_create1(EPOLL_CLOEXEC), idle = 0;
	struct epoll_event ev = { .events = EPOLLIN };
	struct ticker t = { .ctx = ctx };
	int64_t start = tu_now_ns();

	ck_assert_int_ge(efd, 0);
	ck_assert_int_ge(ep, 0);
	ck_assert_int_eq(epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev), 0);
	tick_again(&t);
	ck_assert_int_ge(afio_submit(ctx), 0);
	while (t.ticks < 3) {
		int64_t hang = tu_now_ns() + 2000 * TU_NS_PER_MS;
		int n, ran;

		/* EINTR: io_uring's task work for the owner thread interrupts
		   its waits, as a signal would; a program waits again. */
		do
			n = epoll_wait(ep, &ev, 1, 100);
		while ((n == 0 || (n < 0 && errno == EINTR)) && tu_now_ns() < hang);
		ck_assert_msg(n == 1, "tick %d on %s: the eventfd was not readable in 2 s: a hang",
			      t.ticks + 1, tu_target_name());
		ran = afio_poll(ctx, 0, 0);
		ck_assert_int_ge(ran, 0);
		ck_assert_int_ge(afio_submit(ctx), 0);
		/* Readable with nothing to run, over and over: a busy loop. */
		idle = ran ? 0 : idle + 1;
		ck_assert_msg(idle < 1000, "on %s the eventfd stays readable with nothing done",
			      tu_target_name());
	}
	ck_assert_msg(!t.early, "on %s %d of 3 ticks of %d ms came early", tu_target_name(),
		      t.early, TICK_MS);
	tu_expect_eq(t.res, -ETIME, "timer");
	ck_assert(t.fired_ns - start >= 3 * TICK_MS * TU_NS_PER_MS);
	close(ep);
	afio_destroy(ctx);
}
END_TEST

/* ---- openat, openat2, close ---- */

START_TEST(test_openat)
{
	afio_ctx *ctx = tu_new_ctx();
	mode_t old_mask = umask(027);
	struct tu_dir dir;
	struct stat st;
	char buf[8] = "";
	int fd;

	tu_dir_make(&dir);
	fd = TU_RUN_FD(ctx, afio_openat(ctx, dir.fd, "new", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
					0666, tu_on_done, &d));
	st = stat_at(dir.fd, "new");
	ck_assert_msg(tu_same_file(fd, &st), "the fd opened is not the file created");
	ck_assert_msg((st.st_mode & 07777) == 0640, "created with mode %o (umask 027, mode 0666)",
		      (unsigned)(st.st_mode & 07777));
	ck_assert_int_eq(fcntl(fd, F_GETFD), FD_CLOEXEC);
	ck_assert_int_eq(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDWR);
	ck_assert_int_eq(write(fd, "data", 4), 4);
	close(fd);

	/* Without O_CLOEXEC, read-only, by absolute path from AT_FDCWD. */
	fd = TU_RUN_FD(ctx, afio_openat(ctx, AT_FDCWD, tdir_abs(&dir, "new"), O_RDONLY, 0,
					tu_on_done, &d));
	ck_assert_int_eq(fcntl(fd, F_GETFD), 0);
	ck_assert_int_eq(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
	ck_assert_int_eq(read(fd, buf, sizeof(buf)), 4);
	ck_assert(!memcmp(buf, "data", 4));
	close(fd);

	TU_EXPECT(ctx, -ENOENT, afio_openat(ctx, dir.fd, "missing", O_RDONLY, 0, tu_on_done, &d));
	TU_EXPECT(ctx, -EEXIST, afio_openat(ctx, dir.fd, "new", O_RDWR | O_CREAT | O_EXCL, 0600,
					    tu_on_done, &d));
	TU_EXPECT(ctx, -ENOTDIR, afio_openat(ctx, dir.fd, "new/x", O_RDONLY, 0, tu_on_done, &d));
	TU_EXPECT(ctx, -EBADF,
		  afio_openat(ctx, tu_closed_fd(), "new", O_RDONLY, 0, tu_on_done, &d));
	umask(old_mask);
	afio_destroy(ctx);
	tu_dir_remove(&dir);
}
END_TEST

START_TEST(test_openat2)
{
	afio_ctx *ctx = tu_new_ctx();
	struct open_how how;
	struct tu_dir dir;
	struct stat st;
	int sub, fd;

	tu_dir_make(&dir);
	tu_put_file(dir.fd, "x", "outside");
	sub = make_dir(dir.fd, "sub");
	tu_put_file(sub, "f", "inside");
	ck_assert_int_eq(symlinkat("f", sub, "link"), 0);

	how = tu_how_of(O_RDONLY | O_CLOEXEC, 0, RESOLVE_BENEATH);
	fd = TU_RUN_FD(ctx, afio_openat2(ctx, sub, "f", &how, tu_on_done, &d));
	st = stat_at(sub, "f");
	ck_assert(tu_same_file(fd, &st));
	ck_assert_int_eq(fcntl(fd, F_GETFD), FD_CLOEXEC);
	close(fd);
	/* ".." that stays beneath is fine; one that leaves is EXDEV. */
	fd = TU_RUN_FD(ctx, afio_openat2(ctx, dir.fd, "sub/../sub/f", &how, tu_on_done, &d));
	ck_assert(tu_same_file(fd, &st));
	close(fd);
	TU_EXPECT(ctx, -EXDEV, afio_openat2(ctx, sub, "../x", &how, tu_on_done, &d));
	TU_EXPECT(ctx, -EXDEV, afio_openat2(ctx, sub, tdir_abs(&dir, "x"), &how, tu_on_done, &d));
	how = tu_how_of(O_RDONLY, 0, RESOLVE_NO_SYMLINKS);
	TU_EXPECT(ctx, -ELOOP, afio_openat2(ctx, sub, "link", &how, tu_on_done, &d));

	/* how->mode for O_CREAT, under the umask. */
	{
		mode_t old_mask = umask(022);

		how = tu_how_of(O_WRONLY | O_CREAT | O_EXCL, 0604, 0);
		fd = TU_RUN_FD(ctx, afio_openat2(ctx, sub, "made", &how, tu_on_done, &d));
		umask(old_mask);
		st = stat_at(sub, "made");
		ck_assert(tu_same_file(fd, &st));
		ck_assert_int_eq(st.st_mode & 07777, 0604);
		close(fd);
	}
	/* The caller's RESOLVE_CACHED is kept, wherever the op runs: with
	   O_CREAT or O_TRUNC openat2(2) gives EAGAIN and does nothing. */
	how = tu_how_of(O_RDWR | O_CREAT, 0600, RESOLVE_CACHED);
	TU_EXPECT(ctx, -EAGAIN, afio_openat2(ctx, sub, "cached", &how, tu_on_done, &d));
	ck_assert_msg(!tu_exists_at(sub, "cached"),
		      "openat2(O_CREAT, RESOLVE_CACHED) on %s created it", tu_target_name());
	how = tu_how_of(O_RDWR | O_TRUNC, 0, RESOLVE_CACHED);
	TU_EXPECT(ctx, -EAGAIN, afio_openat2(ctx, sub, "f", &how, tu_on_done, &d));
	ck_assert_int_eq(stat_at(sub, "f").st_size, 6);

	how = tu_how_of(O_RDONLY, 0, 0);
	TU_EXPECT(ctx, -ENOENT, afio_openat2(ctx, sub, "missing", &how, tu_on_done, &d));
	fd = TU_RUN_FD(ctx, afio_openat2(ctx, AT_FDCWD, tdir_abs(&dir, "x"), &how, tu_on_done, &d));
	close(fd);
	TU_EXPECT(ctx, -EBADF, afio_openat2(ctx, tu_closed_fd(), "f", &how, tu_on_done, &d));
	/* What openat2(2) refuses: a mode without O_CREAT, an unknown
	   resolve bit. */
	how = tu_how_of(O_RDONLY, 0600, 0);
	TU_EITHER(ctx, -EINVAL, afio_openat2(ctx, sub, "f", &how, tu_on_done, &d));
	how = tu_how_of(O_RDONLY, 0, 1ull << 40);
	TU_EITHER(ctx, -EINVAL, afio_openat2(ctx, sub, "f", &how, tu_on_done, &d));
	afio_destroy(ctx);
	close(sub);
	tu_dir_remove(&dir);
}
END_TEST

START_TEST(test_close)
{
	afio_ctx *ctx = tu_new_ctx();
	int file = tu_new_file(0), sv[2], fd;
	struct stat st = tu_stat_fd(file);
	char c;

	fd = dup(file);
	ck_assert_int_ge(fd, 0);
	TU_EXPECT(ctx, 0, afio_close(ctx, fd, tu_on_done, &d));
	/* Closed: the number is free, or taken since by another file. */
	ck_assert_msg(fcntl(fd, F_GETFD) < 0 ? errno == EBADF : !tu_same_file(fd, &st),
		      "afio_close on %s left fd %d open", tu_target_name(), fd);
	tu_socketpair(sv);
	TU_EXPECT(ctx, 0, afio_close(ctx, sv[1], tu_on_done, &d));
	/* The peer sees the end of the stream. */
	ck_assert(tu_wait_readable(sv[0]));
	ck_assert_int_eq(read(sv[0], &c, 1), 0);
	TU_EXPECT(ctx, -EBADF, afio_close(ctx, tu_closed_fd(), tu_on_done, &d));
	afio_destroy(ctx);
	close(sv[0]);
	close(file);
}
END_TEST

/* ---- statx ---- */

#define STX_FIELD_EQ(a, b, f)								\
	ck_assert_msg((a)->f == (b)->f, "statx on %s: " #f " %llu, statx(2) says %llu",	\
		      tu_target_name(), (unsigned long long)(a)->f, (unsigned long long)(b)->f)

/* What statx(2) says for the same arguments, field by field, then all. */
static void same_statx(const struct statx *got, int dirfd, const char *path, int flags,
		       unsigned mask)
{
	struct statx want;

	memset(&want, 0x55, sizeof(want));
	ck_assert_int_eq(statx(dirfd, path, flags, mask, &want), 0);
	STX_FIELD_EQ(got, &want, stx_mask);
	STX_FIELD_EQ(got, &want, stx_mode);
	STX_FIELD_EQ(got, &want, stx_ino);
	STX_FIELD_EQ(got, &want, stx_size);
	STX_FIELD_EQ(got, &want, stx_blocks);
	STX_FIELD_EQ(got, &want, stx_nlink);
	STX_FIELD_EQ(got, &want, stx_uid);
	STX_FIELD_EQ(got, &want, stx_mtime.tv_sec);
	STX_FIELD_EQ(got, &want, stx_mtime.tv_nsec);
	STX_FIELD_EQ(got, &want, stx_btime.tv_nsec);
	STX_FIELD_EQ(got, &want, stx_dev_major);
	STX_FIELD_EQ(got, &want, stx_dev_minor);
	ck_assert_msg(!memcmp(got, &want, sizeof(want)), "statx on %s differs from statx(2)",
		      tu_target_name());
}

START_TEST(test_statx)
{
	const unsigned mask = STATX_BASIC_STATS | STATX_BTIME;
	afio_ctx *ctx = tu_new_ctx();
	struct statx stx;
	struct tu_dir dir;
	int fd;

	tu_dir_make(&dir);
	tu_put_file(dir.fd, "f", "twelve bytes");
	ck_assert_int_eq(symlinkat("f", dir.fd, "link"), 0);
	memset(&stx, 0xaa, sizeof(stx));
	TU_EXPECT(ctx, 0, afio_statx(ctx, dir.fd, "f", 0, mask, &stx, tu_on_done, &d));
	ck_assert_int_eq(stx.stx_size, 12);
	ck_assert(S_ISREG(stx.stx_mode));
	same_statx(&stx, dir.fd, "f", 0, mask);

	memset(&stx, 0xaa, sizeof(stx));
	TU_EXPECT(ctx, 0, afio_statx(ctx, dir.fd, "link", AT_SYMLINK_NOFOLLOW, mask, &stx,
				     tu_on_done, &d));
	ck_assert(S_ISLNK(stx.stx_mode));
	same_statx(&stx, dir.fd, "link", AT_SYMLINK_NOFOLLOW, mask);

	/* An fd with an empty path; AT_FDCWD with an absolute one. */
	fd = openat(dir.fd, "f", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	memset(&stx, 0xaa, sizeof(stx));
	TU_EXPECT(ctx, 0, afio_statx(ctx, fd, "", AT_EMPTY_PATH, STATX_SIZE, &stx, tu_on_done, &d));
	same_statx(&stx, fd, "", AT_EMPTY_PATH, STATX_SIZE);
	memset(&stx, 0xaa, sizeof(stx));
	TU_EXPECT(ctx, 0, afio_statx(ctx, AT_FDCWD, dir.path, 0, mask, &stx, tu_on_done, &d));
	ck_assert(S_ISDIR(stx.stx_mode));
	same_statx(&stx, AT_FDCWD, dir.path, 0, mask);

	TU_EXPECT(ctx, -ENOENT, afio_statx(ctx, dir.fd, "missing", 0, mask, &stx, tu_on_done, &d));
	TU_EXPECT(ctx, -EBADF, afio_statx(ctx, tu_closed_fd(), "f", 0, mask, &stx, tu_on_done, &d));
	/* Flags statx(2) does not know: its error, at once or later. */
	{
		struct statx tmp;
		ssize_t want = tu_sys_res(statx(dir.fd, "f", 0x40000000, mask, &tmp));

		ck_assert_int_lt(want, 0);
		TU_EITHER(ctx, want,
			  afio_statx(ctx, dir.fd, "f", 0x40000000, mask, &stx, tu_on_done, &d));
	}
	afio_destroy(ctx);
	close(fd);
	tu_dir_remove(&dir);
}
END_TEST

/* Through the library, then statx(2) with the same arguments: the same
   result, and on success the same fields. */
static void statx_as_system(afio_ctx *ctx, int dirfd, const char *path, int flags,
			    unsigned mask)
{
	struct statx got, want;
	ssize_t res = tu_sys_res(statx(dirfd, path, flags, mask, &want));

	memset(&got, 0xaa, sizeof(got));
	TU_EXPECT(ctx, res, afio_statx(ctx, dirfd, path, flags, mask, &got, tu_on_done, &d));
	if (!res)
		same_statx(&got, dirfd, path, flags, mask);
}

/*
 * The walk's answers, wherever the backend and mode do the call: through
 * a symlink to a directory, a dangling symlink followed or not, a loop, a
 * file used as a directory, a missing name twice (the second time from a
 * negative dentry in the cache), the sync types (AT_STATX_FORCE_SYNC asks
 * for a round trip, AT_STATX_DONT_SYNC for none), no automount, and an
 * fd with AT_SYMLINK_NOFOLLOW on a path through it.
 */
START_TEST(test_statx_walk)
{
	const unsigned mask = STATX_BASIC_STATS | STATX_BTIME;
	static const char *const paths[] = {
		"f", "dlink/g", "dlink", "dangling", "loop", "f/x", "missing", "missing",
		"sub/../f", "sub/", "f/", "",
	};
	static const int flag_sets[] = {
		0, AT_SYMLINK_NOFOLLOW, AT_STATX_FORCE_SYNC, AT_STATX_DONT_SYNC,
		AT_NO_AUTOMOUNT | AT_SYMLINK_NOFOLLOW, AT_EMPTY_PATH,
	};
	afio_ctx *ctx = tu_new_ctx();
	struct tu_dir dir;
	int sub;

	tu_dir_make(&dir);
	tu_put_file(dir.fd, "f", "twelve bytes");
	sub = make_dir(dir.fd, "sub");
	tu_put_file(sub, "g", "g");
	ck_assert_int_eq(symlinkat("sub", dir.fd, "dlink"), 0);
	ck_assert_int_eq(symlinkat("nowhere", dir.fd, "dangling"), 0);
	ck_assert_int_eq(symlinkat("loop", dir.fd, "loop"), 0);
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		for (size_t j = 0; j < sizeof(flag_sets) / sizeof(flag_sets[0]); j++)
			statx_as_system(ctx, dir.fd, paths[i], flag_sets[j], mask);
	statx_as_system(ctx, sub, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, mask);
	statx_as_system(ctx, sub, "../dangling", AT_SYMLINK_NOFOLLOW, STATX_ALL);
	afio_destroy(ctx);
	close(sub);
	tu_dir_remove(&dir);
}
END_TEST

/* ---- readv2, writev2 ---- */

/* A write with RWF_DSYNC leaves nothing of its range unwritten in the
   page cache (cachestat(2) says so where the kernel has it). */
static void expect_synced(int fd, uint64_t off, uint64_t len, const char *what)
{
	long pages = unsynced_pages(fd, off, len);

	ck_assert_msg(pages <= 0, "%s on %s: %ld pages still dirty or in writeback", what,
		      tu_target_name(), pages);
}

START_TEST(test_writev2_flags)
{
	afio_ctx *ctx = tu_new_ctx();
	unsigned char *a = tu_random_bytes(8192, 1), *b = tu_random_bytes(3000, 2);
	struct iovec iov[] = { { a, 8192 }, { b, 3000 } };
	unsigned char back[11192];
	int fd = tu_new_file(0);

	TU_EXPECT(ctx, 11192, afio_writev2(ctx, fd, iov, 2, 4096, RWF_DSYNC, tu_on_done, &d));
	read_whole(fd, back, sizeof(back), 4096);
	ck_assert(!memcmp(back, a, 8192) && !memcmp(back + 8192, b, 3000));
	expect_synced(fd, 4096, 11192, "writev2(RWF_DSYNC)");
	TU_EXPECT(ctx, 3000, afio_writev2(ctx, fd, &iov[1], 1, 0, RWF_SYNC, tu_on_done, &d));
	expect_synced(fd, 0, 3000, "writev2(RWF_SYNC)");

	/* RWF_APPEND: at the end whatever the offset, as pwritev2(2); the
	   file position stays. */
	ck_assert_int_eq(lseek(fd, 5, SEEK_SET), 5);
	TU_EXPECT(ctx, 3000, afio_writev2(ctx, fd, &iov[1], 1, 0, RWF_APPEND, tu_on_done, &d));
	ck_assert_int_eq(tu_stat_fd(fd).st_size, 4096 + 11192 + 3000);
	read_whole(fd, back, 3000, 4096 + 11192);
	ck_assert_msg(!memcmp(back, b, 3000), "writev2(RWF_APPEND) on %s did not append",
		      tu_target_name());
	read_whole(fd, back, 3000, 0);
	ck_assert_msg(!memcmp(back, b, 3000), "writev2(RWF_APPEND) on %s wrote at its offset",
		      tu_target_name());
	ck_assert_int_eq(lseek(fd, 0, SEEK_CUR), 5);
	afio_destroy(ctx);
	close(fd);
	free(a);
	free(b);
}
END_TEST

/* readv2 with rwf gives what preadv2(2) gives on this fd with rwf. */
static void readv2_like_preadv2(afio_ctx *ctx, int fd, void *buf, size_t len, uint64_t off,
				int rwf, const char *what)
{
	/* Aligned as buf is, for O_DIRECT. */
	unsigned char *want = aligned_alloc(4096, (len + 4095) / 4096 * 4096);
	struct iovec iov = { want, len };
	struct tu_done r = { 0 };
	ssize_t ref;

	ck_assert_ptr_nonnull(want);
	ref = tu_sys_res(preadv2(fd, &iov, 1, (off_t)off, rwf));
	memset(buf, 0, len);
	iov.iov_base = buf;
	tu_queued(afio_readv2(ctx, fd, &iov, 1, off, rwf, tu_on_done, &r), what);
	tu_wait_once(ctx, &r, what);
	ck_assert_msg(r.res == ref, "%s on %s: %s, preadv2(2) says %s", what, tu_target_name(),
		      tu_res_str(r.res), tu_res_str(ref));
	if (ref > 0)
		ck_assert_msg(!memcmp(buf, want, (size_t)ref), "%s on %s read other bytes", what,
			      tu_target_name());
	free(want);
}

START_TEST(test_readv2_flags)
{
	unsigned char *bytes = tu_random_bytes(20000, 3), buf[8192];
	afio_ctx *ctx = tu_new_ctx();
	int fd = tu_data_file(bytes, 20000);

	readv2_like_preadv2(ctx, fd, buf, sizeof(buf), 100, 0, "readv2");
	ck_assert(!memcmp(buf, bytes + 100, sizeof(buf)));
	/* A hint on a buffered file: the data, as without it. */
	readv2_like_preadv2(ctx, fd, buf, sizeof(buf), 4096, RWF_HIPRI, "readv2(RWF_HIPRI)");
	ck_assert(!memcmp(buf, bytes + 4096, sizeof(buf)));
	readv2_like_preadv2(ctx, fd, buf, sizeof(buf), 16000, RWF_HIPRI,
			    "readv2(RWF_HIPRI) at the end");
	readv2_like_preadv2(ctx, fd, buf, sizeof(buf), 30000, 0, "readv2 past the end");
	afio_destroy(ctx);
	close(fd);
	free(bytes);
}
END_TEST

/*
 * The same flags on an O_DIRECT file, aligned (where libaio runs readv2
 * and writev2 in the kernel): RWF_DSYNC, RWF_APPEND, RWF_HIPRI as
 * preadv2(2) does them on this fd.
 */
START_TEST(test_rwf_direct)
{
	int fd = tu_tmpfile(O_DIRECT);
	unsigned char *buf, *ref;
	afio_ctx *ctx;
	size_t blk, mem;
	struct iovec iov[2];

	if (fd == -EINVAL) {
		printf("no O_DIRECT in $AFIO_TEST_DIR: test_rwf_direct skipped\n");
		return;
	}
	ck_assert_int_ge(fd, 0);
	blk = tu_direct_block(fd, &mem);
	if (!blk) {
		printf("afio_dio_align: -EOPNOTSUPP: test_rwf_direct skipped\n");
		close(fd);
		return;
	}
	ctx = tu_new_ctx();
	buf = aligned_alloc(mem, 4 * blk);
	ref = tu_random_bytes(4 * blk, 11);
	ck_assert_ptr_nonnull(buf);
	memcpy(buf, ref, 4 * blk);
	/* Preallocated, so no write extends the file but the append. */
	ck_assert_int_eq(ftruncate(fd, (off_t)(2 * blk)), 0);
	iov[0] = (struct iovec){ buf, blk };
	iov[1] = (struct iovec){ buf + blk, blk };
	TU_EXPECT(ctx, 2 * blk, afio_writev2(ctx, fd, iov, 2, 0, RWF_DSYNC, tu_on_done, &d));
	iov[0] = (struct iovec){ buf + 2 * blk, blk };
	TU_EXPECT(ctx, blk, afio_writev2(ctx, fd, iov, 1, 0, RWF_APPEND, tu_on_done, &d));
	ck_assert_msg(tu_stat_fd(fd).st_size == (off_t)(3 * blk),
		      "writev2(RWF_APPEND) on O_DIRECT on %s: size %lld, want %zu",
		      tu_target_name(), (long long)tu_stat_fd(fd).st_size, 3 * blk);
	readv2_like_preadv2(ctx, fd, buf, 3 * blk, 0, RWF_HIPRI, "readv2(RWF_HIPRI) of O_DIRECT");
	ck_assert_msg(!memcmp(buf, ref, 3 * blk), "O_DIRECT file on %s holds other bytes",
		      tu_target_name());
	readv2_like_preadv2(ctx, fd, buf, blk, blk, 0, "readv2 of O_DIRECT");
	afio_destroy(ctx);
	free(buf);
	free(ref);
	close(fd);
}
END_TEST

START_TEST(test_rw2_errors)
{
	afio_ctx *ctx = tu_new_ctx();
	char buf[16];
	struct iovec iov = { buf, sizeof(buf) };
	int fd = tu_new_file(0), rdonly;
	char path[64];
	ssize_t want;

	TU_EXPECT(ctx, -EBADF, afio_readv2(ctx, tu_closed_fd(), &iov, 1, 0, 0, tu_on_done, &d));
	TU_EXPECT(ctx, -EBADF, afio_writev2(ctx, tu_closed_fd(), &iov, 1, 0, 0, tu_on_done, &d));
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rdonly = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(rdonly, 0);
	TU_EXPECT(ctx, -EBADF, afio_writev2(ctx, rdonly, &iov, 1, 0, 0, tu_on_done, &d));
	/* A flag preadv2(2) does not know: its error, at once or later. */
	want = tu_sys_res(preadv2(fd, &iov, 1, 0, 0x40000000));
	ck_assert_int_lt(want, 0);
	TU_EITHER(ctx, want, afio_readv2(ctx, fd, &iov, 1, 0, 0x40000000, tu_on_done, &d));
	afio_destroy(ctx);
	close(rdonly);
	close(fd);
}
END_TEST

/* ---- fallocate, ftruncate, sync_range ---- */

START_TEST(test_fallocate)
{
	afio_ctx *ctx = tu_new_ctx();
	int fd = tu_new_file(0), rdonly;
	unsigned char *bytes = tu_random_bytes(65536, 5), back[65536];
	struct stat st;
	char path[64];
	ssize_t want;

	TU_EXPECT(ctx, 0, afio_fallocate(ctx, fd, 0, 0, 1 << 20, tu_on_done, &d));
	st = tu_stat_fd(fd);
	ck_assert_msg(st.st_size == 1 << 20, "fallocate on %s: size %lld", tu_target_name(),
		      (long long)st.st_size);
	ck_assert_msg(st.st_blocks * 512 >= 1 << 20, "fallocate on %s: %lld blocks",
		      tu_target_name(), (long long)st.st_blocks);
	/* KEEP_SIZE: blocks beyond the end, the size as it was. */
	TU_EXPECT(ctx, 0, afio_fallocate(ctx, fd, FALLOC_FL_KEEP_SIZE, 1 << 20, 1 << 20, tu_on_done,
					 &d));
	st = tu_stat_fd(fd);
	ck_assert_int_eq(st.st_size, 1 << 20);
	ck_assert_msg(st.st_blocks * 512 >= 2 << 20, "fallocate(KEEP_SIZE) on %s: %lld blocks",
		      tu_target_name(), (long long)st.st_blocks);
	/* A hole punched in data reads as zeros. */
	ck_assert_int_eq(pwrite(fd, bytes, sizeof(back), 0), sizeof(back));
	TU_EXPECT(ctx, 0, afio_fallocate(ctx, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096,
					 8192, tu_on_done, &d));
	read_whole(fd, back, sizeof(back), 0);
	ck_assert(!memcmp(back, bytes, 4096));
	for (int i = 4096; i < 12288; i++)
		ck_assert_msg(!back[i], "fallocate(PUNCH_HOLE) on %s: byte %d is not 0",
			      tu_target_name(), i);
	ck_assert(!memcmp(back + 12288, bytes + 12288, sizeof(back) - 12288));
	ck_assert_int_eq(tu_stat_fd(fd).st_size, 1 << 20);

	/* Errors fallocate(2) gives: length 0, a mode it does not know, a
	   file not open for writing, a closed fd. */
	want = tu_sys_res(fallocate(fd, 0, 0, 0));
	ck_assert_int_lt(want, 0);
	TU_EITHER(ctx, want, afio_fallocate(ctx, fd, 0, 0, 0, tu_on_done, &d));
	want = tu_sys_res(fallocate(fd, 0x4000, 0, 4096));
	ck_assert_int_lt(want, 0);
	TU_EITHER(ctx, want, afio_fallocate(ctx, fd, 0x4000, 0, 4096, tu_on_done, &d));
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rdonly = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(rdonly, 0);
	TU_EXPECT(ctx, -EBADF, afio_fallocate(ctx, rdonly, 0, 0, 4096, tu_on_done, &d));
	TU_EXPECT(ctx, -EBADF, afio_fallocate(ctx, tu_closed_fd(), 0, 0, 4096, tu_on_done, &d));
	afio_destroy(ctx);
	close(rdonly);
	close(fd);
	free(bytes);
}
END_TEST

START_TEST(test_ftruncate)
{
	afio_ctx *ctx = tu_new_ctx();
	int fd = tu_new_file(0), rdonly, sv[2];
	char buf[16], path[64];
	ssize_t want;

	ck_assert_int_eq(pwrite(fd, "0123456789", 10, 0), 10);
	TU_EXPECT(ctx, 0, afio_ftruncate(ctx, fd, 12345, tu_on_done, &d));
	ck_assert_msg(tu_stat_fd(fd).st_size == 12345, "ftruncate on %s: size %lld",
		      tu_target_name(), (long long)tu_stat_fd(fd).st_size);
	read_whole(fd, buf, 10, 0);
	ck_assert(!memcmp(buf, "0123456789", 10));
	read_whole(fd, buf, 1, 12344);
	ck_assert_int_eq(buf[0], 0);
	TU_EXPECT(ctx, 0, afio_ftruncate(ctx, fd, 4, tu_on_done, &d));
	ck_assert_int_eq(tu_stat_fd(fd).st_size, 4);
	ck_assert_int_eq(pread(fd, buf, sizeof(buf), 0), 4);
	ck_assert(!memcmp(buf, "0123", 4));
	TU_EXPECT(ctx, 0, afio_ftruncate(ctx, fd, 0, tu_on_done, &d));
	ck_assert_int_eq(tu_stat_fd(fd).st_size, 0);

	/* What ftruncate(2) says for a read-only fd and a socket. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rdonly = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(rdonly, 0);
	want = tu_sys_res(ftruncate(rdonly, 1));
	ck_assert_int_lt(want, 0);
	TU_EXPECT(ctx, want, afio_ftruncate(ctx, rdonly, 1, tu_on_done, &d));
	tu_socketpair(sv);
	want = tu_sys_res(ftruncate(sv[0], 1));
	ck_assert_int_lt(want, 0);
	TU_EXPECT(ctx, want, afio_ftruncate(ctx, sv[0], 1, tu_on_done, &d));
	TU_EXPECT(ctx, -EBADF, afio_ftruncate(ctx, tu_closed_fd(), 1, tu_on_done, &d));
	ck_assert_int_eq(tu_stat_fd(fd).st_size, 0);
	afio_destroy(ctx);
	close(rdonly);
	close(fd);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

START_TEST(test_sync_range)
{
	const unsigned all = SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
			     SYNC_FILE_RANGE_WAIT_AFTER;
	unsigned char *bytes = tu_random_bytes(1 << 18, 9);
	afio_ctx *ctx = tu_new_ctx();
	int fd = tu_new_file(0);
	ssize_t want;

	ck_assert_int_eq(pwrite(fd, bytes, 1 << 18, 0), 1 << 18);
	TU_EXPECT(ctx, 0, afio_sync_range(ctx, fd, 0, 1 << 17, all, tu_on_done, &d));
	expect_synced(fd, 0, 1 << 17, "sync_range(WAIT_BEFORE|WRITE|WAIT_AFTER)");
	TU_EXPECT(ctx, 0,
		  afio_sync_range(ctx, fd, 1 << 17, 0, SYNC_FILE_RANGE_WRITE, tu_on_done, &d));
	TU_EXPECT(ctx, 0, afio_sync_range(ctx, fd, 1 << 17, 0, all, tu_on_done, &d));
	expect_synced(fd, 0, 1 << 18, "sync_range to the end (length 0)");
	want = tu_sys_res(sync_file_range(fd, 0, 0, 0x100));
	ck_assert_int_lt(want, 0);
	TU_EITHER(ctx, want, afio_sync_range(ctx, fd, 0, 0, 0x100, tu_on_done, &d));
	TU_EXPECT(ctx, -EBADF, afio_sync_range(ctx, tu_closed_fd(), 0, 0, all, tu_on_done, &d));
	afio_destroy(ctx);
	close(fd);
	free(bytes);
}
END_TEST

/* ---- renameat, unlinkat, mkdirat ---- */

START_TEST(test_renameat)
{
	afio_ctx *ctx = tu_new_ctx();
	struct tu_dir dir;
	struct stat a, b;
	int sub;

	tu_dir_make(&dir);
	tu_put_file(dir.fd, "a", "first");
	tu_put_file(dir.fd, "b", "second");
	sub = make_dir(dir.fd, "sub");
	a = stat_at(dir.fd, "a");
	b = stat_at(dir.fd, "b");

	/* Into another directory by its fd. */
	TU_EXPECT(ctx, 0, afio_renameat(ctx, dir.fd, "a", sub, "moved", 0, tu_on_done, &d));
	ck_assert(!tu_exists_at(dir.fd, "a"));
	ck_assert_int_eq(stat_at(sub, "moved").st_ino, a.st_ino);
	/* NOREPLACE onto a name that exists: EEXIST, both left alone. */
	TU_EXPECT(ctx, -EEXIST, afio_renameat(ctx, sub, "moved", dir.fd, "b", RENAME_NOREPLACE,
					      tu_on_done, &d));
	ck_assert_int_eq(stat_at(dir.fd, "b").st_ino, b.st_ino);
	ck_assert_int_eq(stat_at(sub, "moved").st_ino, a.st_ino);
	/* EXCHANGE swaps them. */
	TU_EXPECT(ctx, 0, afio_renameat(ctx, sub, "moved", dir.fd, "b", RENAME_EXCHANGE, tu_on_done,
					&d));
	ck_assert_int_eq(stat_at(dir.fd, "b").st_ino, a.st_ino);
	ck_assert_int_eq(stat_at(sub, "moved").st_ino, b.st_ino);
	/* Plain rename over an existing name replaces it; AT_FDCWD with
	   absolute paths. */
	TU_EXPECT(ctx, 0, afio_renameat(ctx, AT_FDCWD, tdir_abs(&dir, "b"), AT_FDCWD,
					tdir_abs(&dir, "sub/moved"), 0, tu_on_done, &d));
	ck_assert(!tu_exists_at(dir.fd, "b"));
	ck_assert_int_eq(stat_at(sub, "moved").st_ino, a.st_ino);

	TU_EXPECT(ctx, -ENOENT,
		  afio_renameat(ctx, dir.fd, "missing", dir.fd, "c", 0, tu_on_done, &d));
	TU_EXPECT(ctx, -EBADF,
		  afio_renameat(ctx, tu_closed_fd(), "x", dir.fd, "c", 0, tu_on_done, &d));
	TU_EXPECT(ctx, -EBADF,
		  afio_renameat(ctx, sub, "moved", tu_closed_fd(), "c", 0, tu_on_done, &d));
	TU_EITHER(ctx, -EINVAL, afio_renameat(ctx, sub, "moved", dir.fd, "c",
					      RENAME_NOREPLACE | RENAME_EXCHANGE, tu_on_done, &d));
	ck_assert_int_eq(stat_at(sub, "moved").st_ino, a.st_ino);
	afio_destroy(ctx);
	close(sub);
	tu_dir_remove(&dir);
}
END_TEST

START_TEST(test_unlinkat)
{
	afio_ctx *ctx = tu_new_ctx();
	struct tu_dir dir;
	int fd;

	tu_dir_make(&dir);
	tu_put_file(dir.fd, "f", "x");
	fd = openat(dir.fd, "f", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	TU_EXPECT(ctx, 0, afio_unlinkat(ctx, dir.fd, "f", 0, tu_on_done, &d));
	ck_assert(!tu_exists_at(dir.fd, "f"));
	ck_assert_int_eq(tu_stat_fd(fd).st_nlink, 0);
	close(fd);

	ck_assert_int_eq(mkdirat(dir.fd, "d", 0700), 0);
	tu_put_file(dir.fd, "d/inside", "x");
	TU_EXPECT(ctx, -EISDIR, afio_unlinkat(ctx, dir.fd, "d", 0, tu_on_done, &d));
	TU_EXPECT(ctx, -ENOTEMPTY, afio_unlinkat(ctx, dir.fd, "d", AT_REMOVEDIR, tu_on_done, &d));
	TU_EXPECT(ctx, -ENOTDIR,
		  afio_unlinkat(ctx, dir.fd, "d/inside", AT_REMOVEDIR, tu_on_done, &d));
	TU_EXPECT(ctx, 0,
		  afio_unlinkat(ctx, AT_FDCWD, tdir_abs(&dir, "d/inside"), 0, tu_on_done, &d));
	TU_EXPECT(ctx, 0, afio_unlinkat(ctx, dir.fd, "d", AT_REMOVEDIR, tu_on_done, &d));
	ck_assert(!tu_exists_at(dir.fd, "d"));
	TU_EXPECT(ctx, -ENOENT, afio_unlinkat(ctx, dir.fd, "f", 0, tu_on_done, &d));
	TU_EXPECT(ctx, -EBADF, afio_unlinkat(ctx, tu_closed_fd(), "f", 0, tu_on_done, &d));
	/* A flag unlinkat(2) does not know. */
	tu_put_file(dir.fd, "g", "x");
	TU_EITHER(ctx, -EINVAL, afio_unlinkat(ctx, dir.fd, "g", 0x40000000, tu_on_done, &d));
	ck_assert(tu_exists_at(dir.fd, "g"));
	afio_destroy(ctx);
	tu_dir_remove(&dir);
}
END_TEST

START_TEST(test_mkdirat)
{
	afio_ctx *ctx = tu_new_ctx();
	mode_t old_mask = umask(027);
	struct tu_dir dir;
	struct stat st;

	tu_dir_make(&dir);
	TU_EXPECT(ctx, 0, afio_mkdirat(ctx, dir.fd, "d", 0777, tu_on_done, &d));
	st = stat_at(dir.fd, "d");
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_msg((st.st_mode & 07777) == 0750, "mkdirat on %s: mode %o (0777, umask 027)",
		      tu_target_name(), (unsigned)(st.st_mode & 07777));
	TU_EXPECT(ctx, 0, afio_mkdirat(ctx, AT_FDCWD, tdir_abs(&dir, "d/e"), 0700, tu_on_done, &d));
	ck_assert(S_ISDIR(stat_at(dir.fd, "d/e").st_mode));
	TU_EXPECT(ctx, -EEXIST, afio_mkdirat(ctx, dir.fd, "d", 0700, tu_on_done, &d));
	TU_EXPECT(ctx, -ENOENT, afio_mkdirat(ctx, dir.fd, "missing/d", 0700, tu_on_done, &d));
	TU_EXPECT(ctx, -EBADF, afio_mkdirat(ctx, tu_closed_fd(), "d", 0700, tu_on_done, &d));
	umask(old_mask);
	afio_destroy(ctx);
	tu_dir_remove(&dir);
}
END_TEST

/* A relative path from AT_FDCWD is looked up from the program's working
   directory, wherever the op runs. */
START_TEST(test_at_fdcwd_relative)
{
	afio_ctx *ctx = tu_new_ctx();
	int cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd;
	struct open_how how = tu_how_of(O_RDONLY | O_CLOEXEC, 0, 0);
	struct statx stx;
	struct tu_dir dir;

	tu_dir_make(&dir);
	ck_assert_int_ge(cwd, 0);
	ck_assert_int_eq(fchdir(dir.fd), 0);
	TU_EXPECT(ctx, 0, afio_mkdirat(ctx, AT_FDCWD, "d", 0700, tu_on_done, &d));
	fd = TU_RUN_FD(ctx, afio_openat(ctx, AT_FDCWD, "d/f", O_RDWR | O_CREAT | O_CLOEXEC, 0600,
					tu_on_done, &d));
	close(fd);
	fd = TU_RUN_FD(ctx, afio_openat2(ctx, AT_FDCWD, "d/f", &how, tu_on_done, &d));
	close(fd);
	TU_EXPECT(ctx, 0, afio_statx(ctx, AT_FDCWD, "d/f", 0, STATX_INO, &stx, tu_on_done, &d));
	ck_assert_int_eq(stx.stx_ino, stat_at(dir.fd, "d/f").st_ino);
	TU_EXPECT(ctx, 0, afio_renameat(ctx, AT_FDCWD, "d/f", AT_FDCWD, "d/g", 0, tu_on_done, &d));
	ck_assert(tu_exists_at(dir.fd, "d/g"));
	TU_EXPECT(ctx, 0, afio_unlinkat(ctx, AT_FDCWD, "d/g", 0, tu_on_done, &d));
	TU_EXPECT(ctx, 0, afio_unlinkat(ctx, AT_FDCWD, "d", AT_REMOVEDIR, tu_on_done, &d));
	ck_assert(!tu_exists_at(dir.fd, "d"));
	ck_assert_int_eq(fchdir(cwd), 0);
	close(cwd);
	afio_destroy(ctx);
	tu_dir_remove(&dir);
}
END_TEST

/* ---- dio_align ---- */

START_TEST(test_dio_align)
{
	int fd = tu_tmpfile(O_DIRECT), p[2];
	struct afio_dio_align al = { 0, 0 };
	struct statx stx;
	unsigned char *buf;
	int ret;

	if (fd == -EINVAL) {
		printf("no O_DIRECT in $AFIO_TEST_DIR: test_dio_align skipped\n");
		return;
	}
	ck_assert_int_ge(fd, 0);
	ret = afio_dio_align(fd, &al);
	ck_assert_int_eq(statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx), 0);
	if ((stx.stx_mask & STATX_DIOALIGN) && !stx.stx_dio_offset_align) {
		ck_assert_msg(ret == -EOPNOTSUPP,
			      "afio_dio_align where statx says no direct I/O: %s", tu_res_str(ret));
		close(fd);
		return;
	}
	ck_assert_msg(ret == 0, "afio_dio_align: %s", tu_res_str(ret));
	if (stx.stx_mask & STATX_DIOALIGN) {
		ck_assert_int_eq(al.mem, stx.stx_dio_mem_align);
		ck_assert_int_eq(al.offset, stx.stx_dio_offset_align);
	}
	ck_assert_msg(al.mem && !(al.mem & (al.mem - 1)), "mem alignment %u", al.mem);
	ck_assert_msg(al.offset && !(al.offset & (al.offset - 1)), "offset alignment %u",
		      al.offset);
	/* Direct I/O at exactly that alignment works. */
	buf = aligned_alloc(al.mem, 2 * al.offset);
	ck_assert_ptr_nonnull(buf);
	memset(buf, 'd', 2 * al.offset);
	ck_assert_int_eq(pwrite(fd, buf, al.offset, al.offset), al.offset);
	ck_assert_int_eq(pread(fd, buf, al.offset, al.offset), al.offset);
	free(buf);

	/* A pipe: no file system doing direct I/O. */
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	ret = afio_dio_align(p[0], &al);
	ck_assert_msg(ret == -EOPNOTSUPP, "afio_dio_align of a pipe: %s", tu_res_str(ret));
	ck_assert_int_eq(afio_dio_align(tu_closed_fd(), &al), -EBADF);
	ck_assert_int_eq(afio_dio_align(-1, &al), -EBADF);
	ck_assert_int_eq(afio_dio_align(fd, NULL), -EINVAL);
	close(p[0]);
	close(p[1]);
	close(fd);
}
END_TEST

/* ---- arguments refused at once ---- */

START_TEST(test_bad_arguments)
{
	const uint64_t too_far = (uint64_t)INT64_MAX + 1;
	afio_ctx *ctx = tu_new_ctx();
	struct tu_dir dir;
	int file = tu_new_file(0), sv[2], l;
	char buf[8];
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct msghdr no_iov = { .msg_iov = NULL, .msg_iovlen = 1 };
	struct msghdr many = { .msg_iov = &iov, .msg_iovlen = IOV_MAX + 1 };
	struct open_how how = tu_how_of(O_RDONLY, 0, 0);
	struct sockaddr_in addr;
	struct afio_stats st;
	struct tu_done d = { 0 };
	struct statx stx;
	afio_cb cb = tu_on_done;
	int dfd;

	tu_dir_make(&dir);
	dfd = dir.fd;
	tu_socketpair(sv);
	l = tu_tcp_listener(4, false, &addr);

	/* accept */
	REFUSED(-EINVAL, afio_accept(NULL, l, 0, cb, &d));
	REFUSED(-EINVAL, afio_accept(ctx, l, 0, NULL, &d));
	REFUSED(-EBADF, afio_accept(ctx, -1, 0, cb, &d));
	REFUSED(-EINVAL, afio_accept(ctx, l, O_APPEND, cb, &d));
	REFUSED(-EINVAL, afio_accept(ctx, l, SOCK_CLOEXEC | 1, cb, &d));
	REFUSED(-EINVAL, afio_accept(ctx, l, -1, cb, &d));
	/* connect */
	REFUSED(-EINVAL, afio_connect(NULL, sv[0], (struct sockaddr *)&addr, sizeof(addr), cb, &d));
	REFUSED(-EINVAL,
		afio_connect(ctx, sv[0], (struct sockaddr *)&addr, sizeof(addr), NULL, &d));
	REFUSED(-EINVAL, afio_connect(ctx, sv[0], NULL, sizeof(addr), cb, &d));
	REFUSED(-EBADF, afio_connect(ctx, -1, (struct sockaddr *)&addr, sizeof(addr), cb, &d));
	/* sendmsg, recvmsg */
	REFUSED(-EINVAL, afio_sendmsg(NULL, sv[0], &msg, 0, cb, &d));
	REFUSED(-EINVAL, afio_recvmsg(NULL, sv[0], &msg, 0, cb, &d));
	REFUSED(-EINVAL, afio_sendmsg(ctx, sv[0], &msg, 0, NULL, &d));
	REFUSED(-EINVAL, afio_recvmsg(ctx, sv[0], &msg, 0, NULL, &d));
	REFUSED(-EINVAL, afio_sendmsg(ctx, sv[0], NULL, 0, cb, &d));
	REFUSED(-EINVAL, afio_recvmsg(ctx, sv[0], NULL, 0, cb, &d));
	REFUSED(-EBADF, afio_sendmsg(ctx, -1, &msg, 0, cb, &d));
	REFUSED(-EBADF, afio_recvmsg(ctx, -1, &msg, 0, cb, &d));
	REFUSED(-EINVAL, afio_sendmsg(ctx, sv[0], &msg, MSG_DONTWAIT, cb, &d));
	REFUSED(-EINVAL, afio_recvmsg(ctx, sv[0], &msg, MSG_DONTWAIT, cb, &d));
	REFUSED(-EINVAL, afio_sendmsg(ctx, sv[0], &msg, MSG_DONTWAIT | MSG_NOSIGNAL, cb, &d));
	REFUSED(-EINVAL, afio_recvmsg(ctx, sv[0], &msg, MSG_DONTWAIT | MSG_PEEK, cb, &d));
	REFUSED(-EINVAL, afio_sendmsg(ctx, sv[0], &msg, MSG_WAITALL, cb, &d));
	REFUSED(-EINVAL, afio_recvmsg(ctx, sv[0], &msg, MSG_WAITALL, cb, &d));
	REFUSED(-EINVAL, afio_sendmsg(ctx, sv[0], &no_iov, 0, cb, &d));
	REFUSED(-EINVAL, afio_recvmsg(ctx, sv[0], &no_iov, 0, cb, &d));
	REFUSED(-EINVAL, afio_sendmsg(ctx, sv[0], &many, 0, cb, &d));
	REFUSED(-EINVAL, afio_recvmsg(ctx, sv[0], &many, 0, cb, &d));
	/* recv of nothing would read as the end of the stream */
	REFUSED(-EINVAL, afio_recv(ctx, sv[0], buf, 0, 0, cb, &d));
	/* sendfile */
	REFUSED(-EINVAL, afio_sendfile(NULL, sv[0], file, 0, 1, cb, &d));
	REFUSED(-EINVAL, afio_sendfile(ctx, sv[0], file, 0, 1, NULL, &d));
	REFUSED(-EBADF, afio_sendfile(ctx, -1, file, 0, 1, cb, &d));
	REFUSED(-EBADF, afio_sendfile(ctx, sv[0], -1, 0, 1, cb, &d));
	REFUSED(-EINVAL, afio_sendfile(ctx, sv[0], file, too_far, 1, cb, &d));
	REFUSED(-EINVAL, afio_sendfile(ctx, sv[0], file, 0, (size_t)SSIZE_MAX + 1, cb, &d));
	/* timeout */
	REFUSED(-EINVAL, afio_timeout(NULL, 1000, cb, &d));
	REFUSED(-EINVAL, afio_timeout(ctx, 1000, NULL, &d));
	REFUSED(-EINVAL, afio_timeout(ctx, too_far, cb, &d));
	REFUSED(-EINVAL, afio_timeout(ctx, UINT64_MAX, cb, &d));
	/* openat, openat2, close */
	REFUSED(-EINVAL, afio_openat(NULL, dfd, "f", O_RDONLY, 0, cb, &d));
	REFUSED(-EINVAL, afio_openat(ctx, dfd, "f", O_RDONLY, 0, NULL, &d));
	REFUSED(-EINVAL, afio_openat(ctx, dfd, NULL, O_RDONLY, 0, cb, &d));
	REFUSED(-EBADF, afio_openat(ctx, -1, "f", O_RDONLY, 0, cb, &d));
	REFUSED(-EBADF, afio_openat(ctx, -5, "f", O_RDONLY, 0, cb, &d));
	REFUSED(-EINVAL, afio_openat2(NULL, dfd, "f", &how, cb, &d));
	REFUSED(-EINVAL, afio_openat2(ctx, dfd, "f", &how, NULL, &d));
	REFUSED(-EINVAL, afio_openat2(ctx, dfd, NULL, &how, cb, &d));
	REFUSED(-EINVAL, afio_openat2(ctx, dfd, "f", NULL, cb, &d));
	REFUSED(-EBADF, afio_openat2(ctx, -1, "f", &how, cb, &d));
	REFUSED(-EINVAL, afio_close(NULL, file, cb, &d));
	REFUSED(-EINVAL, afio_close(ctx, file, NULL, &d));
	REFUSED(-EBADF, afio_close(ctx, -1, cb, &d));
	/* statx */
	REFUSED(-EINVAL, afio_statx(NULL, dfd, "f", 0, STATX_SIZE, &stx, cb, &d));
	REFUSED(-EINVAL, afio_statx(ctx, dfd, "f", 0, STATX_SIZE, &stx, NULL, &d));
	REFUSED(-EINVAL, afio_statx(ctx, dfd, NULL, 0, STATX_SIZE, &stx, cb, &d));
	REFUSED(-EINVAL, afio_statx(ctx, dfd, "f", 0, STATX_SIZE, NULL, cb, &d));
	REFUSED(-EBADF, afio_statx(ctx, -1, "f", 0, STATX_SIZE, &stx, cb, &d));
	/* readv2, writev2 */
	REFUSED(-EINVAL, afio_readv2(NULL, file, &iov, 1, 0, 0, cb, &d));
	REFUSED(-EINVAL, afio_writev2(NULL, file, &iov, 1, 0, 0, cb, &d));
	REFUSED(-EINVAL, afio_readv2(ctx, file, &iov, 1, 0, 0, NULL, &d));
	REFUSED(-EINVAL, afio_writev2(ctx, file, &iov, 1, 0, 0, NULL, &d));
	REFUSED(-EINVAL, afio_readv2(ctx, file, &iov, 1, 0, RWF_NOWAIT, cb, &d));
	REFUSED(-EINVAL, afio_writev2(ctx, file, &iov, 1, 0, RWF_NOWAIT, cb, &d));
	REFUSED(-EINVAL, afio_readv2(ctx, file, &iov, 1, 0, RWF_NOWAIT | RWF_HIPRI, cb, &d));
	REFUSED(-EINVAL, afio_writev2(ctx, file, &iov, 1, 0, RWF_NOWAIT | RWF_DSYNC, cb, &d));
	REFUSED(-EINVAL, afio_readv2(ctx, file, NULL, 1, 0, 0, cb, &d));
	REFUSED(-EINVAL, afio_writev2(ctx, file, NULL, 1, 0, 0, cb, &d));
	REFUSED(-EINVAL, afio_readv2(ctx, file, &iov, -1, 0, 0, cb, &d));
	REFUSED(-EINVAL, afio_writev2(ctx, file, &iov, IOV_MAX + 1, 0, 0, cb, &d));
	REFUSED(-EBADF, afio_readv2(ctx, -1, &iov, 1, 0, 0, cb, &d));
	REFUSED(-EBADF, afio_writev2(ctx, -1, &iov, 1, 0, 0, cb, &d));
	REFUSED(-EINVAL, afio_readv2(ctx, file, &iov, 1, too_far, 0, cb, &d));
	REFUSED(-EINVAL, afio_writev2(ctx, file, &iov, 1, UINT64_MAX, 0, cb, &d));
	/* fallocate, ftruncate, sync_range */
	REFUSED(-EINVAL, afio_fallocate(NULL, file, 0, 0, 1, cb, &d));
	REFUSED(-EINVAL, afio_fallocate(ctx, file, 0, 0, 1, NULL, &d));
	REFUSED(-EBADF, afio_fallocate(ctx, -1, 0, 0, 1, cb, &d));
	REFUSED(-EINVAL, afio_fallocate(ctx, file, 0, too_far, 1, cb, &d));
	REFUSED(-EINVAL, afio_fallocate(ctx, file, 0, 0, too_far, cb, &d));
	REFUSED(-EINVAL, afio_ftruncate(NULL, file, 1, cb, &d));
	REFUSED(-EINVAL, afio_ftruncate(ctx, file, 1, NULL, &d));
	REFUSED(-EBADF, afio_ftruncate(ctx, -1, 1, cb, &d));
	REFUSED(-EINVAL, afio_ftruncate(ctx, file, too_far, cb, &d));
	REFUSED(-EINVAL, afio_sync_range(NULL, file, 0, 0, 0, cb, &d));
	REFUSED(-EINVAL, afio_sync_range(ctx, file, 0, 0, 0, NULL, &d));
	REFUSED(-EBADF, afio_sync_range(ctx, -1, 0, 0, 0, cb, &d));
	REFUSED(-EINVAL, afio_sync_range(ctx, file, too_far, 0, 0, cb, &d));
	REFUSED(-EINVAL, afio_sync_range(ctx, file, 0, too_far, 0, cb, &d));
	/* renameat, unlinkat, mkdirat */
	REFUSED(-EINVAL, afio_renameat(NULL, dfd, "a", dfd, "b", 0, cb, &d));
	REFUSED(-EINVAL, afio_renameat(ctx, dfd, "a", dfd, "b", 0, NULL, &d));
	REFUSED(-EINVAL, afio_renameat(ctx, dfd, NULL, dfd, "b", 0, cb, &d));
	REFUSED(-EINVAL, afio_renameat(ctx, dfd, "a", dfd, NULL, 0, cb, &d));
	REFUSED(-EBADF, afio_renameat(ctx, -1, "a", dfd, "b", 0, cb, &d));
	REFUSED(-EBADF, afio_renameat(ctx, dfd, "a", -1, "b", 0, cb, &d));
	REFUSED(-EINVAL, afio_unlinkat(NULL, dfd, "a", 0, cb, &d));
	REFUSED(-EINVAL, afio_unlinkat(ctx, dfd, "a", 0, NULL, &d));
	REFUSED(-EINVAL, afio_unlinkat(ctx, dfd, NULL, 0, cb, &d));
	REFUSED(-EBADF, afio_unlinkat(ctx, -1, "a", 0, cb, &d));
	REFUSED(-EINVAL, afio_mkdirat(NULL, dfd, "a", 0700, cb, &d));
	REFUSED(-EINVAL, afio_mkdirat(ctx, dfd, "a", 0700, NULL, &d));
	REFUSED(-EINVAL, afio_mkdirat(ctx, dfd, NULL, 0700, cb, &d));
	REFUSED(-EBADF, afio_mkdirat(ctx, -1, "a", 0700, cb, &d));
	/* the op table */
	REFUSED(-EINVAL, afio_op_native(NULL, 0, NULL, 0));
	REFUSED(-EINVAL, afio_op_native(ctx, afio_op_count(), NULL, 0));
	REFUSED(-EINVAL, afio_op_native(ctx, UINT_MAX, NULL, 0));

	/* Refused at once: nothing was queued, no callback will run. */
	ck_assert_int_eq(afio_poll(ctx, 0, 0), 0);
	ck_assert_int_eq(d.calls, 0);
	ck_assert_int_eq(afio_stats(ctx, &st), 0);
	ck_assert_int_eq(st.submitted, 0);
	ck_assert(!tu_exists_at(dfd, "a") && !tu_exists_at(dfd, "b"));
	afio_destroy(ctx);
	close(l);
	close(sv[0]);
	close(sv[1]);
	close(file);
	tu_dir_remove(&dir);
}
END_TEST

/* ---- cancel and destroy of what waits ---- */

enum waiter { W_ACCEPT, W_RECVMSG, W_CONNECT, W_SENDFILE, W_TIMER, W_COUNT };
static const char *const waiter_name[W_COUNT] = {
	"accept with no client", "recvmsg with no data", "connect to a full listener",
	"sendfile to a full socket", "a 60 s timer",
};

#define WAIT_FILE_LEN 65536

/* One of each op that waits, and why nothing will complete it. */
struct waiters {
	int listener;				/* no client comes */
	struct sockaddr_in full_addr;
	int full_listener, queued_client;	/* accept queue full */
	int connecting;
	int quiet[2];				/* the peer sends nothing */
	int full[2];				/* the peer reads nothing */
	size_t filled;
	int file;
	char in[16];
	struct iovec iov;
	struct msghdr msg;
};

static void waiters_make(struct waiters *w, bool nonblock)
{
	unsigned char *bytes = tu_random_bytes(WAIT_FILE_LEN, 99);
	struct sockaddr_in addr;

	memset(w, 0, sizeof(*w));
	w->listener = tu_tcp_listener(4, nonblock, &addr);
	w->full_listener = tu_full_listener(&w->full_addr, &w->queued_client);
	w->connecting = tu_tcp_socket(nonblock);
	tu_socketpair(w->quiet);
	tu_set_nonblock(w->quiet[1], nonblock);
	tu_socketpair(w->full);
	tu_set_nonblock(w->full[0], nonblock);
	w->filled = fill_socket(w->full[0], 'f');
	w->file = tu_data_file(bytes, WAIT_FILE_LEN);
	free(bytes);
	w->iov = (struct iovec){ w->in, sizeof(w->in) };
	w->msg = (struct msghdr){ .msg_iov = &w->iov, .msg_iovlen = 1 };
}

static void waiters_close(struct waiters *w)
{
	close(w->listener);
	close(w->full_listener);
	close(w->queued_client);
	close(w->connecting);
	close(w->file);
	for (int i = 0; i < 2; i++) {
		close(w->quiet[i]);
		if (w->full[i] >= 0)
			close(w->full[i]);
	}
}

static void queue_waiter(afio_ctx *ctx, struct waiters *w, enum waiter which, struct tu_done *d)
{
	int ret = -ENOSYS;

	ck_assert_int_lt(which, W_COUNT);
	switch (which) {
	case W_ACCEPT:
		ret = afio_accept(ctx, w->listener, SOCK_CLOEXEC, tu_on_done, d);
		break;
	case W_RECVMSG:
		ret = afio_recvmsg(ctx, w->quiet[1], &w->msg, 0, tu_on_done, d);
		break;
	case W_CONNECT:
		ret = afio_connect(ctx, w->connecting, (struct sockaddr *)&w->full_addr,
				   sizeof(w->full_addr), tu_on_done, d);
		break;
	case W_SENDFILE:
		ret = afio_sendfile(ctx, w->full[0], w->file, 0, WAIT_FILE_LEN, tu_on_done, d);
		break;
	case W_TIMER:
		ret = afio_timeout(ctx, 60000 * TU_NS_PER_MS, tu_on_done, d);
		break;
	case W_COUNT:
		break;
	}
	tu_queued(ret, waiter_name[which]);
}

/*
 * After a canceled one: what it waited for still comes to whoever asks
 * next, and a canceled sendfile left nothing behind (no bytes sent, none
 * left over for the next sendfile of the context).
 */
static void after_cancel(afio_ctx *ctx, struct waiters *w, enum waiter which)
{
	struct sockaddr_in addr;
	char buf[8];
	int c, s;

	switch (which) {
	case W_ACCEPT:
		addr = tu_sock_addr(w->listener, false);
		c = tu_tcp_socket(false);
		tu_connect_to(c, &addr);
		s = tu_accept_now(w->listener);
		tu_same_addr(tu_sock_addr(s, true), tu_sock_addr(c, false),
			     "the connection after a canceled accept");
		close(s);
		close(c);
		break;
	case W_RECVMSG:
		ck_assert_int_eq(write(w->quiet[0], "late", 4), 4);
		ck_assert(tu_wait_readable(w->quiet[1]));
		ck_assert_msg(recv(w->quiet[1], buf, sizeof(buf), MSG_DONTWAIT) == 4 &&
			      !memcmp(buf, "late", 4),
			      "the data after a canceled recvmsg did not stay in the socket");
		break;
	case W_SENDFILE: {
		unsigned char *other = tu_random_bytes(20000, 1234);
		int file = tu_data_file(other, 20000), sv[2];

		close(w->full[0]);
		w->full[0] = -1;
		expect_stream_of(w->full[1], w->filled, 'f');
		tu_socketpair(sv);
		tu_sendfile_all(ctx, sv[0], file, 0, 20000);
		tu_expect_bytes(sv[1], other, 20000);
		close(sv[0]);
		close(sv[1]);
		close(file);
		free(other);
		break;
	}
	default:
		break;
	}
}

static void expect_canceled_once(afio_ctx *ctx, struct tu_done *d, const char *what)
{
	tu_wait_once(ctx, d, what);
	tu_expect_eq(d->res, -ECANCELED, what);
	tu_no_second_callback(ctx, d, what);
}

/* _i: which op waits (_i / 2) on a socket with O_NONBLOCK or not (_i % 2). */
START_TEST(test_cancel_waiting)
{
	enum waiter which = (enum waiter)(_i / 2);
	afio_ctx *ctx = tu_new_ctx();
	struct tu_done d = { 0 };
	struct afio_stats st;
	struct waiters w;

	waiters_make(&w, _i % 2);
	queue_waiter(ctx, &w, which, &d);
	tu_still_waiting(ctx, &d, waiter_name[which]);
	ck_assert_int_eq(afio_cancel(ctx, &d), 1);
	expect_canceled_once(ctx, &d, waiter_name[which]);
	ck_assert_int_eq(afio_cancel(ctx, &d), -ENOENT);
	ck_assert_int_eq(afio_stats(ctx, &st), 0);
	ck_assert_int_eq(st.canceled, 1);
	ck_assert_int_eq(st.in_flight, 0);
	after_cancel(ctx, &w, which);
	tu_no_second_callback(ctx, &d, waiter_name[which]);
	afio_destroy(ctx);
	ck_assert_int_eq(d.calls, 1);
	waiters_close(&w);
}
END_TEST

/* Canceled before it reached the backend. */
START_TEST(test_cancel_queued)
{
	enum waiter which = (enum waiter)_i;
	afio_ctx *ctx = tu_new_ctx();
	struct tu_done d = { 0 };
	struct waiters w;

	waiters_make(&w, false);
	queue_waiter(ctx, &w, which, &d);
	ck_assert_int_eq(afio_cancel(ctx, &d), 1);
	expect_canceled_once(ctx, &d, waiter_name[which]);
	after_cancel(ctx, &w, which);
	afio_destroy(ctx);
	ck_assert_int_eq(d.calls, 1);
	waiters_close(&w);
}
END_TEST

/* afio_destroy() with one op waiting: _i / 4 which, _i % 2 O_NONBLOCK
   sockets or not, _i / 2 % 2 only queued or waiting; its callback runs
   once, with -ECANCELED. */
START_TEST(test_destroy_one_waiting)
{
	enum waiter which = (enum waiter)(_i / 4);
	afio_ctx *ctx = tu_new_ctx();
	struct tu_done d = { 0 };
	struct waiters w;

	waiters_make(&w, _i % 2);
	queue_waiter(ctx, &w, which, &d);
	if (!(_i / 2 % 2))
		tu_still_waiting(ctx, &d, waiter_name[which]);
	afio_destroy(ctx);
	ck_assert_msg(d.calls == 1, "%s on %s: %d callbacks in afio_destroy()", waiter_name[which],
		      tu_target_name(), d.calls);
	tu_expect_eq(d.res, -ECANCELED, waiter_name[which]);
	waiters_close(&w);
}
END_TEST

/* All of them at once, waiting (_i 0, 1: O_NONBLOCK sockets or not) or
   only queued (_i 2, 3). */
START_TEST(test_destroy_all_waiting)
{
	afio_ctx *ctx = tu_new_ctx();
	struct tu_done d[W_COUNT];
	struct waiters w;

	memset(d, 0, sizeof(d));
	waiters_make(&w, _i % 2);
	for (int i = 0; i < W_COUNT; i++)
		queue_waiter(ctx, &w, (enum waiter)i, &d[i]);
	if (_i < 2) {
		ck_assert_int_ge(afio_poll(ctx, 1, 50), 0);
		for (int i = 0; i < W_COUNT; i++)
			ck_assert_msg(!d[i].calls, "%s on %s completed with %s", waiter_name[i],
				      tu_target_name(), tu_res_str(d[i].res));
	}
	afio_destroy(ctx);
	for (int i = 0; i < W_COUNT; i++) {
		ck_assert_msg(d[i].calls == 1, "%s on %s: %d callbacks in afio_destroy()",
			      waiter_name[i], tu_target_name(), d[i].calls);
		ck_assert_msg(d[i].res == -ECANCELED, "%s on %s: %s in afio_destroy()",
			      waiter_name[i], tu_target_name(), tu_res_str(d[i].res));
	}
	waiters_close(&w);
}
END_TEST

/* ---- cancel racing completion ---- */

#define RACE_ROUNDS 50

/*
 * Each round a client connects while an accept waits, and the accept is
 * canceled at once: the connection is the accept's (its fd) or stays in
 * the queue for the next one; none is lost, none appears twice.  _i: the
 * listener is O_NONBLOCK.
 */
START_TEST(test_accept_cancel_race)
{
	afio_ctx *ctx = tu_new_ctx();
	struct sockaddr_in addr;
	int l = tu_tcp_listener(RACE_ROUNDS, _i, &addr);
	struct pollfd pfd = { .fd = l, .events = POLLIN };

	for (int i = 0; i < RACE_ROUNDS; i++) {
		struct tu_done d = { 0 };
		int c = tu_tcp_socket(false), fd;

		tu_queued(afio_accept(ctx, l, SOCK_CLOEXEC, tu_on_done, &d), "accept");
		ck_assert_int_ge(afio_submit(ctx), 0);
		tu_connect_to(c, &addr);
		ck_assert_int_ne(afio_cancel(ctx, &d), 0);
		tu_wait_once(ctx, &d, "accept canceled as a client came");
		if (d.res == -ECANCELED)
			fd = tu_accept_now(l);
		else
			fd = tu_expect_fd(d.res, "accept canceled as a client came");
		tu_same_addr(tu_sock_addr(fd, true), tu_sock_addr(c, false),
			     "the connection of this round");
		close(fd);
		close(c);
	}
	ck_assert_msg(poll(&pfd, 1, 0) == 0, "a connection was left over");
	afio_destroy(ctx);
	close(l);
}
END_TEST

/* The same for data: a recvmsg canceled as the bytes come has them, or
   they are still in the socket. */
START_TEST(test_recvmsg_cancel_race)
{
	afio_ctx *ctx = tu_new_ctx();
	int sv[2];

	tu_socketpair(sv);
	tu_set_nonblock(sv[1], _i);
	for (int i = 0; i < RACE_ROUNDS; i++) {
		char in[8] = "", left[8] = "";
		struct iovec iov = { in, sizeof(in) };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
		struct tu_done d = { 0 };

		tu_queued(afio_recvmsg(ctx, sv[1], &m, 0, tu_on_done, &d), "recvmsg");
		ck_assert_int_ge(afio_submit(ctx), 0);
		ck_assert_int_eq(write(sv[0], "abcd", 4), 4);
		ck_assert_int_ne(afio_cancel(ctx, &d), 0);
		tu_wait_once(ctx, &d, "recvmsg canceled as data came");
		if (d.res == -ECANCELED) {
			ck_assert_msg(recv(sv[1], left, sizeof(left), MSG_DONTWAIT) == 4 &&
				      !memcmp(left, "abcd", 4),
				      "round %d on %s: a canceled recvmsg lost the bytes", i,
				      tu_target_name());
		} else {
			tu_expect_eq(d.res, 4, "recvmsg canceled as data came");
			ck_assert(!memcmp(in, "abcd", 4));
			ck_assert_msg(recv(sv[1], left, sizeof(left), MSG_DONTWAIT) < 0,
				      "round %d on %s: bytes received twice", i, tu_target_name());
		}
	}
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/*
 * A sendfile with room to send, canceled at once: -ECANCELED and the peer
 * got nothing, or the count the peer got, byte for byte.  Afterwards the
 * context's next sendfile sends only its own file's bytes.
 */
START_TEST(test_sendfile_cancel_race)
{
	enum { LEN = 65536 };
	unsigned char *bytes = tu_random_bytes(LEN, 31), *other = tu_random_bytes(20000, 32);
	int file = tu_data_file(bytes, LEN), file2 = tu_data_file(other, 20000);
	afio_ctx *ctx = tu_new_ctx();
	unsigned canceled = 0;

	for (int i = 0; i < RACE_ROUNDS; i++) {
		struct tu_done d = { 0 };
		uint64_t off = (uint64_t)i * 1000;
		char c;
		int sv[2];

		tu_socketpair(sv);
		tu_set_nonblock(sv[0], _i);
		tu_queued(afio_sendfile(ctx, sv[0], file, off, LEN - off, tu_on_done, &d),
			  "sendfile");
		ck_assert_int_ge(afio_submit(ctx), 0);
		ck_assert_int_ne(afio_cancel(ctx, &d), 0);
		tu_wait_once(ctx, &d, "sendfile canceled at once");
		if (d.res == -ECANCELED) {
			canceled++;
			ck_assert_msg(recv(sv[1], &c, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN,
				      "round %d on %s: a canceled sendfile sent bytes", i,
				      tu_target_name());
		} else {
			ck_assert_msg(d.res > 0 && d.res <= (ssize_t)(LEN - off),
				      "round %d on %s: sendfile %s", i, tu_target_name(),
				      tu_res_str(d.res));
			tu_expect_bytes(sv[1], bytes + off, (size_t)d.res);
		}
		close(sv[0]);
		close(sv[1]);
	}
	{
		int sv[2];

		tu_socketpair(sv);
		tu_sendfile_all(ctx, sv[0], file2, 0, 20000);
		tu_expect_bytes(sv[1], other, 20000);
		close(sv[0]);
		close(sv[1]);
	}
	printf("sendfile on %s: %u of %d canceled in time\n", tu_target_name(), canceled,
	       RACE_ROUNDS);
	afio_destroy(ctx);
	close(file);
	close(file2);
	free(bytes);
	free(other);
}
END_TEST

/*
 * A sendfile bigger than the room in the socket, whose peer reads nothing:
 * it sends what fits and then either ends with that short count or waits
 * for room.  Canceled while it waits it ends at once, with the bytes it
 * sent (-ECANCELED only if none), and the peer gets exactly those.  _i:
 * the socket is O_NONBLOCK.
 */
START_TEST(test_cancel_sendfile_midway)
{
	enum { LEN = 1 << 20 };
	unsigned char *bytes = tu_random_bytes(LEN, 21), *other = tu_random_bytes(5000, 22);
	int file = tu_data_file(bytes, LEN), file2 = tu_data_file(other, 5000), sv[2];
	afio_ctx *ctx = tu_new_ctx();
	struct tu_done d = { 0 };
	struct tu_reader r;

	tu_socketpair(sv);
	tu_set_nonblock(sv[0], _i);
	tu_queued(afio_sendfile(ctx, sv[0], file, 0, LEN, tu_on_done, &d), "sendfile");
	ck_assert_int_ge(afio_poll(ctx, 1, 50), 0);
	if (!d.calls)
		ck_assert_int_eq(afio_cancel(ctx, &d), 1);
	tu_wait_once(ctx, &d, "sendfile into a socket without room, canceled");
	ck_assert_msg(d.res == -ECANCELED || (d.res > 0 && d.res < LEN),
		      "sendfile into a socket without room on %s: %s", tu_target_name(),
		      tu_res_str(d.res));
	/* What the peer gets is what the result says was sent. */
	close(sv[0]);
	tu_reader_start(&r, sv[1], d.res > 0 ? (size_t)d.res : 0);
	tu_reader_join(&r);
	ck_assert_msg(r.got == (d.res > 0 ? (size_t)d.res : 0),
		      "sendfile on %s said %s, the peer got %zu bytes", tu_target_name(),
		      tu_res_str(d.res), r.got);
	ck_assert(!memcmp(r.buf, bytes, r.got));
	free(r.buf);
	close(sv[1]);
	/* And the context's next sendfile sends only its own bytes. */
	tu_socketpair(sv);
	tu_sendfile_all(ctx, sv[0], file2, 0, 5000);
	tu_expect_bytes(sv[1], other, 5000);
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
	close(file);
	close(file2);
	free(bytes);
	free(other);
}
END_TEST

/* ---- nop ---- */

struct nop_chain {
	afio_ctx *ctx;
	int left, calls;
	ssize_t bad;		/* the first result that was not 0 */
};

static void on_nop_chain(void *data, ssize_t res)
{
	struct nop_chain *c = data;

	c->calls++;
	if (res && !c->bad)
		c->bad = res;
	if (--c->left > 0)
		tu_queued(afio_nop(c->ctx, on_nop_chain, c), "nop from its own callback");
}

/*
 * A context's worth of nops each complete once with 0, as does a chain of
 * nops each queued from the last one's callback; with entries in use the
 * next is refused with -EAGAIN, and bad arguments fail at once.
 */
START_TEST(test_nop)
{
	enum { ENTRIES = 16, CHAIN = 1000 };
	afio_ctx *ctx = tu_ctx(tu_backend, tu_mode, ENTRIES);
	struct tu_done d[ENTRIES], extra = { 0 };
	struct nop_chain c = { .ctx = ctx, .left = CHAIN };
	struct afio_stats st;
	int64_t end;

	memset(d, 0, sizeof(d));
	for (int i = 0; i < ENTRIES; i++)
		tu_queued(afio_nop(ctx, tu_on_done, &d[i]), "nop");
	tu_expect_eq(afio_nop(ctx, tu_on_done, &extra), -EAGAIN, "nop past entries");
	for (int i = 0; i < ENTRIES; i++) {
		tu_wait_once(ctx, &d[i], "nop");
		tu_expect_eq(d[i].res, 0, "nop");
	}
	ck_assert_int_eq(extra.calls, 0);

	tu_queued(afio_nop(ctx, on_nop_chain, &c), "nop");
	end = tu_now_ns() + TU_HANG_MS * TU_NS_PER_MS;
	while (c.left > 0) {
		ck_assert_msg(tu_now_ns() < end, "a chain of nops on %s stopped at %d of %d",
			      tu_target_name(), CHAIN - c.left, CHAIN);
		ck_assert_int_ge(afio_poll(ctx, 1, 100), 0);
	}
	ck_assert_int_eq(c.calls, CHAIN);
	tu_expect_eq(c.bad, 0, "a nop of the chain");
	ck_assert_int_eq(afio_stats(ctx, &st), 0);
	ck_assert_uint_eq(st.in_flight, 0);
	ck_assert_uint_eq(st.completed, ENTRIES + CHAIN);
	ck_assert_uint_eq(st.fallbacks, 0);

	tu_expect_eq(afio_nop(NULL, tu_on_done, &extra), -EINVAL, "nop without a context");
	tu_expect_eq(afio_nop(ctx, NULL, &extra), -EINVAL, "nop without a callback");
	ck_assert_int_eq(extra.calls, 0);
	afio_destroy(ctx);
}
END_TEST

/*
 * What a program queues a nop for: to wake its own loop.  The loop
 * watches only the eventfd; after a nop is submitted it becomes readable
 * and the callback runs in the afio_poll() that follows.
 */
START_TEST(test_nop_wakes_eventfd)
{
	afio_ctx *ctx = tu_new_ctx();
	int efd = afio_eventfd(ctx);
	struct pollfd pfd = { .fd = efd, .events = POLLIN };
	struct tu_done d = { 0 };

	ck_assert_int_ge(efd, 0);
	for (int round = 0; round < 3; round++) {
		int n;

		memset(&d, 0, sizeof(d));
		tu_queued(afio_nop(ctx, tu_on_done, &d), "nop");
		ck_assert_int_ge(afio_submit(ctx), 0);
		do
			n = poll(&pfd, 1, TU_HANG_MS);
		while (n < 0 && errno == EINTR);
		ck_assert_msg(n == 1, "round %d on %s: the eventfd was not readable after a nop",
			      round, tu_target_name());
		ck_assert_int_eq(d.calls, 0);
		ck_assert_int_eq(afio_poll(ctx, 0, 0), 1);
		ck_assert_int_eq(d.calls, 1);
		tu_expect_eq(d.res, 0, "nop");
		/* Nothing left to run: the eventfd is quiet again. */
		ck_assert_int_eq(poll(&pfd, 1, 0), 0);
	}
	afio_destroy(ctx);
}
END_TEST

/* A nop canceled before it is submitted gives -ECANCELED, one already
   finished keeps its 0: either way exactly one callback; destroy with
   nops queued runs each once. */
START_TEST(test_nop_cancel_destroy)
{
	afio_ctx *ctx = tu_new_ctx();
	struct tu_done d = { 0 }, q[4];
	int n;

	tu_queued(afio_nop(ctx, tu_on_done, &d), "nop");
	n = afio_cancel(ctx, &d);
	ck_assert_msg(n == 1 || n == -ENOENT, "cancel of a nop on %s: %s", tu_target_name(),
		      tu_res_str(n));
	tu_wait_once(ctx, &d, "canceled nop");
	tu_expect_eq(d.res, n == 1 ? -ECANCELED : 0, "canceled nop");

	memset(q, 0, sizeof(q));
	for (int i = 0; i < 4; i++)
		tu_queued(afio_nop(ctx, tu_on_done, &q[i]), "nop");
	afio_destroy(ctx);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(q[i].calls, 1);
		ck_assert_msg(q[i].res == 0 || q[i].res == -ECANCELED,
			      "nop destroyed on %s: %s", tu_target_name(), tu_res_str(q[i].res));
	}
}
END_TEST

/* ---- the op table ---- */

/* Every call that queues a request, by its op's name: afio_readv2 and
   afio_writev2 queue readv and writev (afio_op_native(3)). */
static const char *const every_op[] = {
	"read", "write", "readv", "writev", "fsync", "recv", "send",
	"accept", "connect", "sendmsg", "recvmsg", "sendfile", "timeout",
	"openat", "openat2", "close", "statx",
	"fallocate", "ftruncate", "sync_range", "renameat", "unlinkat", "mkdirat", "nop",
};
#define N_OPS (sizeof(every_op) / sizeof(every_op[0]))

START_TEST(test_op_names)
{
	unsigned n = afio_op_count();

	for (unsigned op = 0; op < n; op++) {
		const char *name = afio_op_name(op);

		ck_assert_msg(name && *name, "op %u has no name", op);
		ck_assert_msg(strncmp(name, "afio_", 5), "op %u is named %s, without afio_", op,
			      name);
		for (unsigned other = 0; other < op; other++)
			ck_assert_msg(strcmp(name, afio_op_name(other)),
				      "ops %u and %u are both %s", other, op, name);
	}
	for (size_t i = 0; i < N_OPS; i++)
		ck_assert_msg(tu_op_number(every_op[i]) >= 0, "afio_%s is not in the op table",
			      every_op[i]);
	ck_assert_uint_ge(n, N_OPS);
	ck_assert_ptr_null(afio_op_name(n));
	ck_assert_ptr_null(afio_op_name(UINT_MAX));
}
END_TEST

/* One line, within len, terminated, the same answer without a buffer. */
START_TEST(test_op_native_how)
{
	afio_ctx *ctx = tu_new_ctx();

	for (unsigned op = 0; op < afio_op_count(); op++) {
		char how[256], small[12];
		int native;

		memset(how, 'x', sizeof(how));
		native = afio_op_native(ctx, op, how, sizeof(how));
		ck_assert_msg(native == 0 || native == 1, "afio_op_native(%s) on %s: %s",
			      afio_op_name(op), tu_target_name(), tu_res_str(native));
		ck_assert_msg(memchr(how, '\0', sizeof(how)), "how of %s is not terminated",
			      afio_op_name(op));
		ck_assert_msg(*how, "afio_op_native(%s) on %s says nothing on how",
			      afio_op_name(op), tu_target_name());
		ck_assert_msg(!strchr(how, '\n'), "how of %s is more than one line: %s",
			      afio_op_name(op), how);
		ck_assert_int_eq(afio_op_native(ctx, op, NULL, 0), native);
		ck_assert_int_eq(afio_op_native(ctx, op, NULL, 100), native);
		/* Cut short, terminated, nothing written past len. */
		memset(small, 'x', sizeof(small));
		ck_assert_int_eq(afio_op_native(ctx, op, small, 8), native);
		ck_assert_msg(memchr(small, '\0', 8), "a short how of %s is not terminated",
			      afio_op_name(op));
		ck_assert(!strncmp(small, how, strlen(small)));
		ck_assert(small[8] == 'x' && small[11] == 'x');
		memset(small, 'x', sizeof(small));
		ck_assert_int_eq(afio_op_native(ctx, op, small, 0), native);
		ck_assert(small[0] == 'x');
	}
	afio_destroy(ctx);
}
END_TEST

/* The threads backend is the pool: nothing is handed on. */
START_TEST(test_threads_all_native)
{
	afio_ctx *ctx;

	if (tu_backend != AFIO_BACKEND_THREADS)
		return;
	ctx = tu_new_ctx();
	for (unsigned op = 0; op < afio_op_count(); op++)
		ck_assert_msg(afio_op_native(ctx, op, NULL, 0) == 1,
			      "threads says it hands %s to the pool", afio_op_name(op));
	afio_destroy(ctx);
}
END_TEST

/*
 * What one successful request of each op needs: the case each backend
 * names as native (O_NONBLOCK sockets, an aligned O_DIRECT file).  A
 * blocking socket's accept or a buffered read may go to the pool where
 * afio_op_native()'s line says so.
 */
struct fixture {
	struct tu_dir dir;
	int file;		/* 64 KiB, buffered */
	int direct;		/* 64 KiB, O_DIRECT where the file system has it */
	unsigned char *buf;	/* aligned for direct I/O */
	size_t blk;
	int sv[2];
	int listener;
	struct sockaddr_in addr;
};

static void fixture_make(struct fixture *f)
{
	unsigned char *bytes = tu_random_bytes(65536, 77);
	size_t mem = 4096;

	tu_dir_make(&f->dir);
	tu_put_file(f->dir.fd, "f", "fixture");
	f->file = tu_data_file(bytes, 65536);
	f->direct = tu_tmpfile(O_DIRECT);
	f->blk = f->direct >= 0 ? tu_direct_block(f->direct, &mem) : 0;
	if (!f->blk) {
		/* No direct I/O here: buffered, and libaio's reads go to the
		   pool, which the comparison below then reports. */
		if (f->direct >= 0)
			close(f->direct);
		f->direct = tu_data_file(bytes, 65536);
		f->blk = 4096;
	}
	ck_assert_int_eq(ftruncate(f->direct, 65536), 0);
	f->buf = aligned_alloc(mem, f->blk);
	ck_assert_ptr_nonnull(f->buf);
	memset(f->buf, 'b', f->blk);
	tu_socketpair(f->sv);
	tu_set_nonblock(f->sv[0], true);
	tu_set_nonblock(f->sv[1], true);
	f->listener = tu_tcp_listener(8, true, &f->addr);
	free(bytes);
}

static void fixture_remove(struct fixture *f)
{
	close(f->file);
	close(f->direct);
	free(f->buf);
	close(f->sv[0]);
	close(f->sv[1]);
	close(f->listener);
	tu_dir_remove(&f->dir);
}

static void drain(int fd, size_t len)
{
	char buf[256];

	ck_assert(len <= sizeof(buf));
	ck_assert(tu_wait_readable(fd));
	ck_assert_int_eq(read(fd, buf, len), len);
}

static unsigned run_read(afio_ctx *ctx, struct fixture *f)
{
	TU_EXPECT(ctx, f->blk, afio_read(ctx, f->direct, f->buf, f->blk, 0, tu_on_done, &d));
	return 1;
}

static unsigned run_write(afio_ctx *ctx, struct fixture *f)
{
	TU_EXPECT(ctx, f->blk, afio_write(ctx, f->direct, f->buf, f->blk, f->blk, tu_on_done, &d));
	return 1;
}

/* afio_readv and afio_readv2 both queue the op readv; likewise writev. */
static unsigned run_readv(afio_ctx *ctx, struct fixture *f)
{
	struct iovec iov = { f->buf, f->blk };

	TU_EXPECT(ctx, f->blk, afio_readv(ctx, f->direct, &iov, 1, 0, tu_on_done, &d));
	TU_EXPECT(ctx, f->blk, afio_readv2(ctx, f->direct, &iov, 1, 0, RWF_HIPRI, tu_on_done, &d));
	return 2;
}

static unsigned run_writev(afio_ctx *ctx, struct fixture *f)
{
	struct iovec iov = { f->buf, f->blk };

	TU_EXPECT(ctx, f->blk, afio_writev(ctx, f->direct, &iov, 1, f->blk, tu_on_done, &d));
	TU_EXPECT(ctx, f->blk, afio_writev2(ctx, f->direct, &iov, 1, f->blk, RWF_DSYNC, tu_on_done,
					    &d));
	return 2;
}

static unsigned run_fsync(afio_ctx *ctx, struct fixture *f)
{
	TU_EXPECT(ctx, 0, afio_fsync(ctx, f->file, 0, tu_on_done, &d));
	return 1;
}

static unsigned run_recv(afio_ctx *ctx, struct fixture *f)
{
	char c;

	ck_assert_int_eq(write(f->sv[0], "r", 1), 1);
	TU_EXPECT(ctx, 1, afio_recv(ctx, f->sv[1], &c, 1, 0, tu_on_done, &d));
	return 1;
}

static unsigned run_send(afio_ctx *ctx, struct fixture *f)
{
	TU_EXPECT(ctx, 1, afio_send(ctx, f->sv[0], "s", 1, 0, tu_on_done, &d));
	drain(f->sv[1], 1);
	return 1;
}

static unsigned run_recvmsg(afio_ctx *ctx, struct fixture *f)
{
	char c;
	struct iovec iov = { &c, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	ck_assert_int_eq(write(f->sv[0], "r", 1), 1);
	TU_EXPECT(ctx, 1, afio_recvmsg(ctx, f->sv[1], &m, 0, tu_on_done, &d));
	return 1;
}

static unsigned run_sendmsg(afio_ctx *ctx, struct fixture *f)
{
	struct iovec iov = { "m", 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	TU_EXPECT(ctx, 1, afio_sendmsg(ctx, f->sv[0], &m, 0, tu_on_done, &d));
	drain(f->sv[1], 1);
	return 1;
}

static unsigned run_accept(afio_ctx *ctx, struct fixture *f)
{
	int c = tu_tcp_socket(false);

	tu_connect_to(c, &f->addr);
	close(TU_RUN_FD(ctx, afio_accept(ctx, f->listener, SOCK_CLOEXEC, tu_on_done, &d)));
	close(c);
	return 1;
}

static unsigned run_connect(afio_ctx *ctx, struct fixture *f)
{
	int c = tu_tcp_socket(true);

	TU_EXPECT(ctx, 0, afio_connect(ctx, c, (struct sockaddr *)&f->addr, sizeof(f->addr),
				       tu_on_done, &d));
	close(tu_accept_now(f->listener));
	close(c);
	return 1;
}

static unsigned run_sendfile(afio_ctx *ctx, struct fixture *f)
{
	static const char fresh[100];
	ssize_t res;

	/* Written again just now, the range is dirty and so in the page cache:
	   where the backend sends only cached ranges itself, a page the
	   machine reclaimed meanwhile would send this one to the pool. */
	ck_assert_int_eq(pwrite(f->file, fresh, sizeof(fresh), 0), (ssize_t)sizeof(fresh));
	res = TU_RUN(ctx, afio_sendfile(ctx, f->sv[0], f->file, 0, 100, tu_on_done, &d));

	ck_assert_msg(res > 0 && res <= 100, "sendfile: %s", tu_res_str(res));
	drain(f->sv[1], (size_t)res);
	return 1;
}

static unsigned run_timeout(afio_ctx *ctx, struct fixture *f)
{
	(void)f;
	TU_EXPECT(ctx, -ETIME, afio_timeout(ctx, 1000, tu_on_done, &d));
	return 1;
}

static unsigned run_openat(afio_ctx *ctx, struct fixture *f)
{
	close(TU_RUN_FD(ctx,
			afio_openat(ctx, f->dir.fd, "f", O_RDONLY | O_CLOEXEC, 0, tu_on_done, &d)));
	return 1;
}

static unsigned run_openat2(afio_ctx *ctx, struct fixture *f)
{
	struct open_how how = tu_how_of(O_RDONLY | O_CLOEXEC, 0, RESOLVE_BENEATH);

	close(TU_RUN_FD(ctx, afio_openat2(ctx, f->dir.fd, "f", &how, tu_on_done, &d)));
	return 1;
}

static unsigned run_close(afio_ctx *ctx, struct fixture *f)
{
	int fd = dup(f->file);

	ck_assert_int_ge(fd, 0);
	TU_EXPECT(ctx, 0, afio_close(ctx, fd, tu_on_done, &d));
	return 1;
}

static unsigned run_statx(afio_ctx *ctx, struct fixture *f)
{
	struct statx stx;

	TU_EXPECT(ctx, 0,
		  afio_statx(ctx, f->dir.fd, "f", 0, STATX_BASIC_STATS, &stx, tu_on_done, &d));
	return 1;
}

static unsigned run_fallocate(afio_ctx *ctx, struct fixture *f)
{
	TU_EXPECT(ctx, 0,
		  afio_fallocate(ctx, f->file, FALLOC_FL_KEEP_SIZE, 0, 65536, tu_on_done, &d));
	return 1;
}

static unsigned run_ftruncate(afio_ctx *ctx, struct fixture *f)
{
	TU_EXPECT(ctx, 0, afio_ftruncate(ctx, f->file, 65536, tu_on_done, &d));
	return 1;
}

static unsigned run_sync_range(afio_ctx *ctx, struct fixture *f)
{
	TU_EXPECT(ctx, 0,
		  afio_sync_range(ctx, f->file, 0, 0, SYNC_FILE_RANGE_WRITE, tu_on_done, &d));
	return 1;
}

static unsigned run_renameat(afio_ctx *ctx, struct fixture *f)
{
	TU_EXPECT(ctx, 0, afio_renameat(ctx, f->dir.fd, "f", f->dir.fd, "g", 0, tu_on_done, &d));
	ck_assert_int_eq(renameat(f->dir.fd, "g", f->dir.fd, "f"), 0);
	return 1;
}

static unsigned run_unlinkat(afio_ctx *ctx, struct fixture *f)
{
	tu_put_file(f->dir.fd, "u", "x");
	TU_EXPECT(ctx, 0, afio_unlinkat(ctx, f->dir.fd, "u", 0, tu_on_done, &d));
	return 1;
}

static unsigned run_mkdirat(afio_ctx *ctx, struct fixture *f)
{
	TU_EXPECT(ctx, 0, afio_mkdirat(ctx, f->dir.fd, "m", 0700, tu_on_done, &d));
	ck_assert_int_eq(unlinkat(f->dir.fd, "m", AT_REMOVEDIR), 0);
	return 1;
}

static unsigned run_nop(afio_ctx *ctx, struct fixture *f)
{
	(void)f;
	TU_EXPECT(ctx, 0, afio_nop(ctx, tu_on_done, &d));
	return 1;
}

/* Each queues and checks requests of one op; returns how many. */
static const struct {
	const char *op;
	unsigned (*run)(afio_ctx *ctx, struct fixture *f);
} runners[] = {
	{ "read", run_read }, { "write", run_write }, { "readv", run_readv },
	{ "writev", run_writev }, { "fsync", run_fsync }, { "recv", run_recv },
	{ "send", run_send }, { "accept", run_accept }, { "connect", run_connect },
	{ "sendmsg", run_sendmsg }, { "recvmsg", run_recvmsg }, { "sendfile", run_sendfile },
	{ "timeout", run_timeout }, { "openat", run_openat }, { "openat2", run_openat2 },
	{ "close", run_close }, { "statx", run_statx }, { "fallocate", run_fallocate },
	{ "ftruncate", run_ftruncate }, { "sync_range", run_sync_range },
	{ "renameat", run_renameat }, { "unlinkat", run_unlinkat }, { "mkdirat", run_mkdirat },
	{ "nop", run_nop },
};

/*
 * For every op in the table: successful requests on a fresh context move
 * stats.fallbacks by exactly what afio_op_native() said (none native, one
 * each handed to the pool).
 */
START_TEST(test_native_agrees_with_fallbacks)
{
	struct fixture f;

	fixture_make(&f);
	for (unsigned op = 0; op < afio_op_count(); op++) {
		const char *name = afio_op_name(op);
		unsigned (*run)(afio_ctx *, struct fixture *) = NULL;
		char how[256] = "";
		uint64_t before, n;
		afio_ctx *ctx;
		int native;

		for (size_t i = 0; i < sizeof(runners) / sizeof(runners[0]); i++)
			if (!strcmp(runners[i].op, name))
				run = runners[i].run;
		ck_assert_msg(run, "no request here runs op %s: add one", name);
		ctx = tu_new_ctx();
		native = afio_op_native(ctx, op, how, sizeof(how));
		ck_assert_int_ge(native, 0);
		before = tu_fallbacks(ctx);
		n = run(ctx, &f);
		ck_assert_msg(tu_fallbacks(ctx) - before == (native ? 0 : n),
			      "%s on %s: afio_op_native says %d (\"%s\"), "
			      "stats.fallbacks grew by %llu in %llu requests",
			      name, tu_target_name(), native, how,
			      (unsigned long long)(tu_fallbacks(ctx) - before),
			      (unsigned long long)n);
		afio_destroy(ctx);
	}
	fixture_remove(&f);
}
END_TEST

/* ---- the suite ---- */

static Suite *ops_suite(void)
{
	Suite *s = suite_create("ops");
	TCase *sockets = tcase_create("sockets");
	TCase *timers = tcase_create("timers");
	TCase *files = tcase_create("files");
	TCase *args = tcase_create("arguments");
	TCase *cancel = tcase_create("cancel");
	TCase *table = tcase_create("table");

	tcase_add_loop_test(sockets, test_accept, 0, 2);
	tcase_add_loop_test(sockets, test_accept_several, 0, 2);
	tcase_add_loop_test(sockets, test_accept_errors, 0, 2);
	tcase_add_loop_test(sockets, test_connect, 0, 2);
	tcase_add_loop_test(sockets, test_connect_unix, 0, 2);
	tcase_add_loop_test(sockets, test_connect_errors, 0, 2);
	tcase_add_loop_test(sockets, test_connect_under_way, 0, 2);
	tcase_add_loop_test(sockets, test_msg_stream, 0, 2);
	tcase_add_loop_test(sockets, test_msg_trunc, 0, 2);
	tcase_add_loop_test(sockets, test_msg_udp_address, 0, 2);
	tcase_add_loop_test(sockets, test_msg_several, 0, 2);
	tcase_add_test(sockets, test_msg_scm_rights);
	tcase_add_test(sockets, test_msg_errors);
	tcase_add_loop_test(sockets, test_sendfile_tcp, 0, 2);
	tcase_add_loop_test(sockets, test_sendfile_ranges, 0, 2);
	tcase_add_test(sockets, test_sendfile_errors);
	tcase_add_loop_test(sockets, test_no_sigpipe, 0, 2);
	tcase_add_test(timers, test_timeout);
	tcase_add_test(timers, test_timeout_beside_io);
	tcase_add_test(timers, test_timeout_cancel_race);
	tcase_add_test(timers, test_timeout_by_eventfd);
	tcase_add_test(timers, test_nop);
	tcase_add_test(timers, test_nop_wakes_eventfd);
	tcase_add_test(timers, test_nop_cancel_destroy);
	tcase_add_test(files, test_openat);
	tcase_add_test(files, test_openat2);
	tcase_add_test(files, test_close);
	tcase_add_test(files, test_statx);
	tcase_add_test(files, test_statx_walk);
	tcase_add_test(files, test_writev2_flags);
	tcase_add_test(files, test_readv2_flags);
	tcase_add_test(files, test_rwf_direct);
	tcase_add_test(files, test_rw2_errors);
	tcase_add_test(files, test_fallocate);
	tcase_add_test(files, test_ftruncate);
	tcase_add_test(files, test_sync_range);
	tcase_add_test(files, test_renameat);
	tcase_add_test(files, test_unlinkat);
	tcase_add_test(files, test_mkdirat);
	tcase_add_test(files, test_at_fdcwd_relative);
	tcase_add_test(files, test_dio_align);
	tcase_add_test(args, test_bad_arguments);
	tcase_add_loop_test(cancel, test_cancel_waiting, 0, 2 * W_COUNT);
	tcase_add_loop_test(cancel, test_cancel_queued, 0, W_COUNT);
	tcase_add_loop_test(cancel, test_destroy_one_waiting, 0, 4 * W_COUNT);
	tcase_add_loop_test(cancel, test_destroy_all_waiting, 0, 4);
	tcase_add_loop_test(cancel, test_cancel_sendfile_midway, 0, 2);
	tcase_add_loop_test(cancel, test_accept_cancel_race, 0, 2);
	tcase_add_loop_test(cancel, test_recvmsg_cancel_race, 0, 2);
	tcase_add_loop_test(cancel, test_sendfile_cancel_race, 0, 2);
	tcase_add_test(table, test_op_names);
	tcase_add_test(table, test_op_native_how);
	tcase_add_test(table, test_threads_all_native);
	tcase_add_test(table, test_native_agrees_with_fallbacks);
	TCase *all[] = { sockets, timers, files, args, cancel, table };

	/* Each test takes well under a second; a hang, one that a request's
	   own bound cannot catch (inside afio_destroy()), ends at this one. */
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		tcase_set_timeout(all[i], 30);
		suite_add_tcase(s, all[i]);
	}
	return s;
}

int main(int argc, char **argv)
{
	return tu_main(argc, argv, ops_suite);
}
