/* SPDX-License-Identifier: MIT */
/*
 * afio-httpd end to end over loopback: started with --port 0 on 127.0.0.1
 * and a site of its own, talked to as clients (good and bad) would, then
 * stopped with SIGTERM, which must end it with exit status 0.  Each test
 * runs on every backend that probes as available here, in every mode.
 *
 * usage: httpd PATH-TO-AFIO-HTTPD
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asyncfio.h"
#include "serverutil.h"

static const char *httpd_path;
static struct target targets[MAX_TARGETS];
static int ntargets;

/* ---- running the server ---- */

static int stderr_file(void)
{
	const char *dir = getenv("AFIO_TEST_DIR");
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/httpd-stderr-XXXXXX", dir ? dir : "/tmp");
	fd = mkostemp(path, O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	unlink(path);
	return fd;
}

/* extra: more options, NULL-terminated; fd_limit: RLIMIT_NOFILE, 0 to keep. */
static void start_with_limit(struct server *s, int i, rlim_t fd_limit,
			     const char *const *extra)
{
	struct launch how = {
		.path = httpd_path, .args = extra, .err_fd = stderr_file(), .nofile = fd_limit,
	};

	server_start(s, &targets[i], &how);
}

static void start_server(struct server *s, int i, const char *const *extra)
{
	start_with_limit(s, i, 0, extra);
}

/* What the server wrote to stderr so far, NUL-terminated, in buf. */
static void server_stderr(const struct server *s, char *buf, size_t cap)
{
	ssize_t n = pread(s->err_fd, buf, cap - 1, 0);

	buf[n > 0 ? n : 0] = '\0';
}

/* SIGTERM, then the exit status must be a clean 0, with the stats said. */
static void stop_server(struct server *s)
{
	char err[4096];
	int status = server_stop(s);

	server_stderr(s, err, sizeof(err));
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "%s: server ended with status 0x%x: %s", s->target->name, status, err);
	ck_assert_msg(strstr(err, "worker 0 stats:"), "%s: no stats in \"%s\"",
		      s->target->name, err);
}

/* A counter from the stats line of worker 0 ("name=N"). */
static unsigned long long stat_of(const struct server *s, const char *name)
{
	char err[8192], key[64];
	const char *p;

	server_stderr(s, err, sizeof(err));
	snprintf(key, sizeof(key), " %s=", name);
	p = strstr(err, key);
	ck_assert_msg(p, "no %s in \"%s\"", name, err);
	return strtoull(p + strlen(key), NULL, 10);
}

/* ---- client side ---- */

/* Reads until the peer closes; returns the length (at most cap).  A reset
   after the bytes counts as the end too. */
static size_t recv_to_eof(int fd, char *buf, size_t cap)
{
	size_t len = 0;
	ssize_t n;

	do {
		wait_for(fd, POLLIN);
		n = recv(fd, buf + len, cap - len, 0);
		if (n < 0 && errno == ECONNRESET)
			break;
		ck_assert_int_ge(n, 0);
		len += (size_t)n;
	} while (n > 0 && len < cap);
	return len;
}

struct response {
	int status;
	long content_length;	/* -1: none */
	const char *body;
	size_t body_len;
	size_t total;		/* head and body */
	char head[2048];
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
	size_t head_len;

	ck_assert_msg(end, "no response head in %zu bytes", len);
	head_len = (size_t)(end - buf) + 4;
	ck_assert_uint_lt(head_len, sizeof(r.head));
	memcpy(r.head, buf, head_len);
	r.head[head_len] = '\0';
	ck_assert_int_eq(sscanf(r.head, "HTTP/1.1 %d ", &r.status), 1);
	r.content_length = header_value(r.head, "\r\nContent-Length:");
	r.body = buf + head_len;
	r.body_len = with_body && r.content_length > 0 && r.status != 304 ?
		     (size_t)r.content_length : 0;
	ck_assert_uint_le(head_len + r.body_len, len);
	r.total = head_len + r.body_len;
	return r;
}

/* The value of a response header, "" if absent. */
static void header_text(const struct response *r, const char *name, char *out, size_t cap)
{
	const char *p = strcasestr(r->head, name), *eol;
	size_t n;

	out[0] = '\0';
	if (!p)
		return;
	p += strlen(name);
	p += strspn(p, " ");
	eol = strstr(p, "\r\n");
	n = (size_t)(eol - p) < cap - 1 ? (size_t)(eol - p) : cap - 1;
	memcpy(out, p, n);
	out[n] = '\0';
}

/* Sends raw request bytes and returns everything until the server closes. */
static size_t exchange(unsigned port, const char *request, size_t req_len, char *buf,
		       size_t cap)
{
	int fd = connect_to(port);
	size_t len;

	send_all(fd, request, req_len);
	len = recv_to_eof(fd, buf, cap);
	close(fd);
	return len;
}

