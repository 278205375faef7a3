/* SPDX-License-Identifier: MIT */
/*
 * afio-echo: a TCP echo server on libasyncfio.
 *
 * The program owns its epoll loop; libasyncfio only adds one eventfd to it.
 * Each connection is one allocation, made when it is accepted and freed when
 * it closes.  Two ways to receive (--recv):
 *
 * own: the allocation is a small header and its buffer, and it always has
 * exactly one request in flight: a receive into its buffer, or a send of
 * what that receive brought.  One request entry per connection.
 *
 * pooled: the header alone.  Each connection waits in one multishot
 * receive from a pool shared by all, holding no buffer while idle; what
 * arrives goes back from the pool buffer it came in, which returns to the
 * pool when its send is done.  Data may come while the previous send is
 * still under way, so a connection keeps its buffers in a queue (linked
 * through arrays indexed by buffer id, so the header holds only both
 * ends) and sends them one at a time, in order.  A send holds a buffer, so
 * the entries needed are one per connection and one per pool buffer.
 *
 * own is the default: pooled is as fast on libaio and the thread pool
 * (bench/results/2026-12-07-pooled-rearm.md), and on io_uring as fast as
 * the kernel's multishot receive without the library, which is a few
 * percent slower than a receive per message at 1000 connections
 * (bench/results/2026-12-07-echo-pooled-1000.md); it wins on the memory
 * of idle connections.
 *
 * Either way no request outlives its socket: the connection is freed only
 * once its receive has had its last completion and no send is under way.
 *
 * Connections are accepted by accept4() when epoll says the listener is
 * readable, or (--accept multishot) by one afio_accept_multishot() request;
 * examples/server.c does either.
 *
 * What one connection costs is in bench/results/2026-12-01-echo.md
 * ("What one connection costs").
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server.h"

#define DEFAULT_PORT		8007
#define DEFAULT_MAX_CONN	10000
#define MAX_CONN_LIMIT		1000000	/* afio_create(3) takes up to 2^20 entries */
#define DEFAULT_BUF_SIZE	4096
#define MAX_BUF_SIZE		(1024 * 1024)
#define MAX_IDLE_TIMEOUT	86400
/* Pool buffers (default_pool_bufs()).  Only the buffers in use at once
   take memory (the library maps the pool and reuses the latest returned
   first), so the count bounds how many connections can be mid-echo at
   once, not what an idle one costs. */
#define MIN_POOL_BUFS		256
#define MAX_POOL_BUFS		65535	/* ids fit a uint16_t, NO_BUF spare */
#define DEFAULT_POOL_MAX	32768	/* a kernel buffer ring's entries at most */
#define NO_BUF			UINT16_MAX
/* Buffers one connection may hold before its receive is paused: a peer
   that sends without reading would otherwise take the whole pool. */
#define MAX_QUEUED		4
/* Descriptors kept free for what the library and the loop open later. */
#define FD_RESERVE		16

#define STRINGIFY_(x)		#x
#define STRINGIFY(x)		STRINGIFY_(x)

struct echo;

struct link {
	struct link *prev, *next;
};

enum recv_style { RECV_OWN, RECV_POOLED };

struct conn {
	/* By last activity, oldest first; only with --idle-timeout.  The
	   first member, so that a pointer to it is one to the connection. */
	struct link idle;
	struct echo *echo;
	uint64_t active_ms;
	int fd;
	uint32_t sent;		/* bytes of the buffer in hand that went back already */
	union {
		uint32_t len;	/* own: bytes the last receive brought */
		struct {	/* pooled: buffers to send back, oldest first */
			uint16_t head, tail;
		};
	};
	/* pooled: buffers between head and tail.  More than MAX_QUEUED when
	   results came between a pause's cancel and its taking effect: as
	   many as the pool has, with the kernel's own multishot. */
	uint16_t queued;
	bool timed_out:1;	/* shut down for idleness, closing */
	bool paused:1;		/* pooled: receive canceled until the queue drains */
	bool ending:1;		/* pooled: no receive again; close once all is sent */
	afio_handle recv;	/* pooled: the multishot receive, 0 when none runs */
	char buf[];		/* own only */
};

/* What the pool's buffers hold, by buffer id: the bytes received, and the
   next buffer of the same connection's queue. */
struct pool_meta {
	uint32_t len;
	uint16_t next;
};

