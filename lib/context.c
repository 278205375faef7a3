/* SPDX-License-Identifier: MIT */
/* Context life cycle: configuration, backend choice, slots, teardown. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "context.h"

#define AFIO_DEFAULT_ENTRIES	256
#define AFIO_MAX_ENTRIES	(1u << 20)
#define AFIO_KNOWN_FLAGS	(AFIO_NO_FALLBACK | AFIO_SQPOLL | AFIO_MODE_FIXED | AFIO_LAZY_EVENTFD | \
				 AFIO_NONBLOCKING_SOCKETS | AFIO_CALLER_WRITES | AFIO_LEVEL_EVENTFD)

atomic_uint afio_fork_gen;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static int fork_watch_err;

/* Runs in the child, where only the thread that forked exists. */
static void on_fork_child(void)
{
	atomic_fetch_add_explicit(&afio_fork_gen, 1, memory_order_relaxed);
}

static void register_fork_handler(void)
{
	fork_watch_err = -pthread_atfork(NULL, NULL, on_fork_child);
}

/* Once per process, not per context: handlers cannot be unregistered, and
   a child inherits its parent's. */
static int watch_forks(void)
{
	pthread_once(&fork_once, register_fork_handler);
	return fork_watch_err;
}

/*
 * The sizes of the structures in version 0.1 and 0.2, which programs that
 * call afio_config_init() and afio_stats() by their symbols (built against
 * 0.1, or through a foreign-function interface) pass.  They never change;
 * a larger struct keeps its start.
 */
#define CONFIG_SIZE_0_1	offsetof(struct afio_config, reserved[6])
#define STATS_SIZE_0_1	offsetof(struct afio_stats, reserved[6])
_Static_assert(sizeof(struct afio_config) >= CONFIG_SIZE_0_1, "afio_config shrank");
_Static_assert(sizeof(struct afio_stats) >= STATS_SIZE_0_1, "afio_stats shrank");

unsigned afio_version(void)
{
	return AFIO_VERSION;
}

void afio_config_init_sized(struct afio_config *cfg, size_t size)
{
	if (!cfg || size < CONFIG_SIZE_0_1)
		return;
	memset(cfg, 0, size);
	cfg->backend = AFIO_BACKEND_AUTO;
	cfg->mode = AFIO_MODE_INLINE;
	cfg->entries = AFIO_DEFAULT_ENTRIES;
	cfg->threads = AFIO_DEFAULT_THREADS;
	cfg->size = (unsigned)(size < UINT_MAX ? size : UINT_MAX);
}

void (afio_config_init)(struct afio_config *cfg)
{
	afio_config_init_sized(cfg, CONFIG_SIZE_0_1);
}

/*
 * The caller's configuration, as large as it says it is: bytes this
 * library does not know must be zero, as reserved fields must.
 */
static int copy_config(struct afio_config *to, const struct afio_config *cfg)
{
	size_t size = cfg->size ? cfg->size : CONFIG_SIZE_0_1;
	const unsigned char *tail = (const unsigned char *)cfg;

	if (size < CONFIG_SIZE_0_1)
		return -EINVAL;
	for (size_t i = sizeof(*to); i < size; i++)
		if (tail[i])
			return -EINVAL;
	memset(to, 0, sizeof(*to));
	memcpy(to, cfg, size < sizeof(*to) ? size : sizeof(*to));
	to->size = sizeof(*to);
	return 0;
}

/* Only what the caller left at its default gives way to the environment;
   INLINE is the default and a choice too, which AFIO_MODE_FIXED says. */
static int apply_env(struct afio_config *cfg)
{
	const char *v;
	int ret;

	v = secure_getenv("AFIO_BACKEND");
	if (v && *v && cfg->backend == AFIO_BACKEND_AUTO) {
		ret = afio_backend_parse(v, &cfg->backend);
		if (ret)
			return ret;
	}
	v = secure_getenv("AFIO_MODE");
	if (v && *v && cfg->mode == AFIO_MODE_INLINE && !(cfg->flags & AFIO_MODE_FIXED)) {
		ret = afio_mode_parse(v, &cfg->mode);
		if (ret)
			return ret;
	}
	v = secure_getenv("AFIO_NO_FALLBACK");
	if (v && *v && strcmp(v, "0"))
		cfg->flags |= AFIO_NO_FALLBACK;
	return 0;
}

