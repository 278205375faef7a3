/* SPDX-License-Identifier: MIT */
/* Request heads, dates, ranges and paths (http-parse.h): no I/O, no
   allocation, never a byte read outside what the caller passed. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "http-parse.h"

/* ---- characters ---- */

static bool is_tchar(unsigned char ch)
{
	if ((ch >= '0' && ch <= '9') || ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z'))
		return true;
	return ch && strchr("!#$%&'*+-.^_`|~", ch);
}

/* Field values: visible ASCII, obs-text, space and tab (RFC 9110 5.5). */
static bool is_value_char(unsigned char ch)
{
	return ch == '\t' || (ch >= ' ' && ch != 0x7f);
}

/* Request targets: no control byte, space or DEL; obs-text is let through
   as path bytes, as clients that send raw UTF-8 expect. */
static bool is_target_char(unsigned char ch)
{
	return ch > ' ' && ch != 0x7f;
}

static bool is_digit(char ch)
{
	return ch >= '0' && ch <= '9';
}

/* ---- finding the head ---- */

size_t http_skip_empty_lines(const char *buf, size_t len)
{
	size_t n = 0;

	for (;;) {
		if (n < len && buf[n] == '\n')
			n++;
		else if (n + 1 < len && buf[n] == '\r' && buf[n + 1] == '\n')
			n += 2;
		else
			return n;
	}
}

size_t http_head_length(const char *buf, size_t len, size_t *scanned)
{
	/* An LF that ends a line, then LF or CRLF: back up far enough that
	   an end split over two arrivals is seen. */
	size_t from = *scanned > 2 ? *scanned - 2 : 0;
	const char *lf;

	while (from < len && (lf = memchr(buf + from, '\n', len - from))) {
		size_t i = (size_t)(lf - buf) + 1;

		if (i < len && buf[i] == '\n')
			return i + 1;
		if (i + 1 < len && buf[i] == '\r' && buf[i + 1] == '\n')
			return i + 2;
		from = i;
	}
	*scanned = len;
	return 0;
}

/* ---- lines ---- */

struct line {
	const char *p;
	size_t len;		/* without the CR LF */
};

/* The next line of [*pos, end), which ends in LF; false if a CR stands
   anywhere but right before the LF. */
static bool next_line(const char **pos, const char *end, struct line *l)
{
	const char *lf = memchr(*pos, '\n', (size_t)(end - *pos));

	l->p = *pos;
	l->len = (size_t)(lf - *pos);
	*pos = lf + 1;
	if (l->len && l->p[l->len - 1] == '\r')
		l->len--;
	return !memchr(l->p, '\r', l->len);
}

static bool token_is(const char *p, size_t len, const char *word)
{
	return len == strlen(word) && !strncasecmp(p, word, len);
}

/* ---- the request line ---- */

static enum http_method method_of(const char *p, size_t len)
{
	static const char *const others[] = {
		"POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
	};

	/* Methods are case-sensitive (RFC 9110 9.1). */
	if (len == 3 && !memcmp(p, "GET", 3))
		return HTTP_GET;
	if (len == 4 && !memcmp(p, "HEAD", 4))
		return HTTP_HEAD;
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
		if (len == strlen(others[i]) && !memcmp(p, others[i], len))
			return HTTP_OTHER;
	return HTTP_UNKNOWN;
}

/* "HTTP/1.1": 0 and *minor, or 400, or 505 for another major version. */
static int parse_version(const char *p, size_t len, unsigned *minor)
{
	if (len != 8 || memcmp(p, "HTTP/", 5) || !is_digit(p[5]) || p[6] != '.' ||
	    !is_digit(p[7]))
		return 400;
	if (p[5] != '1')
		return 505;
	*minor = (unsigned)(p[7] - '0');
	return 0;
}

/* The path of an origin-form ("/a?b") or absolute-form ("http://h/a?b")
   target (RFC 9112 3.2). */
static bool target_path(const char *p, size_t len, struct http_request *req)
{
	const char *end = p + len, *q;
	size_t scheme;

	if (len && p[0] == '/') {
		q = p;
	} else {
		if (len > 7 && !strncasecmp(p, "http://", 7))
			scheme = 7;
		else if (len > 8 && !strncasecmp(p, "https://", 8))
			scheme = 8;
		else
			return false;
		q = p + scheme;
		while (q < end && *q != '/' && *q != '?' && *q != '#')
			q++;
		if (q == end || *q != '/') {
			req->path = "/";
			req->path_len = 1;
			return true;
		}
	}
	req->path = q;
	while (q < end && *q != '?' && *q != '#')
		q++;
	req->path_len = (size_t)(q - req->path);
	return true;
}

static int parse_request_line(const struct line *l, struct http_request *req)
{
	const char *end = l->p + l->len, *sp1, *sp2, *target;
	size_t target_len;
	int ret;

	sp1 = memchr(l->p, ' ', l->len);
	if (!sp1 || sp1 == l->p)
		return 400;
	for (const char *m = l->p; m < sp1; m++)
		if (!is_tchar((unsigned char)*m))
			return 400;
	target = sp1 + 1;
	sp2 = memchr(target, ' ', (size_t)(end - target));
	if (!sp2 || sp2 == target)
		return 400;
	target_len = (size_t)(sp2 - target);
	for (size_t i = 0; i < target_len; i++)
		if (!is_target_char((unsigned char)target[i]))
			return 400;
	req->method = method_of(l->p, (size_t)(sp1 - l->p));
	ret = parse_version(sp2 + 1, (size_t)(end - sp2 - 1), &req->minor);
	if (ret)
		return ret;
	if (req->method != HTTP_GET && req->method != HTTP_HEAD) {
		/* Answered 405 or 501 whatever the target's form. */
		req->path = target;
		req->path_len = target_len;
		return 0;
	}
	return target_path(target, target_len, req) ? 0 : 400;
}

/* ---- header fields ---- */

struct fields {
	unsigned hosts;
	bool has_length, has_te, wants_close, wants_keep_alive;
};

/* Calls each(word) for the comma-separated words of a list value. */
static void each_word(const char *v, size_t len, struct fields *f,
		      void (*each)(const char *w, size_t n, struct fields *f))
{
	const char *end = v + len;

	while (v < end) {
		const char *comma = memchr(v, ',', (size_t)(end - v)), *w_end;

		w_end = comma ? comma : end;
		while (v < w_end && (*v == ' ' || *v == '\t'))
			v++;
		while (w_end > v && (w_end[-1] == ' ' || w_end[-1] == '\t'))
			w_end--;
		if (w_end > v)
			each(v, (size_t)(w_end - v), f);
		v = comma ? comma + 1 : end;
	}
}

static void connection_word(const char *w, size_t n, struct fields *f)
{
	if (token_is(w, n, "close"))
		f->wants_close = true;
	else if (token_is(w, n, "keep-alive"))
		f->wants_keep_alive = true;
}

/* Decimal digits only; false for anything else or more than 2^63. */
static bool parse_length(const char *v, size_t len, uint64_t *out)
{
	uint64_t n = 0;

	if (!len)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (!is_digit(v[i]) || n > (UINT64_MAX / 2 - 9) / 10)
			return false;
		n = n * 10 + (uint64_t)(v[i] - '0');
	}
	*out = n;
	return true;
}

