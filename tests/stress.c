/* SPDX-License-Identifier: MIT */
/*
 * Stress: a random but seeded mix of file reads and writes, fsyncs and
 * socket transfers, with cancels at random, requests queued and canceled
 * from callbacks, and contexts destroyed with requests in flight.  Every
 * accepted request must complete exactly once with a result that fits it,
 * the stats must balance, and each context must give back its threads and
 * fds.  Bounded by counts only: no clock is read.
 *
 * meson runs it once per backend and mode, like the contract suite.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "asyncfio.h"
#include "testutil.h"

static enum afio_backend target_backend;
static enum afio_mode target_mode;

#define ROUNDS		100
#define STEPS		160
#define MAX_RECS	1024
#define BLK		4096		/* one buffer per request, aligned for O_DIRECT */
#define RO_SIZE		(64u * BLK)	/* prefilled, only read */
#define WR_SIZE		(64u * BLK)	/* only written */
#define NPAIRS		3		/* sockets whose peer answers each recv */
#define NSILENT		2		/* sockets whose peer never writes */
#define MAX_SILENT	4		/* silent recvs in flight at most */

enum kind {
	K_READ,
	K_READV,
	K_WRITE,
	K_DREAD,	/* O_DIRECT, aligned */
	K_DWRITE,
	K_FSYNC,
	K_RECV,
	K_SEND,
	K_SILENT,	/* a recv only cancel or destroy can end */
	K_COUNT,
};

struct round;

struct rec {
	struct round *rd;
	enum kind kind;
	int calls;
	ssize_t res;
	size_t len;
	uint64_t off;
	unsigned char *buf;
	struct iovec iov[2];
};

struct round {
	unsigned no;
	unsigned seed;
	afio_ctx *ctx;
	struct rec recs[MAX_RECS];
	unsigned nrecs;
	unsigned accepted;
	unsigned callbacks;
	unsigned canceled;
	unsigned silent_out;
	bool destroying;
	bool draining;
	int fd, dfd;
	int pairs[NPAIRS][2];
	int silent[NSILENT][2];
};

static unsigned char *buffers;	/* MAX_RECS blocks */

static unsigned char pattern(uint64_t off)
{
	return (unsigned char)(off * 131 + 7);
}

static unsigned rnd(struct round *rd, unsigned n)
{
	return (unsigned)rand_r(&rd->seed) % n;
}

/* ---- files ---- */

static int prefilled_file(int flags)
{
	unsigned char *blk = buffers;
	int fd = tu_tmpfile(flags);

	if (fd < 0)
		return fd;
	for (uint64_t off = 0; off < RO_SIZE; off += BLK) {
		for (unsigned i = 0; i < BLK; i++)
			blk[i] = pattern(off + i);
		ck_assert_int_eq(pwrite(fd, blk, BLK, (off_t)off), BLK);
	}
	/* Written blocks already exist: direct writes there extend nothing. */
	ck_assert_int_eq(ftruncate(fd, RO_SIZE + WR_SIZE), 0);
	return fd;
}

/* One assertion per request: each one costs Check a message to its parent. */
static void check_pattern(const struct rec *r)
{
	size_t i = 0;

	while (i < r->len && r->buf[i] == pattern(r->off + i))
		i++;
	ck_assert_msg(i == r->len, "round %u: read at %llu byte %zu is %u, not %u", r->rd->no,
		      (unsigned long long)r->off, i, r->buf[i], pattern(r->off + i));
}

/* Reads what the library sent on each answered pair, so no send blocks. */
static void drain_peers(struct round *rd)
{
	char sink[4096];

	for (int i = 0; i < NPAIRS; i++)
		while (recv(rd->pairs[i][0], sink, sizeof(sink), MSG_DONTWAIT) > 0)
			;
}

/* ---- requests ---- */

static int issue(struct round *rd, enum kind kind);

static struct rec *pick_issued(struct round *rd)
{
	return rd->nrecs ? &rd->recs[rnd(rd, rd->nrecs)] : NULL;
}

/* afio_cancel() on r: it matches r only while r's callback has not run. */
static void cancel_one(struct round *rd, struct rec *r)
{
	int calls = r->calls, ret;

	ret = afio_cancel(rd->ctx, r);
	ck_assert_msg(ret == 1 || ret == -ENOENT, "round %u: afio_cancel: %d", rd->no, ret);
	if (calls)
		ck_assert_msg(ret == -ENOENT, "round %u: cancel matched a request "
			      "whose callback already ran (kind %d)", rd->no, r->kind);
}

