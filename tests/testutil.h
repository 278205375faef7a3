/* SPDX-License-Identifier: MIT */
/* Helpers shared by the test suites. */
#ifndef AFIO_TESTUTIL_H
#define AFIO_TESTUTIL_H

#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "asyncfio.h"

/* A file in $AFIO_TEST_DIR (else the current directory), created empty,
   already unlinked; returns its fd. */
int tu_tmpfile(int flags);

/* Installs a seccomp filter on this process that makes each listed system
   call fail with EPERM, as a container's policy does.  0 or -errno. */
int tu_deny_syscalls(const long *nrs, size_t n);

/* Parses "--backend NAME --mode NAME" from argv (a backend other than
   `only` is a usage error unless `only` is AUTO); returns 0, or 77 (skip)
   printing the reason when the backend does not probe as available. */
int tu_parse_target(int argc, char **argv, enum afio_backend only, enum afio_backend *b,
		    enum afio_mode *m);

/* Runs every test of s; EXIT_SUCCESS when none failed. */
int tu_run_suite(Suite *s);

/* afio_create() of exactly cfg's backend and mode (AFIO_NO_FALLBACK is
   added); fails the test otherwise. */
afio_ctx *tu_create(struct afio_config *cfg);

/* afio_create() of exactly backend b in mode m, with AFIO_NO_FALLBACK. */
afio_ctx *tu_ctx(enum afio_backend b, enum afio_mode m, unsigned entries);

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

#endif
