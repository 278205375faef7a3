/* SPDX-License-Identifier: MIT */
/*
 * Soak and fault injection.  Rounds of a random mix of every op on files,
 * directories and sockets (AF_UNIX pairs, and TCP connections the round
 * makes itself with afio_accept and afio_connect), with every byte that is
 * read, received or written back checked, while faults are injected:
 * random cancels, a descriptor closed and its number reused under a
 * waiting request, RLIMIT_NOFILE used up, the thread that submitted
 * requests exiting, fork() with requests in flight, queues and rings too
 * small for the load, contexts destroyed with requests in flight.
 * Pooled receives (single and multishot, waiting for a buffer or not) and
 * multishot accepts are in the mix, with the pool's buffers given back at
 * random, sometimes late, so that receives park for one.
 *
 * Each request must complete exactly once with a result that fits it, the
 * stats must balance, and afio_destroy() must return (a watchdog aborts
 * the run if it does not within WATCHDOG_S: a hang detector, not a
 * measure of speed).  At the end it prints what it ran.
 *
 * meson runs it per backend and mode for AFIO_SOAK_SECONDS (default 2);
 * AFIO_SOAK_SEED=N starts with round N (every message names its round).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "asyncfio.h"
#include "testutil.h"

static enum afio_backend target_backend;
static enum afio_mode target_mode;

#define WATCHDOG_S	60	/* a destroy or a drain that takes longer hangs */
#define NRECS		96
#define BLK		4096
#define RO_BLOCKS	16	/* prefilled with pattern(), only read */
#define RW_BLOCKS	16	/* written and read back */
#define RO_SIZE		(RO_BLOCKS * BLK)
#define FILE_SIZE	((RO_BLOCKS + RW_BLOCKS) * BLK)
#define NUNIX		3	/* AF_UNIX streams made with the round */
#define NTCP		3	/* TCP streams the round connects itself */
#define NSTREAMS	(NUNIX + NTCP)
#define NOPEN		8
#define STEPS		240
#define MAX_BUFS	4	/* a round's pool: few, so that it runs empty */

enum kind {
	K_READ, K_READV, K_DREAD, K_WRITE, K_WRITEV, K_FSYNC, K_SYNC_RANGE, K_FALLOCATE,
	K_SEND, K_SENDMSG, K_SENDFILE, K_RECV, K_RECVMSG, K_SILENT, K_TIMEOUT,
	K_OPENAT, K_CLOSE, K_STATX, K_ACCEPT, K_CONNECT, K_MKDIR, K_RENAME, K_UNLINK,
	K_PRECV, K_MACCEPT,	/* an afio_ecb each: on_shot() */
	K_COUNT,
};

static const char *const kind_names[K_COUNT] = {
	"read", "readv", "direct read", "write", "writev", "fsync", "sync_range",
	"fallocate", "send", "sendmsg", "sendfile", "recv", "recvmsg", "silent recv",
	"timeout", "openat", "close", "statx", "accept", "connect", "mkdirat",
	"renameat", "unlinkat", "pooled recv", "multishot accept",
};

enum fault {
	F_CANCEL, F_QUEUE_FULL, F_CLOSE_REUSE, F_NOFILE, F_THREAD_EXIT, F_FORK,
	F_DESTROY_BUSY, F_COUNT,
};

static const char *const fault_names[F_COUNT] = {
	"cancels", "queue full", "fd closed and reused", "RLIMIT_NOFILE used up",
	"submitting thread exited", "fork", "destroy in flight",
};

struct totals {
	unsigned long rounds, requests, bytes, faults[F_COUNT], by_kind[K_COUNT];
	unsigned long shots, parked_releases;
};

static struct totals total;

struct stream {
	int tx, rx;
	uint64_t sent, got;
	bool send_busy, recv_busy, used;
};

struct round;

struct rec {
	struct round *rd;
	uint8_t kind;
	bool busy;
	int calls;
	ssize_t res;
	afio_handle handle;
	unsigned how;		/* of a pooled recv */
	struct stream *st;
	unsigned blk;
	uint8_t gen;
	int fd;
	size_t len;
	uint64_t off;
	unsigned char *buf;	/* BLK bytes, aligned for O_DIRECT */
	struct iovec iov[2];
	struct msghdr msg;
	struct statx stx;
	char path[24], path2[24];
};

struct round {
	unsigned seed;		/* the round's, as the messages give it */
	unsigned rng;
	afio_ctx *ctx;
	struct rec recs[NRECS];
	unsigned busy, accepted, callbacks, canceled;
	bool nofile;		/* fds ran out this round: EMFILE may come */
	bool destroying;
	int file, dfile, dir, listener;
	struct sockaddr_in addr;
	struct stream streams[NSTREAMS];
	int silent[2];
	int opened[NOPEN], nopened;
	int clients[NTCP], nclients;	/* connected, their accepted end not yet seen */
	int unpaired[NTCP], nunpaired;	/* and the other way round */
	char dirpath[512];
	short rw_gen[RW_BLOCKS];	/* what the block holds: -1 unknown */
	bool rw_busy[RW_BLOCKS];
	unsigned dirs;
	unsigned pool, nbufs;	/* the round's pool */
	bool held[MAX_BUFS];	/* the test holds the buffer */
	unsigned nheld;
	bool maccept_busy;
};

static unsigned char *buffers;

/* ---- the watchdog ---- */

static pthread_mutex_t dog_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t dog_cond = PTHREAD_COND_INITIALIZER;
static const char *dog_what;
static struct timespec dog_deadline;

static void *watchdog_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&dog_lock);
	for (;;) {
		if (!dog_what) {
			pthread_cond_wait(&dog_cond, &dog_lock);
			continue;
		}
		if (pthread_cond_timedwait(&dog_cond, &dog_lock, &dog_deadline) == ETIMEDOUT &&
		    dog_what) {
			fprintf(stderr, "soak: %s did not return within %d s\n", dog_what,
				WATCHDOG_S);
			abort();
		}
	}
	return NULL;
}

static void watch(const char *what)
{
	pthread_mutex_lock(&dog_lock);
	clock_gettime(CLOCK_REALTIME, &dog_deadline);
	dog_deadline.tv_sec += WATCHDOG_S;
	dog_what = what;
	pthread_cond_signal(&dog_cond);
	pthread_mutex_unlock(&dog_lock);
}

