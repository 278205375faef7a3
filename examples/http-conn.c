/* SPDX-License-Identifier: MIT */
/*
 * One connection of afio-httpd: receive a request head, find the file in
 * the open-file cache, then read and send it through two buffers, the next
 * chunk being read while the last one is sent.  The response head goes in
 * the first buffer right before the file's first bytes, so that head and
 * body leave in one send.  Every step is one libasyncfio request; a
 * connection has at most two in flight (one read, one send) and holds
 * buffers only while a response is under way.
 *
 * A request with a body (GET with Content-Length) has its body received
 * and dropped after the response, so that it is never taken for the next
 * request.  An error that ends the connection, and any other end of it
 * with bytes of the client's still unread, is followed by a lingering
 * close: the write side is shut and what the client still sends is read
 * and dropped for a while, so that its unread bytes do not turn into a
 * reset that destroys the response before the client reads it.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http-server.h"

#define DISCARD_MAX	(1024 * 1024)	/* a longer GET body: 413 */

static void process_input(struct conn *c);
static void pump(struct conn *c);
static void finish_response(struct conn *c);

/* ---- closing ---- */

static void release_response(struct conn *c)
{
	for (int i = 0; i < 2; i++) {
		if (c->out[i].mem)
			pool_give(c->w, c->out[i].mem);
		c->out[i].mem = NULL;
		c->out[i].state = OUT_IDLE;
	}
	if (c->file)
		cache_put(c->file);
	c->file = NULL;
}

static void release_large_in(struct conn *c)
{
	if (c->in == c->inline_buf)
		return;
	pool_give(c->w, c->in);
	c->in = c->inline_buf;
	c->in_cap = IN_SIZE;
}

static void conn_free(struct conn *c)
{
	release_response(c);
	release_large_in(c);
	timer_clear(c);
	close(c->fd);
	c->fd = -1;
	c->state = C_FREE;
	worker_conn_closed(c->w, c);
}

static void conn_close(struct conn *c)
{
	if (!c->ops) {
		conn_free(c);
		return;
	}
	/* What is in flight ends now: a receive with 0, a send with EPIPE. */
	if (!c->closing)
		shutdown(c->fd, SHUT_RDWR);
	c->closing = true;
}

/* Each completion starts here: false when the connection is going away. */
static bool op_done(struct conn *c)
{
	c->ops--;
	if (!c->closing)
		return true;
	if (!c->ops)
		conn_free(c);
	return false;
}

void conn_timed_out(struct conn *c)
{
	c->w->st.timeouts++;
	/* Whatever waits on the socket ends at once; a connection waiting
	   for the cache or a buffer finds out at its next send. */
	shutdown(c->fd, SHUT_RDWR);
}

void conn_stop(struct conn *c)
{
	/* Between requests or in the middle of a head: nothing to finish. */
	if (c->state == C_HEAD || c->state == C_BODY)
		shutdown(c->fd, SHUT_RDWR);
}

/* ---- receiving ---- */

static void on_recv(void *data, ssize_t res);

static bool start_recv(struct conn *c, char *buf, size_t len)
{
	if (afio_recv(c->w->ctx, c->fd, buf, len, 0, on_recv, c)) {
		conn_close(c);
		return false;
	}
	c->ops++;
	return true;
}

/* More of the head, into the room after what is there. */
static void recv_more(struct conn *c)
{
	if (c->in_start) {
		memmove(c->in, c->in + c->in_start, c->in_len - c->in_start);
		c->in_len -= c->in_start;
		c->in_start = 0;
	}
	start_recv(c, c->in + c->in_len, c->in_cap - c->in_len);
}

static void linger_recv(struct conn *c)
{
	start_recv(c, c->inline_buf, IN_SIZE);
}

static void on_recv(void *data, ssize_t res)
{
	struct conn *c = data;

	if (!op_done(c))
		return;
	if (res <= 0) {
		conn_close(c);
		return;
	}
	if (c->state == C_LINGER) {
		linger_recv(c);
		return;
	}
	/* The head's deadline runs from its first byte, not from its last:
	   a client that sends a byte now and then gets no more time. */
	if (c->state == C_HEAD && c->in_len == c->in_start)
		timer_set(c, &c->w->timers[0]);
	c->in_len += (uint32_t)res;
	process_input(c);
}

