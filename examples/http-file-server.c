/* SPDX-License-Identifier: MIT */
/*
 * afio-httpd: serves the files below --root over HTTP/1.1 (GET and HEAD),
 * with libasyncfio doing every accept, open, stat, file read and send.
 *
 * Each of --workers threads has its own context, its own SO_REUSEPORT
 * listener, connections, buffers and open-file cache, and shares nothing
 * with the others: the kernel spreads the connections.  A thread's loop is
 * afio_poll() alone, whose timeout wakes it for the tick that drives the
 * timeouts (no timer request: on libaio that would be one more request
 * for the thread pool each tick, Linux AIO having no timer); and
 * the main thread, which waits for SIGINT/SIGTERM, stops the workers with
 * a byte on a socket each keeps a receive on.  On a stop the listener is
 * no longer accepted from, idle connections close, the others close after
 * the response under way; then each worker prints its statistics.
 *
 * Timeouts: a connection's deadline is its last touch plus --timeout, and
 * all have the same length, so a list in touch order is also in deadline
 * order: a touch is an unlink and an append, and the tick looks at the
 * head only.  Touches: a new connection, the first byte of a request
 * head, the end of a response (keep-alive idle) and each send's progress.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "http-server.h"
#include "server.h"

#define DEFAULT_PORT		8080
#define DEFAULT_MAX_CONN	10000
#define DEFAULT_TIMEOUT		60
#define CACHE_MAX_IDLE		1024		/* open files kept that nobody uses */
#define POOL_BYTES		(64u << 20)	/* response buffers, per worker */
#define LINGER_NS		2000000000ull	/* lingering close, at most */
#define SENDFILE_MIN		(64 * 1024)
#define NS			1000000000ull

/* ---- time ---- */

void worker_read_clock(struct worker *w)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	w->now = (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec;
	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	if (ts.tv_sec != w->wall) {
		w->wall = ts.tv_sec;
		http_format_date(w->wall, w->date);
	}
	w->clock_stale = false;
}

void timer_clear(struct conn *c)
{
	struct timer_list *t = c->timer;

	if (!t)
		return;
	if (c->tprev)
		c->tprev->tnext = c->tnext;
	else
		t->head = c->tnext;
	if (c->tnext)
		c->tnext->tprev = c->tprev;
	else
		t->tail = c->tprev;
	c->tprev = c->tnext = NULL;
	c->timer = NULL;
}

void timer_set(struct conn *c, struct timer_list *t)
{
	worker_clock(c->w);
	timer_clear(c);
	c->deadline = c->w->now + t->duration_ns;
	c->timer = t;
	c->tprev = t->tail;
	if (t->tail)
		t->tail->tnext = c;
	else
		t->head = c;
	t->tail = c;
}

static void expire(struct worker *w)
{
	for (int i = 0; i < 2; i++) {
		struct timer_list *t = &w->timers[i];

		while (t->head && t->head->deadline <= w->now) {
			struct conn *c = t->head;

			timer_clear(c);
			conn_timed_out(c);
		}
	}
}

/* ---- buffers ---- */

void *pool_take(struct buf_pool *p)
{
	void *buf = p->free_bufs;

	if (buf) {
		p->free_bufs = *(void **)buf;
		return buf;
	}
	if (p->total == p->max)
		return NULL;
	buf = aligned_alloc(BUF_ALIGN, p->buf_size);
	if (buf)
		p->total++;
	return buf;
}

void pool_wait(struct buf_pool *p, struct conn *c)
{
	c->next_free = NULL;
	if (p->waiters_tail)
		p->waiters_tail->next_free = c;
	else
		p->waiters = c;
	p->waiters_tail = c;
}

void pool_give(struct worker *w, void *buf)
{
	struct buf_pool *p = &w->pool;
	struct conn *c = p->waiters;

	if (c) {
		p->waiters = c->next_free;
		if (!p->waiters)
			p->waiters_tail = NULL;
		c->on_buf(c, buf);
		return;
	}
	*(void **)buf = p->free_bufs;
	p->free_bufs = buf;
}

static void pool_destroy(struct buf_pool *p)
{
	void *buf;

	while ((buf = p->free_bufs)) {
		p->free_bufs = *(void **)buf;
		free(buf);
	}
}

/* ---- accepting ---- */

static void on_accept(void *data, ssize_t res);

/* The connection waiting longest between requests goes (its receive
   ends with 0 and closes it), so that a descriptor comes free. */
