/* SPDX-License-Identifier: MIT */
/*
 * sendfile on one backend in one mode (from argv): a big file over TCP
 * byte for byte, ranges and short counts, the errors sendfile(2) gives,
 * no SIGPIPE from any request, the AFIO_NONBLOCKING_SOCKETS promise, and
 * a burst of a hundred sendfiles at once.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "asyncfio.h"
#include "testutil.h"

/* A connected TCP pair on loopback. */
static void tcp_pair(int *client, int *server)
{
	struct sockaddr_in addr;
	int l = tu_tcp_listener(1, false, &addr);

	*client = tu_tcp_socket(false);
	tu_connect_to(*client, &addr);
	*server = tu_accept_now(l);
	close(l);
}

#define BIG_FILE (4u << 20)

/*
 * A 4 MiB file over TCP loopback, in as many sendfiles as it takes, read by
 * a thread: the peer gets the file byte for byte and nothing more, and the
 * file position stays where it was.  _i: the socket is O_NONBLOCK.
 */
START_TEST(test_sendfile_tcp)
{
	unsigned char *bytes = tu_random_bytes(BIG_FILE, 42);
	afio_ctx *ctx = tu_new_ctx();
	int file = tu_data_file(bytes, BIG_FILE), client, server;
	struct tu_reader r;
	unsigned rounds;

	tcp_pair(&client, &server);
	if (_i)
		tu_set_nonblock(client, true);
	ck_assert_int_eq(lseek(file, 777, SEEK_SET), 777);
	tu_reader_start(&r, server, BIG_FILE);
	rounds = tu_sendfile_all(ctx, client, file, 0, BIG_FILE);
	ck_assert_int_eq(shutdown(client, SHUT_WR), 0);
	tu_reader_join(&r);
	ck_assert_msg(r.got == BIG_FILE, "the peer got %zu bytes of %u (%u sendfiles)", r.got,
		      BIG_FILE, rounds);
	ck_assert_msg(!memcmp(r.buf, bytes, BIG_FILE), "the peer got other bytes than the file's");
	ck_assert_msg(lseek(file, 0, SEEK_CUR) == 777,
		      "sendfile on %s moved the file position to %lld", tu_target_name(),
		      (long long)lseek(file, 0, SEEK_CUR));
	afio_destroy(ctx);
	free(r.buf);
	free(bytes);
	close(file);
	close(client);
	close(server);
}
END_TEST

/* Ranges: from an offset, past the end (a short count), at the end (0). */
START_TEST(test_sendfile_ranges)
{
	enum { LEN = 100000 };
	unsigned char *bytes = tu_random_bytes(LEN, 7);
	afio_ctx *ctx = tu_new_ctx();
	int file = tu_data_file(bytes, LEN), client, server;

	tcp_pair(&client, &server);
	if (_i)
		tu_set_nonblock(client, true);
	tu_sendfile_all(ctx, client, file, 1000, 5000);
	tu_expect_bytes(server, bytes + 1000, 5000);
	/* Asked for more than is left: the rest, then 0 at the end. */
	tu_sendfile_all(ctx, client, file, LEN - 10, 10);
	tu_expect_bytes(server, bytes + LEN - 10, 10);
	{
		ssize_t res = TU_RUN(ctx, afio_sendfile(ctx, client, file, LEN - 10, 100,
							tu_on_done, &d));

		ck_assert_msg(res > 0 && res <= 10, "sendfile over the end on %s: %s",
			      tu_target_name(), tu_res_str(res));
		tu_expect_bytes(server, bytes + LEN - 10, (size_t)res);
	}
	TU_EXPECT(ctx, 0, afio_sendfile(ctx, client, file, LEN, 100, tu_on_done, &d));
	TU_EXPECT(ctx, 0, afio_sendfile(ctx, client, file, LEN + 4096, 100, tu_on_done, &d));
	afio_destroy(ctx);
	free(bytes);
	close(file);
	close(client);
	close(server);
}
END_TEST

