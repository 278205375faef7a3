/* SPDX-License-Identifier: MIT */
/* The open-file cache of afio-httpd (http-cache.h). */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http-cache.h"

#define STAT_MASK (STATX_TYPE | STATX_MODE | STATX_INO | STATX_SIZE | STATX_MTIME)

static uint64_t hash_path(const char *p, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
	return h;
}

int cache_init(struct file_cache *c, afio_ctx *ctx, int root_fd, bool direct,
	       unsigned max_idle, const uint64_t *now)
{
	uint64_t size = 64;

	memset(c, 0, sizeof(*c));
	while (size < 2ull * max_idle)
		size *= 2;
	c->table = calloc(size, sizeof(*c->table));
	c->how = calloc(2, sizeof(*c->how));
	if (!c->table || !c->how) {
		free(c->table);
		free(c->how);
		return -ENOMEM;
	}
	c->mask = size - 1;
	c->ctx = ctx;
	c->root_fd = root_fd;
	c->direct = direct;
	c->max_idle = max_idle;
	c->now = now;
	/*
	 * O_NONBLOCK: a FIFO would otherwise hold an open until a writer
	 * comes; it is cleared again on a regular file, where io_uring would
	 * take it as "fail rather than wait for the disk".  RESOLVE_BENEATH
	 * refuses "..", absolute symlinks and symlinks that lead out.
	 */
	c->how_buffered = c->how + 1;
	c->how_buffered->flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
	c->how_buffered->resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
	*c->how = *c->how_buffered;
	if (direct)
		c->how->flags |= O_DIRECT;
	return 0;
}

/* ---- entries ---- */

static struct cache_entry *entry_alloc(struct file_cache *c)
{
	struct cache_entry *e = c->free_entries;

	if (e)
		c->free_entries = e->hnext;
	else
		e = malloc(sizeof(*e));
	return e;
}

static void entry_free(struct cache_entry *e)
{
	struct file_cache *c = e->cache;

	if (e->fd >= 0)
		close(e->fd);
	e->hnext = c->free_entries;
	c->free_entries = e;
}

static struct cache_entry **bucket(struct file_cache *c, uint64_t hash)
{
	return &c->table[hash & c->mask];
}

static void unhash(struct cache_entry *e)
{
	struct cache_entry **pp = bucket(e->cache, e->hash);

	for (; *pp; pp = &(*pp)->hnext) {
		if (*pp == e) {
			*pp = e->hnext;
			break;
		}
	}
	e->hnext = NULL;
}

static void lru_remove(struct cache_entry *e)
{
	struct file_cache *c = e->cache;

	if (e->lru_prev)
		e->lru_prev->lru_next = e->lru_next;
	else
		c->lru_head = e->lru_next;
	if (e->lru_next)
		e->lru_next->lru_prev = e->lru_prev;
	else
		c->lru_tail = e->lru_prev;
	e->lru_prev = e->lru_next = NULL;
	c->idle--;
}

static void lru_append(struct cache_entry *e)
{
	struct file_cache *c = e->cache;

	e->lru_next = NULL;
	e->lru_prev = c->lru_tail;
	if (c->lru_tail)
		c->lru_tail->lru_next = e;
	else
		c->lru_head = e;
	c->lru_tail = e;
	c->idle++;
}

/* Out of the table: nobody finds it again; the last user frees it. */
static void kill_entry(struct cache_entry *e)
{
	unhash(e);
	if (!e->refs && e->state == ENTRY_READY)
		lru_remove(e);
	e->state = ENTRY_DEAD;
	if (!e->refs && !e->busy)
		entry_free(e);
}

static void evict(struct file_cache *c)
{
	struct cache_entry *e = c->lru_head;

	c->st.evictions++;
	kill_entry(e);
}

void cache_put(struct cache_entry *e)
{
	struct file_cache *c = e->cache;

	if (--e->refs)
		return;
	if (e->state == ENTRY_DEAD) {
		if (!e->busy)
			entry_free(e);
		return;
	}
	if (e->state != ENTRY_READY)
		return;
	e->last_used = *c->now;
	lru_append(e);
	while (c->idle > c->max_idle)
		evict(c);
}

void cache_expire(struct file_cache *c)
{
	while (c->lru_head && *c->now - c->lru_head->last_used >= CACHE_INACTIVE_NS)
		evict(c);
}

void cache_destroy(struct file_cache *c)
{
	struct cache_entry *e, *next;

	for (uint64_t i = 0; i <= c->mask; i++) {
		for (e = c->table[i]; e; e = next) {
			next = e->hnext;
			if (e->fd >= 0)
				close(e->fd);
			free(e);
		}
	}
	for (e = c->free_entries; e; e = next) {
		next = e->hnext;
		free(e);
	}
	free(c->table);
	free(c->how);
}

/* ---- telling the waiters ---- */

