/* SPDX-License-Identifier: MIT */
/*
 * What is done to an open file, on one backend in one mode (from argv):
 * readv2 and writev2 with their flags, buffered and O_DIRECT, set against
 * preadv2(2); fallocate, ftruncate and sync_range, checked by what the
 * file holds afterwards; afio_dio_align() against statx(2); each with the
 * errors the Linux call gives; AFIO_CALLER_WRITES; afio_fd_hint(), by the
 * system calls a submitting thread makes with and without it.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "asyncfio.h"
#include "testutil.h"

static void read_whole(int fd, void *buf, size_t len, off_t off)
{
	ck_assert_int_eq(pread(fd, buf, len, off), len);
}

struct cachestat_range {
	uint64_t off, len;
};
struct cachestat {
	uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

/* Pages of fd's [off, off + len) not yet on the device (dirty or being
   written); -1 where the kernel cannot say. */
static long unsynced_pages(int fd, uint64_t off, uint64_t len)
{
	struct cachestat_range range = { off, len };
	struct cachestat cs;

	if (syscall(SYS_cachestat, fd, &range, &cs, 0))
		return -1;
	return (long)(cs.nr_dirty + cs.nr_writeback);
}

/* ---- readv2, writev2 ---- */

/* A write with RWF_DSYNC leaves nothing of its range unwritten in the
   page cache (cachestat(2) says so where the kernel has it). */
static void expect_synced(int fd, uint64_t off, uint64_t len, const char *what)
{
	long pages = unsynced_pages(fd, off, len);

	ck_assert_msg(pages <= 0, "%s on %s: %ld pages still dirty or in writeback", what,
		      tu_target_name(), pages);
}

START_TEST(test_writev2_flags)
{
	afio_ctx *ctx = tu_new_ctx();
	unsigned char *a = tu_random_bytes(8192, 1), *b = tu_random_bytes(3000, 2);
	struct iovec iov[] = { { a, 8192 }, { b, 3000 } };
	unsigned char back[11192];
	int fd = tu_new_file(0);

	TU_EXPECT(ctx, 11192, afio_writev2(ctx, fd, iov, 2, 4096, RWF_DSYNC, tu_on_done, &d));
	read_whole(fd, back, sizeof(back), 4096);
	ck_assert(!memcmp(back, a, 8192) && !memcmp(back + 8192, b, 3000));
	expect_synced(fd, 4096, 11192, "writev2(RWF_DSYNC)");
	TU_EXPECT(ctx, 3000, afio_writev2(ctx, fd, &iov[1], 1, 0, RWF_SYNC, tu_on_done, &d));
	expect_synced(fd, 0, 3000, "writev2(RWF_SYNC)");
	/* The library's word goes no further: the kernel would refuse it. */
	TU_EXPECT(ctx, 8192, afio_writev2(ctx, fd, iov, 1, 4096, AFIO_RWF_BUFFERED | RWF_DSYNC,
					  tu_on_done, &d));
	expect_synced(fd, 4096, 8192, "writev2(AFIO_RWF_BUFFERED | RWF_DSYNC)");
	read_whole(fd, back, 8192, 4096);
	ck_assert(!memcmp(back, a, 8192));

	/* RWF_APPEND: at the end whatever the offset, as pwritev2(2); the
	   file position stays. */
	ck_assert_int_eq(lseek(fd, 5, SEEK_SET), 5);
	TU_EXPECT(ctx, 3000, afio_writev2(ctx, fd, &iov[1], 1, 0, RWF_APPEND, tu_on_done, &d));
	ck_assert_int_eq(tu_stat_fd(fd).st_size, 4096 + 11192 + 3000);
	read_whole(fd, back, 3000, 4096 + 11192);
	ck_assert_msg(!memcmp(back, b, 3000), "writev2(RWF_APPEND) on %s did not append",
		      tu_target_name());
	read_whole(fd, back, 3000, 0);
	ck_assert_msg(!memcmp(back, b, 3000), "writev2(RWF_APPEND) on %s wrote at its offset",
		      tu_target_name());
	ck_assert_int_eq(lseek(fd, 0, SEEK_CUR), 5);
	afio_destroy(ctx);
	close(fd);
	free(a);
	free(b);
}
END_TEST

