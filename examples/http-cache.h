/* SPDX-License-Identifier: MIT */
/*
 * afio-httpd's open-file cache, one per worker thread: the descriptor,
 * size and modification time of each file asked for, so that a hot file
 * costs no open and no stat.  As nginx's open_file_cache does, an entry is
 * trusted for CACHE_VALID_NS, then looked at again with a stat of its path
 * (the same file, size and time: trusted again; anything else: dropped and
 * opened anew).  Entries nobody uses are kept, least recently used first
 * out, up to a bound and for CACHE_INACTIVE_NS at most.
 *
 * A miss never stalls the loop: the open (openat2 with RESOLVE_BENEATH)
 * and the stat go through libasyncfio, and whoever asks for the same file
 * meanwhile waits on the same entry.
 */
#ifndef HTTP_CACHE_H
#define HTTP_CACHE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "asyncfio.h"
#include "http-parse.h"

#define CACHE_VALID_NS		1000000000ull	/* re-stat after a second */
#define CACHE_INACTIVE_NS	60000000000ull	/* close what a minute did not use */
#define CACHE_PATH_MAX		1024		/* longer paths: 414 */

struct cache_entry;

/* Someone waiting for an entry: ready() runs once, with the entry (a
   reference the waiter must give back with cache_put()) and status 0, or
   with NULL and the HTTP status to answer (404, 403, ...). */
struct cache_waiter {
	struct cache_waiter *next;
	void (*ready)(struct cache_waiter *w, struct cache_entry *e, int status);
};

enum entry_state {
	ENTRY_OPENING,		/* openat2 in flight */
	ENTRY_STATING,		/* statx of the new fd in flight */
	ENTRY_READY,
	ENTRY_REVALIDATING,	/* statx of the path in flight */
	ENTRY_DEAD,		/* out of the table; freed when the last user is done */
};

struct cache_entry {
	/* What users read, while they hold a reference. */
	int fd;
	bool is_dir;
	uint64_t size;
	int64_t mtime;			/* seconds */
	struct afio_dio_align dio;	/* --direct: what reads must be aligned to */
	const char *content_type;
	char last_modified[HTTP_DATE_LEN + 1];
	char etag[40];
	unsigned etag_len;

	/* The cache's own. */
	struct file_cache *cache;
	struct cache_entry *hnext;	/* hash chain */
	struct cache_entry *lru_prev, *lru_next;	/* unused entries */
	struct cache_waiter *waiters;
	uint64_t hash;
	uint64_t checked_at;		/* when its stat was last current */
	uint64_t last_used;
	unsigned refs;
	enum entry_state state;
	bool busy;			/* a request of ours is in flight for it */
	bool no_direct;			/* --direct refused by the file system */
	uint64_t ino;
	uint32_t dev_major, dev_minor;
	int64_t mtime_nsec;
	uint16_t mode;
	struct statx stx;
	unsigned path_len;
	char path[CACHE_PATH_MAX];
};

struct cache_stats {
	uint64_t hits, misses, revalidations, changed, evictions;
	uint64_t path_ops;		/* opens and stats asked for */
};

struct file_cache {
	afio_ctx *ctx;
	int root_fd;
	bool direct;
	unsigned max_idle;
	const uint64_t *now;		/* the worker's clock, ns of CLOCK_MONOTONIC */
	struct cache_entry **table;
	uint64_t mask;
	struct cache_entry *free_entries;
	struct cache_entry *lru_head, *lru_tail;
	unsigned idle;			/* entries on the LRU list */
	unsigned in_flight;		/* afio requests not yet completed */
	struct cache_stats st;
	struct open_how *how, *how_buffered;
};

int cache_init(struct file_cache *c, afio_ctx *ctx, int root_fd, bool direct,
	       unsigned max_idle, const uint64_t *now);
/* Closes every file; nothing may be in flight (afio_destroy() ran). */
void cache_destroy(struct file_cache *c);

/*
 * path (relative to the root, path_len bytes, NUL ended) into *out:
 * 0: a hit, *out holds a reference; 1: w->ready() will be called from a
 * completion; else the HTTP status to answer at once.
 */
int cache_get(struct file_cache *c, const char *path, size_t path_len,
	      struct cache_waiter *w, struct cache_entry **out);
void cache_put(struct cache_entry *e);
/* Closes files unused for CACHE_INACTIVE_NS. */
void cache_expire(struct file_cache *c);
/* Out of descriptors: closes the least recently used idle files, a few
   (others may be short of one too); false when none was idle. */
bool cache_close_idle(struct file_cache *c);

#endif