/* ---- responses ---- */

struct head_buf {
	char *p, *end;
	bool overflow;
};

static void put(struct head_buf *b, const char *s, size_t n)
{
	if ((size_t)(b->end - b->p) < n) {
		b->overflow = true;
		return;
	}
	memcpy(b->p, s, n);
	b->p += n;
}

static void put_str(struct head_buf *b, const char *s)
{
	put(b, s, strlen(s));
}

static void put_u64(struct head_buf *b, uint64_t v)
{
	char tmp[24], *p = tmp + sizeof(tmp);

	do
		*--p = (char)('0' + v % 10);
	while (v /= 10);
	put(b, p, (size_t)(tmp + sizeof(tmp) - p));
}

static void put_status(struct head_buf *b, struct worker *w, int status)
{
	put_str(b, "HTTP/1.1 ");
	put_u64(b, (uint64_t)status);
	put_str(b, " ");
	put_str(b, http_reason(status));
	put_str(b, "\r\nServer: afio-httpd\r\nDate: ");
	put(b, w->date, HTTP_DATE_LEN);
	put_str(b, "\r\n");
}

/*
 * A directory's own URL: the request's path (still encoded) with its
 * leading slashes made one, as the lookup takes them (local_path()), and
 * one at the end.  "//host/" (or "/\\host/", which browsers read alike)
 * would send a browser to another host.
 */
static void put_location(struct head_buf *b, const char *path, size_t len)
{
	size_t skip = 0;

	while (skip < len && path[skip] == '/')
		skip++;
	put_str(b, "Location: /");
	if (skip < len && path[skip] == '\\') {
		put_str(b, "%5C");
		skip++;
	}
	put(b, path + skip, len - skip);
	put_str(b, "/\r\n");
}

static void put_validators(struct head_buf *b, const struct cache_entry *e)
{
	put_str(b, "Last-Modified: ");
	put(b, e->last_modified, HTTP_DATE_LEN);
	put_str(b, "\r\nETag: ");
	put(b, e->etag, e->etag_len);
	put_str(b, "\r\n");
}

static void put_connection(struct head_buf *b, const struct conn *c)
{
	if (!c->keep_alive)
		put_str(b, "Connection: close\r\n");
	else if (c->req.minor == 0)
		put_str(b, "Connection: keep-alive\r\n");
}

/* 200 and 206: the body is content_len bytes of the file from content_first. */
static void put_file_head(struct head_buf *b, const struct conn *c)
{
	const struct cache_entry *e = c->file;

	put_str(b, "Content-Type: ");
	put_str(b, e->content_type);
	put_str(b, "\r\nContent-Length: ");
	put_u64(b, c->content_len);
	put_str(b, "\r\nAccept-Ranges: bytes\r\n");
	if (c->status == 206) {
		put_str(b, "Content-Range: bytes ");
		put_u64(b, c->content_first);
		put_str(b, "-");
		put_u64(b, c->content_first + c->content_len - 1);
		put_str(b, "/");
		put_u64(b, e->size);
		put_str(b, "\r\n");
	}
	put_validators(b, e);
}

/* Everything else: a line of text says what happened. */
static void put_text_head(struct head_buf *b, const struct conn *c, size_t body_len)
{
	if (c->status == 405)
		put_str(b, "Allow: GET, HEAD\r\n");
	if (c->status == 416) {
		put_str(b, "Content-Range: bytes */");
		put_u64(b, c->file->size);
		put_str(b, "\r\n");
	}
	if (c->status == 301)
		put_location(b, c->req.path, c->req.path_len);
	if (c->status == 304) {
		put_validators(b, c->file);
		return;
	}
	put_str(b, "Content-Type: text/plain\r\nContent-Length: ");
	put_u64(b, body_len);
	put_str(b, "\r\n");
}

