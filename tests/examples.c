/* SPDX-License-Identifier: MIT */
/*
 * The example servers, end to end over loopback: afio-echo and afio-httpd
 * are started with --port 0 on 127.0.0.1, talked to as a client would, then
 * stopped with SIGTERM, which must end them with exit status 0.  minimal
 * sends a file to a listener of the test's own.  Each runs on every
 * backend that probes as available here, in every mode; each afio-echo
 * test twice over, with --recv own and with --recv pooled.
 *
 * usage: examples PATH-TO-AFIO-ECHO PATH-TO-AFIO-HTTPD PATH-TO-MINIMAL
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
#include <stdnoreturn.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asyncfio.h"
#include "serverutil.h"

#define MIB		(1024 * 1024)

static const char *echo_path;
static const char *httpd_path;
static const char *minimal_path;
static struct target targets[MAX_TARGETS];
static int ntargets;

/* ---- running a server ---- */

static void launch_server(struct server *s, const char *path, const struct target *t,
			  struct launch *how)
{
	how->path = path;
	server_start(s, t, how);
}

/* SIGTERM, then the exit status must be a clean 0. */
static void stop_server(struct server *s)
{
	int status = server_stop(s);

	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "%s: server ended with status 0x%x", s->target->name, status);
}

/* ---- afio-echo's two ways to receive ---- */

#define MAX_ECHO_ARGS	12

/* The echo tests loop over three times the targets: each with --recv
   own, then each with --recv pooled and --accept multishot, then with
   --recv own and --eventfd none (the loop waits inside afio_poll()). */
#define ECHO_VARIANTS	3

static const struct target *echo_target(int i)
{
	return &targets[i % ntargets];
}

static const char *echo_recv(int i)
{
	return i / ntargets == 1 ? "pooled" : "own";
}

static bool echo_waits_inside(int i)
{
	return i / ntargets == 2;
}

/* --recv for test case i, then extra (NULL-terminated, may be NULL), into
   out[MAX_ECHO_ARGS]. */
static const char *const *echo_args(int i, const char *const *extra, const char **out)
{
	size_t n = 0;

	out[n++] = "--recv";
	out[n++] = echo_recv(i);
	if (!strcmp(echo_recv(i), "pooled")) {
		out[n++] = "--accept";
		out[n++] = "multishot";
	}
	if (echo_waits_inside(i)) {
		out[n++] = "--eventfd";
		out[n++] = "none";
	}
	for (; extra && *extra; extra++) {
		ck_assert_uint_lt(n, MAX_ECHO_ARGS - 1);
		out[n++] = *extra;
	}
	out[n] = NULL;
	return out;
}

/* afio-echo for test case i, with how->args after its --recv. */
static void launch_echo(struct server *s, int i, struct launch *how)
{
	const char *args[MAX_ECHO_ARGS];
	const char *const *extra = how->args;

	how->args = echo_args(i, extra, args);
	launch_server(s, echo_path, echo_target(i), how);
	how->args = extra;
}

/* opt and val: one more option, or NULL. */
static void start_echo(struct server *s, int i, const char *opt, const char *val)
{
	const char *args[] = { opt, val, NULL };
	struct launch how = { .args = args, .err_fd = -1 };

	launch_echo(s, i, &how);
}

/* ---- client side ---- */

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

	start_echo(&s, _i, NULL, NULL);
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

	start_echo(&s, _i, NULL, NULL);
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

	start_echo(&s, _i, "--max-conn", "2");
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

	start_echo(&s, _i, NULL, NULL);
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

/* A client with many connections that sends and reads as fast as it can,
   never waiting, until the server goes. */
