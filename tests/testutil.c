/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <libgen.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

enum afio_backend tu_backend;
enum afio_mode tu_mode;

int tu_tmpfile(int flags)
{
	const char *dir = getenv("AFIO_TEST_DIR");
	int fd;

	fd = open(dir && *dir ? dir : ".", O_TMPFILE | O_RDWR | O_CLOEXEC | flags, 0600);
	return fd < 0 ? -errno : fd;
}

int tu_file_of(const void *content, size_t size, bool evict)
{
	int fd = tu_tmpfile(0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, content, size, 0), (ssize_t)size);
	if (evict) {
		ck_assert_int_eq(fsync(fd), 0);
		ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	}
	return fd;
}

int tu_seccomp(const struct sock_filter *body, size_t n)
{
	struct sock_filter prog[64] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	};
	struct sock_fprog fprog = { .filter = prog };

	if (n > 60)
		return -E2BIG;
	memcpy(prog + 4, body, n * sizeof(*body));
	fprog.len = (unsigned short)(4 + n);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog))
		return -errno;
	return 0;
}

int tu_deny_syscalls(const long *nrs, size_t n)
{
	struct sock_filter body[60];
	size_t i = 0;

	if (n > 29)
		return -E2BIG;
	for (size_t k = 0; k < n; k++) {
		body[i++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
							 (unsigned)nrs[k], 0, 1);
		body[i++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
							 SECCOMP_RET_ERRNO | EPERM);
	}
	body[i++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	return tu_seccomp(body, i);
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
	tu_backend = *b;
	tu_mode = *m;
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

int tu_main(int argc, char **argv, Suite *(*suite)(void))
{
	int ret = tu_parse_target(argc, argv, AFIO_BACKEND_AUTO, &tu_backend, &tu_mode);

	return ret ? ret : tu_run_suite(suite());
}

TCase *tu_tcase(Suite *s, const char *name)
{
	TCase *tc = tcase_create(name);

	/* Each test takes well under a second; a hang, one that a request's
	   own bound cannot catch (inside afio_destroy()), ends at this one. */
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);
	return tc;
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

afio_ctx *tu_ctx_flagged(enum afio_backend b, enum afio_mode m, unsigned entries, unsigned flags)
{
	struct afio_config cfg;

	afio_config_init(&cfg);
	cfg.backend = b;
	cfg.mode = m;
	if (entries)
		cfg.entries = entries;
	cfg.flags |= flags;
	return tu_create(&cfg);
}

afio_ctx *tu_ctx(enum afio_backend b, enum afio_mode m, unsigned entries)
{
	return tu_ctx_flagged(b, m, entries, 0);
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

afio_ctx *tu_new_ctx(void)
{
	return tu_ctx(tu_backend, tu_mode, 0);
}

int64_t tu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

const char *tu_res_str(ssize_t res)
{
	static char bufs[4][96];
	static unsigned next;
	char *b = bufs[next++ % 4];

	if (res < 0)
		snprintf(b, sizeof(bufs[0]), "%zd (%s)", res, strerror((int)-res));
	else
		snprintf(b, sizeof(bufs[0]), "%zd", res);
	return b;
}

ssize_t tu_sys_res(ssize_t ret)
{
	return ret < 0 ? -errno : ret;
}

const char *tu_target_name(void)
{
	static char name[64];

	snprintf(name, sizeof(name), "%s/%s", afio_backend_name(tu_backend),
		 afio_mode_name(tu_mode));
	return name;
}

void tu_wait_for(afio_ctx *ctx, struct tu_done *d, const char *what)
{
	int64_t end = tu_now_ns() + TU_HANG_MS * TU_NS_PER_MS;

	while (!d->calls) {
		ck_assert_msg(tu_now_ns() < end, "%s on %s: no callback in %d ms", what,
			      tu_target_name(), TU_HANG_MS);
		ck_assert_int_ge(afio_poll(ctx, 1, 100), 0);
	}
}

void tu_wait_once(afio_ctx *ctx, struct tu_done *d, const char *what)
{
	tu_wait_for(ctx, d, what);
	ck_assert_msg(d->calls == 1, "%s on %s: %d callbacks", what, tu_target_name(), d->calls);
}

void tu_queued(int ret, const char *what)
{
	ck_assert_msg(ret == 0, "%s on %s: refused with %s", what, tu_target_name(),
		      tu_res_str(ret));
}

void tu_expect_eq(ssize_t res, ssize_t want, const char *what)
{
	ck_assert_msg(res == want, "%s on %s: %s, want %s", what, tu_target_name(), tu_res_str(res),
		      tu_res_str(want));
}

int tu_expect_fd(ssize_t res, const char *what)
{
	ck_assert_msg(res >= 0, "%s on %s: %s, want an fd", what, tu_target_name(),
		      tu_res_str(res));
	return (int)res;
}

void tu_still_waiting(afio_ctx *ctx, struct tu_done *d, const char *what)
{
	ck_assert_int_ge(afio_poll(ctx, 1, 50), 0);
	ck_assert_msg(!d->calls, "%s on %s completed with %s while it had to wait", what,
		      tu_target_name(), tu_res_str(d->res));
}

void tu_no_second_callback(afio_ctx *ctx, struct tu_done *d, const char *what)
{
	ck_assert_int_ge(afio_poll(ctx, 1, 20), 0);
	ck_assert_msg(d->calls == 1, "%s on %s: %d callbacks", what, tu_target_name(), d->calls);
}

uint64_t tu_fallbacks(const afio_ctx *ctx)
{
	struct afio_stats st;

	ck_assert_int_eq(afio_stats(ctx, &st), 0);
	return st.fallbacks;
}

void tu_dir_make(struct tu_dir *t)
{
	const char *base = getenv("AFIO_TEST_DIR");
	char real[PATH_MAX];
	int n;

	ck_assert_ptr_nonnull(realpath(base && *base ? base : ".", real));
	n = snprintf(t->path, sizeof(t->path), "%s/dir.XXXXXX", real);
	ck_assert(n > 0 && (size_t)n < sizeof(t->path));
	ck_assert_ptr_nonnull(mkdtemp(t->path));
	t->fd = open(t->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(t->fd, 0);
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	return remove(path) ? -1 : 0;
}

void tu_dir_remove(struct tu_dir *t)
{
	close(t->fd);
	ck_assert_int_eq(nftw(t->path, remove_entry, 8, FTW_DEPTH | FTW_PHYS), 0);
}

void tu_put_file(int dirfd, const char *name, const char *content)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	size_t len = strlen(content);

	ck_assert_msg(fd >= 0, "create %s: %s", name, strerror(errno));
	ck_assert_int_eq(write(fd, content, len), len);
	close(fd);
}

bool tu_exists_at(int dirfd, const char *name)
{
	struct stat st;

	if (!fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW))
		return true;
	ck_assert_msg(errno == ENOENT, "stat %s: %s", name, strerror(errno));
	return false;
}

struct stat tu_stat_fd(int fd)
{
	struct stat st;

	ck_assert_msg(!fstat(fd, &st), "fstat %d: %s", fd, strerror(errno));
	return st;
}

bool tu_same_file(int fd, const struct stat *want)
{
	struct stat st = tu_stat_fd(fd);

	return st.st_dev == want->st_dev && st.st_ino == want->st_ino;
}

unsigned char *tu_random_bytes(size_t len, unsigned seed)
{
	unsigned char *p = malloc(len ? len : 1);

	ck_assert_ptr_nonnull(p);
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)rand_r(&seed);
	return p;
}

int tu_new_file(int flags)
{
	int fd = tu_tmpfile(flags);

	ck_assert_msg(fd >= 0, "tmpfile: %s", strerror(-fd));
	return fd;
}

int tu_data_file(const unsigned char *bytes, size_t len)
{
	int fd = tu_new_file(0);

	for (size_t done = 0; done < len;) {
		ssize_t n = pwrite(fd, bytes + done, len - done, (off_t)done);

		ck_assert_int_gt(n, 0);
		done += (size_t)n;
	}
	return fd;
}

int tu_closed_fd(void)
{
	int fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 600);

	ck_assert_int_ge(fd, 0);
	close(fd);
	return fd;
}