/* readv2 with rwf gives what preadv2(2) gives on this fd with rwf. */
static void readv2_like_preadv2(afio_ctx *ctx, int fd, void *buf, size_t len, uint64_t off,
				int rwf, const char *what)
{
	/* Aligned as buf is, for O_DIRECT. */
	unsigned char *want = aligned_alloc(4096, (len + 4095) / 4096 * 4096);
	struct iovec iov = { want, len };
	struct tu_done r = { 0 };
	ssize_t ref;

	ck_assert_ptr_nonnull(want);
	ref = tu_sys_res(preadv2(fd, &iov, 1, (off_t)off, rwf));
	memset(buf, 0, len);
	iov.iov_base = buf;
	tu_queued(afio_readv2(ctx, fd, &iov, 1, off, rwf, tu_on_done, &r), what);
	tu_wait_once(ctx, &r, what);
	ck_assert_msg(r.res == ref, "%s on %s: %s, preadv2(2) says %s", what, tu_target_name(),
		      tu_res_str(r.res), tu_res_str(ref));
	if (ref > 0)
		ck_assert_msg(!memcmp(buf, want, (size_t)ref), "%s on %s read other bytes", what,
			      tu_target_name());
	free(want);
}

START_TEST(test_readv2_flags)
{
	unsigned char *bytes = tu_random_bytes(20000, 3), buf[8192];
	afio_ctx *ctx = tu_new_ctx();
	int fd = tu_data_file(bytes, 20000);

	readv2_like_preadv2(ctx, fd, buf, sizeof(buf), 100, 0, "readv2");
	ck_assert(!memcmp(buf, bytes + 100, sizeof(buf)));
	/* A hint on a buffered file: the data, as without it. */
	readv2_like_preadv2(ctx, fd, buf, sizeof(buf), 4096, RWF_HIPRI, "readv2(RWF_HIPRI)");
	ck_assert(!memcmp(buf, bytes + 4096, sizeof(buf)));
	readv2_like_preadv2(ctx, fd, buf, sizeof(buf), 16000, RWF_HIPRI,
			    "readv2(RWF_HIPRI) at the end");
	readv2_like_preadv2(ctx, fd, buf, sizeof(buf), 30000, 0, "readv2 past the end");
	/* The library's own word, which preadv2(2) would refuse. */
	struct iovec iov = { buf, sizeof(buf) };

	memset(buf, 0, sizeof(buf));
	TU_EXPECT(ctx, sizeof(buf), afio_readv2(ctx, fd, &iov, 1, 200, AFIO_RWF_BUFFERED | RWF_HIPRI,
						tu_on_done, &d));
	ck_assert(!memcmp(buf, bytes + 200, sizeof(buf)));
	afio_destroy(ctx);
	close(fd);
	free(bytes);
}
END_TEST

/*
 * The same flags on an O_DIRECT file, aligned (where libaio runs readv2
 * and writev2 in the kernel): RWF_DSYNC, RWF_APPEND, RWF_HIPRI as
 * preadv2(2) does them on this fd.
 */
START_TEST(test_rwf_direct)
{
	int fd = tu_tmpfile(O_DIRECT);
	unsigned char *buf, *ref;
	afio_ctx *ctx;
	size_t blk, mem;
	struct iovec iov[2];

	if (fd == -EINVAL) {
		printf("no O_DIRECT in $AFIO_TEST_DIR: test_rwf_direct skipped\n");
		return;
	}
	ck_assert_int_ge(fd, 0);
	blk = tu_direct_block(fd, &mem);
	if (!blk) {
		printf("afio_dio_align: -EOPNOTSUPP: test_rwf_direct skipped\n");
		close(fd);
		return;
	}
	ctx = tu_new_ctx();
	buf = aligned_alloc(mem, 4 * blk);
	ref = tu_random_bytes(4 * blk, 11);
	ck_assert_ptr_nonnull(buf);
	memcpy(buf, ref, 4 * blk);
	/* Preallocated, so no write extends the file but the append. */
	ck_assert_int_eq(ftruncate(fd, (off_t)(2 * blk)), 0);
	iov[0] = (struct iovec){ buf, blk };
	iov[1] = (struct iovec){ buf + blk, blk };
	TU_EXPECT(ctx, 2 * blk, afio_writev2(ctx, fd, iov, 2, 0, RWF_DSYNC, tu_on_done, &d));
	iov[0] = (struct iovec){ buf + 2 * blk, blk };
	TU_EXPECT(ctx, blk, afio_writev2(ctx, fd, iov, 1, 0, RWF_APPEND, tu_on_done, &d));
	ck_assert_msg(tu_stat_fd(fd).st_size == (off_t)(3 * blk),
		      "writev2(RWF_APPEND) on O_DIRECT on %s: size %lld, want %zu",
		      tu_target_name(), (long long)tu_stat_fd(fd).st_size, 3 * blk);
	readv2_like_preadv2(ctx, fd, buf, 3 * blk, 0, RWF_HIPRI, "readv2(RWF_HIPRI) of O_DIRECT");
	ck_assert_msg(!memcmp(buf, ref, 3 * blk), "O_DIRECT file on %s holds other bytes",
		      tu_target_name());
	readv2_like_preadv2(ctx, fd, buf, blk, blk, 0, "readv2 of O_DIRECT");
	afio_destroy(ctx);
	free(buf);
	free(ref);
	close(fd);
}
END_TEST

