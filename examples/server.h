/* SPDX-License-Identifier: MIT */
/*
 * What the example servers share, and then afio-echo's own part.  Both
 * take the same --addr, --port, --backend and --mode, listen the same way,
 * stop on the same signals and say the same things at start.  The second
 * part is options with a usage text made from them and an epoll loop that
 * watches the listener, the libasyncfio eventfd and a signalfd: afio-httpd
 * needs neither, as each of its worker threads runs afio_poll() alone and
 * it has options without a value.
 */
#ifndef EXAMPLE_SERVER_H
#define EXAMPLE_SERVER_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "asyncfio.h"

/* ---- both servers ---- */

/* --backend NAME into cfg->backend; -EINVAL (with a message) for a name
   that is none. */
int server_parse_backend(const char *arg, struct afio_config *cfg);
/* --mode NAME into cfg->mode, the same way. */
int server_parse_mode(const char *arg, struct afio_config *cfg);

/* Parses a decimal count in [min, max]; -EINVAL (with a message) if not. */
int parse_count(const char *name, const char *arg, unsigned min, unsigned max,
		unsigned *out);

/* server_open_listener() flags */
#define LISTEN_REUSEPORT	(1u << 0)	/* SO_REUSEPORT: one listener per thread */
#define LISTEN_NODELAY		(1u << 1)	/* TCP_NODELAY, which accepted sockets inherit */

/* A non-blocking TCP listener on addr:port (IPv4; port 0: any free one),
   with SO_REUSEADDR.  Returns its fd and sets *bound to its port, or
   -errno. */
int server_open_listener(const char *addr, unsigned port, int backlog, unsigned flags,
			 unsigned *bound);

/* A descriptor to give up when accept finds none left, or -errno. */
int server_open_spare(void);

/* Raises RLIMIT_NOFILE to its hard limit; returns the limit in force. */
unsigned long server_raise_nofile(void);

/* SIGINT and SIGTERM: what stops a server. */
sigset_t server_stop_signals(void);

/* "PROG: backend B, mode M (what afio_describe() says)" on stderr. */
void server_describe(const char *prog, afio_ctx *ctx);

/* ---- afio-echo's options and loop ---- */

struct server_opts {
	const char *prog;		/* for messages and the usage text */
	const char *addr;		/* IPv4 address to listen on */
	unsigned port;			/* 0: the kernel picks a free one */
	unsigned default_port;
	unsigned max_conn;		/* each has one request in flight at most */
	unsigned entries;		/* request entries; 0: max_conn */
	bool wait_inside;		/* the loop waits in afio_poll(), not epoll_wait() */
	bool accept_multishot;		/* one afio_accept_multishot(), not the listener in epoll */
	struct afio_config afio;
};

/* One option a program takes besides --addr, --port, --backend, --mode. */
struct server_extra_option {
	const char *name;		/* takes a value: --name VALUE */
	const char *help;		/* its line(s) in the usage text */
	const char *value;		/* out: what was given, or NULL */
};

void server_opts_init(struct server_opts *opts, const char *prog, unsigned default_port);

/* Fills opts and extra from argv.  --help prints the usage and exits 0; a
   mistake prints it to stderr and exits 2. */
void server_parse_args(int argc, char **argv, struct server_opts *opts,
		       struct server_extra_option *extra);

/* The same with n extra options, extra[0] to extra[n - 1]. */
void server_parse_args_n(int argc, char **argv, struct server_opts *opts,
			 struct server_extra_option *extra, size_t n);

/*
 * A message about something that may happen thousands of times a second
 * (a full descriptor table, refused connections): each occurrence is
 * counted, and a line goes to stderr at most once a second, with the
 * count so far.  Zero-initialised.
 */
struct server_ratelimit {
	uint64_t next_ms;
	unsigned long total;
};

void server_warn_limited(struct server_ratelimit *rl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

struct server {
	afio_ctx *ctx;
	int epoll_fd;
	int listen_fd;
	int signal_fd;
	/* Called for every accepted connection; it owns fd from then on. */
	void (*on_accept)(struct server *srv, int fd);
	void *priv;

	/* Set up by server_start(); the program only reads them. */
	unsigned long nofile;		/* RLIMIT_NOFILE in force */
	unsigned fds_at_start;		/* descriptors open once started */

	/* The loop's own. */
	int spare_fd;			/* given up to accept when none is left */
	uint64_t listen_resume_ms;	/* listener paused until then, or 0 */
	struct server_ratelimit out_of_fds;
	void (*on_tick)(struct server *srv);
	unsigned tick_ms;
	uint64_t next_tick_ms;
	bool wait_inside;		/* server_opts' */
	bool accept_multishot;		/* server_opts' */
	afio_handle accept_shot;	/* accept_multishot: the request, 0 when none runs */
	bool closing;			/* server_stop() has begun: arm nothing */
	bool epoll_ready;		/* wait_inside: the afio_poll_fd() of the
					   epoll set said it has events */
	int epoll_err;			/* or that it failed */
};

/* Raises RLIMIT_NOFILE to its hard limit, blocks SIGINT and SIGTERM,
   creates the context, listens, and prints "listening on ADDR:PORT" as the
   first line of stdout.  0 or -errno. */
int server_start(struct server *srv, const struct server_opts *opts);

/* server_start() in two steps, for a program that looks at the context
   (its backend and mode) before it listens.  server_stop() undoes either. */
int server_open_context(struct server *srv, const struct server_opts *opts);
int server_listen(struct server *srv, const struct server_opts *opts);

/* After server_start(): on_tick(srv) runs from server_run() about every
   interval_ms, between rounds of events. */
void server_set_tick(struct server *srv, unsigned interval_ms,
		     void (*on_tick)(struct server *srv));

/* CLOCK_MONOTONIC in milliseconds. */
uint64_t server_now_ms(void);

/* Runs the loop until SIGINT or SIGTERM arrives.  0 or -errno.  It
   waits in epoll_wait(), the eventfd in its set, or with wait_inside in
   afio_poll(), its epoll set one more request (afio_poll_fd()). */
int server_run(struct server *srv);

/* Destroys the context, which runs every pending callback (-ECANCELED for
   what was still in flight), then closes the server's descriptors. */
void server_stop(struct server *srv);

#endif
