/* SPDX-License-Identifier: MIT */
/*
 * afio-bench: keeps N reads or writes in flight through the public API for a
 * fixed time and reports throughput, CPU cost and latency.  With --compare it
 * hands over to compare.py, which runs a matrix of backends, modes and
 * workloads next to fio.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "asyncfio.h"
#include "bench.h"

#ifndef AFIO_BENCH_SRCDIR
#define AFIO_BENCH_SRCDIR "."
#endif
#ifndef AFIO_BENCH_DATADIR
#define AFIO_BENCH_DATADIR "/usr/local/share/asyncfio"
#endif

#define EXIT_USAGE	2
#define ALIGN		4096

enum rw { RW_RANDREAD, RW_RANDWRITE, RW_READ, RW_WRITE };
static const char *const rw_names[] = { "randread", "randwrite", "read", "write" };

struct opts {
	enum afio_backend backend;
	enum afio_mode mode;
	enum rw rw;
	uint64_t bs;
	unsigned qd;
	int direct;		/* -1: not given */
	uint64_t size;
	double runtime;
	const char *file;
	const char *dir;
	unsigned threads;
	bool json;
	bool cpu_check;
	bool sqpoll;
	bool lazy_eventfd;
	bool caller_writes;
	bool level_eventfd;
	bool fd_hint;
	bool submit_each;
	const char *raw;	/* engine, or NULL for the library */
	enum bench_op op;
	const char *tree;
	unsigned files;
	bool wait_in_poll;
};

/* ---- argument parsing ---- */

/* "4096", "4k", "64K", "1m", "2g", "1t", optionally followed by "b"/"ib". */
static int parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: break;
	}
	if (shift && (*end == 'i' || *end == 'I'))
		end++;
	if (*end == 'b' || *end == 'B')
		end++;
	if (*end)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

static int parse_uint(const char *s, unsigned max, unsigned *out)
{
	unsigned long v;
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v > max)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: afio-bench [options]            one workload, one backend and mode\n"
"       afio-bench --compare [options]  matrix of backends x modes x workloads, next to fio\n"
"       afio-bench --probe              which backends run here\n"
"\n"
"  --backend io_uring|libaio|threads|auto   (default auto)\n"
"  --mode inline|async|hybrid               (default inline)\n"
"  --rw randread|randwrite|read|write       (default randread)\n"
"  --bs SIZE          request size (default 4k)\n"
"  --qd N             requests kept in flight (default 32)\n"
"  --direct | --buffered                    O_DIRECT or page cache (default buffered)\n"
"  --size SIZE        file size to create and use (default 256m)\n"
"  --runtime SECONDS  measured time, fractions allowed (default 5)\n"
"  --file PATH        use PATH (a file or a block device); created if missing\n"
"                     and kept; write workloads overwrite its data.  Without it\n"
"                     a file is created in --dir and removed\n"
"  --dir DIR          where to create the scratch file (default .)\n"
"  --threads N        thread-pool workers (default 4)\n"
"  --sqpoll           io_uring: AFIO_SQPOLL\n"
"  --lazy-eventfd     AFIO_LAZY_EVENTFD: the eventfd is cleared only by a poll\n"
"                     that finds nothing\n"
"  --caller-writes    AFIO_CALLER_WRITES: INLINE makes buffered writes in the\n"
"                     caller, as pwrite(2) and libaio's io_submit() do\n"
"  --level-eventfd    AFIO_LEVEL_EVENTFD: the loop's poll(2) of the eventfd is\n"
"                     level-triggered, so a round that leaves work needs no\n"
"                     new write to it\n"
"  --fd-hint          afio_fd_hint() on the file: AFIO_FD_DIRECT or\n"
"                     AFIO_FD_BUFFERED, so no submit asks the kernel which\n"
"  --submit-each      afio_submit() after every request, as fio submits by\n"
"                     default; without it what a poll round queues goes in\n"
"                     one batch when afio_poll() returns\n"
"  --raw io_uring|libaio|psync  the same workload straight on the engine, no\n"
"                     library (--mode async: io_uring with IOSQE_ASYNC; psync:\n"
"                     --threads threads each in pread/pwrite, --qd unused);\n"
"                     io_uring-eventfd: io_uring with an eventfd registered,\n"
"                     as the library's ring has one; pool: --threads workers\n"
"                     fed by one locked queue, results back by an eventfd\n"
"  --op openat|statx|sendfile|nop  instead of reads and writes: open and\n"
"                     close, or statx, random files of a tree (--tree, else\n"
"                     --files empty files made in --dir), or sendfile --bs at\n"
"                     a time of --file (cached first) to qd TCP connections\n"
"                     on 127.0.0.1 read by another process, or nops: what a\n"
"                     request costs (raw: IORING_OP_NOP on liburing)\n"
"  --wait eventfd|poll  how the loop waits: on the eventfd, outside the\n"
"                     library, calling afio_poll(ctx, 0, 0) (default), or in\n"
"                     afio_poll(ctx, 1, -1) (no stall figures then)\n"
"  --json             one JSON object on stdout\n"
"  --cpu-check        also print how the CPU time of every thread adds up\n"
"SIZE takes k, m, g, t suffixes (powers of 1024).\n"
"Run 'afio-bench --compare --help' for the comparison's options.\n");
}

