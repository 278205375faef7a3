/* SPDX-License-Identifier: MIT */
/* afio-probe: which backends run here, why the others do not, and what AUTO picks. */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>

#include "asyncfio.h"

static void show_sysctl(const char *name, const char *path)
{
	char buf[64] = "";
	FILE *f = fopen(path, "r");

	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		fclose(f);
		buf[strcspn(buf, "\n")] = '\0';
	}
	printf("  %-26s %s\n", name, f ? buf : "(absent)");
}

static void show_memlock(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl))
		return;
	if (rl.rlim_cur == RLIM_INFINITY)
		printf("  %-26s unlimited\n", "RLIMIT_MEMLOCK");
	else
		printf("  %-26s %llu KiB\n", "RLIMIT_MEMLOCK",
		       (unsigned long long)rl.rlim_cur / 1024);
}

/* Where each op runs on backend b here, INLINE mode. */
static void show_ops(enum afio_backend b)
{
	struct afio_config cfg;
	char how[256];
	afio_ctx *ctx;
	int native;

	afio_config_init(&cfg);
	cfg.backend = b;
	cfg.mode = AFIO_MODE_INLINE;
	cfg.flags = AFIO_NO_FALLBACK;
	if (afio_create(&ctx, &cfg))
		return;
	printf("ops on %s, mode %s:\n", afio_backend_name(b), afio_mode_name(afio_mode(ctx)));
	for (unsigned op = 0; op < afio_op_count(); op++) {
		native = afio_op_native(ctx, op, how, sizeof(how));
		printf("  %-11s %-7s %s\n", afio_op_name(op), native > 0 ? "native" : "pool", how);
	}
	afio_destroy(ctx);
}

int main(void)
{
	static const enum afio_backend all[] = {
		AFIO_BACKEND_IO_URING, AFIO_BACKEND_LIBAIO, AFIO_BACKEND_THREADS,
	};
	char reason[256], desc[256];
	struct utsname u;
	afio_ctx *ctx;
	int ret;

	printf("backends:\n");
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		ret = afio_probe(all[i], reason, sizeof(reason));
		printf("  %-9s %-13s %s\n", afio_backend_name(all[i]),
		       ret ? "unavailable" : "available", reason);
	}

	ret = afio_create(&ctx, NULL);
	if (ret) {
		printf("auto: no backend: %s\n", strerror(-ret));
	} else {
		afio_describe(ctx, desc, sizeof(desc));
		printf("auto picks: %s, mode %s\n  %s\n", afio_backend_name(afio_backend(ctx)),
		       afio_mode_name(afio_mode(ctx)), desc);
		afio_destroy(ctx);
	}

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		show_ops(all[i]);

	printf("kernel facts:\n");
	if (!uname(&u))
		printf("  %-26s %s\n", "release", u.release);
	show_sysctl("kernel.io_uring_disabled", "/proc/sys/kernel/io_uring_disabled");
	show_sysctl("kernel.io_uring_group", "/proc/sys/kernel/io_uring_group");
	show_sysctl("fs.aio-max-nr", "/proc/sys/fs/aio-max-nr");
	show_sysctl("fs.aio-nr", "/proc/sys/fs/aio-nr");
	show_memlock();
	return ret ? 1 : 0;
}
