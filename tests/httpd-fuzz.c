/* SPDX-License-Identifier: MIT */
/*
 * afio-httpd's request parser (examples/http-parse.c) fed random and
 * mutated heads.  Each input sits alone in a buffer of its exact size, so
 * that under AddressSanitizer a read past it is caught; and what the parser
 * says must hold together: a head found a byte at a time is the head found
 * at once, a parsed head points into itself, a decoded path has no ".."
 * segment, a range lies in the file, a formatted date parses back.
 *
 * A seeded loop of FUZZ_ITERATIONS inputs by default; AFIO_FUZZ_SECONDS
 * runs it for that long instead and AFIO_FUZZ_SEED picks the seed.  Built
 * with -DHTTPD_LIBFUZZER (and clang's -fsanitize=fuzzer) the same checks
 * serve as a libFuzzer target.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http-parse.h"

#define FUZZ_ITERATIONS	1000000
#define MAX_INPUT	4096

#define require(cond) do {						\
	if (!(cond)) {							\
		fprintf(stderr, "%s:%d: %s does not hold\n", __FILE__, __LINE__, #cond); \
		abort();						\
	}								\
} while (0)

static bool within(const char *p, size_t n, const char *buf, size_t len)
{
	return p >= buf && n <= len && (size_t)(p - buf) <= len - n;
}

static void check_path(const struct http_request *r)
{
	size_t cap = (size_t)(r->path_len % 64) + 1;
	char *out = malloc(cap);
	int ret;

	require(out);
	ret = http_decode_path(r->path, r->path_len, out, cap);
	require(ret == 0 || ret == 400 || ret == 403 || ret == 414);
	if (!ret) {
		size_t n = strlen(out);

		require(n < cap);
		require(strncmp(out, "../", 3) && strcmp(out, ".."));
		require(!strstr(out, "/../"));
		require(n < 3 || strcmp(out + n - 3, "/.."));
	}
	free(out);
}

static void check_range(const struct http_request *r)
{
	static const uint64_t sizes[] = { 0, 1, 5, 4096, 1ull << 40, UINT64_MAX };
	uint64_t first, last;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		enum http_range got = http_parse_range(r->range, r->range_len, sizes[i],
						       &first, &last);

		require(got == HTTP_RANGE_NONE || got == HTTP_RANGE_OK ||
			got == HTTP_RANGE_UNSATISFIABLE);
		if (got == HTTP_RANGE_OK)
			require(first <= last && last < sizes[i]);
	}
}

static void check_head(const char *buf, size_t head_len)
{
	struct http_request r;
	int ret = http_parse_head(buf, head_len, &r);

	require(ret == 0 || ret == 400 || ret == 411 || ret == 505);
	if (ret)
		return;
	require(r.method <= HTTP_UNKNOWN);
	require(r.minor <= 9);
	require(r.path_len);
	require(within(r.path, r.path_len, buf, head_len) || !strcmp(r.path, "/"));
	if (r.range)
		require(within(r.range, r.range_len, buf, head_len));
	if (r.if_range)
		require(within(r.if_range, r.if_range_len, buf, head_len));
	if (r.method == HTTP_GET || r.method == HTTP_HEAD) {
		require(r.path[0] == '/');
		check_path(&r);
	}
	if (r.range)
		check_range(&r);
	require(!r.chunked);
}

/* The head found as the bytes trickle in, at split points from step. */
static size_t head_in_steps(const char *buf, size_t len, unsigned step)
{
	size_t scanned = 0, got = 0, n = 0;

	while (n < len && !got) {
		n += 1 + step % 7;
		if (n > len)
			n = len;
		got = http_head_length(buf, n, &scanned);
		step = step * 33 + 1;
	}
	return got;
}

static void check_input(const char *data, size_t len, unsigned step)
{
	char *buf = malloc(len ? len : 1);
	size_t skip, scanned = 0, head_len;
	int64_t t;

	require(buf);
	memcpy(buf, data, len);
	skip = http_skip_empty_lines(buf, len);
	require(skip <= len);
	head_len = http_head_length(buf + skip, len - skip, &scanned);
	require(head_len <= len - skip);
	require(head_in_steps(buf + skip, len - skip, step) == head_len);
	if (head_len) {
		require(buf[skip + head_len - 1] == '\n');
		check_head(buf + skip, head_len);
	}
	/* Any prefix ending in LF, as if the head ended there. */
	for (size_t i = 1; i <= len && i < 256; i++)
		if (buf[i - 1] == '\n')
			check_head(buf, i);
	if (len >= 24 && http_parse_date(buf, len > 40 ? 40 : len, &t))
		require(t > -62167219201ll && t < 253402300800ll);
	free(buf);
}

#ifdef HTTPD_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	check_input((const char *)data, len, (unsigned)len);
	return 0;
}
#else

#include <check.h>

/* ---- inputs ---- */