/* Exits 2 with "invalid WHAT: 'VAL'", or just WHAT when VAL is NULL. */
static void bad(const char *what, const char *val)
{
	if (val)
		fprintf(stderr, "afio-bench: invalid %s: '%s'\n", what, val);
	else
		fprintf(stderr, "afio-bench: %s\n", what);
	fprintf(stderr, "Try 'afio-bench --help'.\n");
	exit(EXIT_USAGE);
}

enum {
	OPT_BACKEND = 256, OPT_MODE, OPT_RW, OPT_BS, OPT_QD, OPT_DIRECT, OPT_BUFFERED,
	OPT_SIZE, OPT_RUNTIME, OPT_FILE, OPT_DIR, OPT_THREADS, OPT_JSON, OPT_CPU_CHECK,
	OPT_SQPOLL, OPT_LAZY_EVENTFD, OPT_CALLER_WRITES, OPT_LEVEL_EVENTFD, OPT_FD_HINT, OPT_SUBMIT_EACH, OPT_RAW, OPT_OP, OPT_TREE, OPT_FILES, OPT_WAIT, OPT_PROBE, OPT_HELP,
};

static const struct option long_opts[] = {
	{ "backend", required_argument, NULL, OPT_BACKEND },
	{ "mode", required_argument, NULL, OPT_MODE },
	{ "rw", required_argument, NULL, OPT_RW },
	{ "bs", required_argument, NULL, OPT_BS },
	{ "qd", required_argument, NULL, OPT_QD },
	{ "direct", no_argument, NULL, OPT_DIRECT },
	{ "buffered", no_argument, NULL, OPT_BUFFERED },
	{ "size", required_argument, NULL, OPT_SIZE },
	{ "runtime", required_argument, NULL, OPT_RUNTIME },
	{ "file", required_argument, NULL, OPT_FILE },
	{ "dir", required_argument, NULL, OPT_DIR },
	{ "threads", required_argument, NULL, OPT_THREADS },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "cpu-check", no_argument, NULL, OPT_CPU_CHECK },
	{ "sqpoll", no_argument, NULL, OPT_SQPOLL },
	{ "lazy-eventfd", no_argument, NULL, OPT_LAZY_EVENTFD },
	{ "caller-writes", no_argument, NULL, OPT_CALLER_WRITES },
	{ "level-eventfd", no_argument, NULL, OPT_LEVEL_EVENTFD },
	{ "fd-hint", no_argument, NULL, OPT_FD_HINT },
	{ "submit-each", no_argument, NULL, OPT_SUBMIT_EACH },
	{ "raw", required_argument, NULL, OPT_RAW },
	{ "op", required_argument, NULL, OPT_OP },
	{ "tree", required_argument, NULL, OPT_TREE },
	{ "files", required_argument, NULL, OPT_FILES },
	{ "wait", required_argument, NULL, OPT_WAIT },
	{ "probe", no_argument, NULL, OPT_PROBE },
	{ "help", no_argument, NULL, OPT_HELP },
	{ NULL, 0, NULL, 0 },
};

static int probe_all(void)
{
	static const enum afio_backend all[] = {
		AFIO_BACKEND_IO_URING, AFIO_BACKEND_LIBAIO, AFIO_BACKEND_THREADS,
	};
	char reason[256];

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		int ret = afio_probe(all[i], reason, sizeof(reason));

		printf("%s\t%s\t%s\n", afio_backend_name(all[i]),
		       ret ? "skipped" : "available", reason);
	}
	return 0;
}