static void on_done(void *data, ssize_t res)
{
	struct rec *r = data;
	struct round *rd = r->rd;

	r->calls++;
	r->res = res;
	ck_assert_msg(r->calls == 1, "round %u: kind %d completed %d times (res %zd)",
		      rd->no, r->kind, r->calls, res);
	rd->callbacks++;
	if (res == -ECANCELED)
		rd->canceled++;
	if (r->kind == K_SILENT)
		rd->silent_out--;

	switch (r->kind) {
	case K_READ:
	case K_READV:
	case K_DREAD:
		ck_assert_msg(res == (ssize_t)r->len || res == -ECANCELED,
			      "round %u: read: %zd", rd->no, res);
		if (res > 0)
			check_pattern(r);
		break;
	case K_WRITE:
	case K_DWRITE:
		ck_assert_msg(res == (ssize_t)r->len || res == -ECANCELED,
			      "round %u: write: %zd", rd->no, res);
		break;
	case K_FSYNC:
		ck_assert_msg(res == 0 || res == -ECANCELED, "round %u: fsync: %zd", rd->no, res);
		break;
	case K_RECV:
	case K_SEND:
		ck_assert_msg((res > 0 && res <= (ssize_t)r->len) || res == -ECANCELED,
			      "round %u: %s: %zd", rd->no, r->kind == K_RECV ? "recv" : "send",
			      res);
		break;
	case K_SILENT:
		ck_assert_msg(res == -ECANCELED, "round %u: silent recv: %zd", rd->no, res);
		break;
	default:
		break;
	}

	if (rd->destroying) {
		/* Nothing new is taken while the context goes away. */
		int ret = issue(rd, K_READ);

		ck_assert_msg(ret == -ESHUTDOWN || rd->nrecs == MAX_RECS,
			      "round %u: queueing during destroy: %d", rd->no, ret);
		if (rnd(rd, 2))
			cancel_one(rd, pick_issued(rd));
		return;
	}
	switch (rnd(rd, 8)) {
	case 0:
	case 1:
		/* Whatever this returns, the request gets its one callback. */
		(void)issue(rd, (enum kind)rnd(rd, K_SILENT));
		break;
	case 2:
		cancel_one(rd, pick_issued(rd));
		break;
	default:
		break;
	}
}

