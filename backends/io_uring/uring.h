/* SPDX-License-Identifier: MIT */
/*
 * What the files of the io_uring backend share: the engine, its slots,
 * the user_data marks, and the helpers each file's hot path inlines.
 *
 * The io_uring backend, on liburing (2.3 API; newer setup flags are asked
 * for at run time and dropped when the kernel refuses them).
 *
 * Each request is one SQE whose user_data is its slot index and generation,
 * so a CQE or a late cancel for a reused slot is recognised as stale.  A
 * cancel SQE carries its target's user_data with UD_CANCEL set, so that its
 * answer can be read; UD_RESERVED marks the timeout SQE liburing adds on
 * kernels without IORING_FEAT_EXT_ARG.  The context's eventfd is registered
 * with the ring, so it becomes readable whenever a CQE is posted.
 *
 * The exception is sendfile, a chain of SQEs through a pipe the context
 * owns (sendfile.c); its first splice is marked UD_SPLICE_IN.
 * Which opcode each op needs, and how it is prepared, is uring_ops[] (ops.c).
 *
 * Nothing is lost when a ring is full: a request that finds no free SQE
 * stays at the head of the core's queue until a reap made room, and the
 * kernel keeps completions that do not fit the CQ on its overflow list
 * (IORING_FEAT_NODROP) until we reap; without NODROP (before 5.5) we never
 * have more requests in the ring than the CQ holds.  With SQPOLL a full SQ
 * is waited out instead, since no reap need come (wait_sq_room(), ring.c).
 */
#ifndef AFIO_IO_URING_URING_H
#define AFIO_IO_URING_URING_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <liburing.h>

#include "backend.h"

#define UD_RESERVED	UINT64_MAX	/* low half never a slot index */
#define UD_CANCEL	(1ull << 31)	/* in a cancel's user_data; slots are fewer */
#define UD_SPLICE_IN	(1ull << 30)	/* sendfile's splice from the file */
#define UD_RETRY	(1ull << 29)	/* a timer to cancel the slot's request again */
#define UD_INDEX	0x1fffffffu
#define RETRY_NS	1000000		/* how long that timer waits */

/*
 * The CQ has room for every entry's own CQE (cq_size(), setup.c), and for
 * CQE_EXTRA cancels and retry timers beside them: requests leave those
 * free (cq_has_room(), ring.c), and cancels beyond them wait in the
 * cancel list for a reap (cancel_to_sqe(), cancel.c), so the CQ cannot
 * overflow however many requests are canceled at once.  A few spare for
 * liburing's own timeout.  Sized per request instead (a cancel and a
 * timer each), the CQ took 48 of the ~240 bytes an entry costs.
 */
#define CQE_EXTRA	32
#define CQE_SPARE	8

struct uring;
typedef void prep_fn(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r);

/* What an op needs from the kernel, since when, and how its SQE is made. */
struct uring_op {
	uint8_t opcode;
	const char *name;
	const char *since;
	prep_fn *prep;
};

/* By op; a missing opcode sends the op to the pool. */
extern const struct uring_op uring_ops[AFIO_OP_COUNT];

/* Where a sendfile's chain stands: its chain, a splice out, the poll
   before one, or the chain again after a step the kernel dropped. */
enum sf_step { SF_CHAIN, SF_OUT, SF_POLL, SF_RESTART };

struct sendfile_state {
	int pipe[2];
	unsigned pipe_size;	/* 0: holds no pipe */
	unsigned in_pipe;	/* spliced in, not yet out */
	int in_res;		/* the splice from the file */
	int last_res;		/* the last splice out, or the poll */
	uint8_t pending;	/* its SQEs in the ring */
	uint8_t step;
	bool lost;		/* a step the kernel dropped when its submitter exited */
};

/*
 * What the engine keeps for one slot of the context, by its index: what
 * every request's submit and completion touch, 16 bytes, so that four
 * share a cache line and an idle connection's slot costs 16 bytes.
 */
struct uring_slot {
	struct afio_req *req;		/* while in the ring */
	pid_t submitter;		/* the thread that submitted it */
	bool cancel_queued;		/* its request is in the cancel list */
	bool retry_armed;		/* a retry timer waits or runs */
	bool connect_waits;		/* a connect waits for POLLOUT */
	uint8_t multishot;		/* enum native_shot of the SQE in the ring */
} __attribute__((aligned(16)));

_Static_assert(sizeof(struct uring_slot) == 16, "a slot is 16 bytes");

/* What only timers and sendfiles keep, by slot index, apart from the
   slots (alloc_uring()): memory that requests of other ops never touch. */
struct uring_slot_io {
	struct __kernel_timespec timeout;	/* a TIMEOUT's (prep_timeout()) */
	struct sendfile_state sendfile;
};