START_TEST(test_rw2_errors)
{
	afio_ctx *ctx = tu_new_ctx();
	char buf[16];
	struct iovec iov = { buf, sizeof(buf) };
	int fd = tu_new_file(0), rdonly;
	char path[64];
	ssize_t want;

	TU_EXPECT(ctx, -EBADF, afio_readv2(ctx, tu_closed_fd(), &iov, 1, 0, 0, tu_on_done, &d));
	TU_EXPECT(ctx, -EBADF, afio_writev2(ctx, tu_closed_fd(), &iov, 1, 0, 0, tu_on_done, &d));
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rdonly = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(rdonly, 0);
	TU_EXPECT(ctx, -EBADF, afio_writev2(ctx, rdonly, &iov, 1, 0, 0, tu_on_done, &d));
	/* A flag preadv2(2) does not know: its error, at once or later. */
	want = tu_sys_res(preadv2(fd, &iov, 1, 0, 0x40000000));
	ck_assert_int_lt(want, 0);
	TU_EITHER(ctx, want, afio_readv2(ctx, fd, &iov, 1, 0, 0x40000000, tu_on_done, &d));
	afio_destroy(ctx);
	close(rdonly);
	close(fd);
}
END_TEST

/* ---- fallocate, ftruncate, sync_range ---- */

START_TEST(test_fallocate)
{
	afio_ctx *ctx = tu_new_ctx();
	int fd = tu_new_file(0), rdonly;
	unsigned char *bytes = tu_random_bytes(65536, 5), back[65536];
	struct stat st;
	char path[64];
	ssize_t want;

	TU_EXPECT(ctx, 0, afio_fallocate(ctx, fd, 0, 0, 1 << 20, tu_on_done, &d));
	st = tu_stat_fd(fd);
	ck_assert_msg(st.st_size == 1 << 20, "fallocate on %s: size %lld", tu_target_name(),
		      (long long)st.st_size);
	ck_assert_msg(st.st_blocks * 512 >= 1 << 20, "fallocate on %s: %lld blocks",
		      tu_target_name(), (long long)st.st_blocks);
	/* KEEP_SIZE: blocks beyond the end, the size as it was. */
	TU_EXPECT(ctx, 0, afio_fallocate(ctx, fd, FALLOC_FL_KEEP_SIZE, 1 << 20, 1 << 20, tu_on_done,
					 &d));
	st = tu_stat_fd(fd);
	ck_assert_int_eq(st.st_size, 1 << 20);
	ck_assert_msg(st.st_blocks * 512 >= 2 << 20, "fallocate(KEEP_SIZE) on %s: %lld blocks",
		      tu_target_name(), (long long)st.st_blocks);
	/* A hole punched in data reads as zeros. */
	ck_assert_int_eq(pwrite(fd, bytes, sizeof(back), 0), sizeof(back));
	TU_EXPECT(ctx, 0, afio_fallocate(ctx, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096,
					 8192, tu_on_done, &d));
	read_whole(fd, back, sizeof(back), 0);
	ck_assert(!memcmp(back, bytes, 4096));
	for (int i = 4096; i < 12288; i++)
		ck_assert_msg(!back[i], "fallocate(PUNCH_HOLE) on %s: byte %d is not 0",
			      tu_target_name(), i);
	ck_assert(!memcmp(back + 12288, bytes + 12288, sizeof(back) - 12288));
	ck_assert_int_eq(tu_stat_fd(fd).st_size, 1 << 20);

	/* Errors fallocate(2) gives: length 0, a mode it does not know, a
	   file not open for writing, a closed fd. */
	want = tu_sys_res(fallocate(fd, 0, 0, 0));
	ck_assert_int_lt(want, 0);
	TU_EITHER(ctx, want, afio_fallocate(ctx, fd, 0, 0, 0, tu_on_done, &d));
	want = tu_sys_res(fallocate(fd, 0x4000, 0, 4096));
	ck_assert_int_lt(want, 0);
	TU_EITHER(ctx, want, afio_fallocate(ctx, fd, 0x4000, 0, 4096, tu_on_done, &d));
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rdonly = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(rdonly, 0);
	TU_EXPECT(ctx, -EBADF, afio_fallocate(ctx, rdonly, 0, 0, 4096, tu_on_done, &d));
	TU_EXPECT(ctx, -EBADF, afio_fallocate(ctx, tu_closed_fd(), 0, 0, 4096, tu_on_done, &d));
	afio_destroy(ctx);
	close(rdonly);
	close(fd);
	free(bytes);
}
END_TEST

