/* SPDX-License-Identifier: MIT */
/*
 * The libaio backend: what goes to the kernel and what goes to the pool
 * (and that afio_op_native() says so), fsync through IOCB_CMD_FSYNC,
 * cancel of a socket poll, and the probe when a seccomp filter denies
 * io_setup.  One mode per run (from argv).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asyncfio.h"
#include "testutil.h"

/* Every block size a logical block can have here divides this. */
#define BLK 4096u
#define NBLK 16u

static enum afio_mode target_mode;

static afio_ctx *new_ctx(void)
{
	return tu_ctx(AFIO_BACKEND_LIBAIO, target_mode, 0);
}

/* A buffered temporary file of `size` bytes (a hole) and the same file
   opened again with O_DIRECT; false when the file system here takes no
   O_DIRECT. */
static bool open_pair(int *buffered, int *direct, off_t size)
{
	char path[64];

	*buffered = tu_tmpfile(0);
	ck_assert_msg(*buffered >= 0, "tmpfile: %s", strerror(-*buffered));
	ck_assert_int_eq(ftruncate(*buffered, size), 0);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", *buffered);
	*direct = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (*direct < 0) {
		ck_assert_int_eq(errno, EINVAL);
		printf("no O_DIRECT in $AFIO_TEST_DIR: case not run\n");
		close(*buffered);
		return false;
	}
	return true;
}

static unsigned char *block_buf(size_t len, unsigned char fill)
{
	unsigned char *p = aligned_alloc(BLK, len);

	ck_assert_ptr_nonnull(p);
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)(fill + i * 7 + i / BLK);
	return p;
}

/* One read or write, waited for: it moves all of len, and stats.fallbacks
   grows by `pooled` (0: the kernel did it). */
static void rw_once(afio_ctx *ctx, bool write, int fd, void *buf, size_t len,
		    uint64_t off, unsigned pooled)
{
	uint64_t fb = tu_fallbacks(ctx);
	struct tu_done d = { 0 };
	int ret;

	if (write)
		ret = afio_write(ctx, fd, buf, len, off, tu_on_done, &d);
	else
		ret = afio_read(ctx, fd, buf, len, off, tu_on_done, &d);
	ck_assert_int_eq(ret, 0);
	tu_wait_done(ctx, &d);
	ck_assert_int_eq(d.calls, 1);
	ck_assert_int_eq(d.res, len);
	ck_assert_uint_eq(tu_fallbacks(ctx), fb + pooled);
}

/* What the file holds, as a plain buffered read sees it. */
static void expect_file(int fd, const unsigned char *ref, size_t len)
{
	unsigned char *back = malloc(len);

	ck_assert_ptr_nonnull(back);
	ck_assert_int_eq(pread(fd, back, len, 0), len);
	ck_assert(!memcmp(back, ref, len));
	free(back);
}

/* ---- O_DIRECT: the kernel, and the pool for what it cannot do well ---- */

START_TEST(test_direct_aligned)
{
	unsigned char *ref = block_buf(NBLK * BLK, 3), *back = block_buf(NBLK * BLK, 0);
	struct tu_done w[NBLK] = { { 0 } }, rv = { 0 };
	afio_ctx *ctx = new_ctx();
	struct iovec iov[2];
	int fd, dfd;
	uint64_t fb;
	char desc[160];

	if (!open_pair(&fd, &dfd, NBLK * BLK))
		goto out;
	fb = tu_fallbacks(ctx);
	/* One batch of writes, then one read of everything and one vectored. */
	for (unsigned i = 0; i < NBLK; i++)
		ck_assert_int_eq(afio_write(ctx, dfd, ref + i * BLK, BLK, (uint64_t)i * BLK,
					    tu_on_done, &w[i]), 0);
	for (unsigned i = 0; i < NBLK; i++) {
		tu_wait_done(ctx, &w[i]);
		ck_assert_int_eq(w[i].calls, 1);
		ck_assert_int_eq(w[i].res, BLK);
	}
	rw_once(ctx, false, dfd, back, NBLK * BLK, 0, 0);
	ck_assert(!memcmp(back, ref, NBLK * BLK));

	memset(back, 0, NBLK * BLK);
	iov[0] = (struct iovec){ back + 2 * BLK, BLK };
	iov[1] = (struct iovec){ back, 2 * BLK };
	ck_assert_int_eq(afio_readv(ctx, dfd, iov, 2, BLK, tu_on_done, &rv), 0);
	tu_wait_done(ctx, &rv);
	ck_assert_int_eq(rv.res, 3 * BLK);
	ck_assert(!memcmp(back + 2 * BLK, ref + BLK, BLK));
	ck_assert(!memcmp(back, ref + 2 * BLK, 2 * BLK));

	ck_assert_uint_eq(tu_fallbacks(ctx), fb);
	ck_assert_int_gt(afio_describe(ctx, desc, sizeof(desc)), 0);
	ck_assert_msg(strstr(desc, "libaio: nr_events=") && strstr(desc, "dio alignment: "),
		      "describe: %s", desc);
	expect_file(fd, ref, NBLK * BLK);
	close(dfd);
	close(fd);
out:
	afio_destroy(ctx);
	free(ref);
	free(back);
}
END_TEST

