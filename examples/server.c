/* SPDX-License-Identifier: MIT */
/* What the example servers share, then afio-echo's options and loop. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server.h"

#define MAX_EVENTS		64
#define MAX_EXTRA_OPTIONS	8
#define WARN_INTERVAL_MS	1000
/* How long the listener rests when a connection can be neither taken nor
   turned away (no spare descriptor, no memory): long enough not to spin,
   short enough that clients hardly notice once it passes. */
#define LISTEN_PAUSE_MS		100

static const char *prog_name = "server";

static int report(const char *what, int err)
{
	fprintf(stderr, "%s: %s: %s\n", prog_name, what, strerror(-err));
	return err;
}

/* ---- both servers ---- */

int server_parse_backend(const char *arg, struct afio_config *cfg)
{
	if (afio_backend_parse(arg, &cfg->backend)) {
		fprintf(stderr, "--backend: unknown name \"%s\"\n", arg);
		return -EINVAL;
	}
	/* Whoever names a backend wants to see that one run, or why not. */
	if (cfg->backend != AFIO_BACKEND_AUTO)
		cfg->flags |= AFIO_NO_FALLBACK;
	return 0;
}

int server_parse_mode(const char *arg, struct afio_config *cfg)
{
	if (afio_mode_parse(arg, &cfg->mode)) {
		fprintf(stderr, "--mode: unknown name \"%s\"\n", arg);
		return -EINVAL;
	}
	return 0;
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

static int set_flag(int fd, int level, int name)
{
	int one = 1;

	return setsockopt(fd, level, name, &one, sizeof(one));
}

int server_open_listener(const char *addr, unsigned port, int backlog, unsigned flags,
			 unsigned *bound)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	socklen_t len = sizeof(sin);
	int fd, err;

	if (inet_pton(AF_INET, addr, &sin.sin_addr) != 1)
		return -EINVAL;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (set_flag(fd, SOL_SOCKET, SO_REUSEADDR) ||
	    ((flags & LISTEN_REUSEPORT) && set_flag(fd, SOL_SOCKET, SO_REUSEPORT)) ||
	    ((flags & LISTEN_NODELAY) && set_flag(fd, IPPROTO_TCP, TCP_NODELAY)) ||
	    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    listen(fd, backlog) ||
	    getsockname(fd, (struct sockaddr *)&sin, &len)) {
		err = -errno;
		close(fd);
		return err;
	}
	*bound = ntohs(sin.sin_port);
	return fd;
}

int server_open_spare(void)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

/* A server holds a descriptor per connection: the soft limit (often 1024)
   would stop it long before the hard one. */
unsigned long server_raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return 0;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	return rl.rlim_cur == RLIM_INFINITY ? ULONG_MAX : (unsigned long)rl.rlim_cur;
}

sigset_t server_stop_signals(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	return set;
}

void server_describe(const char *prog, afio_ctx *ctx)
{
	char desc[256];

	if (afio_describe(ctx, desc, sizeof(desc)) < 0)
		desc[0] = '\0';
	fprintf(stderr, "%s: backend %s, mode %s (%s)\n", prog,
		afio_backend_name(afio_backend(ctx)), afio_mode_name(afio_mode(ctx)), desc);
}

/* ---- afio-echo's options ---- */

void server_opts_init(struct server_opts *opts, const char *prog, unsigned default_port)
{
	prog_name = prog;
	opts->prog = prog;
	opts->addr = "127.0.0.1";
	opts->port = default_port;
	opts->default_port = default_port;
	opts->max_conn = 64;
	opts->entries = 0;
	opts->wait_inside = false;
	opts->accept_multishot = false;
	afio_config_init(&opts->afio);
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
		return server_parse_backend(arg, &opts->afio);
	case 'm':
		return server_parse_mode(arg, &opts->afio);
	default:
		return -EINVAL;
	}
}

static void usage(FILE *f, const struct server_opts *opts,
		  const struct server_extra_option *extra, size_t n)
{
	fprintf(f, "usage: %s [options]\n"
		"  --addr A       IPv4 address to listen on (default 127.0.0.1)\n"
		"  --port N       TCP port, 0 for any free one (default %u)\n"
		"  --backend B    io_uring, libaio, threads or auto (default auto)\n"
		"  --mode M       inline, async or hybrid (default inline)\n",
		opts->prog, opts->default_port);
	for (size_t i = 0; i < n; i++)
		fputs(extra[i].help, f);
}

