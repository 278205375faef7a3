/* SPDX-License-Identifier: MIT */
/* Options, listener and event loop shared by the example servers. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server.h"

#define MAX_EVENTS 64

static const char *prog_name = "server";

static int report(const char *what, int err)
{
	fprintf(stderr, "%s: %s: %s\n", prog_name, what, strerror(-err));
	return err;
}

void server_opts_init(struct server_opts *opts, const char *prog, unsigned default_port)
{
	prog_name = prog;
	opts->prog = prog;
	opts->addr = "127.0.0.1";
	opts->port = default_port;
	opts->default_port = default_port;
	opts->max_conn = 64;
	afio_config_init(&opts->afio);
}

int parse_count(const char *name, const char *arg, unsigned min, unsigned max,
		unsigned *out)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || end == arg || *end || v < min || v > max) {
		fprintf(stderr, "--%s: expected a number from %u to %u, got \"%s\"\n",
			name, min, max, arg);
		return -EINVAL;
	}
	*out = (unsigned)v;
	return 0;
}

/* One of the options every server takes. */
static int parse_option(struct server_opts *opts, int opt, const char *arg)
{
	switch (opt) {
	case 'a':
		opts->addr = arg;
		return 0;
	case 'p':
		return parse_count("port", arg, 0, 65535, &opts->port);
	case 'b':
		if (afio_backend_parse(arg, &opts->afio.backend))
			break;
		/* Whoever names a backend wants to see that one run, or why not. */
		if (opts->afio.backend != AFIO_BACKEND_AUTO)
			opts->afio.flags |= AFIO_NO_FALLBACK;
		return 0;
	case 'm':
		if (afio_mode_parse(arg, &opts->afio.mode))
			break;
		return 0;
	default:
		return -EINVAL;
	}
	fprintf(stderr, "--%s: unknown name \"%s\"\n", opt == 'b' ? "backend" : "mode", arg);
	return -EINVAL;
}

static void usage(FILE *f, const struct server_opts *opts,
		  const struct server_extra_option *extra)
{
	fprintf(f, "usage: %s [options]\n"
		"  --addr A       IPv4 address to listen on (default 127.0.0.1)\n"
		"  --port N       TCP port, 0 for any free one (default %u)\n"
		"  --backend B    io_uring, libaio, threads or auto (default auto)\n"
		"  --mode M       inline, async or hybrid (default inline)\n"
		"%s", opts->prog, opts->default_port, extra->help);
}

void server_parse_args(int argc, char **argv, struct server_opts *opts,
		       struct server_extra_option *extra)
{
	const struct option longopts[] = {
		{ "addr", required_argument, NULL, 'a' },
		{ "port", required_argument, NULL, 'p' },
		{ "backend", required_argument, NULL, 'b' },
		{ "mode", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ extra->name, required_argument, NULL, 'x' },
		{ NULL, 0, NULL, 0 },
	};
	int opt, ret = 0;

