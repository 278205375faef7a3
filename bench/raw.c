/* SPDX-License-Identifier: MIT */
/*
 * afio-bench --raw: the workload of a library run, straight on the engine a
 * backend wraps, in the thinnest loop that keeps qd requests in flight the
 * way the library does: everything the completions of one round queue goes
 * to the kernel in one call (or one call per request with --submit-each).
 * What a backend costs over its engine is the difference between the two.
 *
 * The stall figure of a round is the time from getting control back after a
 * wait (or at the start) to being ready to wait again: reaping, queueing and
 * submitting, what afio_poll(ctx, 0, 0) does for a library run.  For psync
 * it is each pread/pwrite, which is what an event loop doing them inline
 * would wait for.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef AFIO_BENCH_RAW_URING
#include <liburing.h>
#endif
#ifdef AFIO_BENCH_RAW_LIBAIO
#include <libaio.h>
#endif

#include "bench.h"

static uint64_t seed(void)
{
	return 0x2545f4914f6cdd1dull ^ (uint64_t)getpid();
}

static bool keep_going(uint64_t now, uint64_t deadline)
{
	return now < deadline && !bench_interrupted;
}

#ifdef AFIO_BENCH_RAW_URING
struct uring_run {
	const struct workload *w;
	struct io_uring ring;
	uint64_t *t_start;
	uint64_t rnd, next;
	unsigned in_flight;
	bool async;
};

static void uring_queue(struct uring_run *u, unsigned slot, uint64_t now)
{
	const struct workload *w = u->w;
	/* The SQ has qd entries and at most qd requests are out. */
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
	uint64_t off;

	if (w->op == BOP_NOP) {
		/* As the library sends it: a worker would have nothing to do. */
		io_uring_prep_nop(sqe);
	} else {
		off = pick_block(w, &u->rnd, &u->next) * w->bs;
		if (w->write)
			io_uring_prep_write(sqe, w->fd, w->bufs[slot], (unsigned)w->bs, off);
		else
			io_uring_prep_read(sqe, w->fd, w->bufs[slot], (unsigned)w->bs, off);
		if (u->async)
			sqe->flags |= IOSQE_ASYNC;
	}
	io_uring_sqe_set_data64(sqe, slot);
	u->t_start[slot] = now;
	u->in_flight++;
	if (w->submit_each)
		io_uring_submit(&u->ring);
}

/* with_eventfd: an eventfd registered, which the kernel signals as
   CQEs come, as the library's ring has one for a program's epoll loop. */
static int raw_uring(const struct workload *w, bool async, bool with_eventfd, struct outcome *o,
		     char *desc, size_t len)
{
	struct uring_run u = { .w = w, .rnd = seed(), .async = async };
	struct io_uring_cqe *cqe;
	uint64_t deadline, t, now;
	unsigned head, seen;
	int ret, efd = -1;

	u.t_start = calloc(w->qd, sizeof(*u.t_start));
	if (!u.t_start)
		return -ENOMEM;
	ret = io_uring_queue_init(w->qd, &u.ring, 0);
	if (ret) {
		fprintf(stderr, "afio-bench: io_uring_queue_init: %s\n", strerror(-ret));
		free(u.t_start);
		return ret;
	}
	if (with_eventfd) {
		efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		ret = efd < 0 ? -errno : io_uring_register_eventfd(&u.ring, efd);
		if (ret) {
			fprintf(stderr, "afio-bench: io_uring_register_eventfd: %s\n",
				strerror(-ret));
			goto out;
		}
	}
	snprintf(desc, len, "raw io_uring: liburing, sq=%u, no setup flags%s%s", w->qd,
		 async ? ", IOSQE_ASYNC on every request" : "",
		 with_eventfd ? ", an eventfd registered" : "");
	stall_sync(&o->stalls);
	o->t0 = t = now_ns();
	deadline = o->t0 + (uint64_t)(w->runtime * 1e9);
	for (unsigned i = 0; i < w->qd; i++)
		uring_queue(&u, i, o->t0);
	for (;;) {
		ret = io_uring_submit(&u.ring);
		if (ret < 0) {
			fprintf(stderr, "afio-bench: io_uring_submit: %s\n", strerror(-ret));
			break;
		}
		stall_add(&o->stalls, now_ns() - t);
		if (!u.in_flight)
			break;
		if (io_uring_peek_cqe(&u.ring, &cqe)) {
			ret = io_uring_wait_cqe(&u.ring, &cqe);
			if (ret < 0 && ret != -EINTR) {
				fprintf(stderr, "afio-bench: io_uring_wait_cqe: %s\n",
					strerror(-ret));
				break;
			}
			stall_sync(&o->stalls);
		}
		t = now = now_ns();
		seen = 0;
		io_uring_for_each_cqe(&u.ring, head, cqe) {
			unsigned slot = (unsigned)io_uring_cqe_get_data64(cqe);

			bool ok = cqe->res == (w->op == BOP_NOP ? 0 : (int)w->bs);

			seen++;
			u.in_flight--;
			if (w->op == BOP_NOP)
				outcome_op(o, cqe->res, ok, now - u.t_start[slot]);
			else
				outcome_io(o, cqe->res, w->bs, now - u.t_start[slot]);
			if (ok && keep_going(now, deadline))
				uring_queue(&u, slot, now);
		}
		io_uring_cq_advance(&u.ring, seen);
	}
	o->t1 = now_ns();
out:
	io_uring_queue_exit(&u.ring);
	if (efd >= 0)
		close(efd);
	free(u.t_start);
	return ret < 0 ? ret : 0;
}
#endif

