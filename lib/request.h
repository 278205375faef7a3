/* SPDX-License-Identifier: MIT */
/* Request slots and the intrusive queues that carry them between the core
   and the backends. */
#ifndef AFIO_REQUEST_H
#define AFIO_REQUEST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "asyncfio.h"

enum afio_op {
	AFIO_OP_READ,
	AFIO_OP_WRITE,
	AFIO_OP_READV,
	AFIO_OP_WRITEV,
	AFIO_OP_FSYNC,
	AFIO_OP_RECV,
	AFIO_OP_SEND,
	AFIO_OP_COUNT,
};

enum afio_req_state {
	AFIO_REQ_FREE,
	AFIO_REQ_QUEUED,	/* accepted, still in the core's queue */
	AFIO_REQ_HANDED,	/* an engine owns it */
	AFIO_REQ_DONE,		/* result known, callback not yet run */
};

struct afio_ctx;
struct afio_engine;

struct afio_req {
	struct afio_req *next;	/* link in whichever queue holds it */
	afio_cb cb;
	void *data;
	union {
		void *buf;
		const struct iovec *iov;
	};
	size_t len;		/* bytes, or the iovec count for READV/WRITEV */
	uint64_t off;
	ssize_t res;
	size_t progress;	/* bytes moved so far by a request done in steps */
	struct afio_ctx *ctx;
	struct afio_engine *engine;	/* who owns it while HANDED */
	int fd;
	int flags;		/* MSG_* for RECV/SEND, AFIO_FSYNC_* for FSYNC */
	uint32_t index;		/* position in the slot array; backends key per-slot state on it */
	uint32_t gen;		/* bumped at each reuse, for stale-event checks */
	uint8_t op;
	uint8_t state;
	uint8_t cancel;		/* afio_cancel() asked for it */
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

static inline struct afio_req *afio_reqq_pop(struct afio_reqq *q)
{
	struct afio_req *r = q->head;

	if (!r)
		return NULL;
	q->head = r->next;
	if (!q->head)
		q->tail = &q->head;
	q->count--;
	r->next = NULL;
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
   completes with: the bytes are the caller's to know of. */
static inline ssize_t afio_partial(size_t progress, ssize_t err)
{
	return progress ? (ssize_t)progress : err;
}

/* RECV or SEND on fd without blocking and without SIGPIPE, from
   r->progress on: the result, or -EAGAIN when it must wait for readiness
   first (MSG_WAITALL may have moved some bytes already).  fd is r->fd, or
   a backend's own dup of it once the request is bound to the socket (see
   asyncfio(7)). */
ssize_t afio_req_sock_nowait(struct afio_req *r, int fd);

static inline int afio_op_is_socket(enum afio_op op)
{
	return op == AFIO_OP_RECV || op == AFIO_OP_SEND;
}

/* What a request stopped by a cancel or a hand-off error completes with:
   bytes a socket request already took are the caller's to know of; a file
   request that did not run to its end says why (afio_cancel(3)). */
static inline ssize_t afio_req_stopped(const struct afio_req *r, ssize_t err)
{
	return afio_op_is_socket(r->op) ? afio_partial(r->progress, err) : err;
}

#endif
