/* SPDX-License-Identifier: MIT */
/* The ordered table of backends and selection among them. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "config.h"
#include "context.h"

const struct afio_backend_ops *const afio_backends[] = {
#ifdef AFIO_HAVE_IO_URING
	&afio_backend_io_uring,
#endif
#ifdef AFIO_HAVE_LIBAIO
	&afio_backend_libaio,
#endif
	&afio_backend_threads,
	NULL,
};

const struct afio_backend_ops *afio_backend_find(enum afio_backend b)
{
	for (const struct afio_backend_ops *const *o = afio_backends; *o; o++)
		if ((*o)->id == b)
			return *o;
	return NULL;
}

static const char *const backend_names[] = {
	[AFIO_BACKEND_AUTO] = "auto",
	[AFIO_BACKEND_IO_URING] = "io_uring",
	[AFIO_BACKEND_LIBAIO] = "libaio",
	[AFIO_BACKEND_THREADS] = "threads",
};

static const char *const mode_names[] = {
	[AFIO_MODE_INLINE] = "inline",
	[AFIO_MODE_ASYNC] = "async",
	[AFIO_MODE_HYBRID] = "hybrid",
};

const char *afio_backend_name(enum afio_backend b)
{
	if ((unsigned)b > AFIO_BACKEND_LAST)
		return "unknown";
	return backend_names[b];
}

const char *afio_mode_name(enum afio_mode m)
{
	if ((unsigned)m > AFIO_MODE_HYBRID)
		return "unknown";
	return mode_names[m];
}

int afio_backend_parse(const char *name, enum afio_backend *b)
{
	if (!name || !b)
		return -EINVAL;
	for (unsigned i = 0; i <= AFIO_BACKEND_LAST; i++) {
		if (!strcasecmp(name, backend_names[i])) {
			*b = (enum afio_backend)i;
			return 0;
		}
	}
	return -EINVAL;
}

int afio_mode_parse(const char *name, enum afio_mode *m)
{
	if (!name || !m)
		return -EINVAL;
	for (unsigned i = 0; i <= AFIO_MODE_HYBRID; i++) {
		if (!strcasecmp(name, mode_names[i])) {
			*m = (enum afio_mode)i;
			return 0;
		}
	}
	return -EINVAL;
}

void afio_reason(char *reason, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!reason || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(reason, len, fmt, ap);
	va_end(ap);
}

int afio_read_sysctl(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

static void not_built(enum afio_backend b, char *reason, size_t len)
{
	afio_reason(reason, len, "%s: not built into this library (its development "
		    "package was missing at build time)", afio_backend_name(b));
}

void afio_engine_prepare(struct afio_ctx *ctx, struct afio_engine *e,
			 const struct afio_backend_ops *ops)
{
	e->ops = ops;
	e->ctx = ctx;
	for (unsigned op = 0; op < AFIO_OP_COUNT; op++)
		e->route[op] = afio_route(ops->caps, true, (enum afio_op)op, ctx->cfg.mode,
					  ctx->cfg.flags);
}

void afio_engine_lacks_op(struct afio_engine *e, enum afio_op op)
{
	e->route[op] = afio_route(e->ops->caps, false, op, afio_ctx_mode(e->ctx),
				  afio_ctx_flags(e->ctx));
}

/* threads 0 is "sized for the mode": where a socket request waiting for
   its peer holds a worker, one per socket request the program keeps
   waiting (socket_waits, else entries), as many as the pool may have, so
   that idle peers cannot hold every worker while others wait. */
static unsigned pool_size(const struct afio_ctx *ctx, const struct afio_backend_ops *ops)
{
	unsigned n = ctx->cfg.entries;

	if (ctx->cfg.socket_waits && ctx->cfg.socket_waits < n)
		n = ctx->cfg.socket_waits;

	if (ctx->threads_asked)
		return ctx->threads_asked;
	if (!afio_route_holds_worker(ops->caps, ctx->cfg.mode))
		return AFIO_DEFAULT_THREADS;
	return n < AFIO_MAX_THREADS ? n : AFIO_MAX_THREADS;
}

/* Init is the probe done for real (a probe first would set up the kernel
   object twice); keeps the reason when the backend cannot run. */
static int try_backend(struct afio_ctx *ctx, const struct afio_backend_ops *ops)
{
	char *reason = ctx->skip_reason[ops->id];
	int ret;

	afio_engine_prepare(ctx, &ctx->primary, ops);
	ctx->cfg.threads = pool_size(ctx, ops);
	ret = ops->init(&ctx->primary, &ctx->cfg, reason, AFIO_REASON_LEN);
	if (ret) {
		ctx->primary.ops = NULL;
		return ret;
	}
	reason[0] = '\0';
	return 0;
}

int afio_select_backend(struct afio_ctx *ctx)
{
	enum afio_backend want = ctx->cfg.backend;
	const struct afio_backend_ops *ops;
	int ret = -ENOTSUP;

	if (want != AFIO_BACKEND_AUTO) {
		ops = afio_backend_find(want);
		if (ops)
			ret = try_backend(ctx, ops);
		else
			not_built(want, ctx->skip_reason[want], AFIO_REASON_LEN);
		if (!ret || (ctx->cfg.flags & AFIO_NO_FALLBACK))
			return ret;
	}
	for (const struct afio_backend_ops *const *o = afio_backends; *o; o++) {
		if ((*o)->id == want)
			continue;
		ret = try_backend(ctx, *o);
		if (!ret)
			return 0;
	}
	return ret;
}

int afio_probe(enum afio_backend b, char *reason, size_t reason_len)
{
	const struct afio_backend_ops *ops;
	struct afio_config cfg;
	int ret = -ENOTSUP;

	afio_config_init(&cfg);
	if (b == AFIO_BACKEND_AUTO) {
		for (const struct afio_backend_ops *const *o = afio_backends; *o; o++) {
			ret = (*o)->probe(&cfg, reason, reason_len);
			if (!ret) {
				afio_reason(reason, reason_len, "auto picks %s", (*o)->name);
				return 0;
			}
		}
		return ret;
	}
	if ((unsigned)b > AFIO_BACKEND_LAST) {
		afio_reason(reason, reason_len, "no such backend (%d)", (int)b);
		return -EINVAL;
	}
	ops = afio_backend_find(b);
	if (!ops) {
		not_built(b, reason, reason_len);
		return -ENOTSUP;
	}
	ret = ops->probe(&cfg, reason, reason_len);
	if (!ret)
		afio_reason(reason, reason_len, "%s: available", ops->name);
	return ret;
}
