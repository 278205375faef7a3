/* SPDX-License-Identifier: MIT */
/*
 * afio-httpd: serves the files below --root over HTTP/1.1 (GET and HEAD),
 * with libasyncfio doing every receive, file read and send.
 *
 * Each connection runs one step at a time, so it always has exactly one
 * request in flight: receive the request head, send the response head,
 * then read a chunk of the file and send it, until the file is done.
 * A reader that falls behind therefore holds back only its own file reads.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "server.h"

#define DEFAULT_PORT	8080
#define MAX_CONN	64
#define REQUEST_MAX	8192		/* request line and headers */
#define HEAD_MAX	512		/* response line and headers */
#define CHUNK_SIZE	(64 * 1024)	/* one file read */

struct httpd;

struct conn {
	struct httpd *httpd;
	int fd;			/* the socket; -1: the slot is free */
	int file_fd;		/* the file being sent, or -1 */
	bool keep_alive;
	bool head_only;		/* HEAD: no body */
	size_t req_len;		/* bytes in req[] */
	size_t req_used;	/* of them, the request being answered */
	uint64_t file_off;
	uint64_t file_size;
	const char *out;	/* what is being sent: into head[] or chunk[] */
	size_t out_len;
	size_t out_sent;
	void (*after_send)(struct conn *c);
	char req[REQUEST_MAX + 1];	/* + 1: room to end the head with a NUL */
	char head[HEAD_MAX];
	char chunk[CHUNK_SIZE];
};

struct httpd {
	struct server srv;
	int root_fd;
	unsigned open_conns;
	bool stopping;		/* callbacks close instead of going on */
	struct conn conns[MAX_CONN];
};

enum status {
	OK = 200,
	BAD_REQUEST = 400,
	FORBIDDEN = 403,
	NOT_FOUND = 404,
	METHOD_NOT_ALLOWED = 405,
	SERVER_ERROR = 500,
};

static const char *reason_phrase(enum status s)
{
	switch (s) {
	case OK:			return "OK";
	case BAD_REQUEST:		return "Bad Request";
	case FORBIDDEN:			return "Forbidden";
	case NOT_FOUND:			return "Not Found";
	case METHOD_NOT_ALLOWED:	return "Method Not Allowed";
	default:			return "Internal Server Error";
	}
}

static const char *content_type(const char *path)
{
	static const struct { const char *ext, *type; } types[] = {
		{ ".html", "text/html; charset=utf-8" },
		{ ".txt", "text/plain; charset=utf-8" },
		{ ".css", "text/css" },
		{ ".js", "text/javascript" },
		{ ".json", "application/json" },
		{ ".png", "image/png" },
		{ ".jpg", "image/jpeg" },
		{ ".svg", "image/svg+xml" },
	};
	const char *dot = strrchr(path, '.');

	for (size_t i = 0; dot && i < sizeof(types) / sizeof(types[0]); i++)
		if (!strcmp(dot, types[i].ext))
			return types[i].type;
	return "application/octet-stream";
}

/* ---- connection life cycle ---- */

static void close_file(struct conn *c)
{
	if (c->file_fd >= 0)
		close(c->file_fd);
	c->file_fd = -1;
}

static void conn_close(struct conn *c)
{
	close_file(c);
	close(c->fd);
	c->fd = -1;
	c->httpd->open_conns--;
}

static void on_sent(void *data, ssize_t res);
static void on_request_data(void *data, ssize_t res);
static void on_file_read(void *data, ssize_t res);
static void read_request(struct conn *c);

static void send_rest(struct conn *c)
{
	if (afio_send(c->httpd->srv.ctx, c->fd, c->out + c->out_sent,
		      c->out_len - c->out_sent, 0, on_sent, c))
		conn_close(c);
}

/* Sends all of buf, then calls then(). */
static void send_all(struct conn *c, const char *buf, size_t len,
		     void (*then)(struct conn *c))
{
	c->out = buf;
	c->out_len = len;
	c->out_sent = 0;
	c->after_send = then;
	send_rest(c);
}

static void on_sent(void *data, ssize_t res)
{
	struct conn *c = data;

	if (res < 0 || c->httpd->stopping) {
		conn_close(c);
		return;
	}
	c->out_sent += (size_t)res;
	if (c->out_sent < c->out_len)
		send_rest(c);
	else
		c->after_send(c);
}

/* The response is out: wait for the next request, or hang up. */
static void finish_response(struct conn *c)
{
	close_file(c);
	if (!c->keep_alive) {
		conn_close(c);
		return;
	}
	/* Keep what a pipelining client already sent after this request. */
	c->req_len -= c->req_used;
	memmove(c->req, c->req + c->req_used, c->req_len);
	c->req_used = 0;
	read_request(c);
}

static void send_next_chunk(struct conn *c)
{
	uint64_t left = c->file_size - c->file_off;
	size_t len = left < CHUNK_SIZE ? (size_t)left : CHUNK_SIZE;

	if (!len) {
		finish_response(c);
		return;
	}
	if (afio_read(c->httpd->srv.ctx, c->file_fd, c->chunk, len, c->file_off,
		      on_file_read, c))
		conn_close(c);
}