static noreturn void keep_talking(unsigned port, int conns)
{
	static char buf[4096];
	int fd[conns];

	for (int i = 0; i < conns; i++)
		fd[i] = connect_to(port);
	for (;;) {
		for (int i = 0; i < conns; i++) {
			if (send(fd[i], buf, 1024, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 &&
			    errno != EAGAIN)
				_exit(0);
			if (recv(fd[i], buf, sizeof(buf), MSG_DONTWAIT) == 0)
				_exit(0);
		}
	}
}

/* SIGTERM while hundreds of connections talk: the requests that had a
   result waiting, bytes included, still close their connections. */
START_TEST(echo_stops_cleanly_under_load)
{
	struct server s;
	pid_t pid;

	start_echo(&s, _i, NULL, NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid)
		keep_talking(s.port, 300);
	poll(NULL, 0, 500);
	stop_server(&s);
	kill(pid, SIGKILL);
	ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
}
END_TEST

/* Whether the thread pool holds a worker for each waiting socket here,
   which caps the connections (afio-echo refuses more than it has). */
static bool pool_waits_per_socket(const struct target *t)
{
	return t->mode == AFIO_MODE_ASYNC &&
	       (t->backend == AFIO_BACKEND_THREADS || t->backend == AFIO_BACKEND_LIBAIO);
}

#define POOL_MAX_WORKERS	1024

/* One byte there and back: true when it came back, false when the server
   closed the connection instead. */
static bool echo_once(int fd)
{
	char byte = 'e';

	if (send(fd, &byte, 1, MSG_NOSIGNAL) != 1)
		return false;
	wait_for(fd, POLLIN);
	if (recv(fd, &byte, 1, 0) != 1)
		return false;
	ck_assert_int_eq(byte, 'e');
	return true;
}

static rlim_t nofile_limit(void)
{
	struct rlimit rl;

	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	return rl.rlim_cur;
}

/* The more the better, short of what this machine's descriptors allow:
   the server may need two per connection, and we need one. */
static unsigned many_conns(const struct target *t)
{
	rlim_t room = nofile_limit() > 200 ? (nofile_limit() - 200) / 2 : 0;
	unsigned n = pool_waits_per_socket(t) ? POOL_MAX_WORKERS - 24 : 3000;

	return room < n ? (unsigned)room : n;
}

/* Thousands at once, each with a message of its own in flight. */
START_TEST(echo_serves_thousands)
{
	const struct target *t = echo_target(_i);
	unsigned n = many_conns(t);
	int *fd = malloc(n * sizeof(*fd));
	struct server s;

	ck_assert_ptr_nonnull(fd);
	ck_assert_uint_ge(n, 1000);
	start_echo(&s, _i, NULL, NULL);
	for (unsigned i = 0; i < n; i++)
		fd[i] = connect_to(s.port);
	for (int round = 0; round < 2; round++) {
		for (unsigned i = 0; i < n; i++) {
			uint32_t v = i * 2 + (uint32_t)round;

			send_all(fd[i], &v, sizeof(v));
		}
		for (unsigned i = 0; i < n; i++) {
			uint32_t v = 0;
			size_t got = 0;
			ssize_t r;

			while (got < sizeof(v)) {
				wait_for(fd[i], POLLIN);
				r = recv(fd[i], (char *)&v + got, sizeof(v) - got, 0);
				ck_assert_msg(r > 0, "%s: connection %u of %u closed", t->name, i, n);
				got += (size_t)r;
			}
			ck_assert_uint_eq(v, i * 2 + (uint32_t)round);
		}
	}
	for (unsigned i = 0; i < n; i++)
		close(fd[i]);
	stop_server(&s);
	free(fd);
}
END_TEST

/*
 * A pool of two buffers for eight clients that all send at once, more
 * than a buffer each: receives wait for buffers that sends give back, and
 * every client gets all its bytes, in order.
 */
START_TEST(echo_pooled_waits_for_buffers)
{
	enum { CLIENTS = 8, LEN = 3 * 4096 + 5 };
	char *out[CLIENTS], in[LEN];
	int fd[CLIENTS];
	struct server s;

	start_echo(&s, _i, "--pool-bufs", "2");
	for (int i = 0; i < CLIENTS; i++) {
		fd[i] = connect_to(s.port);
		out[i] = pattern(LEN, (unsigned)i);
		send_all(fd[i], out[i], LEN);
	}
	for (int i = 0; i < CLIENTS; i++) {
		ck_assert_int_eq(shutdown(fd[i], SHUT_WR), 0);
		ck_assert_uint_eq(recv_to_eof(fd[i], in, LEN), LEN);
		ck_assert_msg(!memcmp(in, out[i], LEN), "%s: client %d got other bytes",
			      echo_target(_i)->name, i);
		close(fd[i]);
		free(out[i]);
	}
	stop_server(&s);
}
END_TEST

/* Runs a server that is expected to refuse to start; returns its exit
   status, and what it said on stderr in err. */
static int run_to_exit(int i, const char *const *extra, char *err, size_t cap)
{
	const struct target *t = echo_target(i);
	const char *args[MAX_ECHO_ARGS];
	int out[2], errp[2], status = 0, pidfd;
	struct pollfd pfd;
	struct launch how = { .path = echo_path, .args = echo_args(i, extra, args) };
	size_t len = 0;
	ssize_t n;
	pid_t pid;

	ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(errp, O_CLOEXEC), 0);
	how.err_fd = errp[1];
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid)
		server_exec(t, &how, out[1]);
	close(out[1]);
	close(errp[1]);
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	ck_assert_int_ge(pidfd, 0);
	pfd = (struct pollfd){ .fd = pidfd, .events = POLLIN };
	ck_assert_msg(poll(&pfd, 1, HANG_GUARD_MS) == 1, "%s: server did not exit", t->name);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	while (len < cap - 1 && (n = read(errp[0], err + len, cap - 1 - len)) > 0)
		len += (size_t)n;
	err[len] = '\0';
	close(pidfd);
	close(out[0]);
	close(errp[0]);
	ck_assert(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/* threads and libaio in ASYNC hold a pool worker per waiting connection
   and the pool has at most 1024: more is refused, with the reason.  The
   other backends and modes take it. */
START_TEST(echo_refuses_what_async_cannot_serve)
{
	static const char *const args[] = { "--max-conn", "5000", NULL };
	const struct target *t = echo_target(_i);
	char err[4096];
	struct launch how = { .args = args, .err_fd = -1 };
	struct server s;

	if (pool_waits_per_socket(t)) {
		ck_assert_int_eq(run_to_exit(_i, args, err, sizeof(err)), 2);
		ck_assert_msg(strstr(err, "at most 1024"), "%s said: %s", t->name, err);
		return;
	}
	launch_echo(&s, _i, &how);
	check_echo(s.port, 100);
	stop_server(&s);
}
END_TEST

/* --idle-timeout: a connection that sends nothing is closed by the server;
   one that keeps talking is not. */
START_TEST(echo_closes_idle_connections)
{
	static const char *const args[] = { "--idle-timeout", "1", NULL };
	struct launch how = { .args = args, .err_fd = -1 };
	struct pollfd pfd;
	struct server s;
	int idle, busy, polls = 0;
	char byte;

	launch_echo(&s, _i, &how);
	idle = connect_to(s.port);
	busy = connect_to(s.port);
	pfd = (struct pollfd){ .fd = idle, .events = POLLIN };
	/* A round trip every 100 ms on one; the other stays silent. */
	do {
		ck_assert_msg(echo_once(busy), "%s, %s: the busy connection was closed",
			      echo_target(_i)->name, echo_recv(_i));
		ck_assert_msg(polls++ < HANG_GUARD_MS / 100, "idle connection still open");
	} while (poll(&pfd, 1, 100) == 0);
	ck_assert_int_le(recv(idle, &byte, 1, 0), 0);
	ck_assert(echo_once(busy));
	close(idle);
	close(busy);
	stop_server(&s);
}
END_TEST

/* utime + stime of pid, in clock ticks. */
static unsigned long long cpu_ticks(pid_t pid)
{
	unsigned long long utime = 0, stime = 0;
	char path[64], buf[1024], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	ck_assert_int_gt(n, 0);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
				&utime, &stime), 2);
	return utime + stime;
}