static void parse_args(int argc, char **argv, struct opts *o)
{
	uint64_t v;
	unsigned u;
	char *end;
	int c;

	*o = (struct opts) {
		.backend = AFIO_BACKEND_AUTO,
		.mode = AFIO_MODE_INLINE,
		.rw = RW_RANDREAD,
		.bs = 4096,
		.qd = 32,
		.direct = -1,
		.size = 256ull << 20,
		.runtime = 5,
		.dir = ".",
		.threads = 4,
		.files = 4096,
	};
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
		switch (c) {
		case OPT_BACKEND:
			if (afio_backend_parse(optarg, &o->backend))
				bad("--backend (io_uring, libaio, threads or auto)", optarg);
			break;
		case OPT_MODE:
			if (afio_mode_parse(optarg, &o->mode))
				bad("--mode (inline, async or hybrid)", optarg);
			break;
		case OPT_RW:
			for (u = 0; u < 4; u++)
				if (!strcmp(optarg, rw_names[u]))
					break;
			if (u == 4)
				bad("--rw (randread, randwrite, read or write)", optarg);
			o->rw = (enum rw)u;
			break;
		case OPT_BS:
			if (parse_size(optarg, &v) || !v || v > (1u << 30))
				bad("--bs (1 to 1g, e.g. 4k)", optarg);
			o->bs = v;
			break;
		case OPT_QD:
			if (parse_uint(optarg, 65536, &u) || !u)
				bad("--qd (1 to 65536)", optarg);
			o->qd = u;
			break;
		case OPT_DIRECT:
		case OPT_BUFFERED:
			if (o->direct == (c == OPT_BUFFERED))
				bad("--direct and --buffered exclude each other", NULL);
			o->direct = c == OPT_DIRECT;
			break;
		case OPT_SIZE:
			if (parse_size(optarg, &v) || !v)
				bad("--size (e.g. 256m)", optarg);
			o->size = v;
			break;
		case OPT_RUNTIME:
			errno = 0;
			o->runtime = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(o->runtime > 0) ||
			    o->runtime > 86400)
				bad("--runtime (seconds, > 0)", optarg);
			break;
		case OPT_FILE:
			if (!*optarg)
				bad("--file", optarg);
			o->file = optarg;
			break;
		case OPT_DIR:
			o->dir = optarg;
			break;
		case OPT_THREADS:
			if (parse_uint(optarg, 1024, &u) || !u)
				bad("--threads (1 to 1024)", optarg);
			o->threads = u;
			break;
		case OPT_JSON:
			o->json = true;
			break;
		case OPT_CPU_CHECK:
			o->cpu_check = true;
			break;
		case OPT_SQPOLL:
			o->sqpoll = true;
			break;
		case OPT_LAZY_EVENTFD:
			o->lazy_eventfd = true;
			break;
		case OPT_CALLER_WRITES:
			o->caller_writes = true;
			break;
		case OPT_LEVEL_EVENTFD:
			o->level_eventfd = true;
			break;
		case OPT_FD_HINT:
			o->fd_hint = true;
			break;
		case OPT_SUBMIT_EACH:
			o->submit_each = true;
			break;
		case OPT_RAW:
			if (!raw_engine_known(optarg))
				bad("--raw (io_uring, io_uring-eventfd, libaio, psync or pool)", optarg);
			o->raw = optarg;
			break;
		case OPT_OP:
			if (bench_op_parse(optarg, &o->op))
				bad("--op (openat, statx, sendfile or nop)", optarg);
			break;
		case OPT_TREE:
			o->tree = optarg;
			break;
		case OPT_FILES:
			if (parse_uint(optarg, 1u << 20, &u) || !u)
				bad("--files (1 to 1048576)", optarg);
			o->files = u;
			break;
		case OPT_WAIT:
			if (strcmp(optarg, "eventfd") && strcmp(optarg, "poll"))
				bad("--wait (eventfd or poll)", optarg);
			o->wait_in_poll = !strcmp(optarg, "poll");
			break;
		case OPT_PROBE:
			exit(probe_all());
		case OPT_HELP:
			usage(stdout);
			exit(0);
		default:
			if (optopt)
				fprintf(stderr, "afio-bench: option '%s' needs a value\n",
					argv[optind - 1]);
			else
				fprintf(stderr, "afio-bench: unknown option '%s'\n",
					argv[optind - 1]);
			fprintf(stderr, "Try 'afio-bench --help'.\n");
			exit(EXIT_USAGE);
		}
	}
	if (optind < argc)
		bad("argument", argv[optind]);
	if (o->direct < 0)
		o->direct = 0;
	if (o->direct && o->bs % 512)
		bad("--direct needs a --bs that is a multiple of 512", NULL);
	if (o->size < o->bs)
		bad("--size is smaller than --bs", NULL);
	if (o->op == BOP_SENDFILE && !o->file)
		bad("--op sendfile needs --file", NULL);
	if (o->op == BOP_NOP && o->raw && strncmp(o->raw, "io_uring", 8))
		bad("--op nop runs raw on io_uring only (IORING_OP_NOP)", NULL);
	if (o->op != BOP_RW && o->op != BOP_NOP && o->raw && strcmp(o->raw, "psync"))
		bad("--op runs raw on psync only (the calls in a loop)", NULL);
	if (o->raw && !strcmp(o->raw, "pool") && o->op != BOP_RW)
		bad("--raw pool runs reads and writes only", NULL);
}

/* --compare: the matrix lives in a Python script next to this program. */
static void exec_compare(int argc, char **argv)
{
	const char *env = getenv("AFIO_BENCH_COMPARE");
	const char *cands[] = {
		env, AFIO_BENCH_SRCDIR "/compare.py", AFIO_BENCH_DATADIR "/compare.py",
	};
	char self[PATH_MAX];
	char **args;
	ssize_t n;
	int k = 0;

	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0) {
		perror("afio-bench: /proc/self/exe");
		exit(1);
	}
	self[n] = '\0';
	args = calloc((size_t)argc + 4, sizeof(*args));
	if (!args)
		exit(1);
	for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]); i++) {
		if (!cands[i] || access(cands[i], R_OK))
			continue;
		args[k++] = "python3";
		args[k++] = (char *)cands[i];
		args[k++] = "--afio-bench";
		args[k++] = self;
		for (int a = 1; a < argc; a++)
			if (strcmp(argv[a], "--compare"))
				args[k++] = argv[a];
		args[k] = NULL;
		execvp("python3", args);
		perror("afio-bench: python3");
		exit(1);
	}
	fprintf(stderr, "afio-bench: compare.py not found (looked in %s and %s; "
		"set AFIO_BENCH_COMPARE)\n", AFIO_BENCH_SRCDIR, AFIO_BENCH_DATADIR);
	exit(1);
}

