/* SPDX-License-Identifier: MIT */
/*
 * The "where each op runs" tables of README.md and asyncfio(7) are made
 * from the routing table (lib/route.c), for a kernel that has every op:
 *
 *   routes md|man             print the tables
 *   routes --check md|man F   exit 1 when F's tables are not what the code says
 *   routes --write md|man F   put them into F
 *
 * The tables stand between two marker lines in each file; meson runs the
 * check as a test, and `meson compile -C build route-docs` rewrites them.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

#define MAX_ROWS	AFIO_OP_COUNT
#define CELL		160
#define OUT_MAX		(64 * 1024)

static const char *const md_begin = "<!-- routes: made by tests/routes.c from lib/route.c -->";
static const char *const md_end = "<!-- /routes -->";
static const char *const man_begin = ".\\\" routes: made by tests/routes.c from lib/route.c";
static const char *const man_end = ".\\\" /routes";

static const enum afio_mode modes[] = { AFIO_MODE_INLINE, AFIO_MODE_ASYNC, AFIO_MODE_HYBRID };
#define NMODES (sizeof(modes) / sizeof(modes[0]))

struct row {
	char ops[CELL];
	char cell[NMODES][CELL];
};

struct out {
	char buf[OUT_MAX];
	size_t len;
};

static void emit(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void emit(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->len, sizeof(o->buf) - o->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(o->buf) - o->len) {
		fprintf(stderr, "routes: tables longer than %d bytes\n", OUT_MAX);
		exit(2);
	}
	o->len += (size_t)n;
}

/* Ops whose routes are the same in every mode share a row. */
static unsigned backend_rows(const struct afio_backend_ops *b, struct row *rows)
{
	unsigned n = 0;

	for (unsigned op = 0; op < AFIO_OP_COUNT; op++) {
		struct row r = { .ops = "" };
		unsigned i;

		for (unsigned m = 0; m < NMODES; m++)
			afio_route_describe(afio_route(b->caps, true, op, modes[m], 0), b->caps,
					    op, modes[m], 0, NULL, r.cell[m], CELL);
		for (i = 0; i < n; i++)
			if (!memcmp(rows[i].cell, r.cell, sizeof(r.cell)))
				break;
		if (i == n)
			rows[n++] = r;
		if (rows[i].ops[0])
			strncat(rows[i].ops, ", ", CELL - strlen(rows[i].ops) - 1);
		strncat(rows[i].ops, afio_op_descs[op].name, CELL - strlen(rows[i].ops) - 1);
	}
	return n;
}

static void table_md(struct out *o, const struct afio_backend_ops *b)
{
	struct row rows[MAX_ROWS];
	unsigned n = backend_rows(b, rows);

	emit(o, "\n| %s | `INLINE` | `ASYNC` | `HYBRID` |\n|---|---|---|---|\n", b->name);
	for (unsigned i = 0; i < n; i++)
		emit(o, "| %s | %s | %s | %s |\n", rows[i].ops, rows[i].cell[0], rows[i].cell[1],
		     rows[i].cell[2]);
}

static void table_man(struct out *o, const struct afio_backend_ops *b)
{
	struct row rows[MAX_ROWS];
	unsigned n = backend_rows(b, rows);

	emit(o, ".PP\n.B %s\n.ad l\n.nh\n.TS\nlw(13n)2 lw(16n)2 lw(16n)2 lw(16n).\n", b->name);
	emit(o, "\\fBop\\fR\t\\fBINLINE\\fR\t\\fBASYNC\\fR\t\\fBHYBRID\\fR\n");
	for (unsigned i = 0; i < n; i++) {
		emit(o, "T{\n%s\nT}", rows[i].ops);
		for (unsigned m = 0; m < NMODES; m++)
			emit(o, "\tT{\n%s\nT}", rows[i].cell[m]);
		emit(o, "\n");
	}
	emit(o, ".TE\n.hy\n.ad\n");
}

static void tables(struct out *o, bool man)
{
	for (const struct afio_backend_ops *const *b = afio_backends; *b; b++) {
		if (man)
			table_man(o, *b);
		else
			table_md(o, *b);
	}
	if (!man)
		emit(o, "\n");
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	long n;

	if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) ||
	    !(buf = malloc((size_t)n + 1)) || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		perror(path);
		exit(2);
	}
	fclose(f);
	buf[n] = '\0';
	*len = (size_t)n;
	return buf;
}

/* The bytes between the end of the begin marker's line and the end marker. */
static int find_block(const char *text, bool man, const char **from, const char **to)
{
	const char *b = strstr(text, man ? man_begin : md_begin);
	const char *e;

	if (!b || !(b = strchr(b, '\n')))
		return -1;
	e = strstr(b + 1, man ? man_end : md_end);
	if (!e)
		return -1;
	*from = b + 1;
	*to = e;
	return 0;
}

static int compare_or_write(const char *text, size_t len, bool man, bool check,
			    const char *fmt, const char *path, const struct out *o)
{
	const char *from, *to;
	FILE *f;

	if (find_block(text, man, &from, &to)) {
		fprintf(stderr, "routes: %s has no routes markers\n", path);
		return 1;
	}
	if ((size_t)(to - from) == o->len && !memcmp(from, o->buf, o->len))
		return 0;
	if (check) {
		fprintf(stderr, "routes: %s says other than lib/route.c; run "
			"`meson compile -C build route-docs`, or see `routes %s`\n", path, fmt);
		return 1;
	}
	f = fopen(path, "we");
	if (!f || fwrite(text, 1, (size_t)(from - text), f) != (size_t)(from - text) ||
	    fwrite(o->buf, 1, o->len, f) != o->len ||
	    fwrite(to, 1, len - (size_t)(to - text), f) != len - (size_t)(to - text) || fclose(f)) {
		perror(path);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	bool check = argc == 4 && !strcmp(argv[1], "--check");
	bool write = argc == 4 && !strcmp(argv[1], "--write");
	const char *fmt = argc == 2 ? argv[1] : argc == 4 ? argv[2] : "";
	bool man = !strcmp(fmt, "man");
	static struct out o;
	size_t len;
	char *text;
	int ret;

	if ((!man && strcmp(fmt, "md")) || (argc != 2 && !check && !write)) {
		fprintf(stderr, "usage: routes [--check|--write] md|man [FILE]\n");
		return 2;
	}
	if (afio_backends[0] == &afio_backend_threads || !afio_backends[1] ||
	    afio_backends[1] == &afio_backend_threads) {
		printf("routes: a backend is not built in; the documents name all three\n");
		return 77;
	}
	tables(&o, man);
	if (argc == 2) {
		fwrite(o.buf, 1, o.len, stdout);
		return 0;
	}
	text = slurp(argv[3], &len);
	ret = compare_or_write(text, len, man, check, fmt, argv[3], &o);
	free(text);
	return ret;
}