static void unwatch(void)
{
	pthread_mutex_lock(&dog_lock);
	dog_what = NULL;
	pthread_cond_signal(&dog_cond);
	pthread_mutex_unlock(&dog_lock);
}

/* ---- data ---- */

/* Period 256, which divides RO_SIZE: a stream's byte x is the file's byte
   x % RO_SIZE, so that sendfile from the file continues a stream. */
static unsigned char pattern(uint64_t x)
{
	return (unsigned char)(x * 131 + 7);
}

static unsigned char rw_pattern(unsigned blk, uint8_t gen, size_t i)
{
	return (unsigned char)(i * 7 + gen * 13u + blk);
}

static unsigned rnd(struct round *rd, unsigned n)
{
	return (unsigned)rand_r(&rd->rng) % n;
}

static void verify(struct round *rd, const struct rec *r, const unsigned char *got, size_t n,
		   uint64_t from)
{
	size_t i = 0;

	while (i < n && got[i] == pattern(from + i))
		i++;
	ck_assert_msg(i == n, "seed %u: %s: byte %llu is %u, not %u", rd->seed,
		      kind_names[r->kind], (unsigned long long)(from + i), got[i],
		      pattern(from + i));
	total.bytes += n;
}

/* One assertion per request: each one costs Check a message. */
static void verify_block(struct round *rd, const struct rec *r, size_t n)
{
	size_t i = 0;

	while (i < n && r->buf[i] == rw_pattern(r->blk, r->gen, i))
		i++;
	ck_assert_msg(i == n, "seed %u: block %u (gen %u) byte %zu is %u", rd->seed, r->blk,
		      r->gen, i, r->buf[i]);
	total.bytes += n;
}

/* What a scattered transfer of n bytes put in r's two iovecs. */
static void verify_iov(struct round *rd, const struct rec *r, size_t n, uint64_t from)
{
	size_t first = n < r->iov[0].iov_len ? n : r->iov[0].iov_len;

	verify(rd, r, r->iov[0].iov_base, first, from);
	verify(rd, r, r->iov[1].iov_base, n - first, from + first);
}

static void fill(unsigned char *buf, size_t n, uint64_t from)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = pattern(from + i);
}

static void split_iov(struct rec *r, size_t len)
{
	size_t first = len / 2;

	r->iov[0] = (struct iovec){ r->buf, first };
	r->iov[1] = (struct iovec){ r->buf + BLK / 2, len - first };
	memset(&r->msg, 0, sizeof(r->msg));
	r->msg.msg_iov = r->iov;
	r->msg.msg_iovlen = 2;
}

/* ---- results ---- */

static bool fd_shortage(const struct round *rd, ssize_t res)
{
	return rd->nofile && (res == -EMFILE || res == -ENFILE);
}

static void keep_fd(int *list, int *n, int max, int fd)
{
	if (*n < max)
		list[(*n)++] = fd;
	else
		close(fd);
}

static void add_tcp_stream(struct round *rd, int accepted);
static void add_tcp_client(struct round *rd, int client);

static void file_done(struct round *rd, struct rec *r, ssize_t res)
{
	switch (r->kind) {
	case K_READ:
	case K_DREAD:
		ck_assert_msg(res == (ssize_t)r->len || res == -ECANCELED, "seed %u: %s: %zd",
			      rd->seed, kind_names[r->kind], res);
		if (res > 0 && r->off < RO_SIZE)
			verify(rd, r, r->buf, (size_t)res, r->off);
		else if (res > 0)
			verify_block(rd, r, (size_t)res);
		if (r->off >= RO_SIZE)
			rd->rw_busy[r->blk] = false;
		break;
	case K_READV:
		ck_assert_msg(res == (ssize_t)r->len || res == -ECANCELED, "seed %u: readv: %zd",
			      rd->seed, res);
		if (res > 0)
			verify_iov(rd, r, (size_t)res, r->off);
		break;
	case K_WRITE:
	case K_WRITEV:
		ck_assert_msg(res == BLK || res == -ECANCELED, "seed %u: %s: %zd", rd->seed,
			      kind_names[r->kind], res);
		rd->rw_gen[r->blk] = res == BLK ? r->gen : -1;
		rd->rw_busy[r->blk] = false;
		break;
	default:
		/* fsync, sync_range, fallocate: some file systems have no
		   fallocate. */
		ck_assert_msg(res == 0 || res == -ECANCELED ||
			      (r->kind == K_FALLOCATE && res == -EOPNOTSUPP),
			      "seed %u: %s: %zd", rd->seed, kind_names[r->kind], res);
		break;
	}
}

static void stream_done(struct round *rd, struct rec *r, ssize_t res)
{
	struct stream *st = r->st;
	bool sending = r->kind == K_SEND || r->kind == K_SENDMSG || r->kind == K_SENDFILE;

	ck_assert_msg(res > 0 || res == -ECANCELED || fd_shortage(rd, res),
		      "seed %u: %s: %zd", rd->seed, kind_names[r->kind], res);
	ck_assert_msg(res <= (ssize_t)r->len, "seed %u: %s: %zd of %zu", rd->seed,
		      kind_names[r->kind], res, r->len);
	if (sending) {
		if (res > 0)
			st->sent += (size_t)res;
		st->send_busy = false;
		return;
	}
	if (res > 0 && r->kind == K_RECV)
		verify(rd, r, r->buf, (size_t)res, st->got);
	if (res > 0 && r->kind == K_RECVMSG)
		verify_iov(rd, r, (size_t)res, st->got);
	if (res > 0)
		st->got += (size_t)res;
	st->recv_busy = false;
}

static int issue_chained(struct round *rd, struct rec *from, enum kind kind);

static void path_done(struct round *rd, struct rec *r, ssize_t res)
{
	ck_assert_msg(res == 0 || res == -ECANCELED, "seed %u: %s %s: %zd", rd->seed,
		      kind_names[r->kind], r->path, res);
	if (r->kind == K_UNLINK)
		return;
	/* mkdirat, then renameat, then unlinkat; what cannot be queued now
	   (a full queue, a context going away) is done here. */
	if (res == 0 && !issue_chained(rd, r, r->kind == K_MKDIR ? K_RENAME : K_UNLINK))
		return;
	if (unlinkat(rd->dir, res == 0 && r->kind == K_RENAME ? r->path2 : r->path,
		     AT_REMOVEDIR))
		ck_assert_msg(errno == ENOENT, "seed %u: rmdir: %s", rd->seed, strerror(errno));
}