/* ---- the run ---- */

struct bench;

struct io {
	struct bench *b;
	void *buf;
	uint64_t t0;
	unsigned slot;
	uint64_t off;		/* sendfile: where this slot's next call starts */
	struct statx stx;
};

struct bench {
	afio_ctx *ctx;
	struct workload w;
	uint64_t next_block;
	uint64_t rnd;
	uint64_t deadline;
	unsigned in_flight;
	bool stop;
	bool in_poll;
	bool wait_in_poll;
	uint64_t round_ns;	/* when the afio_poll() that runs the callbacks began */
	struct outcome o;
	struct io *ios;
};

/*
 * The time a callback stamps: that of the round, as the raw loops take it
 * once per batch of completions, so that a clock read per request does
 * not count against the library.  An afio_poll() that waits inside has no
 * round time to give before it returns: there the first callback of each
 * call reads the clock, and the others that call runs share it.
 */
static uint64_t callback_now(struct bench *b)
{
	if (b->wait_in_poll && !b->round_ns)
		b->round_ns = now_ns();
	return b->round_ns;
}

volatile sig_atomic_t bench_interrupted;

static void on_signal(int sig)
{
	(void)sig;
	bench_interrupted = 1;
}

static void on_done(void *data, ssize_t res);

/* afio_submit() outside afio_poll() is a call of its own for the stall
   figures; inside a callback it is part of the poll's time. */
static void submit_timed(struct bench *b)
{
	uint64_t t;

	if (b->in_poll) {
		afio_submit(b->ctx);
		return;
	}
	t = now_ns();
	afio_submit(b->ctx);
	stall_add(&b->o.stalls, now_ns() - t);
}

static void queued(struct bench *b, int ret)
{
	if (ret < 0) {
		if (!b->o.errors++)
			b->o.first_error = ret;
		b->stop = true;
		return;
	}
	b->in_flight++;
	if (b->w.submit_each)
		submit_timed(b);
}

static void on_op_done(void *data, ssize_t res);
static void on_nop_done(void *data, ssize_t res);
static void on_opened(void *data, ssize_t res);

/* An op, for --op: open (then close), statx, or sendfile of --bs. */
static int issue_op(struct bench *b, struct io *io)
{
	const struct workload *w = &b->w;
	const struct op_target *t = w->target;

	switch (w->op) {
	case BOP_OPENAT:
		return afio_openat(b->ctx, AT_FDCWD, pick_path(w, &b->rnd), O_RDONLY | O_CLOEXEC,
				   0, on_opened, io);
	case BOP_STATX:
		return afio_statx(b->ctx, AT_FDCWD, pick_path(w, &b->rnd), 0, STATX_BASIC_STATS,
				  &io->stx, on_op_done, io);
	case BOP_NOP:
		return afio_nop(b->ctx, on_nop_done, io);
	default:
		if (io->off + w->bs > t->file_size)
			io->off = 0;
		return afio_sendfile(b->ctx, t->socks[io->slot], t->file_fd, io->off, w->bs,
				     on_op_done, io);
	}
}

static inline void issue(struct bench *b, struct io *io, uint64_t now)
{
	const struct workload *w = &b->w;
	uint64_t off;
	int ret;

	io->t0 = now;
	if (w->op != BOP_RW) {
		queued(b, issue_op(b, io));
		return;
	}
	off = pick_block(w, &b->rnd, &b->next_block) * w->bs;
	if (w->write)
		ret = afio_write(b->ctx, w->fd, io->buf, w->bs, off, on_done, io);
	else
		ret = afio_read(b->ctx, w->fd, io->buf, w->bs, off, on_done, io);
	queued(b, ret);
}

static void next(struct bench *b, struct io *io, bool ok, uint64_t now)
{
	if (!ok || bench_interrupted)
		b->stop = true;
	if (now < b->deadline && !b->stop)
		issue(b, io, now);
}

static void on_done(void *data, ssize_t res)
{
	struct io *io = data;
	struct bench *b = io->b;
	uint64_t now = callback_now(b);

	b->in_flight--;
	outcome_io(&b->o, (long)res, b->w.bs, now - io->t0);
	next(b, io, res == (ssize_t)b->w.bs, now);
}

