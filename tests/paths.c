/* SPDX-License-Identifier: MIT */
/*
 * The calls that take a path, and close, on one backend in one mode (from
 * argv): openat, openat2 (RESOLVE_* kept wherever the op runs), close,
 * statx set field by field against statx(2) and through every turn of a
 * path walk, renameat, unlinkat and mkdirat, and a relative path from
 * AT_FDCWD; each with the errors the Linux call gives.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "asyncfio.h"
#include "testutil.h"

/* t's path joined with name, in one of a few buffers. */
static const char *tdir_abs(const struct tu_dir *t, const char *name)
{
	static char bufs[4][PATH_MAX + 64];
	static unsigned next;
	char *b = bufs[next++ % 4];

	snprintf(b, sizeof(bufs[0]), "%s/%s", t->path, name);
	return b;
}

/* A new directory name in dirfd, open. */
static int make_dir(int dirfd, const char *name)
{
	int fd;

	ck_assert_int_eq(mkdirat(dirfd, name, 0700), 0);
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	return fd;
}

static struct stat stat_at(int dirfd, const char *name)
{
	struct stat st;

	ck_assert_msg(!fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW), "stat %s: %s", name,
		      strerror(errno));
	return st;
}

/* ---- openat, openat2, close ---- */

START_TEST(test_openat)
{
	afio_ctx *ctx = tu_new_ctx();
	mode_t old_mask = umask(027);
	struct tu_dir dir;
	struct stat st;
	char buf[8] = "";
	int fd;

	tu_dir_make(&dir);
	fd = TU_RUN_FD(ctx, afio_openat(ctx, dir.fd, "new", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
					0666, tu_on_done, &d));
	st = stat_at(dir.fd, "new");
	ck_assert_msg(tu_same_file(fd, &st), "the fd opened is not the file created");
	ck_assert_msg((st.st_mode & 07777) == 0640, "created with mode %o (umask 027, mode 0666)",
		      (unsigned)(st.st_mode & 07777));
	ck_assert_int_eq(fcntl(fd, F_GETFD), FD_CLOEXEC);
	ck_assert_int_eq(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDWR);
	ck_assert_int_eq(write(fd, "data", 4), 4);
	close(fd);

	/* Without O_CLOEXEC, read-only, by absolute path from AT_FDCWD. */
	fd = TU_RUN_FD(ctx, afio_openat(ctx, AT_FDCWD, tdir_abs(&dir, "new"), O_RDONLY, 0,
					tu_on_done, &d));
	ck_assert_int_eq(fcntl(fd, F_GETFD), 0);
	ck_assert_int_eq(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
	ck_assert_int_eq(read(fd, buf, sizeof(buf)), 4);
	ck_assert(!memcmp(buf, "data", 4));
	close(fd);

	TU_EXPECT(ctx, -ENOENT, afio_openat(ctx, dir.fd, "missing", O_RDONLY, 0, tu_on_done, &d));
	TU_EXPECT(ctx, -EEXIST, afio_openat(ctx, dir.fd, "new", O_RDWR | O_CREAT | O_EXCL, 0600,
					    tu_on_done, &d));
	TU_EXPECT(ctx, -ENOTDIR, afio_openat(ctx, dir.fd, "new/x", O_RDONLY, 0, tu_on_done, &d));
	TU_EXPECT(ctx, -EBADF,
		  afio_openat(ctx, tu_closed_fd(), "new", O_RDONLY, 0, tu_on_done, &d));
	umask(old_mask);
	afio_destroy(ctx);
	tu_dir_remove(&dir);
}
END_TEST

START_TEST(test_openat2)
{
	afio_ctx *ctx = tu_new_ctx();
	struct open_how how;
	struct tu_dir dir;
	struct stat st;
	int sub, fd;

	tu_dir_make(&dir);
	tu_put_file(dir.fd, "x", "outside");
	sub = make_dir(dir.fd, "sub");
	tu_put_file(sub, "f", "inside");
	ck_assert_int_eq(symlinkat("f", sub, "link"), 0);

	how = tu_how_of(O_RDONLY | O_CLOEXEC, 0, RESOLVE_BENEATH);
	fd = TU_RUN_FD(ctx, afio_openat2(ctx, sub, "f", &how, tu_on_done, &d));
	st = stat_at(sub, "f");
	ck_assert(tu_same_file(fd, &st));
	ck_assert_int_eq(fcntl(fd, F_GETFD), FD_CLOEXEC);
	close(fd);
	/* ".." that stays beneath is fine; one that leaves is EXDEV. */
	fd = TU_RUN_FD(ctx, afio_openat2(ctx, dir.fd, "sub/../sub/f", &how, tu_on_done, &d));
	ck_assert(tu_same_file(fd, &st));
	close(fd);
	TU_EXPECT(ctx, -EXDEV, afio_openat2(ctx, sub, "../x", &how, tu_on_done, &d));
	TU_EXPECT(ctx, -EXDEV, afio_openat2(ctx, sub, tdir_abs(&dir, "x"), &how, tu_on_done, &d));
	how = tu_how_of(O_RDONLY, 0, RESOLVE_NO_SYMLINKS);
	TU_EXPECT(ctx, -ELOOP, afio_openat2(ctx, sub, "link", &how, tu_on_done, &d));

	/* how->mode for O_CREAT, under the umask. */
	{
		mode_t old_mask = umask(022);

		how = tu_how_of(O_WRONLY | O_CREAT | O_EXCL, 0604, 0);
		fd = TU_RUN_FD(ctx, afio_openat2(ctx, sub, "made", &how, tu_on_done, &d));
		umask(old_mask);
		st = stat_at(sub, "made");
		ck_assert(tu_same_file(fd, &st));
		ck_assert_int_eq(st.st_mode & 07777, 0604);
		close(fd);
	}
	/* The caller's RESOLVE_CACHED is kept, wherever the op runs: with
	   O_CREAT or O_TRUNC openat2(2) gives EAGAIN and does nothing. */
	how = tu_how_of(O_RDWR | O_CREAT, 0600, RESOLVE_CACHED);
	TU_EXPECT(ctx, -EAGAIN, afio_openat2(ctx, sub, "cached", &how, tu_on_done, &d));
	ck_assert_msg(!tu_exists_at(sub, "cached"),
		      "openat2(O_CREAT, RESOLVE_CACHED) on %s created it", tu_target_name());
	how = tu_how_of(O_RDWR | O_TRUNC, 0, RESOLVE_CACHED);
	TU_EXPECT(ctx, -EAGAIN, afio_openat2(ctx, sub, "f", &how, tu_on_done, &d));
	ck_assert_int_eq(stat_at(sub, "f").st_size, 6);

	how = tu_how_of(O_RDONLY, 0, 0);
	TU_EXPECT(ctx, -ENOENT, afio_openat2(ctx, sub, "missing", &how, tu_on_done, &d));
	fd = TU_RUN_FD(ctx, afio_openat2(ctx, AT_FDCWD, tdir_abs(&dir, "x"), &how, tu_on_done, &d));
	close(fd);
	TU_EXPECT(ctx, -EBADF, afio_openat2(ctx, tu_closed_fd(), "f", &how, tu_on_done, &d));
	/* What openat2(2) refuses: a mode without O_CREAT, an unknown
	   resolve bit. */
	how = tu_how_of(O_RDONLY, 0600, 0);
	TU_EITHER(ctx, -EINVAL, afio_openat2(ctx, sub, "f", &how, tu_on_done, &d));
	how = tu_how_of(O_RDONLY, 0, 1ull << 40);
	TU_EITHER(ctx, -EINVAL, afio_openat2(ctx, sub, "f", &how, tu_on_done, &d));
	afio_destroy(ctx);
	close(sub);
	tu_dir_remove(&dir);
}
END_TEST

START_TEST(test_close)
{
	afio_ctx *ctx = tu_new_ctx();
	int file = tu_new_file(0), sv[2], fd;
	struct stat st = tu_stat_fd(file);
	char c;

	fd = dup(file);
	ck_assert_int_ge(fd, 0);
	TU_EXPECT(ctx, 0, afio_close(ctx, fd, tu_on_done, &d));
	/* Closed: the number is free, or taken since by another file. */
	ck_assert_msg(fcntl(fd, F_GETFD) < 0 ? errno == EBADF : !tu_same_file(fd, &st),
		      "afio_close on %s left fd %d open", tu_target_name(), fd);
	tu_socketpair(sv);
	TU_EXPECT(ctx, 0, afio_close(ctx, sv[1], tu_on_done, &d));
	/* The peer sees the end of the stream. */
	ck_assert(tu_wait_readable(sv[0]));
	ck_assert_int_eq(read(sv[0], &c, 1), 0);
	TU_EXPECT(ctx, -EBADF, afio_close(ctx, tu_closed_fd(), tu_on_done, &d));
	afio_destroy(ctx);
	close(sv[0]);
	close(file);
}
END_TEST

/* ---- statx ---- */

#define STX_FIELD_EQ(a, b, f)								\
	ck_assert_msg((a)->f == (b)->f, "statx on %s: " #f " %llu, statx(2) says %llu",	\
		      tu_target_name(), (unsigned long long)(a)->f, (unsigned long long)(b)->f)

/* What statx(2) says for the same arguments, field by field, then all. */
static void same_statx(const struct statx *got, int dirfd, const char *path, int flags,
		       unsigned mask)
{
	struct statx want;

	memset(&want, 0x55, sizeof(want));
	ck_assert_int_eq(statx(dirfd, path, flags, mask, &want), 0);
	STX_FIELD_EQ(got, &want, stx_mask);
	STX_FIELD_EQ(got, &want, stx_mode);
	STX_FIELD_EQ(got, &want, stx_ino);
	STX_FIELD_EQ(got, &want, stx_size);
	STX_FIELD_EQ(got, &want, stx_blocks);
	STX_FIELD_EQ(got, &want, stx_nlink);
	STX_FIELD_EQ(got, &want, stx_uid);
	STX_FIELD_EQ(got, &want, stx_mtime.tv_sec);
	STX_FIELD_EQ(got, &want, stx_mtime.tv_nsec);
	STX_FIELD_EQ(got, &want, stx_btime.tv_nsec);
	STX_FIELD_EQ(got, &want, stx_dev_major);
	STX_FIELD_EQ(got, &want, stx_dev_minor);
	ck_assert_msg(!memcmp(got, &want, sizeof(want)), "statx on %s differs from statx(2)",
		      tu_target_name());
}

START_TEST(test_statx)
{
	const unsigned mask = STATX_BASIC_STATS | STATX_BTIME;
	afio_ctx *ctx = tu_new_ctx();
	struct statx stx;
	struct tu_dir dir;
	int fd;

	tu_dir_make(&dir);
	tu_put_file(dir.fd, "f", "twelve bytes");
	ck_assert_int_eq(symlinkat("f", dir.fd, "link"), 0);
	memset(&stx, 0xaa, sizeof(stx));
	TU_EXPECT(ctx, 0, afio_statx(ctx, dir.fd, "f", 0, mask, &stx, tu_on_done, &d));
	ck_assert_int_eq(stx.stx_size, 12);
	ck_assert(S_ISREG(stx.stx_mode));
	same_statx(&stx, dir.fd, "f", 0, mask);

	memset(&stx, 0xaa, sizeof(stx));
	TU_EXPECT(ctx, 0, afio_statx(ctx, dir.fd, "link", AT_SYMLINK_NOFOLLOW, mask, &stx,
				     tu_on_done, &d));
	ck_assert(S_ISLNK(stx.stx_mode));
	same_statx(&stx, dir.fd, "link", AT_SYMLINK_NOFOLLOW, mask);

	/* An fd with an empty path; AT_FDCWD with an absolute one. */
	fd = openat(dir.fd, "f", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	memset(&stx, 0xaa, sizeof(stx));
	TU_EXPECT(ctx, 0, afio_statx(ctx, fd, "", AT_EMPTY_PATH, STATX_SIZE, &stx, tu_on_done, &d));
	same_statx(&stx, fd, "", AT_EMPTY_PATH, STATX_SIZE);
	memset(&stx, 0xaa, sizeof(stx));
	TU_EXPECT(ctx, 0, afio_statx(ctx, AT_FDCWD, dir.path, 0, mask, &stx, tu_on_done, &d));
	ck_assert(S_ISDIR(stx.stx_mode));
	same_statx(&stx, AT_FDCWD, dir.path, 0, mask);

	TU_EXPECT(ctx, -ENOENT, afio_statx(ctx, dir.fd, "missing", 0, mask, &stx, tu_on_done, &d));
	TU_EXPECT(ctx, -EBADF, afio_statx(ctx, tu_closed_fd(), "f", 0, mask, &stx, tu_on_done, &d));
	/* Flags statx(2) does not know: its error, at once or later. */
	{
		struct statx tmp;
		ssize_t want = tu_sys_res(statx(dir.fd, "f", 0x40000000, mask, &tmp));

		ck_assert_int_lt(want, 0);
		TU_EITHER(ctx, want,
			  afio_statx(ctx, dir.fd, "f", 0x40000000, mask, &stx, tu_on_done, &d));
	}
	afio_destroy(ctx);
	close(fd);
	tu_dir_remove(&dir);
}
END_TEST

/* Through the library, then statx(2) with the same arguments: the same
   result, and on success the same fields. */
static void statx_as_system(afio_ctx *ctx, int dirfd, const char *path, int flags,
			    unsigned mask)
{
	struct statx got, want;
	ssize_t res = tu_sys_res(statx(dirfd, path, flags, mask, &want));

	memset(&got, 0xaa, sizeof(got));
	TU_EXPECT(ctx, res, afio_statx(ctx, dirfd, path, flags, mask, &got, tu_on_done, &d));
	if (!res)
		same_statx(&got, dirfd, path, flags, mask);
}

/*
 * The walk's answers, wherever the backend and mode do the call: through
 * a symlink to a directory, a dangling symlink followed or not, a loop, a
 * file used as a directory, a missing name twice (the second time from a
 * negative dentry in the cache), the sync types (AT_STATX_FORCE_SYNC asks
 * for a round trip, AT_STATX_DONT_SYNC for none), no automount, and an
 * fd with AT_SYMLINK_NOFOLLOW on a path through it.
 */
START_TEST(test_statx_walk)
{
	const unsigned mask = STATX_BASIC_STATS | STATX_BTIME;
	static const char *const paths[] = {
		"f", "dlink/g", "dlink", "dangling", "loop", "f/x", "missing", "missing",
		"sub/../f", "sub/", "f/", "",
	};
	static const int flag_sets[] = {
		0, AT_SYMLINK_NOFOLLOW, AT_STATX_FORCE_SYNC, AT_STATX_DONT_SYNC,
		AT_NO_AUTOMOUNT | AT_SYMLINK_NOFOLLOW, AT_EMPTY_PATH,
	};
	afio_ctx *ctx = tu_new_ctx();
	struct tu_dir dir;
	int sub;

	tu_dir_make(&dir);
	tu_put_file(dir.fd, "f", "twelve bytes");
	sub = make_dir(dir.fd, "sub");
	tu_put_file(sub, "g", "g");
	ck_assert_int_eq(symlinkat("sub", dir.fd, "dlink"), 0);
	ck_assert_int_eq(symlinkat("nowhere", dir.fd, "dangling"), 0);
	ck_assert_int_eq(symlinkat("loop", dir.fd, "loop"), 0);
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		for (size_t j = 0; j < sizeof(flag_sets) / sizeof(flag_sets[0]); j++)
			statx_as_system(ctx, dir.fd, paths[i], flag_sets[j], mask);
	statx_as_system(ctx, sub, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, mask);
	statx_as_system(ctx, sub, "../dangling", AT_SYMLINK_NOFOLLOW, STATX_ALL);
	afio_destroy(ctx);
	close(sub);
	tu_dir_remove(&dir);
}
END_TEST

/* ---- renameat, unlinkat, mkdirat ---- */

START_TEST(test_renameat)
{
	afio_ctx *ctx = tu_new_ctx();
	struct tu_dir dir;
	struct stat a, b;
	int sub;

	tu_dir_make(&dir);
	tu_put_file(dir.fd, "a", "first");
	tu_put_file(dir.fd, "b", "second");
	sub = make_dir(dir.fd, "sub");
	a = stat_at(dir.fd, "a");
	b = stat_at(dir.fd, "b");

	/* Into another directory by its fd. */
	TU_EXPECT(ctx, 0, afio_renameat(ctx, dir.fd, "a", sub, "moved", 0, tu_on_done, &d));
	ck_assert(!tu_exists_at(dir.fd, "a"));
	ck_assert_int_eq(stat_at(sub, "moved").st_ino, a.st_ino);
	/* NOREPLACE onto a name that exists: EEXIST, both left alone. */
	TU_EXPECT(ctx, -EEXIST, afio_renameat(ctx, sub, "moved", dir.fd, "b", RENAME_NOREPLACE,
					      tu_on_done, &d));
	ck_assert_int_eq(stat_at(dir.fd, "b").st_ino, b.st_ino);
	ck_assert_int_eq(stat_at(sub, "moved").st_ino, a.st_ino);
	/* EXCHANGE swaps them. */
	TU_EXPECT(ctx, 0, afio_renameat(ctx, sub, "moved", dir.fd, "b", RENAME_EXCHANGE, tu_on_done,
					&d));
	ck_assert_int_eq(stat_at(dir.fd, "b").st_ino, a.st_ino);
	ck_assert_int_eq(stat_at(sub, "moved").st_ino, b.st_ino);
	/* Plain rename over an existing name replaces it; AT_FDCWD with
	   absolute paths. */
	TU_EXPECT(ctx, 0, afio_renameat(ctx, AT_FDCWD, tdir_abs(&dir, "b"), AT_FDCWD,
					tdir_abs(&dir, "sub/moved"), 0, tu_on_done, &d));
	ck_assert(!tu_exists_at(dir.fd, "b"));
	ck_assert_int_eq(stat_at(sub, "moved").st_ino, a.st_ino);

	TU_EXPECT(ctx, -ENOENT,
		  afio_renameat(ctx, dir.fd, "missing", dir.fd, "c", 0, tu_on_done, &d));
	TU_EXPECT(ctx, -EBADF,
		  afio_renameat(ctx, tu_closed_fd(), "x", dir.fd, "c", 0, tu_on_done, &d));
	TU_EXPECT(ctx, -EBADF,
		  afio_renameat(ctx, sub, "moved", tu_closed_fd(), "c", 0, tu_on_done, &d));
	TU_EITHER(ctx, -EINVAL, afio_renameat(ctx, sub, "moved", dir.fd, "c",
					      RENAME_NOREPLACE | RENAME_EXCHANGE, tu_on_done, &d));
	ck_assert_int_eq(stat_at(sub, "moved").st_ino, a.st_ino);
	afio_destroy(ctx);
	close(sub);
	tu_dir_remove(&dir);
}
END_TEST

START_TEST(test_unlinkat)
{
	afio_ctx *ctx = tu_new_ctx();
	struct tu_dir dir;
	int fd;

	tu_dir_make(&dir);
	tu_put_file(dir.fd, "f", "x");
	fd = openat(dir.fd, "f", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	TU_EXPECT(ctx, 0, afio_unlinkat(ctx, dir.fd, "f", 0, tu_on_done, &d));
	ck_assert(!tu_exists_at(dir.fd, "f"));
	ck_assert_int_eq(tu_stat_fd(fd).st_nlink, 0);
	close(fd);

	ck_assert_int_eq(mkdirat(dir.fd, "d", 0700), 0);
	tu_put_file(dir.fd, "d/inside", "x");
	TU_EXPECT(ctx, -EISDIR, afio_unlinkat(ctx, dir.fd, "d", 0, tu_on_done, &d));
	TU_EXPECT(ctx, -ENOTEMPTY, afio_unlinkat(ctx, dir.fd, "d", AT_REMOVEDIR, tu_on_done, &d));
	TU_EXPECT(ctx, -ENOTDIR,
		  afio_unlinkat(ctx, dir.fd, "d/inside", AT_REMOVEDIR, tu_on_done, &d));
	TU_EXPECT(ctx, 0,
		  afio_unlinkat(ctx, AT_FDCWD, tdir_abs(&dir, "d/inside"), 0, tu_on_done, &d));
	TU_EXPECT(ctx, 0, afio_unlinkat(ctx, dir.fd, "d", AT_REMOVEDIR, tu_on_done, &d));
	ck_assert(!tu_exists_at(dir.fd, "d"));
	TU_EXPECT(ctx, -ENOENT, afio_unlinkat(ctx, dir.fd, "f", 0, tu_on_done, &d));
	TU_EXPECT(ctx, -EBADF, afio_unlinkat(ctx, tu_closed_fd(), "f", 0, tu_on_done, &d));
	/* A flag unlinkat(2) does not know. */
	tu_put_file(dir.fd, "g", "x");
	TU_EITHER(ctx, -EINVAL, afio_unlinkat(ctx, dir.fd, "g", 0x40000000, tu_on_done, &d));
	ck_assert(tu_exists_at(dir.fd, "g"));
	afio_destroy(ctx);
	tu_dir_remove(&dir);
}
END_TEST

START_TEST(test_mkdirat)
{
	afio_ctx *ctx = tu_new_ctx();
	mode_t old_mask = umask(027);
	struct tu_dir dir;
	struct stat st;

	tu_dir_make(&dir);
	TU_EXPECT(ctx, 0, afio_mkdirat(ctx, dir.fd, "d", 0777, tu_on_done, &d));
	st = stat_at(dir.fd, "d");
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_msg((st.st_mode & 07777) == 0750, "mkdirat on %s: mode %o (0777, umask 027)",
		      tu_target_name(), (unsigned)(st.st_mode & 07777));
	TU_EXPECT(ctx, 0, afio_mkdirat(ctx, AT_FDCWD, tdir_abs(&dir, "d/e"), 0700, tu_on_done, &d));
	ck_assert(S_ISDIR(stat_at(dir.fd, "d/e").st_mode));
	TU_EXPECT(ctx, -EEXIST, afio_mkdirat(ctx, dir.fd, "d", 0700, tu_on_done, &d));
	TU_EXPECT(ctx, -ENOENT, afio_mkdirat(ctx, dir.fd, "missing/d", 0700, tu_on_done, &d));
	TU_EXPECT(ctx, -EBADF, afio_mkdirat(ctx, tu_closed_fd(), "d", 0700, tu_on_done, &d));
	umask(old_mask);
	afio_destroy(ctx);
	tu_dir_remove(&dir);
}
END_TEST

/* A relative path from AT_FDCWD is looked up from the program's working
   directory, wherever the op runs. */
START_TEST(test_at_fdcwd_relative)
{
	afio_ctx *ctx = tu_new_ctx();
	int cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd;
	struct open_how how = tu_how_of(O_RDONLY | O_CLOEXEC, 0, 0);
	struct statx stx;
	struct tu_dir dir;

	tu_dir_make(&dir);
	ck_assert_int_ge(cwd, 0);
	ck_assert_int_eq(fchdir(dir.fd), 0);
	TU_EXPECT(ctx, 0, afio_mkdirat(ctx, AT_FDCWD, "d", 0700, tu_on_done, &d));
	fd = TU_RUN_FD(ctx, afio_openat(ctx, AT_FDCWD, "d/f", O_RDWR | O_CREAT | O_CLOEXEC, 0600,
					tu_on_done, &d));
	close(fd);
	fd = TU_RUN_FD(ctx, afio_openat2(ctx, AT_FDCWD, "d/f", &how, tu_on_done, &d));
	close(fd);
	TU_EXPECT(ctx, 0, afio_statx(ctx, AT_FDCWD, "d/f", 0, STATX_INO, &stx, tu_on_done, &d));
	ck_assert_int_eq(stx.stx_ino, stat_at(dir.fd, "d/f").st_ino);
	TU_EXPECT(ctx, 0, afio_renameat(ctx, AT_FDCWD, "d/f", AT_FDCWD, "d/g", 0, tu_on_done, &d));
	ck_assert(tu_exists_at(dir.fd, "d/g"));
	TU_EXPECT(ctx, 0, afio_unlinkat(ctx, AT_FDCWD, "d/g", 0, tu_on_done, &d));
	TU_EXPECT(ctx, 0, afio_unlinkat(ctx, AT_FDCWD, "d", AT_REMOVEDIR, tu_on_done, &d));
	ck_assert(!tu_exists_at(dir.fd, "d"));
	ck_assert_int_eq(fchdir(cwd), 0);
	close(cwd);
	afio_destroy(ctx);
	tu_dir_remove(&dir);
}
END_TEST

static Suite *paths_suite(void)
{
	Suite *s = suite_create("paths");
	TCase *opens = tu_tcase(s, "open");
	TCase *statxs = tu_tcase(s, "statx");
	TCase *names = tu_tcase(s, "names");

	tcase_add_test(opens, test_openat);
	tcase_add_test(opens, test_openat2);
	tcase_add_test(opens, test_close);
	tcase_add_test(statxs, test_statx);
	tcase_add_test(statxs, test_statx_walk);
	tcase_add_test(names, test_renameat);
	tcase_add_test(names, test_unlinkat);
	tcase_add_test(names, test_mkdirat);
	tcase_add_test(names, test_at_fdcwd_relative);
	return s;
}

int main(int argc, char **argv)
{
	return tu_main(argc, argv, paths_suite);
}