#ifdef AFIO_BENCH_RAW_LIBAIO
struct aio_run {
	const struct workload *w;
	io_context_t ctx;
	struct iocb *cbs;
	struct iocb **batch;
	unsigned pending;
	uint64_t *t_start;
	uint64_t rnd, next;
	unsigned in_flight;
};

/* io_submit may take part of a batch; the rest goes with the next call. */
static int aio_flush(struct aio_run *a)
{
	int n;

	while (a->pending) {
		n = io_submit(a->ctx, (long)a->pending, a->batch);
		if (n == -EINTR)
			continue;
		if (n < 0)
			return n;
		if (!n)
			return a->in_flight > a->pending ? 0 : -EAGAIN;
		a->pending -= (unsigned)n;
		memmove(a->batch, a->batch + n, a->pending * sizeof(*a->batch));
		if (a->pending)
			return 0;
	}
	return 0;
}

static int aio_queue(struct aio_run *a, unsigned slot, uint64_t now)
{
	const struct workload *w = a->w;
	struct iocb *cb = &a->cbs[slot];
	long long off = (long long)(pick_block(w, &a->rnd, &a->next) * w->bs);

	if (w->write)
		io_prep_pwrite(cb, w->fd, w->bufs[slot], w->bs, off);
	else
		io_prep_pread(cb, w->fd, w->bufs[slot], w->bs, off);
	cb->data = (void *)(uintptr_t)slot;
	a->batch[a->pending++] = cb;
	a->t_start[slot] = now;
	a->in_flight++;
	return w->submit_each ? aio_flush(a) : 0;
}

static int raw_libaio(const struct workload *w, struct outcome *o, char *desc, size_t len)
{
	struct aio_run a = { .w = w, .rnd = seed() };
	struct io_event *ev;
	uint64_t deadline, t, now;
	int ret, n = 0;

	a.cbs = calloc(w->qd, sizeof(*a.cbs));
	a.batch = calloc(w->qd, sizeof(*a.batch));
	a.t_start = calloc(w->qd, sizeof(*a.t_start));
	ev = calloc(w->qd, sizeof(*ev));
	ret = -ENOMEM;
	if (!a.cbs || !a.batch || !a.t_start || !ev)
		goto out;
	ret = io_setup((int)w->qd, &a.ctx);
	if (ret) {
		fprintf(stderr, "afio-bench: io_setup: %s\n", strerror(-ret));
		goto out;
	}
	snprintf(desc, len, "raw libaio: io_setup(%u), io_submit + io_getevents", w->qd);
	stall_sync(&o->stalls);
	o->t0 = t = now_ns();
	deadline = o->t0 + (uint64_t)(w->runtime * 1e9);
	for (unsigned i = 0; i < w->qd && !ret; i++)
		ret = aio_queue(&a, i, o->t0);
	for (; !ret;) {
		ret = aio_flush(&a);
		stall_add(&o->stalls, now_ns() - t);
		if (ret || !a.in_flight)
			break;
		n = io_getevents(a.ctx, 1, (long)w->qd, ev, NULL);
		if (n == -EINTR)
			n = 0;
		if (n < 0) {
			ret = n;
			break;
		}
		stall_sync(&o->stalls);
		t = now = now_ns();
		for (int i = 0; i < n && !ret; i++) {
			unsigned slot = (unsigned)(uintptr_t)ev[i].data;
			long res = (long)ev[i].res;

			a.in_flight--;
			outcome_io(o, res, w->bs, now - a.t_start[slot]);
			if (res == (long)w->bs && keep_going(now, deadline))
				ret = aio_queue(&a, slot, now);
		}
	}
	if (ret)
		fprintf(stderr, "afio-bench: libaio: %s\n", strerror(-ret));
	/* Whatever is still out must land before its buffer goes. */
	while (a.in_flight && io_getevents(a.ctx, 1, (long)w->qd, ev, NULL) > 0)
		a.in_flight--;
	o->t1 = now_ns();
	io_destroy(a.ctx);
out:
	free(ev);
	free(a.t_start);
	free(a.batch);
	free(a.cbs);
	return ret;
}
#endif