static struct response get_with(unsigned port, const char *method, const char *target,
				const char *headers, char *buf, size_t cap)
{
	struct response r;
	char request[1024];
	size_t len;

	snprintf(request, sizeof(request),
		 "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%sConnection: close\r\n\r\n",
		 method, target, headers);
	len = exchange(port, request, strlen(request), buf, cap);
	r = parse_response(buf, len, strcmp(method, "HEAD"));
	ck_assert_uint_eq(r.total, len);
	return r;
}

static struct response get(unsigned port, const char *method, const char *target,
			   char *buf, size_t cap)
{
	return get_with(port, method, target, "", buf, cap);
}

/* The status of the one response to raw request bytes. */
static int status_for(unsigned port, const char *req, size_t req_len)
{
	char buf[4096];
	size_t len = exchange(port, req, req_len, buf, sizeof(buf));

	return parse_response(buf, len, true).status;
}

/* ---- the site ---- */

/* base/root/ holds the files, base/secret.txt is what an escape from the
   root would reach. */
static char base_dir[PATH_MAX];
static char root_dir[PATH_MAX + 8];
#define FILE_SIZE	(3 * 131072 + 12345)	/* several chunks and a partial one */
#define SMALL_SIZE	1000
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
	char *data = pattern(FILE_SIZE, 7), *small = pattern(SMALL_SIZE, 8);
	char path[PATH_MAX * 2];

	snprintf(base_dir, sizeof(base_dir), "%s/afio-httpd-XXXXXX", tmp ? tmp : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(base_dir));
	snprintf(root_dir, sizeof(root_dir), "%s/root", base_dir);
	ck_assert_int_eq(mkdir(root_dir, 0755), 0);
	write_file(root_dir, "file.bin", data, FILE_SIZE);
	write_file(root_dir, "small.bin", small, SMALL_SIZE);
	write_file(root_dir, "empty.txt", "", 0);
	write_file(root_dir, "index.html", "<p>hi</p>\n", 10);
	write_file(base_dir, "secret.txt", SECRET, strlen(SECRET));
	snprintf(path, sizeof(path), "%s/sub", root_dir);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/link.txt", root_dir);
	ck_assert_int_eq(symlink("../secret.txt", path), 0);
	snprintf(path, sizeof(path), "%s/abs.txt", root_dir);
	ck_assert_int_eq(symlink(base_dir, path), 0);
	free(data);
	free(small);
}