START_TEST(test_ftruncate)
{
	afio_ctx *ctx = tu_new_ctx();
	int fd = tu_new_file(0), rdonly, sv[2];
	char buf[16], path[64];
	ssize_t want;

	ck_assert_int_eq(pwrite(fd, "0123456789", 10, 0), 10);
	TU_EXPECT(ctx, 0, afio_ftruncate(ctx, fd, 12345, tu_on_done, &d));
	ck_assert_msg(tu_stat_fd(fd).st_size == 12345, "ftruncate on %s: size %lld",
		      tu_target_name(), (long long)tu_stat_fd(fd).st_size);
	read_whole(fd, buf, 10, 0);
	ck_assert(!memcmp(buf, "0123456789", 10));
	read_whole(fd, buf, 1, 12344);
	ck_assert_int_eq(buf[0], 0);
	TU_EXPECT(ctx, 0, afio_ftruncate(ctx, fd, 4, tu_on_done, &d));
	ck_assert_int_eq(tu_stat_fd(fd).st_size, 4);
	ck_assert_int_eq(pread(fd, buf, sizeof(buf), 0), 4);
	ck_assert(!memcmp(buf, "0123", 4));
	TU_EXPECT(ctx, 0, afio_ftruncate(ctx, fd, 0, tu_on_done, &d));
	ck_assert_int_eq(tu_stat_fd(fd).st_size, 0);

	/* What ftruncate(2) says for a read-only fd and a socket. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rdonly = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(rdonly, 0);
	want = tu_sys_res(ftruncate(rdonly, 1));
	ck_assert_int_lt(want, 0);
	TU_EXPECT(ctx, want, afio_ftruncate(ctx, rdonly, 1, tu_on_done, &d));
	tu_socketpair(sv);
	want = tu_sys_res(ftruncate(sv[0], 1));
	ck_assert_int_lt(want, 0);
	TU_EXPECT(ctx, want, afio_ftruncate(ctx, sv[0], 1, tu_on_done, &d));
	TU_EXPECT(ctx, -EBADF, afio_ftruncate(ctx, tu_closed_fd(), 1, tu_on_done, &d));
	ck_assert_int_eq(tu_stat_fd(fd).st_size, 0);
	afio_destroy(ctx);
	close(rdonly);
	close(fd);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

START_TEST(test_sync_range)
{
	const unsigned all = SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
			     SYNC_FILE_RANGE_WAIT_AFTER;
	unsigned char *bytes = tu_random_bytes(1 << 18, 9);
	afio_ctx *ctx = tu_new_ctx();
	int fd = tu_new_file(0);
	ssize_t want;

	ck_assert_int_eq(pwrite(fd, bytes, 1 << 18, 0), 1 << 18);
	TU_EXPECT(ctx, 0, afio_sync_range(ctx, fd, 0, 1 << 17, all, tu_on_done, &d));
	expect_synced(fd, 0, 1 << 17, "sync_range(WAIT_BEFORE|WRITE|WAIT_AFTER)");
	TU_EXPECT(ctx, 0,
		  afio_sync_range(ctx, fd, 1 << 17, 0, SYNC_FILE_RANGE_WRITE, tu_on_done, &d));
	TU_EXPECT(ctx, 0, afio_sync_range(ctx, fd, 1 << 17, 0, all, tu_on_done, &d));
	expect_synced(fd, 0, 1 << 18, "sync_range to the end (length 0)");
	want = tu_sys_res(sync_file_range(fd, 0, 0, 0x100));
	ck_assert_int_lt(want, 0);
	TU_EITHER(ctx, want, afio_sync_range(ctx, fd, 0, 0, 0x100, tu_on_done, &d));
	TU_EXPECT(ctx, -EBADF, afio_sync_range(ctx, tu_closed_fd(), 0, 0, all, tu_on_done, &d));
	afio_destroy(ctx);
	close(fd);
	free(bytes);
}
END_TEST

/* ---- dio_align ---- */

START_TEST(test_dio_align)
{
	int fd = tu_tmpfile(O_DIRECT), p[2];
	struct afio_dio_align al = { 0, 0 };
	struct statx stx;
	unsigned char *buf;
	int ret;

	if (fd == -EINVAL) {
		printf("no O_DIRECT in $AFIO_TEST_DIR: test_dio_align skipped\n");
		return;
	}
	ck_assert_int_ge(fd, 0);
	ret = afio_dio_align(fd, &al);
	ck_assert_int_eq(statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx), 0);
	if ((stx.stx_mask & STATX_DIOALIGN) && !stx.stx_dio_offset_align) {
		ck_assert_msg(ret == -EOPNOTSUPP,
			      "afio_dio_align where statx says no direct I/O: %s", tu_res_str(ret));
		close(fd);
		return;
	}
	ck_assert_msg(ret == 0, "afio_dio_align: %s", tu_res_str(ret));
	if (stx.stx_mask & STATX_DIOALIGN) {
		ck_assert_int_eq(al.mem, stx.stx_dio_mem_align);
		ck_assert_int_eq(al.offset, stx.stx_dio_offset_align);
	}
	ck_assert_msg(al.mem && !(al.mem & (al.mem - 1)), "mem alignment %u", al.mem);
	ck_assert_msg(al.offset && !(al.offset & (al.offset - 1)), "offset alignment %u",
		      al.offset);
	/* Direct I/O at exactly that alignment works. */
	buf = aligned_alloc(al.mem, 2 * al.offset);
	ck_assert_ptr_nonnull(buf);
	memset(buf, 'd', 2 * al.offset);
	ck_assert_int_eq(pwrite(fd, buf, al.offset, al.offset), al.offset);
	ck_assert_int_eq(pread(fd, buf, al.offset, al.offset), al.offset);
	free(buf);

	/* A pipe: no file system doing direct I/O. */
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	ret = afio_dio_align(p[0], &al);
	ck_assert_msg(ret == -EOPNOTSUPP, "afio_dio_align of a pipe: %s", tu_res_str(ret));
	ck_assert_int_eq(afio_dio_align(tu_closed_fd(), &al), -EBADF);
	ck_assert_int_eq(afio_dio_align(-1, &al), -EBADF);
	ck_assert_int_eq(afio_dio_align(fd, NULL), -EINVAL);
	close(p[0]);
	close(p[1]);
	close(fd);
}
END_TEST

