/* SPDX-License-Identifier: MIT */
/* Built outside the tree against the installed library, with pkg-config only. */
#include <asyncfio.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void on_done(void *data, ssize_t res)
{
	*(ssize_t *)data = res;
}

int main(void)
{
	ssize_t sent = -1, got = -1;
	char buf[16] = "";
	afio_ctx *ctx;
	int sv[2], ret;

	ret = afio_create(&ctx, NULL);
	if (ret) {
		fprintf(stderr, "afio_create: %s\n", strerror(-ret));
		return 1;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 1;
	afio_send(ctx, sv[0], "consumer", 8, 0, on_done, &sent);
	afio_recv(ctx, sv[1], buf, sizeof(buf), 0, on_done, &got);
	while (sent < 0 || got < 0)
		if (afio_poll(ctx, 1, -1) < 0)
			return 1;
	printf("%s: sent %zd, received %zd \"%.*s\"\n", afio_backend_name(afio_backend(ctx)),
	       sent, got, (int)got, buf);
	afio_destroy(ctx);
	return got == 8 && !memcmp(buf, "consumer", 8) ? 0 : 1;
}