START_TEST(test_buffered_goes_to_pool)
{
	unsigned char *ref = block_buf(BLK, 9), *back = block_buf(BLK, 0);
	afio_ctx *ctx = new_ctx();
	int fd = tu_tmpfile(0);

	ck_assert_int_ge(fd, 0);
	/* Aligned, but buffered: io_submit would do it in the caller. */
	rw_once(ctx, true, fd, ref, BLK, 0, 1);
	rw_once(ctx, false, fd, back, BLK, 0, 1);
	ck_assert(!memcmp(back, ref, BLK));
	afio_destroy(ctx);
	close(fd);
	free(ref);
	free(back);
}
END_TEST

/* ---- buffered requests in one submit call ---- */

#define RUN 8u

static uint64_t nowait_count(afio_ctx *ctx)
{
	struct afio_stats st;

	ck_assert_int_eq(afio_stats(ctx, &st), 0);
	return st.nowait;
}

/* RUN reads of len bytes from fd at i * len, queued and submitted together
   (so that libaio sees a run on one fd), each checked against ref;
   after_submit, if not NULL, runs between afio_submit() and the first
   afio_poll(). */
static void read_run_then(afio_ctx *ctx, int fd, const unsigned char *ref, size_t len,
			  void (*after_submit)(afio_ctx *ctx))
{
	struct tu_done d[RUN] = { 0 };
	unsigned char *back = malloc(RUN * len);

	ck_assert_ptr_nonnull(back);
	memset(back, 0xee, RUN * len);
	for (unsigned i = 0; i < RUN; i++)
		tu_queued(afio_read(ctx, fd, back + i * len, len, i * len, tu_on_done, &d[i]),
			  "afio_read");
	ck_assert_int_eq(afio_submit(ctx), RUN);
	if (after_submit)
		after_submit(ctx);
	for (unsigned i = 0; i < RUN; i++) {
		tu_wait_once(ctx, &d[i], "read of the run");
		ck_assert_int_eq(d[i].res, len);
	}
	ck_assert(!memcmp(back, ref, RUN * len));
	free(back);
}

static void read_run(afio_ctx *ctx, int fd, const unsigned char *ref, size_t len)
{
	read_run_then(ctx, fd, ref, len, NULL);
}

/* Whether the file system of $AFIO_TEST_DIR takes RWF_NOWAIT reads (tmpfs
   does not: there every try goes to the pool). */
static bool nowait_reads(int fd)
{
	char c;
	struct iovec iov = { &c, 1 };

	return preadv2(fd, &iov, 1, 0, RWF_NOWAIT) >= 0 || errno != EOPNOTSUPP;
}

/* The counts of a run that INLINE tried in io_submit() and that found
   everything cached. */
static bool tried_in_kernel(int fd)
{
	if (target_mode != AFIO_MODE_INLINE)
		return false;
	if (!nowait_reads(fd)) {
		printf("no RWF_NOWAIT reads in $AFIO_TEST_DIR: counts not checked\n");
		return false;
	}
	return true;
}

/* The process's count of read system calls (all its threads'), from
   /proc/self/io: Linux AIO's reads are not among them. */
static uint64_t read_syscalls(void)
{
	char line[128];
	unsigned long long n = 0;
	FILE *f = fopen("/proc/self/io", "re");

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "syscr: %llu", &n) == 1)
			break;
	fclose(f);
	return n;
}

/*
 * INLINE: cached reads queued together on one fd are tried in io_submit()
 * with RWF_NOWAIT and finish there, none handed to the pool; in the other
 * modes the pool does them all.
 */