static unsigned count_lines(int fd)
{
	char buf[4096];
	unsigned lines = 0;
	ssize_t n;

	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++)
			lines += buf[i] == '\n';
	return lines;
}

#define LOW_NOFILE	100
#define BURST		50
#define TRY_CONNS	200	/* more than LOW_NOFILE allows anywhere */

enum answer { SERVED, TURNED_AWAY, NO_ANSWER_YET };

/* Sends a byte and waits up to wait_ms for the echo or the end. */
static enum answer try_echo(int fd, int wait_ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char byte = 'e';

	if (send(fd, &byte, 1, MSG_NOSIGNAL) != 1)
		return TURNED_AWAY;
	if (poll(&pfd, 1, wait_ms) == 0)
		return NO_ANSWER_YET;
	return recv(fd, &byte, 1, 0) == 1 ? SERVED : TURNED_AWAY;
}

/* A connection sent a byte earlier: it must now be echoed or closed. */
static void expect_answer(int fd)
{
	char byte;

	wait_for(fd, POLLIN);
	if (recv(fd, &byte, 1, 0) == 1)
		ck_assert_int_eq(byte, 'e');
	close(fd);
}

/*
 * Out of descriptors.  Under RLIMIT_NOFILE 100 the server takes
 * connections until it has no descriptor left.  Then it turns new ones away
 * at once, or lets them wait in the backlog for a while (when a pool
 * thread took its spare descriptor); either way it does not spin on a
 * connection it cannot take, does not write a line per connection, and
 * serves again once descriptors are free, those that waited included.
 *
 * "Does not spin": at the limit, with a connection waiting that the server
 * cannot take, it must use less than a quarter of a CPU over half a
 * second.  A loop that spins on the readable listener uses all of it; an
 * idle server none, on a machine however slow or busy.  The one wait with
 * a limit (a second for an answer while filling) only sorts connections
 * into served and waiting, and either kind must be answered in the end.
 */