static void on_op_done(void *data, ssize_t res)
{
	struct io *io = data;
	struct bench *b = io->b;
	uint64_t now = callback_now(b);
	bool ok = b->w.op == BOP_SENDFILE ? res > 0 : res == 0;

	b->in_flight--;
	outcome_op(&b->o, (long)res, ok, now - io->t0);
	if (ok && b->w.op == BOP_SENDFILE) {
		b->o.bytes += (uint64_t)res;
		io->off += (uint64_t)res;
	}
	next(b, io, ok, now);
}

/*
 * A nop's round trip without the other ops' tests, as raw liburing's loop
 * has it: what --op nop measures is the library, not this file.
 */
static void on_nop_done(void *data, ssize_t res)
{
	struct io *io = data;
	struct bench *b = io->b;
	uint64_t now = callback_now(b);

	b->in_flight--;
	outcome_op(&b->o, (long)res, res == 0, now - io->t0);
	if (res || bench_interrupted)
		b->stop = true;
	if (now < b->deadline && !b->stop) {
		io->t0 = now;
		queued(b, afio_nop(b->ctx, on_nop_done, io));
	}
}

/* The file is open: close it, and the pair is one op. */
static void on_opened(void *data, ssize_t res)
{
	struct io *io = data;
	struct bench *b = io->b;

	b->in_flight--;
	if (res < 0) {
		outcome_op(&b->o, (long)res, false, 0);
		next(b, io, false, callback_now(b));
		return;
	}
	queued(b, afio_close(b->ctx, (int)res, on_op_done, io));
}

/*
 * The loop of a server that watches the context's eventfd: afio_poll(ctx,
 * 0, 0) runs what is done and submits what the callbacks queued, and only
 * when it found nothing does the loop sleep, on the eventfd, outside the
 * library.  Every library call is timed: no call may wait for the device.
 */
static int run_library(struct bench *b)
{
	/* Exported, as a server's loop has it; it waits on it only when a
	   poll found nothing. */
	struct pollfd pfd = { .fd = b->wait_in_poll ? 0 : afio_eventfd(b->ctx),
			      .events = POLLIN };
	unsigned idle_after_cancel = 0;
	bool canceled = false;
	uint64_t t, t_end;
	int n;

	if (pfd.fd < 0)
		return pfd.fd;
	stall_sync(&b->o.stalls);
	b->o.t0 = now_ns();
	b->deadline = b->o.t0 + (uint64_t)(b->w.runtime * 1e9);
	for (unsigned i = 0; i < b->w.qd && !b->stop; i++)
		issue(b, &b->ios[i], b->o.t0);
	if (!b->w.submit_each)
		submit_timed(b);
	while (b->in_flight) {
		b->round_ns = t = b->wait_in_poll ? 0 : now_ns();
		b->in_poll = true;
		n = afio_poll(b->ctx, b->wait_in_poll ? 1 : 0, b->wait_in_poll ? 1000 : 0);
		b->in_poll = false;
		t_end = now_ns();
		if (!b->wait_in_poll)
			stall_add(&b->o.stalls, t_end - t);
		if (n < 0 && n != -EINTR)
			return n;
		/* A request that never ends must not keep the run: 2 s past
		   the end, what is left is canceled. */
		if ((bench_interrupted || t_end > b->deadline + 2000000000ull) && !canceled) {
			if (!bench_interrupted)
				fprintf(stderr, "afio-bench: %u requests still in flight 2 s after "
					"the end; canceled\n", b->in_flight);
			b->deadline = 0;
			for (unsigned i = 0; i < b->w.qd; i++)
				afio_cancel(b->ctx, &b->ios[i]);
			canceled = true;
		}
		if (n <= 0 && b->in_flight && !b->wait_in_poll) {
			if (poll(&pfd, 1, 1000) < 0 && errno != EINTR)
				return -errno;
			stall_sync(&b->o.stalls);
			if (canceled && ++idle_after_cancel > 2)
				return -ETIMEDOUT;
		}
	}
	b->o.t1 = now_ns();
	return 0;
}

/* ---- files ---- */

/* Incompressible bytes, so that a compressing device (zram) or file system
   does real work, as it would for real data. */
static void fill_random(void *p, size_t len, uint64_t seed)
{
	uint64_t s = 0x9e3779b97f4a7c15ull ^ (seed * 0x100000001b3ull), v;
	unsigned char *c = p;

	for (size_t i = 0; i < len; i += sizeof(v)) {
		v = next_rand(&s);
		memcpy(c + i, &v, len - i < sizeof(v) ? len - i : sizeof(v));
	}
}

static int fill_file(int fd, uint64_t from, uint64_t size)
{
	const size_t chunk = 1 << 20;
	uint64_t *buf = malloc(chunk), off;
	ssize_t n;

	if (!buf)
		return -ENOMEM;
	fill_random(buf, chunk, 1);
	for (off = from; off < size; off += (uint64_t)n) {
		size_t want = size - off < chunk ? (size_t)(size - off) : chunk;

		buf[0] = off;	/* no two blocks alike */
		n = pwrite(fd, buf, want, (off_t)off);
		if (n <= 0) {
			free(buf);
			return n < 0 ? -errno : -EIO;
		}
	}
	free(buf);
	return fsync(fd) ? -errno : 0;
}