/* The last coding of a Transfer-Encoding list. */
static void last_coding(const char *v, size_t len, const char **w, size_t *n)
{
	const char *end = v + len, *start;

	while (end > v && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == ','))
		end--;
	start = end;
	while (start > v && start[-1] != ',' && start[-1] != ' ' && start[-1] != '\t')
		start--;
	*w = start;
	*n = (size_t)(end - start);
}

static int use_field(const char *name, size_t name_len, const char *v, size_t len,
		     struct http_request *req, struct fields *f)
{
	uint64_t n;

	if (token_is(name, name_len, "host")) {
		f->hosts++;
	} else if (token_is(name, name_len, "connection")) {
		each_word(v, len, f, connection_word);
	} else if (token_is(name, name_len, "content-length")) {
		if (!parse_length(v, len, &n) || (f->has_length && n != req->content_length))
			return 400;
		f->has_length = true;
		req->content_length = n;
	} else if (token_is(name, name_len, "transfer-encoding")) {
		const char *w;
		size_t wn;

		f->has_te = true;
		last_coding(v, len, &w, &wn);
		req->chunked = token_is(w, wn, "chunked");
	} else if (token_is(name, name_len, "if-modified-since")) {
		if (req->if_modified_since < 0 && !http_parse_date(v, len, &req->if_modified_since))
			req->if_modified_since = -1;
	} else if (token_is(name, name_len, "range")) {
		req->range = v;
		req->range_len = len;
	} else if (token_is(name, name_len, "if-range")) {
		req->if_range = v;
		req->if_range_len = len;
	}
	return 0;
}

