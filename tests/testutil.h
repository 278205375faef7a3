/* SPDX-License-Identifier: MIT */
/* Helpers shared by the test suites. */
#ifndef AFIO_TESTUTIL_H
#define AFIO_TESTUTIL_H

#include <check.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/openat2.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "asyncfio.h"

/* A file in $AFIO_TEST_DIR (else the current directory), created empty,
   already unlinked; returns its fd. */
int tu_tmpfile(int flags);

/* A tu_tmpfile() holding the size bytes of content, written through a
   plain fd; synced and its pages dropped from the cache when evict, so
   that no read of it finishes without waiting. */
int tu_file_of(const void *content, size_t size, bool evict);

/* Installs a seccomp filter on this thread (and the threads it starts)
   that runs body with the system call's number loaded, on x86-64 only;
   body ends in its own returns.  0 or -errno. */
int tu_seccomp(const struct sock_filter *body, size_t n);

/* Installs a seccomp filter on this process that makes each listed system
   call fail with EPERM, as a container's policy does.  0 or -errno. */
int tu_deny_syscalls(const long *nrs, size_t n);

/* cachestat(2), Linux 6.5; not in every libc's headers. */
#ifndef SYS_cachestat
#define SYS_cachestat 451
#endif

/* Parses "--backend NAME --mode NAME" from argv (a backend other than
   `only` is a usage error unless `only` is AUTO); returns 0, or 77 (skip)
   printing the reason when the backend does not probe as available. */
int tu_parse_target(int argc, char **argv, enum afio_backend only, enum afio_backend *b,
		    enum afio_mode *m);

/* The backend and mode tu_parse_target() parsed last. */
extern enum afio_backend tu_backend;
extern enum afio_mode tu_mode;

/* Runs every test of s; EXIT_SUCCESS when none failed. */
int tu_run_suite(Suite *s);

/* main() of a suite run once per backend and mode: tu_parse_target() (any
   backend), then the tests of suite(). */
int tu_main(int argc, char **argv, Suite *(*suite)(void));

/* A test case of s named name, with the timeout of a case whose tests each
   take well under a second. */
TCase *tu_tcase(Suite *s, const char *name);

/* afio_create() of exactly cfg's backend and mode (AFIO_NO_FALLBACK is
   added); fails the test otherwise. */
afio_ctx *tu_create(struct afio_config *cfg);

/* afio_create() of exactly backend b in mode m, with AFIO_NO_FALLBACK. */
afio_ctx *tu_ctx(enum afio_backend b, enum afio_mode m, unsigned entries);
/* The same with cfg.flags |= flags. */
afio_ctx *tu_ctx_flagged(enum afio_backend b, enum afio_mode m, unsigned entries, unsigned flags);

/* A callback's record: how often it ran, with what.  asking: requests
   with a length in flight on it (tu_asking), asked: the largest length. */
struct tu_done {
	int calls;
	ssize_t res;
	int asking;
	size_t asked;
};

/* Records res; fails the test when a request of tu_asking() reports more
   bytes than it asked for. */
void tu_on_done(void *data, ssize_t res);

/* data, after noting in it (when cb is tu_on_done) that a request for len
   bytes completes there: to wrap the data argument of a call. */
void *tu_asking(afio_cb cb, void *data, size_t len);

/* The bytes cnt iovecs ask for. */
size_t tu_iov_len(const struct iovec *iov, int cnt);

/* Polls until d has completed; fails the test if afio_poll() errs. */
void tu_wait_done(afio_ctx *ctx, struct tu_done *d);

/* Polls until nothing is in flight. */
void tu_drain(afio_ctx *ctx);

/* A connected AF_UNIX stream pair; fails the test if it cannot. */
void tu_socketpair(int sv[2]);

/* Threads of this process except io_uring's own workers (iou-wrk-*,
   iou-sqp-*): the kernel starts those itself and reaps them shortly after
   the ring is closed, not when afio_destroy() returns. */
int tu_count_threads(void);