struct echo {
	struct server srv;
	unsigned max_conn;
	unsigned open_conns;
	uint32_t buf_size;
	enum recv_style recv_style;
	unsigned pool_bufs;		/* pooled: 0 until sized */
	unsigned pool;
	struct pool_meta *meta;		/* pool_bufs of them */
	uint64_t idle_timeout_ms;	/* 0: none */
	struct link idle_list;		/* next is the oldest */
	struct server_ratelimit refused;
	bool stopping;			/* callbacks close instead of going on */
};

/* ---- idleness ---- */

/* Coarse: a tick's worth of precision is plenty, and it is cheap. */
static uint64_t coarse_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void list_del(struct link *l)
{
	l->prev->next = l->next;
	l->next->prev = l->prev;
	l->prev = l->next = l;
}

static void list_add_tail(struct link *head, struct link *l)
{
	l->prev = head->prev;
	l->next = head;
	head->prev->next = l;
	head->prev = l;
}

static void touch(struct conn *c)
{
	struct echo *echo = c->echo;

	if (!echo->idle_timeout_ms || c->timed_out)
		return;
	c->active_ms = coarse_now_ms();
	list_del(&c->idle);
	list_add_tail(&echo->idle_list, &c->idle);
}

static void pooled_time_out(struct conn *c);

/*
 * Shutting a socket down ends the request in flight on it, on every
 * backend and in every mode: a receive gets the end of the stream, a send
 * -EPIPE, and the callback closes it.  afio_cancel() would do too, but
 * it looks through every request slot, which for thousands of
 * connections timing out at once adds up.  A pooled connection's
 * receive is canceled by its handle instead, which costs no more.
 */
static void time_out(struct conn *c)
{
	c->timed_out = true;
	if (c->echo->recv_style == RECV_POOLED)
		pooled_time_out(c);
	else
		shutdown(c->fd, SHUT_RDWR);
}

static void close_idle(struct server *srv)
{
	struct echo *echo = srv->priv;
	uint64_t now = coarse_now_ms();
	struct conn *c;

	while (echo->idle_list.next != &echo->idle_list) {
		c = (struct conn *)echo->idle_list.next;
		if (now - c->active_ms < echo->idle_timeout_ms)
			break;
		list_del(&c->idle);
		time_out(c);
	}
}

/* ---- connections ---- */

static void conn_close(struct conn *c)
{
	list_del(&c->idle);
	close(c->fd);
	c->echo->open_conns--;
	free(c);
}

static void on_received(void *data, ssize_t res);
static void on_sent(void *data, ssize_t res);

static void start_receive(struct conn *c)
{
	if (afio_recv(c->echo->srv.ctx, c->fd, c->buf, c->echo->buf_size, 0, on_received, c))
		conn_close(c);
}

static void send_rest(struct conn *c)
{
	if (afio_send(c->echo->srv.ctx, c->fd, c->buf + c->sent, c->len - c->sent, 0,
		      on_sent, c))
		conn_close(c);
}

/* res: bytes received, 0 when the peer closed, or -errno. */
static void on_received(void *data, ssize_t res)
{
	struct conn *c = data;

	if (res <= 0 || c->echo->stopping) {
		conn_close(c);
		return;
	}
	touch(c);
	c->len = (uint32_t)res;
	c->sent = 0;
	send_rest(c);
}

static void on_sent(void *data, ssize_t res)
{
	struct conn *c = data;

	if (res < 0 || c->echo->stopping) {
		conn_close(c);
		return;
	}
	/* A send may take only part of the buffer when the peer reads slowly. */
	c->sent += (uint32_t)res;
	if (c->sent < c->len)
		send_rest(c);
	else
		start_receive(c);
}

/* ---- pooled receives ---- */

static void on_pooled_recv(void *data, ssize_t res, unsigned flags);
static void on_pooled_sent(void *data, ssize_t res);

static void *pool_buf(const struct conn *c, uint16_t id)
{
	return afio_buf(c->echo->srv.ctx, c->echo->pool, id);
}

/* During afio_destroy() the pool goes with the context: nothing to give
   back, and nothing that a returned buffer should wake. */
static void pool_release(struct conn *c, uint16_t id)
{
	if (!c->echo->stopping)
		afio_buf_release(c->echo->srv.ctx, c->echo->pool, id);
}

static bool pooled_done(const struct conn *c)
{
	return c->ending && !c->recv && !c->queued;
}

static void pooled_close_if_done(struct conn *c)
{
	if (pooled_done(c))
		conn_close(c);
}