static void drain_idle(struct worker *w)
{
	for (struct conn *c = w->timers[0].head; c; c = c->tnext) {
		if (c->state == C_HEAD && c->in_len == c->in_start && c->ops) {
			timer_clear(c);
			conn_timed_out(c);
			return;
		}
	}
}

static void on_accept_shot(void *data, ssize_t res, unsigned flags);

/* With in_flight accepts under way, may one more start? */
static bool may_accept(const struct worker *w, unsigned in_flight)
{
	return !w->stopping && !w->accept_paused && w->open_conns + in_flight < w->max_conn;
}

/*
 * --accept multishot: one request accepts connection after connection.
 * It is canceled once the worker is full, and started again once a
 * connection closes; what it accepted between the cancel and its end is
 * closed (the single accepts leave such connections in the backlog).
 */
static void arm_multishot_accept(struct worker *w)
{
	if (w->accept_shot || !may_accept(w, 0))
		return;
	if (afio_accept_multishot(w->ctx, w->listen_fd, SOCK_NONBLOCK | SOCK_CLOEXEC,
				  on_accept_shot, w))
		return;
	w->accept_shot = afio_last_handle(w->ctx);
	w->accepts++;
}

static void arm_accepts(struct worker *w)
{
	if (w->opts->accept_multishot) {
		arm_multishot_accept(w);
		return;
	}
	while (w->accepts < ACCEPTS && may_accept(w, w->accepts)) {
		struct accept_slot *a = w->accept_slots;

		while (a->handle)
			a++;
		if (afio_accept(w->ctx, w->listen_fd, SOCK_NONBLOCK | SOCK_CLOEXEC,
				on_accept, a))
			break;
		a->w = w;
		a->handle = afio_last_handle(w->ctx);
		w->accepts++;
	}
}

/*
 * Out of descriptors: the connection stays in the backlog, and the next
 * accept would fail at once again.  Give up the spare descriptor, take
 * the waiting connections and close them, so their clients hear of it
 * instead of hanging; then accept no more until the next tick.
 */
static void shed_connections(struct worker *w)
{
	int fd;

	if (w->spare_fd < 0)
		w->spare_fd = server_open_spare();
	if (w->spare_fd < 0) {
		/* The pool took the spare's number meanwhile: make room as
		   nginx does, by closing the connection idle the longest. */
		drain_idle(w);
	} else {
		close(w->spare_fd);
		while ((fd = accept4(w->listen_fd, NULL, NULL, SOCK_CLOEXEC)) >= 0)
			close(fd);
		w->spare_fd = server_open_spare();
	}
	w->accept_paused = true;
}

/* A slot that is free; arm_accepts() makes sure there is one. */
static struct conn *take_conn(struct worker *w)
{
	struct conn *c = w->free_conns;

	if (!c)
		return &w->conns[w->conns_used++];
	w->free_conns = c->next_free;
	return c;
}

/* What an accept gave: a connection to serve, or an error to act on. */
static void accepted(struct worker *w, ssize_t res)
{
	if (res >= 0) {
		if (w->stopping || w->open_conns >= w->max_conn) {
			close((int)res);
			return;
		}
		w->open_conns++;
		w->st.connections++;
		conn_start(w, (int)res, take_conn(w));
	} else if (res != -ECANCELED && res != -ECONNABORTED && res != -EINTR &&
		   res != -EAGAIN) {
		w->st.accept_errors++;
		/* Out of descriptors, the open-file cache's idle ones go
		   first, and the accept goes again at once. */
		if (res != -EMFILE && res != -ENFILE)
			w->accept_paused = true;
		else if (!cache_close_idle(&w->cache))
			shed_connections(w);
	}
}

static void on_accept(void *data, ssize_t res)
{
	struct accept_slot *a = data;
	struct worker *w = a->w;

	a->handle = 0;
	w->accepts--;
	accepted(w, res);
	arm_accepts(w);
}

static void on_accept_shot(void *data, ssize_t res, unsigned flags)
{
	struct worker *w = data;

	if (!(flags & AFIO_CQE_MORE)) {
		w->accept_shot = 0;
		w->accepts--;
	}
	accepted(w, res);
	if (!w->accept_shot)
		arm_accepts(w);
	else if (!may_accept(w, 0))
		afio_cancel_handle(w->ctx, w->accept_shot);	/* -EALREADY: asked */
}

void worker_conn_closed(struct worker *w, struct conn *c)
{
	c->next_free = w->free_conns;
	w->free_conns = c;
	w->open_conns--;
	/* A descriptor is free again: try the backlog. */
	w->accept_paused = false;
	arm_accepts(w);
}

