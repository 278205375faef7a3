/* SPDX-License-Identifier: MIT */
/* Placeholder until the libaio backend lands: reports itself unavailable. */
#include <errno.h>

#include "backend.h"

static int libaio_probe(const struct afio_config *cfg, char *reason, size_t len)
{
	(void)cfg;
	afio_reason(reason, len, "libaio: backend not implemented yet");
	return -ENOSYS;
}

const struct afio_backend_ops afio_backend_libaio = {
	.id = AFIO_BACKEND_LIBAIO,
	.name = "libaio",
	.probe = libaio_probe,
};