/* Its last completion comes to the callback as usual.  afio_destroy()
   ends every receive itself. */
static void stop_receive(struct conn *c)
{
	if (c->recv && !c->echo->stopping)
		afio_cancel_handle(c->echo->srv.ctx, c->recv);
}

static int start_pooled_receive(struct conn *c)
{
	afio_ctx *ctx = c->echo->srv.ctx;
	int ret;

	ret = afio_recv_pooled(ctx, c->fd, c->echo->pool, 0, AFIO_RECV_MULTISHOT,
			       on_pooled_recv, c);
	if (!ret)
		c->recv = afio_last_handle(ctx);
	return ret;
}

/* The connection is over: what is queued will not be sent. */
static void pooled_fail(struct conn *c)
{
	uint16_t id;

	c->ending = true;
	while (c->queued) {
		id = c->head;
		c->head = c->echo->meta[id].next;
		c->queued--;
		pool_release(c, id);
	}
	stop_receive(c);
}

static void send_head(struct conn *c)
{
	struct echo *echo = c->echo;
	const char *buf = pool_buf(c, c->head);

	if (afio_send(echo->srv.ctx, c->fd, buf + c->sent, echo->meta[c->head].len - c->sent,
		      0, on_pooled_sent, c))
		pooled_fail(c);
}

/* The queue's head is the one buffer whose send is under way. */
static void enqueue(struct conn *c, uint16_t id, uint32_t len)
{
	struct pool_meta *meta = c->echo->meta;

	meta[id].len = len;
	meta[id].next = NO_BUF;
	if (c->queued++) {
		meta[c->tail].next = id;
		c->tail = id;
		return;
	}
	c->head = c->tail = id;
	c->sent = 0;
	send_head(c);
}

static void pooled_received(struct conn *c, ssize_t res, unsigned flags)
{
	if (c->echo->stopping || c->ending) {
		pool_release(c, (uint16_t)afio_cqe_buf(flags));
		return;
	}
	touch(c);
	enqueue(c, (uint16_t)afio_cqe_buf(flags), (uint32_t)res);
	if (c->queued >= MAX_QUEUED && !c->ending)
		c->paused = true;
}

/* A paused receive starts again once its last completion came and the
   peer has read all that it sent. */
static void pooled_resume(struct conn *c)
{
	if (!c->paused || c->recv || c->queued)
		return;
	c->paused = false;
	if (start_pooled_receive(c))
		c->ending = true;
}

/* The receive had its last completion: is that the connection's end?
   Not when it was canceled for a pause, which may also end with bytes. */
static void pooled_recv_ended(struct conn *c, ssize_t res)
{
	c->recv = 0;
	if (!c->paused || c->echo->stopping || (res <= 0 && res != -ECANCELED))
		c->ending = true;
}

/*
 * res: bytes in a pool buffer, 0 when the peer closed, or -errno; the
 * last completion has no AFIO_CQE_MORE, and may bring bytes too (a cancel
 * or afio_destroy() that came after them).  One that should not go on
 * may still bring a completion that was in hand before the cancel, and
 * carry on: it is canceled again.
 */
static void on_pooled_recv(void *data, ssize_t res, unsigned flags)
{
	struct conn *c = data;

	if (flags & AFIO_CQE_BUFFER)
		pooled_received(c, res, flags);
	if (!(flags & AFIO_CQE_MORE))
		pooled_recv_ended(c, res);
	if (c->ending)
		c->paused = false;
	if (c->ending || c->paused)
		stop_receive(c);
	pooled_resume(c);
	pooled_close_if_done(c);
}

static void on_pooled_sent(void *data, ssize_t res)
{
	struct conn *c = data;
	uint16_t id = c->head;

	if (res < 0 || c->echo->stopping) {
		pooled_fail(c);
		pooled_close_if_done(c);
		return;
	}
	/* A send may take only part of the buffer when the peer reads slowly. */
	c->sent += (uint32_t)res;
	if (c->sent < c->echo->meta[id].len) {
		send_head(c);
	} else {
		c->head = c->echo->meta[id].next;
		c->queued--;
		c->sent = 0;
		pool_release(c, id);
		if (c->queued)
			send_head(c);
		else
			pooled_resume(c);
	}
	pooled_close_if_done(c);
}

/* A send still under way may wait on a peer that does not read: the
   shutdown ends it. */
