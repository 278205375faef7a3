/* SPDX-License-Identifier: MIT */
/*
 * What afio-bench's library runs and its raw-engine runs share: the clock,
 * the offsets, the histograms and the figures they report, so that both
 * sides of a comparison are measured by the same code.
 */
#ifndef AFIO_BENCH_H
#define AFIO_BENCH_H

#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <time.h>

/* ---- histogram of nanoseconds: 32 linear steps per power of two ---- */

#define SUB_BITS	5
#define SUB		(1u << SUB_BITS)
#define HIST_LEN	(64 * SUB)

static inline unsigned hist_index(uint64_t v)
{
	unsigned msb, shift;

	if (v < 2 * SUB)
		return (unsigned)v;
	msb = 63 - (unsigned)__builtin_clzll(v);
	shift = msb - SUB_BITS;
	return (shift + 1) * SUB + (unsigned)((v >> shift) - SUB);
}

/* Middle of the bucket's range. */
static inline double hist_value(unsigned idx)
{
	unsigned shift;

	if (idx < 2 * SUB)
		return idx;
	shift = idx / SUB - 1;
	return (double)((uint64_t)(idx % SUB + SUB) << shift) + (double)(1ull << shift) / 2;
}

/* In microseconds. */
static inline double percentile(const uint64_t *hist, uint64_t total, double p)
{
	uint64_t want = (uint64_t)ceil((double)total * p), seen = 0;

	if (!total)
		return 0;
	if (!want)
		want = 1;
	for (unsigned i = 0; i < HIST_LEN; i++) {
		seen += hist[i];
		if (seen >= want)
			return hist_value(i) / 1000.0;
	}
	return hist_value(HIST_LEN - 1) / 1000.0;
}

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* xorshift64*: cheap and good enough to spread offsets. */
static inline uint64_t next_rand(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

/*
 * Time the calling thread spent inside calls that must not wait: the
 * event-loop stalls the caller would see.  A long call is told apart by
 * the thread's context switches (getrusage(RUSAGE_THREAD), read only after
 * a call that took STALL_CHECK_NS or more, and after each wait): a
 * voluntary one means the thread slept inside the call (the device, a
 * lock, the page cache), an involuntary one that another thread had the
 * CPU.  The counts are read at those points only, so a switch in a short
 * call before a long one is charged to the long one: the figures err
 * towards "slept".
 */
#define STALL_CHECK_NS	100000u
#define STALL_SLOW_NS	1000000u

struct stalls {
	uint64_t calls;
	uint64_t max_ns;
	uint64_t slow;		/* calls of STALL_SLOW_NS or more */
	uint64_t slept;		/* long calls with a voluntary switch */
	uint64_t slept_max_ns;
	uint64_t preempted;	/* long calls with only involuntary ones */
	long nvcsw, nivcsw;
	uint64_t hist[HIST_LEN];
};

/* After the thread waited on purpose: its switches so far are not stalls. */
static inline void stall_sync(struct stalls *s)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	s->nvcsw = ru.ru_nvcsw;
	s->nivcsw = ru.ru_nivcsw;
}

static inline void stall_add(struct stalls *s, uint64_t ns)
{
	long nv, niv;

	s->calls++;
	s->hist[hist_index(ns)]++;
	if (ns > s->max_ns)
		s->max_ns = ns;
	if (ns < STALL_CHECK_NS)
		return;
	s->slow += ns >= STALL_SLOW_NS;
	nv = s->nvcsw;
	niv = s->nivcsw;
	stall_sync(s);
	if (s->nvcsw > nv) {
		s->slept++;
		if (ns > s->slept_max_ns)
			s->slept_max_ns = ns;
	} else if (s->nivcsw > niv) {
		s->preempted++;
	}
}

/* What is done: reads and writes of --bs, or one of the ops.  A nop does
   nothing: what is left is what the library (or the raw loop) costs. */
enum bench_op { BOP_RW, BOP_OPENAT, BOP_STATX, BOP_SENDFILE, BOP_NOP };
extern const char *const bench_op_names[];
int bench_op_parse(const char *s, enum bench_op *op);

/* What an op runs on (optarget.c).  openat (then close) and statx: files
   by absolute path in a tree; sendfile: file_fd, all cached, to socks[i]
   for request slot i, read by another process. */
struct op_target {
	enum bench_op op;
	char tree[4096];
	bool remove_tree;
	char **paths;
	unsigned npaths;
	int file_fd;
	uint64_t file_size;
	int *socks;
	unsigned nsocks;
	int reader;		/* pid */
};

/* tree: an existing one, else one of `files` files is made in dir (and
   removed by op_teardown); nonblock: the sockets' O_NONBLOCK. */
int op_setup(struct op_target *t, enum bench_op op, const char *dir, const char *tree,
	     unsigned files, const char *file, unsigned qd, bool nonblock);
void op_teardown(struct op_target *t);

/* One workload, as both the library run and a raw engine see it. */
struct workload {
	enum bench_op op;
	struct op_target *target;	/* for an op */
	int fd;
	bool write;
	bool random;
	bool submit_each;
	uint64_t bs;
	uint64_t nblocks;
	unsigned qd;
	unsigned threads;
	double runtime;
	void **bufs;		/* qd buffers of bs bytes, 4096-aligned */
};

/* What a run measured.  Latency runs from queueing a request to seeing
   its completion. */
struct outcome {
	uint64_t t0, t1;
	uint64_t done;
	uint64_t bytes;		/* sendfile: what went */
	uint64_t errors;
	long first_error;	/* -errno, or -EIO for a short transfer */
	uint64_t hist[HIST_LEN];
	struct stalls stalls;
};

static inline uint64_t pick_block(const struct workload *w, uint64_t *rnd, uint64_t *next)
{
	uint64_t blk;

	if (w->random)
		return next_rand(rnd) % w->nblocks;
	blk = *next;
	if (++*next == w->nblocks)
		*next = 0;
	return blk;
}

static inline void outcome_io(struct outcome *o, long res, uint64_t bs, uint64_t lat_ns)
{
	if (res == (long)bs) {
		o->done++;
		o->hist[hist_index(lat_ns)]++;
		return;
	}
	if (!o->errors++)
		o->first_error = res < 0 ? res : -5 /* EIO */;
}

/* Set by SIGINT and SIGTERM: stop queueing, finish what is in flight. */
extern volatile sig_atomic_t bench_interrupted;

/* One finished op (for sendfile, one call): ok, or res is the error. */
static inline void outcome_op(struct outcome *o, long res, bool ok, uint64_t lat_ns)
{
	if (ok) {
		o->done++;
		o->hist[hist_index(lat_ns)]++;
		return;
	}
	if (!o->errors++)
		o->first_error = res < 0 ? res : -5 /* EIO */;
}

static inline const char *pick_path(const struct workload *w, uint64_t *rnd)
{
	return w->target->paths[next_rand(rnd) % w->target->npaths];
}

/* Raw engines: the same workload without the library.  0, or -errno with
   a message printed. */
int raw_run(const char *engine, const struct workload *w, bool async, struct outcome *o,
	    char *desc, size_t desc_len);
bool raw_engine_known(const char *engine);

#endif