/* 0 when accepted; -EAGAIN (full), -ESHUTDOWN or 1 (not possible now). */
static int issue(struct round *rd, enum kind kind)
{
	struct rec *r;
	int ret, sock;

	if (rd->nrecs == MAX_RECS)
		return 1;
	if ((kind == K_DREAD || kind == K_DWRITE) && rd->dfd < 0)
		kind = kind == K_DREAD ? K_READ : K_WRITE;
	if (kind == K_SILENT && (rd->silent_out == MAX_SILENT || rd->draining))
		return 1;
	r = &rd->recs[rd->nrecs];
	memset(r, 0, sizeof(*r));
	r->rd = rd;
	r->kind = kind;
	r->buf = buffers + (size_t)rd->nrecs * BLK;

	switch (kind) {
	case K_READ:
		r->len = 1 + rnd(rd, BLK);
		r->off = rnd(rd, RO_SIZE - (unsigned)r->len + 1);
		ret = afio_read(rd->ctx, rd->fd, r->buf, r->len, r->off, on_done, r);
		break;
	case K_READV:
		r->len = 2 + rnd(rd, BLK - 1);
		r->off = rnd(rd, RO_SIZE - (unsigned)r->len + 1);
		r->iov[0].iov_base = r->buf;
		r->iov[0].iov_len = r->len / 2;
		r->iov[1].iov_base = r->buf + r->len / 2;
		r->iov[1].iov_len = r->len - r->len / 2;
		ret = afio_readv(rd->ctx, rd->fd, r->iov, 2, r->off, on_done, r);
		break;
	case K_WRITE:
		r->len = 1 + rnd(rd, BLK);
		r->off = RO_SIZE + rnd(rd, WR_SIZE - (unsigned)r->len + 1);
		memset(r->buf, (int)rd->nrecs, r->len);
		ret = afio_write(rd->ctx, rd->fd, r->buf, r->len, r->off, on_done, r);
		break;
	case K_DREAD:
		r->len = BLK;
		r->off = (uint64_t)rnd(rd, RO_SIZE / BLK) * BLK;
		ret = afio_read(rd->ctx, rd->dfd, r->buf, r->len, r->off, on_done, r);
		break;
	case K_DWRITE:
		r->len = BLK;
		r->off = RO_SIZE + (uint64_t)rnd(rd, WR_SIZE / BLK) * BLK;
		memset(r->buf, (int)rd->nrecs, r->len);
		ret = afio_write(rd->ctx, rd->dfd, r->buf, r->len, r->off, on_done, r);
		break;
	case K_FSYNC:
		ret = afio_fsync(rd->ctx, rnd(rd, 2) || rd->dfd < 0 ? rd->fd : rd->dfd,
				 rnd(rd, 2) ? AFIO_FSYNC_DATASYNC : 0, on_done, r);
		break;
	case K_RECV:
		r->len = 1 + rnd(rd, 512);
		sock = (int)rnd(rd, NPAIRS);
		/* The answer goes first: each recv in flight has bytes of its own. */
		memset(r->buf, 'a', r->len);
		if (send(rd->pairs[sock][0], r->buf, r->len, MSG_DONTWAIT) != (ssize_t)r->len)
			return 1;
		ret = afio_recv(rd->ctx, rd->pairs[sock][1], r->buf, r->len, 0, on_done, r);
		break;
	case K_SEND:
		r->len = 1 + rnd(rd, 512);
		memset(r->buf, 's', r->len);
		ret = afio_send(rd->ctx, rd->pairs[rnd(rd, NPAIRS)][1], r->buf, r->len, 0,
				on_done, r);
		break;
	case K_SILENT:
		r->len = 16;
		ret = afio_recv(rd->ctx, rd->silent[rnd(rd, NSILENT)][1], r->buf, r->len, 0,
				on_done, r);
		break;
	default:
		return 1;
	}
	ck_assert_msg(ret == 0 || ret == -EAGAIN || ret == -ESHUTDOWN,
		      "round %u: queueing kind %d: %d", rd->no, kind, ret);
	if (ret)
		return ret;
	rd->nrecs++;
	rd->accepted++;
	if (kind == K_SILENT)
		rd->silent_out++;
	return 0;
}

static void cancel_silent(struct round *rd)
{
	for (unsigned i = 0; i < rd->nrecs; i++)
		if (rd->recs[i].kind == K_SILENT && !rd->recs[i].calls)
			cancel_one(rd, &rd->recs[i]);
}

/* Waits for one completion, once nothing in flight can wait forever. */
static void make_room(struct round *rd)
{
	cancel_silent(rd);
	drain_peers(rd);
	ck_assert_int_ge(afio_poll(rd->ctx, 1, -1), 0);
}

/* ---- one round ---- */

static void open_round(struct round *rd, unsigned no)
{
	struct afio_config cfg;
	int ret;

	memset(rd, 0, sizeof(*rd));
	rd->no = no;
	rd->seed = no * 7919u + 17u;
	rd->fd = prefilled_file(0);
	ck_assert_msg(rd->fd >= 0, "tmpfile: %s", strerror(-rd->fd));
	/* O_DIRECT where the file system takes it: libaio's in-kernel path. */
	rd->dfd = prefilled_file(O_DIRECT);
	for (int i = 0; i < NPAIRS; i++)
		tu_socketpair(rd->pairs[i]);
	for (int i = 0; i < NSILENT; i++)
		tu_socketpair(rd->silent[i]);

	afio_config_init(&cfg);
	cfg.backend = target_backend;
	cfg.mode = target_mode;
	cfg.flags = AFIO_NO_FALLBACK;
	/* Small and large queues; every third round a tiny io_uring ring. */
	cfg.entries = no % 2 ? 8 : 64;
	cfg.ring_entries = no % 3 ? 0 : 4;
	cfg.threads = 1 + no % 4;
	ret = afio_create(&rd->ctx, &cfg);
	ck_assert_msg(ret == 0, "afio_create: %s", strerror(-ret));
}

static void close_round(struct round *rd)
{
	close(rd->fd);
	if (rd->dfd >= 0)
		close(rd->dfd);
	for (int i = 0; i < NPAIRS; i++) {
		close(rd->pairs[i][0]);
		close(rd->pairs[i][1]);
	}
	for (int i = 0; i < NSILENT; i++) {
		close(rd->silent[i][0]);
		close(rd->silent[i][1]);
	}
}