START_TEST(test_buffered_run_cached)
{
	unsigned char *ref = block_buf(RUN * BLK, 3);
	afio_ctx *ctx = new_ctx();
	int fd = tu_file_of(ref, RUN * BLK, false);
	uint64_t fb = tu_fallbacks(ctx), nw = nowait_count(ctx), reads = read_syscalls();

	read_run(ctx, fd, ref, BLK);
	reads = read_syscalls() - reads;
	if (tried_in_kernel(fd)) {
		ck_assert_uint_eq(tu_fallbacks(ctx), fb);
		ck_assert_uint_eq(nowait_count(ctx), nw + RUN);
		/* one for the run's first request, which tells that fd is
		   a file, not one each (and /proc's and the eventfd's) */
		ck_assert_uint_lt(reads, RUN / 2);
	} else if (target_mode != AFIO_MODE_INLINE) {
		ck_assert_uint_eq(tu_fallbacks(ctx), fb + RUN);
	}
	afio_destroy(ctx);
	close(fd);
	free(ref);
}
END_TEST

/* A run on an fd the kernel refuses for the run's own fault (reads of an
   fd open only for writing: EBADF) fails with that error, and the next
   run on a good fd is still tried in io_submit(). */
START_TEST(test_buffered_refused_run_keeps_tries)
{
	unsigned char *ref = block_buf(RUN * BLK, 19), *back = malloc(RUN * BLK);
	afio_ctx *ctx = new_ctx();
	int fd = tu_file_of(ref, RUN * BLK, false), wo;
	struct tu_done d[RUN] = { 0 };
	uint64_t fb, nw;
	char path[64];

	ck_assert_ptr_nonnull(back);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	wo = open(path, O_WRONLY | O_CLOEXEC);
	ck_assert_int_ge(wo, 0);
	for (unsigned i = 0; i < RUN; i++)
		tu_queued(afio_read(ctx, wo, back + i * BLK, BLK, i * BLK, tu_on_done, &d[i]),
			  "afio_read of a write-only fd");
	ck_assert_int_eq(afio_submit(ctx), RUN);
	for (unsigned i = 0; i < RUN; i++) {
		tu_wait_once(ctx, &d[i], "read of a write-only fd");
		ck_assert_int_eq(d[i].res, -EBADF);
	}
	fb = tu_fallbacks(ctx);
	nw = nowait_count(ctx);
	read_run(ctx, fd, ref, BLK);
	if (tried_in_kernel(fd)) {
		ck_assert_uint_eq(tu_fallbacks(ctx), fb);
		ck_assert_uint_eq(nowait_count(ctx), nw + RUN);
	}
	afio_destroy(ctx);
	close(wo);
	close(fd);
	free(ref);
	free(back);
}
END_TEST

static uint64_t fb_before, nw_before;

/* Every read of the run is finished or in the pool already: what would
   wait got going with afio_submit(), not with the first poll. */
static void all_finished_or_pooled(afio_ctx *ctx)
{
	ck_assert_uint_eq(tu_fallbacks(ctx) - fb_before + nowait_count(ctx) - nw_before, RUN);
}

/* Pages not in the cache: the try says EAGAIN and the pool reads them;
   every read counts once, as finished at once or as handed on, by the
   time afio_submit() returns. */
START_TEST(test_buffered_run_evicted)
{
	unsigned char *ref = block_buf(RUN * BLK, 5);
	afio_ctx *ctx = new_ctx();
	int fd = tu_file_of(ref, RUN * BLK, true);

	fb_before = tu_fallbacks(ctx);
	nw_before = nowait_count(ctx);
	read_run_then(ctx, fd, ref, BLK, all_finished_or_pooled);
	all_finished_or_pooled(ctx);
	ck_assert_uint_gt(tu_fallbacks(ctx), fb_before);
	afio_destroy(ctx);
	close(fd);
	free(ref);
}
END_TEST

/*
 * A read whose first half is cached and second half not: the try moves
 * the first half and the pool the rest, from where it stopped; the
 * callback gets the whole length once.  Readahead is off for the fd
 * (POSIX_FADV_RANDOM) so that caching the first half caches no more.
 */
START_TEST(test_buffered_short_try_goes_on)
{
	const size_t half = 4 * BLK, len = 2 * half;
	unsigned char *ref = block_buf(RUN * len, 7), *back = malloc(half);
	afio_ctx *ctx = new_ctx();
	int fd = tu_file_of(ref, RUN * len, true);
	uint64_t fb = tu_fallbacks(ctx);

	ck_assert_ptr_nonnull(back);
	ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM), 0);
	for (unsigned i = 0; i < RUN; i++)
		ck_assert_int_eq(pread(fd, back, half, i * len), (ssize_t)half);
	read_run(ctx, fd, ref, len);
	/* Each try's own miss starts reading its second half; a disk that
	   finished that before the try looked again would leave it whole. */
	ck_assert_uint_gt(tu_fallbacks(ctx), fb);
	afio_destroy(ctx);
	close(fd);
	free(ref);
	free(back);
}
END_TEST