/* tu_count_threads() once three looks 5 ms apart agree (up to a second):
   a thread just joined can still be listed for a moment. */
int tu_count_threads_steady(void);

/* tu_count_threads(), looked at again for up to a second while it differs
   from expected: what it returns last. */
int tu_count_threads_settled(int expected);

/* Starts and joins one thread, so that what a runtime starts along with
   the first thread (ThreadSanitizer's background thread) is already there
   when threads are counted. */
void tu_warm_up_threads(void);

/* Milliseconds on the monotonic clock: watchdogs count time, not loop
   turns, since a wait may end early for a completion that is not the one
   awaited. */
int64_t tu_now_ms(void);

/* How often the calling thread has slept (voluntary context switches). */
long tu_voluntary_switches(void);

/* Open fds of this process (/proc/self/fd). */
int tu_count_fds(void);

/* Whether an fd of this process other than fd refers to the same file
   (the same socket, say): a descriptor a library took for itself. */
bool tu_file_held_elsewhere(int fd);

/*
 * What the suites of single ops share (files, paths, sockets, sendfile,
 * timers, args, cancel, optable): each request checked against what the
 * system says, messages naming the backend and mode.
 */

#define TU_NS_PER_MS	1000000LL
/* A request that has not completed after this long is taken as one that
   never will: a hang, not slowness. */
#define TU_HANG_MS	10000

/* A context of tu_backend in tu_mode. */
afio_ctx *tu_new_ctx(void);

/* Nanoseconds on the monotonic clock. */
int64_t tu_now_ns(void);

/* "io_uring/inline": tu_backend and tu_mode, for messages. */
const char *tu_target_name(void);

/* "-2 (No such file or directory)" or "5", for messages; a few at a time. */
const char *tu_res_str(ssize_t res);

/* What a system call gave, the way the library gives it: result or -errno. */
ssize_t tu_sys_res(ssize_t ret);

/* Polls until d has completed; fails the test after TU_HANG_MS. */
void tu_wait_for(afio_ctx *ctx, struct tu_done *d, const char *what);

/* tu_wait_for(), then d must have completed exactly once. */
void tu_wait_once(afio_ctx *ctx, struct tu_done *d, const char *what);

/* ret, what a call that queues returned, is 0. */
void tu_queued(int ret, const char *what);

void tu_expect_eq(ssize_t res, ssize_t want, const char *what);

/* res is an fd; returns it. */
int tu_expect_fd(ssize_t res, const char *what);

/* Queues call, whose callback is tu_on_done with &d, waits for its one
   callback and gives its result. */
#define TU_RUN(ctx, call) ({				\
	struct tu_done d = { 0 };			\
	tu_queued((call), #call);			\
	tu_wait_once((ctx), &d, #call);			\
	d.res;						\
})
#define TU_EXPECT(ctx, want, call)	tu_expect_eq(TU_RUN(ctx, call), (want), #call)
#define TU_RUN_FD(ctx, call)		tu_expect_fd(TU_RUN(ctx, call), #call)

/* An error the kernel gives for these arguments, which the library may see
   at once or pass on from the kernel: either way it must be the Linux
   call's. */