static int status_of_errno(int err)
{
	switch (err) {
	case -ENOENT:
	case -ENOTDIR:
		return 404;
	case -EACCES:
	case -EPERM:
	case -EXDEV:		/* RESOLVE_BENEATH: the path leads out */
	case -ELOOP:
		return 403;
	case -ENAMETOOLONG:
		return 414;
	case -EMFILE:
	case -ENFILE:
	case -ENOMEM:
	case -EAGAIN:
		return 503;
	default:
		return 500;
	}
}

static struct cache_waiter *take_waiters(struct cache_entry *e)
{
	struct cache_waiter *w = e->waiters, *rev = NULL, *next;

	e->waiters = NULL;
	/* Added at the head: turn around so that the first asker goes first. */
	for (; w; w = next) {
		next = w->next;
		w->next = rev;
		rev = w;
	}
	return rev;
}

/* The entry is ready: each waiter gets a reference.  One of our own is
   held meanwhile, since a waiter may give its back at once. */
static void serve_waiters(struct cache_entry *e)
{
	struct cache_waiter *w = take_waiters(e), *next;

	e->state = ENTRY_READY;
	e->checked_at = *e->cache->now;
	e->refs++;
	for (; w; w = next) {
		next = w->next;
		e->refs++;
		w->ready(w, e, 0);
	}
	cache_put(e);
}

static void fail_waiters(struct cache_waiter *w, int status)
{
	struct cache_waiter *next;

	for (; w; w = next) {
		next = w->next;
		w->ready(w, NULL, status);
	}
}

/* The entry is gone for good: its waiters hear status. */
static void fail_entry(struct cache_entry *e, int status)
{
	struct cache_waiter *w = take_waiters(e);

	kill_entry(e);
	fail_waiters(w, status);
}

/* The entry no longer names the file there now: its waiters ask again. */
static void retry_waiters(struct file_cache *c, struct cache_entry *e)
{
	struct cache_waiter *w = take_waiters(e), *next;
	struct cache_entry *got;
	char path[CACHE_PATH_MAX];
	size_t len = e->path_len;
	int ret;

	memcpy(path, e->path, len + 1);
	kill_entry(e);
	for (; w; w = next) {
		next = w->next;
		ret = cache_get(c, path, len, w, &got);
		if (ret == 0)
			w->ready(w, got, 0);
		else if (ret != 1)
			w->ready(w, NULL, ret);
	}
}

/* ---- open, then stat ---- */

static void on_open(void *data, ssize_t res);

static int start_open(struct cache_entry *e)
{
	struct file_cache *c = e->cache;
	int ret;

	ret = afio_openat2(c->ctx, c->root_fd, e->path, e->no_direct ? c->how_buffered : c->how,
			   on_open, e);
	if (!ret) {
		e->busy = true;
		c->in_flight++;
		c->st.path_ops++;
	}
	return ret;
}