static int parse_field(const struct line *l, struct http_request *req, struct fields *f)
{
	const char *colon = memchr(l->p, ':', l->len), *v, *end = l->p + l->len;

	/* No name, a space before the colon or folding: RFC 9112 5.1, 5.2. */
	if (!colon || colon == l->p)
		return 400;
	for (const char *p = l->p; p < colon; p++)
		if (!is_tchar((unsigned char)*p))
			return 400;
	for (const char *p = colon + 1; p < end; p++)
		if (!is_value_char((unsigned char)*p))
			return 400;
	v = colon + 1;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	return use_field(l->p, (size_t)(colon - l->p), v, (size_t)(end - v), req, f);
}

/* What the fields together say (RFC 9112 3.2, 6.1, 6.3, 9.3). */
static int check_fields(const struct fields *f, struct http_request *req)
{
	if (req->minor >= 1 && f->hosts != 1)
		return 400;
	if (f->hosts > 1)
		return 400;
	if (f->has_te) {
		/* Framing we cannot trust, or a body we do not decode. */
		if (f->has_length || req->minor == 0 || !req->chunked)
			return 400;
		return 411;
	}
	if (req->minor >= 1)
		req->keep_alive = !f->wants_close;
	else
		req->keep_alive = f->wants_keep_alive && !f->wants_close;
	return 0;
}

int http_parse_head(const char *buf, size_t head_len, struct http_request *req)
{
	const char *pos = buf, *end = buf + head_len;
	struct fields f = { 0 };
	bool ended = false;
	struct line l;
	int ret;

	memset(req, 0, sizeof(*req));
	req->if_modified_since = -1;
	if (!head_len || buf[head_len - 1] != '\n')
		return 400;
	if (!next_line(&pos, end, &l) || !l.len)
		return 400;
	ret = parse_request_line(&l, req);
	if (ret)
		return ret;
	while (pos < end) {
		if (!next_line(&pos, end, &l))
			return 400;
		if (!l.len) {
			ended = true;
			break;
		}
		if (l.p[0] == ' ' || l.p[0] == '\t')
			return 400;
		ret = parse_field(&l, req, &f);
		if (ret)
			return ret;
	}
	/* Whatever follows the empty line is not this head's. */
	if (!ended || pos != end)
		return 400;
	return check_fields(&f, req);
}

/* ---- paths ---- */

static int hex_value(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f')
		return (ch | 0x20) - 'a' + 10;
	return -1;
}

/* Whether the NUL-ended path has a ".." segment. */
static bool climbs(const char *path)
{
	for (const char *seg = path; seg; seg = strchr(seg, '/')) {
		seg += *seg == '/';
		if (seg[0] == '.' && seg[1] == '.' && (!seg[2] || seg[2] == '/'))
			return true;
	}
	return false;
}