/* ---- AFIO_CALLER_WRITES ---- */

#define CALLER_RUN 16

/* Buffered writes under AFIO_CALLER_WRITES end as they would without it,
   on every backend and mode; in INLINE, on the backends that hand them to
   the pool otherwise, they are made while afio_submit() runs (the file
   holds them before any poll) and count as finished at once.  An error is
   pwrite(2)'s, and O_DIRECT writes still reach the file. */
START_TEST(test_caller_writes)
{
	afio_ctx *ctx = tu_ctx_flagged(tu_backend, tu_mode, 64, AFIO_CALLER_WRITES);
	unsigned char *bytes = tu_random_bytes(CALLER_RUN * 4096, 7);
	unsigned char *back = malloc(CALLER_RUN * 4096);
	bool in_caller = tu_mode == AFIO_MODE_INLINE && tu_backend != AFIO_BACKEND_IO_URING;
	struct iovec iov[CALLER_RUN];
	struct tu_done d[CALLER_RUN] = { { 0 } };
	struct afio_stats st;
	int fd = tu_new_file(0), dfd, p[2], write_op = tu_op_number("write");
	char how[256];

	ck_assert_ptr_nonnull(back);
	/* Backwards, half of them writev: each its own request of one run. */
	for (int i = CALLER_RUN - 1; i >= 0; i--) {
		unsigned char *at = bytes + (size_t)i * 4096;

		iov[i] = (struct iovec){ at, 4096 };
		tu_queued(i % 2 ? afio_writev(ctx, fd, &iov[i], 1, (uint64_t)i * 4096,
					      tu_on_done, &d[i]) :
				  afio_write(ctx, fd, at, 4096, (uint64_t)i * 4096, tu_on_done, &d[i]),
			  "afio_write");
	}
	ck_assert_int_ge(afio_submit(ctx), 0);
	if (in_caller) {
		read_whole(fd, back, CALLER_RUN * 4096, 0);
		ck_assert_msg(!memcmp(back, bytes, CALLER_RUN * 4096),
			      "AFIO_CALLER_WRITES on %s: the file lacks the writes after afio_submit()",
			      tu_target_name());
	}
	for (int i = 0; i < CALLER_RUN; i++) {
		tu_wait_done(ctx, &d[i]);
		ck_assert_int_eq(d[i].calls, 1);
		tu_expect_eq(d[i].res, 4096, "afio_write under AFIO_CALLER_WRITES");
	}
	read_whole(fd, back, CALLER_RUN * 4096, 0);
	ck_assert(!memcmp(back, bytes, CALLER_RUN * 4096));
	ck_assert_int_eq(afio_stats(ctx, &st), 0);
	if (in_caller)
		ck_assert_msg(st.nowait >= CALLER_RUN, "%s: %llu of %d writes finished at once",
			      tu_target_name(), (unsigned long long)st.nowait, CALLER_RUN);
	/* afio_op_native(3) says where they go. */
	ck_assert_int_ge(write_op, 0);
	ck_assert_int_ge(afio_op_native(ctx, (unsigned)write_op, how, sizeof(how)), 0);
	ck_assert_msg(!in_caller == !strstr(how, "AFIO_CALLER_WRITES"),
		      "afio_op_native(write) on %s: %s", tu_target_name(), how);

	/* A lone write that extends the file, and one at an offset past its
	   end. */
	TU_EXPECT(ctx, 4096, afio_write(ctx, fd, bytes, 4096, CALLER_RUN * 4096, tu_on_done, &d));
	TU_EXPECT(ctx, 100, afio_write(ctx, fd, bytes, 100, 1 << 20, tu_on_done, &d));
	ck_assert_int_eq(tu_stat_fd(fd).st_size, (1 << 20) + 100);

	/* pwrite(2)'s errors: ESPIPE on a pipe (io_uring writes a pipe as
	   write(2) does), EBADF on a closed fd. */
	ck_assert_int_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
	TU_EXPECT(ctx, tu_backend == AFIO_BACKEND_IO_URING ? 100 : -ESPIPE,
		  afio_write(ctx, p[1], bytes, 100, 0, tu_on_done, &d));
	TU_EITHER(ctx, -EBADF, afio_write(ctx, tu_closed_fd(), bytes, 100, 0, tu_on_done, &d));
	close(p[0]);
	close(p[1]);

	dfd = tu_tmpfile(O_DIRECT);
	if (dfd >= 0) {
		size_t mem, blk = tu_direct_block(dfd, &mem);
		unsigned char *buf = blk ? aligned_alloc(mem, blk) : NULL;

		if (buf) {
			memcpy(buf, bytes, blk);
			TU_EXPECT(ctx, blk, afio_write(ctx, dfd, buf, blk, 0, tu_on_done, &d));
			read_whole(dfd, buf, blk, 0);
			ck_assert(!memcmp(buf, bytes, blk));
		}
		free(buf);
		close(dfd);
	}
	afio_destroy(ctx);
	free(bytes);
	free(back);
	close(fd);
}
END_TEST