/* Reads that run into the end of the file stop there, once. */
START_TEST(test_buffered_run_at_eof)
{
	unsigned char *ref = block_buf(RUN * BLK, 11), *back = malloc(2 * BLK);
	afio_ctx *ctx = new_ctx();
	int fd = tu_file_of(ref, RUN * BLK - 100, false);
	struct tu_done tail = { 0 }, past = { 0 };

	ck_assert_ptr_nonnull(back);
	tu_queued(afio_read(ctx, fd, back, 2 * BLK, (RUN - 1) * BLK, tu_on_done, &tail),
		  "afio_read at the end");
	tu_queued(afio_read(ctx, fd, back + BLK, BLK, RUN * BLK, tu_on_done, &past),
		  "afio_read past the end");
	ck_assert_int_eq(afio_submit(ctx), 2);
	tu_wait_once(ctx, &tail, "read at the end");
	tu_wait_once(ctx, &past, "read past the end");
	ck_assert_int_eq(tail.res, BLK - 100);
	ck_assert_int_eq(past.res, 0);
	ck_assert(!memcmp(back, ref + (RUN - 1) * BLK, BLK - 100));
	afio_destroy(ctx);
	close(fd);
	free(ref);
	free(back);
}
END_TEST

/* Linux AIO would read a pipe, or the context's eventfd, as a stream: a
   run of positioned reads on either is -ESPIPE, as pread(2) says. */
START_TEST(test_buffered_run_not_a_file)
{
	afio_ctx *ctx = new_ctx();
	struct tu_done p[2] = { 0 }, e[2] = { 0 };
	char buf[4][8];
	int pp[2], evfd = afio_eventfd(ctx);

	ck_assert_int_ge(evfd, 0);
	ck_assert_int_eq(pipe2(pp, O_CLOEXEC), 0);
	ck_assert_int_eq(write(pp[1], "abcdef", 6), 6);
	for (int i = 0; i < 2; i++)
		tu_queued(afio_read(ctx, pp[0], buf[i], 3, 0, tu_on_done, &p[i]), "pipe");
	for (int i = 0; i < 2; i++)
		tu_queued(afio_read(ctx, evfd, buf[2 + i], 8, 0, tu_on_done, &e[i]), "eventfd");
	ck_assert_int_eq(afio_submit(ctx), 4);
	for (int i = 0; i < 2; i++) {
		tu_wait_once(ctx, &p[i], "read of a pipe");
		tu_wait_once(ctx, &e[i], "read of the eventfd");
		ck_assert_int_eq(p[i].res, -ESPIPE);
		ck_assert_int_eq(e[i].res, -ESPIPE);
	}
	ck_assert_int_eq(read(pp[0], buf[0], 8), 6);
	afio_destroy(ctx);
	close(pp[0]);
	close(pp[1]);
}
END_TEST

/* Buffered writes in a run: ext4 refuses RWF_NOWAIT for them (the pool
   writes them then, and the next run goes there straight); on a file
   system that takes it they finish in the try.  Either way the file ends
   up with every byte. */
START_TEST(test_buffered_run_writes)
{
	unsigned char *ref = block_buf(RUN * BLK, 13), *back = malloc(RUN * BLK);
	afio_ctx *ctx = new_ctx();
	int fd = tu_tmpfile(0);

	ck_assert_int_ge(fd, 0);
	ck_assert_ptr_nonnull(back);
	for (int round = 0; round < 2; round++) {
		struct tu_done d[RUN] = { 0 };

		for (unsigned i = 0; i < RUN; i++)
			tu_queued(afio_write(ctx, fd, ref + i * BLK, BLK, i * BLK, tu_on_done,
					     &d[i]), "afio_write");
		ck_assert_int_eq(afio_submit(ctx), RUN);
		for (unsigned i = 0; i < RUN; i++) {
			tu_wait_once(ctx, &d[i], "write of the run");
			ck_assert_int_eq(d[i].res, BLK);
		}
		ck_assert_int_eq(pread(fd, back, RUN * BLK, 0), (ssize_t)(RUN * BLK));
		ck_assert(!memcmp(back, ref, RUN * BLK));
	}
	afio_destroy(ctx);
	close(fd);
	free(ref);
	free(back);
}
END_TEST

/* Canceled right after submit: each read completes once, with its bytes
   or -ECANCELED, whether its try finished it or the pool had it. */
