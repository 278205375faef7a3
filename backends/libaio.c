/* SPDX-License-Identifier: MIT */
/*
 * The Linux AIO backend, on libaio.
 *
 * Linux AIO is asynchronous only for O_DIRECT I/O that meets the file's
 * direct I/O alignment; for anything else io_submit() does the work, blocking
 * the caller.  So only aligned O_DIRECT reads and writes, fsync/fdatasync
 * (the kernel runs IOCB_CMD_FSYNC on a workqueue) and readiness polls of
 * sockets (IOCB_CMD_POLL) go to the kernel; everything else is handed to the
 * thread pool.
 *
 * Where the pool's route tries a buffered read or write in the caller
 * first (INLINE) and more requests on the same file follow in the batch,
 * that try is an iocb with RWF_NOWAIT in the same io_submit() as the rest
 * of the batch (see route_try()): the kernel copies what the page
 * cache holds right there, as the pool's preadv2(RWF_NOWAIT) would, but
 * with one system call for the batch instead of one per request.  What it
 * could not do without waiting (EAGAIN, a short count, EOPNOTSUPP) goes on
 * in the pool from where it stopped.
 *
 * With AFIO_CALLER_WRITES, INLINE's buffered writes are the same iocbs
 * without RWF_NOWAIT: the kernel writes them inside io_submit(), as raw
 * Linux AIO does, instead of handing them to the pool when the file
 * system refuses the flag (lib/route.c).
 *
 * O_DIRECT writes that extend the file go to the pool: ext4 completes
 * them inside io_submit().
 *
 * Alignment is what afio_dio_facts() says (lib/dio.c).  A file request
 * costs an fcntl(F_GETFL) and a statx, once per fd in a row within one
 * submit call (struct afio_fd_memo): the O_DIRECT flag belongs to the open
 * file description (F_SETFL can change it, and a closed fd number comes
 * back as another file), so nothing is kept from one call to the next,
 * unless the program hinted the fd (afio_fd_hint()): then neither, but a
 * statx for the size of a direct write.
 *
 * Sockets: after IOCB_CMD_POLL reports readiness, the transfer runs with
 * MSG_DONTWAIT on the owner thread, in reap; if it would still block, or
 * MSG_WAITALL wants more, the poll is armed again.  Every iocb carries the
 * context's eventfd (IOCB_FLAG_RESFD), and reap takes events without
 * blocking.  While nothing is in the pool the core sleeps in
 * io_getevents() (libaio_wait()), as a program on raw libaio does, not in
 * a poll of the eventfd and a read to clear it: the eventfd then stays
 * readable for events the wait took, which costs a look that finds
 * nothing at worst.  A poll's reference to the socket ends with the poll, so a
 * request that waits holds its socket (struct afio_sock_hold,
 * lib/sockops.c) and polls and transfers on that until it finishes.
 */
#include <errno.h>
#include <fcntl.h>
#include <libaio.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"

enum kind {
	K_NONE,
	K_RW,		/* O_DIRECT read or write */
	K_TRY,		/* buffered read or write with RWF_NOWAIT: done, or the pool's */
	K_SYNC,		/* fsync or fdatasync */
	K_POLL,		/* socket readiness, transfer follows in reap */
};

enum where {
	W_IDLE,
	W_KERNEL,	/* its iocb is in the kernel */
	W_PENDING,	/* a poll to arm again, waiting for room in the kernel */
};

/* iocb first: an event's obj points at the slot, and its data at the
   request.  72 bytes: part of what a connection that waits costs. */
struct slot {
	struct iocb iocb;
	struct afio_sock_hold hold;	/* a waiting socket request's */
	uint8_t kind;
	uint8_t where;
};

_Static_assert(sizeof(struct slot) == 72, "libaio's slot grew");

struct laio {
	io_context_t io;
	unsigned nr_events;
	unsigned in_kernel;	/* iocbs submitted whose event is not yet reaped */
	int evfd;
	enum afio_mode mode;
	const struct afio_route *route;	/* the engine's, by op */
	struct slot *slots;
	struct iocb **batch;
	struct afio_req **batch_req;
	struct io_event *events;
	struct afio_reqq pending;	/* taken requests whose poll waits for room */
	struct afio_lbs_cache lbs;
	bool used_statx;
	bool used_lbs;
	bool try_buffered;	/* the pool's route tries file requests in the caller */
	bool caller_writes;	/* and makes buffered writes there, waiting if need be */
	bool no_nowait[2];	/* by afio_req_writes(): the kernel refused RWF_NOWAIT once */
};