static int check_config(struct afio_config *cfg)
{
	if ((unsigned)cfg->backend > AFIO_BACKEND_LAST ||
	    (unsigned)cfg->mode > AFIO_MODE_HYBRID ||
	    (cfg->flags & ~AFIO_KNOWN_FLAGS) ||
	    cfg->entries > AFIO_MAX_ENTRIES || cfg->threads > AFIO_MAX_THREADS)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(cfg->reserved) / sizeof(cfg->reserved[0]); i++)
		if (cfg->reserved[i])
			return -EINVAL;
	if (!cfg->entries)
		cfg->entries = AFIO_DEFAULT_ENTRIES;
	return 0;
}

static size_t slots_len(const struct afio_ctx *ctx)
{
	return (size_t)ctx->cfg.entries * sizeof(*ctx->slots);
}

/*
 * Mapped, not allocated: all zero (AFIO_REQ_FREE), and a page of slots is
 * made only when a request first takes one of them (get_slot(), ops.c), so
 * that entries a program sized for its peak cost no memory until used.
 */
static int init_slots(struct afio_ctx *ctx)
{
	void *map = mmap(NULL, slots_len(ctx), PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (map == MAP_FAILED)
		return -ENOMEM;
	ctx->slots = map;
	return 0;
}

static void unmap_slots(struct afio_ctx *ctx)
{
	if (ctx->slots)
		munmap(ctx->slots, slots_len(ctx));
}

int afio_create(afio_ctx **out, const struct afio_config *cfg)
{
	struct afio_ctx *ctx;
	int ret;

	if (!out)
		return -EINVAL;
	*out = NULL;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	if (!cfg)
		afio_config_init(&ctx->cfg);
	ret = cfg ? copy_config(&ctx->cfg, cfg) : 0;
	if (ret) {
		free(ctx);
		return ret;
	}
	afio_reqq_init(&ctx->queue);
	afio_reqq_init(&ctx->rearm);
	afio_reqq_init(&ctx->done);
	afio_reqq_init(&ctx->to_pool);
	ctx->evfd = -1;

	ret = watch_forks();
	ctx->fork_gen = atomic_load_explicit(&afio_fork_gen, memory_order_relaxed);
	if (!ret)
		ret = apply_env(&ctx->cfg);
	if (!ret)
		ret = check_config(&ctx->cfg);
	ctx->threads_asked = ctx->cfg.threads;
	if (!ret)
		ret = init_slots(ctx);
	if (ret)
		goto fail;
	ctx->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (ctx->evfd < 0) {
		ret = -errno;
		goto fail;
	}
	ret = afio_select_backend(ctx);
	if (ret)
		goto fail;
	*out = ctx;
	return 0;
fail:
	if (ctx->evfd >= 0)
		close(ctx->evfd);
	unmap_slots(ctx);
	free(ctx);
	return ret;
}

/* No enumerator is negative, so -EINVAL names none of them. */
enum afio_backend afio_backend(const afio_ctx *ctx)
{
	return ctx ? ctx->primary.ops->id : (enum afio_backend)-EINVAL;
}

enum afio_mode afio_mode(const afio_ctx *ctx)
{
	return ctx ? ctx->cfg.mode : (enum afio_mode)-EINVAL;
}

int afio_eventfd(afio_ctx *ctx)
{
	int ret = afio_ctx_check(ctx);

	if (ret)
		return ret;
	if (!ctx->evfd_exported)
		ret = afio_export_eventfd(ctx);
	return ret ? ret : ctx->evfd;
}

int afio_ctx_eventfd(const struct afio_ctx *ctx)
{
	return ctx->evfd;
}

unsigned afio_ctx_flags(const struct afio_ctx *ctx)
{
	return ctx->cfg.flags;
}

enum afio_mode afio_ctx_mode(const struct afio_ctx *ctx)
{
	return ctx->cfg.mode;
}

unsigned afio_ctx_entries(const struct afio_ctx *ctx)
{
	return ctx->cfg.entries;
}

const char *afio_skip_reason(const afio_ctx *ctx, enum afio_backend b)
{
	if (!ctx || (unsigned)b > AFIO_BACKEND_LAST)
		return "";
	return ctx->skip_reason[b];
}

int afio_limits(const afio_ctx *ctx, struct afio_limits *lim)
{
	const struct afio_config *cfg;
	int ret = afio_ctx_check(ctx);

	if (ret)
		return ret;
	if (!lim)
		return -EINVAL;
	cfg = &ctx->cfg;
	memset(lim, 0, sizeof(*lim));
	lim->entries = cfg->entries;
	lim->threads = cfg->threads;
	lim->socket_waits = cfg->entries;
	if (afio_route_holds_worker(ctx->primary.ops->caps, cfg->mode) &&
	    cfg->threads < cfg->entries)
		lim->socket_waits = cfg->threads;
	return 0;
}

int afio_describe(const afio_ctx *ctx, char *buf, size_t len)
{
	const struct afio_engine *e;
	int ret = afio_ctx_check(ctx);

	if (ret)
		return ret;
	if (!buf || !len)
		return -EINVAL;
	e = &ctx->primary;
	if (e->ops->describe)
		return e->ops->describe(e, buf, len);
	return snprintf(buf, len, "%s", e->ops->name);
}

int afio_stats_sized(const afio_ctx *ctx, struct afio_stats *st, size_t size)
{
	struct afio_stats now;
	int ret = afio_ctx_check(ctx);

	if (ret)
		return ret;
	if (!st)
		return -EINVAL;
	now = ctx->st;
	now.in_flight = ctx->st.submitted - ctx->st.completed;
	if (size > sizeof(now)) {
		memset((char *)st + sizeof(now), 0, size - sizeof(now));
		size = sizeof(now);
	}
	memcpy(st, &now, size);
	return 0;
}

int (afio_stats)(const afio_ctx *ctx, struct afio_stats *st)
{
	return afio_stats_sized(ctx, st, STATS_SIZE_0_1);
}

static void exit_engine(struct afio_engine *e, bool forked)
{
	if (e->ops && forked)
		e->ops->forget(e);
	else if (e->ops)
		e->ops->exit(e);
	e->ops = NULL;
}

/* The child's copies of the dups that bind requests (bind_socket()). */
static void close_bound_copies(struct afio_ctx *ctx)
{
	for (unsigned i = 0; i < ctx->slots_used; i++) {
		const struct afio_req *r = &ctx->slots[i];

		if (r->state != AFIO_REQ_FREE && (r->shot & AFIO_SHOT_BOUND))
			close(r->fd);
	}
}

/*
 * In a child of fork() the requests in flight are the parent's, and so are
 * the kernel objects and threads that carry them: they finish in the
 * parent, and here no callback runs.  Only this process's copies go.
 */
void afio_destroy(afio_ctx *ctx)
{
	bool forked;

	if (!ctx)
		return;
	forked = afio_ctx_forked(ctx);
	if (!forked && ctx->in_poll) {
		/* From a callback: the afio_poll() or afio_destroy() that runs
		   it still walks the context, so the one of afio_poll() is
		   done when it returns, and afio_destroy() finishes its own. */
		if (!ctx->closing)
			ctx->destroy_deferred = true;
		ctx->closing = true;
		return;
	}
	if (!forked) {
		ctx->closing = true;
		afio_cancel_all(ctx);
		afio_drain(ctx);
	}
	exit_engine(&ctx->pool, forked);
	exit_engine(&ctx->primary, forked);
	if (forked)
		close_bound_copies(ctx);
	close(ctx->evfd);
	afio_bufpools_free(ctx);
	afio_fd_hints_free(ctx);
	unmap_slots(ctx);
	free(ctx);
}
