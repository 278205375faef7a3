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

/* ---- httpd ---- */

struct response {
	int status;
	long content_length;	/* -1: none */
	const char *body;
	size_t body_len;
	size_t total;		/* head and body */
};

static long header_value(const char *head, const char *name)
{
	const char *p = strcasestr(head, name);

	return p ? strtol(p + strlen(name), NULL, 10) : -1;
}

/* Parses one response starting at buf; with_body false for HEAD. */
static struct response parse_response(const char *buf, size_t len, bool with_body)
{
	const char *end = memmem(buf, len, "\r\n\r\n", 4);
	struct response r = { .status = -1, .content_length = -1 };
	char head[2048];
	size_t head_len;

	ck_assert_msg(end, "no response head in %zu bytes", len);
	head_len = (size_t)(end - buf) + 4;
	ck_assert_uint_lt(head_len, sizeof(head));
	memcpy(head, buf, head_len);
	head[head_len] = '\0';
	ck_assert_int_eq(sscanf(head, "HTTP/1.1 %d ", &r.status), 1);
	r.content_length = header_value(head, "\r\nContent-Length:");
	r.body = buf + head_len;
	r.body_len = with_body && r.content_length > 0 ? (size_t)r.content_length : 0;
	ck_assert_uint_le(head_len + r.body_len, len);
	r.total = head_len + r.body_len;
	return r;
}

/* Sends raw request bytes and returns everything until the server closes. */
static size_t exchange(unsigned port, const char *request, char *buf, size_t cap)
{
	int fd = connect_to(port);
	size_t len;

	send_all(fd, request, strlen(request));
	len = recv_to_eof(fd, buf, cap);
	close(fd);
	return len;
}

static struct response get(unsigned port, const char *method, const char *target,
			   char *buf, size_t cap)
{
	struct response r;
	char request[512];
	size_t len;

	snprintf(request, sizeof(request),
		 "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
		 method, target);
	len = exchange(port, request, buf, cap);
	r = parse_response(buf, len, strcmp(method, "HEAD"));
	ck_assert_uint_eq(r.total, len);
	return r;
}

/* What the httpd tests serve: base/root/ holds the files, base/secret.txt
   is what an escape from the root would reach. */
static char base_dir[PATH_MAX];
static char root_dir[PATH_MAX + 8];
#define FILE_SIZE	(3 * 65536 + 12345)	/* several chunks and a partial one */
#define SECRET		"not for the web"

static void write_file(const char *dir, const char *name, const char *data, size_t len)
{
	char path[PATH_MAX * 2];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static void make_site(void)
{
	const char *tmp = getenv("AFIO_TEST_DIR");
	char *data = pattern(FILE_SIZE, 7);
	char path[PATH_MAX * 2];

	snprintf(base_dir, sizeof(base_dir), "%s/afio-httpd-XXXXXX", tmp ? tmp : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(base_dir));
	snprintf(root_dir, sizeof(root_dir), "%s/root", base_dir);
	ck_assert_int_eq(mkdir(root_dir, 0755), 0);
	write_file(root_dir, "file.bin", data, FILE_SIZE);
	write_file(root_dir, "empty.txt", "", 0);
	write_file(base_dir, "secret.txt", SECRET, strlen(SECRET));
	snprintf(path, sizeof(path), "%s/link.txt", root_dir);
	ck_assert_int_eq(symlink("../secret.txt", path), 0);
	free(data);
}

static void remove_site(void)
{
	static const char *const names[] = {
		"root/file.bin", "root/empty.txt", "root/link.txt", "root", "secret.txt",
	};
	char path[PATH_MAX * 2];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", base_dir, names[i]);
		remove(path);
	}
	rmdir(base_dir);
}

static void start_httpd(struct server *s, int i)
{
	start_server(s, httpd_path, &targets[i], "--root", root_dir);
}

START_TEST(httpd_serves_file_intact)
{
	char *want = pattern(FILE_SIZE, 7), *buf = malloc(2 * FILE_SIZE);
	struct response r;
	struct server s;

	ck_assert_ptr_nonnull(buf);
	start_httpd(&s, _i);
	r = get(s.port, "GET", "/file.bin", buf, 2 * FILE_SIZE);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(r.content_length, FILE_SIZE);
	ck_assert_msg(!memcmp(r.body, want, FILE_SIZE), "%s: body differs", targets[_i].name);
	r = get(s.port, "GET", "/empty.txt", buf, 2 * FILE_SIZE);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(r.content_length, 0);
	stop_server(&s);
	free(want);
	free(buf);
}
END_TEST