/* Opens (creating and filling when needed) the file to run on; *size is
   set to what will be used. */
static int open_target(const struct opts *o, char *path, size_t pathlen,
		       bool *remove_after, uint64_t *size)
{
	int flags = (o->rw == RW_READ || o->rw == RW_RANDREAD) ? O_RDONLY : O_RDWR;
	struct stat st;
	int fd, ret;

	*remove_after = false;
	*size = o->size;
	if (o->file) {
		snprintf(path, pathlen, "%s", o->file);
		if (!stat(path, &st) && S_ISBLK(st.st_mode)) {
			uint64_t dev;

			fd = open(path, flags | O_CLOEXEC | (o->direct ? O_DIRECT : 0));
			if (fd < 0)
				return -errno;
			if (ioctl(fd, BLKGETSIZE64, &dev) < 0) {
				ret = -errno;
				close(fd);
				return ret;
			}
			if (dev < *size)
				*size = dev;
			return fd;
		}
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	} else {
		snprintf(path, pathlen, "%s/afio-bench.XXXXXX", o->dir);
		fd = mkostemp(path, O_CLOEXEC);
		*remove_after = fd >= 0;
	}
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		ret = S_ISREG(st.st_mode) ? -errno : -EINVAL;
		goto fail;
	}
	if ((uint64_t)st.st_size < *size) {
		ret = fill_file(fd, (uint64_t)st.st_size & ~(uint64_t)(ALIGN - 1), *size);
		if (ret)
			goto fail;
	}
	close(fd);
	fd = open(path, flags | O_CLOEXEC | (o->direct ? O_DIRECT : 0));
	if (fd < 0) {
		ret = -errno;
		goto fail_closed;
	}
	return fd;
fail:
	close(fd);
fail_closed:
	if (*remove_after)
		unlink(path);
	return ret;
}

/* ---- CPU accounting ---- */

static double tv_s(struct timeval tv)
{
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* utime + stime in clock ticks from a /proc/.../stat file, and its comm. */
static int read_stat(const char *path, unsigned long long *ticks, char *comm, size_t len)
{
	unsigned long long ut, st;
	char buf[1024], *p, *q;
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	p = strchr(buf, '(');
	q = strrchr(buf, ')');
	if (!p || !q)
		return -EIO;
	snprintf(comm, len, "%.*s", (int)(q - p - 1), p + 1);
	/* after ") ": state(3) ... utime(14) stime(15) */
	if (sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
		   &ut, &st) != 2)
		return -EIO;
	*ticks = ut + st;
	return 0;
}

/* Prints, to stderr, the CPU time of every thread of this process next to
   getrusage(RUSAGE_SELF): kernel io_uring workers (iou-wrk-*, iou-sqp-*) are
   threads of the process and must show up in both. */
static void cpu_check(void)
{
	double hz = (double)sysconf(_SC_CLK_TCK);
	unsigned long long t, sum = 0, io_workers = 0, proc = 0;
	char path[300], comm[64];
	unsigned ntask = 0, nio = 0;
	struct rusage ru;
	struct dirent *de;
	DIR *d;

	d = opendir("/proc/self/task");
	if (!d)
		return;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/stat", de->d_name);
		if (read_stat(path, &t, comm, sizeof(comm)))
			continue;
		sum += t;
		ntask++;
		if (!strncmp(comm, "iou-", 4)) {
			io_workers += t;
			nio++;
		}
	}
	closedir(d);
	read_stat("/proc/self/stat", &proc, comm, sizeof(comm));
	getrusage(RUSAGE_SELF, &ru);
	fprintf(stderr, "cpu-check: getrusage(RUSAGE_SELF) %.2f s; /proc/self/stat %.2f s; "
		"live threads %u sum %.2f s, of which %u io_uring workers (iou-*) %.2f s\n",
		tv_s(ru.ru_utime) + tv_s(ru.ru_stime), (double)proc / hz, ntask,
		(double)sum / hz, nio, (double)io_workers / hz);
}

/* ---- main ---- */

struct report {
	const char *backend;	/* afio_backend_name(), or "raw-ENGINE" */
	const char *desc;
	const char *path;
	uint64_t fallbacks, nowait;
	double usr, sys;
};