/* A multishot request that the kernel keeps going itself (ring.c). */
enum native_shot {
	SHOT_NONE,		/* one SQE, one CQE */
	SHOT_FIRST,		/* IORING_*_MULTISHOT, no result yet */
	SHOT_GOING,		/* IORING_*_MULTISHOT, results came */
	SHOT_RETRIED,		/* without it, after a first shot's -EINVAL */
};

/* An emptied pipe, kept for the next sendfile (sendfile.c). */
struct spare_pipe {
	int fd[2];
	unsigned size;			/* F_GETPIPE_SZ when it was made */
};

/* A buffer pool as a provided buffer ring (bufring.c). */
struct uring_bufring {
	struct io_uring_buf_ring *br;	/* NULL: the core keeps the pool */
	size_t map_len;
	char *mem;			/* the pool's buffers */
	unsigned size;
	unsigned mask;
	unsigned count;
	unsigned on_ring;		/* free buffers the kernel may take now */
	unsigned depth;			/* how many it is given at most */
	unsigned nspare;
	uint32_t *spare;		/* the other free ones, the latest back on top */
};

struct uring {
	struct io_uring ring;
	unsigned nslots;
	unsigned flags;			/* setup flags in force */
	unsigned cq_entries;
	unsigned cqes_owed;		/* SQEs taken whose CQE is not yet reaped */
	int evfd;			/* the context's, which the kernel signals
					   once registered (uring_watch_eventfd()) */
	bool evfd_watched;
	int write_rwf;			/* RWF_NOSIGNAL where the kernel has it */
	bool plain_op[AFIO_OP_COUNT];	/* has_op, and one SQE of any length */
	uint8_t sqe_flags[AFIO_OP_COUNT];	/* by op: IOSQE_ASYNC where the route says */
	bool sendfile_try;		/* sendfile_inline() where its range is cached */
	struct afio_reqq again;		/* to go to the kernel again (must_go_again(),
					   connect_goes_on()) */
	struct afio_reqq next_steps;	/* sendfiles whose next SQE waits for room */
	struct afio_reqq pipe_waiters;	/* sendfiles that wait for a pipe */
	unsigned ncancels;
	uint64_t *cancels;		/* cancels and retry timers waiting for an SQE,
					   2 * nslots, after io */
	struct __kernel_timespec retry_after;
	bool dropped;			/* the kernel said it dropped completions */
	bool has_op[AFIO_OP_COUNT];
	bool has_cancel;
	enum afio_mode mode;
	unsigned pipes_out;		/* pipes sendfiles hold now */
	unsigned nspare;
	struct spare_pipe *spare_pipes;	/* nslots, after the cancels */
	struct uring_slot_io *io;	/* nslots, mapped: see alloc_uring() */
	size_t io_map_len;
	unsigned pbuf_pools;		/* pools the kernel takes buffers of, by bit */
	/* The kernel's own multishot accept (5.19) and receive from a
	   buffer ring (6.0), until a kernel shows it lacks them
	   (native_shot_cqe(), ring.c). */
	bool native_accept;
	bool native_recv;
	struct uring_bufring bufrings[AFIO_MAX_BUFPOOLS];
	struct uring_slot slots[];	/* nslots */
};

static inline uint64_t ud_of(const struct afio_req *r)
{
	return (uint64_t)r->gen << 32 | r->index;
}

/* r leaves its slot: nothing of its own state may be found there by the
   request that takes the slot next. */
static inline void release_slot(struct uring *u, const struct afio_req *r)
{
	struct uring_slot *s = &u->slots[r->index];

	s->req = NULL;
	s->cancel_queued = false;
	s->connect_waits = false;
	s->multishot = SHOT_NONE;
}

/*
 * Asked at every submit.  The default TLS model of a shared library looks
 * the variable up through __tls_get_addr() at each use (3% of a nop run);
 * initial-exec reads it at a fixed offset.  Four bytes of static TLS stay
 * within what glibc keeps spare for a library opened later with dlopen()
 * (a fio engine that links this one): one variable, in ring.c, for all
 * the files.
 */
extern __thread pid_t uring_self_tid __attribute__((tls_model("initial-exec")));

static inline pid_t self_tid(void)
{
	if (!uring_self_tid)
		uring_self_tid = gettid();
	return uring_self_tid;
}

/* Submits what is in the SQ.  -EBUSY/-EAGAIN: the kernel wants a reap
   first (CQ overflow, memory); what is left stays in the SQ. */
static inline int push_sq(struct uring *u)
{
	int ret;

	if (!io_uring_sq_ready(&u->ring))
		return 0;
	do
		ret = io_uring_submit(&u->ring);
	while (ret == -EINTR);
	return ret < 0 ? ret : 0;
}

int wait_sq_room(struct uring *u);