/* ---- ticks and stopping ---- */

static uint64_t tick_ns(const struct worker *w)
{
	uint64_t ns = w->timers[0].duration_ns / 4;

	return ns < NS ? ns : NS;
}

/* afio_poll()'s timeout: the time to the next tick, rounded up, from the
   clock tick() has just read. */
static int ms_to_tick(const struct worker *w)
{
	if (w->now >= w->next_tick)
		return 0;
	return (int)((w->next_tick - w->now + 999999) / 1000000);
}

static void tick(struct worker *w)
{
	worker_read_clock(w);
	if (w->now < w->next_tick)
		return;
	w->next_tick = w->now + tick_ns(w);
	w->st.ticks++;
	expire(w);
	cache_expire(&w->cache);
	/* The pool may have taken the descriptor the spare gave back. */
	if (w->spare_fd < 0)
		w->spare_fd = server_open_spare();
	if (w->accept_paused) {
		w->accept_paused = false;
		arm_accepts(w);
	}
}

static void begin_stop(struct worker *w)
{
	w->stopping = true;
	if (w->accept_shot)
		afio_cancel_handle(w->ctx, w->accept_shot);
	for (unsigned i = 0; i < ACCEPTS; i++)
		if (w->accept_slots[i].handle)
			afio_cancel_handle(w->ctx, w->accept_slots[i].handle);
	for (unsigned i = 0; i < w->conns_used; i++)
		if (w->conns[i].state != C_FREE)
			conn_stop(&w->conns[i]);
}

static void on_wake(void *data, ssize_t res)
{
	struct worker *w = data;

	w->wake_pending = false;
	/* Not the main thread's byte: the worker could not wait for it (a
	   pool that found no descriptors for its threads, say), and would
	   otherwise go on unable to hear a stop, or stop without a word. */
	if (res < 0) {
		fprintf(stderr, "afio-httpd: worker %u: waiting for the stop signal: %s\n", w->id,
			strerror((int)-res));
		w->failed = true;
		kill(getpid(), SIGTERM);
	}
	begin_stop(w);
}

static bool worker_done(struct worker *w)
{
	if (!w->stopping)
		return false;
	return !w->open_conns && !w->accepts && !w->wake_pending && !w->cache.in_flight;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	int ret;

	worker_read_clock(w);
	w->next_tick = w->now + tick_ns(w);
	if (!afio_recv(w->ctx, w->wake_fd, &w->wake_byte, 1, 0, on_wake, w))
		w->wake_pending = true;
	arm_accepts(w);
	if (!w->wake_pending || !w->accepts) {
		fprintf(stderr, "afio-httpd: worker %u: cannot queue its first requests\n", w->id);
		w->failed = true;
		kill(getpid(), SIGTERM);
		begin_stop(w);
	}
	while (!worker_done(w)) {
		int wait_ms = ms_to_tick(w);

		w->clock_stale = true;
		ret = afio_poll(w->ctx, 1, wait_ms);
		tick(w);
		if (ret < 0) {
			fprintf(stderr, "afio-httpd: worker %u: afio_poll: %s\n", w->id,
				strerror(-ret));
			w->failed = true;
			kill(getpid(), SIGTERM);
			break;
		}
	}
	return NULL;
}

/* ---- setting a worker up ---- */

/* Each worker its own listener on the one port.  TCP_NODELAY: a
   response's last segment must not wait for the ACK of the one before
   (Nagle). */
static int open_listener(const struct httpd_opts *o, unsigned port, unsigned *bound)
{
	unsigned flags = LISTEN_NODELAY | (o->workers > 1 ? LISTEN_REUSEPORT : 0);

	return server_open_listener(o->addr, port, 4096, flags, bound);
}

/* What a worker waits on besides its connections: accepts, the wake. */
#define OWN_WAITS	(ACCEPTS + 8)

/* A read and a send per connection, the accepts and a wake; the pool
   sized for the mode (one worker per entry where each waiting receive
   holds one). */
static void size_context(struct afio_config *cfg, const struct httpd_opts *o)
{
	cfg->entries = 2 * o->max_conn + OWN_WAITS;
	/* A receive per connection waits at most, and the worker's own. */
	cfg->socket_waits = o->max_conn + OWN_WAITS;
	cfg->threads = 0;
}

/*
 * Where each waiting receive holds a pool worker (afio_limits(3)),
 * connections past the workers would wait for a worker, not for their
 * client.  So take no more than there are; the rest wait in the listen
 * backlog.
 */