struct psync_thread {
	pthread_t tid;
	unsigned next_sock;
	const struct workload *w;
	unsigned index;
	uint64_t deadline;
	struct outcome o;
};

/* One op done the plain way: 1 when it went, else -errno. */
static long sync_op(const struct workload *w, struct psync_thread *p, uint64_t *rnd,
		    uint64_t *off)
{
	const struct op_target *t = w->target;
	struct statx stx;
	long n;
	int fd;

	switch (w->op) {
	case BOP_OPENAT:
		fd = open(pick_path(w, rnd), O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		return close(fd) ? -errno : 1;
	case BOP_STATX:
		return statx(AT_FDCWD, pick_path(w, rnd), 0, STATX_BASIC_STATS, &stx) ? -errno : 1;
	default:
		if (*off + w->bs > t->file_size)
			*off = 0;
		n = sendfile(t->socks[p->next_sock++ % t->nsocks], t->file_fd, (off_t *)off, w->bs);
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p->o.bytes += (uint64_t)n;
		return 1;
	}
}

static void *psync_main(void *arg)
{
	struct psync_thread *p = arg;
	const struct workload *w = p->w;
	/* The buffers turn over as a library run's qd requests do theirs:
	   one buffer used again and again would stay in the CPU's cache,
	   which the copies of qd requests in flight do not. */
	unsigned slot = p->index % w->qd;
	uint64_t rnd = seed() + p->index, next = 0, t, now;
	ssize_t n;

	stall_sync(&p->o.stalls);
	for (t = now_ns(); keep_going(t, p->deadline); t = now) {
		off_t off;

		if (w->op != BOP_RW) {
			n = sync_op(w, p, &rnd, &next);
			now = now_ns();
			outcome_op(&p->o, n, n == 1, now - t);
			stall_add(&p->o.stalls, now - t);
			if (n != 1)
				break;
			continue;
		}
		off = (off_t)(pick_block(w, &rnd, &next) * w->bs);
		if (w->write)
			n = pwrite(w->fd, w->bufs[slot], w->bs, off);
		else
			n = pread(w->fd, w->bufs[slot], w->bs, off);
		slot = (slot + w->threads) % w->qd;
		now = now_ns();
		outcome_io(&p->o, n < 0 ? -errno : n, w->bs, now - t);
		stall_add(&p->o.stalls, now - t);
		if (n != (ssize_t)w->bs)
			break;
	}
	return NULL;
}

static void merge(struct outcome *into, const struct outcome *o)
{
	into->done += o->done;
	into->bytes += o->bytes;
	if (o->errors && !into->errors)
		into->first_error = o->first_error;
	into->errors += o->errors;
	for (unsigned i = 0; i < HIST_LEN; i++) {
		into->hist[i] += o->hist[i];
		into->stalls.hist[i] += o->stalls.hist[i];
	}
	into->stalls.calls += o->stalls.calls;
	into->stalls.slow += o->stalls.slow;
	into->stalls.slept += o->stalls.slept;
	into->stalls.preempted += o->stalls.preempted;
	if (o->stalls.max_ns > into->stalls.max_ns)
		into->stalls.max_ns = o->stalls.max_ns;
	if (o->stalls.slept_max_ns > into->stalls.slept_max_ns)
		into->stalls.slept_max_ns = o->stalls.slept_max_ns;
}

/* --threads threads, each blocking in pread/pwrite: fio's psync with
   numjobs=N, in one process.  --qd does not apply. */
static int raw_psync(const struct workload *w, struct outcome *o, char *desc, size_t len)
{
	struct psync_thread *th = calloc(w->threads, sizeof(*th));
	unsigned started = 0;
	int ret = 0;

	if (!th)
		return -ENOMEM;
	snprintf(desc, len, "raw psync: %u thread%s, each %s in a loop", w->threads,
		 w->threads == 1 ? "" : "s",
		 w->op == BOP_RW ? "pread/pwrite" : w->op == BOP_OPENAT ? "open and close" :
		 w->op == BOP_STATX ? "statx" : "sendfile (blocking sockets)");
	o->t0 = now_ns();
	for (unsigned i = 0; i < w->threads; i++) {
		th[i].w = w;
		th[i].index = i;
		th[i].deadline = o->t0 + (uint64_t)(w->runtime * 1e9);
		ret = -pthread_create(&th[i].tid, NULL, psync_main, &th[i]);
		if (ret)
			break;
		started++;
	}
	for (unsigned i = 0; i < started; i++) {
		pthread_join(th[i].tid, NULL);
		merge(o, &th[i].o);
	}
	o->t1 = now_ns();
	free(th);
	if (ret)
		fprintf(stderr, "afio-bench: pthread_create: %s\n", strerror(-ret));
	return ret;
}

/*
 * --raw pool: the engine under the library's ASYNC and HYBRID modes on
 * the pool (and libaio's buffered I/O): --threads workers taking requests
 * from one locked queue, each blocking in pread/pwrite, handing results
 * back on a second list, the first of a burst writing an eventfd that the
 * submitter sleeps on.  The thinnest hand-off to a thread there is; what
 * the library's pool costs over it is the library's own.
 */
struct pool_run {
	const struct workload *w;
	pthread_mutex_t lock;
	pthread_cond_t work;
	unsigned *todo, todo_head, todo_len;	/* ring of qd slots */
	unsigned *done, done_len;
	long *res;
	unsigned idle;
	bool stop, signaled;
	int efd;
};

static void *pool_main(void *arg)
{
	struct pool_run *p = arg;
	const struct workload *w = p->w;
	uint64_t one = 1;
	unsigned slot;
	ssize_t n;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!p->todo_len && !p->stop) {
			p->idle++;
			pthread_cond_wait(&p->work, &p->lock);
			p->idle--;
		}
		if (!p->todo_len)
			break;
		slot = p->todo[p->todo_head];
		p->todo_head = (p->todo_head + 1) % w->qd;
		p->todo_len--;
		pthread_mutex_unlock(&p->lock);
		if (w->write)
			n = pwrite(w->fd, w->bufs[slot], w->bs, (off_t)p->res[slot]);
		else
			n = pread(w->fd, w->bufs[slot], w->bs, (off_t)p->res[slot]);
		pthread_mutex_lock(&p->lock);
		p->res[slot] = n < 0 ? -errno : n;
		p->done[p->done_len++] = slot;
		if (!p->signaled) {
			p->signaled = true;
			if (write(p->efd, &one, sizeof(one)) < 0)
				abort();
		}
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* Under the lock; the offset rides in res until the worker has it. */
static void pool_queue(struct pool_run *p, unsigned slot, uint64_t *rnd, uint64_t *next)
{
	const struct workload *w = p->w;

	p->res[slot] = (long)(pick_block(w, rnd, next) * w->bs);
	p->todo[(p->todo_head + p->todo_len++) % w->qd] = slot;
	if (p->idle)
		pthread_cond_signal(&p->work);
}

static int raw_pool(const struct workload *w, struct outcome *o, char *desc, size_t len)
{
	struct pool_run p = { .w = w, .lock = PTHREAD_MUTEX_INITIALIZER,
			      .work = PTHREAD_COND_INITIALIZER };
	pthread_t *tid = calloc(w->threads, sizeof(*tid));
	unsigned *got = calloc(w->qd, sizeof(*got));
	uint64_t *t_start = calloc(w->qd, sizeof(*t_start));
	uint64_t rnd = seed(), next = 0, deadline, t, now, count;
	unsigned started = 0, in_flight = 0, n;
	int ret = -ENOMEM;

	p.todo = calloc(w->qd, sizeof(*p.todo));
	p.done = calloc(w->qd, sizeof(*p.done));
	p.res = calloc(w->qd, sizeof(*p.res));
	p.efd = eventfd(0, EFD_CLOEXEC);
	if (!tid || !got || !t_start || !p.todo || !p.done || !p.res || p.efd < 0)
		goto out;
	snprintf(desc, len, "raw pool: %u threads in pread/pwrite, one locked queue, "
		 "results back through an eventfd", w->threads);
	for (ret = 0; started < w->threads; started++) {
		ret = -pthread_create(&tid[started], NULL, pool_main, &p);
		if (ret)
			break;
	}
	stall_sync(&o->stalls);
	o->t0 = t = now_ns();
	deadline = o->t0 + (uint64_t)(w->runtime * 1e9);
	pthread_mutex_lock(&p.lock);
	for (unsigned i = 0; i < w->qd && !ret; i++, in_flight++) {
		pool_queue(&p, i, &rnd, &next);
		t_start[i] = o->t0;
	}
	pthread_mutex_unlock(&p.lock);
	stall_add(&o->stalls, now_ns() - t);
	while (in_flight && !ret) {
		if (read(p.efd, &count, sizeof(count)) < 0) {
			ret = -errno;
			break;
		}
		stall_sync(&o->stalls);
		t = now = now_ns();
		pthread_mutex_lock(&p.lock);
		p.signaled = false;
		n = p.done_len;
		memcpy(got, p.done, n * sizeof(*got));
		p.done_len = 0;
		pthread_mutex_unlock(&p.lock);
		for (unsigned i = 0; i < n; i++)
			outcome_io(o, p.res[got[i]], w->bs, now - t_start[got[i]]);
		in_flight -= n;
		pthread_mutex_lock(&p.lock);
		for (unsigned i = 0; i < n; i++) {
			if (p.res[got[i]] != (long)w->bs || !keep_going(now, deadline))
				continue;
			pool_queue(&p, got[i], &rnd, &next);
			t_start[got[i]] = now;
			in_flight++;
		}
		pthread_mutex_unlock(&p.lock);
		stall_add(&o->stalls, now_ns() - t);
	}
	o->t1 = now_ns();
out:
	pthread_mutex_lock(&p.lock);
	p.stop = true;
	pthread_cond_broadcast(&p.work);
	pthread_mutex_unlock(&p.lock);
	for (unsigned i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	if (p.efd >= 0)
		close(p.efd);
	free(p.res);
	free(p.done);
	free(p.todo);
	free(t_start);
	free(got);
	free(tid);
	if (ret)
		fprintf(stderr, "afio-bench: pool: %s\n", strerror(-ret));
	return ret;
}

bool raw_engine_known(const char *engine)
{
	return !strcmp(engine, "io_uring") || !strcmp(engine, "io_uring-eventfd") ||
	       !strcmp(engine, "libaio") || !strcmp(engine, "psync") ||
	       !strcmp(engine, "pool");
}

int raw_run(const char *engine, const struct workload *w, bool async, struct outcome *o,
	    char *desc, size_t desc_len)
{
#ifdef AFIO_BENCH_RAW_URING
	if (!strcmp(engine, "io_uring"))
		return raw_uring(w, async, false, o, desc, desc_len);
	if (!strcmp(engine, "io_uring-eventfd"))
		return raw_uring(w, async, true, o, desc, desc_len);
#endif
#ifdef AFIO_BENCH_RAW_LIBAIO
	if (!strcmp(engine, "libaio"))
		return raw_libaio(w, o, desc, desc_len);
#endif
	if (!strcmp(engine, "psync"))
		return raw_psync(w, o, desc, desc_len);
	if (!strcmp(engine, "pool") && w->op == BOP_RW)
		return raw_pool(w, o, desc, desc_len);
	fprintf(stderr, "afio-bench: --raw %s: not built in\n", engine);
	return -ENOSYS;
}
