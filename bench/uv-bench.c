/* SPDX-License-Identifier: MIT */
/*
 * afio-uv-bench: the workload of an afio-bench run done through libuv's
 * thread pool (uv_fs_read/uv_fs_write), the peer of the threads backend in
 * ASYNC mode.  Same queue depth, pool size (UV_THREADPOOL_SIZE), offsets,
 * buffers, clock and figures; the JSON has afio-bench's keys.  The file must
 * exist and hold --size bytes (afio-bench --compare makes it).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <uv.h>

#include "bench.h"

#define ALIGN 4096

volatile sig_atomic_t bench_interrupted;

struct uv_io {
	uv_fs_t req;
	uv_buf_t buf;
	uint64_t t0;
	struct uv_run *run;
	unsigned slot;
	int64_t off;		/* sendfile: where this slot's next call starts */
};

struct uv_run {
	uv_loop_t *loop;
	struct workload w;
	struct outcome o;
	struct uv_io *ios;
	uint64_t rnd, next, deadline;
	unsigned in_flight;
	bool stop;
};

static void on_fs(uv_fs_t *req);
static void on_op(uv_fs_t *req);
static void on_opened(uv_fs_t *req);

static int uv_issue_op(struct uv_run *r, struct uv_io *io)
{
	const struct op_target *t = r->w.target;

	switch (r->w.op) {
	case BOP_OPENAT:
		return uv_fs_open(r->loop, &io->req, pick_path(&r->w, &r->rnd),
				  O_RDONLY | O_CLOEXEC, 0, on_opened);
	case BOP_STATX:
		return uv_fs_stat(r->loop, &io->req, pick_path(&r->w, &r->rnd), on_op);
	default:
		if ((uint64_t)io->off + r->w.bs > t->file_size)
			io->off = 0;
		return uv_fs_sendfile(r->loop, &io->req, t->socks[io->slot], t->file_fd, io->off,
				      r->w.bs, on_op);
	}
}

static void uv_issue(struct uv_run *r, struct uv_io *io, uint64_t now)
{
	int64_t off = (int64_t)(pick_block(&r->w, &r->rnd, &r->next) * r->w.bs);
	int ret;

	io->t0 = now;
	if (r->w.op != BOP_RW)
		ret = uv_issue_op(r, io);
	else if (r->w.write)
		ret = uv_fs_write(r->loop, &io->req, r->w.fd, &io->buf, 1, off, on_fs);
	else
		ret = uv_fs_read(r->loop, &io->req, r->w.fd, &io->buf, 1, off, on_fs);
	if (ret < 0) {
		if (!r->o.errors++)
			r->o.first_error = ret;
		r->stop = true;
		return;
	}
	r->in_flight++;
}

static void on_fs(uv_fs_t *req)
{
	struct uv_io *io = (struct uv_io *)req;
	struct uv_run *r = io->run;
	uint64_t now = now_ns();
	ssize_t res = req->result;

	uv_fs_req_cleanup(req);
	r->in_flight--;
	outcome_io(&r->o, (long)res, r->w.bs, now - io->t0);
	if (res != (ssize_t)r->w.bs || bench_interrupted)
		r->stop = true;
	if (now < r->deadline && !r->stop)
		uv_issue(r, io, now);
}

static void on_op(uv_fs_t *req)
{
	struct uv_io *io = (struct uv_io *)req;
	struct uv_run *r = io->run;
	uint64_t now = now_ns();
	ssize_t res = req->result;
	bool ok = r->w.op == BOP_SENDFILE ? res > 0 : res == 0;

	uv_fs_req_cleanup(req);
	r->in_flight--;
	outcome_op(&r->o, (long)res, ok, now - io->t0);
	if (ok && r->w.op == BOP_SENDFILE) {
		r->o.bytes += (uint64_t)res;
		io->off += res;
	}
	if (!ok || bench_interrupted)
		r->stop = true;
	if (now < r->deadline && !r->stop)
		uv_issue(r, io, now);
}