static unsigned conn_limit(afio_ctx *ctx, unsigned max_conn)
{
	struct afio_limits lim;
	unsigned cap;

	if (afio_limits(ctx, &lim) || lim.socket_waits >= max_conn + OWN_WAITS)
		return max_conn;
	cap = lim.socket_waits > OWN_WAITS ? lim.socket_waits - OWN_WAITS : 1;
	return cap < max_conn ? cap : max_conn;
}

/* Bodies this long go by afio_sendfile(): it saves copying the body
   through user memory but costs a send of its own for the head, which a
   small body does not repay.  AFIO_HTTPD_SENDFILE_MIN changes it;
   bench/http-bench.sh measures a choice. */
static uint64_t sendfile_min(void)
{
	const char *v = getenv("AFIO_HTTPD_SENDFILE_MIN");

	return v ? strtoull(v, NULL, 0) : SENDFILE_MIN;
}

static int worker_init(struct worker *w, const struct httpd_opts *o, int root_fd,
		       unsigned *port, int *wake_peer)
{
	struct afio_config cfg = o->afio;
	int sv[2], ret;

	w->opts = o;
	w->root_fd = root_fd;
	w->listen_fd = w->wake_fd = w->spare_fd = -1;
	w->timers[0].duration_ns = (uint64_t)o->timeout_s * NS;
	w->timers[1].duration_ns = w->timers[0].duration_ns < LINGER_NS ?
				   w->timers[0].duration_ns : LINGER_NS;
	/* A buffer also takes a request head that outgrew the connection's
	   own (grow_in(), http-conn.c): HEAD_MAX at least, whatever the
	   read size. */
	w->pool.buf_size = HEAD_ROOM + o->read_size;
	if (w->pool.buf_size < HEAD_MAX)
		w->pool.buf_size = HEAD_MAX;
	w->pool.max = POOL_BYTES / w->pool.buf_size;
	w->sendfile_min = sendfile_min();
	/* Untouched until used: idle slots cost no memory. */
	w->conns = calloc(o->max_conn, sizeof(*w->conns));
	if (!w->conns)
		return -ENOMEM;
	size_context(&cfg, o);
	ret = afio_create(&w->ctx, &cfg);
	if (ret) {
		w->ctx = NULL;
		return ret;
	}
	w->max_conn = conn_limit(w->ctx, o->max_conn);
	if (w->max_conn < o->max_conn && !w->id)
		fprintf(stderr, "afio-httpd: ASYNC on the thread pool holds a worker per "
			"waiting socket: %u connections per worker at most\n", w->max_conn);
	ret = cache_init(&w->cache, w->ctx, root_fd, o->direct, CACHE_MAX_IDLE, &w->now);
	if (ret)
		return ret;
	ret = open_listener(o, *port, port);
	if (ret < 0)
		return ret;
	w->listen_fd = ret;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -errno;
	w->wake_fd = sv[0];
	*wake_peer = sv[1];
	w->spare_fd = server_open_spare();
	return 0;
}

static void print_stats(const struct worker *w)
{
	struct afio_stats st = { 0 };
	const struct cache_stats *cs = &w->cache.st;

	afio_stats(w->ctx, &st);
	fprintf(stderr, "afio-httpd: worker %u stats: backend=%s mode=%s requests=%llu "
		"connections=%llu timeouts=%llu accept_errors=%llu ticks=%llu path_ops=%llu "
		"submitted=%llu "
		"completed=%llu in_flight=%llu fallbacks=%llu canceled=%llu nowait=%llu "
		"cache_hits=%llu cache_misses=%llu cache_revalidations=%llu "
		"cache_changed=%llu cache_evictions=%llu\n",
		w->id, afio_backend_name(afio_backend(w->ctx)),
		afio_mode_name(afio_mode(w->ctx)),
		(unsigned long long)w->st.requests, (unsigned long long)w->st.connections,
		(unsigned long long)w->st.timeouts, (unsigned long long)w->st.accept_errors,
		(unsigned long long)w->st.ticks, (unsigned long long)cs->path_ops,
		(unsigned long long)st.submitted, (unsigned long long)st.completed,
		(unsigned long long)st.in_flight, (unsigned long long)st.fallbacks,
		(unsigned long long)st.canceled, (unsigned long long)st.nowait,
		(unsigned long long)cs->hits, (unsigned long long)cs->misses,
		(unsigned long long)cs->revalidations, (unsigned long long)cs->changed,
		(unsigned long long)cs->evictions);
}