static void other_done(struct round *rd, struct rec *r, ssize_t res)
{
	switch (r->kind) {
	case K_SILENT:
		/* The fd reused, or the peer closed with the pair replaced. */
		ck_assert_msg(res == -ECANCELED || res == -ENOTSOCK || res == -EBADF || res == 0 ||
			      fd_shortage(rd, res), "seed %u: silent recv: %zd", rd->seed, res);
		break;
	case K_TIMEOUT:
		ck_assert_msg(res == -ETIME || res == -ECANCELED, "seed %u: timeout: %zd",
			      rd->seed, res);
		break;
	case K_OPENAT:
		ck_assert_msg(res >= 0 || res == -ECANCELED || fd_shortage(rd, res),
			      "seed %u: openat: %zd", rd->seed, res);
		if (res >= 0)
			keep_fd(rd->opened, &rd->nopened, NOPEN, (int)res);
		break;
	case K_CLOSE:
		ck_assert_msg(res == 0 || res == -ECANCELED, "seed %u: close: %zd", rd->seed, res);
		if (res == -ECANCELED)
			close(r->fd);
		break;
	case K_STATX:
		ck_assert_msg(res == 0 || res == -ECANCELED, "seed %u: statx: %zd", rd->seed, res);
		if (!res)
			ck_assert_uint_eq(r->stx.stx_size, FILE_SIZE);
		break;
	case K_ACCEPT:
		ck_assert_msg(res >= 0 || res == -ECANCELED || fd_shortage(rd, res),
			      "seed %u: accept: %zd", rd->seed, res);
		if (res >= 0)
			add_tcp_stream(rd, (int)res);
		break;
	case K_CONNECT:
		ck_assert_msg(res == 0 || res == -ECANCELED, "seed %u: connect: %zd", rd->seed, res);
		if (res == 0)
			add_tcp_client(rd, r->fd);
		else
			close(r->fd);
		break;
	default:
		path_done(rd, r, res);
		break;
	}
}

/* The bytes a request with a length asked for, or -1 for one without. */
static ssize_t asked_len(const struct rec *r)
{
	switch (r->kind) {
	case K_READ: case K_READV: case K_DREAD: case K_WRITE: case K_WRITEV:
	case K_SEND: case K_SENDMSG: case K_SENDFILE: case K_RECV: case K_RECVMSG:
		return (ssize_t)r->len;
	case K_SILENT:
		return 1;
	default:
		return -1;
	}
}

/* The last completion of a request. */
static void count_done(struct round *rd, struct rec *r, ssize_t res)
{
	r->busy = false;
	r->res = res;
	rd->busy--;
	rd->callbacks++;
	if (res == -ECANCELED)
		rd->canceled++;
}

static void on_done(void *data, ssize_t res)
{
	struct rec *r = data;
	struct round *rd = r->rd;

	r->calls++;
	ck_assert_msg(r->calls == 1 && r->busy, "seed %u: %s completed %d times (res %zd)",
		      rd->seed, kind_names[r->kind], r->calls, res);
	ck_assert_msg(asked_len(r) < 0 || res <= asked_len(r), "seed %u: %s: %zd of %zd",
		      rd->seed, kind_names[r->kind], res, asked_len(r));
	count_done(rd, r, res);
	/* With no fd left, any request may fail for want of one (the pool
	   of another backend cannot start, say): it did nothing, as if
	   canceled. */
	if (fd_shortage(rd, res))
		res = -ECANCELED;
	if (r->kind <= K_FALLOCATE)
		file_done(rd, r, res);
	else if (r->kind <= K_RECVMSG)
		stream_done(rd, r, res);
	else
		other_done(rd, r, res);
}

/* ---- pooled receives and multishot accepts ---- */

static void release_buf(struct round *rd, unsigned id)
{
	ck_assert_msg(afio_buf_release(rd->ctx, rd->pool, id) == 0,
		      "seed %u: buffer %u held, not given back", rd->seed, id);
	rd->held[id] = false;
	rd->nheld--;
}

/* A buffer the test holds goes back, and a parked receive may take it. */
static void release_some(struct round *rd)
{
	for (unsigned i = 0, at = rnd(rd, rd->nbufs); i < rd->nbufs; i++) {
		unsigned id = (at + i) % rd->nbufs;

		if (!rd->held[id])
			continue;
		if (rd->nheld == rd->nbufs)
			total.parked_releases++;
		release_buf(rd, id);
		return;
	}
}

/* The buffer a completion names is the test's from now on: given back at
   once or some steps later, or held at afio_destroy(). */
static void take_buffer(struct round *rd, struct rec *r, ssize_t res, unsigned flags)
{
	unsigned id = afio_cqe_buf(flags);

	ck_assert_msg(res > 0 && id < rd->nbufs, "seed %u: pooled recv: %zd in buffer %u of %u",
		      rd->seed, res, id, rd->nbufs);
	ck_assert_msg(!rd->held[id], "seed %u: buffer %u handed out twice", rd->seed, id);
	verify(rd, r, afio_buf(rd->ctx, rd->pool, id), (size_t)res, r->st->got);
	r->st->got += (size_t)res;
	rd->held[id] = true;
	rd->nheld++;
	if (!rd->destroying && !rnd(rd, 3))
		release_buf(rd, id);
}

static void precv_done(struct round *rd, struct rec *r, ssize_t res)
{
	ck_assert_msg(res > 0 || res == -ECANCELED || fd_shortage(rd, res) ||
		      (res == -ENOBUFS && (r->how & AFIO_RECV_BUF_NOWAIT)),
		      "seed %u: pooled recv (how %u): %zd", rd->seed, r->how, res);
	r->st->recv_busy = false;
}

static void maccept_done(struct round *rd, ssize_t res)
{
	ck_assert_msg(res >= 0 || res == -ECANCELED || fd_shortage(rd, res),
		      "seed %u: multishot accept: %zd", rd->seed, res);
	rd->maccept_busy = false;
}

/* Every completion of a request whose callback is an afio_ecb: those
   with AFIO_CQE_MORE, then exactly one without, then none. */
