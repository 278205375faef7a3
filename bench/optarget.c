/* SPDX-License-Identifier: MIT */
/*
 * What the op workloads (--op openat|statx|sendfile) run on, made the same
 * way for afio-bench and afio-uv-bench: a directory tree of empty files
 * named by absolute paths, or a cached file and qd TCP connections over
 * 127.0.0.1 to a reader process that throws the bytes away.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define TREE_DIRS	16

const char *const bench_op_names[] = { "rw", "openat", "statx", "sendfile", "nop" };

int bench_op_parse(const char *s, enum bench_op *op)
{
	for (unsigned i = BOP_OPENAT; i <= BOP_NOP; i++)
		if (!strcmp(s, bench_op_names[i])) {
			*op = (enum bench_op)i;
			return 0;
		}
	return -EINVAL;
}

static int fail(const char *what, const char *path)
{
	int err = errno;

	fprintf(stderr, "afio-bench: %s %s: %s\n", what, path, strerror(err));
	return -err;
}

/* TREE/dDD, or TREE/dDD/fNNNNN for file >= 0; false when too long. */
static bool tree_name(char *out, const char *tree, int file, unsigned d)
{
	int n;

	if (file < 0)
		n = snprintf(out, PATH_MAX, "%s/d%02u", tree, d);
	else
		n = snprintf(out, PATH_MAX, "%s/d%02u/f%05d", tree, (unsigned)file % TREE_DIRS,
			     file);
	return n > 0 && n < PATH_MAX;
}

static int make_tree(struct op_target *t, const char *dir, unsigned files)
{
	char p[PATH_MAX];
	int fd;

	if (snprintf(t->tree, sizeof(t->tree), "%s/afio-tree.XXXXXX", dir) >= (int)sizeof(t->tree))
		return -ENAMETOOLONG;
	if (!mkdtemp(t->tree))
		return fail("mkdtemp", t->tree);
	t->remove_tree = true;
	for (unsigned d = 0; d < TREE_DIRS; d++) {
		if (!tree_name(p, t->tree, -1, d))
			return -ENAMETOOLONG;
		if (mkdir(p, 0755) && errno != EEXIST)
			return fail("mkdir", p);
	}
	for (unsigned i = 0; i < files; i++) {
		if (!tree_name(p, t->tree, (int)i, 0))
			return -ENAMETOOLONG;
		fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0)
			return fail("create", p);
		close(fd);
	}
	return 0;
}

static int name_files(struct op_target *t, unsigned files)
{
	char p[PATH_MAX], *abs;

	abs = realpath(t->tree, NULL);
	if (!abs)
		return fail("realpath", t->tree);
	t->paths = calloc(files, sizeof(*t->paths));
	if (!t->paths) {
		free(abs);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < files; i++) {
		if (!tree_name(p, abs, (int)i, 0)) {
			free(abs);
			return -ENAMETOOLONG;
		}
		t->paths[i] = strdup(p);
		if (!t->paths[i]) {
			free(abs);
			return -ENOMEM;
		}
		t->npaths++;
	}
	free(abs);
	return 0;
}

/* The reader: accepts n connections and discards what arrives
   (MSG_TRUNC: TCP drops the bytes without copying them) until all close. */
static void reader_main(int lfd, unsigned n, int ready)
{
	struct epoll_event ev, evs[64];
	unsigned open_conns = 0;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	char buf[64];

	if (ep < 0)
		_exit(1);
	for (unsigned i = 0; i < n; i++) {
		int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (c < 0)
			_exit(1);
		ev.events = EPOLLIN;
		ev.data.fd = c;
		if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev))
			_exit(1);
		open_conns++;
	}
	close(lfd);
	if (write(ready, "", 1) != 1)
		_exit(1);
	close(ready);
	while (open_conns) {
		int k = epoll_wait(ep, evs, 64, 10000);

		if (k <= 0)
			_exit(2 + (k < 0));
		for (int i = 0; i < k; i++) {
			ssize_t r;

			do {
				r = recv(evs[i].data.fd, buf, 1 << 30, MSG_TRUNC);
			} while (r > 0);
			if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
				close(evs[i].data.fd);
				open_conns--;
			}
		}
	}
	_exit(0);
}

