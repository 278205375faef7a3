/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "serverutil.h"

#define MAX_ARGS	32

int find_targets(struct target *out, const char *only)
{
	static const enum afio_backend backends[] = {
		AFIO_BACKEND_IO_URING, AFIO_BACKEND_LIBAIO, AFIO_BACKEND_THREADS,
	};
	static const enum afio_mode modes[] = {
		AFIO_MODE_INLINE, AFIO_MODE_ASYNC, AFIO_MODE_HYBRID,
	};
	char reason[256];
	int n = 0;

	for (size_t b = 0; b < sizeof(backends) / sizeof(backends[0]); b++) {
		if (afio_probe(backends[b], reason, sizeof(reason))) {
			printf("skipping %s: %s\n", afio_backend_name(backends[b]), reason);
			continue;
		}
		for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
			struct target *t = &out[n];

			t->backend = backends[b];
			t->mode = modes[m];
			snprintf(t->name, sizeof(t->name), "%s/%s",
				 afio_backend_name(t->backend), afio_mode_name(t->mode));
			if (!only || !strcmp(only, t->name))
				n++;
		}
	}
	return n;
}

noreturn void server_exec(const struct target *t, const struct launch *how, int out_fd)
{
	const char *argv[MAX_ARGS] = {
		how->path, "--port", "0", "--backend", afio_backend_name(t->backend),
		"--mode", afio_mode_name(t->mode),
	};
	size_t n = 7;

	for (size_t i = 0; how->args && how->args[i] && n < MAX_ARGS - 1; i++)
		argv[n++] = how->args[i];
	argv[n] = NULL;
	/* The options must decide, not whatever the caller's environment says. */
	unsetenv("AFIO_BACKEND");
	unsetenv("AFIO_MODE");
	dup2(out_fd, STDOUT_FILENO);
	if (how->err_fd >= 0)
		dup2(how->err_fd, STDERR_FILENO);
	if (how->nofile) {
		struct rlimit rl = { how->nofile, how->nofile };

		/* Soft and hard: the server raises its soft limit to the hard one. */
		if (setrlimit(RLIMIT_NOFILE, &rl))
			_exit(126);
	}
	execv(how->path, (char **)argv);
	_exit(127);
}

/* Reads the first line of the server's stdout: "listening on ADDR:PORT". */
static unsigned read_port(const struct server *s)
{
	struct pollfd pfd = { .fd = s->out_fd, .events = POLLIN };
	char line[128];
	unsigned port = 0;
	size_t n = 0;

	while (n < sizeof(line) - 1) {
		ck_assert_msg(poll(&pfd, 1, HANG_GUARD_MS) == 1,
			      "%s: no port announced", s->target->name);
		if (read(s->out_fd, &line[n], 1) != 1 || line[n] == '\n')
			break;
		n++;
	}
	line[n] = '\0';
	ck_assert_msg(sscanf(line, "listening on 127.0.0.1:%u", &port) == 1 && port,
		      "%s: first line \"%s\"", s->target->name, line);
	return port;
}

void server_start(struct server *s, const struct target *t, const struct launch *how)
{
	int pipefd[2];

	ck_assert_int_eq(pipe2(pipefd, O_CLOEXEC), 0);
	s->target = t;
	s->err_fd = how->err_fd;
	s->pid = fork();
	ck_assert_int_ge(s->pid, 0);
	if (!s->pid)
		server_exec(t, how, pipefd[1]);
	close(pipefd[1]);
	s->out_fd = pipefd[0];
	s->pidfd = (int)syscall(SYS_pidfd_open, s->pid, 0);
	ck_assert_int_ge(s->pidfd, 0);
	s->port = read_port(s);
}

int server_stop(struct server *s)
{
	struct pollfd pfd = { .fd = s->pidfd, .events = POLLIN };
	int status = 0;

	ck_assert_int_eq(kill(s->pid, SIGTERM), 0);
	if (poll(&pfd, 1, HANG_GUARD_MS) != 1)
		kill(s->pid, SIGKILL);
	ck_assert_int_eq(waitpid(s->pid, &status, 0), s->pid);
	close(s->pidfd);
	close(s->out_fd);
	return status;
}

/* ---- the client's side ---- */

int connect_with(unsigned port, int rcvbuf)
{
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_port = htons((uint16_t)port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	if (rcvbuf)
		ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf,
					    sizeof(rcvbuf)), 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return fd;
}

int connect_to(unsigned port)
{
	return connect_with(port, 0);
}

void wait_for(int fd, short events)
{
	struct pollfd pfd = { .fd = fd, .events = events };

	ck_assert_msg(poll(&pfd, 1, HANG_GUARD_MS) == 1, "peer hung");
}

void send_all(int fd, const void *buf, size_t len)
{
	for (size_t off = 0; off < len;) {
		ssize_t n = send(fd, (const char *)buf + off, len - off, MSG_NOSIGNAL);

		ck_assert_int_gt(n, 0);
		off += (size_t)n;
	}
}

char *pattern(size_t len, unsigned seed)
{
	char *buf = malloc(len ? len : 1);

	ck_assert_ptr_nonnull(buf);
	for (size_t i = 0; i < len; i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = (char)(seed >> 16);
	}
	return buf;
}