int tu_wait_edge(int ep, int timeout_ms)
{
	struct epoll_event out;
	int n;

	do
		n = epoll_wait(ep, &out, 1, timeout_ms);
	while (n < 0 && errno == EINTR);
	return n;
}

bool tu_wait_readable(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, TU_HANG_MS) == 1;
}

void tu_set_nonblock(int fd, bool nonblock)
{
	int fl = fcntl(fd, F_GETFL);

	ck_assert_int_ge(fl, 0);
	fl = nonblock ? fl | O_NONBLOCK : fl & ~O_NONBLOCK;
	ck_assert_int_eq(fcntl(fd, F_SETFL, fl), 0);
}

int tu_tcp_socket(bool nonblock)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);

	ck_assert_msg(fd >= 0, "socket: %s", strerror(errno));
	return fd;
}

struct sockaddr_in tu_loopback(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

struct sockaddr_in tu_sock_addr(int fd, bool peer)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int ret;

	memset(&a, 0, sizeof(a));
	ret = peer ? getpeername(fd, (struct sockaddr *)&a, &len)
		   : getsockname(fd, (struct sockaddr *)&a, &len);
	ck_assert_msg(!ret, "%s: %s", peer ? "getpeername" : "getsockname", strerror(errno));
	ck_assert_int_eq(len, sizeof(a));
	return a;
}

void tu_same_addr(struct sockaddr_in a, struct sockaddr_in b, const char *what)
{
	char sa[INET_ADDRSTRLEN], sb[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &a.sin_addr, sa, sizeof(sa));
	inet_ntop(AF_INET, &b.sin_addr, sb, sizeof(sb));
	ck_assert_msg(a.sin_family == b.sin_family && a.sin_port == b.sin_port &&
		      a.sin_addr.s_addr == b.sin_addr.s_addr,
		      "%s on %s: %s:%u, want %s:%u", what, tu_target_name(), sa, ntohs(a.sin_port),
		      sb, ntohs(b.sin_port));
}

