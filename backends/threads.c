/* SPDX-License-Identifier: MIT */
/*
 * The thread-pool backend: always available, and where the other backends
 * send what their kernel interface cannot do asynchronously.
 *
 * Workers take requests from one locked queue.  Sockets that would block are
 * watched (one-shot) in an epoll set by a poller thread, so no worker is
 * held while a peer is silent.  Finished requests go on a locked list; one
 * atomic flag merges the eventfd writes, so a burst costs one write.
 *
 * Timers wait in a deadline heap that the poller also watches, in every
 * mode: no worker is held by a timer.
 *
 * A socket request that has to wait is bound to its socket from then on:
 * it waits and transfers on the pool's hold of the socket (struct
 * afio_sock_hold, lib/sockops.c) until it finishes.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"

/*
 * A buffered write holds the file's inode lock in the kernel for all of
 * its copy (generic_file_write_iter, ext4, xfs and btrfs alike), so
 * workers writing one file only take turns there, spinning on the lock
 * first and passing the file's cache lines from CPU to CPU per write.
 * Buffered writes go through a lane per file instead: a lane is busy while
 * one of its writes, its head, is queued or running, and the others wait
 * in the lane behind it.  The worker that runs the head runs the lane's
 * next write after it while nothing else waits in the queue (else the next
 * write joins the queue as the new head), and the other workers go on with
 * other work.  Whoever finishes or removes a head passes the lane on
 * (lane_pass_locked).  Striped by fd number: two files may share a lane.
 */
#define WRITE_LANES	16
#define NO_LANE		UINT8_MAX

struct lane {
	struct afio_reqq waiting;
	bool busy;
};

/* Where a request the pool owns is; guarded by pool->lock. */
enum where {
	W_NONE,
	W_QUEUED,	/* waiting for a worker */
	W_LANE,		/* waiting behind its lane's head */
	W_RUNNING,	/* a worker or the poller is doing it */
	W_WATCHED,	/* socket waiting for readiness in the epoll set */
	W_TIMER,	/* in the deadline heap */
};

struct slot {
	struct afio_req *req;
	uint8_t where;
	bool cancel;
	struct afio_sock_hold hold;	/* its socket, once it had to wait */
	bool in_set;		/* the hold's fd is in the epoll set, maybe spent */
	uint8_t lane;		/* the write lane it goes through, or NO_LANE */
	struct worker *worker;
	uint64_t deadline;	/* W_TIMER: CLOCK_MONOTONIC ns */
	unsigned heap_pos;	/* W_TIMER: where in pool->timers */
};

struct worker {
	struct pool *pool;
	pthread_t tid;
	sem_t wake;		/* posted once when taken off the idle stack */
	struct worker *next_idle;
	int wakefd;		/* cancel of a request this worker waits on */
	bool waits;		/* in a call that may wait: not counted running */
	bool owes_signal;	/* finished a request the owner was not told of */
	uint64_t owed_since;	/* when, in ns of CLOCK_MONOTONIC */
};

struct pool {
	pthread_mutex_t lock;
	struct lane lanes[WRITE_LANES];
	struct afio_reqq work;
	struct afio_reqq finished;
	atomic_bool signaled;
	atomic_bool evfd_watched;
	atomic_bool owner_asleep;
	atomic_uint owner_wake;	/* futex: bumped to wake an owner asleep in threads_wait() */
	atomic_bool no_nowait_writes;	/* RWF_NOWAIT writes refused here */
	bool stop;
	atomic_bool poller_stop;
	enum afio_mode mode;
	int evfd;		/* the context's */
	int epfd;
	int poller_wake;
	bool poller_running;
	pthread_t poller;
	unsigned nworkers;
	unsigned running;	/* workers awake and not in a call that may wait */
	unsigned max_running;	/* see max_running() */
	struct worker *idle;	/* asleep on their wake, not yet woken; last in on top */
	bool kept;		/* owner's: a queued request no worker was woken for */
	struct worker *workers;
	struct slot *slots;
	struct afio_req **timers;	/* min-heap by deadline */
	unsigned ntimers;
};

#define POLLER_WAKE_KEY UINT64_MAX

static struct slot *slot_of(struct pool *p, const struct afio_req *r)
{
	return &p->slots[r->index];
}

static uint64_t watch_key(const struct afio_req *r)
{
	return (uint64_t)r->index << 32 | r->gen;
}

/*
 * Under the lock.  Whoever wakes a worker takes it off the idle stack, so
 * every post has a sleeper.  The one that went idle last is woken first:
 * with little work one worker does it all, warm on its CPU, where taking
 * turns moved a worker from CPU to CPU at every request (20,000
 * migrations in 2 s of single 4 KiB direct reads).  A semaphore, not a
 * condition variable: glibc's pthread_cond_signal() can wait for an
 * earlier woken waiter to run, and on a busy machine the owner then
 * sleeps inside afio_submit() for a scheduler slice.  sem_post() never
 * waits.
 */
static void wake_one_locked(struct pool *p)
{
	struct worker *w = p->idle;

	p->idle = w->next_idle;
	p->running++;
	sem_post(&w->wake);
}

/*
 * Workers that run without waiting (a read the page cache served, tried
 * with RWF_NOWAIT) are kept to one per CPU: more would only take turns on
 * the CPUs, each turn a context switch (on 2 CPUs cached reads ran at
 * 336k/s with 2 workers, 232k with 4, 86k with 16).  A worker that enters
 * a call that may wait stops counting and wakes another for the queue
 * (worker_may_wait()), as io_uring's io-wq adds a worker when one blocks.
 * So while work is queued, some worker counted as running will take it,
 * or every worker waits or runs: the queue is never left to sleepers.
 */