static void remove_site(void)
{
	static const char *const names[] = {
		"root/file.bin", "root/small.bin", "root/empty.txt", "root/index.html",
		"root/link.txt", "root/abs.txt", "root/sub", "root/changing.txt", "root",
		"secret.txt",
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
	const char *const extra[] = { "--root", root_dir, NULL };

	start_server(s, i, extra);
}

/* ---- serving ---- */

static void check_file(unsigned port, const char *name, const char *want, size_t size)
{
	char *buf = malloc(size + 4096);
	struct response r;

	ck_assert_ptr_nonnull(buf);
	r = get(port, "GET", name, buf, size + 4096);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(r.content_length, (long)size);
	ck_assert_msg(!memcmp(r.body, want, size), "%s: body differs", name);
	free(buf);
}

START_TEST(httpd_serves_file_intact)
{
	char *want = pattern(FILE_SIZE, 7), *small = pattern(SMALL_SIZE, 8);
	struct server s;

	start_httpd(&s, _i);
	check_file(s.port, "/file.bin", want, FILE_SIZE);
	check_file(s.port, "/small.bin", small, SMALL_SIZE);
	check_file(s.port, "/empty.txt", "", 0);
	check_file(s.port, "/", "<p>hi</p>\n", 10);
	/* The second time from the open-file cache. */
	check_file(s.port, "/file.bin", want, FILE_SIZE);
	stop_server(&s);
	free(want);
	free(small);
}
END_TEST

/* --direct: O_DIRECT reads, aligned and trimmed, give the same bytes; on
   libaio no read goes to the pool: what does is exactly the open-file
   cache's opens and stats, for which Linux AIO has no command. */
START_TEST(httpd_direct_serves_file_intact)
{
	const char *const extra[] = { "--root", root_dir, "--direct", NULL };
	const char *const small_reads[] = { "--root", root_dir, "--direct", "--read-size", "8192",
					    NULL };
	char *want = pattern(FILE_SIZE, 7), *small = pattern(SMALL_SIZE, 8), buf[4096];
	static char range_buf[32768];
	struct response r;
	struct server s;

	start_server(&s, _i, extra);
	check_file(s.port, "/file.bin", want, FILE_SIZE);
	check_file(s.port, "/small.bin", small, SMALL_SIZE);
	check_file(s.port, "/file.bin", want, FILE_SIZE);
	r = get_with(s.port, "GET", "/file.bin", "Range: bytes=4000-4999\r\n", buf, sizeof(buf));
	ck_assert_int_eq(r.status, 206);
	ck_assert_int_eq(r.content_length, 1000);
	ck_assert(!memcmp(r.body, want + 4000, 1000));
	r = get_with(s.port, "GET", "/file.bin", "Range: bytes=-77\r\n", buf, sizeof(buf));
	ck_assert_int_eq(r.status, 206);
	ck_assert(!memcmp(r.body, want + FILE_SIZE - 77, 77));
	stop_server(&s);
	/* (ASYNC sends the sockets there too.) */
	if (targets[_i].backend == AFIO_BACKEND_LIBAIO && targets[_i].mode != AFIO_MODE_ASYNC)
		ck_assert_uint_eq(stat_of(&s, "fallbacks"), stat_of(&s, "path_ops"));

	/* Two blocks a read: a body in many reads, and a range whose first
	   block starts before it and whose last one ends past it. */
	start_server(&s, _i, small_reads);
	check_file(s.port, "/file.bin", want, FILE_SIZE);
	r = get_with(s.port, "GET", "/file.bin", "Range: bytes=5000-30000\r\n", range_buf,
		     sizeof(range_buf));
	ck_assert_int_eq(r.status, 206);
	ck_assert_int_eq(r.content_length, 25001);
	ck_assert(!memcmp(r.body, want + 5000, 25001));
	stop_server(&s);
	free(want);
	free(small);
}
END_TEST

START_TEST(httpd_head_has_no_body)
{
	static const char req[] = "HEAD /file.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	char buf[4096];
	struct response r;
	struct server s;
	size_t len;

	start_httpd(&s, _i);
	len = exchange(s.port, req, sizeof(req) - 1, buf, sizeof(buf));
	r = parse_response(buf, len, false);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(r.content_length, FILE_SIZE);
	ck_assert_uint_eq(r.total, len);
	stop_server(&s);
}
END_TEST

static const struct {
	const char *request;
	int status;
} bad_requests[] = {
	{ "GET /missing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 404 },
	{ "POST /file.bin HTTP/1.1\r\nHost: x\r\n\r\n", 405 },
	{ "DELETE /file.bin HTTP/1.1\r\nHost: x\r\n\r\n", 405 },
	{ "BREW /file.bin HTTP/1.1\r\nHost: x\r\n\r\n", 501 },
	{ "GET file.bin HTTP/1.1\r\nHost: x\r\n\r\n", 400 },
	{ "GET /file.bin HTTP/9.9\r\nHost: x\r\n\r\n", 505 },
	{ "GET /file.bin HTTP/1.1\r\n\r\n", 400 },	/* no Host */
	{ "GET /file.bin HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400 },
	{ "GET /file.bin HTTP/1.1\r\nHost : x\r\n\r\n", 400 },
	{ "GET /file.bin HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400 },
	{ "GET /file.bin HTTP/1.1\r\nHost: x\rY: z\r\n\r\n", 400 },
	{ "GET  /file.bin HTTP/1.1\r\nHost: x\r\n\r\n", 400 },
	{ "GET /file.bin HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", 411 },
	{ "GET /file.bin HTTP/1.1\r\nHost: x\r\nContent-Length: 1, 2\r\n\r\n", 400 },
	{ "GET /file.bin HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n", 413 },
	{ "nonsense\r\n\r\n", 400 },
	{ "GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n", 400 },
	{ "GET /%00 HTTP/1.1\r\nHost: x\r\n\r\n", 400 },
	{ "GET /sub/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 404 },	/* no index */
	{ "GET /sub HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 301 },
	{ "GET /missing HTTP/1.0\r\n\r\n", 404 },	/* 1.0: closes by default */
};

START_TEST(httpd_answers_errors)
{
	struct server s;

	start_httpd(&s, _i);
	for (size_t i = 0; i < sizeof(bad_requests) / sizeof(bad_requests[0]); i++) {
		const char *req = bad_requests[i].request;
		int status = status_for(s.port, req, strlen(req));

		ck_assert_msg(status == bad_requests[i].status, "%s: \"%s\" got %d",
			      targets[_i].name, req, status);
	}
	stop_server(&s);
}
END_TEST

/* A directory's redirect stays on the host: "//sub" is the root's "sub"
   to the lookup, and its Location is "/sub/", never "//sub/" (a browser
   reads that as the host "sub"). */
START_TEST(httpd_redirects_within_host)
{
	static const char *const paths[] = { "/sub", "//sub", "///sub" };
	char buf[4096], req[256], location[64];
	struct response r;
	struct server s;

	start_httpd(&s, _i);
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
			 paths[i]);
		r = parse_response(buf, exchange(s.port, req, strlen(req), buf, sizeof(buf)), true);
		ck_assert_int_eq(r.status, 301);
		header_text(&r, "\r\nLocation:", location, sizeof(location));
		ck_assert_msg(!strcmp(location, "/sub/"), "%s: %s redirected to \"%s\"",
			      targets[_i].name, paths[i], location);
	}
	stop_server(&s);
}
END_TEST

/* A NUL in the request line once crashed the server. */
START_TEST(httpd_refuses_nul_byte)
{
	static const char req[] = "GET /\0 HTTP/1.1\r\nHost: x\r\n\r\n";
	static const char hdr[] = "GET / HTTP/1.1\r\nHost: x\r\nX: a\0b\r\n\r\n";
	struct server s;

	start_httpd(&s, _i);
	ck_assert_int_eq(status_for(s.port, req, sizeof(req) - 1), 400);
	ck_assert_int_eq(status_for(s.port, hdr, sizeof(hdr) - 1), 400);
	check_file(s.port, "/", "<p>hi</p>\n", 10);
	stop_server(&s);
}
END_TEST

/* A 100 KB head: 431, all of it read (no reset loses the answer), and the
   server goes on. */
START_TEST(httpd_refuses_huge_head)
{
	size_t size = 100 * 1000;
	char *req = malloc(size);
	struct server s;
	size_t n;

	ck_assert_ptr_nonnull(req);
	n = (size_t)snprintf(req, size, "GET / HTTP/1.1\r\nHost: x\r\n");
	for (; n + 40 < size; n += 20)
		memcpy(req + n, "X-Padding: 12345678\r\n", 20);
	memcpy(req + n, "\r\n\r\n", 4);
	start_httpd(&s, _i);
	ck_assert_int_eq(status_for(s.port, req, n + 4), 431);
	/* One long line: the request line itself is too long. */
	memset(req, 'a', size);
	memcpy(req, "GET /", 5);
	ck_assert_int_eq(status_for(s.port, req, size), 414);
	check_file(s.port, "/", "<p>hi</p>\n", 10);
	stop_server(&s);
	free(req);
}
END_TEST

/* A head longer than a connection's own buffer, within HEAD_MAX, moves
   into a response buffer, which holds one whatever --read-size is. */
START_TEST(httpd_long_head_small_reads)
{
	const char *const extra[] = { "--root", root_dir, "--read-size", "4096", NULL };
	static const char pad[] = "X-Padding: 123456789\r\n";
	size_t size = 15 * 1000, n;
	char *req = malloc(size + 64);
	struct server s;

	ck_assert_ptr_nonnull(req);
	n = (size_t)sprintf(req, "GET /small.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
	for (; n < size; n += sizeof(pad) - 1)
		memcpy(req + n, pad, sizeof(pad) - 1);
	memcpy(req + n, "\r\n", 2);
	start_server(&s, _i, extra);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(status_for(s.port, req, n + 2), 200);
	check_file(s.port, "/", "<p>hi</p>\n", 10);
	stop_server(&s);
	free(req);
}
END_TEST

START_TEST(httpd_stays_below_root)
{
	static const char *const escapes[] = {
		"/../secret.txt", "/%2e%2e/secret.txt", "/x/../../secret.txt",
		"/..", "//../secret.txt", "/link.txt", "/abs.txt/secret.txt",
		"/%2E%2E%2fsecret.txt",
	};
	char buf[4096];
	struct response r;
	struct server s;

	start_httpd(&s, _i);
	for (size_t i = 0; i < sizeof(escapes) / sizeof(escapes[0]); i++) {
		r = get(s.port, "GET", escapes[i], buf, sizeof(buf));
		ck_assert_msg(r.status == 403 || r.status == 404, "%s: %s got %d",
			      targets[_i].name, escapes[i], r.status);
		ck_assert(!memmem(buf, r.total, SECRET, strlen(SECRET)));
	}
	stop_server(&s);
}
END_TEST

/* Two requests in one write: the second must not be lost or mixed up. */
START_TEST(httpd_keeps_connection_alive)
{
	static const char req[] = "GET /file.bin HTTP/1.1\r\nHost: x\r\n\r\n"
				  "\r\n"	/* an empty line between is allowed */
				  "GET /file.bin HTTP/1.1\nHost: x\nConnection: close\n\n";
	char *want = pattern(FILE_SIZE, 7), *buf = malloc(3 * FILE_SIZE);
	struct response first, second;
	struct server s;
	size_t len;

	ck_assert_ptr_nonnull(buf);
	start_httpd(&s, _i);
	len = exchange(s.port, req, sizeof(req) - 1, buf, 3 * FILE_SIZE);
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

/* 1000 requests in one write, answered in order, each whole. */
START_TEST(httpd_pipelines_1000)
{
	enum { N = 1000 };
	static const char one[] = "GET /small.bin HTTP/1.1\r\nHost: x\r\n\r\n";
	static const char last[] = "GET /small.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	size_t req_len = (N - 1) * (sizeof(one) - 1) + sizeof(last) - 1, cap = N * 2048;
	char *req = malloc(req_len), *buf = malloc(cap), *want = pattern(SMALL_SIZE, 8);
	struct response r;
	struct server s;
	size_t len, off = 0;

	ck_assert_ptr_nonnull(req);
	ck_assert_ptr_nonnull(buf);
	for (int i = 0; i < N - 1; i++)
		memcpy(req + i * (sizeof(one) - 1), one, sizeof(one) - 1);
	memcpy(req + (N - 1) * (sizeof(one) - 1), last, sizeof(last) - 1);
	start_httpd(&s, _i);
	len = exchange(s.port, req, req_len, buf, cap);
	for (int i = 0; i < N; i++) {
		r = parse_response(buf + off, len - off, true);
		ck_assert_msg(r.status == 200, "response %d: %d", i, r.status);
		ck_assert_int_eq(r.content_length, SMALL_SIZE);
		ck_assert(!memcmp(r.body, want, SMALL_SIZE));
		off += r.total;
	}
	ck_assert_uint_eq(off, len);
	stop_server(&s);
	free(req);
	free(buf);
	free(want);
}
END_TEST

/* A GET with a body: the body is dropped, even when it reads like a request. */
START_TEST(httpd_drops_request_body)
{
	static const char body[] = "GET /missing HTTP/1.1\r\nHost: x\r\n\r\n";
	static const char next[] = "GET /empty.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	char buf[8192], req[512];
	struct response first, second;
	struct server s;
	size_t len;

	snprintf(req, sizeof(req), "GET /small.bin HTTP/1.1\r\nHost: x\r\nContent-Length: %zu"
		 "\r\n\r\n%s%s", sizeof(body) - 1, body, next);
	start_httpd(&s, _i);
	len = exchange(s.port, req, strlen(req), buf, sizeof(buf));
	first = parse_response(buf, len, true);
	ck_assert_int_eq(first.status, 200);
	second = parse_response(buf + first.total, len - first.total, true);
	ck_assert_int_eq(second.status, 200);
	ck_assert_int_eq(second.content_length, 0);
	ck_assert_uint_eq(first.total + second.total, len);
	stop_server(&s);
}
END_TEST

/* A response that ends the connection (Connection: close) over a body the
   server has not read: all of it arrives, then the end of the stream, not
   a reset that destroys what the client had yet to read. */
START_TEST(httpd_close_over_unread_body)
{
	enum { BODY = 64 * 1024 };
	size_t cap = FILE_SIZE + 4096, len;
	char *buf = malloc(cap), *req = malloc(BODY + 256);
	struct response r;
	struct server s;
	int fd, n;

	ck_assert_ptr_nonnull(buf);
	ck_assert_ptr_nonnull(req);
	n = sprintf(req, "GET /file.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
		    "Content-Length: %d\r\n\r\n", BODY);
	memset(req + n, 'b', BODY);
	start_httpd(&s, _i);
	fd = connect_to(s.port);
	send_all(fd, req, (size_t)n + BODY);
	len = recv_to_eof(fd, buf, cap);
	close(fd);
	ck_assert_msg(len > FILE_SIZE, "%s: %zu bytes before the end of the stream, not a whole "
		      "response of %d", s.target->name, len, FILE_SIZE);
	r = parse_response(buf, len, true);
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(r.total, len);
	stop_server(&s);
	free(buf);
	free(req);
}
END_TEST

START_TEST(httpd_ranges_and_validators)
{
	char *want = pattern(FILE_SIZE, 7), *buf = malloc(2 * FILE_SIZE), lm[64], hdr[160];
	char etag[64], cr[64];
	struct response r;
	struct server s;

	ck_assert_ptr_nonnull(buf);
	start_httpd(&s, _i);
	r = get(s.port, "GET", "/file.bin", buf, 2 * FILE_SIZE);
	header_text(&r, "\r\nLast-Modified:", lm, sizeof(lm));
	header_text(&r, "\r\nETag:", etag, sizeof(etag));
	ck_assert_str_ne(lm, "");
	ck_assert(strstr(r.head, "\r\nDate: "));

	r = get_with(s.port, "GET", "/file.bin", "Range: bytes=10-19\r\n", buf, 2 * FILE_SIZE);
	ck_assert_int_eq(r.status, 206);
	ck_assert_int_eq(r.content_length, 10);
	ck_assert(!memcmp(r.body, want + 10, 10));
	header_text(&r, "\r\nContent-Range:", cr, sizeof(cr));
	snprintf(hdr, sizeof(hdr), "bytes 10-19/%d", FILE_SIZE);
	ck_assert_str_eq(cr, hdr);

	r = get_with(s.port, "GET", "/file.bin", "Range: bytes=200000-\r\n", buf, 2 * FILE_SIZE);
	ck_assert_int_eq(r.status, 206);
	ck_assert_int_eq(r.content_length, FILE_SIZE - 200000);
	ck_assert(!memcmp(r.body, want + 200000, FILE_SIZE - 200000));

	r = get_with(s.port, "GET", "/file.bin", "Range: bytes=-5\r\n", buf, 2 * FILE_SIZE);
	ck_assert_int_eq(r.status, 206);
	ck_assert(!memcmp(r.body, want + FILE_SIZE - 5, 5));

	r = get_with(s.port, "GET", "/file.bin", "Range: bytes=99999999-\r\n", buf, 2 * FILE_SIZE);
	ck_assert_int_eq(r.status, 416);
	header_text(&r, "\r\nContent-Range:", cr, sizeof(cr));
	snprintf(hdr, sizeof(hdr), "bytes */%d", FILE_SIZE);
	ck_assert_str_eq(cr, hdr);

	/* Several ranges: the whole file (a server may ignore Range). */
	r = get_with(s.port, "GET", "/file.bin", "Range: bytes=0-1,5-6\r\n", buf, 2 * FILE_SIZE);
	ck_assert_int_eq(r.status, 200);

	snprintf(hdr, sizeof(hdr), "If-Modified-Since: %s\r\n", lm);
	r = get_with(s.port, "GET", "/file.bin", hdr, buf, 2 * FILE_SIZE);
	ck_assert_int_eq(r.status, 304);
	ck_assert_uint_eq(r.body_len, 0);
	r = get_with(s.port, "GET", "/file.bin",
		     "If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n", buf, 2 * FILE_SIZE);
	ck_assert_int_eq(r.status, 200);
	r = get_with(s.port, "HEAD", "/file.bin", hdr, buf, 2 * FILE_SIZE);
	ck_assert_int_eq(r.status, 304);

	/* If-Range with the current validator keeps the range, any other not. */
	snprintf(hdr, sizeof(hdr), "Range: bytes=0-0\r\nIf-Range: %s\r\n", etag);
	r = get_with(s.port, "GET", "/file.bin", hdr, buf, 2 * FILE_SIZE);
	ck_assert_int_eq(r.status, 206);
	r = get_with(s.port, "GET", "/file.bin", "Range: bytes=0-0\r\nIf-Range: \"x\"\r\n",
		     buf, 2 * FILE_SIZE);
	ck_assert_int_eq(r.status, 200);
	stop_server(&s);
	free(want);
	free(buf);
}
END_TEST

/* The cache looks again after a second: a changed file is served anew. */
START_TEST(httpd_sees_changed_file)
{
	char buf[4096];
	struct response r;
	struct server s;
	int tries = 0;

	write_file(root_dir, "changing.txt", "old", 3);
	start_httpd(&s, _i);
	r = get(s.port, "GET", "/changing.txt", buf, sizeof(buf));
	ck_assert_int_eq(r.content_length, 3);
	write_file(root_dir, "changing.txt", "newer", 5);
	do {
		ck_assert_int_lt(tries++, HANG_GUARD_MS / 50);
		usleep(50000);
		r = get(s.port, "GET", "/changing.txt", buf, sizeof(buf));
	} while (r.content_length == 3);
	ck_assert_int_eq(r.content_length, 5);
	ck_assert(!memcmp(r.body, "newer", 5));
	stop_server(&s);
	ck_assert_uint_ge(stat_of(&s, "cache_changed"), 1);
}
END_TEST

/* ---- many clients, slow clients ---- */

static void set_fd_limit(rlim_t n)
{
	struct rlimit rl;

	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_max < n)
		n = rl.rlim_max;
	rl.rlim_cur = n;
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
}

/* 300 clients send half a head and stop; one that sends a whole request
   is answered at once all the same; the 300 are closed by the server
   after --timeout. */
START_TEST(httpd_times_out_slow_heads)
{
	enum { SLOW = 300 };
	const char *const extra[] = { "--root", root_dir, "--timeout", "1", NULL };
	static const char half[] = "GET / HTTP/1.1\r\nHost: x\r\n";
	int fds[SLOW];
	char byte;
	struct server s;

	set_fd_limit(SLOW + 64);
	start_server(&s, _i, extra);
	for (int i = 0; i < SLOW; i++) {
		fds[i] = connect_to(s.port);
		send_all(fds[i], half, sizeof(half) - 1);
	}
	check_file(s.port, "/", "<p>hi</p>\n", 10);
	for (int i = 0; i < SLOW; i++) {
		wait_for(fds[i], POLLIN);
		ck_assert_int_le(recv(fds[i], &byte, 1, 0), 0);
		close(fds[i]);
	}
	stop_server(&s);
	ck_assert_uint_ge(stat_of(&s, "timeouts"), SLOW);
}
END_TEST

/* An idle keep-alive connection is closed after --timeout too. */
START_TEST(httpd_times_out_idle_keepalive)
{
	const char *const extra[] = { "--root", root_dir, "--timeout", "1", NULL };
	static const char req[] = "GET /empty.txt HTTP/1.1\r\nHost: x\r\n\r\n";
	char buf[4096];
	struct server s;
	size_t len = 0;
	ssize_t n;
	int fd;

	start_server(&s, _i, extra);
	fd = connect_to(s.port);
	send_all(fd, req, sizeof(req) - 1);
	/* The response, then the close. */
	do {
		wait_for(fd, POLLIN);
		n = recv(fd, buf + len, sizeof(buf) - len, 0);
		len += n > 0 ? (size_t)n : 0;
	} while (n > 0);
	ck_assert_int_eq(parse_response(buf, len, true).status, 200);
	close(fd);
	stop_server(&s);
}
END_TEST

/* ASYNC on the pool holds a worker in each waiting receive: the server
   takes no more connections than it has workers (1024). */
static bool pool_waits_per_socket(const struct target *t)
{
	return t->mode == AFIO_MODE_ASYNC && t->backend != AFIO_BACKEND_IO_URING;
}

/* 5000 connections at once, each with a request answered. */
START_TEST(httpd_serves_5000_connections)
{
	const int N = pool_waits_per_socket(&targets[_i]) ? 900 : 5000;
	static const char req[] = "GET /small.bin HTTP/1.1\r\nHost: x\r\n\r\n";
	int *fds = malloc(N * sizeof(*fds));
	char *buf = malloc(4096), *want = pattern(SMALL_SIZE, 8);
	struct response r;
	struct server s;

	ck_assert_ptr_nonnull(fds);
	ck_assert_ptr_nonnull(buf);
	set_fd_limit(N + 64);
	start_httpd(&s, _i);
	for (int i = 0; i < N; i++)
		fds[i] = connect_to(s.port);
	for (int i = 0; i < N; i++)
		send_all(fds[i], req, sizeof(req) - 1);
	for (int i = 0; i < N; i++) {
		size_t len = 0;

		/* Keep-alive: read exactly one response. */
		do {
			ssize_t n;

			wait_for(fds[i], POLLIN);
			n = recv(fds[i], buf + len, 4096 - len, 0);
			ck_assert_int_gt(n, 0);
			len += (size_t)n;
		} while (!memmem(buf, len, "\r\n\r\n", 4) ||
			 len < (size_t)(strstr(buf, "\r\n\r\n") - buf) + 4 + SMALL_SIZE);
		r = parse_response(buf, len, true);
		ck_assert_int_eq(r.status, 200);
		ck_assert(!memcmp(r.body, want, SMALL_SIZE));
	}
	for (int i = 0; i < N; i++)
		close(fds[i]);
	stop_server(&s);
	free(fds);
	free(buf);
	free(want);
}
END_TEST

/* Out of descriptors: accept (single accepts, or one multishot) must
   neither spin nor lose the listener; once clients go, new ones are
   served. */
static void survive_fd_exhaustion(int target, const char *accept)
{
	enum { N = 150 };
	/* ASYNC on the pool: a descriptor for each pool worker, as many
	   workers as connections, so fewer connections and more room. */
	bool pool = pool_waits_per_socket(&targets[target]);
	/* No idle connection times out while the test runs: a client left
	   unanswered must show as a hang, not be rescued by the timeout
	   (on threads, idle receives holding every pool worker once did). */
	const char *const extra[] = { "--root", root_dir, "--max-conn", pool ? "60" : "1000",
				      "--timeout", "600", "--accept", accept, NULL };
	int fds[N];
	struct server s;

	start_with_limit(&s, target, pool ? 120 : 48, extra);
	for (int i = 0; i < N; i++)
		fds[i] = connect_to(s.port);
	/* Each is answered, or closed at once for want of a descriptor
	   (with ASYNC on the pool, some wait past --max-conn). */
	for (int i = 0; i < N && !pool; i++) {
		static const char req[] = "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
		char byte;

		send(fds[i], req, sizeof(req) - 1, MSG_NOSIGNAL);
		wait_for(fds[i], POLLIN);
		(void)!recv(fds[i], &byte, 1, 0);
	}
	for (int i = 0; i < N; i++)
		close(fds[i]);
	/* Until the server has seen those go, a newcomer may still find it
	   out of descriptors and be closed at once: it tries again. */
	for (int tries = 0;; tries++) {
		static const char req[] = "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
		char buf[4096];
		size_t len = exchange(s.port, req, sizeof(req) - 1, buf, sizeof(buf));

		if (len) {
			ck_assert_int_eq(parse_response(buf, len, true).status, 200);
			break;
		}
		ck_assert_int_lt(tries, HANG_GUARD_MS / 50);
		usleep(50000);
	}
	check_file(s.port, "/", "<p>hi</p>\n", 10);
	stop_server(&s);
	if (!pool)
		ck_assert_uint_ge(stat_of(&s, "accept_errors"), 1);
}

START_TEST(httpd_survives_fd_exhaustion)
{
	survive_fd_exhaustion(_i, "multishot");
}
END_TEST

START_TEST(httpd_survives_fd_exhaustion_single_accepts)
{
	survive_fd_exhaustion(_i, "single");
}
END_TEST

/* More files than descriptors: the open-file cache gives its idle ones
   up for the next file, and no request gets 503 for want of one. */
START_TEST(httpd_gives_cached_files_up)
{
	enum { FILES = 150 };
	/* ASYNC on the pool: a thread, and its descriptor, per connection. */
	bool pool = pool_waits_per_socket(&targets[_i]);
	const char *const extra[] = { "--root", root_dir, "--max-conn", pool ? "60" : "1000", NULL };
	char path[PATH_MAX * 2], name[32], body[32];
	struct server s;

	for (int i = 0; i < FILES; i++) {
		snprintf(name, sizeof(name), "many-%d.txt", i);
		snprintf(body, sizeof(body), "file %d\n", i);
		write_file(root_dir, name, body, strlen(body));
	}
	start_with_limit(&s, _i, pool ? 120 : 48, extra);
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < FILES; i++) {
			snprintf(name, sizeof(name), "/many-%d.txt", i);
			snprintf(body, sizeof(body), "file %d\n", i);
			check_file(s.port, name, body, strlen(body));
		}
	}
	stop_server(&s);
	for (int i = 0; i < FILES; i++) {
		snprintf(path, sizeof(path), "%s/many-%d.txt", root_dir, i);
		unlink(path);
	}
}
END_TEST

/* SIGTERM in the middle of a response: the response is finished, then the
   connection closed, then the server exits 0. */
START_TEST(httpd_finishes_response_on_sigterm)
{
	static const char req[] = "GET /file.bin HTTP/1.1\r\nHost: x\r\n\r\n";
	char *want = pattern(FILE_SIZE, 7), *buf = malloc(2 * FILE_SIZE);
	int rcvbuf = 4096, fd;
	struct response r;
	struct server s;
	size_t len;
	ssize_t n;

	ck_assert_ptr_nonnull(buf);
	start_httpd(&s, _i);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)), 0);
	{
		struct sockaddr_in sin = {
			.sin_family = AF_INET, .sin_port = htons(s.port),
			.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
		};

		ck_assert_int_eq(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	}
	send_all(fd, req, sizeof(req) - 1);
	wait_for(fd, POLLIN);
	len = (size_t)recv(fd, buf, 100, 0);
	ck_assert_int_eq(kill(s.pid, SIGTERM), 0);
	do {
		wait_for(fd, POLLIN);
		n = recv(fd, buf + len, 2 * FILE_SIZE - len, 0);
		ck_assert_int_ge(n, 0);
		len += (size_t)n;
	} while (n > 0);
	r = parse_response(buf, len, true);
	ck_assert_int_eq(r.status, 200);
	ck_assert(!memcmp(r.body, want, FILE_SIZE));
	ck_assert_uint_eq(r.total, len);
	close(fd);
	stop_server(&s);
	free(want);
	free(buf);
}
END_TEST

START_TEST(httpd_runs_workers)
{
	/* Each worker's context reserves Linux AIO events for its connections,
	   from fs.aio-max-nr, which every process on the machine shares:
	   what the default --max-conn asks for twice can be refused there. */
	const char *const extra[] = { "--root", root_dir, "--workers", "2",
				      "--max-conn", "1000", NULL };
	char *want = pattern(FILE_SIZE, 7), err[8192];
	struct server s;

	start_server(&s, _i, extra);
	for (int i = 0; i < 8; i++)
		check_file(s.port, "/file.bin", want, FILE_SIZE);
	stop_server(&s);
	server_stderr(&s, err, sizeof(err));
	ck_assert(strstr(err, "worker 1 stats:"));
	free(want);
}
END_TEST

/* ---- which backends, which modes ---- */

/* HTTPD_TEST=name runs that test alone, HTTPD_TARGET=backend/mode on that
   target alone (for debugging). */
#define add_test(tc, t) do {						\
	const char *only = getenv("HTTPD_TEST");			\
									\
	if (!only || !strcmp(only, #t))					\
		tcase_add_loop_test(tc, t, 0, ntargets);		\
} while (0)

static Suite *httpd_suite(void)
{
	Suite *s = suite_create("httpd");
	TCase *tc = tcase_create("httpd");

	tcase_add_checked_fixture(tc, make_site, remove_site);
	add_test(tc, httpd_serves_file_intact);
	add_test(tc, httpd_direct_serves_file_intact);
	add_test(tc, httpd_head_has_no_body);
	add_test(tc, httpd_answers_errors);
	add_test(tc, httpd_refuses_nul_byte);
	add_test(tc, httpd_refuses_huge_head);
	add_test(tc, httpd_redirects_within_host);
	add_test(tc, httpd_long_head_small_reads);
	add_test(tc, httpd_stays_below_root);
	add_test(tc, httpd_keeps_connection_alive);
	add_test(tc, httpd_pipelines_1000);
	add_test(tc, httpd_drops_request_body);
	add_test(tc, httpd_close_over_unread_body);
	add_test(tc, httpd_ranges_and_validators);
	add_test(tc, httpd_sees_changed_file);
	add_test(tc, httpd_times_out_slow_heads);
	add_test(tc, httpd_times_out_idle_keepalive);
	add_test(tc, httpd_serves_5000_connections);
	add_test(tc, httpd_survives_fd_exhaustion);
	add_test(tc, httpd_survives_fd_exhaustion_single_accepts);
	add_test(tc, httpd_gives_cached_files_up);
	add_test(tc, httpd_finishes_response_on_sigterm);
	add_test(tc, httpd_runs_workers);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	SRunner *sr;
	int failed;

	if (argc != 2) {
		fprintf(stderr, "usage: %s AFIO-HTTPD\n", argv[0]);
		return 2;
	}
	httpd_path = argv[1];
	ntargets = find_targets(targets, getenv("HTTPD_TARGET"));
	sr = srunner_create(httpd_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