START_TEST(echo_survives_descriptor_exhaustion)
{
	const struct target *t = echo_target(_i);
	/* A pool with a worker per connection needs a descriptor for each,
	   and pooled, one for each buffer too (its send may wait). */
	const char *args[] = { "--max-conn", pool_waits_per_socket(t) ? "40" : "200",
			       "--pool-bufs", pool_waits_per_socket(t) ? "8" : "256", NULL };
	struct launch how = { .args = args, .err_fd = -1, .nofile = LOW_NOFILE };
	unsigned served = 0, refused = 0, waiting = 0, lines;
	int held[TRY_CONNS], later[BURST + 1], errp[2], fd, tries = 0;
	unsigned long long before, after;
	enum answer a = SERVED;
	struct server s;

	ck_assert_int_eq(pipe2(errp, O_CLOEXEC | O_NONBLOCK), 0);
	how.err_fd = errp[1];
	launch_echo(&s, _i, &how);
	close(errp[1]);

	while (served < TRY_CONNS && refused < 3 && a != NO_ANSWER_YET) {
		fd = connect_to(s.port);
		a = try_echo(fd, 1000);
		if (a == SERVED) {
			held[served++] = fd;
		} else if (a == TURNED_AWAY) {
			refused++;
			close(fd);
		} else {
			later[waiting++] = fd;
		}
	}
	ck_assert_msg(served >= 1 && served < TRY_CONNS, "%s: %u served", t->name, served);

	later[waiting++] = fd = connect_to(s.port);
	before = cpu_ticks(s.pid);
	(void)try_echo(fd, 500);
	after = cpu_ticks(s.pid);
	ck_assert_msg(after - before < (unsigned long long)sysconf(_SC_CLK_TCK) / 4,
		      "%s: %llu ticks in 0.5 s at the descriptor limit", t->name, after - before);
	for (int i = 0; i < BURST && waiting < BURST + 1; i++) {
		fd = connect_to(s.port);
		if (try_echo(fd, 0) == TURNED_AWAY)
			close(fd);
		else
			later[waiting++] = fd;
	}

	for (unsigned i = 0; i < served; i++)
		close(held[i]);
	for (unsigned i = 0; i < waiting; i++)
		expect_answer(later[i]);
	/* The server frees descriptors as it sees the ends of the streams. */
	while ((a = try_echo(fd = connect_to(s.port), HANG_GUARD_MS)) != SERVED) {
		ck_assert_msg(tries++ < HANG_GUARD_MS / 10, "%s: not serving again", t->name);
		close(fd);
		poll(NULL, 0, 10);
	}
	check_echo(s.port, 4096);
	close(fd);
	stop_server(&s);
	lines = count_lines(errp[0]);
	close(errp[0]);
	ck_assert_msg(lines < BURST / 2, "%s: %u lines on stderr", t->name, lines);
}
END_TEST

