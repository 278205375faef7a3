/* SPDX-License-Identifier: MIT */
#ifndef AFIO_CONTEXT_H
#define AFIO_CONTEXT_H

#include <stdbool.h>

#include "asyncfio.h"
#include "backend.h"
#include "request.h"

#define AFIO_REASON_LEN 192

struct afio_ctx {
	struct afio_engine primary;
	struct afio_engine pool;	/* ops NULL until something is routed */
	struct afio_reqq queue;		/* accepted, not yet handed over */
	struct afio_reqq done;		/* finished, callbacks pending */
	struct afio_reqq to_pool;	/* routed by the primary, for the pool */
	struct afio_req *free_slots;
	struct afio_req *slots;
	struct afio_config cfg;
	struct afio_stats st;
	int evfd;
	bool in_poll;
	bool evfd_exported;		/* afio_eventfd() was called */
	bool closing;
	char skip_reason[AFIO_BACKEND_MAX + 1][AFIO_REASON_LEN];
};

int afio_select_backend(struct afio_ctx *ctx);

/* The eventfd is the application's from now on. */
void afio_export_eventfd(struct afio_ctx *ctx);

/* Cancel everything queued or in flight (destroy). */
void afio_cancel_all(struct afio_ctx *ctx);
/* Reap and run callbacks until nothing is in flight (destroy). */
void afio_drain(struct afio_ctx *ctx);

#endif