START_TEST(test_sendfile_errors)
{
	afio_ctx *ctx = tu_new_ctx();
	int file = tu_new_file(0), sv[2], other[2], wronly;
	char path[64];
	off_t off = 0;
	ssize_t want;

	ck_assert_int_eq(pwrite(file, "abc", 3, 0), 3);
	tu_socketpair(sv);
	tu_socketpair(other);
	TU_EXPECT(ctx, -EBADF, afio_sendfile(ctx, tu_closed_fd(), file, 0, 3, tu_on_done, &d));
	TU_EXPECT(ctx, -EBADF, afio_sendfile(ctx, sv[0], tu_closed_fd(), 0, 3, tu_on_done, &d));
	/* A file not open for reading: EBADF, as sendfile(2) says. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", file);
	wronly = open(path, O_WRONLY | O_CLOEXEC);
	ck_assert_int_ge(wronly, 0);
	want = tu_sys_res(sendfile(sv[0], wronly, &off, 3));
	ck_assert_int_lt(want, 0);
	TU_EXPECT(ctx, want, afio_sendfile(ctx, sv[0], wronly, 0, 3, tu_on_done, &d));
	/* Bytes from a socket, which has no offsets: what sendfile(2) says. */
	ck_assert_int_eq(write(other[1], "xyz", 3), 3);
	off = 0;
	want = tu_sys_res(sendfile(sv[0], other[0], &off, 3));
	ck_assert_int_lt(want, 0);
	TU_EXPECT(ctx, want, afio_sendfile(ctx, sv[0], other[0], 0, 3, tu_on_done, &d));
	afio_destroy(ctx);
	close(wronly);
	close(file);
	close(sv[0]);
	close(sv[1]);
	close(other[0]);
	close(other[1]);
}
END_TEST

static volatile sig_atomic_t sigpipes;

static void on_sigpipe(int sig)
{
	(void)sig;
	sigpipes++;
}

/*
 * "No request raises SIGPIPE" (asyncfio(7)), sendmsg without MSG_NOSIGNAL
 * and sendfile included, where sendfile(2) itself would raise it: -EPIPE
 * and no signal.  _i: the socket is O_NONBLOCK (tried in the caller).
 */