/* ---- minimal ---- */

/* A socket bound to 127.0.0.1 on a free port, listening or not (then a
   connection to it is refused); *port gets the port. */
static int loopback_socket(bool listening, unsigned *port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sin);
	/* A small window, inherited by the accepted socket: sends come out short. */
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rcvbuf = 4096;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)), 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	if (listening)
		ck_assert_int_eq(listen(fd, 1), 0);
	*port = ntohs(sin.sin_port);
	return fd;
}

/* A file of len pattern bytes in the build directory; the caller frees
   the name and the bytes (in *data) and unlinks the file. */
static char *make_file(size_t len, char **data)
{
	const char *dir = getenv("AFIO_TEST_DIR");
	char *path;
	int fd;

	ck_assert_int_gt(asprintf(&path, "%s/minimal-%d.in", dir ? dir : "/tmp", (int)getpid()), 0);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	*data = pattern(len, (unsigned)len);
	ck_assert_int_eq(write(fd, *data, len), (ssize_t)len);
	close(fd);
	return path;
}

/* minimal FILE 127.0.0.1 PORT on t's backend and mode, chosen by the
   environment as a program that passes no config leaves them; its stderr
   goes to err_fd. */
static pid_t start_minimal(const struct target *t, const char *file, unsigned port, int err_fd)
{
	char port_arg[16];
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid)
		return pid;
	snprintf(port_arg, sizeof(port_arg), "%u", port);
	setenv("AFIO_BACKEND", afio_backend_name(t->backend), 1);
	setenv("AFIO_MODE", afio_mode_name(t->mode), 1);
	dup2(err_fd, STDERR_FILENO);
	execl(minimal_path, minimal_path, file, "127.0.0.1", port_arg, (char *)NULL);
	_exit(127);
}

/* Waits for it within the guard; returns its exit status. */
static int wait_minimal(const struct target *t, pid_t pid)
{
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0), status = 0;
	struct pollfd pfd = { .fd = pidfd, .events = POLLIN };

	ck_assert_int_ge(pidfd, 0);
	if (poll(&pfd, 1, HANG_GUARD_MS) != 1)
		kill(pid, SIGKILL);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	close(pidfd);
	ck_assert_msg(WIFEXITED(status), "%s: minimal ended with status 0x%x", t->name, status);
	return WEXITSTATUS(status);
}

START_TEST(minimal_sends_the_file)
{
	enum { LEN = 3 * MIB + 12345 };
	const struct target *t = &targets[_i];
	char *data, *in = malloc(LEN + 1), *path = make_file(LEN, &data);
	unsigned port;
	int lfd = loopback_socket(true, &port), fd;
	pid_t pid;

	ck_assert_ptr_nonnull(in);
	pid = start_minimal(t, path, port, STDERR_FILENO);
	wait_for(lfd, POLLIN);
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_uint_eq(recv_to_eof(fd, in, LEN + 1), LEN);
	ck_assert_msg(!memcmp(in, data, LEN), "%s: the bytes received differ", t->name);
	ck_assert_int_eq(wait_minimal(t, pid), 0);
	close(fd);
	close(lfd);
	unlink(path);
	free(path);
	free(data);
	free(in);
}
END_TEST