/* Opened: close it, and the pair is one op. */
static void on_opened(uv_fs_t *req)
{
	struct uv_io *io = (struct uv_io *)req;
	struct uv_run *r = io->run;
	ssize_t res = req->result;

	uv_fs_req_cleanup(req);
	if (res < 0 || uv_fs_close(r->loop, &io->req, (uv_file)res, on_op) < 0) {
		r->in_flight--;
		outcome_op(&r->o, (long)res, false, 0);
		r->stop = true;
	}
}

static void usage(FILE *f)
{
	fprintf(f, "usage: afio-uv-bench --file PATH [--rw randread|randwrite|read|write] [--bs N]\n"
		   "       [--qd N] [--threads N] [--direct|--buffered] [--size N] [--runtime S] [--json]\n"
		   "       afio-uv-bench --op openat|statx --tree DIR --files N [...]\n"
		   "       afio-uv-bench --op sendfile --file PATH [...]\n"
		   "Sizes in bytes; the options mean what they mean for afio-bench.\n");
}

static void on_signal(int sig)
{
	(void)sig;
	bench_interrupted = 1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "file", required_argument, NULL, 'f' }, { "rw", required_argument, NULL, 'r' },
		{ "bs", required_argument, NULL, 'b' }, { "qd", required_argument, NULL, 'q' },
		{ "threads", required_argument, NULL, 't' }, { "direct", no_argument, NULL, 'd' },
		{ "buffered", no_argument, NULL, 'B' }, { "size", required_argument, NULL, 's' },
		{ "runtime", required_argument, NULL, 'T' }, { "json", no_argument, NULL, 'j' },
		{ "op", required_argument, NULL, 'o' }, { "tree", required_argument, NULL, 'D' },
		{ "files", required_argument, NULL, 'n' }, { "dir", required_argument, NULL, 'x' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	const char *file = NULL, *rw = "randread", *tree = NULL, *dir = ".";
	struct op_target target = { .file_fd = -1 };
	unsigned files = 4096;
	uint64_t size = 256ull << 20;
	struct rusage r0, r1;
	struct uv_run r = { 0 };
	bool direct = false, json = false;
	char env[16];
	double secs, cpu, usr, sys, mib;
	const char *what;
	int c;

	r.w.bs = 4096;
	r.w.qd = 32;
	r.w.threads = 4;
	r.w.runtime = 5;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'f': file = optarg; break;
		case 'r': rw = optarg; break;
		case 'b': r.w.bs = strtoull(optarg, NULL, 10); break;
		case 'q': r.w.qd = (unsigned)strtoul(optarg, NULL, 10); break;
		case 't': r.w.threads = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'd': direct = true; break;
		case 'B': direct = false; break;
		case 's': size = strtoull(optarg, NULL, 10); break;
		case 'T': r.w.runtime = strtod(optarg, NULL); break;
		case 'j': json = true; break;
		case 'o':
			/* libuv has no request that does nothing. */
			if (bench_op_parse(optarg, &r.w.op) || r.w.op == BOP_NOP) {
				usage(stderr);
				return 2;
			}
			break;
		case 'D': tree = optarg; break;
		case 'n': files = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'x': dir = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	r.w.write = !strcmp(rw, "randwrite") || !strcmp(rw, "write");
	r.w.random = !strncmp(rw, "rand", 4);
	if ((!file && r.w.op != BOP_OPENAT && r.w.op != BOP_STATX) || !files || optind < argc || !r.w.bs || !r.w.qd || !r.w.threads || size < r.w.bs ||
	    !(r.w.runtime > 0) || (!r.w.write && strcmp(rw, "randread") && strcmp(rw, "read"))) {
		usage(stderr);
		return 2;
	}
	r.w.nblocks = size / r.w.bs;
	signal(SIGPIPE, SIG_IGN);
	if (r.w.op != BOP_RW) {
		/* libuv's workers block on the socket: leave it blocking. */
		if (op_setup(&target, r.w.op, dir, tree, files, file, r.w.qd, false))
			return 1;
		r.w.target = &target;
		r.w.fd = -1;
	} else {
		r.w.fd = open(file, (r.w.write ? O_RDWR : O_RDONLY) | O_CLOEXEC |
			      (direct ? O_DIRECT : 0));
		if (r.w.fd < 0) {
			fprintf(stderr, "afio-uv-bench: %s: %s\n", file, strerror(errno));
			return 1;
		}
	}
	/* Read by libuv when its pool starts, at the first request. */
	snprintf(env, sizeof(env), "%u", r.w.threads);
	setenv("UV_THREADPOOL_SIZE", env, 1);
	r.loop = uv_default_loop();
	r.ios = calloc(r.w.qd, sizeof(*r.ios));
	if (!r.ios)
		return 1;
	for (unsigned i = 0; i < r.w.qd; i++) {
		void *p;

		if (posix_memalign(&p, ALIGN, r.w.bs))
			return 1;
		memset(p, (int)i, r.w.bs);
		r.ios[i].buf = uv_buf_init(p, (unsigned)r.w.bs);
		r.ios[i].run = &r;
		r.ios[i].slot = i;
	}
	r.rnd = 0x2545f4914f6cdd1dull ^ (uint64_t)getpid();
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	getrusage(RUSAGE_SELF, &r0);
	r.o.t0 = now_ns();
	r.deadline = r.o.t0 + (uint64_t)(r.w.runtime * 1e9);
	for (unsigned i = 0; i < r.w.qd && !r.stop; i++)
		uv_issue(&r, &r.ios[i], r.o.t0);
	uv_run(r.loop, UV_RUN_DEFAULT);
	r.o.t1 = now_ns();
	getrusage(RUSAGE_SELF, &r1);
	uv_loop_close(r.loop);
	op_teardown(&target);
	if (r.w.fd >= 0)
		close(r.w.fd);

	secs = (double)(r.o.t1 - r.o.t0) / 1e9;
	usr = (double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) +
	      (double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) / 1e6;
	sys = (double)(r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) +
	      (double)(r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) / 1e6;
	cpu = usr + sys;
	what = r.w.op == BOP_RW ? rw : bench_op_names[r.w.op];
	mib = (double)(r.w.op == BOP_SENDFILE ? r.o.bytes : r.o.done * r.w.bs) / secs / (1 << 20);
	if (r.w.op == BOP_OPENAT || r.w.op == BOP_STATX)
		mib = 0;
	if (r.o.errors)
		fprintf(stderr, "afio-uv-bench: %" PRIu64 " requests failed, first: %s\n",
			r.o.errors, uv_strerror((int)r.o.first_error));
	if (json)
		printf("{\"backend\": \"libuv\", \"mode\": \"async\", \"rw\": \"%s\", "
		       "\"bs\": %" PRIu64 ", \"qd\": %u, \"direct\": %s, \"iops\": %.1f, "
		       "\"mib_s\": %.2f, \"cpu_s\": %.3f, \"iops_per_cpu_s\": %.1f, "
		       "\"lat_p50_us\": %.1f, \"lat_p99_us\": %.1f, \"lat_p999_us\": %.1f, "
		       "\"fallbacks\": 0, \"ios\": %" PRIu64 ", \"runtime_s\": %.3f, "
		       "\"cpu_user_s\": %.3f, \"cpu_sys_s\": %.3f, \"threads\": %u, "
		       "\"errors\": %" PRIu64 ", \"submit\": \"each\", \"engine\": \"libuv %s\"}\n",
		       what, r.w.bs, r.w.qd, direct ? "true" : "false", (double)r.o.done / secs,
		       mib, cpu,
		       cpu > 0 ? (double)r.o.done / cpu : 0, percentile(r.o.hist, r.o.done, 0.5),
		       percentile(r.o.hist, r.o.done, 0.99), percentile(r.o.hist, r.o.done, 0.999),
		       r.o.done, secs, usr, sys, r.w.threads, r.o.errors, uv_version_string());
	else
		printf("libuv %s, %u pool threads, %s bs=%" PRIu64 " qd=%u %s: IOPS %.0f, "
		       "CPU %.3f s, latency us p50 %.1f p99 %.1f\n", uv_version_string(),
		       r.w.threads, what, r.w.bs, r.w.qd, direct ? "direct" : "buffered",
		       (double)r.o.done / secs, cpu, percentile(r.o.hist, r.o.done, 0.5),
		       percentile(r.o.hist, r.o.done, 0.99));
	for (unsigned i = 0; i < r.w.qd; i++)
		free(r.ios[i].buf.base);
	free(r.ios);
	return r.o.errors ? 1 : 0;
}