static struct slot *slot_of(struct laio *a, const struct afio_req *r)
{
	return &a->slots[r->index];
}

/* ---- alignment ---- */

/* The memo's answer for an O_DIRECT fd, asked where no hint gave it, or
   where a write needs the size a hint does not keep. */
static int dio_facts(struct laio *a, const struct afio_req *r, struct afio_fd_memo *m)
{
	if (m->dio_ret == 1 || (!m->dio_ret && m->dio.size_unknown && afio_req_writes(r)))
		m->dio_ret = afio_dio_facts(r->fd, &a->lbs, &m->dio);
	if (!m->dio_ret && m->dio.from_statx)
		a->used_statx = true;
	else if (!m->dio_ret)
		a->used_lbs = true;
	return m->dio_ret;
}

static bool aligned(uint64_t v, unsigned to)
{
	return !(v & (to - 1));
}

/* Buffer address and length of each segment, and the offset. */
static bool req_aligned(const struct afio_req *r, const struct afio_dio_facts *al)
{
	if (!aligned(r->off, al->off))
		return false;
	if (r->op == AFIO_OP_READ || r->op == AFIO_OP_WRITE)
		return aligned((uintptr_t)r->buf, al->mem) && aligned(r->len, al->off);
	for (size_t i = 0; i < r->len; i++)
		if (!aligned((uintptr_t)r->iov[i].iov_base, al->mem) ||
		    !aligned(r->iov[i].iov_len, al->off))
			return false;
	return true;
}

/*
 * A direct write past the end of the file is done inside io_submit() on
 * ext4 (it waits for the I/O to update the size), milliseconds here; so it
 * goes to the pool, like a misaligned one.  Preallocated files
 * (fallocate, ftruncate) are written asynchronously.
 */
static bool extends(const struct afio_req *r, const struct afio_dio_facts *al)
{
	if (!afio_req_writes(r))
		return false;
	return (r->flags & RWF_APPEND) || r->off + afio_req_bytes(r) > al->size;
}

/* ---- preparing iocbs ---- */

static void prep_rw(struct slot *s, const struct afio_req *r)
{
	switch (r->op) {
	case AFIO_OP_READ:
		io_prep_pread(&s->iocb, r->fd, r->buf, r->len, (long long)r->off);
		break;
	case AFIO_OP_WRITE:
		io_prep_pwrite(&s->iocb, r->fd, r->buf, r->len, (long long)r->off);
		break;
	case AFIO_OP_READV:
		io_prep_preadv2(&s->iocb, r->fd, r->iov, (int)r->len, (long long)r->off,
				r->flags);
		break;
	default:
		io_prep_pwritev2(&s->iocb, r->fd, r->iov, (int)r->len, (long long)r->off,
				 r->flags);
		break;
	}
	s->kind = K_RW;
}

/* The pool's try in the caller, made by the kernel inside io_submit();
   rwf: RWF_NOWAIT, or 0 for a write the caller makes whatever it waits
   for. */
static void prep_try(struct slot *s, struct afio_req *r, int rwf)
{
	prep_rw(s, r);
	s->iocb.aio_rw_flags |= rwf;
	s->kind = K_TRY;
	r->started = 1;
}

/* RWF_NOWAIT, or 0 where r is made in the caller however long it takes. */
static int try_rwf(const struct laio *a, const struct afio_req *r)
{
	return a->caller_writes && afio_req_writes(r) ? 0 : RWF_NOWAIT;
}

static void prep_sync(struct slot *s, const struct afio_req *r)
{
	if (r->flags & AFIO_FSYNC_DATASYNC)
		io_prep_fdsync(&s->iocb, r->fd);
	else
		io_prep_fsync(&s->iocb, r->fd);
	s->kind = K_SYNC;
}

static void prep_poll(struct slot *s, const struct afio_req *r)
{
	io_prep_poll(&s->iocb, afio_sock_hold_fd(&s->hold, r), afio_req_wait_events(r));
	s->kind = K_POLL;
}

/* ---- sorting requests ---- */

enum route {
	R_KERNEL,	/* s->iocb is ready for io_submit */
	R_POOL,
	R_DONE,		/* finished here with *res */
	R_TRY_HERE,	/* the pool's try, made by try_first_here() */
	R_FINISHED,	/* finished here already */
};

/*
 * Where the pool's try in the caller is made: in io_submit(), among the
 * rest of the batch, once this call knows that fd has positions (Linux
 * AIO reads a pipe, a socket or an eventfd as a stream, ignoring the
 * offset, where pread(2) says ESPIPE).  The first request of a run on an
 * fd is that test itself (try_first_here()); a lone one stays the
 * pool's, which tries it with the same one system call.
 */