	extra->value = NULL;
	while (!ret && (opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (opt == 'h') {
			usage(stdout, opts, extra);
			exit(0);
		}
		if (opt == 'x')
			extra->value = optarg;
		else
			ret = parse_option(opts, opt, optarg);
	}
	if (ret || optind != argc) {
		usage(stderr, opts, extra);
		exit(2);
	}
}

/* SIGINT and SIGTERM arrive through a descriptor in the loop instead of
   interrupting a callback.  Blocked before the context starts any thread,
   so that every thread inherits the mask. */
static int open_signalfd(void)
{
	sigset_t mask;
	int fd;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	if (sigprocmask(SIG_BLOCK, &mask, NULL))
		return -errno;
	fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static int open_listener(const char *addr, unsigned port, unsigned *bound_port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	socklen_t len = sizeof(sin);
	int one = 1;
	int fd, err;

	if (inet_pton(AF_INET, addr, &sin.sin_addr) != 1)
		return -EINVAL;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    listen(fd, SOMAXCONN) ||
	    getsockname(fd, (struct sockaddr *)&sin, &len)) {
		err = -errno;
		close(fd);
		return err;
	}
	*bound_port = ntohs(sin.sin_port);
	return fd;
}

static int watch(int epoll_fd, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	return epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

static void describe_backend(afio_ctx *ctx)
{
	char desc[256];

	if (afio_describe(ctx, desc, sizeof(desc)) < 0)
		desc[0] = '\0';
	fprintf(stderr, "%s: backend %s, mode %s (%s)\n", prog_name,
		afio_backend_name(afio_backend(ctx)), afio_mode_name(afio_mode(ctx)), desc);
}

static int open_descriptors(struct server *srv, const struct server_opts *opts)
{
	unsigned port = 0;
	int ret;

	srv->listen_fd = open_listener(opts->addr, opts->port, &port);
	if (srv->listen_fd < 0)
		return report(opts->addr, srv->listen_fd);
	srv->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (srv->epoll_fd < 0)
		return report("epoll_create1", -errno);
	ret = watch(srv->epoll_fd, srv->listen_fd);
	if (!ret)
		ret = watch(srv->epoll_fd, srv->signal_fd);
	if (!ret)
		ret = watch(srv->epoll_fd, afio_eventfd(srv->ctx));
	if (ret)
		return report("epoll_ctl", ret);
	/* The first line of stdout is for whoever started us, e.g. with --port 0. */
	printf("listening on %s:%u\n", opts->addr, port);
	fflush(stdout);
	return 0;
}

/* Sizes the context for max_conn connections with one request each. */
static void size_context(struct afio_config *cfg, unsigned max_conn)
{
	cfg->entries = max_conn;
	/* In async mode a pool worker (threads, and libaio for sockets) waits
	   in each pending receive; with fewer workers than connections, idle
	   clients would hold them all while others' sends wait in the queue. */
	if (cfg->mode == AFIO_MODE_ASYNC && cfg->threads < max_conn)
		cfg->threads = max_conn;
}

int server_start(struct server *srv, const struct server_opts *opts)
{
	struct afio_config cfg = opts->afio;
	int ret;

	srv->ctx = NULL;
	srv->epoll_fd = srv->listen_fd = -1;
	/* A peer that goes away mid-send must cost one -EPIPE, not the process. */
	signal(SIGPIPE, SIG_IGN);
	srv->signal_fd = open_signalfd();
	if (srv->signal_fd < 0)
		return report("signalfd", srv->signal_fd);
	size_context(&cfg, opts->max_conn);
	ret = afio_create(&srv->ctx, &cfg);
	if (ret) {
		srv->ctx = NULL;
		return report(afio_backend_name(opts->afio.backend), ret);
	}
	describe_backend(srv->ctx);
	return open_descriptors(srv, opts);
}

static void accept_all(struct server *srv)
{
	int fd;

	/* The listener is non-blocking: take every connection that is ready. */
	for (;;) {
		fd = accept4(srv->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0) {
			srv->on_accept(srv, fd);
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (errno != EAGAIN)
			report("accept4", -errno);
		return;
	}
}

static void say_signal(int signal_fd)
{
	struct signalfd_siginfo si;

	if (read(signal_fd, &si, sizeof(si)) == sizeof(si))
		fprintf(stderr, "%s: %s, shutting down\n", prog_name,
			strsignal((int)si.ssi_signo));
}

/* true when the loop should end */
static bool dispatch(struct server *srv, int fd, int *err)
{
	int ret;

	if (fd == srv->signal_fd) {
		say_signal(fd);
		return true;
	}
	if (fd == srv->listen_fd) {
		accept_all(srv);
		return false;
	}
	/* The eventfd: completions are waiting.  Run their callbacks now, and
	   send what they queue, without blocking the loop. */
	ret = afio_poll(srv->ctx, 0, 0);
	if (ret < 0) {
		*err = report("afio_poll", ret);
		return true;
	}
	return false;
}

int server_run(struct server *srv)
{
	struct epoll_event ev[MAX_EVENTS];
	bool stop = false;
	int n, err = 0;

	while (!stop) {
		n = epoll_wait(srv->epoll_fd, ev, MAX_EVENTS, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return report("epoll_wait", -errno);
		for (int i = 0; i < n && !stop; i++)
			stop = dispatch(srv, ev[i].data.fd, &err);
		/* One hand-over for everything this round queued (new connections). */
		n = afio_submit(srv->ctx);
		if (n < 0)
			return report("afio_submit", n);
	}
	return err;
}

void server_stop(struct server *srv)
{
	afio_destroy(srv->ctx);
	srv->ctx = NULL;
	if (srv->epoll_fd >= 0)
		close(srv->epoll_fd);
	if (srv->listen_fd >= 0)
		close(srv->listen_fd);
	if (srv->signal_fd >= 0)
		close(srv->signal_fd);
	srv->epoll_fd = srv->listen_fd = srv->signal_fd = -1;
}