static void wake_idle_locked(struct pool *p, unsigned n)
{
	for (; n && p->idle && p->running < p->max_running; n--)
		wake_one_locked(p);
}

/* ---- performing a request ---- */

/* Before a call that may wait (for the device, a lock, a peer, the dirty
   page throttle): see wake_idle_locked().  The worker counts again when it
   takes the lock after the request (worker_main()), however many such
   calls the request made. */
static void worker_may_wait(struct worker *w)
{
	struct pool *p = w->pool;

	if (w->waits)
		return;
	pthread_mutex_lock(&p->lock);
	w->waits = true;
	p->running--;
	if (p->work.head)
		wake_idle_locked(p, 1);
	pthread_mutex_unlock(&p->lock);
}

/* One fcntl per request at most, the answer kept in r; m (NULL on a
   worker) shares one answer among the requests of a submit call. */
static bool is_direct(struct afio_req *r, struct afio_fd_memo *m)
{
	int fl;

	if (r->dio != AFIO_DIO_UNSEEN)
		return r->dio == AFIO_DIO_ON;
	fl = m ? afio_fd_memo_flags(m, r->fd) : fcntl(r->fd, F_GETFL);
	r->dio = fl >= 0 && (fl & O_DIRECT) ? AFIO_DIO_ON : AFIO_DIO_OFF;
	return r->dio == AFIO_DIO_ON;
}

/*
 * One attempt without waiting.  Some file systems (ext4 among them) refuse
 * RWF_NOWAIT on buffered writes with EOPNOTSUPP; after the first refusal
 * this pool's writes skip the attempt, which would only cost a system call
 * (on a context that also writes to a file system that takes them, those
 * writes then go to a worker too).
 */
static ssize_t file_try_nowait(struct pool *p, const struct afio_req *r, size_t *progress)
{
	ssize_t n;

	if (afio_req_writes(r) && atomic_load_explicit(&p->no_nowait_writes, memory_order_relaxed))
		return -EOPNOTSUPP;
	n = afio_req_file_rw(r, progress, RWF_NOWAIT);
	if (n == -EOPNOTSUPP && afio_req_writes(r))
		atomic_store_explicit(&p->no_nowait_writes, true, memory_order_relaxed);
	return n;
}

/* ---- handing results back ---- */

/*
 * Until something watches the eventfd (the application, or the core
 * sleeping beside another engine: threads_watch_eventfd()) the owner
 * sleeps in threads_wait() on a futex, one system call where the eventfd
 * costs a poll() and a read(), and a worker wakes it only if it sleeps.
 * The owner says it sleeps, then looks at the finished list under the
 * lock; a worker adds to the list under the lock, then looks whether the
 * owner sleeps: one of the two sees the other.
 */