static enum route route_try(struct laio *a, const struct afio_req *r, struct afio_fd_memo *m,
			    const struct afio_req *next)
{
	bool here = !try_rwf(a, r);

	if (!here && (!a->try_buffered || a->no_nowait[afio_req_writes(r)]))
		return R_POOL;
	if (m->positional != AFIO_FD_POSITIONS_UNKNOWN)
		return m->positional ? R_KERNEL : R_POOL;
	if (here || (next && next->fd == r->fd && afio_op_kind(next->op) == AFIO_KIND_FILE_RW))
		return R_TRY_HERE;
	return R_POOL;
}

static enum route route_file(struct laio *a, struct afio_req *r, struct slot *s,
			     struct afio_fd_memo *m, const struct afio_req *next,
			     ssize_t *res)
{
	int fl = r->dio == AFIO_DIO_OFF ? afio_fd_memo_promised(m, r->fd) :
					   afio_fd_memo_flags(m, r->fd);

	if (fl < 0) {
		*res = fl;
		return R_DONE;
	}
	if (!(fl & O_DIRECT)) {
		enum route to = route_try(a, r, m, next);

		r->dio = AFIO_DIO_OFF;
		if (to == R_KERNEL)
			prep_try(s, r, try_rwf(a, r));
		return to;
	}
	if (dio_facts(a, r, m) == -EBADF) {
		*res = m->dio_ret;
		return R_DONE;
	}
	if (m->dio_ret || !req_aligned(r, &m->dio) || extends(r, &m->dio))
		return R_POOL;
	prep_rw(s, r);
	return R_KERNEL;
}

/* What its route gives the pool goes there, and so does what cannot be
   tried without blocking, and a sendfile that would read the disk on
   this thread. */
static enum route route_socket(struct laio *a, struct afio_req *r, struct slot *s,
			       ssize_t *res)
{
	if (afio_route_pooled(a->route[r->op]) || !afio_sock_can_try(r, r->fd) ||
	    (r->op == AFIO_OP_SENDFILE && !afio_sendfile_cached(r))) {
		/* A closed fd fails here, as in the other modes, not in the
		   pool, whose own fds may take its number when it starts. */
		if (fcntl(r->fd, F_GETFD) < 0) {
			*res = -errno;
			return R_DONE;
		}
		return R_POOL;
	}
	/* Without a try, one that fails at once (MSG_OOB without urgent
	   data, an fd that is not a socket) would wait for a readiness
	   that changes nothing, or never comes. */
	if (r->op == AFIO_OP_RECV_POOL && afio_recv_pool_try(r))
		return R_FINISHED;
	*res = r->op == AFIO_OP_RECV_POOL ? -EAGAIN : afio_req_sock_nowait(r, r->fd);
	if (*res != -EAGAIN) {
		afio_count_nowait(r->ctx);
		return R_DONE;
	}
	/* Holding nothing, it polls r->fd: a closed fd then fails in
	   io_submit(), as it would have failed the try. */
	(void)afio_sock_hold(&s->hold, r);
	prep_poll(s, r);
	return R_KERNEL;
}

/* next: the request after r in the queue, if any. */
static enum route route(struct laio *a, struct afio_req *r, struct afio_fd_memo *m,
			const struct afio_req *next, ssize_t *res)
{
	struct slot *s = slot_of(a, r);

	switch (afio_op_kind(r->op)) {
	case AFIO_KIND_SOCKET:
		return route_socket(a, r, s, res);
	case AFIO_KIND_FILE_RW:
		return route_file(a, r, s, m, next, res);
	default:
		if (afio_route_pooled(a->route[r->op]))
			return R_POOL;
		prep_sync(s, r);
		return R_KERNEL;
	}
}

/* ---- io_submit ---- */

static void to_kernel(struct laio *a, struct afio_req *r)
{
	struct slot *s = slot_of(a, r);

	io_set_eventfd(&s->iocb, a->evfd);
	s->iocb.data = r;
	s->where = W_KERNEL;
	a->in_kernel++;
}

/* r, taken by this engine or not yet, goes on in the pool. */
static void hand_to_pool(struct afio_engine *e, struct afio_req *r)
{
	if (r->engine == e) {
		e->handed--;
		r->engine = NULL;
	}
	afio_route_to_pool(e, r);
}

/* A try's result: finished, or the rest to the pool from where it stopped
   (a short count is pages the cache did not hold, or the end of the file,
   which the pool then finds at once).  A refusal of RWF_NOWAIT turns
   tries in that direction off. */