START_TEST(test_buffered_run_canceled)
{
	unsigned char *ref = block_buf(RUN * BLK, 17), *back = malloc(RUN * BLK);
	afio_ctx *ctx = new_ctx();
	int fd = tu_file_of(ref, RUN * BLK, true);
	struct tu_done d[RUN] = { 0 };

	ck_assert_ptr_nonnull(back);
	for (unsigned i = 0; i < RUN; i++)
		tu_queued(afio_read(ctx, fd, back + i * BLK, BLK, i * BLK, tu_on_done, &d[i]),
			  "afio_read");
	ck_assert_int_eq(afio_submit(ctx), RUN);
	for (unsigned i = 0; i < RUN; i++)
		(void)afio_cancel(ctx, &d[i]);
	for (unsigned i = 0; i < RUN; i++) {
		tu_wait_once(ctx, &d[i], "canceled read");
		if (d[i].res != -ECANCELED) {
			ck_assert_int_eq(d[i].res, BLK);
			ck_assert(!memcmp(back + i * BLK, ref + i * BLK, BLK));
		}
	}
	tu_no_second_callback(ctx, &d[0], "canceled read");
	afio_destroy(ctx);
	close(fd);
	free(ref);
	free(back);
}
END_TEST

/*
 * A misaligned O_DIRECT request goes to the pool and gets there what
 * pread(2) on the same fd gets: the bytes where the file system does such
 * I/O itself, -EINVAL where it refuses it (ext4, xfs).
 */
static void misaligned_read(afio_ctx *ctx, int dfd, unsigned char *buf, size_t len, off_t off)
{
	unsigned char *want = malloc(len);
	struct tu_done r = { 0 };
	uint64_t fb = tu_fallbacks(ctx);
	ssize_t n;

	ck_assert_ptr_nonnull(want);
	n = pread(dfd, buf, len, off);
	if (n < 0)
		n = -errno;
	else
		memcpy(want, buf, (size_t)n);
	memset(buf, 0, len);
	ck_assert_int_eq(afio_read(ctx, dfd, buf, len, (uint64_t)off, tu_on_done, &r), 0);
	tu_wait_done(ctx, &r);
	ck_assert_int_eq(r.calls, 1);
	ck_assert_uint_eq(tu_fallbacks(ctx), fb + 1);
	ck_assert_msg(r.res == n, "misaligned read: %zd, pread says %zd", r.res, n);
	if (n > 0)
		ck_assert(!memcmp(buf, want, (size_t)n));
	free(want);
}

START_TEST(test_direct_misaligned)
{
	unsigned char *ref = block_buf(4 * BLK, 5), *buf = block_buf(4 * BLK, 0);
	afio_ctx *ctx = new_ctx();
	int fd, dfd;

	if (!open_pair(&fd, &dfd, 0))
		goto out;
	ck_assert_int_eq(pwrite(fd, ref, 4 * BLK, 0), 4 * BLK);
	ck_assert_int_eq(fsync(fd), 0);
	misaligned_read(ctx, dfd, buf + 1, BLK, 0);	/* buffer */
	misaligned_read(ctx, dfd, buf, BLK, 1);		/* offset */
	misaligned_read(ctx, dfd, buf, BLK - 1, 0);	/* length */
	close(dfd);
	close(fd);
out:
	afio_destroy(ctx);
	free(ref);
	free(buf);
}
END_TEST

/* Aligned, but past the end of the file: ext4 would finish it inside
   io_submit(), so it goes to the pool; inside the file it does not. */
START_TEST(test_direct_extending_write)
{
	unsigned char *ref = block_buf(2 * BLK, 11);
	afio_ctx *ctx = new_ctx();
	int fd, dfd;

	if (!open_pair(&fd, &dfd, BLK))
		goto out;
	rw_once(ctx, true, dfd, ref, BLK, 0, 0);
	rw_once(ctx, true, dfd, ref + BLK, BLK, BLK, 1);
	expect_file(fd, ref, 2 * BLK);
	close(dfd);
	close(fd);
out:
	afio_destroy(ctx);
	free(ref);
}
END_TEST

/* ---- fsync ---- */

/* Whether this kernel and file system take IOCB_CMD_FSYNC on fd: asked
   directly, without the library. */
static bool kernel_takes_fsync(int fd)
{
	aio_context_t io = 0;
	struct iocb cb, *cbs[1] = { &cb };
	struct io_event ev;
	long ret;

	ck_assert_int_eq(syscall(SYS_io_setup, 1, &io), 0);
	memset(&cb, 0, sizeof(cb));
	cb.aio_lio_opcode = IOCB_CMD_FSYNC;
	cb.aio_fildes = (unsigned)fd;
	ret = syscall(SYS_io_submit, io, 1, cbs);
	if (ret == 1)
		ck_assert_int_eq(syscall(SYS_io_getevents, io, 1, 1, &ev, NULL), 1);
	syscall(SYS_io_destroy, io);
	return ret == 1;
}

