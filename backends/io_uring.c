/* SPDX-License-Identifier: MIT */
/* Placeholder until the io_uring backend lands: reports itself unavailable. */
#include <errno.h>

#include "backend.h"

static int io_uring_probe(const struct afio_config *cfg, char *reason, size_t len)
{
	(void)cfg;
	afio_reason(reason, len, "io_uring: backend not implemented yet");
	return -ENOSYS;
}

const struct afio_backend_ops afio_backend_io_uring = {
	.id = AFIO_BACKEND_IO_URING,
	.name = "io_uring",
	.probe = io_uring_probe,
};
