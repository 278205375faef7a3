/* SPDX-License-Identifier: MIT */
/*
 * accept, connect, sendmsg, recvmsg and poll_fd on one backend in one mode (from
 * argv): results set against what the system says (addresses, flags,
 * msg_flags, control data), several waiting on one socket, and the
 * errors the Linux calls give, through the callback.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "asyncfio.h"
#include "testutil.h"

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

/* ---- poll_fd ---- */

/* A socket: nothing until data comes, then POLLIN; POLLOUT at once. */
START_TEST(test_poll_fd_socket)
{
	afio_ctx *ctx = tu_new_ctx();
	struct tu_done in = { 0 }, out = { 0 };
	int sv[2];

	tu_socketpair(sv);
	tu_queued(afio_poll_fd(ctx, sv[1], POLLIN, tu_on_done, &in), "poll_fd POLLIN");
	tu_queued(afio_poll_fd(ctx, sv[1], POLLOUT, tu_on_done, &out), "poll_fd POLLOUT");
	tu_wait_once(ctx, &out, "poll_fd POLLOUT on a socket with room");
	ck_assert_int_eq(out.res, POLLOUT);
	tu_still_waiting(ctx, &in, "poll_fd POLLIN on a silent socket");
	ck_assert_int_eq(write(sv[0], "x", 1), 1);
	tu_wait_once(ctx, &in, "poll_fd POLLIN after a write");
	ck_assert_int_eq(in.res, POLLIN);
	/* The byte is still there: readiness moves nothing. */
	ck_assert(tu_wait_readable(sv[1]));
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* The loop that waits inside afio_poll(): its own epoll set as the fd. */
START_TEST(test_poll_fd_epoll)
{
	afio_ctx *ctx = tu_new_ctx();
	struct epoll_event ev = { .events = EPOLLIN };
	struct epoll_event got;
	struct tu_done d = { 0 };
	int ep = epoll_create1(EPOLL_CLOEXEC), p[2];

	ck_assert_int_ge(ep, 0);
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	ev.data.fd = p[0];
	ck_assert_int_eq(epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev), 0);
	tu_queued(afio_poll_fd(ctx, ep, POLLIN, tu_on_done, &d), "poll_fd on an epoll fd");
	tu_still_waiting(ctx, &d, "poll_fd on an epoll set with nothing ready");
	ck_assert_int_eq(write(p[1], "x", 1), 1);
	tu_wait_once(ctx, &d, "poll_fd on an epoll set after a write to its pipe");
	ck_assert_int_eq(d.res, POLLIN);
	ck_assert_int_eq(epoll_wait(ep, &got, 1, 0), 1);
	ck_assert_int_eq(got.data.fd, p[0]);
	afio_destroy(ctx);
	close(ep);
	close(p[0]);
	close(p[1]);
}
END_TEST

/* What ends a wait without the events asked for: the peer's close, and a
   regular file, which poll(2) takes as always ready. */
START_TEST(test_poll_fd_hangup_and_file)
{
	afio_ctx *ctx = tu_new_ctx();
	struct tu_done hup = { 0 }, file = { 0 };
	int sv[2], fd = tu_new_file(O_RDWR);

	tu_socketpair(sv);
	tu_queued(afio_poll_fd(ctx, sv[1], POLLIN | POLLRDHUP, tu_on_done, &hup), "poll_fd");
	tu_still_waiting(ctx, &hup, "poll_fd before the peer closes");
	close(sv[0]);
	tu_wait_once(ctx, &hup, "poll_fd after the peer's close");
	ck_assert_msg(hup.res > 0 && (hup.res & POLLRDHUP), "poll_fd res %zd on %s",
		      hup.res, tu_target_name());
	tu_queued(afio_poll_fd(ctx, fd, POLLIN, tu_on_done, &file), "poll_fd on a file");
	tu_wait_once(ctx, &file, "poll_fd on a regular file");
	ck_assert_int_eq(file.res, POLLIN);
	afio_destroy(ctx);
	close(sv[1]);
	close(fd);
}
END_TEST

/* Refused at the call, or -EBADF through the callback; a cancel ends a
   wait once. */
START_TEST(test_poll_fd_errors_and_cancel)
{
	afio_ctx *ctx = tu_new_ctx();
	struct tu_done bad = { 0 }, w = { 0 };
	int sv[2];

	tu_socketpair(sv);
	ck_assert_int_eq(afio_poll_fd(ctx, -1, POLLIN, tu_on_done, &bad), -EBADF);
	ck_assert_int_eq(afio_poll_fd(ctx, sv[0], 0, tu_on_done, &bad), -EINVAL);
	ck_assert_int_eq(afio_poll_fd(ctx, sv[0], POLLNVAL, tu_on_done, &bad), -EINVAL);
	ck_assert_int_eq(afio_poll_fd(ctx, sv[0], POLLIN, NULL, &bad), -EINVAL);
	ck_assert_int_eq(afio_poll_fd(NULL, sv[0], POLLIN, tu_on_done, &bad), -EINVAL);
	tu_queued(afio_poll_fd(ctx, tu_closed_fd(), POLLIN, tu_on_done, &bad), "poll_fd");
	tu_wait_once(ctx, &bad, "poll_fd on a closed fd");
	tu_expect_eq(bad.res, -EBADF, "poll_fd on a closed fd");
	tu_queued(afio_poll_fd(ctx, sv[1], POLLIN, tu_on_done, &w), "poll_fd");
	tu_still_waiting(ctx, &w, "poll_fd on a silent socket");
	ck_assert_int_eq(afio_cancel(ctx, &w), 1);
	tu_wait_once(ctx, &w, "poll_fd canceled");
	ck_assert_int_eq(w.res, -ECANCELED);
	tu_no_second_callback(ctx, &w, "poll_fd canceled");
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

static Suite *sockets_suite(void)
{
	Suite *s = suite_create("sockets");
	TCase *accepts = tu_tcase(s, "accept");
	TCase *connects = tu_tcase(s, "connect");
	TCase *msgs = tu_tcase(s, "msg");
	TCase *polls = tu_tcase(s, "poll_fd");

	tcase_add_loop_test(accepts, test_accept, 0, 2);
	tcase_add_loop_test(accepts, test_accept_several, 0, 2);
	tcase_add_loop_test(accepts, test_accept_errors, 0, 2);
	tcase_add_loop_test(connects, test_connect, 0, 2);
	tcase_add_loop_test(connects, test_connect_unix, 0, 2);
	tcase_add_loop_test(connects, test_connect_errors, 0, 2);
	tcase_add_loop_test(connects, test_connect_under_way, 0, 2);
	tcase_add_loop_test(msgs, test_msg_stream, 0, 2);
	tcase_add_loop_test(msgs, test_msg_trunc, 0, 2);
	tcase_add_loop_test(msgs, test_msg_udp_address, 0, 2);
	tcase_add_loop_test(msgs, test_msg_several, 0, 2);
	tcase_add_test(msgs, test_msg_scm_rights);
	tcase_add_test(msgs, test_msg_errors);
	tcase_add_test(polls, test_poll_fd_socket);
	tcase_add_test(polls, test_poll_fd_epoll);
	tcase_add_test(polls, test_poll_fd_hangup_and_file);
	tcase_add_test(polls, test_poll_fd_errors_and_cancel);
	return s;
}

int main(int argc, char **argv)
{
	return tu_main(argc, argv, sockets_suite);
}