START_TEST(httpd_head_has_no_body)
{
	char buf[4096];
	struct response r;
	struct server s;
	size_t len;

	start_httpd(&s, _i);
	len = exchange(s.port, "HEAD /file.bin HTTP/1.1\r\nConnection: close\r\n\r\n",
		       buf, sizeof(buf));
	r = parse_response(buf, len, false);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(r.content_length, FILE_SIZE);
	ck_assert_uint_eq(r.total, len);
	stop_server(&s);
}
END_TEST

START_TEST(httpd_answers_errors)
{
	static const struct {
		const char *request;
		int status;
	} cases[] = {
		{ "GET /missing HTTP/1.1\r\n\r\n", 404 },
		{ "POST /file.bin HTTP/1.1\r\n\r\n", 405 },
		{ "BREW /file.bin HTTP/1.1\r\n\r\n", 405 },
		{ "GET file.bin HTTP/1.1\r\n\r\n", 400 },
		{ "GET /file.bin HTTP/9.9\r\n\r\n", 400 },
		{ "nonsense\r\n\r\n", 400 },
		{ "GET /%zz HTTP/1.1\r\n\r\n", 400 },
	};
	char buf[4096];
	struct response r;
	struct server s;
	size_t len;

	start_httpd(&s, _i);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		len = exchange(s.port, cases[i].request, buf, sizeof(buf));
		r = parse_response(buf, len, true);
		ck_assert_msg(r.status == cases[i].status, "%s: \"%s\" got %d",
			      targets[_i].name, cases[i].request, r.status);
	}
	stop_server(&s);
}
END_TEST

START_TEST(httpd_stays_below_root)
{
	static const char *const escapes[] = {
		"/../secret.txt", "/%2e%2e/secret.txt", "/x/../../secret.txt",
		"/..", "//../secret.txt", "/link.txt",
	};
	char buf[4096];
	struct response r;
	struct server s;

	start_httpd(&s, _i);
	for (size_t i = 0; i < sizeof(escapes) / sizeof(escapes[0]); i++) {
		r = get(s.port, "GET", escapes[i], buf, sizeof(buf));
		ck_assert_msg(r.status == 400 || r.status == 403, "%s: %s got %d",
			      targets[_i].name, escapes[i], r.status);
		ck_assert(!memmem(buf, r.total, SECRET, strlen(SECRET)));
	}
	stop_server(&s);
}
END_TEST

/* Two requests in one write: the second must not be lost or mixed up. */
START_TEST(httpd_keeps_connection_alive)
{
	char *want = pattern(FILE_SIZE, 7), *buf = malloc(3 * FILE_SIZE);
	struct response first, second;
	struct server s;
	size_t len;

	ck_assert_ptr_nonnull(buf);
	start_httpd(&s, _i);
	len = exchange(s.port,
		       "GET /file.bin HTTP/1.1\r\nHost: x\r\n\r\n"
		       "GET /file.bin HTTP/1.1\r\nConnection: close\r\n\r\n",
		       buf, 3 * FILE_SIZE);
	first = parse_response(buf, len, true);
	second = parse_response(buf + first.total, len - first.total, true);
	ck_assert_int_eq(first.status, 200);
	ck_assert_int_eq(second.status, 200);
	ck_assert(!memcmp(first.body, want, FILE_SIZE));
	ck_assert(!memcmp(second.body, want, FILE_SIZE));
	ck_assert_uint_eq(first.total + second.total, len);
	stop_server(&s);
	free(want);
	free(buf);
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
	TCase *httpd = tcase_create("httpd");

	tcase_add_loop_test(echo, echo_returns_what_was_sent, 0, ntargets);
	tcase_add_loop_test(echo, echo_serves_clients_at_once, 0, ntargets);
	tcase_add_loop_test(echo, echo_refuses_beyond_max_conn, 0, ntargets);
	tcase_add_loop_test(echo, echo_stops_cleanly_with_clients, 0, ntargets);
	suite_add_tcase(s, echo);

	tcase_add_checked_fixture(httpd, make_site, remove_site);
	tcase_add_loop_test(httpd, httpd_serves_file_intact, 0, ntargets);
	tcase_add_loop_test(httpd, httpd_head_has_no_body, 0, ntargets);
	tcase_add_loop_test(httpd, httpd_answers_errors, 0, ntargets);
	tcase_add_loop_test(httpd, httpd_stays_below_root, 0, ntargets);
	tcase_add_loop_test(httpd, httpd_keeps_connection_alive, 0, ntargets);
	suite_add_tcase(s, httpd);
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