static void check_stats(struct round *rd, bool idle)
{
	struct afio_stats st = { 0 };
	int ret = afio_stats(rd->ctx, &st);

	ck_assert_msg(!ret && st.submitted == rd->accepted && st.completed == rd->callbacks &&
		      st.canceled == rd->canceled &&
		      st.in_flight == st.submitted - st.completed && (!idle || !st.in_flight),
		      "round %u: stats %d: submitted %llu (accepted %u), completed %llu "
		      "(callbacks %u), canceled %llu (%u), in flight %llu", rd->no, ret,
		      (unsigned long long)st.submitted, rd->accepted,
		      (unsigned long long)st.completed, rd->callbacks,
		      (unsigned long long)st.canceled, rd->canceled,
		      (unsigned long long)st.in_flight);
}

static void run_round(struct round *rd, unsigned no)
{
	bool destroy_early = no % 2;
	unsigned destroy_at;

	open_round(rd, no);
	destroy_at = destroy_early ? rnd(rd, STEPS) : STEPS;
	for (unsigned step = 0; step < destroy_at; step++) {
		unsigned what = rnd(rd, 100);
		struct rec *r;

		if (what < 55) {
			if (issue(rd, (enum kind)rnd(rd, K_COUNT)) == -EAGAIN)
				make_room(rd);
		} else if (what < 70) {
			r = pick_issued(rd);
			if (r)
				cancel_one(rd, r);
		} else if (what < 85) {
			ck_assert_int_ge(afio_poll(rd->ctx, 0, 0), 0);
		} else if (what < 90) {
			ck_assert_int_ge(afio_submit(rd->ctx), 0);
		} else if (what < 95) {
			/* Cancel racing the engine's first steps with it. */
			if (!issue(rd, K_SILENT)) {
				ck_assert_int_ge(afio_submit(rd->ctx), 0);
				cancel_one(rd, &rd->recs[rd->nrecs - 1]);
			}
		} else {
			drain_peers(rd);
		}
		check_stats(rd, false);
	}

	if (destroy_early) {
		/* Whatever is queued, handed over or finished but not yet
		   reaped: destroy runs each callback once. */
		check_stats(rd, false);
		rd->destroying = true;
		afio_destroy(rd->ctx);
	} else {
		rd->draining = true;
		cancel_silent(rd);
		for (;;) {
			struct afio_stats st;

			ck_assert_int_eq(afio_stats(rd->ctx, &st), 0);
			if (!st.in_flight)
				break;
			drain_peers(rd);
			ck_assert_int_ge(afio_poll(rd->ctx, 1, -1), 0);
		}
		check_stats(rd, true);
		afio_destroy(rd->ctx);
	}
	ck_assert_uint_eq(rd->callbacks, rd->accepted);
	for (unsigned i = 0; i < rd->nrecs; i++)
		ck_assert_msg(rd->recs[i].calls == 1, "round %u: request %u (kind %d) "
			      "completed %d times", no, i, rd->recs[i].kind, rd->recs[i].calls);
	close_round(rd);
}

START_TEST(test_stress)
{
	static struct round rd;
	int fds, threads, n;

	buffers = aligned_alloc(BLK, (size_t)MAX_RECS * BLK);
	ck_assert_ptr_nonnull(buffers);
	tu_warm_up_threads();
	fds = tu_count_fds();
	threads = tu_count_threads_steady();
	for (unsigned no = 0; no < ROUNDS; no++) {
		run_round(&rd, no);
		ck_assert_msg(tu_count_fds() == fds, "round %u: %d fds open, %d before", no,
			      tu_count_fds(), fds);
		n = tu_count_threads_settled(threads);
		ck_assert_msg(n == threads, "round %u: %d threads, %d before", no, n, threads);
	}
	free(buffers);
}
END_TEST

static Suite *stress_suite(void)
{
	Suite *s = suite_create("stress");
	TCase *tc = tcase_create("stress");

	tcase_add_test(tc, test_stress);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	int ret;

	ret = tu_parse_target(argc, argv, AFIO_BACKEND_AUTO, &target_backend, &target_mode);
	if (ret)
		return ret;
	return tu_run_suite(stress_suite());
}