static void print_report(const struct opts *o, const struct bench *b, const struct report *rp)
{
	const struct outcome *oc = &b->o;
	double secs = (double)(oc->t1 - oc->t0) / 1e9, cpu = rp->usr + rp->sys;
	double iops = (double)oc->done / secs, mib = iops * (double)o->bs / (1 << 20);
	const char *what = o->op == BOP_RW ? rw_names[o->rw] : bench_op_names[o->op];
	double p50 = percentile(oc->hist, oc->done, 0.50);
	double p99 = percentile(oc->hist, oc->done, 0.99);
	double p999 = percentile(oc->hist, oc->done, 0.999);
	double ipc = cpu > 0 ? (double)oc->done / cpu : 0;
	double cpu_ns = oc->done ? cpu * 1e9 / (double)oc->done : 0;
	double stall_max = (double)oc->stalls.max_ns / 1000.0;
	double stall_p99 = percentile(oc->stalls.hist, oc->stalls.calls, 0.99);

	/* A bucket's middle may lie past the exact longest call. */
	if (stall_p99 > stall_max)
		stall_p99 = stall_max;

	if (o->op == BOP_SENDFILE)
		mib = (double)oc->bytes / secs / (1 << 20);
	else if (o->op != BOP_RW)
		mib = 0;
	if (o->json) {
		printf("{\"backend\": \"%s\", \"mode\": \"%s\", \"rw\": \"%s\", "
		       "\"bs\": %" PRIu64 ", \"qd\": %u, \"direct\": %s, "
		       "\"iops\": %.1f, \"mib_s\": %.2f, \"cpu_s\": %.3f, "
		       "\"iops_per_cpu_s\": %.1f, \"lat_p50_us\": %.1f, "
		       "\"lat_p99_us\": %.1f, \"lat_p999_us\": %.1f, "
		       "\"fallbacks\": %" PRIu64 ", \"ios\": %" PRIu64 ", "
		       "\"runtime_s\": %.3f, \"cpu_user_s\": %.3f, \"cpu_sys_s\": %.3f, "
		       "\"threads\": %u, \"nowait\": %" PRIu64 ", \"errors\": %" PRIu64 ", "
		       "\"submit\": \"%s\", \"loop_stall_max_us\": %.1f, "
		       "\"loop_stall_p99_us\": %.1f, \"loop_calls\": %" PRIu64 ", "
		       "\"loop_slow_calls\": %" PRIu64 ", \"loop_slept_calls\": %" PRIu64 ", "
		       "\"loop_slept_max_us\": %.1f, \"loop_preempted_calls\": %" PRIu64 ", "
		       "\"cpu_ns_per_req\": %.1f, \"engine\": \"%s\"}\n",
		       rp->backend, afio_mode_name(o->mode), what, o->bs, o->qd,
		       o->direct ? "true" : "false", iops, mib, cpu, ipc, p50, p99, p999,
		       rp->fallbacks, oc->done, secs, rp->usr, rp->sys, o->threads, rp->nowait,
		       oc->errors, o->submit_each ? "each" : "batch", stall_max, stall_p99,
		       oc->stalls.calls, oc->stalls.slow, oc->stalls.slept,
		       (double)oc->stalls.slept_max_ns / 1000.0, oc->stalls.preempted, cpu_ns,
		       rp->desc);
		return;
	}
	printf("%s, %s %s bs=%" PRIu64 " qd=%u %s%s, %.2f s on %s\n", rp->desc,
	       afio_mode_name(o->mode), what, o->bs, o->qd,
	       o->direct ? "direct" : "buffered",
	       o->submit_each ? ", submitted one by one" : "", secs, rp->path);
	printf("  IOPS %.0f   %.1f MiB/s\n", iops, mib);
	printf("  CPU  %.3f s (user %.3f, sys %.3f), %.0f IOPS per CPU-second, %.1f ns per "
	       "request\n", cpu, rp->usr, rp->sys, ipc, cpu_ns);
	printf("  latency us  p50 %.1f  p99 %.1f  p99.9 %.1f\n", p50, p99, p999);
	printf("  loop stall us  max %.1f  p99 %.1f over %" PRIu64 " calls; of those over "
	       "%u us, %" PRIu64 " slept (longest %.1f us), %" PRIu64 " were preempted\n",
	       stall_max, stall_p99, oc->stalls.calls, STALL_CHECK_NS / 1000,
	       oc->stalls.slept, (double)oc->stalls.slept_max_ns / 1000.0,
	       oc->stalls.preempted);
	if (!o->raw)
		printf("  fallbacks %" PRIu64 "  finished at once %" PRIu64 "\n",
		       rp->fallbacks, rp->nowait);
}

static afio_ctx *make_ctx(const struct opts *o)
{
	struct afio_config cfg;
	afio_ctx *ctx;
	int ret;

	afio_config_init(&cfg);
	cfg.backend = o->backend;
	cfg.mode = o->mode;
	cfg.entries = o->qd;
	cfg.threads = o->threads;
	cfg.flags = AFIO_NO_FALLBACK | (o->sqpoll ? AFIO_SQPOLL : 0) |
		    (o->lazy_eventfd ? AFIO_LAZY_EVENTFD : 0) |
		    (o->caller_writes ? AFIO_CALLER_WRITES : 0) |
		    (o->level_eventfd ? AFIO_LEVEL_EVENTFD : 0);
	ret = afio_create(&ctx, &cfg);
	if (ret) {
		char reason[256];

		afio_probe(o->backend, reason, sizeof(reason));
		fprintf(stderr, "afio-bench: backend %s: %s (%s)\n",
			afio_backend_name(o->backend), strerror(-ret), reason);
		exit(3);
	}
	return ctx;
}