/* Runs minimal to its end; returns its exit status, its stderr in err. */
static int run_minimal(const struct target *t, const char *file, unsigned port,
		       char *err, size_t cap)
{
	int errp[2], status;
	size_t len = 0;
	ssize_t n;
	pid_t pid;

	ck_assert_int_eq(pipe2(errp, O_CLOEXEC), 0);
	pid = start_minimal(t, file, port, errp[1]);
	close(errp[1]);
	status = wait_minimal(t, pid);
	while (len < cap - 1 && (n = read(errp[0], err + len, cap - 1 - len)) > 0)
		len += (size_t)n;
	err[len] = '\0';
	close(errp[0]);
	return status;
}

START_TEST(minimal_reports_errors)
{
	const struct target *t = &targets[_i];
	char err[1024], *data, *path = make_file(100, &data);
	unsigned port;
	int closed = loopback_socket(false, &port);

	ck_assert_int_eq(run_minimal(t, "/nonexistent/minimal.in", port, err, sizeof(err)), 1);
	ck_assert_msg(strstr(err, "/nonexistent/minimal.in: No such file"), "%s said: %s",
		      t->name, err);
	/* closed is bound and does not listen: nobody takes the connection. */
	ck_assert_int_eq(run_minimal(t, path, port, err, sizeof(err)), 1);
	ck_assert_msg(strstr(err, "Connection refused"), "%s said: %s", t->name, err);
	close(closed);
	unlink(path);
	free(path);
	free(data);
}
END_TEST

/* ---- which backends, which modes ---- */

/* Thousands of connections need as many descriptors, here and in the
   servers, which inherit the limit. */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static Suite *examples_suite(void)
{
	Suite *s = suite_create("examples");
	TCase *echo = tcase_create("echo");
	TCase *minimal = tcase_create("minimal");

	tcase_add_loop_test(echo, echo_returns_what_was_sent, 0, ECHO_VARIANTS * ntargets);
	tcase_add_loop_test(echo, echo_serves_clients_at_once, 0, ECHO_VARIANTS * ntargets);
	tcase_add_loop_test(echo, echo_refuses_beyond_max_conn, 0, ECHO_VARIANTS * ntargets);
	tcase_add_loop_test(echo, echo_stops_cleanly_with_clients, 0, ECHO_VARIANTS * ntargets);
	tcase_add_loop_test(echo, echo_stops_cleanly_under_load, 0, ECHO_VARIANTS * ntargets);
	tcase_add_loop_test(echo, echo_serves_thousands, 0, ECHO_VARIANTS * ntargets);
	tcase_add_loop_test(echo, echo_refuses_what_async_cannot_serve, 0, ECHO_VARIANTS * ntargets);
	tcase_add_loop_test(echo, echo_closes_idle_connections, 0, ECHO_VARIANTS * ntargets);
	tcase_add_loop_test(echo, echo_survives_descriptor_exhaustion, 0, ECHO_VARIANTS * ntargets);
	/* Pooled only: the second round of the targets. */
	tcase_add_loop_test(echo, echo_pooled_waits_for_buffers, ntargets, 2 * ntargets);
	suite_add_tcase(s, echo);
	tcase_add_loop_test(minimal, minimal_sends_the_file, 0, ntargets);
	tcase_add_loop_test(minimal, minimal_reports_errors, 0, ntargets);
	suite_add_tcase(s, minimal);

	return s;
}

int main(int argc, char **argv)
{
	SRunner *sr;
	int failed;

	if (argc != 4) {
		fprintf(stderr, "usage: %s AFIO-ECHO AFIO-HTTPD MINIMAL\n", argv[0]);
		return 2;
	}
	echo_path = argv[1];
	httpd_path = argv[2];
	minimal_path = argv[3];
	raise_nofile();
	ntargets = find_targets(targets, NULL);
	sr = srunner_create(examples_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