static size_t build_head(struct conn *c, char *mem)
{
	struct head_buf b = { .p = mem, .end = mem + HEAD_ROOM - 1 };
	bool file_body = c->status == 200 || c->status == 206;
	char text[64];
	int text_len = 0;

	if (!file_body && c->status != 304)
		text_len = snprintf(text, sizeof(text), "%d %s\n", c->status,
				    http_reason(c->status));
	worker_clock(c->w);
	put_status(&b, c->w, c->status);
	if (file_body)
		put_file_head(&b, c);
	else
		put_text_head(&b, c, (size_t)text_len);
	put_connection(&b, c);
	put_str(&b, "\r\n");
	if (text_len && !c->head_only)
		put(&b, text, (size_t)text_len);
	if (b.overflow) {
		/* Only a Location too long for the room can get here. */
		c->status = 500;
		c->keep_alive = false;
		return build_head(c, mem);
	}
	return (size_t)(b.p - mem);
}

static void start_response(struct conn *c, void *buf)
{
	struct out *o = &c->out[0];

	o->mem = buf;
	c->state = C_RESPOND;
	c->read_seq = 0;
	c->send_seq = 0;
	c->head_bytes = (uint32_t)build_head(c, o->mem);
	c->sendfile = c->body_end - c->read_off >= c->w->sendfile_min && !c->w->opts->direct;
	if (c->read_off >= c->body_end || c->sendfile) {
		/* The head is all: it goes from where it was written. */
		o->start = o->mem;
		o->len = c->head_bytes;
		o->seq = c->read_seq++;
		o->state = OUT_READY;
	}
	pump(c);
}

/* Answers with c->status once a buffer is there. */
static void respond(struct conn *c)
{
	void *buf = pool_take(&c->w->pool);

	if (buf) {
		start_response(c, buf);
		return;
	}
	c->state = C_WAIT;
	c->on_buf = start_response;
	pool_wait(&c->w->pool, c);
}

/* An answer that ends the connection, after a lingering close. */
static void respond_and_close(struct conn *c, int status)
{
	c->status = status;
	c->keep_alive = false;
	c->linger = true;
	c->read_off = c->body_end = 0;
	respond(c);
}

static void respond_text(struct conn *c, int status)
{
	c->status = status;
	c->read_off = c->body_end = 0;
	respond(c);
}

/* ---- the file's bytes ---- */

static void on_read(void *data, ssize_t res);
static void on_send(void *data, ssize_t res);

static bool start_read(struct conn *c, struct out *o)
{
	const struct cache_entry *e = c->file;
	uint64_t off = c->read_off, want = c->body_end - off;
	size_t skip = 0, len;
	uint32_t align = e->dio.offset;
	size_t chunk = c->w->opts->read_size;

	if (want > chunk)
		want = chunk;
	len = (size_t)want;
	if (c->w->opts->direct && !e->no_direct && align > 1) {
		/* Whole blocks: from the block the range starts in, to the end
		   of the block it ends in (past the end of file the read is
		   short, and what it brought is trimmed below). */
		skip = (size_t)(off % align);
		if (want > chunk - skip)
			want = chunk - skip;
		len = (skip + (size_t)want + align - 1) / align * align;
	}
	o->skip = skip;
	o->len = (size_t)want;
	if (afio_read(c->w->ctx, e->fd, o->mem + HEAD_ROOM, len, off - skip, on_read, c)) {
		conn_close(c);
		return false;
	}
	o->seq = c->read_seq++;
	o->state = OUT_READING;
	c->reading = true;
	c->ops++;
	return true;
}

static void on_read(void *data, ssize_t res)
{
	struct conn *c = data;
	struct out *o;
	char *body;
	size_t got;

	if (!op_done(c))
		return;
	c->reading = false;
	o = c->out[0].state == OUT_READING ? &c->out[0] : &c->out[1];
	/* The head promised these bytes: a failed read, or a file that
	   shrank under us, can only end the connection short. */
	if (res <= 0 || (size_t)res <= o->skip) {
		conn_close(c);
		return;
	}
	got = (size_t)res - o->skip;
	if (got > o->len)
		got = o->len;
	c->read_off += got;
	body = o->mem + HEAD_ROOM + o->skip;
	if (o->seq == 0) {
		memmove(body - c->head_bytes, o->mem, c->head_bytes);
		o->start = body - c->head_bytes;
		o->len = c->head_bytes + got;
	} else {
		o->start = body;
		o->len = got;
	}
	o->state = OUT_READY;
	pump(c);
}

