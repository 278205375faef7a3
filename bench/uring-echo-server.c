/* SPDX-License-Identifier: MIT */
/*
 * uring-echo-server: the limit afio-echo on io_uring is measured against,
 * an echo server straight on liburing with no library between: the
 * thinnest loop of the same pattern (a receive into the connection's
 * buffer, a send of what it brought, again), one io_uring_submit_and_wait
 * per round.  With --multishot each connection has one multishot receive
 * for its whole life, into buffers the kernel picks from a ring of
 * provided buffers (Linux 6.0+), so that no receive is armed per message.
 *
 * usage: uring-echo-server [--addr A] [--port N] [--multishot]
 * The first line of stdout is "listening on ADDR:PORT"; SIGINT or SIGTERM
 * ends it with status 0.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <liburing.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "echo-listener.h"

#define BUF_SIZE	4096	/* as afio-echo's default */
#define RING_ENTRIES	256
#define CQ_ENTRIES	65536
#define NBUFS		8192	/* provided buffers, a power of two */
#define BUF_GROUP	0
#define QUEUED_MAX	8	/* received buffers waiting behind a send */

/* What a CQE is for: the low bits of its user_data, the rest a conn. */
enum tag { T_ACCEPT = 1, T_SIGNAL, T_RECV, T_SEND, T_TAG_MASK = 7 };

struct conn {
	struct conn *prev, *next;	/* every open connection, for the exit */
	int fd;
	unsigned inflight;	/* requests whose CQE is still to come */
	bool closing;
	bool recv_armed;	/* multishot: its receive goes on */
	/* the send in flight, or none when len is 0 */
	char *out;
	uint32_t len, sent;
	int bid;		/* multishot: the buffer being sent, or -1 */
	/* multishot: buffers received while a send was in flight */
	unsigned nqueued;
	struct { uint16_t bid; uint32_t len; } queued[QUEUED_MAX];
	struct conn *next_starved;
	char buf[];		/* one-shot receives only */
};

static struct io_uring ring;
static bool multishot;
static struct io_uring_buf_ring *bufring;
static char *bufs;
static struct conn *starved;	/* multishot receives that found no buffer */
static struct conn open_conns = { .prev = &open_conns, .next = &open_conns };

static struct io_uring_sqe *sqe(void)
{
	struct io_uring_sqe *s = io_uring_get_sqe(&ring);

	while (!s) {
		io_uring_submit(&ring);
		s = io_uring_get_sqe(&ring);
	}
	return s;
}

static void tag(struct io_uring_sqe *s, struct conn *c, enum tag t)
{
	io_uring_sqe_set_data64(s, (uint64_t)(uintptr_t)c | t);
	if (c)
		c->inflight++;
}

static void conn_close(struct conn *c)
{
	if (!c->closing) {
		c->closing = true;
		/* Ends a receive still in the kernel, which holds the file. */
		shutdown(c->fd, SHUT_RDWR);
	}
	if (c->inflight)
		return;
	c->prev->next = c->next;
	c->next->prev = c->prev;
	close(c->fd);
	free(c);
}

/* After the ring is gone, and with it every request that pointed here. */
static void free_all(void)
{
	while (open_conns.next != &open_conns) {
		struct conn *c = open_conns.next;

		c->inflight = 0;
		c->closing = true;
		conn_close(c);
	}
	free(bufring);
	free(bufs);
}

static void post_recv(struct conn *c)
{
	struct io_uring_sqe *s = sqe();

	if (multishot) {
		io_uring_prep_recv_multishot(s, c->fd, NULL, 0, 0);
		s->flags |= IOSQE_BUFFER_SELECT;
		s->buf_group = BUF_GROUP;
		c->recv_armed = true;
	} else {
		io_uring_prep_recv(s, c->fd, c->buf, BUF_SIZE, 0);
	}
	tag(s, c, T_RECV);
}

static void post_send(struct conn *c)
{
	struct io_uring_sqe *s = sqe();

	io_uring_prep_send(s, c->fd, c->out + c->sent, c->len - c->sent, MSG_NOSIGNAL);
	tag(s, c, T_SEND);
}

