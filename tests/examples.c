/* SPDX-License-Identifier: MIT */
/*
 * The example servers, end to end over loopback: afio-echo and afio-httpd
 * are started with --port 0 on 127.0.0.1, talked to as a client would, then
 * stopped with SIGTERM, which must end them with exit status 0.  Each runs
 * on every backend that probes as available here, in every mode.
 *
 * usage: examples PATH-TO-AFIO-ECHO PATH-TO-AFIO-HTTPD
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asyncfio.h"

/* How long any one wait may last before the test calls the server hung.
   A guard against hanging forever, not a measure of speed. */
#define HANG_GUARD_MS	60000
#define MIB		(1024 * 1024)

struct target {
	enum afio_backend backend;
	enum afio_mode mode;
	char name[32];
};

static const char *echo_path;
static const char *httpd_path;
static struct target targets[(AFIO_BACKEND_THREADS + 1) * 3];
static int ntargets;

/* ---- running a server ---- */

struct server {
	pid_t pid;
	int pidfd;
	int out_fd;		/* its stdout */
	unsigned port;
	const struct target *target;
};

static void exec_server(const char *path, const struct target *t, const char *opt,
			const char *val, int out_fd)
{
	const char *argv[] = {
		path, "--port", "0", "--backend", afio_backend_name(t->backend),
		"--mode", afio_mode_name(t->mode), opt, val, NULL,
	};

	/* The options must decide, not whatever the caller's environment says. */
	unsetenv("AFIO_BACKEND");
	unsetenv("AFIO_MODE");
	dup2(out_fd, STDOUT_FILENO);
	execv(path, (char **)argv);
	_exit(127);
}

/* Reads the first line of the server's stdout: "listening on ADDR:PORT". */
static unsigned read_port(struct server *s)
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

/* opt and val: one more option for the server, or NULL. */
static void start_server(struct server *s, const char *path, const struct target *t,
			 const char *opt, const char *val)
{
	int pipefd[2];

	ck_assert_int_eq(pipe2(pipefd, O_CLOEXEC), 0);
	s->target = t;
	s->pid = fork();
	ck_assert_int_ge(s->pid, 0);
	if (!s->pid)
		exec_server(path, t, opt, val, pipefd[1]);
	close(pipefd[1]);
	s->out_fd = pipefd[0];
	s->pidfd = (int)syscall(SYS_pidfd_open, s->pid, 0);
	ck_assert_int_ge(s->pidfd, 0);
	s->port = read_port(s);
}

/* SIGTERM, then the exit status must be a clean 0. */
static void stop_server(struct server *s)
{
	struct pollfd pfd = { .fd = s->pidfd, .events = POLLIN };
	int status = 0;

	ck_assert_int_eq(kill(s->pid, SIGTERM), 0);
	if (poll(&pfd, 1, HANG_GUARD_MS) != 1)
		kill(s->pid, SIGKILL);
	ck_assert_int_eq(waitpid(s->pid, &status, 0), s->pid);
	close(s->pidfd);
	close(s->out_fd);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "%s: server ended with status 0x%x", s->target->name, status);
}

/* ---- client side ---- */