static void pooled_time_out(struct conn *c)
{
	c->ending = true;
	c->paused = false;
	stop_receive(c);
	if (c->queued)
		shutdown(c->fd, SHUT_RDWR);
	pooled_close_if_done(c);
}

static int start_conn(struct conn *c)
{
	if (c->echo->recv_style == RECV_OWN)
		return afio_recv(c->echo->srv.ctx, c->fd, c->buf, c->echo->buf_size, 0,
				 on_received, c);
	c->queued = 0;
	c->paused = c->ending = false;
	c->recv = 0;
	return start_pooled_receive(c);
}

/* Refusing at once is kinder to the client than leaving it hanging. */
static void refuse(struct echo *echo, int fd)
{
	close(fd);
	server_warn_limited(&echo->refused, "refusing new connections: %u open, "
			    "the most this server takes", echo->open_conns);
}

static void accept_conn(struct server *srv, int fd)
{
	struct echo *echo = srv->priv;
	struct conn *c;

	if (echo->open_conns >= echo->max_conn) {
		refuse(echo, fd);
		return;
	}
	c = malloc(sizeof(*c) + (echo->recv_style == RECV_OWN ? echo->buf_size : 0));
	if (!c) {
		refuse(echo, fd);
		return;
	}
	c->echo = echo;
	c->fd = fd;
	c->timed_out = false;
	c->idle.prev = c->idle.next = &c->idle;
	echo->open_conns++;
	touch(c);
	if (start_conn(c))
		conn_close(c);
}

/* ---- limits ---- */

/*
 * In ASYNC mode the thread pool (the threads backend, and libaio for
 * sockets) gives each waiting receive a worker of its own: that is what
 * ASYNC means there.  More connections than workers would leave the rest
 * waiting for a worker while their clients talk.  An explicit --max-conn
 * beyond that is refused; the default is lowered to it.
 */
static int check_async_ceiling(struct echo *echo, bool explicit_max)
{
	afio_ctx *ctx = echo->srv.ctx;
	struct afio_limits lim;

	if (afio_limits(ctx, &lim) || echo->max_conn <= lim.socket_waits)
		return 0;
	if (explicit_max) {
		fprintf(stderr, "afio-echo: --max-conn %u: %s in async mode holds a pool "
			"worker for every waiting connection and has at most %u; give "
			"--max-conn %u or less, or --mode inline or hybrid, which wait "
			"without a worker\n", echo->max_conn,
			afio_backend_name(afio_backend(ctx)), lim.socket_waits, lim.socket_waits);
		return -EINVAL;
	}
	echo->max_conn = lim.socket_waits;
	fprintf(stderr, "afio-echo: %s in async mode serves at most %u connections "
		"(a pool worker each)\n", afio_backend_name(afio_backend(ctx)), lim.socket_waits);
	return 0;
}

/*
 * Descriptors: one per connection, and on libaio and the thread pool a
 * second one while its request waits (the backend's dup of the socket).
 * A dup that finds no descriptor left costs nothing but the dup (the
 * request waits on the application's fd), and an accept that finds none
 * left turns the connection away (server.c); what the limit allows is
 * only said, once, at start.
 */
static void fit_descriptors(const struct echo *echo)
{
	const struct server *srv = &echo->srv;
	bool dup_each = afio_backend(srv->ctx) != AFIO_BACKEND_IO_URING;
	unsigned long room = srv->nofile - srv->fds_at_start, fit;

	fit = room > FD_RESERVE ? room - FD_RESERVE : 0;
	if (dup_each)
		fit /= 2;
	if (fit < echo->max_conn)
		fprintf(stderr, "afio-echo: RLIMIT_NOFILE %lu leaves room for %lu connections "
			"here%s, fewer than --max-conn %u\n", srv->nofile, fit,
			dup_each ? " while all of them wait (2 descriptors each)" : "",
			echo->max_conn);
}

/* ---- start-up ---- */

enum { OPT_MAX_CONN, OPT_IDLE_TIMEOUT, OPT_BUF_SIZE, OPT_EVENTFD, OPT_RECV, OPT_POOL_BUFS,
       OPT_ACCEPT, NR_OPTS };

/* An option that names one of two choices: 0 for the first (also when it
   is not given), 1 for the second, or -EINVAL (with a message). */
static int parse_either(const struct server_extra_option *o, const char *first,
			const char *second)
{
	if (!o->value || !strcmp(o->value, first))
		return 0;
	if (!strcmp(o->value, second))
		return 1;
	fprintf(stderr, "--%s: expected %s or %s, got \"%s\"\n", o->name, first, second,
		o->value);
	return -EINVAL;
}