static struct bench *make_bench(const struct opts *o)
{
	struct bench *b = calloc(1, sizeof(*b));

	if (!b || !(b->ios = calloc(o->qd, sizeof(*b->ios))) ||
	    !(b->w.bufs = calloc(o->qd, sizeof(*b->w.bufs))))
		exit(1);
	for (unsigned i = 0; i < o->qd; i++) {
		b->ios[i].b = b;
		b->ios[i].slot = i;
		if (posix_memalign(&b->ios[i].buf, ALIGN, o->bs)) {
			fprintf(stderr, "afio-bench: out of memory for %u x %" PRIu64 " buffers\n",
				o->qd, o->bs);
			exit(1);
		}
		fill_random(b->ios[i].buf, o->bs, i);
		b->w.bufs[i] = b->ios[i].buf;
	}
	return b;
}

static void free_bench(struct bench *b, unsigned qd)
{
	for (unsigned i = 0; i < qd; i++)
		free(b->ios[i].buf);
	free(b->w.bufs);
	free(b->ios);
	free(b);
}

int main(int argc, char **argv)
{
	struct report rp = { 0 };
	struct op_target target = { .file_fd = -1 };
	struct afio_stats st;
	struct rusage r0, r1;
	struct opts o;
	struct bench *b;
	char path[PATH_MAX], desc[256], backend[32];
	bool remove_after;
	uint64_t size;
	int ret, status = 0;

	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--compare"))
			exec_compare(argc, argv);
	parse_args(argc, argv, &o);

	b = make_bench(&o);
	if (!o.raw) {
		b->ctx = make_ctx(&o);
		afio_describe(b->ctx, desc, sizeof(desc));
	}
	remove_after = false;
	size = o.size;
	snprintf(path, sizeof(path), "%s", o.tree ? o.tree : o.dir);
	b->w.fd = -1;
	ret = 0;
	if (o.op == BOP_RW || o.op == BOP_SENDFILE) {
		b->w.fd = open_target(&o, path, sizeof(path), &remove_after, &size);
		ret = b->w.fd < 0 ? b->w.fd : 0;
		if (!ret && o.fd_hint && b->ctx)
			ret = afio_fd_hint(b->ctx, b->w.fd,
					   o.direct ? AFIO_FD_DIRECT : AFIO_FD_BUFFERED);
	}
	if (!ret && o.op != BOP_RW) {
		ret = op_setup(&target, o.op, o.dir, o.tree, o.files, path, o.qd, !o.raw);
		b->w.target = &target;
	}
	if (ret) {
		fprintf(stderr, "afio-bench: %s: %s\n", path, strerror(-ret));
		if (b->ctx)
			afio_destroy(b->ctx);
		op_teardown(&target);
		return 1;
	}
	b->w.op = o.op;
	b->wait_in_poll = o.wait_in_poll;
	b->w.write = o.rw == RW_WRITE || o.rw == RW_RANDWRITE;
	b->w.random = o.rw == RW_RANDREAD || o.rw == RW_RANDWRITE;
	b->w.submit_each = o.submit_each;
	b->w.bs = o.bs;
	b->w.nblocks = size / o.bs;
	b->w.qd = o.qd;
	b->w.threads = o.threads;
	b->w.runtime = o.runtime;
	b->rnd = 0x2545f4914f6cdd1dull ^ (uint64_t)getpid();

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);

	getrusage(RUSAGE_SELF, &r0);
	if (o.raw)
		ret = raw_run(o.raw, &b->w, o.mode == AFIO_MODE_ASYNC, &b->o, desc, sizeof(desc));
	else
		ret = run_library(b);
	getrusage(RUSAGE_SELF, &r1);
	if (ret) {
		fprintf(stderr, "afio-bench: %s\n", strerror(-ret));
		status = 1;
	}
	if (o.cpu_check)
		cpu_check();

	if (b->ctx) {
		afio_stats(b->ctx, &st);
		rp.fallbacks = st.fallbacks;
		rp.nowait = st.nowait;
		rp.backend = afio_backend_name(afio_backend(b->ctx));
		afio_destroy(b->ctx);
	} else {
		snprintf(backend, sizeof(backend), "raw-%s", o.raw);
		rp.backend = backend;
	}
	op_teardown(&target);
	if (b->w.fd >= 0)
		close(b->w.fd);
	if (remove_after)
		unlink(path);

	if (b->o.errors) {
		fprintf(stderr, "afio-bench: %" PRIu64 " requests failed, first: %s\n",
			b->o.errors, strerror((int)-b->o.first_error));
		status = 1;
	}
	if (!b->o.t1)
		b->o.t1 = now_ns();
	rp.desc = desc;
	rp.path = path;
	rp.usr = tv_s(r1.ru_utime) - tv_s(r0.ru_utime);
	rp.sys = tv_s(r1.ru_stime) - tv_s(r0.ru_stime);
	print_report(&o, b, &rp);
	free_bench(b, o.qd);
	return status;
}
