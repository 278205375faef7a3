/* SPDX-License-Identifier: MIT */
/* Request slots and the intrusive queues that carry them between the core
   and the backends. */
#ifndef AFIO_REQUEST_H
#define AFIO_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "asyncfio.h"

/*
 * Every op a request can carry.  What each takes from struct afio_req:
 *
 *   op              fd       buf/...        ptr2       len       off    flags    mode
 *   READ/WRITE      file     buf            -          bytes     off    RWF_*    -
 *   READV/WRITEV    file     iov            -          iovcnt    off    RWF_*    -
 *   FSYNC           file     -              -          -         -      FSYNC_*  -
 *   RECV/SEND       socket   buf            -          bytes     -      MSG_*    -
 *   ACCEPT          socket   -              -          -         -      SOCK_*   -
 *   CONNECT         socket   addr           -          addrlen   -      -        -
 *   SENDMSG/RECVMSG socket   msg            -          -         -      MSG_*    -
 *   SENDFILE        socket   -              -          bytes     off    -        -   (fd2: file)
 *   TIMEOUT         -        -              -          -         when   -        -
 *   OPENAT          dirfd    path           -          -         -      O_*      mode
 *   OPENAT2         dirfd    path           how        -         -      -        -
 *   CLOSE           fd       -              -          -         -      -        -
 *   STATX           dirfd    path           stx        -         -      AT_*     mask
 *   FALLOCATE       file     -              -          bytes     off    -        mode
 *   FTRUNCATE       file     -              -          -         size   -        -
 *   SYNC_RANGE      file     -              -          bytes     off    SYNC_*   -
 *   RENAMEAT        olddir   oldpath        newpath    -         -      RENAME_* -   (fd2: newdir)
 *   UNLINKAT        dirfd    path           -          -         -      AT_*     -
 *   MKDIRAT         dirfd    path           -          -         -      -        mode
 *   NOP             -        -              -          -         -      -        -
 *   RECV_POOL       socket   -              buf_id     bufsize   (1)    MSG_*    pool
 *   POLL_FD         fd       -              -          -         -      POLL*    -
 *
 * (1) the count of buffers given back when it last began to wait
 * (afio_bufpool_park()); buf_id is the buffer its result is in.
 *
 * RECV_POOL waits for readiness without a buffer (the engine's part, which
 * ends with the poll(2) events as its result); the core then reads into a
 * buffer of the pool (lib/bufpool.c).  ACCEPT and RECV_POOL may be
 * multishot (r->shot).  POLL_FD is that wait alone, for the events in
 * flags, which end it as its result.
 */
enum afio_op {
	AFIO_OP_READ,
	AFIO_OP_WRITE,
	AFIO_OP_READV,
	AFIO_OP_WRITEV,
	AFIO_OP_FSYNC,
	AFIO_OP_RECV,
	AFIO_OP_SEND,
	AFIO_OP_ACCEPT,
	AFIO_OP_CONNECT,
	AFIO_OP_SENDMSG,
	AFIO_OP_RECVMSG,
	AFIO_OP_SENDFILE,
	AFIO_OP_TIMEOUT,
	AFIO_OP_OPENAT,
	AFIO_OP_OPENAT2,
	AFIO_OP_CLOSE,
	AFIO_OP_STATX,
	AFIO_OP_FALLOCATE,
	AFIO_OP_FTRUNCATE,
	AFIO_OP_SYNC_RANGE,
	AFIO_OP_RENAMEAT,
	AFIO_OP_UNLINKAT,
	AFIO_OP_MKDIRAT,
	AFIO_OP_NOP,
	AFIO_OP_RECV_POOL,
	AFIO_OP_POLL_FD,
	AFIO_OP_COUNT,
};

/* How an op behaves, which is all most of the code needs to know. */
enum afio_op_kind {
	AFIO_KIND_FILE_RW,	/* positioned read or write of a file */
	AFIO_KIND_SOCKET,	/* waits for readiness, then moves without blocking */
	AFIO_KIND_TIMER,
	AFIO_KIND_SYNC,		/* one system call that may block: fsync, paths, ... */
	AFIO_KIND_NOP,		/* nothing to do: the core finishes it where the backend cannot */
};

struct afio_op_desc {
	const char *name;	/* the call without "afio_" */
	uint8_t kind;
	short events;		/* SOCKET: what readiness it waits for */
};

extern const struct afio_op_desc afio_op_descs[AFIO_OP_COUNT];

enum afio_req_state {
	AFIO_REQ_FREE,
	AFIO_REQ_QUEUED,	/* accepted, still in the core's queue */
	AFIO_REQ_HANDED,	/* an engine owns it */
	AFIO_REQ_DONE,		/* result known, callback not yet run */
	AFIO_REQ_PARKED,	/* ready, waiting for a pool buffer to come back */
};