int http_decode_path(const char *path, size_t len, char *out, size_t size)
{
	size_t n = 0;

	if (!size)
		return 414;
	for (size_t i = 0; i < len; i++) {
		char ch = path[i];

		if (ch == '%') {
			int hi = i + 2 < len ? hex_value(path[i + 1]) : -1;
			int lo = hi < 0 ? -1 : hex_value(path[i + 2]);

			if (lo < 0)
				return 400;
			ch = (char)(hi << 4 | lo);
			i += 2;
		}
		/* A NUL would cut the path short of what was asked for. */
		if (!ch)
			return 400;
		if (n + 1 >= size)
			return 414;
		out[n++] = ch;
	}
	out[n] = '\0';
	return climbs(out) ? 403 : 0;
}

/* ---- dates ---- */

static const char months[][4] = {
	"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
};
static const char weekdays[][4] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };

/* Days since 1970-01-01 of a proleptic Gregorian date (m 1-12). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
	int64_t era, doe, yoe, doy, mp;

	z += 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = z - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	*d = (unsigned)(doy - (153 * mp + 2) / 5 + 1);
	*m = (unsigned)(mp < 10 ? mp + 3 : mp - 9);
	*y = yoe + era * 400 + (*m <= 2);
}

void http_format_date(int64_t t, char *out)
{
	int64_t days = t >= 0 ? t / 86400 : (t - 86399) / 86400, secs = t - days * 86400, y;
	unsigned m, d;

	civil_from_days(days, &y, &m, &d);
	snprintf(out, HTTP_DATE_LEN + 1, "%s, %02u %s %04lld %02u:%02u:%02u GMT",
		 weekdays[((days % 7) + 11) % 7], d, months[m - 1], (long long)(y % 10000),
		 (unsigned)(secs / 3600), (unsigned)(secs / 60 % 60), (unsigned)(secs % 60));
}

/* n digits at s; -1 if any is not one. */
static int digits(const char *s, int n)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (!is_digit(s[i]))
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

static int month_of(const char *s)
{
	for (int i = 0; i < 12; i++)
		if (!memcmp(s, months[i], 3))
			return i + 1;
	return -1;
}

/* "08:49:37" into seconds of the day, -1 if malformed. */
static int time_of_day(const char *s)
{
	int h = digits(s, 2), m = digits(s + 3, 2), sec = digits(s + 6, 2);

	if (s[2] != ':' || s[5] != ':' || h < 0 || h > 23 || m < 0 || m > 59 ||
	    sec < 0 || sec > 60)
		return -1;
	return h * 3600 + m * 60 + sec;
}

static bool make_time(int y, int m, int d, int tod, int64_t *t)
{
	if (y < 0 || m < 1 || d < 1 || d > 31 || tod < 0)
		return false;
	*t = days_from_civil(y, (unsigned)m, (unsigned)d) * 86400 + tod;
	return true;
}

/* "Sun, 06 Nov 1994 08:49:37 GMT" */
static bool imf_fixdate(const char *s, size_t len, int64_t *t)
{
	if (len != 29 || s[3] != ',' || s[4] != ' ' || s[7] != ' ' || s[11] != ' ' ||
	    s[16] != ' ' || memcmp(s + 25, " GMT", 4))
		return false;
	return make_time(digits(s + 12, 4), month_of(s + 8), digits(s + 5, 2),
			 time_of_day(s + 17), t);
}

/* "Sunday, 06-Nov-94 08:49:37 GMT": a two-digit year is taken as the
   nearest to 1970 on (RFC 9110 5.6.7 asks for no more than 50 years on). */
static bool rfc850_date(const char *s, size_t len, int64_t *t)
{
	const char *comma = memchr(s, ',', len);
	size_t rest;
	int y;

	if (!comma)
		return false;
	rest = len - (size_t)(comma - s);
	s = comma;
	if (rest != 24 || s[1] != ' ' || s[4] != '-' || s[8] != '-' || s[11] != ' ' ||
	    memcmp(s + 20, " GMT", 4))
		return false;
	y = digits(s + 9, 2);
	if (y >= 0)
		y += y < 70 ? 2000 : 1900;
	return make_time(y, month_of(s + 5), digits(s + 2, 2), time_of_day(s + 12), t);
}

