/* SPDX-License-Identifier: MIT */
/*
 * afio-echo: a TCP echo server on libasyncfio.
 *
 * The program owns its epoll loop; libasyncfio only adds one eventfd to it.
 * Each connection is one allocation, made when it is accepted and freed when
 * it closes: a small header and its buffer.  It always has exactly one
 * request in flight: a receive into its buffer, or a send of what that
 * receive brought.  So the context needs one request entry per connection,
 * and no request ever outlives its socket.
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
/* Descriptors kept free for what the library and the loop open later. */
#define FD_RESERVE		16

#define STRINGIFY_(x)		#x
#define STRINGIFY(x)		STRINGIFY_(x)

struct echo;

struct link {
	struct link *prev, *next;
};

struct conn {
	/* By last activity, oldest first; only with --idle-timeout.  The
	   first member, so that a pointer to it is one to the connection. */
	struct link idle;
	struct echo *echo;
	uint64_t active_ms;
	int fd;
	bool timed_out;		/* shut down for idleness, closing */
	uint32_t len;		/* bytes the last receive brought */
	uint32_t sent;		/* how many of them went back already */
	char buf[];
};

struct echo {
	struct server srv;
	unsigned max_conn;
	unsigned open_conns;
	uint32_t buf_size;
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

/*
 * Shutting a socket down ends the request in flight on it, on every
 * backend and in every mode: a receive gets the end of the stream, a send
 * -EPIPE, and the callback closes it.  afio_cancel() would do too, but
 * it looks through every request slot, which for thousands of
 * connections timing out at once adds up.
 */
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
		c->timed_out = true;
		shutdown(c->fd, SHUT_RDWR);
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
	c = malloc(sizeof(*c) + echo->buf_size);
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
	start_receive(c);
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

enum { OPT_MAX_CONN, OPT_IDLE_TIMEOUT, OPT_BUF_SIZE, OPT_EVENTFD, NR_OPTS };

static int parse_echo_args(struct echo *echo, const struct server_extra_option *opt,
			   struct server_opts *opts)
{
	const char *efd = opt[OPT_EVENTFD].value;
	unsigned v;

	if (efd && !strcmp(efd, "lazy")) {
		opts->afio.flags |= AFIO_LAZY_EVENTFD;
	} else if (efd && strcmp(efd, "exact")) {
		fprintf(stderr, "--eventfd: expected exact or lazy, got \"%s\"\n", efd);
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
	return 0;
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
			.help = "  --buf-size B   receive buffer per connection, "
				"bytes (default " STRINGIFY(DEFAULT_BUF_SIZE) ")\n",
		},
		[OPT_EVENTFD] = {
			.name = "eventfd",
			.help = "  --eventfd exact|lazy\n"
				"                 lazy: AFIO_LAZY_EVENTFD, no eventfd read per "
				"busy round (default exact)\n",
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
	return status;
}