static const char *const seeds[] = {
	"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
	"GET /a/b.html?q=1 HTTP/1.1\r\nHost: example\r\nConnection: keep-alive\r\n\r\n",
	"HEAD /file.bin HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
	"GET /f HTTP/1.1\r\nHost: x\r\nRange: bytes=10-19\r\nIf-Range: \"5-6\"\r\n\r\n",
	"GET /f HTTP/1.1\r\nHost: x\r\nRange: bytes=-500\r\n\r\n",
	"GET /f HTTP/1.1\r\nHost: x\r\nIf-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n",
	"GET /f HTTP/1.1\r\nHost: x\r\nIf-Modified-Since: Sunday, 06-Nov-94 08:49:37 GMT\r\n\r\n",
	"GET /f HTTP/1.1\r\nHost: x\r\nIf-Modified-Since: Sun Nov  6 08:49:37 1994\r\n\r\n",
	"GET http://host:80/p%20q HTTP/1.1\r\nHost: host\r\n\r\n",
	"GET /x HTTP/1.1\nHost: x\nContent-Length: 5\n\nhello",
	"POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
	"\r\n\r\nGET /%2e%2e/%2E%2e%2fetc HTTP/1.1\r\nHost: x\r\n\r\n",
	"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
};

static const char *const pieces[] = {
	"\r\n", "\n", "\r", "\0", " ", "\t", ":", "%", "%2e", "%00", "..", "/", "?",
	"GET ", "HEAD ", " HTTP/1.1", "Host: ", "Range: bytes=", "-", ",", "0",
	"18446744073709551616", "Content-Length: ", "Transfer-Encoding: chunked",
	"Connection: close", "If-Modified-Since: ", "GMT", "\x80\xff",
};

static unsigned long long rng_state;

static unsigned rnd(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (unsigned)((rng_state * 2685821657736338717ull) >> 32);
}

/* s may point into buf. */
static size_t insert(char *buf, size_t len, size_t at, const char *s, size_t n)
{
	char piece[64];

	if (len + n > MAX_INPUT || n > sizeof(piece))
		return len;
	memcpy(piece, s, n);
	memmove(buf + at + n, buf + at, len - at);
	memcpy(buf + at, piece, n);
	return len + n;
}

static size_t mutate_once(char *buf, size_t len)
{
	size_t at = len ? rnd() % (len + 1) : 0, n;
	const char *p;

	switch (rnd() % 6) {
	case 0:		/* a byte changed */
		if (len)
			buf[at % len] = (char)rnd();
		return len;
	case 1:		/* a piece put in */
		p = pieces[rnd() % (sizeof(pieces) / sizeof(pieces[0]))];
		n = strlen(p) ? strlen(p) : 1;
		return insert(buf, len, at, p, n);
	case 2:		/* some bytes gone */
		n = rnd() % 8;
		if (at + n > len)
			n = len - at;
		memmove(buf + at, buf + at + n, len - at - n);
		return len - n;
	case 3:		/* a stretch repeated */
		n = len - at < 32 ? len - at : 32;
		return insert(buf, len, rnd() % (len + 1), buf + at, n);
	case 4:		/* cut short */
		return at;
	default:	/* digits */
		return insert(buf, len, at, "123456789", 1 + rnd() % 9);
	}
}

static size_t random_input(char *buf)
{
	size_t len = 0;

	if (rnd() % 4 == 0) {
		len = rnd() % 200;
		for (size_t i = 0; i < len; i++)
			buf[i] = (char)rnd();
		return len;
	}
	{
		const char *s = seeds[rnd() % (sizeof(seeds) / sizeof(seeds[0]))];

		len = strlen(s);
		memcpy(buf, s, len);
	}
	for (unsigned m = rnd() % 6; m > 0; m--)
		len = mutate_once(buf, len);
	return len;
}

static void check_dates(void)
{
	char s[HTTP_DATE_LEN + 1];
	int64_t t = (int64_t)(rnd() % 4000000000u) * (rnd() % 2 ? 1 : 60), back;

	http_format_date(t, s);
	require(strlen(s) == HTTP_DATE_LEN);
	require(http_parse_date(s, HTTP_DATE_LEN, &back) && back == t);
}

static double seconds_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

START_TEST(parser_holds_together)
{
	const char *secs = getenv("AFIO_FUZZ_SECONDS"), *seed = getenv("AFIO_FUZZ_SEED");
	double until = secs ? seconds_now() + strtod(secs, NULL) : 0;
	static char buf[MAX_INPUT];
	unsigned long long n = 0;

	rng_state = seed ? strtoull(seed, NULL, 0) : 0x9e3779b97f4a7c15ull;
	if (!rng_state)
		rng_state = 1;
	printf("httpd-fuzz: seed %llu\n", rng_state);
	for (;; n++) {
		if (secs ? (n % 1024 == 0 && seconds_now() >= until) : n >= FUZZ_ITERATIONS)
			break;
		check_input(buf, random_input(buf), rnd());
		if (n % 16 == 0)
			check_dates();
	}
	printf("httpd-fuzz: %llu inputs\n", n);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("httpd-fuzz");
	TCase *tc = tcase_create("parser");
	SRunner *sr;
	int failed;

	/* A longer soak by AFIO_FUZZ_SECONDS must not be cut short. */
	tcase_set_timeout(tc, getenv("AFIO_FUZZ_SECONDS") ?
			  strtod(getenv("AFIO_FUZZ_SECONDS"), NULL) + 60 : 300);
	tcase_add_test(tc, parser_holds_together);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
#endif