static void on_shot(void *data, ssize_t res, unsigned flags)
{
	struct rec *r = data;
	struct round *rd = r->rd;
	bool more = flags & AFIO_CQE_MORE;

	ck_assert_msg(r->busy && !r->calls, "seed %u: %s: a completion after the last (res %zd)",
		      rd->seed, kind_names[r->kind], res);
	ck_assert_msg(!more || r->kind == K_MACCEPT || (r->how & AFIO_RECV_MULTISHOT),
		      "seed %u: pooled recv: more to come of a single shot", rd->seed);
	total.shots++;
	if (flags & AFIO_CQE_BUFFER)
		take_buffer(rd, r, res, flags);
	else
		ck_assert_msg(r->kind != K_PRECV || res <= 0,
			      "seed %u: pooled recv: %zd bytes in no buffer", rd->seed, res);
	if (r->kind == K_MACCEPT && res >= 0)
		add_tcp_stream(rd, (int)res);
	if (more) {
		ck_assert_msg(res >= 0, "seed %u: %s: %zd with more to come", rd->seed,
			      kind_names[r->kind], res);
		return;
	}
	r->calls++;
	count_done(rd, r, res);
	if (r->kind == K_PRECV)
		precv_done(rd, r, res);
	else
		maccept_done(rd, res);
}

static void make_pool(struct round *rd)
{
	size_t size = rnd(rd, 2) ? 1 + rnd(rd, 64) : 1 + rnd(rd, BLK);

	rd->nbufs = 1 + rnd(rd, MAX_BUFS);
	ck_assert_int_eq(afio_bufpool_create(rd->ctx, rd->nbufs, size, &rd->pool), 0);
}

/* Before a destroy with nothing in flight: the library holds no buffer
   the test does not; some of the test's stay held through the destroy. */
static void check_buffers(struct round *rd)
{
	for (unsigned id = 0; id < rd->nbufs; id++) {
		if (rd->held[id] && rnd(rd, 2))
			release_buf(rd, id);
		else if (!rd->held[id])
			ck_assert_msg(afio_buf_release(rd->ctx, rd->pool, id) == -EALREADY,
				      "seed %u: buffer %u given to nobody", rd->seed, id);
	}
}

/* ---- issuing ---- */

static struct rec *free_rec(struct round *rd)
{
	for (unsigned i = 0, at = rnd(rd, NRECS); i < NRECS; i++) {
		struct rec *r = &rd->recs[(at + i) % NRECS];

		if (!r->busy)
			return r;
	}
	return NULL;
}

static struct stream *pick_stream(struct round *rd, bool sending)
{
	for (unsigned i = 0, at = rnd(rd, NSTREAMS); i < NSTREAMS; i++) {
		struct stream *st = &rd->streams[(at + i) % NSTREAMS];

		if (st->used && !(sending ? st->send_busy : st->recv_busy))
			return st;
	}
	return NULL;
}

static int pick_rw_block(struct round *rd, bool want_known)
{
	for (unsigned i = 0, at = rnd(rd, RW_BLOCKS); i < RW_BLOCKS; i++) {
		unsigned b = (at + i) % RW_BLOCKS;

		if (!rd->rw_busy[b] && (!want_known || rd->rw_gen[b] >= 0))
			return (int)b;
	}
	return -1;
}

static int issue_read(struct round *rd, struct rec *r)
{
	int b = rnd(rd, 2) ? pick_rw_block(rd, true) : -1, ret;

	if (r->kind == K_DREAD) {
		r->off = (uint64_t)rnd(rd, RO_BLOCKS) * BLK;
		r->len = BLK;
		return afio_read(rd->ctx, rd->dfile, r->buf, r->len, r->off, on_done, r);
	}
	if (b >= 0 && r->kind == K_READ) {
		r->blk = (unsigned)b;
		r->gen = (uint8_t)rd->rw_gen[b];
		r->off = RO_SIZE + (uint64_t)b * BLK;
		r->len = BLK;
		ret = afio_read(rd->ctx, rd->file, r->buf, r->len, r->off, on_done, r);
		/* Held until read: a write to the block meanwhile would race. */
		rd->rw_busy[b] = !ret;
		return ret;
	}
	r->off = rnd(rd, RO_SIZE - BLK);
	r->len = 1 + rnd(rd, BLK);
	if (r->kind == K_READ)
		return afio_read(rd->ctx, rd->file, r->buf, r->len, r->off, on_done, r);
	split_iov(r, r->len);
	return afio_readv(rd->ctx, rd->file, r->iov, 2, r->off, on_done, r);
}

static int issue_write(struct round *rd, struct rec *r)
{
	int b = pick_rw_block(rd, false), ret;
	static uint8_t gens;

	if (b < 0)
		return -EBUSY;
	r->blk = (unsigned)b;
	r->gen = ++gens;
	r->off = RO_SIZE + (uint64_t)b * BLK;
	r->len = BLK;
	for (size_t i = 0; i < BLK; i++)
		r->buf[i] = rw_pattern(r->blk, r->gen, i);
	if (r->kind == K_WRITE) {
		ret = afio_write(rd->ctx, rd->file, r->buf, BLK, r->off, on_done, r);
	} else {
		r->iov[0] = (struct iovec){ r->buf, BLK / 2 };
		r->iov[1] = (struct iovec){ r->buf + BLK / 2, BLK / 2 };
		ret = afio_writev(rd->ctx, rd->file, r->iov, 2, r->off, on_done, r);
	}
	if (!ret)
		rd->rw_busy[b] = true;
	return ret;
}

static int issue_send(struct round *rd, struct rec *r)
{
	struct stream *st = pick_stream(rd, true);
	int ret;

	if (!st)
		return -EBUSY;
	r->st = st;
	r->len = 1 + rnd(rd, BLK);
	if (r->kind == K_SENDFILE) {
		r->off = st->sent % RO_SIZE;
		if (r->len > RO_SIZE - r->off)
			r->len = RO_SIZE - r->off;
		ret = afio_sendfile(rd->ctx, st->tx, rd->file, r->off, r->len, on_done, r);
	} else if (r->kind == K_SEND) {
		fill(r->buf, r->len, st->sent);
		ret = afio_send(rd->ctx, st->tx, r->buf, r->len, 0, on_done, r);
	} else {
		split_iov(r, r->len);
		fill(r->iov[0].iov_base, r->iov[0].iov_len, st->sent);
		fill(r->iov[1].iov_base, r->iov[1].iov_len, st->sent + r->iov[0].iov_len);
		ret = afio_sendmsg(rd->ctx, st->tx, &r->msg, 0, on_done, r);
	}
	if (!ret)
		st->send_busy = true;
	return ret;
}

