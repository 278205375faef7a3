/* SPDX-License-Identifier: MIT */
/*
 * sendfile: file -> pipe -> socket, all in the kernel, and in INLINE mode
 * sendfile(2) in the caller where the range is cached.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>

#include "uring.h"

/*
 * A sendfile is a splice from the file into a pipe of its own, linked to a
 * splice from the pipe to the socket: the pages go by reference, never
 * through user memory.  What the second splice leaves in the pipe (a full
 * socket buffer, or a short first splice that broke the link) goes on with
 * further splices, after a poll for room where the socket said EAGAIN, so
 * a pipe goes back to the spares empty.  The request completes once none of
 * its SQEs is in the ring; its result is what reached the socket.
 *
 * Pipes cost two fds each.  An emptied one is kept for the next sendfile,
 * up to one per slot: a burst of sendfiles (one per connection that an
 * event-loop pass found writable) would otherwise make and close a pipe
 * for most of them, and the fds were taken at the burst's peak anyway.  A
 * sendfile that finds no fd for a pipe waits for one another gives back.
 */

#define SENDFILE_PIPE_SIZE	(1u << 20)

static int new_pipe(struct sendfile_state *sf)
{
	int size;

	if (pipe2(sf->pipe, O_CLOEXEC | O_NONBLOCK))
		return -errno;
	/* A larger pipe moves a large file in fewer round trips; the
	   default is what an unprivileged process may be limited to. */
	(void)fcntl(sf->pipe[1], F_SETPIPE_SZ, SENDFILE_PIPE_SIZE);
	size = fcntl(sf->pipe[1], F_GETPIPE_SZ);
	sf->pipe_size = size > 0 ? (unsigned)size : 65536;
	return 0;
}

static int get_pipe(struct uring *u, struct sendfile_state *sf)
{
	if (u->nspare) {
		struct spare_pipe *sp = &u->spare_pipes[--u->nspare];

		sf->pipe[0] = sp->fd[0];
		sf->pipe[1] = sp->fd[1];
		sf->pipe_size = sp->size;
	} else {
		int ret = new_pipe(sf);

		if (ret)
			return ret;
	}
	u->pipes_out++;
	return 0;
}

/* An empty pipe is kept for the next sendfile; one with bytes left in it
   (a request that stopped early) is closed. */
static void put_pipe(struct uring *u, struct sendfile_state *sf)
{
	if (!sf->pipe_size)
		return;
	u->pipes_out--;
	if (!sf->in_pipe && u->nspare < u->nslots) {
		u->spare_pipes[u->nspare++] = (struct spare_pipe){
			.fd = { sf->pipe[0], sf->pipe[1] },
			.size = sf->pipe_size,
		};
	} else {
		close(sf->pipe[0]);
		close(sf->pipe[1]);
	}
	sf->pipe_size = 0;
}

/*
 * Everything but the pipe starts afresh: a state left by the request that
 * held the slot before (a lost step of one canceled meanwhile, say) would
 * make this one send its range twice.
 */
static void sendfile_clear(struct sendfile_state *sf)
{
	*sf = (struct sendfile_state){
		.pipe = { sf->pipe[0], sf->pipe[1] },
		.pipe_size = sf->pipe_size,
		.step = SF_CHAIN,
	};
}

/* false when the SQ has no room for the whole chain now.  The chain
   takes what is left of the range, so that no byte goes twice and the
   result never exceeds the length asked for. */
static bool sendfile_start(struct uring *u, struct afio_req *r)
{
	struct sendfile_state *sf = &u->io[r->index].sendfile;
	size_t left = r->len - r->progress;
	struct io_uring_sqe *in, *out;
	unsigned n;

	if (io_uring_sq_space_left(&u->ring) < 2 && (push_sq(u) ||
	    io_uring_sq_space_left(&u->ring) < 2))
		return false;
	n = (unsigned)(left < sf->pipe_size ? left : sf->pipe_size);
	in = take_sqe(u);
	io_uring_prep_splice(in, r->fd2, (int64_t)(r->off + r->progress), sf->pipe[1], -1, n, 0);
	io_uring_sqe_set_flags(in, IOSQE_IO_LINK);
	io_uring_sqe_set_data64(in, ud_of(r) | UD_SPLICE_IN);
	out = take_sqe(u);
	io_uring_prep_splice(out, sf->pipe[0], -1, r->fd, -1, n, 0);
	io_uring_sqe_set_data64(out, ud_of(r));
	sendfile_clear(sf);
	sf->pending = 2;
	return true;
}

/* The next splice out, the poll before it, or the chain again; false when
   the SQ is full. */
bool sendfile_step(struct uring *u, struct afio_req *r)
{
	struct sendfile_state *sf = &u->io[r->index].sendfile;
	struct io_uring_sqe *sqe;

	u->slots[r->index].submitter = self_tid();
	if (sf->step == SF_RESTART)
		return sendfile_start(u, r);
	sqe = get_sqe(u);
	if (!sqe)
		return false;
	if (sf->step == SF_POLL)
		io_uring_prep_poll_add(sqe, r->fd, POLLOUT);
	else
		io_uring_prep_splice(sqe, sf->pipe[0], -1, r->fd, -1, sf->in_pipe, 0);
	io_uring_sqe_set_data64(sqe, ud_of(r));
	sf->pending = 1;
	return true;
}

/* A sendfile that waited for a pipe starts once it has one and its chain
   fits; false, holding no pipe, when either is wanting. */
