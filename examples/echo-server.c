/* SPDX-License-Identifier: MIT */
/*
 * afio-echo: a TCP echo server on libasyncfio.
 *
 * The program owns its epoll loop; libasyncfio only adds one eventfd to it.
 * Each connection lives in a slot of a table allocated once at start-up and
 * always has exactly one request in flight: a receive into its buffer, or a
 * send of what that receive brought.  So the context needs one request
 * entry per connection, and no request ever outlives its socket.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server.h"

#define DEFAULT_PORT		8007
#define DEFAULT_MAX_CONN	64
#define MAX_CONN_LIMIT		1024	/* what the pool can have in workers */
#define CONN_BUF_SIZE		(16 * 1024)

#define STRINGIFY_(x)		#x
#define STRINGIFY(x)		STRINGIFY_(x)

struct echo;

struct conn {
	struct echo *echo;
	int fd;			/* -1: the slot is free */
	size_t len;		/* bytes the last receive brought */
	size_t sent;		/* how many of them went back already */
	char buf[CONN_BUF_SIZE];
};

struct echo {
	struct server srv;
	struct conn *conns;
	unsigned max_conn;
	unsigned open_conns;
	bool stopping;		/* callbacks close instead of going on */
};

static void conn_close(struct conn *c)
{
	close(c->fd);
	c->fd = -1;
	c->echo->open_conns--;
}

static void on_received(void *data, ssize_t res);
static void on_sent(void *data, ssize_t res);

static void start_receive(struct conn *c)
{
	if (afio_recv(c->echo->srv.ctx, c->fd, c->buf, sizeof(c->buf), 0, on_received, c))
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
	c->len = (size_t)res;
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
	c->sent += (size_t)res;
	if (c->sent < c->len)
		send_rest(c);
	else
		start_receive(c);
}

static struct conn *free_slot(struct echo *echo)
{
	for (unsigned i = 0; i < echo->max_conn; i++)
		if (echo->conns[i].fd < 0)
			return &echo->conns[i];
	return NULL;
}

static void accept_conn(struct server *srv, int fd)
{
	struct echo *echo = srv->priv;
	struct conn *c = free_slot(echo);

	/* Refusing at once is kinder to the client than leaving it hanging. */
	if (!c) {
		close(fd);
		return;
	}
	c->fd = fd;
	echo->open_conns++;
	start_receive(c);
}

/* The request of each open connection completes with -ECANCELED (or its
   real result) when afio_destroy() runs, and its callback closes it. */
static void cancel_all(struct echo *echo)
{
	echo->stopping = true;
	for (unsigned i = 0; i < echo->max_conn; i++)
		if (echo->conns[i].fd >= 0)
			afio_cancel(echo->srv.ctx, &echo->conns[i]);
}

static int alloc_conns(struct echo *echo)
{
	echo->conns = calloc(echo->max_conn, sizeof(*echo->conns));
	if (!echo->conns)
		return -ENOMEM;
	for (unsigned i = 0; i < echo->max_conn; i++) {
		echo->conns[i].echo = echo;
		echo->conns[i].fd = -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct server_extra_option max_conn = {
		.name = "max-conn",
		.help = "  --max-conn N   connections served at once (default "
			STRINGIFY(DEFAULT_MAX_CONN) ")\n",
	};
	struct echo echo = { .max_conn = DEFAULT_MAX_CONN };
	struct server_opts opts;
	int ret;

	server_opts_init(&opts, "afio-echo", DEFAULT_PORT);
	server_parse_args(argc, argv, &opts, &max_conn);
	if (max_conn.value &&
	    parse_count(max_conn.name, max_conn.value, 1, MAX_CONN_LIMIT, &echo.max_conn))
		return 2;
	if (alloc_conns(&echo)) {
		fprintf(stderr, "afio-echo: out of memory\n");
		return 1;
	}
	opts.max_conn = echo.max_conn;
	echo.srv.on_accept = accept_conn;
	echo.srv.priv = &echo;

	ret = server_start(&echo.srv, &opts);
	if (!ret)
		ret = server_run(&echo.srv);
	cancel_all(&echo);
	server_stop(&echo.srv);

	/* Every request completes exactly once, so none can be left open. */
	if (echo.open_conns)
		fprintf(stderr, "afio-echo: %u connections still open\n", echo.open_conns);
	free(echo.conns);
	return ret || echo.open_conns ? 1 : 0;
}