/* rcvbuf: SO_RCVBUF, set before the window is agreed on; 0 for the default. */
static int connect_with(unsigned port, int rcvbuf)
{
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_port = htons(port),
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

static int connect_to(unsigned port)
{
	return connect_with(port, 0);
}

static void wait_for(int fd, short events)
{
	struct pollfd pfd = { .fd = fd, .events = events };

	ck_assert_msg(poll(&pfd, 1, HANG_GUARD_MS) == 1, "peer hung");
}

static void send_all(int fd, const void *buf, size_t len)
{
	for (size_t off = 0; off < len;) {
		ssize_t n = send(fd, (const char *)buf + off, len - off, MSG_NOSIGNAL);

		ck_assert_int_gt(n, 0);
		off += (size_t)n;
	}
}

/* Reads until the peer closes; returns the length (at most cap). */
static size_t recv_to_eof(int fd, char *buf, size_t cap)
{
	size_t len = 0;
	ssize_t n;

	do {
		wait_for(fd, POLLIN);
		n = recv(fd, buf + len, cap - len, 0);
		ck_assert_int_ge(n, 0);
		len += (size_t)n;
	} while (n > 0 && len < cap);
	return len;
}

/* Bytes that differ from one size to the next, so a mix-up shows. */
static char *pattern(size_t len, unsigned seed)
{
	char *buf = malloc(len ? len : 1);

	ck_assert_ptr_nonnull(buf);
	for (size_t i = 0; i < len; i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = (char)(seed >> 16);
	}
	return buf;
}

/* ---- echo ---- */

/*
 * Sends len bytes and reads the echo only when the socket takes no more,
 * so that the echo backs up and the server's sends have to wait for room.
 * (A client that never read would stall: the server stops receiving while
 * its sends wait.)  Then half-closes and expects EOF, so that the echo is
 * exactly what was sent, nothing more.
 */
static void check_echo(unsigned port, size_t len)
{
	char *out = pattern(len, (unsigned)len), *in = malloc(len + 1);
	/* A small window: the server's sends wait sooner. */
	int fd = connect_with(port, 4096);
	size_t sent = 0, got = 0;
	ssize_t n;

	ck_assert_ptr_nonnull(in);
	while (got < len) {
		struct pollfd pfd = {
			.fd = fd, .events = POLLIN | (sent < len ? POLLOUT : 0),
		};

		ck_assert_msg(poll(&pfd, 1, HANG_GUARD_MS) == 1, "echo of %zu hung at %zu", len, got);
		if (pfd.revents & POLLOUT) {
			n = send(fd, out + sent, len - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
			ck_assert_int_gt(n, 0);
			sent += (size_t)n;
		} else if (pfd.revents & POLLIN) {
			n = recv(fd, in + got, len + 1 - got, MSG_DONTWAIT);
			ck_assert_int_gt(n, 0);
			got += (size_t)n;
		}
	}
	ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
	ck_assert_uint_eq(recv_to_eof(fd, in + got, 1), 0);
	ck_assert_msg(!memcmp(in, out, len), "echo of %zu bytes differs", len);
	close(fd);
	free(out);
	free(in);
}

START_TEST(echo_returns_what_was_sent)
{
	static const size_t sizes[] = { 1, 100, 4096, 16 * 1024 + 1, 65536 + 7, MIB };
	struct server s;

	start_server(&s, echo_path, &targets[_i], NULL, NULL);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		check_echo(s.port, sizes[i]);
	stop_server(&s);
}
END_TEST

START_TEST(echo_serves_clients_at_once)
{
	enum { CLIENTS = 8, LEN = 1000 };
	char *out[CLIENTS], in[LEN];
	int fd[CLIENTS];
	struct server s;

	start_server(&s, echo_path, &targets[_i], NULL, NULL);
	for (int i = 0; i < CLIENTS; i++) {
		fd[i] = connect_to(s.port);
		out[i] = pattern(LEN, (unsigned)i);
		send_all(fd[i], out[i], LEN);
	}
	for (int i = 0; i < CLIENTS; i++) {
		ck_assert_int_eq(shutdown(fd[i], SHUT_WR), 0);
		ck_assert_uint_eq(recv_to_eof(fd[i], in, LEN), LEN);
		ck_assert(!memcmp(in, out[i], LEN));
		close(fd[i]);
		free(out[i]);
	}
	stop_server(&s);
}
END_TEST

START_TEST(echo_refuses_beyond_max_conn)
{
	char byte;
	struct server s;
	int a, b, c;

	start_server(&s, echo_path, &targets[_i], "--max-conn", "2");
	/* A round trip each makes sure both hold a slot before the third. */
	a = connect_to(s.port);
	b = connect_to(s.port);
	send_all(a, "a", 1);
	send_all(b, "b", 1);
	ck_assert_int_eq(recv(a, &byte, 1, 0), 1);
	ck_assert_int_eq(recv(b, &byte, 1, 0), 1);
	c = connect_to(s.port);
	wait_for(c, POLLIN);
	ck_assert_int_le(recv(c, &byte, 1, 0), 0);
	/* The refusal did not disturb those already served. */
	send_all(a, "c", 1);
	ck_assert_int_eq(recv(a, &byte, 1, 0), 1);
	ck_assert_int_eq(byte, 'c');
	close(c);
	close(b);
	close(a);
	stop_server(&s);
}
END_TEST

/* SIGTERM with one client idle (a receive in flight) and one that sends but
   does not read (the echo backs up): what is in flight is canceled and the
   server still exits 0. */
START_TEST(echo_stops_cleanly_with_clients)
{
	char *junk = pattern(MIB, 1);
	struct server s;
	int idle, stuck;
	size_t sent = 0;
	ssize_t n;

	start_server(&s, echo_path, &targets[_i], NULL, NULL);
	idle = connect_to(s.port);
	check_echo(s.port, 1);
	stuck = connect_to(s.port);
	do {
		n = send(stuck, junk + sent, MIB - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
		sent += n > 0 ? (size_t)n : 0;
	} while (n > 0 && sent < MIB);
	stop_server(&s);
	close(idle);
	close(stuck);
	free(junk);
}
END_TEST

/* ---- which backends, which modes ---- */

static void find_targets(void)
{
	static const enum afio_backend backends[] = {
		AFIO_BACKEND_IO_URING, AFIO_BACKEND_LIBAIO, AFIO_BACKEND_THREADS,
	};
	static const enum afio_mode modes[] = {
		AFIO_MODE_INLINE, AFIO_MODE_ASYNC, AFIO_MODE_HYBRID,
	};
	char reason[256];

	for (size_t b = 0; b < sizeof(backends) / sizeof(backends[0]); b++) {
		if (afio_probe(backends[b], reason, sizeof(reason))) {
			printf("skipping %s: %s\n", afio_backend_name(backends[b]), reason);
			continue;
		}
		for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
			struct target *t = &targets[ntargets++];

			t->backend = backends[b];
			t->mode = modes[m];
			snprintf(t->name, sizeof(t->name), "%s/%s",
				 afio_backend_name(t->backend), afio_mode_name(t->mode));
		}
	}
}

static Suite *examples_suite(void)
{
	Suite *s = suite_create("examples");
	TCase *echo = tcase_create("echo");

	tcase_add_loop_test(echo, echo_returns_what_was_sent, 0, ntargets);
	tcase_add_loop_test(echo, echo_serves_clients_at_once, 0, ntargets);
	tcase_add_loop_test(echo, echo_refuses_beyond_max_conn, 0, ntargets);
	tcase_add_loop_test(echo, echo_stops_cleanly_with_clients, 0, ntargets);
	suite_add_tcase(s, echo);

	return s;
}

int main(int argc, char **argv)
{
	SRunner *sr;
	int failed;

	if (argc != 3) {
		fprintf(stderr, "usage: %s AFIO-ECHO AFIO-HTTPD\n", argv[0]);
		return 2;
	}
	echo_path = argv[1];
	httpd_path = argv[2];
	find_targets();
	sr = srunner_create(examples_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