#define TU_EITHER(ctx, want, call) do {					\
	struct tu_done d = { 0 };					\
	int ret_ = (call);						\
	if (ret_) {							\
		tu_expect_eq(ret_, (want), #call " (at once)");		\
		ck_assert_int_eq(d.calls, 0);				\
	} else {							\
		tu_wait_once((ctx), &d, #call);				\
		tu_expect_eq(d.res, (want), #call);			\
	}								\
} while (0)

/* d has not completed, and cannot: nothing it waits for has happened. */
void tu_still_waiting(afio_ctx *ctx, struct tu_done *d, const char *what);

/* d completed once; nothing brings a second callback. */
void tu_no_second_callback(afio_ctx *ctx, struct tu_done *d, const char *what);

/* ctx's stats.fallbacks. */
uint64_t tu_fallbacks(const afio_ctx *ctx);

/* A directory of its own under $AFIO_TEST_DIR, removed with what it holds. */
struct tu_dir {
	char path[PATH_MAX];
	int fd;
};

void tu_dir_make(struct tu_dir *t);
void tu_dir_remove(struct tu_dir *t);

/* A file name in dirfd holding content, replacing what was there. */
void tu_put_file(int dirfd, const char *name, const char *content);

/* Whether name is in dirfd (a symlink itself, not what it points to). */
bool tu_exists_at(int dirfd, const char *name);

struct stat tu_stat_fd(int fd);

/* Whether fd is the file want describes. */
bool tu_same_file(int fd, const struct stat *want);

/* len bytes from a seeded generator, malloc()ed. */
unsigned char *tu_random_bytes(size_t len, unsigned seed);

/* tu_tmpfile(), failing the test if it cannot. */
int tu_new_file(int flags);

/* An unlinked file holding bytes. */
int tu_data_file(const unsigned char *bytes, size_t len);

/* A number that is no open fd: well above what anything here opens. */
int tu_closed_fd(void);

/* Whether fd becomes readable within TU_HANG_MS. */
bool tu_wait_readable(int fd);
/* epoll_wait() for one event, again after -EINTR (io_uring's task work
   interrupts a sleep as a signal would): 1, 0 on the timeout, -1. */
int tu_wait_edge(int ep, int timeout_ms);

void tu_set_nonblock(int fd, bool nonblock);

/* A TCP socket, O_NONBLOCK or not. */
int tu_tcp_socket(bool nonblock);

/* 127.0.0.1, port 0. */
struct sockaddr_in tu_loopback(void);

/* fd's own address, or its peer's. */
struct sockaddr_in tu_sock_addr(int fd, bool peer);

/* a and b are the same address and port. */
void tu_same_addr(struct sockaddr_in a, struct sockaddr_in b, const char *what);

/* A TCP listener on loopback; *addr is where it listens. */
int tu_tcp_listener(int backlog, bool nonblock, struct sockaddr_in *addr);

/* connect(2) on a blocking socket, failing the test if it fails. */
void tu_connect_to(int fd, const struct sockaddr_in *addr);

/* The next connection of listener, waiting up to TU_HANG_MS for it. */
int tu_accept_now(int listener);

/*
 * A listener whose accept queue is full (backlog 0 holds one connection,
 * here *queued_client): Linux drops a further SYN, so a connect to it
 * waits, its SYN resent after 1 s, 3 s, ... for minutes.
 */
int tu_full_listener(struct sockaddr_in *addr, int *queued_client);

/* Reads exactly len bytes from fd (waiting for each), then checks that
   nothing more is there. */
void tu_expect_bytes(int fd, const unsigned char *want, size_t len);

/* Reads a socket to its end in a thread of its own, so that a big send
   does not wait for the test to read. */
struct tu_reader {
	pthread_t thread;
	int fd;
	unsigned char *buf;
	size_t cap, got;
	int err;	/* errno of a failed read; ETIMEDOUT: silent for TU_HANG_MS */
};

/* Room for one byte more than expected, to see a stream that is too long. */
void tu_reader_start(struct tu_reader *r, int fd, size_t expected);

/* Joins the thread; fails the test if a read failed.  r->buf is the
   caller's to free. */
void tu_reader_join(struct tu_reader *r);

/* Sends len bytes of file from off with as many sendfiles as it takes; each
   sends at least a byte and no more than asked.  Returns how many it took. */
unsigned tu_sendfile_all(afio_ctx *ctx, int sock, int file, uint64_t off, size_t len);

/* An open_how of these fields, the rest 0. */
struct open_how tu_how_of(uint64_t flags, uint64_t mode, uint64_t resolve);

/* The alignment direct I/O on fd needs, from the library; 0 where the file
   system does none. */
size_t tu_direct_block(int fd, size_t *mem);

/* The number of the op named name in the op table, or -1. */
int tu_op_number(const char *name);

#endif