START_TEST(test_fsync_in_kernel)
{
	unsigned char *ref = block_buf(BLK, 1);
	struct tu_done s = { 0 }, ds = { 0 };
	afio_ctx *ctx = new_ctx();
	int fd, dfd;
	uint64_t fb;

	if (!open_pair(&fd, &dfd, BLK))
		goto out;
	if (!kernel_takes_fsync(dfd)) {
		printf("IOCB_CMD_FSYNC refused here: case not run\n");
		goto close;
	}
	rw_once(ctx, true, dfd, ref, BLK, 0, 0);
	fb = tu_fallbacks(ctx);
	ck_assert_int_eq(afio_fsync(ctx, dfd, 0, tu_on_done, &s), 0);
	ck_assert_int_eq(afio_fsync(ctx, dfd, AFIO_FSYNC_DATASYNC, tu_on_done, &ds), 0);
	tu_wait_done(ctx, &s);
	tu_wait_done(ctx, &ds);
	ck_assert_int_eq(s.res, 0);
	ck_assert_int_eq(ds.res, 0);
	ck_assert_int_eq(s.calls + ds.calls, 2);
	ck_assert_uint_eq(tu_fallbacks(ctx), fb);
close:
	close(dfd);
	close(fd);
out:
	afio_destroy(ctx);
	free(ref);
}
END_TEST

/* ---- sockets ---- */

START_TEST(test_cancel_polled_recv)
{
	afio_ctx *ctx = new_ctx();
	struct tu_done r = { 0 };
	struct afio_stats st;
	char in[16], c;
	int sv[2];

	tu_socketpair(sv);
	ck_assert_int_eq(afio_recv(ctx, sv[1], in, sizeof(in), 0, tu_on_done, &r), 0);
	ck_assert_int_eq(afio_poll(ctx, 0, 20), 0);
	ck_assert_int_eq(r.calls, 0);
	ck_assert_int_eq(afio_cancel(ctx, &r), 1);
	tu_wait_done(ctx, &r);
	ck_assert_int_eq(r.res, -ECANCELED);
	/* Data sent later is left for whoever reads next. */
	ck_assert_int_eq(write(sv[0], "z", 1), 1);
	ck_assert_int_eq(afio_poll(ctx, 1, 50), 0);
	ck_assert_int_eq(r.calls, 1);
	ck_assert_int_eq(recv(sv[1], &c, 1, MSG_DONTWAIT), 1);
	ck_assert_int_eq(c, 'z');
	ck_assert_int_eq(afio_stats(ctx, &st), 0);
	ck_assert_uint_eq(st.canceled, 1);
	ck_assert_uint_eq(st.in_flight, 0);
	/* Only ASYNC hands sockets to the pool; the others poll in the kernel. */
	ck_assert_uint_eq(st.fallbacks, target_mode == AFIO_MODE_ASYNC);
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* Readiness that is gone by the time of the transfer: the poll is armed
   again and the recv completes with what comes next. */
START_TEST(test_poll_rearmed)
{
	afio_ctx *ctx = new_ctx();
	struct tu_done r = { 0 };
	char in[16] = "", c;
	int sv[2];

	if (target_mode == AFIO_MODE_ASYNC)
		goto out;	/* a pool worker would race the test for the byte */
	tu_socketpair(sv);
	ck_assert_int_eq(afio_recv(ctx, sv[1], in, sizeof(in), 0, tu_on_done, &r), 0);
	ck_assert_int_eq(afio_submit(ctx), 1);
	ck_assert_int_eq(write(sv[0], "a", 1), 1);
	ck_assert_int_eq(recv(sv[1], &c, 1, MSG_DONTWAIT), 1);
	ck_assert_int_eq(afio_poll(ctx, 0, 0), 0);
	ck_assert_int_eq(r.calls, 0);
	ck_assert_int_eq(write(sv[0], "bc", 2), 2);
	tu_wait_done(ctx, &r);
	ck_assert_int_eq(r.calls, 1);
	ck_assert_int_eq(r.res, 2);
	ck_assert(!memcmp(in, "bc", 2));
	ck_assert_uint_eq(tu_fallbacks(ctx), 0);
	close(sv[0]);
	close(sv[1]);
out:
	afio_destroy(ctx);
}
END_TEST

/* ---- probing ---- */

/* In a child with io_uring_setup and io_setup denied as a container does;
   returns a non-zero code naming the first thing that was wrong. */
static int denied_child(void)
{
	static const long deny[] = { __NR_io_uring_setup, __NR_io_setup };
	struct afio_config cfg;
	afio_ctx *ctx = NULL;
	char reason[256];
	int ret;

	unsetenv("AFIO_BACKEND");
	unsetenv("AFIO_MODE");
	unsetenv("AFIO_NO_FALLBACK");
	if (tu_deny_syscalls(deny, 2))
		return 10;
	ret = afio_probe(AFIO_BACKEND_LIBAIO, reason, sizeof(reason));
	fprintf(stderr, "probe libaio: %d, %s\n", ret, reason);
	if (ret != -EPERM)
		return 11;
	if (strncmp(reason, "io_setup: ", 10) || !strstr(reason, strerror(EPERM)) ||
	    !strstr(reason, "seccomp"))
		return 12;

	if (afio_create(&ctx, NULL))
		return 13;
	ret = afio_backend(ctx) == AFIO_BACKEND_THREADS ? 0 : 14;
	if (!ret && strncmp(afio_skip_reason(ctx, AFIO_BACKEND_LIBAIO), "io_setup: ", 10))
		ret = 15;
	afio_destroy(ctx);
	if (ret)
		return ret;

	afio_config_init(&cfg);
	cfg.backend = AFIO_BACKEND_LIBAIO;
	cfg.flags = AFIO_NO_FALLBACK;
	ret = afio_create(&ctx, &cfg);
	fprintf(stderr, "create libaio, no fallback: %d\n", ret);
	return ret == -EPERM && !ctx ? 0 : 16;
}

START_TEST(test_denied_by_seccomp)
{
	int status;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid)
		_exit(denied_child());
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "denied child: status %#x (see its stderr)", status);
}
END_TEST