static void worker_destroy(struct worker *w)
{
	if (w->ctx)
		afio_destroy(w->ctx);
	if (w->cache.table)
		cache_destroy(&w->cache);
	pool_destroy(&w->pool);
	free(w->conns);
	if (w->listen_fd >= 0)
		close(w->listen_fd);
	if (w->wake_fd >= 0)
		close(w->wake_fd);
	if (w->spare_fd >= 0)
		close(w->spare_fd);
}

/* ---- options ---- */

static void usage(FILE *f)
{
	fprintf(f, "usage: afio-httpd [options]\n"
		"  --addr A         IPv4 address to listen on (default 127.0.0.1)\n"
		"  --port N         TCP port, 0 for any free one (default %u)\n"
		"  --root DIR       directory to serve (default .)\n"
		"  --backend B      io_uring, libaio, threads or auto (default auto)\n"
		"  --mode M         inline, async or hybrid (default inline)\n"
		"  --direct         read files with O_DIRECT, bypassing the page cache\n"
		"  --workers N      threads, each with its own listener (default 1)\n"
		"  --max-conn N     connections per worker (default %u)\n"
		"  --timeout S      seconds for a request head, an idle keep-alive\n"
		"                   connection or a send that makes no progress (default %u)\n"
		"  --read-size B    file bytes per read, a multiple of 4096 up to 4 MiB\n"
		"                   (default %u); each response reading holds two such buffers\n"
		"  --accept single|multishot\n"
		"                   %u accepts at once, or one multishot accept (default multishot)\n"
		"The first line of output is \"listening on ADDR:PORT\"; SIGINT or SIGTERM\n"
		"stops the server after the responses under way, and each worker prints\n"
		"its statistics (stats.fallbacks and the rest) to stderr.  Without --direct,\n"
		"bodies of AFIO_HTTPD_SENDFILE_MIN bytes (default %u) or more go by sendfile.\n",
		DEFAULT_PORT, DEFAULT_MAX_CONN, DEFAULT_TIMEOUT, DEFAULT_READ_SIZE, ACCEPTS,
		SENDFILE_MIN);
}

static int parse_option(struct httpd_opts *o, int opt, const char *arg)
{
	switch (opt) {
	case 'a':
		o->addr = arg;
		return 0;
	case 'p':
		return parse_count("port", arg, 0, 65535, &o->port);
	case 'r':
		o->root = arg;
		return 0;
	case 'b':
		return server_parse_backend(arg, &o->afio);
	case 'm':
		return server_parse_mode(arg, &o->afio);
	case 'd':
		o->direct = true;
		return 0;
	case 'w':
		return parse_count("workers", arg, 1, 64, &o->workers);
	case 'c':
		return parse_count("max-conn", arg, 1, 1000000, &o->max_conn);
	case 't':
		return parse_count("timeout", arg, 1, 86400, &o->timeout_s);
	case 's':
		if (parse_count("read-size", arg, BUF_ALIGN, MAX_READ_SIZE, &o->read_size))
			return -EINVAL;
		if (o->read_size % BUF_ALIGN) {
			fprintf(stderr, "afio-httpd: --read-size: %u is not a multiple of %u\n",
				o->read_size, BUF_ALIGN);
			return -EINVAL;
		}
		return 0;
	case 'A':
		if (!strcmp(arg, "single") || !strcmp(arg, "multishot")) {
			o->accept_multishot = arg[0] == 'm';
			return 0;
		}
		fprintf(stderr, "afio-httpd: --accept: single or multishot, not %s\n", arg);
		return -EINVAL;
	default:
		return -EINVAL;
	}
}