/* ---- afio_fd_hint() ---- */

#define HINT_PAGES 8

#ifdef __x86_64__
#define TRAP_PASS 1	/* fcntl's unused third argument: let this one through */

static pid_t trap_tid;
static volatile sig_atomic_t trapped;

/* A trapped fcntl(F_GETFL) is made again and its answer given back, so
   that the library routes as without the trap; a trapped statx fails
   with ENOSYS, which the library takes as a kernel without it. */
static void on_sigsys(int sig, siginfo_t *si, void *ucv)
{
	greg_t *g = ((ucontext_t *)ucv)->uc_mcontext.gregs;
	int saved = errno;
	long ret;

	(void)sig;
	if ((pid_t)syscall(SYS_gettid) == trap_tid)
		trapped = trapped + 1;
	ret = -ENOSYS;
	if (si->si_syscall == SYS_fcntl) {
		ret = syscall(SYS_fcntl, (int)g[REG_RDI], (int)g[REG_RSI], TRAP_PASS);
		if (ret < 0)
			ret = -errno;
	}
	g[REG_RAX] = ret;
	errno = saved;
}

/* From now on this thread's fcntl(F_GETFL) and statx are counted. */
static int trap_fd_questions(void)
{
	struct sock_filter body[] = {
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_statx, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_fcntl, 0, 5),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, F_GETFL, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TRAP_PASS, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sigaction sa = { .sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO };

	trap_tid = (pid_t)syscall(SYS_gettid);
	if (sigaction(SIGSYS, &sa, NULL))
		return -errno;
	return tu_seccomp(body, sizeof(body) / sizeof(body[0]));
}