/* getopt_long's val for extra[i]: above every character. */
#define EXTRA_VAL(i)	(0x100 + (int)(i))

void server_parse_args_n(int argc, char **argv, struct server_opts *opts,
			 struct server_extra_option *extra, size_t n)
{
	struct option longopts[5 + MAX_EXTRA_OPTIONS + 1] = {
		{ "addr", required_argument, NULL, 'a' },
		{ "port", required_argument, NULL, 'p' },
		{ "backend", required_argument, NULL, 'b' },
		{ "mode", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
	};
	int opt, ret = 0;

	if (n > MAX_EXTRA_OPTIONS) {
		fprintf(stderr, "%s: too many options\n", opts->prog);
		exit(2);
	}
	for (size_t i = 0; i < n; i++) {
		longopts[5 + i] = (struct option){ extra[i].name, required_argument, NULL,
						   EXTRA_VAL(i) };
		extra[i].value = NULL;
	}
	while (!ret && (opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (opt == 'h') {
			usage(stdout, opts, extra, n);
			exit(0);
		}
		if (opt >= EXTRA_VAL(0) && opt < EXTRA_VAL(n))
			extra[opt - EXTRA_VAL(0)].value = optarg;
		else
			ret = parse_option(opts, opt, optarg);
	}
	if (ret || optind != argc) {
		usage(stderr, opts, extra, n);
		exit(2);
	}
}

uint64_t server_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void server_warn_limited(struct server_ratelimit *rl, const char *fmt, ...)
{
	uint64_t now = server_now_ms();
	va_list ap;

	rl->total++;
	if (now < rl->next_ms)
		return;
	rl->next_ms = now + WARN_INTERVAL_MS;
	fprintf(stderr, "%s: ", prog_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (%lu so far)\n", rl->total);
}

/* SIGINT and SIGTERM arrive through a descriptor in the loop instead of
   interrupting a callback.  Blocked before the context starts any thread,
   so that every thread inherits the mask. */
static int open_signalfd(void)
{
	sigset_t mask = server_stop_signals();
	int fd;

	if (sigprocmask(SIG_BLOCK, &mask, NULL))
		return -errno;
	fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static int watch(int epoll_fd, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	return epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

static int open_descriptors(struct server *srv, const struct server_opts *opts)
{
	unsigned port = 0;
	int ret;

	srv->listen_fd = server_open_listener(opts->addr, opts->port, SOMAXCONN, 0, &port);
	if (srv->listen_fd < 0)
		return report(opts->addr, srv->listen_fd);
	srv->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (srv->epoll_fd < 0)
		return report("epoll_create1", -errno);
	ret = srv->accept_multishot ? 0 : watch(srv->epoll_fd, srv->listen_fd);
	if (!ret)
		ret = watch(srv->epoll_fd, srv->signal_fd);
	if (!ret && !srv->wait_inside)
		ret = watch(srv->epoll_fd, afio_eventfd(srv->ctx));
	if (ret)
		return report("epoll_ctl", ret);
	/* The first line of stdout is for whoever started us, e.g. with --port 0. */
	printf("listening on %s:%u\n", opts->addr, port);
	fflush(stdout);
	return 0;
}

/* Waiting inside, the epoll set's request takes one more, and so does a
   multishot accept. */
static unsigned cfg_entries(const struct server_opts *opts)
{
	return (opts->entries ? opts->entries : opts->max_conn) + opts->wait_inside +
	       opts->accept_multishot;
}

/* One request per connection unless told otherwise; the pool sized for the mode in force
   (AFIO_MODE may change it inside afio_create()): where a waiting receive
   holds a worker, one per entry, so that idle clients cannot hold them all
   while others' sends wait.  afio_limits() says what that came to. */
static int create_context(struct server *srv, const struct server_opts *opts)
{
	struct afio_config cfg = opts->afio;
	int ret;

	cfg.entries = cfg_entries(opts);
	cfg.threads = 0;
	/* Its epoll watch of the eventfd is level-triggered (watch()). */
	cfg.flags |= AFIO_LEVEL_EVENTFD;
	ret = afio_create(&srv->ctx, &cfg);
	if (ret)
		srv->ctx = NULL;
	return ret;
}

/* The first line of a /proc/sys file, without its newline. */
static int read_sysctl_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	bool ok = f && fgets(buf, (int)len, f);

	if (f)
		fclose(f);
	if (!ok)
		return -1;
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/* The context holds cfg_entries() entries: where a limit of the system stops
   that, say which. */
static int report_create(const struct server_opts *opts, int err)
{
	char max[32], cur[32];

	if (err == -EAGAIN && opts->afio.backend == AFIO_BACKEND_LIBAIO &&
	    !read_sysctl_line("/proc/sys/fs/aio-max-nr", max, sizeof(max)) &&
	    !read_sysctl_line("/proc/sys/fs/aio-nr", cur, sizeof(cur))) {
		fprintf(stderr, "%s: libaio: %s: an AIO context of %u entries, with "
			"fs.aio-max-nr %s and fs.aio-nr %s in use; lower --max-conn or "
			"raise fs.aio-max-nr\n", prog_name, strerror(-err), cfg_entries(opts),
			max, cur);
		return err;
	}
	return report(afio_backend_name(opts->afio.backend), err);
}

static unsigned count_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	unsigned n = 0;

	if (!d)
		return 0;
	while (readdir(d))
		n++;
	closedir(d);
	/* ".", "..", and the directory's own descriptor */
	return n > 3 ? n - 3 : 0;
}

int server_open_context(struct server *srv, const struct server_opts *opts)
{
	int ret;

	srv->ctx = NULL;
	srv->epoll_fd = srv->listen_fd = -1;
	srv->listen_resume_ms = 0;
	srv->out_of_fds = (struct server_ratelimit){ 0 };
	srv->on_tick = NULL;
	srv->wait_inside = opts->wait_inside;
	srv->accept_multishot = opts->accept_multishot;
	srv->accept_shot = 0;
	srv->closing = false;
	srv->epoll_ready = false;
	srv->epoll_err = 0;
	srv->nofile = server_raise_nofile();
	/* A peer that goes away mid-send must cost one -EPIPE, not the process. */
	signal(SIGPIPE, SIG_IGN);
	srv->spare_fd = server_open_spare();
	srv->signal_fd = open_signalfd();
	if (srv->signal_fd < 0)
		return report("signalfd", srv->signal_fd);
	ret = create_context(srv, opts);
	if (ret)
		return report_create(opts, ret);
	server_describe(prog_name, srv->ctx);
	return 0;
}

static void arm_accept_shot(struct server *srv);

int server_listen(struct server *srv, const struct server_opts *opts)
{
	int ret = open_descriptors(srv, opts);

	srv->fds_at_start = count_open_fds();
	if (!ret && srv->accept_multishot) {
		arm_accept_shot(srv);
		/* The loop's first wait comes before its first submit. */
		ret = afio_submit(srv->ctx);
		ret = ret < 0 ? report("afio_submit", ret) : 0;
	}
	return ret;
}

int server_start(struct server *srv, const struct server_opts *opts)
{
	int ret = server_open_context(srv, opts);

	return ret ? ret : server_listen(srv, opts);
}

void server_set_tick(struct server *srv, unsigned interval_ms,
		     void (*on_tick)(struct server *srv))
{
	srv->tick_ms = interval_ms ? interval_ms : 1;
	srv->next_tick_ms = server_now_ms() + srv->tick_ms;
	srv->on_tick = on_tick;
}

/* ---- accepting ---- */

/* The multishot accept is canceled; its last completion, which comes
   later, does not arm it again while the listener rests. */
static void listen_pause(struct server *srv)
{
	struct epoll_event ev = { .events = 0, .data.fd = srv->listen_fd };

	if (srv->accept_multishot) {
		srv->listen_resume_ms = server_now_ms() + LISTEN_PAUSE_MS;
		if (srv->accept_shot)
			(void)afio_cancel_handle(srv->ctx, srv->accept_shot);
		return;
	}
	if (!epoll_ctl(srv->epoll_fd, EPOLL_CTL_MOD, srv->listen_fd, &ev))
		srv->listen_resume_ms = server_now_ms() + LISTEN_PAUSE_MS;
}

static void listen_resume(struct server *srv)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = srv->listen_fd };

	if (srv->accept_multishot) {
		srv->listen_resume_ms = 0;
		arm_accept_shot(srv);
		return;
	}
	if (!epoll_ctl(srv->epoll_fd, EPOLL_CTL_MOD, srv->listen_fd, &ev))
		srv->listen_resume_ms = 0;
}

/*
 * No descriptor is left for the connection at the head of the backlog.
 * Left there it would keep the listener readable and the loop spinning;
 * so the spare descriptor is given up for a moment to take the connection
 * and close it at once, and the client sees the end of the stream instead
 * of waiting.  Without a spare (another thread took the descriptor back),
 * the listener rests instead.  Returns true when one was taken off.
 */
static bool next_may_do(int err);

static bool turn_away(struct server *srv, int err)
{
	int fd;

	server_warn_limited(&srv->out_of_fds, "accept4: %s: closing new connections "
			    "at once (RLIMIT_NOFILE %lu)", strerror(err), srv->nofile);
	if (srv->spare_fd >= 0) {
		close(srv->spare_fd);
		fd = accept4(srv->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		err = fd < 0 ? errno : 0;
		if (fd >= 0)
			close(fd);
	}
	srv->spare_fd = server_open_spare();
	if (srv->spare_fd >= 0 && (!err || err == EAGAIN || next_may_do(err)))
		return !err;
	listen_pause(srv);
	return false;
}

/* Errors of the connection at the head of the backlog, not of the
   listener (accept(2), "Error handling"): take the next one. */
static bool next_may_do(int err)
{
	switch (err) {
	case EINTR: case ECONNABORTED: case EPROTO: case ENETDOWN: case ENOPROTOOPT:
	case EHOSTDOWN: case ENONET: case EHOSTUNREACH: case EOPNOTSUPP: case ENETUNREACH:
		return true;
	default:
		return false;
	}
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
		if (errno == EAGAIN)
			return;
		if (next_may_do(errno))
			continue;
		if (errno == EMFILE || errno == ENFILE) {
			if (turn_away(srv, errno))
				continue;
			return;
		}
		/* ENOBUFS, ENOMEM and the unforeseen: rest, do not spin. */
		server_warn_limited(&srv->out_of_fds, "accept4: %s", strerror(errno));
		listen_pause(srv);
		return;
	}
}

/*
 * --accept multishot: one request accepts connection after connection,
 * with the same answers to running out of descriptors and to the errors
 * of one connection as accept_all().  Once it ends (canceled by a pause,
 * or an error the library does not go on after), it is armed again
 * unless the listener rests; listen_resume() arms it then.
 */
static void on_accept_shot(void *data, ssize_t res, unsigned flags)
{
	struct server *srv = data;
	int err = res < 0 ? (int)-res : 0;

	if (!(flags & AFIO_CQE_MORE))
		srv->accept_shot = 0;
	if (res >= 0)
		srv->on_accept(srv, (int)res);
	else if (err == EMFILE || err == ENFILE)
		(void)turn_away(srv, err);
	else if (err != ECANCELED && err != EAGAIN && !next_may_do(err)) {
		server_warn_limited(&srv->out_of_fds, "accept: %s", strerror(err));
		listen_pause(srv);
	}
	if (!srv->accept_shot)
		arm_accept_shot(srv);
}

static void arm_accept_shot(struct server *srv)
{
	int ret;

	if (srv->accept_shot || srv->listen_resume_ms || srv->closing)
		return;
	ret = afio_accept_multishot(srv->ctx, srv->listen_fd, SOCK_CLOEXEC, on_accept_shot, srv);
	if (ret) {
		server_warn_limited(&srv->out_of_fds, "afio_accept_multishot: %s", strerror(-ret));
		srv->listen_resume_ms = server_now_ms() + LISTEN_PAUSE_MS;
		return;
	}
	srv->accept_shot = afio_last_handle(srv->ctx);
}

/* ---- the loop ---- */

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

static bool has_timers(const struct server *srv)
{
	return srv->listen_resume_ms || srv->on_tick;
}

/* epoll_wait's timeout: until the next tick or the listener's return. */
static int wait_ms(const struct server *srv)
{
	uint64_t due = UINT64_MAX, now;

	if (!has_timers(srv))
		return -1;
	if (srv->listen_resume_ms)
		due = srv->listen_resume_ms;
	if (srv->on_tick && srv->next_tick_ms < due)
		due = srv->next_tick_ms;
	now = server_now_ms();
	if (due <= now)
		return 0;
	return due - now > INT_MAX ? INT_MAX : (int)(due - now);
}

static void run_timers(struct server *srv)
{
	uint64_t now = server_now_ms();

	if (srv->listen_resume_ms && now >= srv->listen_resume_ms)
		listen_resume(srv);
	if (srv->on_tick && now >= srv->next_tick_ms) {
		srv->next_tick_ms = now + srv->tick_ms;
		srv->on_tick(srv);
	}
}

static void on_epoll_ready(void *data, ssize_t res)
{
	struct server *srv = data;

	if (res < 0)
		srv->epoll_err = (int)res;
	else
		srv->epoll_ready = true;
}

/* What the epoll set has, without waiting: the listener, the signals. */
static bool dispatch_ready(struct server *srv, int *err)
{
	struct epoll_event ev[MAX_EVENTS];
	bool stop = false;
	int n;

	n = epoll_wait(srv->epoll_fd, ev, MAX_EVENTS, 0);
	if (n < 0 && errno != EINTR) {
		*err = report("epoll_wait", -errno);
		return true;
	}
	for (int i = 0; i < n && !stop; i++)
		stop = dispatch(srv, ev[i].data.fd, err);
	return stop;
}

/*
 * The loop that waits inside the library: the epoll set is one more
 * request, so that on io_uring a round costs afio_poll()'s one submit,
 * and its wait, when nothing is done yet, is one io_uring_enter that
 * submits too; the eventfd is never asked for, so the kernel never
 * signals it.  The set's request goes out with the next afio_poll(), as
 * do the receives of new connections.
 */
static int watch_epoll_set(struct server *srv)
{
	int ret = afio_poll_fd(srv->ctx, srv->epoll_fd, POLLIN, on_epoll_ready, srv);

	return ret < 0 ? report("afio_poll_fd", ret) : 0;
}

static int run_inside(struct server *srv)
{
	bool stop = false;
	int n, err = watch_epoll_set(srv);

	if (err)
		return err;
	while (!stop) {
		n = afio_poll(srv->ctx, 1, wait_ms(srv));
		if (n < 0 && n != -EINTR)
			return report("afio_poll", n);
		if (srv->epoll_err)
			return report("afio_poll_fd", srv->epoll_err);
		if (srv->epoll_ready) {
			srv->epoll_ready = false;
			stop = dispatch_ready(srv, &err);
			if (!stop)
				err = watch_epoll_set(srv);
			if (err)
				return err;
		}
		if (has_timers(srv))
			run_timers(srv);
	}
	return err;
}

int server_run(struct server *srv)
{
	struct epoll_event ev[MAX_EVENTS];
	bool stop = false;
	int n, err = 0;

	if (srv->wait_inside)
		return run_inside(srv);
	while (!stop) {
		n = epoll_wait(srv->epoll_fd, ev, MAX_EVENTS, wait_ms(srv));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return report("epoll_wait", -errno);
		for (int i = 0; i < n && !stop; i++)
			stop = dispatch(srv, ev[i].data.fd, &err);
		if (has_timers(srv))
			run_timers(srv);
		/* One hand-over for everything this round queued (new connections). */
		n = afio_submit(srv->ctx);
		if (n < 0)
			return report("afio_submit", n);
	}
	return err;
}

void server_stop(struct server *srv)
{
	srv->closing = true;
	afio_destroy(srv->ctx);
	srv->ctx = NULL;
	if (srv->epoll_fd >= 0)
		close(srv->epoll_fd);
	if (srv->listen_fd >= 0)
		close(srv->listen_fd);
	if (srv->signal_fd >= 0)
		close(srv->signal_fd);
	if (srv->spare_fd >= 0)
		close(srv->spare_fd);
	srv->epoll_fd = srv->listen_fd = srv->signal_fd = srv->spare_fd = -1;
}