static void parse_args(int argc, char **argv, struct httpd_opts *o)
{
	static const struct option longopts[] = {
		{ "addr", required_argument, NULL, 'a' },
		{ "port", required_argument, NULL, 'p' },
		{ "root", required_argument, NULL, 'r' },
		{ "backend", required_argument, NULL, 'b' },
		{ "mode", required_argument, NULL, 'm' },
		{ "direct", no_argument, NULL, 'd' },
		{ "workers", required_argument, NULL, 'w' },
		{ "max-conn", required_argument, NULL, 'c' },
		{ "timeout", required_argument, NULL, 't' },
		{ "read-size", required_argument, NULL, 's' },
		{ "accept", required_argument, NULL, 'A' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int opt, ret = 0;

	memset(o, 0, sizeof(*o));
	o->addr = "127.0.0.1";
	o->port = DEFAULT_PORT;
	o->root = ".";
	o->workers = 1;
	o->max_conn = DEFAULT_MAX_CONN;
	o->timeout_s = DEFAULT_TIMEOUT;
	o->read_size = DEFAULT_READ_SIZE;
	o->accept_multishot = true;
	afio_config_init(&o->afio);
	while (!ret && (opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (opt == 'h') {
			usage(stdout);
			exit(0);
		}
		ret = parse_option(o, opt, optarg);
	}
	if (ret || optind != argc) {
		usage(stderr);
		exit(2);
	}
}

/* ---- the process ---- */

/*
 * RESOLVE_BENEATH is the fence that keeps symlinks inside the root; a
 * kernel without openat2 (before 5.6) would leave only the ".." check,
 * so the server does not start there.
 */
static int check_openat2(int root_fd)
{
	struct open_how how = {
		.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};
	int fd = (int)syscall(SYS_openat2, root_fd, ".", &how, sizeof(how));

	if (fd < 0) {
		fprintf(stderr, "afio-httpd: openat2(RESOLVE_BENEATH): %s; without it "
			"symlinks could lead out of --root, so not serving\n", strerror(errno));
		return -1;
	}
	close(fd);
	return 0;
}

/* Each connection is a descriptor, and so is each cached file: take what
   the hard limit allows. */
static void raise_fd_limit(const struct httpd_opts *o)
{
	unsigned long long want = (unsigned long long)o->workers *
				  (o->max_conn + CACHE_MAX_IDLE + 64ull);
	unsigned long limit = server_raise_nofile();

	if (limit < want)
		fprintf(stderr, "afio-httpd: RLIMIT_NOFILE is %lu, --max-conn may want up to "
			"%llu; past the limit accepts back off\n", limit, want);
}

static int start_workers(struct worker *ws, const struct httpd_opts *o, int root_fd,
			 int *wake_peers)
{
	unsigned port = o->port;
	int ret;

	for (unsigned i = 0; i < o->workers; i++) {
		ws[i].id = i;
		ret = worker_init(&ws[i], o, root_fd, &port, &wake_peers[i]);
		if (ret) {
			fprintf(stderr, "afio-httpd: worker %u: %s\n", i, strerror(-ret));
			return ret;
		}
	}
	server_describe("afio-httpd", ws[0].ctx);
	printf("listening on %s:%u\n", o->addr, port);
	fflush(stdout);
	for (unsigned i = 0; i < o->workers; i++) {
		ret = -pthread_create(&ws[i].tid, NULL, worker_main, &ws[i]);
		if (ret)
			return ret;
		ws[i].tid_valid = true;
	}
	return 0;
}

static void wait_for_stop(void)
{
	sigset_t set = server_stop_signals();
	siginfo_t si;

	while (sigwaitinfo(&set, &si) < 0)
		;
	fprintf(stderr, "afio-httpd: %s, shutting down\n", strsignal(si.si_signo));
}

int main(int argc, char **argv)
{
	struct httpd_opts o;
	struct worker *ws;
	sigset_t set = server_stop_signals();
	int *wake_peers, root_fd, ret, status = 0;

	parse_args(argc, argv, &o);
	signal(SIGPIPE, SIG_IGN);
	/* Before any thread starts, so that every thread inherits it. */
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	root_fd = open(o.root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0) {
		perror(o.root);
		return 1;
	}
	if (check_openat2(root_fd))
		return 1;
	raise_fd_limit(&o);
	ws = calloc(o.workers, sizeof(*ws));
	wake_peers = calloc(o.workers, sizeof(*wake_peers));
	if (!ws || !wake_peers)
		return 1;
	for (unsigned i = 0; i < o.workers; i++)
		wake_peers[i] = -1;
	ret = start_workers(ws, &o, root_fd, wake_peers);
	if (!ret)
		wait_for_stop();
	else
		status = 1;
	for (unsigned i = 0; i < o.workers; i++)
		if (wake_peers[i] >= 0 && write(wake_peers[i], "", 1) != 1)
			status = 1;
	for (unsigned i = 0; i < o.workers; i++) {
		if (ws[i].tid_valid)
			pthread_join(ws[i].tid, NULL);
		if (ws[i].ctx && ws[i].tid_valid)
			print_stats(&ws[i]);
		if (ws[i].failed)
			status = 1;
		worker_destroy(&ws[i]);
		if (wake_peers[i] >= 0)
			close(wake_peers[i]);
	}
	close(root_fd);
	free(ws);
	free(wake_peers);
	return status;
}