static char *buf_of(int bid)
{
	return bufs + (size_t)bid * BUF_SIZE;
}

static void give_back(int bid)
{
	io_uring_buf_ring_add(bufring, buf_of(bid), BUF_SIZE, (unsigned short)bid,
			      io_uring_buf_ring_mask(NBUFS), 0);
	io_uring_buf_ring_advance(bufring, 1);
	while (starved) {
		struct conn *c = starved;

		starved = c->next_starved;
		if (!c->closing)
			post_recv(c);
		c->inflight--;	/* the hold taken when it starved */
		if (c->closing)
			conn_close(c);
	}
}

static void start_send(struct conn *c, char *out, uint32_t len, int bid)
{
	c->out = out;
	c->len = len;
	c->sent = 0;
	c->bid = bid;
	post_send(c);
}

static void on_recv(struct conn *c, int res, unsigned flags)
{
	int bid = flags & IORING_CQE_F_BUFFER ? (int)(flags >> IORING_CQE_BUFFER_SHIFT) : -1;

	if (multishot && !(flags & IORING_CQE_F_MORE))
		c->recv_armed = false;
	if (res == -ENOBUFS && !c->closing) {
		/* Held until a buffer comes back (give_back). */
		c->inflight++;
		c->next_starved = starved;
		starved = c;
		return;
	}
	if (res <= 0 || c->closing) {
		if (bid >= 0)
			give_back(bid);
		conn_close(c);
		return;
	}
	if (!multishot) {
		start_send(c, c->buf, (uint32_t)res, -1);
		return;
	}
	if (c->len) {
		if (c->nqueued == QUEUED_MAX) {
			give_back(bid);
			conn_close(c);
			return;
		}
		c->queued[c->nqueued].bid = (uint16_t)bid;
		c->queued[c->nqueued++].len = (uint32_t)res;
	} else {
		start_send(c, buf_of(bid), (uint32_t)res, bid);
	}
	if (!c->recv_armed)
		post_recv(c);
}

static void on_send(struct conn *c, int res)
{
	if (res <= 0 || c->closing) {
		if (c->bid >= 0)
			give_back(c->bid);
		c->len = 0;
		conn_close(c);
		return;
	}
	c->sent += (uint32_t)res;
	if (c->sent < c->len) {
		post_send(c);
		return;
	}
	c->len = 0;
	if (!multishot) {
		post_recv(c);
		return;
	}
	give_back(c->bid);
	c->bid = -1;
	if (c->nqueued) {
		start_send(c, buf_of(c->queued[0].bid), c->queued[0].len, c->queued[0].bid);
		memmove(c->queued, c->queued + 1, --c->nqueued * sizeof(c->queued[0]));
	}
}

static void on_accept(int res)
{
	struct conn *c;

	if (res < 0) {
		if (res != -EAGAIN && res != -ECONNABORTED && res != -EINTR)
			fprintf(stderr, "uring-echo-server: accept: %s\n", strerror(-res));
		return;
	}
	c = calloc(1, sizeof(*c) + (multishot ? 0 : BUF_SIZE));
	if (!c) {
		close(res);
		return;
	}
	c->fd = res;
	c->bid = -1;
	c->next = &open_conns;
	c->prev = open_conns.prev;
	open_conns.prev->next = c;
	open_conns.prev = c;
	post_recv(c);
}

static void post_accept(int lfd)
{
	struct io_uring_sqe *s = sqe();

	io_uring_prep_multishot_accept(s, lfd, NULL, NULL, SOCK_CLOEXEC);
	tag(s, NULL, T_ACCEPT);
}

