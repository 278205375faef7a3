/* SPDX-License-Identifier: MIT */
/*
 * Cancel and destroy of requests that wait, on one backend in one mode
 * (from argv): an accept with no client, a recvmsg with no data, a
 * connect to a full listener, a sendfile to a full socket and a timer,
 * canceled while they wait or before they reach the backend, or left to
 * afio_destroy(): -ECANCELED exactly once, and what they waited for still
 * comes to whoever asks next.  Then cancels that race the completion:
 * nothing lost, nothing twice.
 */
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "asyncfio.h"
#include "testutil.h"

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

static Suite *cancel_suite(void)
{
	Suite *s = suite_create("cancel");
	TCase *waiting = tu_tcase(s, "waiting");
	TCase *race = tu_tcase(s, "race");

	tcase_add_loop_test(waiting, test_cancel_waiting, 0, 2 * W_COUNT);
	tcase_add_loop_test(waiting, test_cancel_queued, 0, W_COUNT);
	tcase_add_loop_test(waiting, test_destroy_one_waiting, 0, 4 * W_COUNT);
	tcase_add_loop_test(waiting, test_destroy_all_waiting, 0, 4);
	tcase_add_loop_test(race, test_cancel_sendfile_midway, 0, 2);
	tcase_add_loop_test(race, test_accept_cancel_race, 0, 2);
	tcase_add_loop_test(race, test_recvmsg_cancel_race, 0, 2);
	tcase_add_loop_test(race, test_sendfile_cancel_race, 0, 2);
	return s;
}

int main(int argc, char **argv)
{
	return tu_main(argc, argv, cancel_suite);
}
