/* SPDX-License-Identifier: MIT */
/*
 * The part both example servers share: options, the listening socket, and
 * an epoll loop that watches the listener, the libasyncfio eventfd and a
 * signalfd.  What a connection does is up to each program.
 */
#ifndef EXAMPLE_SERVER_H
#define EXAMPLE_SERVER_H

#include <stdbool.h>

#include "asyncfio.h"

struct server_opts {
	const char *prog;		/* for messages and the usage text */
	const char *addr;		/* IPv4 address to listen on */
	unsigned port;			/* 0: the kernel picks a free one */
	unsigned default_port;
	unsigned max_conn;		/* each has one request in flight at most */
	struct afio_config afio;
};

/* One option a program takes besides --addr, --port, --backend, --mode. */
struct server_extra_option {
	const char *name;		/* takes a value: --name VALUE */
	const char *help;		/* its line in the usage text */
	const char *value;		/* out: what was given, or NULL */
};

void server_opts_init(struct server_opts *opts, const char *prog, unsigned default_port);

/* Fills opts and extra from argv.  --help prints the usage and exits 0; a
   mistake prints it to stderr and exits 2. */
void server_parse_args(int argc, char **argv, struct server_opts *opts,
		       struct server_extra_option *extra);

/* Parses a decimal count in [min, max]; -EINVAL (with a message) if not. */
int parse_count(const char *name, const char *arg, unsigned min, unsigned max,
		unsigned *out);

struct server {
	afio_ctx *ctx;
	int epoll_fd;
	int listen_fd;
	int signal_fd;
	/* Called for every accepted connection; it owns fd from then on. */
	void (*on_accept)(struct server *srv, int fd);
	void *priv;
};

/* Blocks SIGINT and SIGTERM, creates the context, listens, and prints
   "listening on ADDR:PORT" as the first line of stdout.  0 or -errno. */
int server_start(struct server *srv, const struct server_opts *opts);

/* Runs the loop until SIGINT or SIGTERM arrives.  0 or -errno. */
int server_run(struct server *srv);

/* Destroys the context, which runs every pending callback (-ECANCELED for
   what was still in flight), then closes the server's descriptors. */
void server_stop(struct server *srv);

#endif