/* "Sun Nov  6 08:49:37 1994" */
static bool asctime_date(const char *s, size_t len, int64_t *t)
{
	int d;

	if (len != 24 || s[3] != ' ' || s[7] != ' ' || s[10] != ' ' || s[19] != ' ')
		return false;
	d = s[8] == ' ' ? digits(s + 9, 1) : digits(s + 8, 2);
	return make_time(digits(s + 20, 4), month_of(s + 4), d, time_of_day(s + 11), t);
}

bool http_parse_date(const char *s, size_t len, int64_t *t)
{
	if (len < 24)
		return false;
	return imf_fixdate(s, len, t) || rfc850_date(s, len, t) || asctime_date(s, len, t);
}

/* ---- ranges ---- */

/* Digits at *p up to end into *out, saturating; false when there are none. */
static bool range_number(const char **p, const char *end, uint64_t *out)
{
	uint64_t n = 0;
	const char *start = *p;

	for (; *p < end && is_digit(**p); (*p)++)
		n = n > (UINT64_MAX - 9) / 10 ? UINT64_MAX : n * 10 + (uint64_t)(**p - '0');
	*out = n;
	return *p > start;
}

enum http_range http_parse_range(const char *v, size_t len, uint64_t size,
				 uint64_t *first, uint64_t *last)
{
	const char *p, *end = v + len;
	uint64_t a, b;
	bool has_a, has_b;

	if (len < 7 || strncasecmp(v, "bytes=", 6) || memchr(v, ',', len))
		return HTTP_RANGE_NONE;
	p = v + 6;
	has_a = range_number(&p, end, &a);
	if (p == end || *p++ != '-')
		return HTTP_RANGE_NONE;
	has_b = range_number(&p, end, &b);
	if (p != end || (!has_a && !has_b) || (has_a && has_b && b < a))
		return HTTP_RANGE_NONE;
	if (!has_a) {
		/* The last b bytes. */
		if (!b || !size)
			return HTTP_RANGE_UNSATISFIABLE;
		*first = b < size ? size - b : 0;
		*last = size - 1;
		return HTTP_RANGE_OK;
	}
	if (a >= size)
		return HTTP_RANGE_UNSATISFIABLE;
	*first = a;
	*last = has_b && b < size ? b : size - 1;
	return HTTP_RANGE_OK;
}

/* ---- what to call things ---- */

const char *http_content_type(const char *name)
{
	static const struct { const char *ext, *type; } types[] = {
		{ ".html", "text/html; charset=utf-8" },
		{ ".htm", "text/html; charset=utf-8" },
		{ ".txt", "text/plain; charset=utf-8" },
		{ ".css", "text/css" },
		{ ".js", "text/javascript" },
		{ ".mjs", "text/javascript" },
		{ ".json", "application/json" },
		{ ".xml", "application/xml" },
		{ ".pdf", "application/pdf" },
		{ ".wasm", "application/wasm" },
		{ ".png", "image/png" },
		{ ".jpg", "image/jpeg" },
		{ ".jpeg", "image/jpeg" },
		{ ".gif", "image/gif" },
		{ ".webp", "image/webp" },
		{ ".svg", "image/svg+xml" },
		{ ".ico", "image/vnd.microsoft.icon" },
		{ ".woff2", "font/woff2" },
		{ ".mp4", "video/mp4" },
	};
	const char *dot = strrchr(name, '.');

	if (dot && !strchr(dot, '/'))
		for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
			if (!strcasecmp(dot, types[i].ext))
				return types[i].type;
	return "application/octet-stream";
}

const char *http_reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 206: return "Partial Content";
	case 301: return "Moved Permanently";
	case 304: return "Not Modified";
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 411: return "Length Required";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 416: return "Range Not Satisfiable";
	case 431: return "Request Header Fields Too Large";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	case 505: return "HTTP Version Not Supported";
	default: return "Internal Server Error";
	}
}