bool sendfile_start_waiter(struct uring *u, struct afio_req *r)
{
	struct sendfile_state *sf = &u->io[r->index].sendfile;

	if (get_pipe(u, sf))
		return false;
	if (sendfile_start(u, r))
		return true;
	put_pipe(u, sf);
	return false;
}

/* No fd for a pipe: wait for one a sendfile in flight gives back, or,
   with none in flight, let the pool do it (sendfile(2) needs no fd). */
static bool wait_for_pipe(struct afio_engine *e, struct afio_req *r)
{
	struct uring *u = e->priv;
	struct uring_slot *s = &u->slots[r->index];

	if (!u->pipes_out)
		return false;
	afio_engine_take(e, r);
	s->req = r;
	s->submitter = self_tid();
	sendfile_clear(&u->io[r->index].sendfile);
	afio_reqq_push(&u->pipe_waiters, r);
	return true;
}

static void sendfile_finish(struct uring *u, struct afio_req *r)
{
	struct sendfile_state *sf = &u->io[r->index].sendfile;
	ssize_t res;

	if (r->progress)
		res = (ssize_t)r->progress;
	else if (r->cancel)
		res = -ECANCELED;
	else if (sf->in_res <= 0)
		res = sf->in_res;
	else
		res = sf->last_res;
	/* splice(2) refuses a file it cannot read at an offset with EINVAL,
	   where sendfile(2) says ESPIPE. */
	if (res == -EINVAL && lseek(r->fd2, 0, SEEK_CUR) < 0 && errno == ESPIPE)
		res = -ESPIPE;
	put_pipe(u, sf);
	sendfile_clear(sf);
	release_slot(u, r);
	afio_req_done(r, res);
}

/* Once none of r's SQEs is in the ring: what is left in the pipe goes on,
   unless the request was canceled or the socket failed. */
static void sendfile_next(struct uring *u, struct afio_req *r)
{
	struct sendfile_state *sf = &u->io[r->index].sendfile;
	int res = sf->last_res;

	if (sf->lost && !r->cancel && (sf->in_pipe || r->progress < r->len)) {
		sf->lost = false;
		sf->step = sf->in_pipe ? SF_OUT : SF_RESTART;
		afio_reqq_push(&u->next_steps, r);
		return;
	}
	if (r->cancel || !sf->in_pipe ||
	    (res < 0 && res != -EAGAIN && !(sf->step == SF_CHAIN && res == -ECANCELED))) {
		sendfile_finish(u, r);
		return;
	}
	sf->step = res == -EAGAIN ? SF_POLL : SF_OUT;
	afio_reqq_push(&u->next_steps, r);
}

void sendfile_cqe(struct uring *u, struct afio_req *r, uint64_t ud, int res)
{
	struct sendfile_state *sf = &u->io[r->index].sendfile;

	sf->pending--;
	/* The kernel dropped the step or was interrupted in it: it is done
	   again, as must_go_again() has a whole request done again. */
	if (must_go_again(u, r, res))
		sf->lost = true;
	else if (ud & UD_SPLICE_IN) {
		sf->in_res = res;
		if (res > 0)
			sf->in_pipe += (unsigned)res;
	} else if (sf->step == SF_POLL) {
		sf->last_res = res < 0 ? res : 0;
	} else {
		sf->last_res = res;
		if (res > 0) {
			r->progress += (size_t)res;
			sf->in_pipe -= (unsigned)res;
		}
	}
	if (!sf->pending)
		sendfile_next(u, r);
}

/*
 * Where the route tries sendfile in the caller (lib/route.c says why): a
 * file whose pages are all cached lets sendfile(2) do it here without
 * waiting (it moves no more than the socket has room for,
 * afio_sock_can_try()).
 * false when it must go the long way (it would block, or it did).  r is
 * q's head, and leaves q before it is done: afio_req_done() links it into
 * another queue, which would cut q behind it.
 */
static bool sendfile_inline(struct uring *u, struct afio_reqq *q)
{
	struct afio_req *r = q->head;
	ssize_t n;

	if (!u->sendfile_try || !afio_sock_can_try(r, r->fd) ||
	    !afio_sendfile_cached(r))
		return false;
	n = afio_req_sock_nowait(r, r->fd);
	if (n == -EAGAIN)
		return false;
	afio_reqq_pop(q);
	afio_count_nowait(r->ctx);
	afio_req_done(r, n);
	return true;
}

/* A sendfile at q's head, with room in the CQ for it (submit_special()):
   done inline, waiting for a pipe, sent to the pool or started. */
enum special sendfile_submit(struct afio_engine *e, struct afio_reqq *q, struct afio_req *r)
{
	struct uring *u = e->priv;
	struct sendfile_state *sf = &u->io[r->index].sendfile;

	if (sendfile_inline(u, q))
		return SPECIAL_TAKEN;
	if (get_pipe(u, sf)) {
		afio_reqq_pop(q);
		if (!wait_for_pipe(e, r))
			afio_route_to_pool(e, r);
		return SPECIAL_TAKEN;
	}
	if (!sendfile_start(u, r)) {
		put_pipe(u, sf);
		return SPECIAL_STOP;
	}
	return SPECIAL_PREPARED;
}

/* Between two steps nothing of it is in the ring: it stops here.  false
   while a step is in the ring, for the kernel to cancel. */
bool sendfile_cancel(struct uring *u, struct afio_req *r)
{
	if (u->io[r->index].sendfile.pending)
		return false;
	if (afio_reqq_remove(&u->next_steps, r))
		afio_reqq_remove(&u->pipe_waiters, r);
	sendfile_finish(u, r);
	return true;
}