static void on_file_read(void *data, ssize_t res)
{
	struct conn *c = data;

	/* The head promised file_size bytes: a failed or short read (the file
	   shrank) can only end the connection, so the client sees the cut. */
	if (res <= 0 || c->httpd->stopping) {
		conn_close(c);
		return;
	}
	c->file_off += (uint64_t)res;
	send_all(c, c->chunk, (size_t)res, send_next_chunk);
}

/* ---- responses ---- */

static void send_error(struct conn *c, enum status s)
{
	const char *allow = s == METHOD_NOT_ALLOWED ? "Allow: GET, HEAD\r\n" : "";
	char body[64];
	int body_len, n;

	/* An error ends the connection: what follows a bad request is suspect. */
	c->keep_alive = false;
	body_len = snprintf(body, sizeof(body), "%d %s\n", s, reason_phrase(s));
	n = snprintf(c->head, sizeof(c->head),
		     "HTTP/1.1 %d %s\r\n%sContent-Type: text/plain\r\n"
		     "Content-Length: %d\r\nConnection: close\r\n\r\n%s",
		     s, reason_phrase(s), allow, body_len, c->head_only ? "" : body);
	send_all(c, c->head, (size_t)n, finish_response);
}

static void send_file(struct conn *c, const char *path)
{
	int n;

	n = snprintf(c->head, sizeof(c->head),
		     "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %llu\r\n"
		     "Connection: %s\r\n\r\n",
		     content_type(path), (unsigned long long)c->file_size,
		     c->keep_alive ? "keep-alive" : "close");
	c->file_off = 0;
	send_all(c, c->head, (size_t)n, c->head_only ? finish_response : send_next_chunk);
}

/* ---- from request target to open file ---- */