START_TEST(test_no_sigpipe)
{
	struct sigaction count = { .sa_handler = on_sigpipe }, old;
	afio_ctx *ctx = tu_new_ctx();
	struct iovec iov = { "x", 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	int file = tu_new_file(0), sv[2];

	ck_assert_int_eq(pwrite(file, "abc", 3, 0), 3);
	ck_assert_int_eq(sigaction(SIGPIPE, &count, &old), 0);
	sigpipes = 0;
	tu_socketpair(sv);
	tu_set_nonblock(sv[0], _i);
	close(sv[1]);
	TU_EXPECT(ctx, -EPIPE, afio_sendmsg(ctx, sv[0], &m, 0, tu_on_done, &d));
	ck_assert_msg(sigpipes == 0, "sendmsg on %s raised SIGPIPE", tu_target_name());
	TU_EXPECT(ctx, -EPIPE, afio_sendfile(ctx, sv[0], file, 0, 3, tu_on_done, &d));
	ck_assert_msg(sigpipes == 0, "sendfile on %s raised SIGPIPE", tu_target_name());
	ck_assert_int_eq(sigaction(SIGPIPE, &old, NULL), 0);
	afio_destroy(ctx);
	close(sv[0]);
	close(file);
}
END_TEST

/*
 * AFIO_NONBLOCKING_SOCKETS, the promise kept (O_NONBLOCK sockets, SIGPIPE
 * ignored): a file larger than the socket's buffer still arrives whole
 * over TCP, and a peer that went away gives -EPIPE.
 */
START_TEST(test_promised_nonblocking)
{
	unsigned char *bytes = tu_random_bytes(BIG_FILE, 7);
	struct sigaction ignore = { .sa_handler = SIG_IGN }, old;
	int file = tu_data_file(bytes, BIG_FILE), client, server, sv[2];
	struct tu_reader r;
	afio_ctx *ctx;

	ck_assert_int_eq(sigaction(SIGPIPE, &ignore, &old), 0);
	ctx = tu_ctx_flagged(tu_backend, tu_mode, 0, AFIO_NONBLOCKING_SOCKETS);
	tcp_pair(&client, &server);
	tu_set_nonblock(client, true);
	tu_reader_start(&r, server, BIG_FILE);
	tu_sendfile_all(ctx, client, file, 0, BIG_FILE);
	ck_assert_int_eq(shutdown(client, SHUT_WR), 0);
	tu_reader_join(&r);
	ck_assert_msg(r.got == BIG_FILE && !memcmp(r.buf, bytes, BIG_FILE),
		      "the peer got %zu bytes of %u, or other bytes", r.got, BIG_FILE);
	tu_socketpair(sv);
	tu_set_nonblock(sv[0], true);
	close(sv[1]);
	TU_EXPECT(ctx, -EPIPE, afio_sendfile(ctx, sv[0], file, 0, 3, tu_on_done, &d));
	ck_assert_int_eq(sigaction(SIGPIPE, &old, NULL), 0);
	afio_destroy(ctx);
	free(r.buf);
	free(bytes);
	close(sv[0]);
	close(file);
	close(client);
	close(server);
}
END_TEST

/*
 * More sendfiles at once than the pool has workers, twice over, each to
 * its own socket: every peer gets its own range (on io_uring the second
 * round takes the pipes the first gave back, which must be empty and of
 * the size they were made with), and once the context is gone no
 * descriptor it made is left open.
 */
START_TEST(test_sendfile_burst)
{
	enum { SOCKS = 100, PART = 16384 };
	unsigned char *bytes = tu_random_bytes((size_t)SOCKS * PART, 11);
	int file = tu_data_file(bytes, (size_t)SOCKS * PART), sv[SOCKS][2];
	int fds_before = tu_count_fds();
	struct tu_done d[SOCKS];
	afio_ctx *ctx = tu_ctx(tu_backend, tu_mode, 2 * SOCKS);

	for (int i = 0; i < SOCKS; i++)
		tu_socketpair(sv[i]);
	for (int round = 0; round < 2; round++) {
		memset(d, 0, sizeof(d));
		for (int i = 0; i < SOCKS; i++) {
			/* Each round sends another socket's range. */
			uint64_t off = (uint64_t)((i + round) % SOCKS) * PART;

			tu_queued(afio_sendfile(ctx, sv[i][0], file, off, PART, tu_on_done, &d[i]),
				  "afio_sendfile");
		}
		ck_assert_int_ge(afio_submit(ctx), 0);
		for (int i = 0; i < SOCKS; i++) {
			tu_wait_done(ctx, &d[i]);
			ck_assert_msg(d[i].calls == 1 && d[i].res == PART,
				      "sendfile %d of round %d on %s: %d calls, %s", i, round,
				      tu_target_name(), d[i].calls, tu_res_str(d[i].res));
			tu_expect_bytes(sv[i][1], bytes + (size_t)((i + round) % SOCKS) * PART, PART);
		}
	}
	afio_destroy(ctx);
	for (int i = 0; i < SOCKS; i++) {
		close(sv[i][0]);
		close(sv[i][1]);
	}
	ck_assert_msg(tu_count_fds() == fds_before, "%d fds open after the context is gone, %d before",
		      tu_count_fds(), fds_before);
	close(file);
	free(bytes);
}
END_TEST

/* How many pages of the file's first len bytes are in the page cache
   (the test made the file, so mincore(2) answers for it). */
static size_t resident_pages(int fd, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = (len + page - 1) / page, n = 0;
	unsigned char vec[pages];
	void *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);

	ck_assert_ptr_ne(map, MAP_FAILED);
	ck_assert_int_eq(mincore(map, len, vec), 0);
	for (size_t i = 0; i < pages; i++)
		n += vec[i] & 1;
	munmap(map, len);
	return n;
}

static bool all_resident(int fd, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	return resident_pages(fd, len) == (len + page - 1) / page;
}

/*
 * Evicts the file's first len bytes; false where some pages stay.  A page
 * that something still holds (a socket buffer of a splice not yet freed,
 * another CPU's LRU batch) is skipped by POSIX_FADV_DONTNEED, and a range
 * whose first and last pages stayed would look cached to the probe of
 * afio_sendfile(3), which looks at those two only: the call is repeated
 * until none stays.
 */
static bool evict(int fd, size_t len)
{
	for (int i = 0; i < 50; i++) {
		ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
		if (!resident_pages(fd, len))
			return true;
		usleep(10000);
	}
	return false;
}

/* One sendfile of `ask` bytes from the start of a file of len bytes, on
   an O_NONBLOCK socket with room for them; whether it finished in the
   caller (stats' nowait). */