static void try_done(struct afio_engine *e, struct afio_req *r, long res)
{
	struct laio *a = e->priv;
	size_t want = afio_req_bytes(r);

	if (res >= 0 && ((size_t)res >= want || !res)) {
		afio_count_nowait(r->ctx);
		afio_req_done(r, res);
		return;
	}
	if (res < 0 && res != -EAGAIN && res != -EOPNOTSUPP) {
		afio_req_done(r, res);
		return;
	}
	if (res == -EOPNOTSUPP)
		a->no_nowait[afio_req_writes(r)] = true;
	if (res > 0)
		r->progress = (size_t)res;
	if (r->cancel)
		afio_req_done(r, afio_req_stopped(r, -ECANCELED));
	else
		hand_to_pool(e, r);
}

/* The first request of a run on an fd whose positions this call does not
   know yet: the pool's try, here, in place of an fstat that would say no
   more. */
static void try_first_here(struct afio_engine *e, struct afio_req *r, struct afio_fd_memo *m)
{
	ssize_t n = afio_req_file_rw(r, &r->progress, try_rwf(e->priv, r));

	/* pread(2) looks at the flags only once the fd has positions. */
	m->positional = n >= 0 || n == -EAGAIN || n == -EOPNOTSUPP;
	r->started = 1;
	try_done(e, r, n);
}

/* An iocb the kernel refused at submit (not one left for lack of room). */
static void refused(struct afio_engine *e, struct afio_req *r, int err)
{
	struct laio *a = e->priv;
	struct slot *s = slot_of(a, r);
	uint8_t kind = s->kind;

	afio_sock_release(&s->hold);
	s->where = W_IDLE;
	s->kind = K_NONE;
	/* EINVAL: this file system or kernel lacks the command (for a try:
	   the flag, before Linux 4.13; EOPNOTSUPP: a file without it), and
	   tries in that direction stop, since each refusal costs an
	   io_submit() of its own (a request that was itself invalid stops
	   them too, which costs speed only); EAGAIN with nothing in the
	   kernel: no room will come.  The pool can do each the blocking way.
	   Else (EBADF, EFAULT) the error is the request's result. */
	bool lacks = err == -EINVAL || (kind == K_TRY && err == -EOPNOTSUPP);

	if (kind == K_TRY) {
		a->no_nowait[afio_req_writes(r)] |= lacks;
		r->started = 0;
	}
	if (err == -EAGAIN || (lacks && kind != K_RW)) {
		hand_to_pool(e, r);
	} else {
		afio_req_done(r, afio_req_stopped(r, err));
	}
}

/*
 * io_submit() reqs[0..n); returns how many the kernel holds or refused, so
 * that reqs[ret..n) are still to go (a full kernel queue).  Slots are marked
 * in the kernel before the call, undone for what did not go.
 */
static unsigned submit_batch(struct afio_engine *e, struct afio_req **reqs, unsigned n)
{
	struct laio *a = e->priv;
	unsigned done = 0;
	int ret;

	for (unsigned i = 0; i < n; i++) {
		to_kernel(a, reqs[i]);
		a->batch[i] = &slot_of(a, reqs[i])->iocb;
	}
	while (done < n) {
		ret = io_submit(a->io, (long)(n - done), a->batch + done);
		if (ret == -EINTR)
			continue;
		if (ret > 0) {
			done += (unsigned)ret;
			continue;
		}
		/* With nothing in the kernel, no completion would make room. */
		if (ret == -EAGAIN && a->in_kernel > n - done)
			break;
		a->in_kernel--;
		refused(e, reqs[done], ret ? ret : -EIO);
		done++;
	}
	for (unsigned i = done; i < n; i++) {
		slot_of(a, reqs[i])->where = W_IDLE;
		a->in_kernel--;
	}
	return done;
}

/* Arms again the polls that found no room earlier; they are already ours. */
static void submit_pending(struct afio_engine *e)
{
	struct laio *a = e->priv;
	struct afio_req *r;
	unsigned n = 0, went;

	while (n < a->nr_events && (r = afio_reqq_pop(&a->pending)))
		a->batch_req[n++] = r;
	if (!n)
		return;
	went = submit_batch(e, a->batch_req, n);
	while (n > went) {
		r = a->batch_req[--n];
		slot_of(a, r)->where = W_PENDING;
		afio_reqq_push_front(&a->pending, r);
	}
}

/* Back to the head of q, in their order: they wait for a reap, and are
   routed again (holding nothing meanwhile: they may be canceled there). */