int tu_tcp_listener(int backlog, bool nonblock, struct sockaddr_in *addr)
{
	int fd = tu_tcp_socket(nonblock);

	*addr = tu_loopback();
	ck_assert_int_eq(bind(fd, (struct sockaddr *)addr, sizeof(*addr)), 0);
	ck_assert_int_eq(listen(fd, backlog), 0);
	*addr = tu_sock_addr(fd, false);
	return fd;
}

void tu_connect_to(int fd, const struct sockaddr_in *addr)
{
	ck_assert_msg(!connect(fd, (const struct sockaddr *)addr, sizeof(*addr)), "connect: %s",
		      strerror(errno));
}

int tu_accept_now(int listener)
{
	int fd;

	ck_assert_msg(tu_wait_readable(listener), "no connection came to the listener");
	fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_msg(fd >= 0, "accept: %s", strerror(errno));
	return fd;
}

int tu_full_listener(struct sockaddr_in *addr, int *queued_client)
{
	int l = tu_tcp_listener(0, false, addr);

	*queued_client = tu_tcp_socket(false);
	tu_connect_to(*queued_client, addr);
	ck_assert_msg(tu_wait_readable(l), "the listener did not queue its first connection");
	return l;
}

void tu_expect_bytes(int fd, const unsigned char *want, size_t len)
{
	unsigned char *buf = malloc(len + 1);
	size_t got = 0;

	ck_assert_ptr_nonnull(buf);
	while (got < len) {
		ssize_t n;

		ck_assert_msg(tu_wait_readable(fd), "%zu of %zu bytes came", got, len);
		n = recv(fd, buf + got, len - got, MSG_DONTWAIT);
		ck_assert_int_gt(n, 0);
		got += (size_t)n;
	}
	ck_assert_msg(!memcmp(buf, want, len), "the bytes that came differ from the file's");
	ck_assert_msg(recv(fd, buf, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN,
		      "more bytes came than were sent");
	free(buf);
}

static void *read_to_end(void *arg)
{
	struct tu_reader *r = arg;
	struct pollfd pfd = { .fd = r->fd, .events = POLLIN };

	while (r->got < r->cap) {
		ssize_t n;

		if (poll(&pfd, 1, TU_HANG_MS) != 1) {
			r->err = ETIMEDOUT;
			break;
		}
		n = read(r->fd, r->buf + r->got, r->cap - r->got);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			r->err = errno;
		if (n <= 0)
			break;
		r->got += (size_t)n;
	}
	return NULL;
}

void tu_reader_start(struct tu_reader *r, int fd, size_t expected)
{
	memset(r, 0, sizeof(*r));
	r->fd = fd;
	r->cap = expected + 1;
	r->buf = malloc(r->cap);
	ck_assert_ptr_nonnull(r->buf);
	ck_assert_int_eq(pthread_create(&r->thread, NULL, read_to_end, r), 0);
}

void tu_reader_join(struct tu_reader *r)
{
	ck_assert_int_eq(pthread_join(r->thread, NULL), 0);
	ck_assert_msg(!r->err, "reading the stream: %s", strerror(r->err));
}

unsigned tu_sendfile_all(afio_ctx *ctx, int sock, int file, uint64_t off, size_t len)
{
	unsigned rounds = 0;
	size_t sent = 0;

	while (sent < len) {
		ssize_t res = TU_RUN(ctx, afio_sendfile(ctx, sock, file, off + sent, len - sent,
							tu_on_done, &d));

		ck_assert_msg(res > 0 && (size_t)res <= len - sent,
			      "sendfile of %zu bytes at %llu on %s: %s", len - sent,
			      (unsigned long long)(off + sent), tu_target_name(), tu_res_str(res));
		sent += (size_t)res;
		rounds++;
	}
	return rounds;
}

struct open_how tu_how_of(uint64_t flags, uint64_t mode, uint64_t resolve)
{
	struct open_how how;

	memset(&how, 0, sizeof(how));
	how.flags = flags;
	how.mode = mode;
	how.resolve = resolve;
	return how;
}

size_t tu_direct_block(int fd, size_t *mem)
{
	struct afio_dio_align al;
	int ret = afio_dio_align(fd, &al);

	if (ret == -EOPNOTSUPP)
		return 0;
	ck_assert_msg(ret == 0, "afio_dio_align: %s", tu_res_str(ret));
	*mem = al.mem > 4096 ? al.mem : 4096;
	return al.offset > 4096 ? al.offset : 4096;
}

int tu_op_number(const char *name)
{
	for (unsigned op = 0; op < afio_op_count(); op++)
		if (afio_op_name(op) && !strcmp(afio_op_name(op), name))
			return (int)op;
	return -1;
}
