/* SPDX-License-Identifier: MIT */
/*
 * The HTTP/1.1 part of afio-httpd that does no I/O: request heads, dates,
 * ranges and paths.  Kept apart so that tests/httpd-fuzz.c can feed it
 * anything.
 *
 * Line ends: a line ends at LF, with one CR before it allowed (RFC 9112
 * section 2.2 lets a recipient accept a bare LF; curl, browsers and wrk
 * send CRLF, hand-typed requests often LF alone).  A CR anywhere else is a
 * 400, as are NUL and the other control bytes, a space before the colon of
 * a field, and a field line that starts with a space (obsolete folding).
 * Empty lines before the request line are skipped (section 2.2 again).
 */
#ifndef HTTP_PARSE_H
#define HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "Sun, 06 Nov 1994 08:49:37 GMT" */
#define HTTP_DATE_LEN	29

enum http_method {
	HTTP_GET,
	HTTP_HEAD,
	HTTP_OTHER,		/* a method of RFC 9110 this server does not allow: 405 */
	HTTP_UNKNOWN,		/* any other token: 501 */
};

struct http_request {
	enum http_method method;
	unsigned minor;			/* HTTP/1.minor */
	const char *path;		/* of the target, without the query; into the head */
	size_t path_len;
	bool keep_alive;		/* the version's default, or what Connection says */
	bool chunked;			/* Transfer-Encoding ends with chunked */
	uint64_t content_length;	/* 0 when absent */
	int64_t if_modified_since;	/* seconds since 1970, -1: absent or unreadable */
	const char *range;		/* the Range value, or NULL */
	size_t range_len;
	const char *if_range;		/* the If-Range value, or NULL */
	size_t if_range_len;
};

/* How many bytes of empty lines start buf (which may not be all there). */
size_t http_skip_empty_lines(const char *buf, size_t len);

/*
 * The length of the head at buf (request line, fields, the empty line), or
 * 0 when its end has not arrived.  *scanned: how far an earlier call
 * looked (0 at first); it is moved on, so that a head that arrives a byte
 * at a time is not searched from the start each time.
 */
size_t http_head_length(const char *buf, size_t len, size_t *scanned);

/*
 * Parses the complete head of head_len bytes (http_head_length()).
 * Returns 0, or the status to answer with: 400 (malformed), 411 (a body
 * in a transfer coding), 505 (not HTTP/1.x).  req points into buf.
 */
int http_parse_head(const char *buf, size_t head_len, struct http_request *req);

/*
 * Undoes the %XX escapes of a target's path into out (size bytes, NUL
 * ended).  0, or 400 (bad escape, NUL), 403 (a ".." segment, escaped or
 * not) or 414 (does not fit).
 */
int http_decode_path(const char *path, size_t len, char *out, size_t size);

/* The three date formats of RFC 9110 section 5.6.7; false if none fits. */
bool http_parse_date(const char *s, size_t len, int64_t *t);
/* IMF-fixdate of t into out (HTTP_DATE_LEN + 1 bytes). */
void http_format_date(int64_t t, char *out);

enum http_range {
	HTTP_RANGE_NONE,	/* absent, malformed or several: send it all */
	HTTP_RANGE_OK,		/* bytes *first to *last, both included */
	HTTP_RANGE_UNSATISFIABLE,	/* 416 */
};

/* A "bytes=" Range value against a file of size bytes (section 14.1.2). */
enum http_range http_parse_range(const char *v, size_t len, uint64_t size,
				 uint64_t *first, uint64_t *last);

/* The media type for a file name, by its extension. */
const char *http_content_type(const char *name);

/* "OK", "Not Found", ... */
const char *http_reason(int status);

#endif