static int issue_recv(struct round *rd, struct rec *r)
{
	struct stream *st = pick_stream(rd, false);
	int ret;

	if (!st)
		return -EBUSY;
	r->st = st;
	r->len = 1 + rnd(rd, BLK);
	if (r->kind == K_RECV) {
		ret = afio_recv(rd->ctx, st->rx, r->buf, r->len, 0, on_done, r);
	} else if (r->kind == K_PRECV) {
		r->how = (rnd(rd, 2) ? AFIO_RECV_MULTISHOT : 0) |
			 (rnd(rd, 4) ? 0 : AFIO_RECV_BUF_NOWAIT);
		ret = afio_recv_pooled(rd->ctx, st->rx, rd->pool, 0, r->how, on_shot, r);
	} else {
		split_iov(r, r->len);
		ret = afio_recvmsg(rd->ctx, st->rx, &r->msg, 0, on_done, r);
	}
	if (!ret)
		st->recv_busy = true;
	return ret;
}

/* One at a time: it takes every connection that comes. */
static int issue_maccept(struct round *rd, struct rec *r)
{
	int ret;

	if (rd->maccept_busy)
		return -EBUSY;
	ret = afio_accept_multishot(rd->ctx, rd->listener, SOCK_CLOEXEC, on_shot, r);
	if (!ret)
		rd->maccept_busy = true;
	return ret;
}

static int issue_connect(struct round *rd, struct rec *r)
{
	int ret;

	if (rd->nclients >= NTCP)
		return -EBUSY;
	r->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (r->fd < 0)
		return -errno;
	ret = afio_connect(rd->ctx, r->fd, (struct sockaddr *)&rd->addr, sizeof(rd->addr),
			   on_done, r);
	if (ret)
		close(r->fd);
	return ret;
}

static int issue_path(struct round *rd, struct rec *r)
{
	int ret;

	switch (r->kind) {
	case K_OPENAT:
		return afio_openat(rd->ctx, rd->dir, "data", O_RDONLY | O_CLOEXEC, 0, on_done, r);
	case K_CLOSE:
		if (!rd->nopened)
			return -EBUSY;
		/* Off the list only once the close is queued: one refused
		   (a full queue) leaves the fd to close_all(). */
		r->fd = rd->opened[rd->nopened - 1];
		ret = afio_close(rd->ctx, r->fd, on_done, r);
		if (!ret)
			rd->nopened--;
		return ret;
	case K_STATX:
		return afio_statx(rd->ctx, rd->dir, "data", 0, STATX_SIZE, &r->stx, on_done, r);
	default:
		snprintf(r->path, sizeof(r->path), "d%u", rd->dirs++);
		return afio_mkdirat(rd->ctx, rd->dir, r->path, 0700, on_done, r);
	}
}

static int issue_kind(struct round *rd, struct rec *r)
{
	switch (r->kind) {
	case K_READ:
	case K_READV:
	case K_DREAD:
		return issue_read(rd, r);
	case K_WRITE:
	case K_WRITEV:
		return issue_write(rd, r);
	case K_FSYNC:
		return afio_fsync(rd->ctx, rd->file, rnd(rd, 2) ? AFIO_FSYNC_DATASYNC : 0,
				  on_done, r);
	case K_SYNC_RANGE:
		return afio_sync_range(rd->ctx, rd->file, RO_SIZE, RW_BLOCKS * BLK,
				       SYNC_FILE_RANGE_WRITE, on_done, r);
	case K_FALLOCATE:
		return afio_fallocate(rd->ctx, rd->file, 0, 0, FILE_SIZE, on_done, r);
	case K_SEND:
	case K_SENDMSG:
	case K_SENDFILE:
		return issue_send(rd, r);
	case K_RECV:
	case K_RECVMSG:
	case K_PRECV:
		return issue_recv(rd, r);
	case K_SILENT:
		return afio_recv(rd->ctx, rd->silent[0], r->buf, 1, 0, on_done, r);
	case K_TIMEOUT:
		return afio_timeout(rd->ctx, rnd(rd, 2000000), on_done, r);
	case K_ACCEPT:
		return afio_accept(rd->ctx, rd->listener, SOCK_CLOEXEC, on_done, r);
	case K_CONNECT:
		return issue_connect(rd, r);
	case K_MACCEPT:
		return issue_maccept(rd, r);
	default:
		return issue_path(rd, r);
	}
}

static void count_accepted(struct round *rd, struct rec *r, enum kind kind)
{
	r->handle = afio_last_handle(rd->ctx);
	rd->busy++;
	rd->accepted++;
	total.requests++;
	total.by_kind[kind]++;
}

/* 0 when queued, -EAGAIN when the queue is full, another -errno when
   there was nothing to do it on. */
static int issue(struct round *rd, enum kind kind)
{
	struct rec *r = free_rec(rd);
	int ret;

	if (r && kind == K_DREAD && rd->dfile < 0)
		kind = K_READ;
	if (!r)
		return -EAGAIN;
	r->kind = (uint8_t)kind;
	r->rd = rd;
	r->calls = 0;
	r->busy = true;
	ret = issue_kind(rd, r);
	if (ret) {
		r->busy = false;
		ck_assert_msg(ret == -EAGAIN || ret == -EBUSY || fd_shortage(rd, ret) ||
			      (ret == -ESHUTDOWN && rd->destroying),
			      "seed %u: queueing %s: %d", rd->seed, kind_names[kind], ret);
		return ret;
	}
	count_accepted(rd, r, kind);
	return 0;
}

static int issue_chained(struct round *rd, struct rec *from, enum kind kind)
{
	struct rec *r = free_rec(rd);
	int ret;

	if (!r || rd->destroying)
		return -EAGAIN;
	r->kind = (uint8_t)kind;
	r->rd = rd;
	r->calls = 0;
	r->busy = true;
	memcpy(r->path, from->path, sizeof(r->path));
	if (kind == K_RENAME) {
		snprintf(r->path2, sizeof(r->path2), "e%s", from->path + 1);
		ret = afio_renameat(rd->ctx, rd->dir, r->path, rd->dir, r->path2, 0, on_done, r);
	} else {
		memcpy(r->path, from->path2, sizeof(r->path));
		ret = afio_unlinkat(rd->ctx, rd->dir, r->path, AT_REMOVEDIR, on_done, r);
	}
	if (ret) {
		r->busy = false;
		return ret;
	}
	count_accepted(rd, r, kind);
	return 0;
}