static void give_back(struct laio *a, struct afio_reqq *q, struct afio_req **reqs,
		      unsigned from, unsigned n)
{
	while (n > from) {
		afio_sock_release(&slot_of(a, reqs[--n])->hold);
		afio_reqq_push_front(q, reqs[n]);
	}
}

static void libaio_reap(struct afio_engine *e);

static int libaio_submit(struct afio_engine *e, struct afio_reqq *q)
{
	struct laio *a = e->priv;
	struct afio_fd_memo memo;
	struct afio_req *r;
	unsigned n = 0, went;
	int taken = 0;
	bool tried = false;
	ssize_t res;

	afio_fd_memo_init(&memo, e);
	if (a->pending.head)
		submit_pending(e);
	while (n < a->nr_events && (r = afio_reqq_pop(q))) {
		switch (route(a, r, &memo, q->head, &res)) {
		case R_KERNEL:
			a->batch_req[n++] = r;
			continue;
		case R_POOL:
			afio_route_to_pool(e, r);
			break;
		case R_TRY_HERE:
			try_first_here(e, r, &memo);
			break;
		case R_DONE:
			afio_req_done(r, res);
			break;
		case R_FINISHED:
			break;
		}
		taken++;
	}
	if (!n)
		return taken;
	went = submit_batch(e, a->batch_req, n);
	/* Taken only now: until io_submit took them they were the queue's. */
	for (unsigned i = 0; i < went; i++) {
		struct slot *s = slot_of(a, a->batch_req[i]);

		if (s->where == W_KERNEL) {
			afio_engine_take(e, a->batch_req[i]);
			tried |= s->kind == K_TRY;
		}
	}
	give_back(a, q, a->batch_req, went, n);
	/* A try's event is in the ring as io_submit() returns: read now, what
	   would wait reaches the pool in this same flush, not at the next
	   poll (afio_submit(3): requests get going early). */
	if (tried)
		libaio_reap(e);
	taken += (int)went;
	return taken ? taken : -EAGAIN;
}

/* ---- completions ---- */

/* A poll found the socket ready (or was canceled): transfer or arm again. */
static void poll_ready(struct laio *a, struct afio_req *r, long mask)
{
	struct slot *s = slot_of(a, r);
	ssize_t res;

	if (r->cancel) {
		afio_sock_release(&s->hold);
		afio_req_done(r, afio_partial(r->progress, -ECANCELED));
		return;
	}
	if (mask < 0)
		res = afio_partial(r->progress, mask);
	else
		res = afio_req_sock_nowait(r, afio_sock_hold_fd(&s->hold, r));
	if (res != -EAGAIN) {
		afio_sock_release(&s->hold);
		afio_req_done(r, res);
		return;
	}
	prep_poll(s, r);
	s->where = W_PENDING;
	afio_reqq_push(&a->pending, r);
}

static void complete(struct afio_engine *e, struct io_event *ev)
{
	struct laio *a = e->priv;
	struct slot *s = (struct slot *)ev->obj;
	struct afio_req *r = ev->data;
	long res = (long)ev->res;
	uint8_t kind = s->kind;

	a->in_kernel--;
	s->where = W_IDLE;
	s->kind = K_NONE;
	if (kind == K_POLL)
		poll_ready(a, r, res);
	else if (kind == K_TRY)
		try_done(e, r, res);
	else
		afio_req_done(r, res);
}

/*
 * The kernel's completion ring (fs/aio.c, struct aio_ring), mapped into
 * the process at the address io_setup() returned as the io_context_t.
 * The kernel writes an event at tail and then moves tail on; whoever
 * reads events moves head on, and the kernel takes the slots up to head
 * as free again (also for events read here, without io_getevents).
 */
struct kaio_ring {
	unsigned id;
	unsigned nr;		/* events the ring holds */
	unsigned head;		/* next to read; ours to move */
	unsigned tail;		/* next the kernel writes */
	unsigned magic;
	unsigned compat_features;
	unsigned incompat_features;
	unsigned header_length;	/* where io_events starts */
	struct io_event io_events[];
};

#define KAIO_RING_MAGIC	0xa10a10a1

/* The ring, when it has the layout described above; else NULL. */
static struct kaio_ring *user_ring(io_context_t io)
{
	struct kaio_ring *ring = (struct kaio_ring *)io;

	if (!ring || ring->magic != KAIO_RING_MAGIC || ring->incompat_features ||
	    ring->header_length != sizeof(*ring))
		return NULL;
	return ring;
}