/* More events than fs.aio-max-nr allows: the reason quotes the limits. */
START_TEST(test_aio_max_nr_reason)
{
	struct afio_config cfg;
	afio_ctx *ctx = NULL;
	char max[32];
	const char *why;
	FILE *f = fopen("/proc/sys/fs/aio-max-nr", "r");
	unsigned long lim;

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%lu", &lim), 1);
	fclose(f);
	if (lim >= (1ul << 20)) {
		printf("fs.aio-max-nr=%lu: above what a context may ask, case not run\n", lim);
		return;
	}
	afio_config_init(&cfg);
	cfg.backend = AFIO_BACKEND_LIBAIO;
	cfg.mode = target_mode;
	cfg.entries = (unsigned)lim + 1;
	ck_assert_int_eq(afio_create(&ctx, &cfg), 0);
	ck_assert_int_ne(afio_backend(ctx), AFIO_BACKEND_LIBAIO);
	why = afio_skip_reason(ctx, AFIO_BACKEND_LIBAIO);
	snprintf(max, sizeof(max), "fs.aio-max-nr=%lu,", lim);
	ck_assert_msg(!strncmp(why, "io_setup: ", 10) && strstr(why, strerror(EAGAIN)) &&
		      strstr(why, max) && strstr(why, "fs.aio-nr="), "reason: %s", why);
	afio_destroy(ctx);
}
END_TEST

/* A child of fork() closes its copy of the dup that a recv waiting in the
   kernel holds: left open, it would keep the parent's connection open.
   (Not in ASYNC, which hands sockets to the pool, whose dups a child
   leaves alone.)  No thread runs here, so the child may allocate, under
   the sanitizers too. */
START_TEST(test_fork_child_closes_socket_dups)
{
	afio_ctx *ctx = new_ctx();
	struct tu_done r = { 0 };
	char in[4];
	int sv[2], status;
	pid_t pid;

	tu_socketpair(sv);
	ck_assert_int_eq(afio_recv(ctx, sv[1], in, sizeof(in), 0, tu_on_done, &r), 0);
	ck_assert_int_eq(afio_submit(ctx), 1);
	ck_assert_int_ge(afio_poll(ctx, 0, 0), 0);
	ck_assert(tu_file_held_elsewhere(sv[1]));
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		afio_destroy(ctx);
		_exit(tu_file_held_elsewhere(sv[1]) ? 1 : 0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && !WEXITSTATUS(status),
		      "the child kept a copy of the socket");
	ck_assert_int_eq(write(sv[0], "ping", 4), 4);
	tu_wait_done(ctx, &r);
	ck_assert_int_eq(r.res, 4);
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* The rings of this process's kernel AIO contexts: each is mapped as
   "[aio]" in /proc/self/maps for as long as the context lives. */
static int aio_rings(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, "[aio]") != NULL;
	fclose(f);
	return n;
}

/*
 * afio_destroy() leaves io_destroy(), which waits for an RCU grace period
 * (some 33 ms), to no caller: an idle kernel context is kept and the next
 * context of the same size takes it, so a program that makes a context
 * per connection sets up and destroys no kernel context at all after the
 * first.  Counted by the rings mapped, not timed.  Then more contexts at
 * once than are kept: the rest go to the reaper thread, and a new round of
 * contexts still starts.
 */