/* ---- setting up a round ---- */

static void add_stream(struct round *rd, int tx, int rx)
{
	for (int i = 0; i < NSTREAMS; i++) {
		struct stream *st = &rd->streams[i];

		if (!st->used) {
			*st = (struct stream){ .tx = tx, .rx = rx, .used = true };
			return;
		}
	}
	close(tx);
	close(rx);
}

static unsigned short local_port(int fd, bool peer)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);

	if ((peer ? getpeername : getsockname)(fd, (struct sockaddr *)&a, &len))
		return 0;
	return ntohs(a.sin_port);
}

/* The two ends of a TCP connection, found by port whichever completes
   first: its client sends, the accepted end receives. */
static bool pair_tcp(struct round *rd, int *list, int *n, int fd, bool fd_accepted)
{
	unsigned short port = local_port(fd, fd_accepted);

	for (int i = 0; i < *n; i++) {
		if (local_port(list[i], !fd_accepted) != port)
			continue;
		if (fd_accepted)
			add_stream(rd, list[i], fd);
		else
			add_stream(rd, fd, list[i]);
		list[i] = list[--*n];
		return true;
	}
	return false;
}

static void add_tcp_stream(struct round *rd, int accepted)
{
	if (!pair_tcp(rd, rd->clients, &rd->nclients, accepted, true))
		keep_fd(rd->unpaired, &rd->nunpaired, NTCP, accepted);
}

static void add_tcp_client(struct round *rd, int client)
{
	if (!pair_tcp(rd, rd->unpaired, &rd->nunpaired, client, false))
		keep_fd(rd->clients, &rd->nclients, NTCP, client);
}