/* true when the server is to stop */
static bool on_cqe(const struct io_uring_cqe *cqe, int lfd)
{
	uint64_t ud = io_uring_cqe_get_data64(cqe);
	struct conn *c = (struct conn *)(uintptr_t)(ud & ~(uint64_t)T_TAG_MASK);
	enum tag t = (enum tag)(ud & T_TAG_MASK);

	switch (t) {
	case T_SIGNAL:
		return true;
	case T_ACCEPT:
		on_accept(cqe->res);
		if (!(cqe->flags & IORING_CQE_F_MORE))
			post_accept(lfd);
		return false;
	default:
		break;
	}
	if (!(cqe->flags & IORING_CQE_F_MORE))
		c->inflight--;
	if (t == T_RECV)
		on_recv(c, cqe->res, cqe->flags);
	else
		on_send(c, cqe->res);
	return false;
}

static int setup_bufring(void)
{
	struct io_uring_buf_reg reg = { .ring_entries = NBUFS, .bgid = BUF_GROUP };
	int ret;

	bufring = aligned_alloc(4096, NBUFS * sizeof(struct io_uring_buf));
	bufs = aligned_alloc(4096, (size_t)NBUFS * BUF_SIZE);
	if (!bufring || !bufs)
		return -ENOMEM;
	io_uring_buf_ring_init(bufring);
	reg.ring_addr = (uintptr_t)bufring;
	ret = io_uring_register_buf_ring(&ring, &reg, 0);
	if (ret)
		return ret;
	for (int i = 0; i < NBUFS; i++)
		io_uring_buf_ring_add(bufring, buf_of(i), BUF_SIZE, (unsigned short)i,
				      io_uring_buf_ring_mask(NBUFS), i);
	io_uring_buf_ring_advance(bufring, NBUFS);
	return 0;
}

static int watch_signals(void)
{
	struct io_uring_sqe *s;
	sigset_t mask;
	int fd;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	fd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (fd < 0) {
		perror("uring-echo-server: signalfd");
		return -1;
	}
	s = sqe();
	io_uring_prep_poll_add(s, fd, POLLIN);
	tag(s, NULL, T_SIGNAL);
	return 0;
}

static void parse_args(int argc, char **argv, const char **addr, unsigned *port)
{
	static const struct option longopts[] = {
		{ "addr", required_argument, NULL, 'a' },
		{ "port", required_argument, NULL, 'p' },
		{ "multishot", no_argument, NULL, 'm' },
		{ NULL, 0, NULL, 0 },
	};
	int opt;

	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (opt == 'a') {
			*addr = optarg;
		} else if (opt == 'p') {
			*port = (unsigned)strtoul(optarg, NULL, 10);
		} else if (opt == 'm') {
			multishot = true;
		} else {
			fprintf(stderr, "usage: uring-echo-server [--addr A] [--port N] [--multishot]\n");
			exit(2);
		}
	}
}

int main(int argc, char **argv)
{
	struct io_uring_params p = {
		.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL |
			 IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
		.cq_entries = CQ_ENTRIES,
	};
	const char *addr = "127.0.0.1";
	unsigned port = 8007, head, n;
	struct io_uring_cqe *cqe;
	struct rlimit rl;
	bool stop = false;
	int lfd, ret;

	parse_args(argc, argv, &addr, &port);
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	ret = io_uring_queue_init_params(RING_ENTRIES, &ring, &p);
	if (!ret && multishot)
		ret = setup_bufring();
	if (ret) {
		fprintf(stderr, "uring-echo-server: io_uring: %s\n", strerror(-ret));
		return 1;
	}
	lfd = echo_listen("uring-echo-server", addr, port, SOCK_CLOEXEC, &port);
	if (lfd < 0 || watch_signals())
		return 1;
	post_accept(lfd);
	if (echo_announce("uring-echo-server", addr, port))
		return 1;
	while (!stop) {
		ret = io_uring_submit_and_wait(&ring, 1);
		if (ret < 0 && ret != -EINTR && ret != -EBUSY) {
			fprintf(stderr, "uring-echo-server: io_uring_enter: %s\n", strerror(-ret));
			return 1;
		}
		n = 0;
		io_uring_for_each_cqe(&ring, head, cqe) {
			n++;
			if (on_cqe(cqe, lfd))
				stop = true;
		}
		io_uring_cq_advance(&ring, n);
	}
	io_uring_queue_exit(&ring);
	free_all();
	return 0;
}