static bool start_send(struct conn *c, struct out *o)
{
	/* Before a sendfile the head waits for the file's first bytes, so
	   that they leave together. */
	int flags = c->sendfile && o->seq == 0 ? MSG_MORE : 0;

	if (afio_send(c->w->ctx, c->fd, o->start, o->len, flags, on_send, c)) {
		conn_close(c);
		return false;
	}
	o->state = OUT_SENDING;
	c->sending = true;
	c->ops++;
	return true;
}

static void on_send(void *data, ssize_t res)
{
	struct conn *c = data;
	struct out *o;

	if (!op_done(c))
		return;
	c->sending = false;
	o = c->out[0].state == OUT_SENDING ? &c->out[0] : &c->out[1];
	if (res <= 0) {
		conn_close(c);
		return;
	}
	/* Progress: a stalled send is one that makes none for --timeout. */
	timer_set(c, &c->w->timers[0]);
	o->start += res;
	o->len -= (size_t)res;
	if (o->len) {
		start_send(c, o);
		return;
	}
	o->state = OUT_IDLE;
	c->send_seq++;
	pump(c);
}

static void on_sendfile(void *data, ssize_t res)
{
	struct conn *c = data;

	if (!op_done(c))
		return;
	c->sending = false;
	if (res <= 0) {
		conn_close(c);
		return;
	}
	timer_set(c, &c->w->timers[0]);
	/*
	 * Short: the socket buffer is full.  The rest goes through the
	 * buffers, whose send waits for room in the kernel; another sendfile
	 * would find no room at once and, on io_uring, take the long way of
	 * two splices in the kernel's workers, which costs more than a send
	 * that waits for room.
	 */
	if ((uint64_t)res < c->body_end - c->read_off)
		c->sendfile = false;
	c->read_off += (uint64_t)res;
	pump(c);
}

/* The head, then the file from the page cache straight to the socket. */
static void pump_sendfile(struct conn *c)
{
	uint64_t left = c->body_end - c->read_off;

	if (c->sending)
		return;
	if (c->send_seq == 0) {
		start_send(c, &c->out[0]);
		return;
	}
	if (!left) {
		finish_response(c);
		return;
	}
	if (afio_sendfile(c->w->ctx, c->fd, c->file->fd, c->read_off, (size_t)left,
			  on_sendfile, c)) {
		conn_close(c);
		return;
	}
	c->sending = true;
	c->ops++;
}

/* A buffer to read the next chunk into: an idle one, or a second one
   from the pool when it has one to spare (else the one buffer serves). */
static struct out *out_for_read(struct conn *c)
{
	for (int i = 0; i < 2; i++)
		if (c->out[i].mem && c->out[i].state == OUT_IDLE)
			return &c->out[i];
	for (int i = 0; i < 2; i++) {
		if (!c->out[i].mem) {
			c->out[i].mem = pool_take(&c->w->pool);
			return c->out[i].mem ? &c->out[i] : NULL;
		}
	}
	return NULL;
}

static void pump(struct conn *c)
{
	struct out *o;

	if (c->sendfile) {
		pump_sendfile(c);
		return;
	}
	if (!c->sending) {
		for (int i = 0; i < 2; i++) {
			o = &c->out[i];
			if (o->state == OUT_READY && o->seq == c->send_seq) {
				if (!start_send(c, o))
					return;
				break;
			}
		}
	}
	if (!c->reading && c->read_off < c->body_end && (o = out_for_read(c)))
		if (!start_read(c, o))
			return;
	if (!c->sending && !c->reading && c->send_seq == c->read_seq &&
	    c->read_off >= c->body_end)
		finish_response(c);
}

/* ---- after a response ---- */

