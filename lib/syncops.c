/* SPDX-License-Identifier: MIT */
/* The ops that are one system call which may block, as the pool does them. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "request.h"

#ifndef RESOLVE_CACHED
#define RESOLVE_CACHED 0x20	/* Linux 5.12 */
#endif

static long sys_openat2(int dirfd, const char *path, const struct open_how *how)
{
	return syscall(SYS_openat2, dirfd, path, how, sizeof(*how));
}

static long run_once(const struct afio_req *r)
{
	switch (r->op) {
	case AFIO_OP_FSYNC:
		return r->flags & AFIO_FSYNC_DATASYNC ? fdatasync(r->fd) : fsync(r->fd);
	case AFIO_OP_OPENAT:
		return openat(r->fd, r->path, r->flags, (mode_t)r->mode);
	case AFIO_OP_OPENAT2:
		return sys_openat2(r->fd, r->path, r->how);
	case AFIO_OP_STATX:
		return statx(r->fd, r->path, r->flags, r->mode, r->stx);
	case AFIO_OP_FALLOCATE:
		return fallocate(r->fd, (int)r->mode, (off_t)r->off, (off_t)r->len);
	case AFIO_OP_FTRUNCATE:
		return ftruncate(r->fd, (off_t)r->off);
	case AFIO_OP_SYNC_RANGE:
		return sync_file_range(r->fd, (off_t)r->off, (off_t)r->len, (unsigned)r->flags);
	case AFIO_OP_RENAMEAT:
		return renameat2(r->fd, r->path, r->fd2, r->path2, (unsigned)r->flags);
	case AFIO_OP_UNLINKAT:
		return unlinkat(r->fd, r->path, r->flags);
	case AFIO_OP_MKDIRAT:
		return mkdirat(r->fd, r->path, (mode_t)r->mode);
	default:
		errno = EINVAL;
		return -1;
	}
}

ssize_t afio_req_run_sync(struct afio_req *r)
{
	long ret;

	/* close(2) must not be repeated: the fd is gone even on EINTR. */
	if (r->op == AFIO_OP_CLOSE)
		return close(r->fd) ? -errno : 0;
	do
		ret = run_once(r);
	while (ret < 0 && errno == EINTR);
	return ret < 0 ? -errno : ret;
}

/*
 * RESOLVE_CACHED: the lookup is done from the dentry cache alone or fails
 * with EAGAIN.  The kernel refuses it (EAGAIN) for opens that would write,
 * and a kernel before 5.12, or flags openat2 is stricter about than openat
 * (mode without O_CREAT, unknown bits), give EINVAL: all those are handed
 * on, and the worker's call gives the real answer.
 */
static ssize_t open_cached(const struct afio_req *r)
{
	struct open_how how = { 0 };
	long fd;

	if (r->op == AFIO_OP_OPENAT2) {
		how = *r->how;
	} else {
		how.flags = (unsigned)r->flags;
		if (r->flags & (O_CREAT | __O_TMPFILE))
			how.mode = r->mode;
	}
	if (how.flags & (O_CREAT | O_TRUNC | __O_TMPFILE))
		return -EAGAIN;
	how.resolve |= RESOLVE_CACHED;
	do
		fd = sys_openat2(r->fd, r->path, &how);
	while (fd < 0 && errno == EINTR);
	if (fd >= 0)
		return fd;
	if (errno == EAGAIN || errno == EINVAL || errno == ENOSYS || errno == E2BIG)
		return -EAGAIN;
	return -errno;
}

ssize_t afio_req_try_sync(struct afio_req *r)
{
	switch (r->op) {
	case AFIO_OP_OPENAT:
	case AFIO_OP_OPENAT2:
		return open_cached(r);
	case AFIO_OP_CLOSE:
		return afio_req_run_sync(r);
	default:
		return -EAGAIN;
	}
}
