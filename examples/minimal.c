/* SPDX-License-Identifier: MIT */
/*
 * minimal FILE HOST PORT: connects to HOST:PORT over TCP and sends FILE.
 *
 * The smallest complete program on libasyncfio.  It owns its epoll loop,
 * in which libasyncfio adds one descriptor, afio_eventfd(); when that is
 * readable, afio_poll(ctx, 0, 0) runs the callbacks of what finished.  One
 * request is in flight at a time: a read of the next chunk of the file,
 * or a send of what that read brought.  Exit status: 0 once every byte
 * was sent, 1 on an error, 2 for a wrong command line.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "asyncfio.h"

struct copy {
	afio_ctx *ctx;
	int file_fd, sock_fd;
	uint64_t off;		/* where the next read starts */
	size_t len, sent;	/* bytes in buf, and how many of them went */
	const char *what;	/* what failed first, and with which -errno */
	int err;
	bool done;
	char buf[64 * 1024];
};

static void on_read(void *data, ssize_t res);
static void on_sent(void *data, ssize_t res);

/* Only the first error counts: afio_destroy() completes what is still in
   flight with -ECANCELED, which is a consequence, not the cause. */
static void fail(struct copy *c, const char *what, int err)
{
	if (!c->err) {
		c->what = what;
		c->err = err;
	}
	c->done = true;
}

static void read_next(struct copy *c)
{
	int ret = afio_read(c->ctx, c->file_fd, c->buf, sizeof(c->buf), c->off, on_read, c);

	if (ret)
		fail(c, "afio_read", ret);
}

static void send_rest(struct copy *c)
{
	int ret = afio_send(c->ctx, c->sock_fd, c->buf + c->sent, c->len - c->sent, 0,
			    on_sent, c);

	if (ret)
		fail(c, "afio_send", ret);
}

/* res: bytes read, 0 at the end of the file, or -errno. */
static void on_read(void *data, ssize_t res)
{
	struct copy *c = data;

	if (res <= 0) {
		if (res)
			fail(c, "reading the file", (int)res);
		c->done = true;
		return;
	}
	c->off += (uint64_t)res;
	c->len = (size_t)res;
	c->sent = 0;
	send_rest(c);
}

static void on_sent(void *data, ssize_t res)
{
	struct copy *c = data;

	if (res < 0) {
		fail(c, "sending", (int)res);
		return;
	}
	/* A send may take only part of the buffer when the peer reads slowly. */
	c->sent += (size_t)res;
	if (c->sent < c->len)
		send_rest(c);
	else
		read_next(c);
}

/* A plain blocking connect: the program has nothing else to do meanwhile. */
static int connect_to(const char *host, const char *port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai, *p;
	int fd = -1, err = getaddrinfo(host, port, &hints, &ai);

	if (err) {
		fprintf(stderr, "minimal: %s port %s: %s\n", host, port, gai_strerror(err));
		return -1;
	}
	for (p = ai; p && fd < 0; p = p->ai_next) {
		fd = socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol);
		if (fd >= 0 && connect(fd, p->ai_addr, p->ai_addrlen)) {
			err = errno;
			close(fd);
			fd = -1;
		} else if (fd < 0) {
			err = errno;
		}
	}
	freeaddrinfo(ai);
	if (fd < 0)
		fprintf(stderr, "minimal: connecting to %s port %s: %s\n", host, port,
			strerror(err));
	return fd;
}

static void run(struct copy *c)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int ep = epoll_create1(EPOLL_CLOEXEC), n, ret;

	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, afio_eventfd(c->ctx), &ev)) {
		fail(c, "epoll", -errno);
	} else {
		read_next(c);
		/* Nothing reaches the kernel before this (or afio_poll()). */
		ret = afio_submit(c->ctx);
		if (ret < 0)
			fail(c, "afio_submit", ret);
	}
	while (!c->done) {
		n = epoll_wait(ep, &ev, 1, -1);
		if (n < 0 && errno != EINTR)
			fail(c, "epoll_wait", -errno);
		/* The only descriptor is the eventfd: run the callbacks of what
		   finished, and submit what they queue, without waiting. */
		ret = n > 0 ? afio_poll(c->ctx, 0, 0) : 0;
		if (ret < 0)
			fail(c, "afio_poll", ret);
	}
	if (ep >= 0)
		close(ep);
}

int main(int argc, char **argv)
{
	static struct copy c;
	int ret;

	if (argc != 4) {
		fprintf(stderr, "usage: minimal FILE HOST PORT\n");
		return 2;
	}
	c.file_fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (c.file_fd < 0) {
		fprintf(stderr, "minimal: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	c.sock_fd = connect_to(argv[2], argv[3]);
	if (c.sock_fd < 0)
		return 1;
	ret = afio_create(&c.ctx, NULL);	/* AFIO_BACKEND, AFIO_MODE may choose */
	if (ret) {
		fprintf(stderr, "minimal: afio_create: %s\n", strerror(-ret));
		return 1;
	}
	run(&c);
	/* Before the descriptors close: it ends what an error left in flight. */
	afio_destroy(c.ctx);
	close(c.sock_fd);
	close(c.file_fd);
	if (c.err) {
		fprintf(stderr, "minimal: %s: %s\n", c.what, strerror(-c.err));
		return 1;
	}
	return 0;
}