static void linger(struct conn *c)
{
	release_large_in(c);
	shutdown(c->fd, SHUT_WR);
	c->state = C_LINGER;
	timer_set(c, &c->w->timers[1]);
	linger_recv(c);
}

/* Bytes the client sent that were not read: a body not dropped yet, or
   requests after this one (RFC 9112, 9.6: the close lingers over them). */
static bool input_pending(const struct conn *c)
{
	int n = 0;

	if (c->discard || c->in_start < c->in_len)
		return true;
	return ioctl(c->fd, FIONREAD, &n) == 0 && n > 0;
}

static void finish_response(struct conn *c)
{
	bool ends = !c->keep_alive || c->w->stopping;

	release_response(c);
	c->in_start += (uint32_t)c->head_len;
	c->head_len = 0;
	if (c->linger || (ends && input_pending(c))) {
		linger(c);
		return;
	}
	if (ends) {
		conn_close(c);
		return;
	}
	c->state = C_HEAD;
	if (c->in_start == c->in_len) {
		c->in_start = c->in_len = 0;
		release_large_in(c);
	}
	/* Keep-alive: idle for --timeout at most. */
	timer_set(c, &c->w->timers[0]);
	process_input(c);
}

/* ---- from request to file ---- */

static bool not_modified(const struct conn *c, const struct cache_entry *e)
{
	return c->req.if_modified_since >= 0 && e->mtime <= c->req.if_modified_since;
}

/* If-Range: the range holds only for the version it names. */
static bool range_applies(const struct conn *c, const struct cache_entry *e)
{
	const struct http_request *r = &c->req;

	if (!r->if_range)
		return true;
	if (r->if_range_len == e->etag_len && !memcmp(r->if_range, e->etag, e->etag_len))
		return true;
	return r->if_range_len == HTTP_DATE_LEN &&
	       !memcmp(r->if_range, e->last_modified, HTTP_DATE_LEN);
}

static void choose_status(struct conn *c, const struct cache_entry *e)
{
	uint64_t first = 0, last = 0;

	c->status = 200;
	c->read_off = 0;
	c->body_end = e->size;
	if (not_modified(c, e)) {
		c->status = 304;
	} else if (c->req.range && c->req.method == HTTP_GET && range_applies(c, e)) {
		switch (http_parse_range(c->req.range, c->req.range_len, e->size, &first, &last)) {
		case HTTP_RANGE_OK:
			c->status = 206;
			c->read_off = first;
			c->body_end = last + 1;
			break;
		case HTTP_RANGE_UNSATISFIABLE:
			c->status = 416;
			break;
		case HTTP_RANGE_NONE:
			break;
		}
	}
	c->content_first = c->read_off;
	c->content_len = c->body_end - c->read_off;
	/* HEAD: the head says what a GET would get; no bytes follow it. */
	if (c->status >= 300 || c->head_only)
		c->read_off = c->body_end = 0;
}

static void file_ready(struct conn *c, struct cache_entry *e)
{
	c->file = e;
	if (e->is_dir) {
		/* "/dir" is a directory: its index is at "/dir/". */
		c->status = c->req.path[c->req.path_len - 1] == '/' ? 404 : 301;
		c->read_off = c->body_end = 0;
		respond(c);
		return;
	}
	choose_status(c, e);
	respond(c);
}

static void on_cache_ready(struct cache_waiter *wt, struct cache_entry *e, int status)
{
	struct conn *c = container_of(wt, struct conn, waiter);

	if (e)
		file_ready(c, e);
	else
		respond_text(c, status);
}

/* The decoded path relative to the root, with "index.html" for a
   directory's "/": 0 or the status to answer. */
static int local_path(const struct http_request *r, char *out, size_t size, size_t *len)
{
	static const char index_name[] = "index.html";
	char *rel;
	size_t n;
	int ret;

	ret = http_decode_path(r->path, r->path_len, out, size - sizeof(index_name));
	if (ret)
		return ret;
	/* Relative to the root: "//etc" is not an absolute path. */
	rel = out + strspn(out, "/");
	n = strlen(rel);
	memmove(out, rel, n + 1);
	if (!n || out[n - 1] == '/') {
		memcpy(out + n, index_name, sizeof(index_name));
		n += sizeof(index_name) - 1;
	}
	*len = n;
	return 0;
}