static int connect_reader(struct op_target *t, unsigned n, bool nonblock)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001) };
	socklen_t len = sizeof(sa);
	int lfd, one = 1, ready[2];
	char c;

	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(lfd, (int)n) || getsockname(lfd, (struct sockaddr *)&sa, &len))
		return fail("listen on", "127.0.0.1");
	if (pipe2(ready, O_CLOEXEC))
		return fail("pipe", "");
	t->reader = fork();
	if (t->reader < 0)
		return fail("fork", "reader");
	if (!t->reader) {
		close(ready[0]);
		reader_main(lfd, n, ready[1]);
	}
	close(ready[1]);
	close(lfd);
	t->socks = calloc(n, sizeof(*t->socks));
	if (!t->socks)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (s < 0)
			return fail("socket", "");
		t->socks[t->nsocks++] = s;
		setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(s, (struct sockaddr *)&sa, sizeof(sa)))
			return fail("connect to", "127.0.0.1");
		if (nonblock && fcntl(s, F_SETFL, O_NONBLOCK))
			return fail("fcntl", "O_NONBLOCK");
	}
	/* Every connection accepted before the clock starts. */
	n = (unsigned)read(ready[0], &c, 1);
	close(ready[0]);
	return n == 1 ? 0 : -EPIPE;
}

/* Reads it all once, so that it is in the page cache. */
static int warm(int fd, uint64_t size)
{
	static char buf[1 << 16];

	for (uint64_t off = 0; off < size;) {
		ssize_t n = pread(fd, buf, sizeof(buf), (off_t)off);

		if (n <= 0)
			return n < 0 ? -errno : 0;
		off += (uint64_t)n;
	}
	return 0;
}

int op_setup(struct op_target *t, enum bench_op op, const char *dir, const char *tree,
	     unsigned files, const char *file, unsigned qd, bool nonblock)
{
	struct stat st;
	int ret;

	memset(t, 0, sizeof(*t));
	t->op = op;
	t->file_fd = -1;
	if (op == BOP_NOP)
		return 0;
	if (op == BOP_SENDFILE) {
		t->file_fd = open(file, O_RDONLY | O_CLOEXEC);
		if (t->file_fd < 0 || fstat(t->file_fd, &st))
			return fail("open", file);
		t->file_size = (uint64_t)st.st_size;
		ret = warm(t->file_fd, t->file_size);
		return ret ? ret : connect_reader(t, qd, nonblock);
	}
	if (tree) {
		if (snprintf(t->tree, sizeof(t->tree), "%s", tree) >= (int)sizeof(t->tree))
			return -ENAMETOOLONG;
	} else {
		ret = make_tree(t, dir, files);
		if (ret)
			return ret;
	}
	return name_files(t, files);
}

void op_teardown(struct op_target *t)
{
	int status;

	for (unsigned i = 0; i < t->nsocks; i++)
		close(t->socks[i]);
	if (t->reader > 0 && waitpid(t->reader, &status, 0) == t->reader &&
	    !(WIFEXITED(status) && !WEXITSTATUS(status)))
		fprintf(stderr, "afio-bench: the reader process failed (status %#x)\n", status);
	if (t->file_fd >= 0)
		close(t->file_fd);
	for (unsigned i = 0; i < t->npaths; i++) {
		if (t->remove_tree)
			unlink(t->paths[i]);
		free(t->paths[i]);
	}
	if (t->remove_tree) {
		char p[PATH_MAX];

		for (unsigned d = 0; d < TREE_DIRS; d++) {
			if (tree_name(p, t->tree, -1, d))
				rmdir(p);
		}
		rmdir(t->tree);
	}
	free(t->paths);
	free(t->socks);
}