/* Room in the CQ for n more CQEs that leaves keep of it free (CQE_EXTRA
   for cancels, by requests; none, by the cancels themselves). */
static inline bool cq_room(const struct uring *u, unsigned n, unsigned keep)
{
	return u->cqes_owed + n + keep + CQE_SPARE <= u->cq_entries;
}

/* Every SQE we make owes one CQE: a multishot one's last (ring.c). */
static inline struct io_uring_sqe *take_sqe(struct uring *u)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);

	if (sqe)
		u->cqes_owed++;
	return sqe;
}

/* A free SQE, submitting what is queued to make room; NULL when the
   kernel takes no more for now. */
static inline struct io_uring_sqe *get_sqe(struct uring *u)
{
	struct io_uring_sqe *sqe = take_sqe(u);

	if (sqe)
		return sqe;
	if (push_sq(u))
		return NULL;
	if ((u->flags & IORING_SETUP_SQPOLL) && wait_sq_room(u))
		return NULL;
	return take_sqe(u);
}

/*
 * io_uring cancels what a thread submitted when the thread exits: at once
 * what io-wq had not started, and a request waiting by poll once its file
 * is ready (it completes then without the task).  Such a -ECANCELED,
 * asked for by nobody and reaped by another thread than the one that
 * submitted, means the request did nothing: it goes again, from this
 * thread, as on the other backends, where a thread's exit changes nothing.
 * A timer would start over: it keeps the -ECANCELED.  Reaped by its own
 * submitter it is the kernel's own answer (no io-wq worker could be
 * started), and stays.
 *
 * An io-wq worker interrupted in a blocking call (its submitter exited, or
 * the ring is being torn down) may complete the request with the code the
 * kernel gives a system call to restart (ERESTARTSYS and its kin, 512-516,
 * which net and read/write requests turn into EINTR but splice and others
 * do not): the call did nothing, and the request goes again, in every
 * mode, as a restarted system call would (asyncfio(7)).  A canceled
 * request ends instead (finish_res()).
 */
static inline bool must_go_again(const struct uring *u, const struct afio_req *r, ssize_t res)
{
	if (r->cancel)
		return false;
	if (afio_is_restart_code(res))
		return true;
	return res == -ECANCELED && !(u->flags & IORING_SETUP_SQPOLL) &&
	       r->op != AFIO_OP_TIMEOUT && u->slots[r->index].submitter != self_tid();
}

/* What submit does with a request that is not one plain SQE. */
enum special { SPECIAL_TAKEN, SPECIAL_PREPARED, SPECIAL_STOP };

/* ---- between the files, by the file that defines each ---- */

/* ring.c */
void push_waiting_now(struct uring *u);

/* Each kind is rare and this runs twice a round: a look, inline, first. */
static inline void push_waiting(struct uring *u)
{
	if (u->again.head || u->next_steps.head || u->pipe_waiters.head || u->ncancels)
		push_waiting_now(u);
}

/* ops.c */
int uring_pool_attach(struct afio_engine *e, unsigned pool, char *mem, unsigned count,
		      size_t size);
void uring_pool_return(struct afio_engine *e, unsigned pool, unsigned id);
void uring_pooled_cqe(struct uring *u, struct afio_req *r, ssize_t res, unsigned id);
void uring_pooled_shot(struct uring *u, struct afio_req *r, ssize_t res, unsigned id);
bool uring_pool_ran_dry(struct uring *u, const struct afio_req *r);
void prep_native_shot(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r);
void uring_bufrings_free(struct uring *u);
int uring_op_kernel(const struct afio_engine *e, enum afio_op op, char *buf, size_t len);

/* setup.c */
int uring_probe(const struct afio_config *cfg, char *reason, size_t len);
int uring_init(struct afio_engine *e, const struct afio_config *cfg, char *reason, size_t len);
void uring_exit(struct afio_engine *e);
int uring_watch_eventfd(struct afio_engine *e);
void uring_forget(struct afio_engine *e);
int uring_describe(const struct afio_engine *e, char *buf, size_t len);

/* sendfile.c */
enum special sendfile_submit(struct afio_engine *e, struct afio_reqq *q, struct afio_req *r);
bool sendfile_step(struct uring *u, struct afio_req *r);
bool sendfile_start_waiter(struct uring *u, struct afio_req *r);
void sendfile_cqe(struct uring *u, struct afio_req *r, uint64_t ud, int res);
bool sendfile_cancel(struct uring *u, struct afio_req *r);

/* cancel.c */
bool cancel_to_sqe(struct uring *u, uint64_t ud);
void cancel_cqe(struct uring *u, uint64_t ud, int res);
void recancel(struct uring *u);
void uring_cancel(struct afio_engine *e, struct afio_req *r);

#endif
