/* SPDX-License-Identifier: MIT */
/*
 * What the parts of afio-httpd share: a worker (one thread, one libasyncfio
 * context, one SO_REUSEPORT listener, its own connections, buffers and
 * open-file cache) and a connection.  http-file-server.c runs workers,
 * http-conn.c runs connections.
 */
#ifndef HTTP_SERVER_H
#define HTTP_SERVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "asyncfio.h"
#include "http-cache.h"
#include "http-parse.h"

#define IN_SIZE		1024		/* each connection's own request buffer */
#define HEAD_MAX	(16 * 1024)	/* a longer request head: 431 */
#define HEAD_ROOM	4096		/* before the file data in a buffer: the response head */
#define DEFAULT_READ_SIZE (128 * 1024)	/* file bytes per read, --read-size */
#define MAX_READ_SIZE	(4 * 1024 * 1024)
#define BUF_ALIGN	4096		/* O_DIRECT: at least what any device asks */
#define ACCEPTS		8		/* accepts in flight at once */

/* The structure that holds member, from a pointer to it: how a callback
   finds its connection or worker from the data pointer it was given. */
#define container_of(p, type, member) ((type *)((char *)(p) - offsetof(type, member)))

struct conn;
struct worker;

/* Connections in the order their deadlines come, all timeout after the
   last touch, so that a touch is an append and expiry looks at the head. */
struct timer_list {
	struct conn *head, *tail;
	uint64_t duration_ns;
};

/* Response buffers: taken while a response is in flight, never freed. */
struct buf_pool {
	void *free_bufs;		/* the first word of each links the next */
	size_t buf_size;		/* HEAD_ROOM + --read-size */
	unsigned total, max;
	struct conn *waiters, *waiters_tail;
};

enum conn_state {
	C_FREE,
	C_HEAD,			/* receiving a request head (or idle between requests) */
	C_BODY,			/* receiving and dropping a request body */
	C_WAIT,			/* waiting for the cache or a buffer: nothing in flight */
	C_RESPOND,		/* reading the file and sending */
	C_LINGER,		/* error sent, write side shut: draining until EOF */
};

enum out_state {
	OUT_IDLE,		/* no buffer, or its bytes are sent */
	OUT_READING,
	OUT_READY,		/* read, waiting for its turn to be sent */
	OUT_SENDING,
};

/* One of the two buffers of a response: one is read into while the other
   is sent.  The response head goes right before the first chunk's data. */
struct out {
	char *mem;		/* from the pool, or NULL */
	char *start;		/* what to send */
	size_t len;
	size_t skip;		/* --direct: bytes read before the wanted ones */
	uint32_t seq;		/* which chunk of the response */
	uint8_t state;
};

struct conn {
	struct worker *w;
	int fd;
	uint8_t state;
	uint8_t ops;			/* afio requests in flight */
	bool closing;			/* close once ops is 0 */
	bool keep_alive;
	bool head_only;
	bool linger;			/* after the response: lingering close */
	bool reading, sending;
	bool sendfile;			/* the body goes by afio_sendfile() */
	struct conn *tprev, *tnext;	/* on w->timers[] */
	struct timer_list *timer;
	uint64_t deadline;
	struct conn *next_free;		/* w->free_conns, or the pool's waiters */
	void (*on_buf)(struct conn *c, void *buf);	/* the pool hands one over */
	struct cache_waiter waiter;
	struct cache_entry *file;

	/* the request */
	char *in;			/* inline_buf, or a pool buffer for a large head */
	uint32_t in_start, in_len, in_cap;	/* unparsed bytes: in[in_start, in_len) */
	size_t head_len;		/* of the request being answered */
	size_t scanned;
	uint64_t discard;		/* request body bytes still to drop */
	struct http_request req;

	/* the response */
	int status;
	uint64_t content_first, content_len;	/* what the head announces */
	uint64_t read_off, body_end;	/* file bytes still to read */
	uint32_t read_seq, send_seq;
	uint32_t head_bytes;		/* at out[0].mem, to go before the first chunk */
	struct out out[2];

	char inline_buf[IN_SIZE];
};

struct httpd_opts {
	const char *addr;
	unsigned port;
	const char *root;
	struct afio_config afio;
	bool direct;
	unsigned workers;
	unsigned max_conn;
	unsigned timeout_s;
	unsigned read_size;
	bool accept_multishot;		/* --accept multishot */
};

struct worker_stats {
	uint64_t requests, connections, timeouts, accept_errors, ticks;
};

struct worker {
	unsigned id;
	pthread_t tid;
	bool tid_valid;
	const struct httpd_opts *opts;
	afio_ctx *ctx;
	int root_fd;
	int listen_fd;
	int wake_fd;			/* the main thread writes a byte here to stop us */
	int spare_fd;			/* given up when accept runs out of descriptors */
	char wake_byte;			/* what the wake's recv reads */
	bool stopping;
	bool failed;
	bool accept_paused;		/* out of descriptors: wait for a tick */
	bool wake_pending;
	unsigned accepts;		/* in flight */
	afio_handle accept_shot;	/* --accept multishot: its request, 0: none runs */
	/* --accept single: one per accept in flight, its data pointer, and
	   its handle for the cancel at stop (0: free). */
	struct accept_slot {
		struct worker *w;
		afio_handle handle;
	} accept_slots[ACCEPTS];

	struct conn *conns;
	struct conn *free_conns;
	unsigned conns_used;		/* conns[] ever handed out */
	unsigned open_conns;
	unsigned max_conn;		/* --max-conn, or what ASYNC on the pool allows */

	struct timer_list timers[2];	/* [0]: --timeout, [1]: lingering close */
	struct buf_pool pool;
	struct file_cache cache;

	uint64_t sendfile_min;		/* bodies this long go by sendfile */
	bool clock_stale;		/* a wait may have passed since now was read */
	uint64_t now;			/* CLOCK_MONOTONIC, ns */
	uint64_t next_tick;		/* when timeouts are looked at next */
	int64_t wall;			/* seconds since 1970 */
	char date[HTTP_DATE_LEN + 1];

	struct worker_stats st;
};

/* http-conn.c */
void conn_start(struct worker *w, int fd, struct conn *c);
/* SIGTERM: idle connections close now, the others after their response. */
void conn_stop(struct conn *c);
void conn_timed_out(struct conn *c);

/* http-file-server.c */
void worker_read_clock(struct worker *w);
/* now and date as of this round of completions. */
static inline void worker_clock(struct worker *w)
{
	if (w->clock_stale)
		worker_read_clock(w);
}

void timer_set(struct conn *c, struct timer_list *t);
void timer_clear(struct conn *c);
void worker_conn_closed(struct worker *w, struct conn *c);
void *pool_take(struct buf_pool *p);
void pool_give(struct worker *w, void *buf);
void pool_wait(struct buf_pool *p, struct conn *c);

#endif