static void make_files(struct round *rd)
{
	const char *base = getenv("AFIO_TEST_DIR");

	/* Not the current directory: a round that fails leaves its own. */
	if (!base || !*base)
		base = getenv("TMPDIR");
	snprintf(rd->dirpath, sizeof(rd->dirpath), "%s/soak-XXXXXX", base && *base ? base : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(rd->dirpath));
	rd->dir = open(rd->dirpath, O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(rd->dir, 0);
	rd->file = openat(rd->dir, "data", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	ck_assert_int_ge(rd->file, 0);
	for (uint64_t off = 0; off < RO_SIZE; off += BLK) {
		fill(buffers, BLK, off);
		ck_assert_int_eq(pwrite(rd->file, buffers, BLK, (off_t)off), BLK);
	}
	ck_assert_int_eq(ftruncate(rd->file, FILE_SIZE), 0);
	ck_assert_int_eq(fsync(rd->file), 0);
	/* Where the file system has direct I/O: libaio's kernel path. */
	rd->dfile = openat(rd->dir, "data", O_RDONLY | O_DIRECT | O_CLOEXEC);
	for (int i = 0; i < RW_BLOCKS; i++)
		rd->rw_gen[i] = -1;
}

static void make_sockets(struct round *rd)
{
	socklen_t len = sizeof(rd->addr);
	int sv[2];

	for (int i = 0; i < NUNIX; i++) {
		tu_socketpair(sv);
		add_stream(rd, sv[0], sv[1]);
	}
	tu_socketpair(rd->silent);
	rd->listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(rd->listener, 0);
	rd->addr = (struct sockaddr_in){ .sin_family = AF_INET,
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	ck_assert_int_eq(bind(rd->listener, (struct sockaddr *)&rd->addr, sizeof(rd->addr)), 0);
	ck_assert_int_eq(listen(rd->listener, 16), 0);
	ck_assert_int_eq(getsockname(rd->listener, (struct sockaddr *)&rd->addr, &len), 0);
}

static afio_ctx *make_ctx(struct round *rd)
{
	static const unsigned entries[] = { 8, 16, 32, 64 }, rings[] = { 0, 2, 4, 8 };
	struct afio_config cfg;

	afio_config_init(&cfg);
	cfg.backend = target_backend;
	cfg.mode = target_mode;
	cfg.entries = entries[rnd(rd, 4)];
	cfg.ring_entries = rings[rnd(rd, 4)];
	cfg.threads = 1 + rnd(rd, 4);
	return tu_create(&cfg);
}

static void remove_tree(struct round *rd)
{
	char name[24];

	for (unsigned i = 0; i < rd->dirs; i++) {
		snprintf(name, sizeof(name), "d%u", i);
		unlinkat(rd->dir, name, AT_REMOVEDIR);
		snprintf(name, sizeof(name), "e%u", i);
		unlinkat(rd->dir, name, AT_REMOVEDIR);
	}
	ck_assert_int_eq(unlinkat(rd->dir, "data", 0), 0);
}

static void close_all(struct round *rd)
{
	for (int i = 0; i < NSTREAMS; i++) {
		if (rd->streams[i].used) {
			close(rd->streams[i].tx);
			close(rd->streams[i].rx);
		}
	}
	while (rd->nopened)
		close(rd->opened[--rd->nopened]);
	while (rd->nclients)
		close(rd->clients[--rd->nclients]);
	while (rd->nunpaired)
		close(rd->unpaired[--rd->nunpaired]);
	close(rd->silent[0]);
	close(rd->silent[1]);
	close(rd->listener);
	close(rd->file);
	if (rd->dfile >= 0)
		close(rd->dfile);
	remove_tree(rd);
	close(rd->dir);
	ck_assert_int_eq(rmdir(rd->dirpath), 0);
}

/* ---- faults ---- */

static void cancel_some(struct round *rd)
{
	struct rec *r = &rd->recs[rnd(rd, NRECS)];
	int ret;

	if (!r->busy || r->kind == K_CLOSE)
		return;
	if (rnd(rd, 2)) {
		/* Busy: its last callback has not run, so its slot is its own. */
		ret = afio_cancel_handle(rd->ctx, r->handle);
		ck_assert_msg(ret == 0 || ret == -EALREADY, "seed %u: afio_cancel_handle of %s: %d",
			      rd->seed, kind_names[r->kind], ret);
	} else {
		ret = afio_cancel(rd->ctx, r);
		ck_assert_msg(ret == 1 || ret == -ENOENT, "seed %u: afio_cancel: %d", rd->seed, ret);
	}
	total.faults[F_CANCEL]++;
}

/* A full queue that does not drain: the slots may all be held by
   requests that wait for a peer (and in ASYNC a pool worker each). */
static void cancel_waiter(struct round *rd)
{
	for (unsigned i = 0, at = rnd(rd, NRECS); i < NRECS; i++) {
		struct rec *r = &rd->recs[(at + i) % NRECS];

		if (r->busy && (r->kind == K_RECV || r->kind == K_RECVMSG ||
				r->kind == K_SILENT || r->kind == K_ACCEPT || r->kind == K_PRECV ||
				r->kind == K_MACCEPT)) {
			afio_cancel(rd->ctx, r);
			total.faults[F_CANCEL]++;
			return;
		}
	}
}

/* Polls until the round has at most `left` requests busy; fails when
   nothing completes for WATCHDOG_S. */
static void drain_to(struct round *rd, unsigned left)
{
	unsigned seen = rd->callbacks;
	int idle_ms = 0;

	while (rd->busy > left) {
		ck_assert_int_ge(afio_poll(rd->ctx, 1, 100), 0);
		if (rd->callbacks != seen) {
			seen = rd->callbacks;
			idle_ms = 0;
			continue;
		}
		idle_ms += 100;
		for (int i = 0; idle_ms >= WATCHDOG_S * 1000 && i < NRECS; i++)
			ck_assert_msg(!rd->recs[i].busy, "seed %u: %s still waits after %d s",
				      rd->seed, kind_names[rd->recs[i].kind], WATCHDOG_S);
	}
}

/* A recv waits on the silent socket; the fd is closed and its number
   taken by the data file; the recv is canceled and must complete. */
static void close_and_reuse(struct round *rd)
{
	struct rec *r;

	/* The others on it first: a request may use the number, not the
	   socket, until it is bound (asyncfio(7)), and the number must not be
	   reused while one might. */
	for (int i = 0; i < NRECS; i++)
		if (rd->recs[i].busy && rd->recs[i].kind == K_SILENT)
			afio_cancel(rd->ctx, &rd->recs[i]);
	for (int i = 0; i < NRECS; i++)
		while (rd->recs[i].busy && rd->recs[i].kind == K_SILENT)
			drain_to(rd, rd->busy - 1);
	if (issue(rd, K_SILENT))
		return;
	r = NULL;
	for (int i = 0; i < NRECS && !r; i++)
		if (rd->recs[i].busy && rd->recs[i].kind == K_SILENT)
			r = &rd->recs[i];
	ck_assert_int_ge(afio_submit(rd->ctx), 0);
	ck_assert_int_eq(dup2(rd->file, rd->silent[0]), rd->silent[0]);
	afio_cancel(rd->ctx, r);
	while (r->busy)
		drain_to(rd, rd->busy - 1);
	close(rd->silent[0]);
	close(rd->silent[1]);
	tu_socketpair(rd->silent);
	total.faults[F_CLOSE_REUSE]++;
}

static void run_steps(struct round *rd, unsigned steps);

/* Every fd number below the limit taken, for some steps. */
static void without_fds(struct round *rd)
{
	struct rlimit old, rl;
	int fds[256], n = 0, fd;

	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
	rl = old;
	rl.rlim_cur = (rlim_t)fcntl(0, F_DUPFD, 0);
	if ((int)rl.rlim_cur >= 0)
		close((int)rl.rlim_cur);
	rl.rlim_cur += 8;
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	while (n < 256 && (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
		fds[n++] = fd;
	rd->nofile = true;
	run_steps(rd, 40);
	while (n)
		close(fds[--n]);
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
	total.faults[F_NOFILE]++;
}

static void issue_random(struct round *rd);

static void *exiting_thread(void *arg)
{
	struct round *rd = arg;

	for (int i = 0; i < 6; i++)
		issue_random(rd);
	(void)issue(rd, K_RECV);
	(void)issue(rd, K_TIMEOUT);
	ck_assert_int_ge(afio_submit(rd->ctx), 0);
	return NULL;
}

/* Another thread takes the context (the one thread that uses it then),
   queues and submits, and exits with the requests in flight. */
static void thread_exits(struct round *rd)
{
	pthread_t t;

	ck_assert_int_eq(pthread_create(&t, NULL, exiting_thread, rd), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	total.faults[F_THREAD_EXIT]++;
}

/* In the child the context is the parent's: every call fails at once.
   Under AddressSanitizer the child makes no call that frees memory: its
   allocator may have been locked by another thread at the fork (and
   ThreadSanitizer follows what a child does no better). */
static void fork_in_flight(struct round *rd)
{
	int status;
	pid_t pid;

	ck_assert_int_ge(afio_submit(rd->ctx), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		bool ok = afio_poll(rd->ctx, 0, 0) == -ECHILD && afio_submit(rd->ctx) == -ECHILD &&
			  afio_cancel(rd->ctx, NULL) == -ECHILD;
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
		afio_destroy(rd->ctx);
#endif
		_exit(ok ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && !WEXITSTATUS(status), "seed %u: child of fork: %d",
		      rd->seed, status);
	total.faults[F_FORK]++;
}

/* ---- a round ---- */

static const enum kind mix[] = {
	K_READ, K_READ, K_READ, K_READV, K_DREAD, K_WRITE, K_WRITE, K_WRITEV, K_FSYNC,
	K_SYNC_RANGE, K_FALLOCATE, K_SEND, K_SEND, K_SENDMSG, K_SENDFILE, K_RECV, K_RECV,
	K_RECVMSG, K_SILENT, K_TIMEOUT, K_TIMEOUT, K_OPENAT, K_CLOSE, K_STATX, K_ACCEPT,
	K_CONNECT, K_MKDIR, K_PRECV, K_PRECV, K_PRECV, K_MACCEPT,
};

static void issue_random(struct round *rd)
{
	enum kind kind = mix[rnd(rd, sizeof(mix) / sizeof(mix[0]))];

	if (kind == K_SILENT && rnd(rd, 4))
		return;
	if (issue(rd, kind) == -EAGAIN) {
		total.faults[F_QUEUE_FULL]++;
		if (!afio_poll(rd->ctx, 1, 1))
			cancel_waiter(rd);
	}
}

static void run_steps(struct round *rd, unsigned steps)
{
	for (unsigned i = 0; i < steps; i++) {
		unsigned what = rnd(rd, 100);

		if (what < 60)
			issue_random(rd);
		else if (what < 64)
			release_some(rd);
		else if (what < 70)
			cancel_some(rd);
		else if (what < 80)
			ck_assert_int_ge(afio_submit(rd->ctx), 0);
		else
			ck_assert_int_ge(afio_poll(rd->ctx, 0, what < 95 ? 0 : 1), 0);
	}
}

/* The silent recv and whatever waits on a stream nobody sends on end
   only by a cancel. */
static void cancel_all(struct round *rd)
{
	for (int i = 0; i < NRECS; i++)
		if (rd->recs[i].busy && rd->recs[i].kind != K_CLOSE)
			afio_cancel(rd->ctx, &rd->recs[i]);
}

static void check_stats(struct round *rd)
{
	struct afio_stats st;

	ck_assert_int_eq(afio_stats(rd->ctx, &st), 0);
	ck_assert_msg(st.submitted == rd->accepted && st.completed == rd->callbacks &&
		      st.in_flight == rd->busy && st.canceled == rd->canceled,
		      "seed %u: stats %llu submitted, %llu completed, %llu in flight, %llu "
		      "canceled; callbacks saw %u, %u, %u, %u", rd->seed,
		      (unsigned long long)st.submitted, (unsigned long long)st.completed,
		      (unsigned long long)st.in_flight, (unsigned long long)st.canceled,
		      rd->accepted, rd->callbacks, rd->busy, rd->canceled);
}

static void end_round(struct round *rd, bool destroy_busy)
{
	if (!destroy_busy) {
		cancel_all(rd);
		drain_to(rd, 0);
		check_stats(rd);
		check_buffers(rd);
	} else {
		check_stats(rd);
		total.faults[F_DESTROY_BUSY]++;
	}
	rd->destroying = true;
	watch("afio_destroy()");
	afio_destroy(rd->ctx);
	unwatch();
	for (int i = 0; i < NRECS; i++)
		ck_assert_msg(!rd->recs[i].busy, "seed %u: %s not completed by afio_destroy()",
			      rd->seed, kind_names[rd->recs[i].kind]);
	ck_assert_uint_eq(rd->callbacks, rd->accepted);
}

/* Rounds go by seed, one after the other, so that each fault is forced
   once every F_COUNT rounds, and a round is repeated by its seed alone. */
static void run_round(unsigned seed)
{
	struct round *rd = calloc(1, sizeof(*rd));
	enum fault forced = (enum fault)(seed % F_COUNT);
	unsigned at;

	ck_assert_ptr_nonnull(rd);
	rd->seed = seed;
	rd->rng = seed;
	for (int i = 0; i < NRECS; i++)
		rd->recs[i].buf = buffers + (size_t)(i + 1) * BLK;
	make_files(rd);
	make_sockets(rd);
	rd->ctx = make_ctx(rd);
	make_pool(rd);
	at = rnd(rd, STEPS);
	run_steps(rd, at);
	/* Each fault comes once every F_COUNT rounds at least. */
	if (forced == F_CLOSE_REUSE || !rnd(rd, 3))
		close_and_reuse(rd);
	if (forced == F_NOFILE || !rnd(rd, 8))
		without_fds(rd);
	if (forced == F_THREAD_EXIT || !rnd(rd, 4))
		thread_exits(rd);
	if (forced == F_FORK || !rnd(rd, 8))
		fork_in_flight(rd);
	run_steps(rd, STEPS - at);
	end_round(rd, forced == F_DESTROY_BUSY || !rnd(rd, 4));
	close_all(rd);
	free(rd);
	total.rounds++;
}

static double seconds_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

static void report(unsigned seed, double secs)
{
	printf("soak %s/%s: seed %u, %.1f s, %lu rounds, %lu requests, %lu bytes verified\n",
	       afio_backend_name(target_backend), afio_mode_name(target_mode), seed, secs,
	       total.rounds, total.requests, total.bytes);
	printf("  faults:");
	for (int f = 0; f < F_COUNT; f++)
		printf("%s %s %lu", f ? "," : "", fault_names[f], total.faults[f]);
	printf("\n  ops:");
	for (int k = 0; k < K_COUNT; k++)
		printf("%s %s %lu", k ? "," : "", kind_names[k], total.by_kind[k]);
	printf("\n  pools: %lu completions of pooled receives and multishot accepts, %lu buffers "
	       "given back to an empty pool\n", total.shots, total.parked_releases);
	fflush(stdout);
}

static double soak_seconds(void)
{
	const char *v = getenv("AFIO_SOAK_SECONDS");

	return v && *v ? strtod(v, NULL) : 2.0;
}

START_TEST(test_soak)
{
	const char *v = getenv("AFIO_SOAK_SEED");
	unsigned seed = v && *v ? (unsigned)strtoul(v, NULL, 10) : (unsigned)time(NULL);
	double limit = soak_seconds();
	struct timespec t0;
	int fds, fds_after_first = 0;
	pthread_t dog;

	ck_assert_int_eq(posix_memalign((void **)&buffers, BLK, (size_t)(NRECS + 1) * BLK), 0);
	ck_assert_int_eq(pthread_create(&dog, NULL, watchdog_main, NULL), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned no = 0; no < F_COUNT || seconds_since(&t0) < limit; no++) {
		run_round(seed + no);
		/* Each round closes all it opened, and a destroyed context
		   holds nothing: one fd more after any round is a leak, the
		   test's or the library's.  Counted from the end of the first
		   round, so that what a runtime opens once does not count. */
		fds = tu_count_fds();
		if (!no)
			fds_after_first = fds;
		ck_assert_msg(fds <= fds_after_first, "seed %u: %d fds open after the round, "
			      "%d after the first", seed + no, fds, fds_after_first);
	}
	report(seed, seconds_since(&t0));
	for (int f = 0; f < F_COUNT; f++)
		ck_assert_uint_gt(total.faults[f] + (f == F_QUEUE_FULL || f == F_CANCEL), 0);
	free(buffers);
}
END_TEST

int main(int argc, char **argv)
{
	Suite *s;
	TCase *tc;
	int ret;

	ret = tu_parse_target(argc, argv, AFIO_BACKEND_AUTO, &target_backend, &target_mode);
	if (ret)
		return ret;
	s = suite_create("soak");
	tc = tcase_create("soak");
	tcase_set_timeout(tc, soak_seconds() + 2.0 * WATCHDOG_S + 60);
	tcase_add_test(tc, test_soak);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