static bool sent_at_once(afio_ctx *ctx, int sock, int peer, int file,
			 const unsigned char *bytes, size_t len, size_t ask)
{
	struct afio_stats before, after;

	ck_assert_int_eq(afio_stats(ctx, &before), 0);
	TU_EXPECT(ctx, (ssize_t)len, afio_sendfile(ctx, sock, file, 0, ask, tu_on_done, &d));
	ck_assert_int_eq(afio_stats(ctx, &after), 0);
	tu_expect_bytes(peer, bytes, len);
	return after.nowait > before.nowait;
}

/*
 * INLINE mode sends a range wholly in the page cache in the caller and
 * gives an evicted one, and one past the end of the file, to a worker
 * (asyncfio(7): the caller never waits for the device), where
 * cachestat(2) answers and (_i) where it is refused with EPERM, as it is
 * to a server's unprivileged workers for files they may not write: a
 * seccomp filter refuses it here, in this test's own process.  Refused,
 * the pages are asked by reads with RWF_NOWAIT, which some file systems
 * (tmpfs) do not take: there every range goes to a worker.  Where the
 * caller does not try (afio_sendfile(3): the modes other than INLINE, but
 * for libaio's HYBRID), the bytes only.
 */
START_TEST(test_sendfile_residency)
{
	enum { LEN = 65536 };
	static const long deny[] = { SYS_cachestat };
	unsigned char *bytes = tu_random_bytes(LEN, 5);
	int file = tu_data_file(bytes, LEN), sv[2];
	afio_ctx *ctx;
	bool caller_tries = tu_mode == AFIO_MODE_INLINE ||
			    (tu_backend == AFIO_BACKEND_LIBAIO && tu_mode == AFIO_MODE_HYBRID);
	bool at_once, probes = true;
	char byte;
	struct iovec one = { &byte, 1 };

	if (_i) {
		probes = preadv2(file, &one, 1, 0, RWF_NOWAIT) == 1 || errno != EOPNOTSUPP;
		ck_assert_int_eq(tu_deny_syscalls(deny, 1), 0);
	}
	ctx = tu_new_ctx();
	tu_socketpair(sv);
	tu_set_nonblock(sv[0], true);

	ck_assert_int_eq(fsync(file), 0);
	ck_assert_msg(all_resident(file, LEN), "a file just written is not in the page cache");
	at_once = sent_at_once(ctx, sv[0], sv[1], file, bytes, LEN, LEN);
	ck_assert_msg(at_once == (caller_tries && probes),
		      "%s, cachestat %s: a cached range %s in the caller", tu_target_name(),
		      _i ? "refused" : "answering", at_once ? "went" : "did not go");
	at_once = sent_at_once(ctx, sv[0], sv[1], file, bytes, LEN, LEN + 3 * 4096);
	ck_assert_msg(!at_once, "%s, cachestat %s: a range past the end went in the caller",
		      tu_target_name(), _i ? "refused" : "answering");

	if (!evict(file, LEN)) {
		/* tmpfs keeps every page; elsewhere at least one went */
		ck_assert_msg(all_resident(file, LEN), "%zu of %d pages stay in the page cache",
			      resident_pages(file, LEN), LEN / 4096);
		fprintf(stderr, "%s: the file stays in memory (tmpfs?), its evicted part skipped\n",
			__func__);
	} else {
		at_once = sent_at_once(ctx, sv[0], sv[1], file, bytes, LEN, LEN);
		ck_assert_msg(!at_once, "%s, cachestat %s: an evicted range was sent by the caller",
			      tu_target_name(), _i ? "refused" : "answering");
	}
	afio_destroy(ctx);
	close(sv[0]);
	close(sv[1]);
	close(file);
	free(bytes);
}
END_TEST

static Suite *sendfile_suite(void)
{
	Suite *s = suite_create("sendfile");
	TCase *sendfile = tu_tcase(s, "sendfile");

	tcase_add_loop_test(sendfile, test_sendfile_tcp, 0, 2);
	tcase_add_loop_test(sendfile, test_sendfile_ranges, 0, 2);
	tcase_add_test(sendfile, test_sendfile_errors);
	tcase_add_loop_test(sendfile, test_no_sigpipe, 0, 2);
	tcase_add_test(sendfile, test_promised_nonblocking);
	tcase_add_test(sendfile, test_sendfile_burst);
	tcase_add_loop_test(sendfile, test_sendfile_residency, 0, 2);
	return s;
}

int main(int argc, char **argv)
{
	return tu_main(argc, argv, sendfile_suite);
}