static void handle_request(struct conn *c)
{
	struct http_request *r = &c->req;
	char path[CACHE_PATH_MAX + 16];
	struct cache_entry *e;
	size_t len;
	int ret;

	c->w->st.requests++;
	c->head_only = false;
	c->keep_alive = false;
	c->linger = false;
	ret = http_parse_head(c->in + c->in_start, c->head_len, r);
	if (ret) {
		respond_and_close(c, ret);
		return;
	}
	c->head_only = r->method == HTTP_HEAD;
	c->keep_alive = r->keep_alive && !c->w->stopping;
	if (r->method == HTTP_OTHER || r->method == HTTP_UNKNOWN) {
		respond_and_close(c, r->method == HTTP_OTHER ? 405 : 501);
		return;
	}
	if (r->content_length > DISCARD_MAX) {
		respond_and_close(c, 413);
		return;
	}
	c->discard = r->content_length;
	ret = local_path(r, path, sizeof(path), &len);
	if (ret) {
		if (ret == 403)
			respond_text(c, ret);
		else
			respond_and_close(c, ret);
		return;
	}
	c->state = C_WAIT;
	ret = cache_get(&c->w->cache, path, len, &c->waiter, &e);
	if (ret == 0)
		file_ready(c, e);
	else if (ret != 1)
		respond_text(c, ret);
}

/* ---- between requests ---- */

/* The body of the last request goes; false while more of it is to come. */
static bool drop_body(struct conn *c)
{
	uint64_t avail = c->in_len - c->in_start;
	uint64_t n = avail < c->discard ? avail : c->discard;

	c->in_start += (uint32_t)n;
	c->discard -= n;
	if (!c->discard)
		return true;
	c->in_start = c->in_len = 0;
	c->state = C_BODY;
	recv_more(c);
	return false;
}

/* The buffer is full and holds no complete head. */
static void head_too_long(struct conn *c)
{
	bool has_line = memchr(c->in + c->in_start, '\n', c->in_len - c->in_start);

	respond_and_close(c, has_line ? 431 : 414);
}

static void grow_in(struct conn *c, void *buf)
{
	memcpy(buf, c->in + c->in_start, c->in_len - c->in_start);
	c->in_len -= c->in_start;
	c->in_start = 0;
	c->in = buf;
	c->in_cap = HEAD_MAX;
	c->state = C_HEAD;
	recv_more(c);
}

static void need_more(struct conn *c)
{
	void *buf;

	c->state = C_HEAD;
	if (c->in_start || c->in_len < c->in_cap) {
		recv_more(c);
		return;
	}
	if (c->in != c->inline_buf) {
		head_too_long(c);
		return;
	}
	buf = pool_take(&c->w->pool);
	if (buf) {
		grow_in(c, buf);
		return;
	}
	c->state = C_WAIT;
	c->on_buf = grow_in;
	pool_wait(&c->w->pool, c);
}

static void process_input(struct conn *c)
{
	size_t n;

	if (c->discard && !drop_body(c))
		return;
	n = http_skip_empty_lines(c->in + c->in_start, c->in_len - c->in_start);
	if (n) {
		c->in_start += (uint32_t)n;
		c->scanned = 0;
	}
	c->head_len = http_head_length(c->in + c->in_start, c->in_len - c->in_start,
				       &c->scanned);
	if (!c->head_len) {
		need_more(c);
		return;
	}
	c->scanned = 0;
	handle_request(c);
}

void conn_start(struct worker *w, int fd, struct conn *c)
{
	memset(c, 0, offsetof(struct conn, inline_buf));
	c->w = w;
	c->fd = fd;
	c->state = C_HEAD;
	c->in = c->inline_buf;
	c->in_cap = IN_SIZE;
	c->waiter.ready = on_cache_ready;
	timer_set(c, &w->timers[0]);
	recv_more(c);
}