static int parse_recv_args(struct echo *echo, const struct server_extra_option *opt)
{
	int pooled = parse_either(&opt[OPT_RECV], "own", "pooled");

	if (pooled < 0)
		return -EINVAL;
	echo->recv_style = pooled ? RECV_POOLED : RECV_OWN;
	if (opt[OPT_POOL_BUFS].value &&
	    parse_count(opt[OPT_POOL_BUFS].name, opt[OPT_POOL_BUFS].value, 1, MAX_POOL_BUFS,
			&echo->pool_bufs))
		return -EINVAL;
	return 0;
}

static int parse_echo_args(struct echo *echo, const struct server_extra_option *opt,
			   struct server_opts *opts)
{
	const char *eventfd = opt[OPT_EVENTFD].value;
	const char *accept = opt[OPT_ACCEPT].value;
	unsigned v;

	if (accept && !strcmp(accept, "multishot")) {
		opts->accept_multishot = true;
	} else if (accept && strcmp(accept, "epoll")) {
		fprintf(stderr, "--accept: expected epoll or multishot, got \"%s\"\n", accept);
		return -EINVAL;
	}

	if (eventfd && !strcmp(eventfd, "lazy")) {
		opts->afio.flags |= AFIO_LAZY_EVENTFD;
	} else if (eventfd && !strcmp(eventfd, "none")) {
		opts->wait_inside = true;
	} else if (eventfd && strcmp(eventfd, "exact")) {
		fprintf(stderr, "--eventfd: expected exact, lazy or none, got \"%s\"\n", eventfd);
		return -EINVAL;
	}

	if (opt[OPT_MAX_CONN].value &&
	    parse_count(opt[OPT_MAX_CONN].name, opt[OPT_MAX_CONN].value, 1, MAX_CONN_LIMIT,
			&echo->max_conn))
		return -EINVAL;
	if (opt[OPT_BUF_SIZE].value) {
		if (parse_count(opt[OPT_BUF_SIZE].name, opt[OPT_BUF_SIZE].value, 64,
				MAX_BUF_SIZE, &v))
			return -EINVAL;
		echo->buf_size = v;
	}
	if (opt[OPT_IDLE_TIMEOUT].value) {
		if (parse_count(opt[OPT_IDLE_TIMEOUT].name, opt[OPT_IDLE_TIMEOUT].value, 0,
				MAX_IDLE_TIMEOUT, &v))
			return -EINVAL;
		echo->idle_timeout_ms = (uint64_t)v * 1000;
	}
	return parse_recv_args(echo, opt);
}

/*
 * Two buffers for every connection that may be mid-message at once, which
 * under load is every one: the one its send still holds and the one its
 * next message comes in.  A smaller pool runs empty and its receives wait
 * for buffers (at 5000 busy connections a quarter cost 5 SQEs per round
 * trip, bench/results/2026-12-03-native-multishot.md; one per connection
 * cost a third of the requests/s at 1000 connections on the pool and
 * libaio, bench/results/2026-12-07-pooled-rearm.md).  Unused buffers and
 * entries cost no memory (the pool is mapped, the library makes slots as
 * they are first taken), so this costs an idle server nothing.  Up to the
 * most a kernel buffer ring holds.
 */
static unsigned default_pool_bufs(unsigned max_conn)
{
	if (max_conn < MIN_POOL_BUFS / 2)
		return MIN_POOL_BUFS;
	return max_conn > DEFAULT_POOL_MAX / 2 ? DEFAULT_POOL_MAX : 2 * max_conn;
}

/* Request entries: a receive per connection, and a send per buffer that
   can be out of the pool at once, if pooled. */
static unsigned entries_needed(struct echo *echo)
{
	if (echo->recv_style == RECV_OWN)
		return echo->max_conn;
	if (!echo->pool_bufs)
		echo->pool_bufs = default_pool_bufs(echo->max_conn);
	return echo->max_conn + echo->pool_bufs;
}

static int create_pool(struct echo *echo)
{
	int ret;

	if (echo->recv_style == RECV_OWN)
		return 0;
	echo->meta = calloc(echo->pool_bufs, sizeof(*echo->meta));
	if (!echo->meta)
		return -ENOMEM;
	ret = afio_bufpool_create(echo->srv.ctx, echo->pool_bufs, echo->buf_size, &echo->pool);
	if (ret)
		fprintf(stderr, "afio-echo: a pool of %u buffers of %u bytes: %s\n",
			echo->pool_bufs, echo->buf_size, strerror(-ret));
	return ret;
}