/*
 * Up to max events from the ring into out, without a system call; -1 when
 * head or tail make no sense (io_getevents then).  The acquire load of
 * tail pairs with the kernel's barrier between writing an event and
 * moving tail past it; the release store of head comes after the events
 * are copied out, so that the kernel does not reuse their slots before.
 * Only the owner thread reads the ring, and nothing here calls
 * io_getevents, which moves head too.
 */
static int ring_events(struct kaio_ring *ring, struct io_event *out, unsigned max)
{
	unsigned head = ring->head, nr = ring->nr, n = 0;
	unsigned tail = __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE);

	if (head >= nr || tail >= nr)
		return -1;
	while (head != tail && n < max) {
		out[n++] = ring->io_events[head];
		if (++head == nr)
			head = 0;
	}
	__atomic_store_n(&ring->head, head, __ATOMIC_RELEASE);
	return (int)n;
}

static int get_events(struct laio *a)
{
	struct timespec zero = { 0, 0 };
	struct kaio_ring *ring = user_ring(a->io);
	int n = ring ? ring_events(ring, a->events, a->nr_events) : -1;

	if (n < 0)
		n = io_getevents(a->io, 0, (long)a->nr_events, a->events, &zero);
	return n;
}

/* Without the ring's layout the core reads the eventfd before each look. */
static bool libaio_ready(const struct afio_engine *e)
{
	const struct laio *a = e->priv;
	struct kaio_ring *ring = user_ring(a->io);

	return ring && ring->head != __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE);
}

static void libaio_reap(struct afio_engine *e)
{
	struct laio *a = e->priv;
	int n;

	do {
		n = get_events(a);
		for (int i = 0; i < n; i++)
			complete(e, &a->events[i]);
	} while (n == (int)a->nr_events);
	if (a->pending.head)
		submit_pending(e);
}

/* Sleeps until an event comes, and completes what it took. */
static int libaio_wait(struct afio_engine *e, int timeout_ms)
{
	struct laio *a = e->priv;
	struct timespec ts, *tsp = NULL;
	int n;

	/* Nothing in the kernel to wake us: what the core waits for (a
	   poll waiting for room, a timeout) is the eventfd's, which it
	   clears before it sleeps (events taken here leave it readable). */
	if (!a->in_kernel)
		return 1;
	if (timeout_ms >= 0) {
		ts.tv_sec = timeout_ms / 1000;
		ts.tv_nsec = (long)(timeout_ms % 1000) * 1000000;
		tsp = &ts;
	}
	n = io_getevents(a->io, 1, (long)a->nr_events, a->events, tsp);
	if (n == -EINTR)
		return 0;
	if (n < 0)
		return n;
	for (int i = 0; i < n; i++)
		complete(e, &a->events[i]);
	return 0;
}

/* Only polls can be canceled in the kernel; direct I/O and fsync finish. */
static void libaio_cancel(struct afio_engine *e, struct afio_req *r)
{
	struct laio *a = e->priv;
	struct slot *s = slot_of(a, r);
	struct io_event ev;

	if (s->where == W_PENDING) {
		afio_reqq_remove(&a->pending, r);
		afio_sock_release(&s->hold);
		s->where = W_IDLE;
		s->kind = K_NONE;
		afio_req_done(r, afio_partial(r->progress, -ECANCELED));
		return;
	}
	/* On success the event still comes, with no revents: see poll_ready. */
	if (s->where == W_KERNEL && s->kind == K_POLL)
		(void)io_cancel(a->io, &s->iocb, &ev);
}

/* ---- set-up ---- */

static void probe_reason(int err, char *reason, size_t len)
{
	char max[32] = "?", cur[32] = "?";

	switch (err) {
	case -EAGAIN:
		afio_read_sysctl("/proc/sys/fs/aio-max-nr", max, sizeof(max));
		afio_read_sysctl("/proc/sys/fs/aio-nr", cur, sizeof(cur));
		afio_reason(reason, len, "io_setup: %s (fs.aio-max-nr=%s, fs.aio-nr=%s)",
			    strerror(-err), max, cur);
		break;
	case -EPERM:
		afio_reason(reason, len, "io_setup: %s (denied by a seccomp filter "
			    "or security policy)", strerror(-err));
		break;
	case -ENOSYS:
		afio_reason(reason, len, "io_setup: %s (kernel built without AIO)",
			    strerror(-err));
		break;
	default:
		afio_reason(reason, len, "io_setup: %s", strerror(-err));
		break;
	}
}