struct hint_run {
	afio_ctx *ctx;
	const unsigned char *bytes;
	int fd, dfd;		/* buffered, O_DIRECT (-1: none here) */
	size_t blk;		/* dfd's alignment */
	int trap_ret;
	bool same_number;	/* the fd opened after afio_close() got its number */
	int asked[6];		/* questions the submitting thread asked, by phase */
	bool data_right[6];
};

/* HINT_PAGES reads of fd in one submit, with rwf (afio_readv2()) or
   without (afio_read()), as many of the questions counted as the thread
   asked for them. */
static void read_counted(struct hint_run *h, int phase, int fd, size_t len, int rwf)
{
	unsigned char *back = aligned_alloc(4096, HINT_PAGES * 4096);
	struct tu_done d[HINT_PAGES] = { { 0 } };
	struct iovec iov[HINT_PAGES];
	int before = trapped;
	bool right = back != NULL;

	for (int i = 0; back && i < HINT_PAGES; i++) {
		iov[i] = (struct iovec){ back + i * len, len };
		right &= !(rwf ? afio_readv2(h->ctx, fd, &iov[i], 1, (uint64_t)i * len, rwf,
					     tu_on_done, &d[i]) :
				 afio_read(h->ctx, fd, back + i * len, len, (uint64_t)i * len,
					   tu_on_done, &d[i]));
	}
	right &= afio_submit(h->ctx) >= 0;
	for (int i = 0; back && i < HINT_PAGES; i++) {
		tu_wait_done(h->ctx, &d[i]);
		right &= d[i].calls == 1 && d[i].res == (ssize_t)len;
	}
	h->asked[phase] = trapped - before;
	h->data_right[phase] = right && !memcmp(back, h->bytes, HINT_PAGES * len);
	free(back);
}

static void *hinted_reads(void *arg)
{
	struct hint_run *h = arg;
	struct tu_done d = { 0 };
	int old;

	h->trap_ret = trap_fd_questions();
	if (h->trap_ret)
		return NULL;
	if (!afio_fd_hint(h->ctx, h->fd, AFIO_FD_BUFFERED))
		read_counted(h, 0, h->fd, 4096, 0);
	afio_fd_hint(h->ctx, h->fd, 0);
	read_counted(h, 1, h->fd, 4096, 0);
	/* The same word per request, no hint. */
	read_counted(h, 4, h->fd, 4096, AFIO_RWF_BUFFERED);
	if (h->dfd >= 0 && !afio_fd_hint(h->ctx, h->dfd, AFIO_FD_DIRECT))
		read_counted(h, 2, h->dfd, h->blk, 0);
	/* A wrong word: the reads may wait, the data are right. */
	if (h->dfd >= 0 && !afio_fd_hint(h->ctx, h->dfd, 0))
		read_counted(h, 5, h->dfd, h->blk, AFIO_RWF_BUFFERED);
	/* afio_close() drops the hint: the number, open again, is asked about. */
	old = h->fd;
	afio_fd_hint(h->ctx, h->fd, AFIO_FD_BUFFERED);
	if (!afio_close(h->ctx, h->fd, tu_on_done, &d)) {
		tu_wait_done(h->ctx, &d);
		h->fd = tu_data_file(h->bytes, HINT_PAGES * 4096);
		h->same_number = h->fd == old;
		read_counted(h, 3, h->fd, 4096, 0);
	}
	return NULL;
}
#endif

/* Its errors, and the questions a submit call asks the kernel about a file
   (fcntl F_GETFL, statx), counted on the submitting thread: none for a
   hinted fd, nor for requests with AFIO_RWF_BUFFERED, on every backend
   and mode; without either libaio and the pool ask, io_uring never does. */