static void start_idle_timer(struct echo *echo)
{
	uint64_t tick = echo->idle_timeout_ms / 4;

	if (echo->idle_timeout_ms)
		server_set_tick(&echo->srv, tick < 1000 ? (unsigned)tick : 1000, close_idle);
}

/* 0, or the exit status: what the backend and mode in force cannot serve
   is refused before the server listens. */
static int start(struct echo *echo, const struct server_opts *opts, bool explicit_max)
{
	if (server_open_context(&echo->srv, opts))
		return 1;
	if (check_async_ceiling(echo, explicit_max))
		return 2;
	if (create_pool(echo))
		return 1;
	if (server_listen(&echo->srv, opts))
		return 1;
	fit_descriptors(echo);
	start_idle_timer(echo);
	return 0;
}

int main(int argc, char **argv)
{
	struct server_extra_option opt[NR_OPTS] = {
		[OPT_MAX_CONN] = {
			.name = "max-conn",
			.help = "  --max-conn N   connections served at once "
				"(default " STRINGIFY(DEFAULT_MAX_CONN) ")\n",
		},
		[OPT_IDLE_TIMEOUT] = {
			.name = "idle-timeout",
			.help = "  --idle-timeout S\n"
				"                 close a connection that sent nothing "
				"for S seconds (default 0: never)\n",
		},
		[OPT_BUF_SIZE] = {
			.name = "buf-size",
			.help = "  --buf-size B   receive buffer per connection, or per pool "
				"buffer, bytes (default " STRINGIFY(DEFAULT_BUF_SIZE) ")\n",
		},
		[OPT_RECV] = {
			.name = "recv",
			.help = "  --recv own|pooled\n"
				"                 own: a buffer per connection; pooled: one "
				"multishot receive\n"
				"                 each from a shared pool, no buffer "
				"while idle (default own)\n",
		},
		[OPT_POOL_BUFS] = {
			.name = "pool-bufs",
			.help = "  --pool-bufs N  buffers of the pool with --recv pooled "
				"(default twice --max-conn,\n"
				"                 at least " STRINGIFY(MIN_POOL_BUFS) ", at most "
				STRINGIFY(DEFAULT_POOL_MAX) ")\n",
		},
		[OPT_EVENTFD] = {
			.name = "eventfd",
			.help = "  --eventfd exact|lazy|none\n"
				"                 lazy: AFIO_LAZY_EVENTFD, the eventfd cleared "
				"only by a poll that finds nothing;\n"
				"                 none: the loop waits inside afio_poll(), its "
				"epoll set\n"
				"                 watched by afio_poll_fd() (default exact)\n",
		},
		[OPT_ACCEPT] = {
			.name = "accept",
			.help = "  --accept epoll|multishot\n"
				"                 epoll: accept4() when the listener is "
				"readable; multishot: one\n"
				"                 afio_accept_multishot() request "
				"(default epoll)\n",
		},
	};
	struct echo echo = { .max_conn = DEFAULT_MAX_CONN, .buf_size = DEFAULT_BUF_SIZE };
	struct server_opts opts;
	int status;

	echo.idle_list.prev = echo.idle_list.next = &echo.idle_list;
	server_opts_init(&opts, "afio-echo", DEFAULT_PORT);
	server_parse_args_n(argc, argv, &opts, opt, NR_OPTS);
	if (parse_echo_args(&echo, opt, &opts))
		return 2;
	opts.max_conn = echo.max_conn;
	opts.entries = entries_needed(&echo);
	echo.srv.on_accept = accept_conn;
	echo.srv.priv = &echo;

	status = start(&echo, &opts, opt[OPT_MAX_CONN].value != NULL);
	if (!status && server_run(&echo.srv))
		status = 1;
	/* afio_destroy() ends the request of each open connection, with
	   -ECANCELED or its real result, and the callback closes it. */
	echo.stopping = true;
	server_stop(&echo.srv);

	/* Every request completes exactly once, so none can be left open. */
	if (echo.open_conns) {
		fprintf(stderr, "afio-echo: %u connections still open\n", echo.open_conns);
		status = 1;
	}
	free(echo.meta);
	return status;
}