/* The fd's own flags for reading: no O_NONBLOCK (see cache_init()). */
static int make_blocking(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static bool take_stat(struct cache_entry *e)
{
	const struct statx *st = &e->stx;
	int len;

	if ((st->stx_mask & STAT_MASK) != STAT_MASK)
		return false;
	e->mode = st->stx_mode;
	e->ino = st->stx_ino;
	e->dev_major = st->stx_dev_major;
	e->dev_minor = st->stx_dev_minor;
	e->size = st->stx_size;
	e->mtime = st->stx_mtime.tv_sec;
	e->mtime_nsec = st->stx_mtime.tv_nsec;
	http_format_date(e->mtime, e->last_modified);
	len = snprintf(e->etag, sizeof(e->etag), "\"%llx-%llx\"",
		       (unsigned long long)e->mtime, (unsigned long long)e->size);
	e->etag_len = (unsigned)len;
	return true;
}

static void warn_no_direct(const char *path)
{
	static atomic_flag warned = ATOMIC_FLAG_INIT;

	if (!atomic_flag_test_and_set(&warned))
		fprintf(stderr, "afio-httpd: %s: the file system refuses O_DIRECT; "
			"such files are read through the page cache\n", path);
}

static void opened(struct cache_entry *e)
{
	struct file_cache *c = e->cache;
	int ret = 0;

	if (!take_stat(e)) {
		fail_entry(e, 500);
		return;
	}
	e->is_dir = S_ISDIR(e->mode);
	if (!e->is_dir && !S_ISREG(e->mode)) {
		/* FIFOs, devices, sockets: not for the web. */
		fail_entry(e, 403);
		return;
	}
	if (!e->is_dir)
		ret = make_blocking(e->fd);
	if (!ret && c->direct && !e->no_direct && !e->is_dir)
		ret = afio_dio_align(e->fd, &e->dio);
	if (ret) {
		fail_entry(e, 500);
		return;
	}
	if (e->no_direct && !e->is_dir)
		warn_no_direct(e->path);
	serve_waiters(e);
}

static void on_stat(void *data, ssize_t res)
{
	struct cache_entry *e = data;

	e->busy = false;
	e->cache->in_flight--;
	if (res < 0)
		fail_entry(e, status_of_errno((int)res));
	else
		opened(e);
}

bool cache_close_idle(struct file_cache *c)
{
	unsigned n;

	for (n = 0; n < 16 && c->lru_head; n++)
		evict(c);
	return n;
}

static void on_open(void *data, ssize_t res)
{
	struct cache_entry *e = data;
	struct file_cache *c = e->cache;
	int ret;

	e->busy = false;
	c->in_flight--;
	/* tmpfs and a few others: EINVAL for O_DIRECT. */
	if (res == -EINVAL && c->direct && !e->no_direct) {
		e->no_direct = true;
		if (!start_open(e))
			return;
	}
	/* Out of descriptors: the idle entries' go before a client is
	   told 503. */
	if ((res == -EMFILE || res == -ENFILE) && cache_close_idle(c) && !start_open(e))
		return;
	if (res < 0) {
		fail_entry(e, status_of_errno((int)res));
		return;
	}
	e->fd = (int)res;
	e->state = ENTRY_STATING;
	ret = afio_statx(c->ctx, e->fd, "", AT_EMPTY_PATH, STAT_MASK, &e->stx, on_stat, e);
	if (ret) {
		fail_entry(e, status_of_errno(ret));
		return;
	}
	e->busy = true;
	c->in_flight++;
	c->st.path_ops++;
}

/* ---- revalidation ---- */

static bool same_file(const struct cache_entry *e)
{
	const struct statx *st = &e->stx;

	return (st->stx_mask & STAT_MASK) == STAT_MASK && st->stx_ino == e->ino &&
	       st->stx_dev_major == e->dev_major && st->stx_dev_minor == e->dev_minor &&
	       st->stx_size == e->size && st->stx_mtime.tv_sec == e->mtime &&
	       st->stx_mtime.tv_nsec == e->mtime_nsec &&
	       (st->stx_mode & S_IFMT) == (e->mode & S_IFMT);
}

static void on_revalidate(void *data, ssize_t res)
{
	struct cache_entry *e = data;
	struct file_cache *c = e->cache;

	e->busy = false;
	c->in_flight--;
	if (e->state == ENTRY_DEAD) {
		fail_waiters(take_waiters(e), 503);
		if (!e->refs)
			entry_free(e);
		return;
	}
	if (res == 0 && same_file(e)) {
		serve_waiters(e);
		return;
	}
	c->st.changed++;
	retry_waiters(c, e);
}

/* The stat follows symlinks: whatever the path leads to must still be the
   file we hold, or it is opened again, and the open refuses an escape. */
static int revalidate(struct cache_entry *e)
{
	struct file_cache *c = e->cache;
	int ret;

	ret = afio_statx(c->ctx, c->root_fd, e->path, 0, STAT_MASK, &e->stx, on_revalidate, e);
	if (ret)
		return ret;
	c->st.revalidations++;
	c->st.path_ops++;
	if (!e->refs)
		lru_remove(e);
	e->state = ENTRY_REVALIDATING;
	e->busy = true;
	c->in_flight++;
	return 0;
}

/* ---- lookup ---- */

static struct cache_entry *find(struct file_cache *c, const char *path, size_t len,
				uint64_t hash)
{
	for (struct cache_entry *e = *bucket(c, hash); e; e = e->hnext)
		if (e->hash == hash && e->path_len == len && !memcmp(e->path, path, len))
			return e;
	return NULL;
}

static int miss(struct file_cache *c, const char *path, size_t len, uint64_t hash,
		struct cache_waiter *w)
{
	struct cache_entry *e = entry_alloc(c);
	struct cache_entry **b;
	int ret;

	if (!e)
		return 503;
	memset(e, 0, offsetof(struct cache_entry, stx));
	e->cache = c;
	e->fd = -1;
	e->hash = hash;
	e->path_len = (unsigned)len;
	memcpy(e->path, path, len + 1);
	e->content_type = http_content_type(e->path);
	e->state = ENTRY_OPENING;
	ret = start_open(e);
	if (ret) {
		entry_free(e);
		return status_of_errno(ret);
	}
	b = bucket(c, hash);
	e->hnext = *b;
	*b = e;
	w->next = NULL;
	e->waiters = w;
	c->st.misses++;
	return 1;
}

int cache_get(struct file_cache *c, const char *path, size_t path_len,
	      struct cache_waiter *w, struct cache_entry **out)
{
	uint64_t hash = hash_path(path, path_len);
	struct cache_entry *e;

	if (path_len >= CACHE_PATH_MAX)
		return 414;
	e = find(c, path, path_len, hash);
	if (!e)
		return miss(c, path, path_len, hash, w);
	/* Should the stat not start, the old one serves a while longer. */
	if (e->state == ENTRY_READY && *c->now - e->checked_at >= CACHE_VALID_NS)
		revalidate(e);
	if (e->state != ENTRY_READY) {
		w->next = e->waiters;
		e->waiters = w;
		return 1;
	}
	if (!e->refs++)
		lru_remove(e);
	c->st.hits++;
	*out = e;
	return 0;
}