static int hex_value(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* Undoes %XX escapes into out (size PATH_MAX); the query is dropped. */
static enum status decode_target(const char *target, char *out, size_t size)
{
	size_t n = 0;

	for (const char *p = target; *p && *p != '?' && *p != '#'; p++) {
		char ch = *p;

		if (ch == '%') {
			int hi = hex_value(p[1]), lo = hi < 0 ? -1 : hex_value(p[2]);

			if (lo < 0)
				return BAD_REQUEST;
			ch = (char)(hi << 4 | lo);
			p += 2;
		}
		/* A NUL would cut the path short of what the client asked. */
		if (!ch || n + 1 >= size)
			return BAD_REQUEST;
		out[n++] = ch;
	}
	out[n] = '\0';
	return OK;
}

/* Rejects any ".." segment: checked after decoding, so %2e%2e counts too. */
static bool climbs_out(const char *path)
{
	for (const char *seg = path; seg; seg = strchr(seg, '/')) {
		seg += *seg == '/';
		if (seg[0] == '.' && seg[1] == '.' && (!seg[2] || seg[2] == '/'))
			return true;
	}
	return false;
}

/*
 * Opens path below root_fd.  RESOLVE_BENEATH also stops symlinks that lead
 * out of the root.  O_NONBLOCK keeps a FIFO from stalling the whole loop
 * in open(); it is cleared again for the file, since some backends would
 * then refuse to wait for the disk.
 */
static int open_below(int root_fd, const char *path)
{
	struct open_how how = {
		.flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};
	int fd;

	fd = (int)syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
	/* Before Linux 5.6 the ".." check above is the only fence. */
	if (fd < 0 && errno == ENOSYS)
		fd = openat(root_fd, path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static enum status status_of_errno(int err)
{
	switch (err) {
	case -ENOENT:
	case -ENOTDIR:
		return NOT_FOUND;
	case -EACCES:
	case -EPERM:
	case -EXDEV:
	case -ELOOP:
		return FORBIDDEN;
	default:
		return SERVER_ERROR;
	}
}

/* Opens the regular file path names and sets file_size. */
static enum status open_file(struct conn *c, const char *path)
{
	struct stat st;
	int fd;

	fd = open_below(c->httpd->root_fd, path);
	if (fd < 0)
		return status_of_errno(fd);
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || fcntl(fd, F_SETFL, 0)) {
		close(fd);
		return NOT_FOUND;
	}
	c->file_fd = fd;
	c->file_size = (uint64_t)st.st_size;
	return OK;
}

/* ---- request parsing ---- */

/* true when the header lines, each ending in "\r\n", ask to close. */
static bool wants_close(const char *headers)
{
	const char *line = headers, *eol;

	while ((eol = strstr(line, "\r\n"))) {
		if (!strncasecmp(line, "Connection:", 11)) {
			const char *word = strcasestr(line + 11, "close");

			return word && word < eol;
		}
		line = eol + 2;
	}
	return false;
}

/*
 * Splits "METHOD TARGET VERSION" (the first line of the NUL-terminated
 * head, modified in place) and sets keep_alive and head_only.
 */
static enum status parse_request_line(struct conn *c, char **target)
{
	char *line = c->req, *eol = strstr(line, "\r\n");
	char *method, *version;

	*eol = '\0';
	method = strsep(&line, " ");
	*target = strsep(&line, " ");
	version = line;
	if (!*method || !*target || !version || strchr(version, ' ') || **target != '/')
		return BAD_REQUEST;
	if (strcmp(version, "HTTP/1.1") && strcmp(version, "HTTP/1.0"))
		return BAD_REQUEST;
	c->head_only = !strcmp(method, "HEAD");
	if (strcmp(method, "GET") && !c->head_only)
		return METHOD_NOT_ALLOWED;
	/* HTTP/1.0 closes unless told otherwise; this server does not bother. */
	c->keep_alive = !strcmp(version, "HTTP/1.1") && !wants_close(eol + 2);
	return OK;
}

static enum status resolve(struct conn *c, char *path, size_t size)
{
	enum status s;
	char *target;
	size_t len;

	s = parse_request_line(c, &target);
	if (s == OK)
		s = decode_target(target, path, size);
	if (s != OK)
		return s;
	if (climbs_out(path))
		return FORBIDDEN;
	len = strlen(path);
	if (path[len - 1] == '/' && len + sizeof("index.html") <= size)
		strcat(path, "index.html");
	/* Relative to the root: "//etc" must not become an absolute path. */
	return open_file(c, path + strspn(path, "/"));
}

static void answer(struct conn *c, size_t head_len)
{
	char path[PATH_MAX];
	enum status s;

	c->req_used = head_len;
	/* End the head with a NUL, keeping its last "\r\n" for header lookups. */
	c->req[head_len - 2] = '\0';
	s = resolve(c, path, sizeof(path));
	if (s == OK)
		send_file(c, path);
	else
		send_error(c, s);
}

/* Answers a complete request head in req[], or receives more of it. */
static void read_request(struct conn *c)
{
	char *end = memmem(c->req, c->req_len, "\r\n\r\n", 4);

	c->head_only = false;
	if (end) {
		answer(c, (size_t)(end - c->req) + 4);
		return;
	}
	if (c->req_len == REQUEST_MAX) {
		send_error(c, BAD_REQUEST);
		return;
	}
	if (afio_recv(c->httpd->srv.ctx, c->fd, c->req + c->req_len,
		      REQUEST_MAX - c->req_len, 0, on_request_data, c))
		conn_close(c);
}

static void on_request_data(void *data, ssize_t res)
{
	struct conn *c = data;

	if (res <= 0 || c->httpd->stopping) {
		conn_close(c);
		return;
	}
	c->req_len += (size_t)res;
	read_request(c);
}

/* ---- the server ---- */

static void accept_conn(struct server *srv, int fd)
{
	struct httpd *httpd = srv->priv;

	for (unsigned i = 0; i < MAX_CONN; i++) {
		struct conn *c = &httpd->conns[i];

		if (c->fd >= 0)
			continue;
		c->fd = fd;
		httpd->open_conns++;
		c->req_len = 0;
		c->req_used = 0;
		read_request(c);
		return;
	}
	/* Full: refusing at once is kinder than leaving the client hanging. */
	close(fd);
}

/* The request of each open connection completes with -ECANCELED (or its
   real result) when afio_destroy() runs, and its callback closes it. */
static void cancel_all(struct httpd *httpd)
{
	httpd->stopping = true;
	for (unsigned i = 0; i < MAX_CONN; i++)
		if (httpd->conns[i].fd >= 0)
			afio_cancel(httpd->srv.ctx, &httpd->conns[i]);
}

static struct httpd *httpd_alloc(const char *root)
{
	struct httpd *httpd = calloc(1, sizeof(*httpd));

	if (!httpd)
		return NULL;
	httpd->root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (httpd->root_fd < 0) {
		perror(root);
		free(httpd);
		return NULL;
	}
	for (unsigned i = 0; i < MAX_CONN; i++) {
		httpd->conns[i].httpd = httpd;
		httpd->conns[i].fd = -1;
		httpd->conns[i].file_fd = -1;
	}
	httpd->srv.on_accept = accept_conn;
	httpd->srv.priv = httpd;
	return httpd;
}

int main(int argc, char **argv)
{
	struct server_extra_option root = {
		.name = "root",
		.help = "  --root DIR     directory to serve (default .)\n",
	};
	struct server_opts opts;
	struct httpd *httpd;
	int ret;

	server_opts_init(&opts, "afio-httpd", DEFAULT_PORT);
	server_parse_args(argc, argv, &opts, &root);
	httpd = httpd_alloc(root.value ? root.value : ".");
	if (!httpd)
		return 1;
	opts.max_conn = MAX_CONN;

	ret = server_start(&httpd->srv, &opts);
	if (!ret)
		ret = server_run(&httpd->srv);
	cancel_all(httpd);
	server_stop(&httpd->srv);

	/* Every request completes exactly once, so none can be left open. */
	if (httpd->open_conns)
		fprintf(stderr, "afio-httpd: %u connections still open\n", httpd->open_conns);
	ret = ret || httpd->open_conns ? 1 : 0;
	close(httpd->root_fd);
	free(httpd);
	return ret;
}