/*
 * io_destroy() waits for an RCU grace period (tens of ms) even for an idle
 * context, and a program that makes a context per connection would stall
 * on each.  So a kernel context with nothing in it is not destroyed with
 * its afio context: up to KCTX_KEEP of them are kept for the next
 * afio_create() of the same size, and the rest are destroyed on a thread
 * of their own.  Only an idle one leaves the caller: one with I/O still in
 * the kernel is destroyed right there, since io_destroy() also waits for
 * that I/O, which writes to the program's buffers.  A kept context counts
 * towards fs.aio-nr like a live one; the kernel frees what is left when
 * the process exits.  A child of fork() has none of the parent's contexts
 * (they belong to the parent's memory map), so it forgets the lists.
 */
#define KCTX_KEEP	4
#define KCTX_DOOMED	64

struct kctx {
	io_context_t io;
	unsigned nr_events;
};

static struct {
	pthread_mutex_t lock;
	struct kctx kept[KCTX_KEEP];
	unsigned nkept;
	io_context_t doomed[KCTX_DOOMED];
	unsigned ndoomed;
	bool reaper_running;
} kctx_cache = { .lock = PTHREAD_MUTEX_INITIALIZER };

static pthread_once_t kctx_once = PTHREAD_ONCE_INIT;

static void kctx_forget_in_child(void)
{
	pthread_mutex_init(&kctx_cache.lock, NULL);
	kctx_cache.nkept = 0;
	kctx_cache.ndoomed = 0;
	kctx_cache.reaper_running = false;
}

static void kctx_setup(void)
{
	(void)pthread_atfork(NULL, NULL, kctx_forget_in_child);
}

static void *kctx_reaper(void *arg)
{
	io_context_t io;

	(void)arg;
	pthread_mutex_lock(&kctx_cache.lock);
	while (kctx_cache.ndoomed) {
		io = kctx_cache.doomed[--kctx_cache.ndoomed];
		pthread_mutex_unlock(&kctx_cache.lock);
		io_destroy(io);
		pthread_mutex_lock(&kctx_cache.lock);
	}
	kctx_cache.reaper_running = false;
	pthread_mutex_unlock(&kctx_cache.lock);
	return NULL;
}

/* Under the lock: true when io went to the reaper thread. */
static bool kctx_doom_locked(io_context_t io)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t t;
	int ret;

	if (kctx_cache.ndoomed == KCTX_DOOMED)
		return false;
	if (!kctx_cache.reaper_running) {
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		ret = pthread_create(&t, &attr, kctx_reaper, NULL);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		pthread_attr_destroy(&attr);
		if (ret)
			return false;
		kctx_cache.reaper_running = true;
	}
	kctx_cache.doomed[kctx_cache.ndoomed++] = io;
	return true;
}

/* An idle kernel context of exactly nr_events, or NULL. */
static io_context_t kctx_take(unsigned nr_events)
{
	io_context_t io = NULL;

	pthread_once(&kctx_once, kctx_setup);
	pthread_mutex_lock(&kctx_cache.lock);
	for (unsigned i = 0; i < kctx_cache.nkept; i++) {
		if (kctx_cache.kept[i].nr_events == nr_events) {
			io = kctx_cache.kept[i].io;
			kctx_cache.kept[i] = kctx_cache.kept[--kctx_cache.nkept];
			break;
		}
	}
	pthread_mutex_unlock(&kctx_cache.lock);
	return io;
}

/* io, with nothing of it left in the kernel: kept, else destroyed by the
   reaper, else (no thread could be started) here. */
static void kctx_give_back(io_context_t io, unsigned nr_events)
{
	bool gone = true;

	pthread_once(&kctx_once, kctx_setup);
	pthread_mutex_lock(&kctx_cache.lock);
	if (kctx_cache.nkept < KCTX_KEEP)
		kctx_cache.kept[kctx_cache.nkept++] = (struct kctx){ io, nr_events };
	else
		gone = kctx_doom_locked(io);
	pthread_mutex_unlock(&kctx_cache.lock);
	if (!gone)
		io_destroy(io);
}

/* libaio returns -errno itself; it does not set errno. */
static int setup_io(unsigned entries, io_context_t *io, char *reason, size_t len)
{
	int ret;

	*io = kctx_take(entries);
	if (*io)
		return 0;
	if (entries > INT32_MAX)
		ret = -EINVAL;
	else
		ret = io_setup((int)entries, io);
	if (ret < 0) {
		probe_reason(ret, reason, len);
		return ret;
	}
	return 0;
}

static int libaio_probe(const struct afio_config *cfg, char *reason, size_t len)
{
	io_context_t io;
	int ret;

	ret = setup_io(cfg->entries, &io, reason, len);
	if (ret)
		return ret;
	kctx_give_back(io, cfg->entries);
	afio_reason(reason, len, "libaio: available");
	return 0;
}