struct afio_ctx;
struct afio_engine;

struct afio_req {
	struct afio_req *next;	/* link in whichever queue holds it */
	union {
		afio_cb cb;
		afio_ecb ecb;		/* when shot has AFIO_SHOT_ECB */
	};
	void *data;
	/* From here to op: what new_req() clears for each request. */
	union {
		void *buf;
		const struct iovec *iov;
		struct msghdr *msg;
		const struct sockaddr *addr;
		const char *path;
	};
	union {
		const char *path2;
		struct statx *stx;
		const struct open_how *how;
		uint32_t buf_id;
	};
	size_t len;		/* see the table at enum afio_op */
	uint64_t off;
	ssize_t res;
	size_t progress;	/* bytes moved so far by a request done in steps */
	struct afio_engine *engine;	/* who owns it while HANDED */
	int flags;
	unsigned mode;
	/* CONNECT: connect(2) was called, the rest is waiting.  File read or
	   write: tried without blocking already (by libaio: an RWF_NOWAIT
	   iocb, or the try of a run's first request in the submit call),
	   so the pool does not try again in the caller.  Written by whoever
	   runs the request, a byte of its own: the owner reads state and
	   cancel beside it meanwhile. */
	uint8_t started;
	/* File read or write: enum afio_dio_seen, what the backend that
	   routed it (or the pool's first look) saw of O_DIRECT on its fd, so
	   nobody asks again (an F_SETFL in between races either way).
	   Written only by whoever runs the request. */
	uint8_t dio;
	uint8_t shot;		/* enum afio_shot, set by the queueing call */
	uint8_t op;
	uint8_t state;
	uint8_t cancel;		/* afio_cancel() asked for it */
	struct afio_ctx *ctx;
	int fd;
	int fd2;
	uint32_t index;		/* position in the slot array; backends key per-slot state on it */
	uint32_t gen;		/* bumped at each reuse: stale events and handles */
};

/* A slot is part of what every connection that waits costs. */
_Static_assert(sizeof(struct afio_req) <= 120, "struct afio_req grew");

enum afio_dio_seen {
	AFIO_DIO_UNSEEN,
	AFIO_DIO_OFF,
	AFIO_DIO_ON,
};

/* What a request that may complete more than once, or with a pool
   buffer, carries (r->shot). */
enum afio_shot {
	AFIO_SHOT_ECB = 1u << 0,	/* its callback is an afio_ecb */
	AFIO_SHOT_MULTI = 1u << 1,	/* queued again after each result, until the last */
	AFIO_SHOT_BUF_NOWAIT = 1u << 2,	/* an empty pool is -ENOBUFS, not a wait */
	AFIO_SHOT_HAS_BUF = 1u << 3,	/* its result is in buffer r->buf_id of pool r->mode */
	AFIO_SHOT_ARMED = 1u << 4,	/* its engine keeps it going: the kernel's own multishot */
	AFIO_SHOT_BOUND = 1u << 5,	/* r->fd is the core's dup of the program's fd (bind_socket()) */
	AFIO_SHOT_REARM = 1u << 6,	/* QUEUED in ctx->rearm, not ctx->queue (lib/queue.c) */
};

struct afio_reqq {
	struct afio_req *head;
	struct afio_req **tail;
	unsigned count;
};

static inline void afio_reqq_init(struct afio_reqq *q)
{
	q->head = NULL;
	q->tail = &q->head;
	q->count = 0;
}

static inline void afio_reqq_push(struct afio_reqq *q, struct afio_req *r)
{
	r->next = NULL;
	*q->tail = r;
	q->tail = &r->next;
	q->count++;
}

static inline void afio_reqq_push_front(struct afio_reqq *q, struct afio_req *r)
{
	r->next = q->head;
	q->head = r;
	if (q->tail == &q->head)
		q->tail = &r->next;
	q->count++;
}

/* afio_reqq_pop() of r, which the caller read as q's head. */
static inline void afio_reqq_pop_head(struct afio_reqq *q, struct afio_req *r)
{
	q->head = r->next;
	if (!q->head)
		q->tail = &q->head;
	q->count--;
	r->next = NULL;
}

static inline struct afio_req *afio_reqq_pop(struct afio_reqq *q)
{
	struct afio_req *r = q->head;

	if (r)
		afio_reqq_pop_head(q, r);
	return r;
}

/* Moves all of src to the end of dst; src is left empty. */
static inline void afio_reqq_splice(struct afio_reqq *dst, struct afio_reqq *src)
{
	if (!src->head)
		return;
	*dst->tail = src->head;
	dst->tail = src->tail;
	dst->count += src->count;
	afio_reqq_init(src);
}

/* Unlinks r; returns 0, or -ENOENT when r is not in q.  O(n): cancel only. */
int afio_reqq_remove(struct afio_reqq *q, struct afio_req *r);