static void signal_owner(struct pool *p)
{
	uint64_t one = 1;

	if (!atomic_load(&p->evfd_watched)) {
		if (atomic_load_explicit(&p->owner_asleep, memory_order_relaxed) &&
		    atomic_exchange(&p->owner_asleep, false)) {
			atomic_fetch_add(&p->owner_wake, 1);
			(void)syscall(SYS_futex, &p->owner_wake, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
		}
		return;
	}
	if (!atomic_load_explicit(&p->signaled, memory_order_relaxed) &&
	    !atomic_exchange(&p->signaled, true))
		(void)!write(p->evfd, &one, sizeof(one));
}

/* A finished result waits at most this long, plus the request in hand, for
   the owner to hear of it while the worker goes on with quick ones. */
#define TELL_WITHIN_NS 20000u

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Before a worker does anything that may wait, what it finished is told. */
static void settle(struct worker *w)
{
	if (w->owes_signal) {
		w->owes_signal = false;
		signal_owner(w->pool);
	}
}

/* ---- the pool's hold on a socket ---- */

static int sock_fd(const struct slot *s, const struct afio_req *r)
{
	return afio_sock_hold_fd(&s->hold, r);
}

/* Before the hold goes: closing the dup alone would leave its registration
   in the set while the application's fd keeps the socket open. */
static void unwatch_locked(struct pool *p, struct slot *s)
{
	if (s->in_set)
		epoll_ctl(p->epfd, EPOLL_CTL_DEL, afio_sock_held_fd(&s->hold), NULL);
	s->in_set = false;
}

static void finish_locked(struct pool *p, struct afio_req *r, ssize_t res)
{
	struct slot *s = slot_of(p, r);

	unwatch_locked(p, s);
	afio_sock_release(&s->hold);
	s->where = W_NONE;
	s->worker = NULL;
	r->res = s->cancel && res == -EINTR ? -ECANCELED : res;
	afio_reqq_push(&p->finished, r);
}

/* ---- write lanes ---- */

/* Which lane r goes through.  Reads are asked about O_DIRECT here too:
   a worker's first try needs to know, and the submit call's memo answers
   for a batch on one fd with one fcntl where the workers would make one
   each. */
static uint8_t lane_of(struct afio_req *r, struct afio_fd_memo *m)
{
	if (afio_op_kind(r->op) != AFIO_KIND_FILE_RW || is_direct(r, m) || !afio_req_writes(r))
		return NO_LANE;
	return (unsigned)r->fd % WRITE_LANES;
}

/* Under the lock: to the workers' queue, or behind its lane's head.
   True when it went to the queue. */
static bool queue_locked(struct pool *p, struct afio_req *r)
{
	struct slot *s = slot_of(p, r);
	struct lane *l = s->lane == NO_LANE ? NULL : &p->lanes[s->lane];

	if (l && l->busy) {
		s->where = W_LANE;
		afio_reqq_push(&l->waiting, r);
		return false;
	}
	if (l)
		l->busy = true;
	s->where = W_QUEUED;
	afio_reqq_push(&p->work, r);
	return true;
}

/* Under the lock, when a lane's head has finished or was removed: the
   lane's next write, now its head, or NULL and the lane is free. */
static struct afio_req *lane_pass_locked(struct pool *p, unsigned lane)
{
	struct lane *l = &p->lanes[lane];
	struct afio_req *next = afio_reqq_pop(&l->waiting);

	if (!next)
		l->busy = false;
	return next;
}

/* ---- the epoll set of sockets waiting for readiness ---- */

static void *poller_main(void *arg);

static int start_poller_locked(struct pool *p)
{
	sigset_t all, old;
	int ret;

	if (p->poller_running)
		return 0;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(&p->poller, NULL, poller_main, p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret)
		return -ret;
	p->poller_running = true;
	return 0;
}

/*
 * Returns 0 when watched, else -errno (EPERM: the fd cannot be polled;
 * EMFILE or ENFILE: no fd for a dup, and r->fd itself is in the set for
 * another request already, or no longer the file it was watched on).  With
 * no fd for a dup r waits on r->fd, unbound (asyncfio(7)): a worker
 * blocked on it instead would be one fewer for everything else, and
 * enough of them would stop the pool.
 */
static int watch_locked(struct pool *p, struct afio_req *r)
{
	struct slot *s = slot_of(p, r);
	struct epoll_event ev = {
		.events = (uint32_t)afio_req_wait_events(r) | EPOLLONESHOT,
		.data.u64 = watch_key(r),
	};
	int ret, op;

	ret = start_poller_locked(p);
	if (ret)
		return ret;
	ret = afio_sock_hold(&s->hold, r);
	if (ret && !s->hold.borrowed)
		return ret;
	/* A one-shot registration that fired stays in the set, disabled. */
	op = s->in_set ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
	if (epoll_ctl(p->epfd, op, afio_sock_held_fd(&s->hold), &ev) < 0) {
		if (!s->hold.borrowed)
			return -errno;
		/* Not in the set now, whichever op failed. */
		s->in_set = false;
		afio_sock_release(&s->hold);
		return ret;
	}
	s->in_set = true;
	s->where = W_WATCHED;
	s->worker = NULL;
	return 0;
}

static void on_ready(struct pool *p, uint64_t key, uint32_t events)
{
	struct afio_req *r;
	struct slot *s;
	uint32_t index = key >> 32;
	ssize_t res;
	int fd;

	pthread_mutex_lock(&p->lock);
	s = &p->slots[index];
	r = s->where == W_WATCHED ? s->req : NULL;
	if (!r || r->gen != (uint32_t)key) {
		pthread_mutex_unlock(&p->lock);
		return;
	}
	/* The poller must not wait for the disk: a sendfile whose pages
	   are not all known to be cached goes to a worker. */
	if (r->op == AFIO_OP_SENDFILE && !afio_sendfile_surely_cached(r)) {
		s->where = W_QUEUED;
		afio_reqq_push(&p->work, r);
		wake_idle_locked(p, 1);
		pthread_mutex_unlock(&p->lock);
		return;
	}
	s->where = W_RUNNING;
	fd = sock_fd(s, r);
	pthread_mutex_unlock(&p->lock);

	/* A pooled receive's engine part is the readiness, which epoll has
	   just told; the owner's read finds out if it was spurious. */
	if (r->op == AFIO_OP_RECV_POOL)
		res = events;
	else
		res = afio_req_sock_nowait(r, fd);

	pthread_mutex_lock(&p->lock);
	if (res == -EAGAIN && !s->cancel) {
		/* Not ready after all: wait again, in a worker if the epoll
		   set cannot take it now. */
		if (watch_locked(p, r)) {
			s->where = W_QUEUED;
			afio_reqq_push(&p->work, r);
			wake_idle_locked(p, 1);
		}
		pthread_mutex_unlock(&p->lock);
		return;
	}
	if (res == -EAGAIN)
		res = afio_partial(r->progress, -ECANCELED);
	finish_locked(p, r, res);
	pthread_mutex_unlock(&p->lock);
	signal_owner(p);
}

/* ---- timers: a min-heap of deadlines, expired by the poller ---- */

static bool timer_before(const struct pool *p, unsigned i, unsigned j)
{
	return slot_of((struct pool *)p, p->timers[i])->deadline <
	       slot_of((struct pool *)p, p->timers[j])->deadline;
}

static void timer_swap(struct pool *p, unsigned i, unsigned j)
{
	struct afio_req *t = p->timers[i];

	p->timers[i] = p->timers[j];
	p->timers[j] = t;
	slot_of(p, p->timers[i])->heap_pos = i;
	slot_of(p, p->timers[j])->heap_pos = j;
}

static void timer_sift(struct pool *p, unsigned i)
{
	while (i && timer_before(p, i, (i - 1) / 2)) {
		timer_swap(p, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
	for (;;) {
		unsigned l = 2 * i + 1, m = i;

		if (l < p->ntimers && timer_before(p, l, m))
			m = l;
		if (l + 1 < p->ntimers && timer_before(p, l + 1, m))
			m = l + 1;
		if (m == i)
			return;
		timer_swap(p, i, m);
		i = m;
	}
}

static void timer_remove_locked(struct pool *p, struct afio_req *r)
{
	unsigned i = slot_of(p, r)->heap_pos;

	p->ntimers--;
	if (i == p->ntimers)
		return;
	p->timers[i] = p->timers[p->ntimers];
	slot_of(p, p->timers[i])->heap_pos = i;
	timer_sift(p, i);
}

static void wake_poller(struct pool *p)
{
	uint64_t one = 1;

	(void)!write(p->poller_wake, &one, sizeof(one));
}

static int add_timer_locked(struct pool *p, struct afio_req *r)
{
	struct slot *s = slot_of(p, r);
	int ret = start_poller_locked(p);

	if (ret)
		return ret;
	s->deadline = r->off;
	s->where = W_TIMER;
	s->heap_pos = p->ntimers;
	p->timers[p->ntimers++] = r;
	timer_sift(p, s->heap_pos);
	/* A new earliest deadline: the poller sleeps until the old one. */
	if (!s->heap_pos)
		wake_poller(p);
	return 0;
}

/* Finishes the due timers; the time until the next one, or NULL. */
static struct timespec *expire_timers(struct pool *p, struct timespec *left)
{
	uint64_t now = now_ns(), next;
	bool fired = false;

	pthread_mutex_lock(&p->lock);
	while (p->ntimers && slot_of(p, p->timers[0])->deadline <= now) {
		struct afio_req *r = p->timers[0];

		timer_remove_locked(p, r);
		finish_locked(p, r, -ETIME);
		fired = true;
	}
	next = p->ntimers ? slot_of(p, p->timers[0])->deadline - now : 0;
	pthread_mutex_unlock(&p->lock);
	if (fired)
		signal_owner(p);
	if (!next)
		return NULL;
	left->tv_sec = (time_t)(next / 1000000000u);
	left->tv_nsec = (long)(next % 1000000000u);
	return left;
}

#ifndef SYS_epoll_pwait2
#define SYS_epoll_pwait2 441	/* Linux 5.11 */
#endif

/* epoll_wait with a timeout in ns where the kernel has epoll_pwait2;
   before 5.11 in ms, rounded up so that no timer fires early. */
static int poller_wait(struct pool *p, struct epoll_event *ev, int max,
		       const struct timespec *timeout)
{
	static atomic_bool no_pwait2;
	int n, ms;

	if (!atomic_load_explicit(&no_pwait2, memory_order_relaxed)) {
		n = (int)syscall(SYS_epoll_pwait2, p->epfd, ev, max, timeout, NULL, 0);
		if (n >= 0 || errno != ENOSYS)
			return n;
		atomic_store_explicit(&no_pwait2, true, memory_order_relaxed);
	}
	ms = -1;
	if (timeout)
		ms = timeout->tv_sec > INT_MAX / 1000 - 1 ? INT_MAX :
		     (int)(timeout->tv_sec * 1000 + (timeout->tv_nsec + 999999) / 1000000);
	return epoll_wait(p->epfd, ev, max, ms);
}

static void *poller_main(void *arg)
{
	struct pool *p = arg;
	struct epoll_event ev[64];
	struct timespec left, *timeout;
	uint64_t v;
	int n;

	for (;;) {
		timeout = expire_timers(p, &left);
		n = poller_wait(p, ev, 64, timeout);
		for (int i = 0; i < n; i++) {
			if (ev[i].data.u64 != POLLER_WAKE_KEY) {
				on_ready(p, ev[i].data.u64, ev[i].events);
				continue;
			}
			(void)!read(p->poller_wake, &v, sizeof(v));
			if (atomic_load(&p->poller_stop))
				return NULL;
		}
	}
}

/* ---- workers ---- */

/* Waits until fd is ready for r or r is canceled (-ECANCELED). */
static int wait_ready(struct worker *w, struct afio_req *r, int fd)
{
	struct slot *s = slot_of(w->pool, r);
	struct pollfd pfd[2] = {
		{ .fd = fd, .events = afio_req_wait_events(r) },
		{ .fd = w->wakefd, .events = POLLIN },
	};
	uint64_t v;
	bool cancel;

	for (;;) {
		settle(w);
		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			return -errno;
		if (pfd[0].revents)
			return 0;
		if (pfd[1].revents) {
			(void)!read(w->wakefd, &v, sizeof(v));
			pthread_mutex_lock(&w->pool->lock);
			cancel = s->cancel;
			pthread_mutex_unlock(&w->pool->lock);
			if (cancel)
				return -ECANCELED;
		}
	}
}

/*
 * Hold this worker until the socket is ready or the request is canceled:
 * ASYNC, and accept or connect on a socket without O_NONBLOCK,
 * which only a thread that may wait can try (afio_req_sock_flagged()).
 */
static ssize_t sock_wait_xfer(struct worker *w, struct afio_req *r)
{
	struct slot *s = slot_of(w->pool, r);
	ssize_t n;
	int ret;

	worker_may_wait(w);
	for (;;) {
		n = afio_req_sock_flagged(r, sock_fd(s, r));
		if (n != -EAGAIN)
			return n;
		/* poll() would follow the number, not the file, after each
		   wake-up. */
		(void)afio_sock_hold(&s->hold, r);
		ret = wait_ready(w, r, sock_fd(s, r));
		if (ret)
			return afio_partial(r->progress, ret);
	}
}

static ssize_t perform_socket(struct worker *w, struct afio_req *r, bool *watched)
{
	struct pool *p = w->pool;
	struct slot *s = slot_of(p, r);
	ssize_t n;
	int ret;

	if (r->engine->route[r->op].then == AFIO_RUN_POOL ||
	    !afio_sock_can_try(r, sock_fd(s, r)))
		return sock_wait_xfer(w, r);
	/* sendfile(2) on a socket that takes it still waits for the file's
	   pages, or for a pipe's reader where the output is a pipe. */
	if (r->op == AFIO_OP_SENDFILE)
		worker_may_wait(w);
	n = afio_req_sock_nowait(r, sock_fd(s, r));
	if (n != -EAGAIN)
		return n;
	pthread_mutex_lock(&p->lock);
	ret = s->cancel ? -ECANCELED : watch_locked(p, r);
	*watched = !ret;
	pthread_mutex_unlock(&p->lock);
	/* No fd at all to wait on without a worker: an error, not a worker
	   held for as long as the peer is silent. */
	if (ret == -EMFILE || ret == -ENFILE)
		return afio_partial(r->progress, ret);
	/* Not pollable or canceled: wait here after all. */
	return *watched ? 0 : sock_wait_xfer(w, r);
}

static ssize_t perform_file(struct worker *w, struct afio_req *r)
{
	struct pool *p = w->pool;
	struct afio_route rt = r->engine->route[r->op];
	bool try_first;
	ssize_t n;

	/* A route that tried in the caller has tried without waiting
	   already.  Any other tries a read first: one the page cache serves
	   is done before results are told, and without counting as a wait
	   (wake_idle_locked()); what may wait tells them first.  RWF_NOWAIT
	   does not keep direct I/O off the device. */
	try_first = rt.first == AFIO_TRY_WORKER ||
		    (rt.first == AFIO_TRY_NONE && !afio_req_writes(r));
	if (try_first && !r->progress && !is_direct(r, NULL)) {
		n = file_try_nowait(p, r, &r->progress);
		if (n == 0 || (n > 0 && (size_t)n == afio_req_bytes(r)))
			return n;
		if (n < 0 && n != -EAGAIN && n != -EOPNOTSUPP)
			return n;
	}
	/* A buffered write copies into the page cache and seldom waits (for
	   the throttling of dirty pages at most), and where RWF_NOWAIT is
	   refused for it (ext4) nothing tells beforehand: results wait for
	   it (afio_eventfd(3)); telling them first cost an eventfd write and
	   a wake-up of the owner per write.  But it may wait (the throttle,
	   the journal), so it does not count as running.  A read that gets
	   here, or direct I/O, waits for the device.  lane_of() has asked
	   already. */
	if (!afio_req_writes(r) || r->dio == AFIO_DIO_ON)
		settle(w);
	worker_may_wait(w);
	return afio_req_file_rw(r, &r->progress, 0);
}

static ssize_t perform(struct worker *w, struct afio_req *r, bool *watched)
{
	switch (afio_op_kind(r->op)) {
	case AFIO_KIND_SOCKET:
		return perform_socket(w, r, watched);
	case AFIO_KIND_FILE_RW:
		return perform_file(w, r);
	default:
		settle(w);
		worker_may_wait(w);
		return afio_req_run_sync(r);
	}
}

/*
 * Under the lock: the next request of the queue, after waiting for one;
 * NULL once the pool stops and the queue is empty.  A worker is on the
 * idle stack before it tells the owner what it finished, so the request
 * the owner sends back goes to it, often before it sleeps (its sem_wait()
 * then returns at once), rather than wake another.
 */
static struct afio_req *take_work_locked(struct worker *w)
{
	struct pool *p = w->pool;

	while (!p->stop && !p->work.head) {
		w->next_idle = p->idle;
		p->idle = w;
		p->running--;
		pthread_mutex_unlock(&p->lock);
		settle(w);
		while (sem_wait(&w->wake) && errno == EINTR)
			;
		pthread_mutex_lock(&p->lock);
	}
	return afio_reqq_pop(&p->work);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct pool *p = w->pool;
	struct afio_req *r = NULL;
	bool watched, running_low;
	unsigned pending;
	uint8_t lane;
	ssize_t res;

	/* One lock round per request: a result is handed back and the next
	   request taken under the same lock (the next write of the lane of
	   the one just done, when nothing else is queued).  The owner is told of results when the queue runs low,
	   so that it refills it while the workers still have work, when the
	   oldest has waited TELL_WITHIN_NS, or before this worker waits or
	   sleeps: one wake-up carries many. */
	pthread_mutex_lock(&p->lock);
	for (;;) {
		if (!r)
			r = take_work_locked(w);
		if (!r)
			break;
		lane = slot_of(p, r)->lane;
		slot_of(p, r)->where = W_RUNNING;
		slot_of(p, r)->worker = w;
		pending = p->work.count;
		if (lane != NO_LANE)
			pending += p->lanes[lane].waiting.count;
		running_low = pending < p->nworkers;
		pthread_mutex_unlock(&p->lock);
		if (running_low || (w->owes_signal && now_ns() - w->owed_since >= TELL_WITHIN_NS))
			settle(w);

		watched = false;
		res = perform(w, r, &watched);

		if (!watched && !w->owes_signal)
			w->owed_since = now_ns();
		pthread_mutex_lock(&p->lock);
		if (w->waits) {
			w->waits = false;
			p->running++;
		}
		if (!watched) {
			finish_locked(p, r, res);
			w->owes_signal = true;
		}
		r = lane == NO_LANE ? NULL : lane_pass_locked(p, lane);
		if (r && p->work.head) {
			/* What waits in the queue goes first: a file written
			   without pause must not starve it. */
			slot_of(p, r)->where = W_QUEUED;
			afio_reqq_push(&p->work, r);
			r = NULL;
		}
	}
	pthread_mutex_unlock(&p->lock);
	settle(w);
	return NULL;
}

/* ---- a first try in the caller ---- */

/* What the route tries in the caller: true when r was finished or
   watched here, false when a worker must do it. */
static bool try_inline(struct pool *p, struct afio_req *r, struct afio_fd_memo *m)
{
	ssize_t n;
	int ret;

	switch (afio_op_kind(r->op)) {
	case AFIO_KIND_SYNC:
		n = afio_req_try_sync(r);
		if (n == -EAGAIN)
			return false;
		break;
	case AFIO_KIND_SOCKET:
		if (!afio_sock_can_try(r, r->fd) ||
		    (r->op == AFIO_OP_SENDFILE && !afio_sendfile_cached(r)))
			return false;
		if (r->op == AFIO_OP_RECV_POOL && afio_recv_pool_try(r))
			return true;
		n = r->op == AFIO_OP_RECV_POOL ? -EAGAIN : afio_req_sock_nowait(r, r->fd);
		if (n == -EAGAIN) {
			pthread_mutex_lock(&p->lock);
			ret = watch_locked(p, r);
			pthread_mutex_unlock(&p->lock);
			return !ret;
		}
		break;
	default:
		/* RWF_NOWAIT keeps direct I/O off locks, not off the device: a
		   direct read would wait for the disk right here.  A request
		   libaio tried already would only fail again. */
		if (r->started || is_direct(r, m))
			return false;
		if (r->engine->route[r->op].then == AFIO_RUN_CALLER) {
			n = afio_req_file_rw(r, &r->progress, 0);
			break;
		}
		n = file_try_nowait(p, r, &r->progress);
		if (n == -EAGAIN || n == -EOPNOTSUPP ||
		    (n >= 0 && (size_t)n < afio_req_bytes(r) && n))
			return false;
		break;
	}
	afio_count_nowait(r->ctx);
	afio_req_done(r, n);
	return true;
}

/* Timers go to the heap in every mode; one the poller cannot take (no
   thread could be started for it) fails with the reason. */
static void start_timer(struct pool *p, struct afio_req *r)
{
	int ret;

	pthread_mutex_lock(&p->lock);
	ret = add_timer_locked(p, r);
	pthread_mutex_unlock(&p->lock);
	if (ret)
		afio_req_done(r, ret);
}

/* ---- the ops ---- */

static int threads_submit(struct afio_engine *e, struct afio_reqq *q)
{
	struct pool *p = e->priv;
	struct afio_fd_memo memo;
	struct afio_reqq batch;
	struct afio_req *r;
	int n = 0;

	afio_fd_memo_init(&memo, e);
	afio_reqq_init(&batch);
	while ((r = afio_reqq_pop(q))) {
		struct slot *s = slot_of(p, r);

		afio_engine_take(e, r);
		s->req = r;
		s->cancel = false;
		afio_sock_hold_init(&s->hold);
		s->in_set = false;
		s->lane = NO_LANE;
		n++;
		if (r->op == AFIO_OP_TIMEOUT) {
			start_timer(p, r);
			continue;
		}
		if ((e->route[r->op].first == AFIO_TRY_CALLER ||
		     e->route[r->op].then == AFIO_RUN_CALLER) && try_inline(p, r, &memo))
			continue;
		s->lane = lane_of(r, &memo);
		afio_reqq_push(&batch, r);
	}
	if (batch.head) {
		unsigned count = 0;

		/* Under the lock: the poller may look at a slot's last use. */
		pthread_mutex_lock(&p->lock);
		while ((r = afio_reqq_pop(&batch)))
			count += queue_locked(p, r);
		/* Busy workers take the next request themselves: wake only as
		   many sleepers as there is new work for. */
		if (count == 1 && e->handed == 1 && e->caller_waits &&
		    !atomic_load_explicit(&p->evfd_watched, memory_order_relaxed)) {
			p->kept = true;
			count = 0;
		}
		wake_idle_locked(p, count);
		pthread_mutex_unlock(&p->lock);
	}
	return n;
}

static void threads_reap(struct afio_engine *e)
{
	struct pool *p = e->priv;
	struct afio_reqq done;
	struct afio_req *r;

	pthread_mutex_lock(&p->lock);
	done = p->finished;
	if (done.head)
		done.tail = p->finished.tail;
	afio_reqq_init(&p->finished);
	pthread_mutex_unlock(&p->lock);
	while ((r = afio_reqq_pop(&done)))
		afio_req_done(r, r->res);
}

static bool threads_ready(const struct afio_engine *e)
{
	struct pool *p = e->priv;
	bool ready;

	pthread_mutex_lock(&p->lock);
	ready = p->finished.head;
	pthread_mutex_unlock(&p->lock);
	return ready;
}

/* A file's or a block device's read or write ends by itself, where a
   character device's may wait for ever (/dev/kmsg's at its end); one of a
   lane waits for the writes before it. */
static bool owner_may_run(const struct slot *s, const struct afio_req *r)
{
	struct stat st;

	if (afio_op_kind(r->op) != AFIO_KIND_FILE_RW || s->lane != NO_LANE ||
	    fstat(r->fd, &st))
		return false;
	return S_ISREG(st.st_mode) || S_ISBLK(st.st_mode);
}

/*
 * A request is kept back (no worker woken for it) only by the submit of an
 * afio_poll() that will sleep without a time limit unless something
 * finishes first, with nobody watching the eventfd, and only when it is
 * all the pool holds: the sleep would wait for it alone, so the owner does
 * it itself, as a synchronous read would, without the two wake-ups of a
 * hand-off to a worker and back (on a virtual machine each the wake of an
 * idle CPU, together a fifth of a 40 us read).  With other requests in
 * the pool the owner would rather be free to take their results (kept
 * then, queue depth 32 of cached reads ran at half the rate).  Otherwise,
 * and before anything else the owner does (a wait with a limit, one on
 * the eventfd asked for in a callback, the end of that afio_poll()), the
 * worker it owes is woken.  True when the owner ran one.
 */
static bool settle_kept(struct pool *p, bool may_run)
{
	struct afio_req *r;
	struct slot *s;

	if (!p->kept)
		return false;
	p->kept = false;
	pthread_mutex_lock(&p->lock);
	r = p->work.head;
	if (!r || !may_run || !owner_may_run(s = slot_of(p, r), r)) {
		if (r)
			wake_idle_locked(p, 1);
		pthread_mutex_unlock(&p->lock);
		return false;
	}
	afio_reqq_pop(&p->work);
	s->where = W_NONE;
	pthread_mutex_unlock(&p->lock);
	afio_req_done(r, afio_req_file_rw(r, &r->progress, 0));
	return true;
}

static void threads_start_kept(struct afio_engine *e)
{
	settle_kept(e->priv, false);
}

static int threads_watch_eventfd(struct afio_engine *e)
{
	struct pool *p = e->priv;

	atomic_store(&p->evfd_watched, true);
	return 0;
}

static int threads_wait(struct afio_engine *e, int timeout_ms)
{
	struct pool *p = e->priv;
	struct timespec ts, *tsp = NULL;
	bool watched = atomic_load(&p->evfd_watched);	/* the owner sets it */
	unsigned seq;
	bool ready;

	if (settle_kept(p, timeout_ms < 0 && !watched))
		return 0;
	if (watched)
		return 1;
	seq = atomic_load(&p->owner_wake);
	atomic_store(&p->owner_asleep, true);
	pthread_mutex_lock(&p->lock);
	ready = p->finished.head;
	pthread_mutex_unlock(&p->lock);
	if (!ready) {
		if (timeout_ms >= 0) {
			ts.tv_sec = timeout_ms / 1000;
			ts.tv_nsec = (long)(timeout_ms % 1000) * 1000000;
			tsp = &ts;
		}
		(void)syscall(SYS_futex, &p->owner_wake, FUTEX_WAIT_PRIVATE, seq, tsp, NULL, 0);
	}
	atomic_store(&p->owner_asleep, false);
	return 0;
}

/* The next finished request writes the eventfd again. */
static void threads_expect_wakeup(struct afio_engine *e)
{
	struct pool *p = e->priv;

	atomic_store(&p->signaled, false);
}

/* Not yet started or still waiting for readiness: -ECANCELED now.  A worker
   waiting on a socket (ASYNC) is woken and gives up; a file request that a
   worker has started finishes normally. */
static void threads_cancel(struct afio_engine *e, struct afio_req *r)
{
	struct pool *p = e->priv;
	struct slot *s = slot_of(p, r);
	struct afio_req *next;
	uint64_t one = 1;

	pthread_mutex_lock(&p->lock);
	s->cancel = true;
	switch (s->where) {
	case W_QUEUED:
		afio_reqq_remove(&p->work, r);
		finish_locked(p, r, afio_req_stopped(r, -ECANCELED));
		if (s->lane != NO_LANE && (next = lane_pass_locked(p, s->lane))) {
			slot_of(p, next)->where = W_QUEUED;
			afio_reqq_push(&p->work, next);
			wake_idle_locked(p, 1);
		}
		break;
	case W_LANE:
		afio_reqq_remove(&p->lanes[s->lane].waiting, r);
		finish_locked(p, r, afio_req_stopped(r, -ECANCELED));
		break;
	case W_WATCHED:
		finish_locked(p, r, afio_partial(r->progress, -ECANCELED));
		break;
	case W_TIMER:
		timer_remove_locked(p, r);
		finish_locked(p, r, -ECANCELED);
		break;
	case W_RUNNING:
		if (s->worker && afio_op_is_socket(r->op))
			(void)!write(s->worker->wakefd, &one, sizeof(one));
		break;
	default:
		break;
	}
	pthread_mutex_unlock(&p->lock);
	signal_owner(p);
}

static void stop_threads(struct pool *p, unsigned started)
{
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	while (p->idle)
		wake_one_locked(p);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < started; i++)
		pthread_join(p->workers[i].tid, NULL);
	if (p->poller_running) {
		atomic_store(&p->poller_stop, true);
		wake_poller(p);
		pthread_join(p->poller, NULL);
	}
}

static void close_pool_fds(struct pool *p)
{
	for (unsigned i = 0; p->workers && i < p->nworkers; i++)
		if (p->workers[i].wakefd >= 0)
			close(p->workers[i].wakefd);
	if (p->poller_wake >= 0)
		close(p->poller_wake);
	if (p->epfd >= 0)
		close(p->epfd);
}

static void free_pool_mem(struct pool *p)
{
	free(p->workers);
	free(p->slots);
	free(p->timers);
	free(p);
}

static void free_pool(struct pool *p)
{
	close_pool_fds(p);
	for (unsigned i = 0; p->workers && i < p->nworkers; i++)
		sem_destroy(&p->workers[i].wake);
	pthread_mutex_destroy(&p->lock);
	free_pool_mem(p);
}

static int start_workers(struct pool *p, char *reason, size_t len)
{
	sigset_t all, old;
	unsigned i;
	int ret = 0;

	/* Workers take no signals: they belong to the application's threads. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (i = 0; i < p->nworkers; i++) {
		ret = -pthread_create(&p->workers[i].tid, NULL, worker_main, &p->workers[i]);
		if (ret)
			break;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		afio_reason(reason, len, "threads: pthread_create: %s", strerror(-ret));
		stop_threads(p, i);
	}
	return ret;
}

/* How many workers run at once (wake_idle_locked()): the CPUs this process
   may run on, at most nworkers, and all of them where it has one CPU.
   There the workers never run side by side, only in turn with the owner,
   and more of them let one turn carry more results: pinned to one CPU,
   cached reads ran at 187k/s with one worker running and 227k with four
   (54k and 35k context switches a second). */
static unsigned max_running(unsigned nworkers)
{
	cpu_set_t set;
	int n;

	n = sched_getaffinity(0, sizeof(set), &set) ? 0 : CPU_COUNT(&set);
	if (n < 2 || (unsigned)n > nworkers)
		return nworkers;
	return (unsigned)n;
}

static int threads_init(struct afio_engine *e, const struct afio_config *cfg,
			char *reason, size_t len)
{
	struct epoll_event wake = { .events = EPOLLIN, .data.u64 = POLLER_WAKE_KEY };
	struct pool *p;
	int ret;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	for (unsigned i = 0; i < WRITE_LANES; i++)
		afio_reqq_init(&p->lanes[i].waiting);
	afio_reqq_init(&p->work);
	afio_reqq_init(&p->finished);
	p->mode = cfg->mode;
	p->evfd = afio_ctx_eventfd(e->ctx);
	p->nworkers = cfg->threads;
	p->running = p->nworkers;	/* each counts until it first goes idle */
	p->max_running = max_running(p->nworkers);
	p->epfd = epoll_create1(EPOLL_CLOEXEC);
	p->poller_wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	p->slots = calloc(afio_ctx_entries(e->ctx), sizeof(*p->slots));
	p->timers = calloc(afio_ctx_entries(e->ctx), sizeof(*p->timers));
	p->workers = calloc(p->nworkers, sizeof(*p->workers));
	for (unsigned i = 0; p->workers && i < p->nworkers; i++) {
		p->workers[i].wakefd = -1;
		sem_init(&p->workers[i].wake, 0, 0);
	}
	if (p->epfd < 0 || p->poller_wake < 0) {
		ret = -errno;
		afio_reason(reason, len, "threads: %s", strerror(-ret));
		goto fail;
	}
	ret = -ENOMEM;
	if (!p->slots || !p->workers || !p->timers)
		goto fail;
	if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->poller_wake, &wake) < 0) {
		ret = -errno;
		goto fail;
	}
	for (unsigned i = 0; i < p->nworkers; i++) {
		p->workers[i].pool = p;
		p->workers[i].wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (p->workers[i].wakefd < 0) {
			ret = -errno;
			goto fail;
		}
	}
	ret = start_workers(p, reason, len);
	if (ret)
		goto fail;
	e->priv = p;
	return 0;
fail:
	free_pool(p);
	return ret;
}

static void threads_exit(struct afio_engine *e)
{
	struct pool *p = e->priv;

	stop_threads(p, p->nworkers);
	free_pool(p);
	e->priv = NULL;
}

/*
 * A child of fork() has none of the workers or the poller.  They may have
 * held the lock or waited on the semaphore when the copy was taken, so
 * neither is touched, and the slots' socket holds are left open (why: at
 * afio_sock_hold()).  The other fds live as long as the pool.
 */
static void threads_forget(struct afio_engine *e)
{
	struct pool *p = e->priv;

	close_pool_fds(p);
	free_pool_mem(p);
	e->priv = NULL;
}

static int threads_probe(const struct afio_config *cfg, char *reason, size_t len)
{
	(void)cfg;
	afio_reason(reason, len, "threads: available");
	return 0;
}

static int threads_describe(const struct afio_engine *e, char *buf, size_t len)
{
	const struct pool *p = e->priv;

	return snprintf(buf, len, "threads: %u workers, mode %s", p->nworkers,
			afio_mode_name(p->mode));
}

const struct afio_backend_ops afio_backend_threads = {
	.id = AFIO_BACKEND_THREADS,
	.name = "threads",
	.probe = threads_probe,
	.init = threads_init,
	.exit = threads_exit,
	.forget = threads_forget,
	.submit = threads_submit,
	.reap = threads_reap,
	.ready = threads_ready,
	.watch_eventfd = threads_watch_eventfd,
	.expect_wakeup = threads_expect_wakeup,
	.wait = threads_wait,
	.start_kept = threads_start_kept,
	.cancel = threads_cancel,
	.describe = threads_describe,
};