static void free_laio_mem(struct laio *a)
{
	free(a->slots);
	free(a->batch);
	free(a->batch_req);
	free(a->events);
	free(a);
}

/* A ring with an event not yet read is not handed on: the next owner
   would take it for its own. */
static bool idle(struct laio *a)
{
	struct kaio_ring *ring = user_ring(a->io);

	return !a->in_kernel && !a->pending.head && ring && ring->head == ring->tail;
}

static void free_laio(struct laio *a)
{
	if (a->io && idle(a))
		kctx_give_back(a->io, a->nr_events);
	else if (a->io)
		io_destroy(a->io);
	free_laio_mem(a);
}

static int libaio_init(struct afio_engine *e, const struct afio_config *cfg,
		       char *reason, size_t len)
{
	unsigned n = afio_ctx_entries(e->ctx);
	struct laio *a;
	int ret;

	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->nr_events = n;
	a->mode = cfg->mode;
	a->route = e->route;
	a->try_buffered = afio_route(0, false, AFIO_OP_READ, cfg->mode, cfg->flags).first ==
			  AFIO_TRY_CALLER;
	a->caller_writes = afio_route(0, false, AFIO_OP_WRITE, cfg->mode, cfg->flags).then ==
			   AFIO_RUN_CALLER;
	a->evfd = afio_ctx_eventfd(e->ctx);
	afio_reqq_init(&a->pending);
	a->slots = calloc(n, sizeof(*a->slots));
	a->batch = calloc(n, sizeof(*a->batch));
	a->batch_req = calloc(n, sizeof(*a->batch_req));
	a->events = calloc(n, sizeof(*a->events));
	if (!a->slots || !a->batch || !a->batch_req || !a->events) {
		free_laio(a);
		return -ENOMEM;
	}
	ret = setup_io(n, &a->io, reason, len);
	if (ret) {
		free_laio(a);
		return ret;
	}
	e->priv = a;
	return 0;
}

static void libaio_exit(struct afio_engine *e)
{
	free_laio(e->priv);
	e->priv = NULL;
}

/* An AIO context belongs to the memory map that set it up: a child of
   fork() has no mapping of its ring and its io_destroy() would not find
   it.  The parent's requests go on there; here go only this process's
   memory and its copies of the socket holds (why: at afio_sock_hold()). */
static void libaio_forget(struct afio_engine *e)
{
	struct laio *a = e->priv;

	for (unsigned i = 0; i < a->nr_events; i++)
		afio_sock_release(&a->slots[i].hold);
	free_laio_mem(a);
	e->priv = NULL;
}

static int libaio_describe(const struct afio_engine *e, char *buf, size_t len)
{
	const struct laio *a = e->priv;
	const char *how = "statx, else logical block size";

	if (a->used_statx && a->used_lbs)
		how = "statx and logical block size";
	else if (a->used_statx)
		how = "statx";
	else if (a->used_lbs)
		how = "logical block size";
	return snprintf(buf, len, "libaio: nr_events=%u, dio alignment: %s, mode %s",
			a->nr_events, how, afio_mode_name(a->mode));
}

static int libaio_op_kernel(const struct afio_engine *e, enum afio_op op, char *buf,
			    size_t len)
{
	(void)e;
	switch (afio_op_kind(op)) {
	case AFIO_KIND_FILE_RW:
		afio_reason(buf, len, "io_submit");
		return 1;
	case AFIO_KIND_SOCKET:
		afio_reason(buf, len, "IOCB_CMD_POLL");
		return 1;
	default:
		if (op == AFIO_OP_FSYNC) {
			afio_reason(buf, len, "IOCB_CMD_FSYNC / IOCB_CMD_FDSYNC");
			return 1;
		}
		afio_reason(buf, len, "Linux AIO has no such command");
		return 0;
	}
}

const struct afio_backend_ops afio_backend_libaio = {
	.id = AFIO_BACKEND_LIBAIO,
	.name = "libaio",
	.caps = AFIO_CAP_DIRECT | AFIO_CAP_READINESS | AFIO_CAP_FSYNC,
	.probe = libaio_probe,
	.init = libaio_init,
	.exit = libaio_exit,
	.forget = libaio_forget,
	.submit = libaio_submit,
	.reap = libaio_reap,
	.ready = libaio_ready,
	.wait = libaio_wait,
	.cancel = libaio_cancel,
	.describe = libaio_describe,
	.op_kernel = libaio_op_kernel,
};