START_TEST(test_destroy_keeps_kernel_context)
{
	afio_ctx *many[12];
	struct tu_done d;
	int sv[2], rings;
	char byte;

	tu_socketpair(sv);
	rings = -1;
	for (int i = 0; i < 50; i++) {
		afio_ctx *ctx = new_ctx();

		ck_assert_msg(rings < 0 || aio_rings() == rings,
			      "context %d: %d kernel contexts, %d after the first was destroyed", i,
			      aio_rings(), rings);
		/* A poll in the kernel, canceled by the destroy. */
		memset(&d, 0, sizeof(d));
		ck_assert_int_eq(afio_recv(ctx, sv[1], &byte, 1, 0, tu_on_done, &d), 0);
		ck_assert_int_ge(afio_submit(ctx), 0);
		afio_destroy(ctx);
		ck_assert_int_eq(d.calls, 1);
		ck_assert_int_eq(d.res, -ECANCELED);
		if (rings < 0)
			rings = aio_rings();
		ck_assert_msg(aio_rings() == rings, "after destroy %d: %d kernel contexts, %d before",
			      i, aio_rings(), rings);
	}
	ck_assert_int_gt(rings, 0);
	for (int round = 0; round < 3; round++) {
		for (unsigned i = 0; i < sizeof(many) / sizeof(many[0]); i++)
			many[i] = new_ctx();
		for (unsigned i = 0; i < sizeof(many) / sizeof(many[0]); i++)
			afio_destroy(many[i]);
	}
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/*
 * libaio keeps in the kernel only aligned O_DIRECT reads and writes, fsync
 * and socket readiness: paths, close, statx, fallocate, ftruncate,
 * sync_range and timers are the pool's.
 */
START_TEST(test_libaio_pool_ops)
{
	static const char *const pooled[] = {
		"timeout", "openat", "openat2", "close", "statx", "fallocate",
		"ftruncate", "sync_range", "renameat", "unlinkat", "mkdirat",
	};
	afio_ctx *ctx = new_ctx();

	for (size_t i = 0; i < sizeof(pooled) / sizeof(pooled[0]); i++) {
		int op = tu_op_number(pooled[i]);

		ck_assert_msg(op >= 0, "afio_%s is not in the op table", pooled[i]);
		ck_assert_msg(afio_op_native(ctx, (unsigned)op, NULL, 0) == 0,
			      "libaio says it runs %s natively", pooled[i]);
	}
	afio_destroy(ctx);
}
END_TEST

static Suite *libaio_suite(void)
{
	Suite *s = suite_create("libaio");
	TCase *direct = tcase_create("direct");
	TCase *sockets = tcase_create("sockets");
	TCase *probe = tcase_create("probe");

	tcase_add_test(direct, test_direct_aligned);
	tcase_add_test(direct, test_buffered_goes_to_pool);
	tcase_add_test(direct, test_buffered_run_cached);
	tcase_add_test(direct, test_buffered_run_evicted);
	tcase_add_test(direct, test_buffered_refused_run_keeps_tries);
	tcase_add_test(direct, test_buffered_short_try_goes_on);
	tcase_add_test(direct, test_buffered_run_at_eof);
	tcase_add_test(direct, test_buffered_run_not_a_file);
	tcase_add_test(direct, test_buffered_run_writes);
	tcase_add_test(direct, test_buffered_run_canceled);
	tcase_add_test(direct, test_direct_misaligned);
	tcase_add_test(direct, test_direct_extending_write);
	tcase_add_test(direct, test_fsync_in_kernel);
	tcase_add_test(direct, test_libaio_pool_ops);
	tcase_add_test(sockets, test_cancel_polled_recv);
	tcase_add_test(sockets, test_poll_rearmed);
	if (target_mode != AFIO_MODE_ASYNC)
		tcase_add_test(sockets, test_fork_child_closes_socket_dups);
	tcase_add_test(probe, test_denied_by_seccomp);
	tcase_add_test(probe, test_aio_max_nr_reason);
	tcase_add_test(probe, test_destroy_keeps_kernel_context);
	tcase_set_timeout(direct, 120);
	tcase_set_timeout(sockets, 120);
	tcase_set_timeout(probe, 120);
	suite_add_tcase(s, direct);
	suite_add_tcase(s, sockets);
	suite_add_tcase(s, probe);
	return s;
}

int main(int argc, char **argv)
{
	enum afio_backend b;
	int ret;

	ret = tu_parse_target(argc, argv, AFIO_BACKEND_LIBAIO, &b, &target_mode);
	if (ret)
		return ret;
	return tu_run_suite(libaio_suite());
}
