/* SPDX-License-Identifier: MIT */
#include <check.h>
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <libgen.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

int tu_tmpfile(int flags)
{
	const char *dir = getenv("AFIO_TEST_DIR");
	int fd;

	fd = open(dir && *dir ? dir : ".", O_TMPFILE | O_RDWR | O_CLOEXEC | flags, 0600);
	return fd < 0 ? -errno : fd;
}

int tu_deny_syscalls(const long *nrs, size_t n)
{
	struct sock_filter prog[64];
	struct sock_fprog fprog;
	size_t i = 0;

	if (n > 28)
		return -E2BIG;
	prog[i++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
						 offsetof(struct seccomp_data, arch));
	prog[i++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
						 AUDIT_ARCH_X86_64, 1, 0);
	prog[i++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	prog[i++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
						 offsetof(struct seccomp_data, nr));
	for (size_t k = 0; k < n; k++) {
		prog[i++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
							 (unsigned)nrs[k], 0, 1);
		prog[i++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
							 SECCOMP_RET_ERRNO | EPERM);
	}
	prog[i++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	fprog.len = (unsigned short)i;
	fprog.filter = prog;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog))
		return -errno;
	return 0;
}

int tu_parse_target(int argc, char **argv, enum afio_backend only, enum afio_backend *b,
		    enum afio_mode *m)
{
	char reason[256];
	int ret;

	/* Each test names its backend and mode; nothing may override them. */
	unsetenv("AFIO_BACKEND");
	unsetenv("AFIO_MODE");
	unsetenv("AFIO_NO_FALLBACK");
	*b = AFIO_BACKEND_THREADS;
	*m = AFIO_MODE_INLINE;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--backend"))
			ret = afio_backend_parse(argv[i + 1], b);
		else if (!strcmp(argv[i], "--mode"))
			ret = afio_mode_parse(argv[i + 1], m);
		else
			ret = -EINVAL;
		if (ret) {
			fprintf(stderr, "usage: %s --backend NAME --mode NAME\n", argv[0]);
			exit(2);
		}
	}
	if (only != AFIO_BACKEND_AUTO && *b != only) {
		fprintf(stderr, "%s: only --backend %s\n", argv[0], afio_backend_name(only));
		exit(2);
	}
	ret = afio_probe(*b, reason, sizeof(reason));
	if (ret) {
		printf("SKIP: %s\n", reason);
		return 77;
	}
	printf("%s: backend %s, mode %s\n", basename(argv[0]), afio_backend_name(*b),
	       afio_mode_name(*m));
	return 0;
}

int tu_run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

afio_ctx *tu_create(struct afio_config *cfg)
{
	afio_ctx *ctx = NULL;
	int ret;

	cfg->flags |= AFIO_NO_FALLBACK;
	ret = afio_create(&ctx, cfg);
	ck_assert_msg(ret == 0, "afio_create(%s, %s): %s", afio_backend_name(cfg->backend),
		      afio_mode_name(cfg->mode), strerror(-ret));
	ck_assert_int_eq(afio_backend(ctx), cfg->backend);
	ck_assert_int_eq(afio_mode(ctx), cfg->mode);
	return ctx;
}

afio_ctx *tu_ctx(enum afio_backend b, enum afio_mode m, unsigned entries)
{
	struct afio_config cfg;

	afio_config_init(&cfg);
	cfg.backend = b;
	cfg.mode = m;
	if (entries)
		cfg.entries = entries;
	return tu_create(&cfg);
}

void tu_on_done(void *data, ssize_t res)
{
	struct tu_done *d = data;

	d->calls++;
	d->res = res;
	if (!d->asking)
		return;
	ck_assert_msg(res <= (ssize_t)d->asked, "a request for %zu bytes reported %zd", d->asked,
		      res);
	if (!--d->asking)
		d->asked = 0;
}

void *tu_asking(afio_cb cb, void *data, size_t len)
{
	struct tu_done *d = data;

	if (cb != tu_on_done || !d)
		return data;
	d->asking++;
	if (len > d->asked)
		d->asked = len;
	return data;
}

size_t tu_iov_len(const struct iovec *iov, int cnt)
{
	size_t n = 0;

	for (int i = 0; iov && i < cnt; i++)
		n += iov[i].iov_len;
	return n;
}

void tu_wait_done(afio_ctx *ctx, struct tu_done *d)
{
	while (!d->calls)
		ck_assert_int_ge(afio_poll(ctx, 1, -1), 0);
}

void tu_drain(afio_ctx *ctx)
{
	struct afio_stats st;

	for (;;) {
		ck_assert_int_eq(afio_stats(ctx, &st), 0);
		if (!st.in_flight)
			return;
		ck_assert_int_ge(afio_poll(ctx, 1, -1), 0);
	}
}

void tu_socketpair(int sv[2])
{
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

#define PF_IO_WORKER 0x00000010	/* the kernel's task flag for io_uring's threads */

/* By the task flags in /proc/.../stat: a new io-wq worker carries its
   parent's name until it has run far enough to name itself iou-wrk-*. */
static bool is_io_uring_worker(const char *tid)
{
	char path[300], stat[512] = "";
	unsigned long flags;
	const char *p;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%s/stat", tid);
	f = fopen(path, "r");
	if (!f)
		return false;
	if (!fgets(stat, sizeof(stat), f))
		stat[0] = '\0';
	fclose(f);
	/* pid (comm) state ppid pgrp session tty_nr tpgid flags ... */
	p = strrchr(stat, ')');
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %lu", &flags) != 1)
		return false;
	return flags & PF_IO_WORKER;
}

static void *noop_thread(void *arg)
{
	return arg;
}

void tu_warm_up_threads(void)
{
	pthread_t t;

	ck_assert_int_eq(pthread_create(&t, NULL, noop_thread, NULL), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
}

int64_t tu_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long tu_voluntary_switches(void)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	return ru.ru_nvcsw;
}

int tu_count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

bool tu_file_held_elsewhere(int fd)
{
	DIR *d = opendir("/proc/self/fd");
	struct stat want, st;
	struct dirent *e;
	bool found = false;
	int other;

	ck_assert_ptr_nonnull(d);
	ck_assert_int_eq(fstat(fd, &want), 0);
	while (!found && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		other = atoi(e->d_name);
		if (other == fd || other == dirfd(d) || fstat(other, &st) < 0)
			continue;
		found = st.st_dev == want.st_dev && st.st_ino == want.st_ino;
	}
	closedir(d);
	return found;
}

int tu_count_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.' && !is_io_uring_worker(e->d_name);
	closedir(d);
	return n;
}

int tu_count_threads_steady(void)
{
	int n = tu_count_threads(), same = 0, m;

	for (int i = 0; i < 200 && same < 2; i++) {
		usleep(5000);
		m = tu_count_threads();
		same = m == n ? same + 1 : 0;
		n = m;
	}
	return n;
}

int tu_count_threads_settled(int expected)
{
	int n = tu_count_threads();

	/* io-wq workers come and go on the kernel's schedule, and one being
	   created or leaving can show up unflagged for a moment: look again
	   for a while before calling a difference a leak. */
	for (int i = 0; i < 200 && n != expected; i++) {
		usleep(5000);
		n = tu_count_threads();
	}
	return n;
}