/* Total bytes a READ/WRITE/READV/WRITEV request asks for. */
size_t afio_req_bytes(const struct afio_req *r);

/* What a request that stops with err after moving `progress` bytes
   completes with: the callback learns how many bytes moved, and of err
   only when none did. */
static inline ssize_t afio_partial(size_t progress, ssize_t err)
{
	return progress ? (ssize_t)progress : err;
}

static inline enum afio_op_kind afio_op_kind(enum afio_op op)
{
	return (enum afio_op_kind)afio_op_descs[op].kind;
}

static inline int afio_op_is_socket(enum afio_op op)
{
	return afio_op_kind(op) == AFIO_KIND_SOCKET;
}

/* The readiness a socket-kind request waits for: its op's, or the
   caller's for POLL_FD. */
static inline short afio_req_wait_events(const struct afio_req *r)
{
	return r->op == AFIO_OP_POLL_FD ? (short)r->flags : afio_op_descs[r->op].events;
}

/* What a request stopped by a cancel or a hand-off error completes with:
   a socket request that already moved bytes reports them, so that the
   callback knows what moved; a file request that did not run to its end
   says why (afio_cancel(3)). */
static inline ssize_t afio_req_stopped(const struct afio_req *r, ssize_t err)
{
	return afio_op_is_socket(r->op) ? afio_partial(r->progress, err) : err;
}

/* The codes the kernel keeps for a system call it restarts after a signal
   (ERESTARTSYS, ERESTARTNOINTR, ERESTARTNOHAND, ERESTART_RESTARTBLOCK in
   include/linux/errno.h): never a result for a program. */
static inline bool afio_is_restart_code(ssize_t res)
{
	/* -515 (ENOIOCTLCMD) is not one; one range test keeps this off the
	   common path of every completion. */
	return res <= -512 && res >= -516 && res != -515;
}

/* CLOCK_MONOTONIC ns, ns from now (saturated): a TIMEOUT's off. */
uint64_t afio_deadline_ns(uint64_t ns);

/* ---- lib/sockops.c: the socket ops done the non-blocking way ---- */

/*
 * One try of a SOCKET-kind request on fd without blocking and without
 * SIGPIPE, from r->progress on: the result, or -EAGAIN when it must wait
 * for readiness first (MSG_WAITALL may have moved some bytes already).  fd
 * is r->fd, or a backend's own dup of it once the request is bound to the
 * socket (see asyncfio(7)).  Only for requests afio_sock_can_try() allows.
 */
ssize_t afio_req_sock_nowait(struct afio_req *r, int fd);

/* Whether r can be tried without blocking as it is: accept and connect
   cannot on a socket without O_NONBLOCK (they have no MSG_DONTWAIT); a
   pool worker does them, with afio_req_sock_flagged().  A sendfile always
   can: it moves no more than the socket has room for. */
bool afio_sock_can_try(const struct afio_req *r, int fd);

/* Whether every page a SENDFILE request reads is in the page cache, so
   that its sendfile(2) waits for nothing: cachestat(2), or where that is
   refused its first and last pages (lib/sockops.c); for the program's
   own thread, which would wait as a plain sendfile(2) does. */
bool afio_sendfile_cached(const struct afio_req *r);
/* The same where cachestat(2) answers, else false: for a thread that
   others wait for (the pool's poller). */
bool afio_sendfile_surely_cached(const struct afio_req *r);

/* ---- lib/fileops.c: file reads and writes in the calling thread ---- */

/* A FILE_RW-kind op writes (else it reads). */
static inline bool afio_op_writes(enum afio_op op)
{
	return op == AFIO_OP_WRITE || op == AFIO_OP_WRITEV;
}

static inline bool afio_req_writes(const struct afio_req *r)
{
	return afio_op_writes(r->op);
}

/*
 * r's read or write from r->off + *progress to the end of the request,
 * moving *progress on.  Without RWF_NOWAIT in rwf it loops until done or
 * EOF, as the kernel does for regular files; with it, it stops at the
 * first short or refused transfer.  Bytes moved, or -errno when none did.
 */
ssize_t afio_req_file_rw(const struct afio_req *r, size_t *progress, int rwf);

/* ---- lib/syncops.c: every op done the blocking way, for the pool ---- */

/* A SYNC-kind request, blocking: its result. */
ssize_t afio_req_run_sync(struct afio_req *r);

/* A SYNC-kind request tried where Linux can say "would block" instead
   (openat2 with RESOLVE_CACHED, close): its result, or -EAGAIN. */
ssize_t afio_req_try_sync(struct afio_req *r);

/* afio_req_sock_nowait() for any SOCKET-kind request, by a worker that
   may wait: where afio_sock_can_try() would refuse it, the socket is
   O_NONBLOCK for the call. */
ssize_t afio_req_sock_flagged(struct afio_req *r, int fd);

#endif
