/* SPDX-License-Identifier: MIT */
/*
 * What alignment O_DIRECT I/O on a file needs: statx(STATX_DIOALIGN)
 * (Linux 6.1+), the kernel's own answer per file, where the file system
 * gives it; else the logical block size of the device (BLKSSZGET for a
 * block device, sysfs for a file on one), the rule of older kernels.  Only
 * the sysfs lookup, several system calls, is cached, per device.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "backend.h"

#ifndef STATX_TYPE
#define STATX_TYPE		0x00000001U
#endif
#ifndef STATX_SIZE
#define STATX_SIZE		0x00000200U
#endif
#ifndef STATX_DIOALIGN
#define STATX_DIOALIGN		0x00002000U
#endif
#ifndef AT_EMPTY_PATH
#define AT_EMPTY_PATH		0x1000
#endif

/* The kernel's struct statx (include/uapi/linux/stat.h), spelled out so
   that the direct I/O fields exist whatever the C library's headers say. */
struct kstatx_ts {
	int64_t sec;
	uint32_t nsec;
	int32_t reserved;
};

struct kstatx {
	uint32_t mask;
	uint32_t blksize;
	uint64_t attributes;
	uint32_t nlink;
	uint32_t uid;
	uint32_t gid;
	uint16_t mode;
	uint16_t spare0;
	uint64_t ino;
	uint64_t size;
	uint64_t blocks;
	uint64_t attributes_mask;
	struct kstatx_ts atime, btime, ctime, mtime;
	uint32_t rdev_major;
	uint32_t rdev_minor;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint64_t mnt_id;
	uint32_t dio_mem_align;
	uint32_t dio_offset_align;
	uint64_t spare[12];
};

_Static_assert(sizeof(struct kstatx) == 256, "struct statx is 256 bytes");
_Static_assert(offsetof(struct kstatx, dio_mem_align) == 0x98, "statx layout");

static int read_lbs_file(const char *path, unsigned *lbs)
{
	char buf[32];
	char *end;
	unsigned long v;
	int ret;

	ret = afio_read_sysctl(path, buf, sizeof(buf));
	if (ret)
		return ret;
	v = strtoul(buf, &end, 10);
	if (end == buf || !v || v > (1ul << 20) || (v & (v - 1)))
		return -EINVAL;
	*lbs = (unsigned)v;
	return 0;
}

/* A partition's sysfs directory has no queue/; its disk's has. */
static int sysfs_lbs(dev_t dev, unsigned *lbs)
{
	char path[96];

	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/queue/logical_block_size",
		 major(dev), minor(dev));
	if (!read_lbs_file(path, lbs))
		return 0;
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/../queue/logical_block_size",
		 major(dev), minor(dev));
	return read_lbs_file(path, lbs);
}

static int dev_lbs(struct afio_lbs_cache *c, dev_t dev, unsigned *lbs)
{
	int ret;

	for (unsigned i = 0; i < AFIO_LBS_CACHE; i++) {
		if (c->devs[i].lbs && c->devs[i].dev == dev) {
			*lbs = c->devs[i].lbs;
			return 0;
		}
	}
	ret = sysfs_lbs(dev, lbs);
	if (ret)
		return ret;
	c->devs[c->next].dev = dev;
	c->devs[c->next].lbs = *lbs;
	c->next = (c->next + 1) % AFIO_LBS_CACHE;
	return 0;
}

/* Before STATX_DIOALIGN the rule was the device's logical block size, for
   the buffer as for the offset and length. */
static int lbs_align(struct afio_lbs_cache *c, int fd, const struct kstatx *st,
		     struct afio_dio_facts *al)
{
	unsigned lbs;
	int ret;

	if (S_ISBLK(st->mode)) {
		int v;

		if (ioctl(fd, BLKSSZGET, &v) < 0)
			return -errno;
		lbs = (unsigned)v;
	} else if (S_ISREG(st->mode)) {
		ret = dev_lbs(c, makedev(st->dev_major, st->dev_minor), &lbs);
		if (ret)
			return ret;
	} else {
		return -EOPNOTSUPP;
	}
	al->from_statx = false;
	al->mem = lbs;
	al->off = lbs;
	return 0;
}

/* Where statx itself is missing or filtered out. */
static int fstat_fill(int fd, struct kstatx *kst)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	kst->mode = (uint16_t)st.st_mode;
	kst->size = (uint64_t)st.st_size;
	kst->dev_major = major(st.st_dev);
	kst->dev_minor = minor(st.st_dev);
	return 0;
}

/*
 * -EOPNOTSUPP when direct I/O is not known to be asynchronous on fd (the
 * file system reports no direct I/O for the file, or nothing says what the
 * alignment is); -errno when fd itself is bad.
 */
int afio_dio_facts(int fd, struct afio_lbs_cache *c, struct afio_dio_facts *al)
{
	unsigned want = STATX_TYPE | STATX_SIZE | STATX_DIOALIGN;
	struct kstatx st;

	memset(&st, 0, sizeof(st));
	if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH, want, &st) < 0) {
		if (errno == EBADF)
			return -EBADF;
		if (fstat_fill(fd, &st))
			return -EOPNOTSUPP;
	}
	/* A block device has no size here, and nothing to extend. */
	al->size = S_ISREG(st.mode) ? st.size : UINT64_MAX;
	al->size_unknown = false;
	if (st.mask & STATX_DIOALIGN) {
		/* 0: the file system does direct I/O on this file by buffering. */
		if (!st.dio_mem_align || !st.dio_offset_align)
			return -EOPNOTSUPP;
		al->from_statx = true;
		al->mem = st.dio_mem_align;
		al->off = st.dio_offset_align;
		return 0;
	}
	return lbs_align(c, fd, &st, al) ? -EOPNOTSUPP : 0;
}

int afio_dio_align(int fd, struct afio_dio_align *out)
{
	static __thread struct afio_lbs_cache cache;
	struct afio_dio_facts facts;
	int ret;

	if (fd < 0)
		return -EBADF;
	if (!out)
		return -EINVAL;
	ret = afio_dio_facts(fd, &cache, &facts);
	if (ret)
		return ret;
	out->mem = facts.mem;
	out->offset = facts.off;
	return 0;
}