START_TEST(test_fd_hint)
{
	afio_ctx *ctx = tu_ctx(tu_backend, tu_mode, 64);
	size_t len = HINT_PAGES * 4096;
	unsigned char *bytes = tu_random_bytes(len, 11);
	int fd = tu_data_file(bytes, len), dfd = tu_tmpfile(O_DIRECT);
	bool asks = tu_backend != AFIO_BACKEND_IO_URING;

	ck_assert_int_eq(afio_fd_hint(NULL, fd, AFIO_FD_BUFFERED), -EINVAL);
	ck_assert_int_eq(afio_fd_hint(ctx, -1, AFIO_FD_BUFFERED), -EBADF);
	ck_assert_int_eq(afio_fd_hint(ctx, tu_closed_fd(), AFIO_FD_BUFFERED), -EBADF);
	ck_assert_int_eq(afio_fd_hint(ctx, fd, AFIO_FD_BUFFERED | AFIO_FD_DIRECT), -EINVAL);
	ck_assert_int_eq(afio_fd_hint(ctx, fd, 1u << 7), -EINVAL);
	/* A hint the fd contradicts is refused: it would cost waiting. */
	ck_assert_int_eq(afio_fd_hint(ctx, fd, AFIO_FD_DIRECT), -EINVAL);
	ck_assert_int_eq(afio_fd_hint(ctx, fd, 0), 0);
	if (dfd >= 0)
		ck_assert_int_eq(afio_fd_hint(ctx, dfd, AFIO_FD_BUFFERED), -EINVAL);

#ifdef __x86_64__
	struct hint_run h = { .ctx = ctx, .bytes = bytes, .fd = fd, .dfd = -1 };
	pthread_t t;
	size_t mem;

	if (dfd >= 0) {
		h.blk = tu_direct_block(dfd, &mem);
		if (h.blk && h.blk <= 4096 && !(h.blk % mem)) {
			unsigned char *al = aligned_alloc(4096, len);

			ck_assert_ptr_nonnull(al);
			memcpy(al, bytes, len);
			ck_assert_int_eq(pwrite(dfd, al, len, 0), (ssize_t)len);
			free(al);
			h.dfd = dfd;
		}
	}
	ck_assert_int_eq(pthread_create(&t, NULL, hinted_reads, &h), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_msg(!h.trap_ret, "seccomp: %s", strerror(-h.trap_ret));
	ck_assert_msg(h.data_right[0] && h.data_right[1] && h.data_right[3],
		      "%s: reads of a hinted fd", tu_target_name());
	ck_assert_msg(!h.asked[0], "%s: %d questions about a buffered fd hinted so",
		      tu_target_name(), h.asked[0]);
	ck_assert_msg(!h.asked[1] == !asks, "%s: %d questions about an fd without a hint",
		      tu_target_name(), h.asked[1]);
	ck_assert_msg(h.data_right[4], "%s: reads with AFIO_RWF_BUFFERED", tu_target_name());
	ck_assert_msg(!h.asked[4], "%s: %d questions about reads with AFIO_RWF_BUFFERED",
		      tu_target_name(), h.asked[4]);
	ck_assert(h.same_number);
	ck_assert_msg(!h.asked[3] == !asks, "%s: %d questions about a number afio_close()d",
		      tu_target_name(), h.asked[3]);
	if (h.dfd >= 0) {
		ck_assert_msg(h.data_right[2], "%s: O_DIRECT reads of a hinted fd",
			      tu_target_name());
		ck_assert_msg(!h.asked[2], "%s: %d questions about an O_DIRECT fd hinted so",
			      tu_target_name(), h.asked[2]);
		ck_assert_msg(h.data_right[5], "%s: O_DIRECT reads with AFIO_RWF_BUFFERED",
			      tu_target_name());
	}
	close(h.fd);
#else
	close(fd);
#endif
	if (dfd >= 0)
		close(dfd);
	afio_destroy(ctx);
	free(bytes);
}
END_TEST

static Suite *files_suite(void)
{
	Suite *s = suite_create("files");
	TCase *rw2 = tu_tcase(s, "rw2");
	TCase *space = tu_tcase(s, "space");
	TCase *dio_align = tu_tcase(s, "dio_align");
	TCase *caller_writes = tu_tcase(s, "caller_writes");
	TCase *fd_hint = tu_tcase(s, "fd_hint");

	tcase_add_test(rw2, test_writev2_flags);
	tcase_add_test(rw2, test_readv2_flags);
	tcase_add_test(rw2, test_rwf_direct);
	tcase_add_test(rw2, test_rw2_errors);
	tcase_add_test(space, test_fallocate);
	tcase_add_test(space, test_ftruncate);
	tcase_add_test(space, test_sync_range);
	tcase_add_test(dio_align, test_dio_align);
	tcase_add_test(caller_writes, test_caller_writes);
	tcase_add_test(fd_hint, test_fd_hint);
	return s;
}

int main(int argc, char **argv)
{
	return tu_main(argc, argv, files_suite);
}
