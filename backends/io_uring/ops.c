/* SPDX-License-Identifier: MIT */
/*
 * What each op is to io_uring: its opcode and since when the kernel has
 * it, how its SQE is made, the flags each mode adds, and what
 * afio_op_native(3) says of it.
 */
#include <poll.h>
#include <sys/socket.h>

#include "uring.h"

#define OP_FTRUNCATE			55		/* Linux 6.9, after liburing 2.3 */

#define MAX_RW		0x7ffff000u	/* the kernel's MAX_RW_COUNT */

static unsigned clamp_len(size_t len)
{
	/* The SQE length is 32 bits; the kernel moves at most MAX_RW anyway,
	   so a longer request ends short, as read(2) would. */
	return len < MAX_RW ? (unsigned)len : MAX_RW;
}

/* ---- one SQE per op ---- */

/* Without IOPOLL the kernel refuses RWF_HIPRI (EOPNOTSUPP), where
   preadv2(2) takes it as a hint; it is dropped, as preadv2 would ignore it
   on a device that is not polled. */
static int rw_flags(const struct afio_req *r)
{
	return r->flags & ~RWF_HIPRI;
}

static void prep_read(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_read(sqe, r->fd, r->buf, clamp_len(r->len), r->off);
}

static void prep_write(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	io_uring_prep_write(sqe, r->fd, r->buf, clamp_len(r->len), r->off);
	sqe->rw_flags = u->write_rwf;
}

/* One buffer goes as READ or WRITE, which take their flags as the vectored
   ops do and spare the kernel copying in the iovec. */
static bool one_buffer(const struct uring *u, const struct afio_req *r, enum afio_op plain)
{
	return r->len == 1 && r->iov[0].iov_len < MAX_RW && u->has_op[plain];
}

static void prep_readv(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	if (one_buffer(u, r, AFIO_OP_READ))
		io_uring_prep_read(sqe, r->fd, r->iov[0].iov_base, (unsigned)r->iov[0].iov_len,
				   r->off);
	else
		io_uring_prep_readv(sqe, r->fd, r->iov, (unsigned)r->len, r->off);
	sqe->rw_flags = rw_flags(r);
}

static void prep_writev(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	if (one_buffer(u, r, AFIO_OP_WRITE))
		io_uring_prep_write(sqe, r->fd, r->iov[0].iov_base, (unsigned)r->iov[0].iov_len,
				    r->off);
	else
		io_uring_prep_writev(sqe, r->fd, r->iov, (unsigned)r->len, r->off);
	sqe->rw_flags = rw_flags(r) | u->write_rwf;
}

static void prep_fsync(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_fsync(sqe, r->fd, r->flags & AFIO_FSYNC_DATASYNC ?
			    IORING_FSYNC_DATASYNC : 0);
}

static void prep_recv(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_recv(sqe, r->fd, r->buf, clamp_len(r->len), r->flags);
}

/* A closed peer is an error for the callback, not SIGPIPE. */
static void prep_send(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_send(sqe, r->fd, r->buf, clamp_len(r->len), r->flags | MSG_NOSIGNAL);
}

static void prep_accept(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_accept(sqe, r->fd, NULL, NULL, r->flags);
}

/* The connect, or the wait for its end (connect_goes_on()). */
static void prep_connect(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	if (u->slots[r->index].connect_waits)
		io_uring_prep_poll_add(sqe, r->fd, POLLOUT);
	else
		io_uring_prep_connect(sqe, r->fd, r->addr, (socklen_t)r->len);
}

static void prep_sendmsg(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_sendmsg(sqe, r->fd, r->msg, (unsigned)r->flags | MSG_NOSIGNAL);
}

static void prep_recvmsg(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_recvmsg(sqe, r->fd, r->msg, (unsigned)r->flags);
}

/* The kernel reads the timespec when it takes the SQE, which with SQPOLL
   is later: it lives in the slot.  The deadline is absolute, on
   CLOCK_MONOTONIC (the kernel's default clock for timeouts), since the
   call that queued it. */
static void prep_timeout(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	struct __kernel_timespec *ts = &u->io[r->index].timeout;

	ts->tv_sec = (long long)(r->off / 1000000000u);
	ts->tv_nsec = (long long)(r->off % 1000000000u);
	io_uring_prep_timeout(sqe, ts, 0, IORING_TIMEOUT_ABS);
}

/* A pooled receive: from the pool's buffer ring where the kernel has
   one, else a wait for readiness (lib/bufpool.c reads then). */
static void prep_recv_pool(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	if (!(u->pbuf_pools & (1u << r->mode))) {
		io_uring_prep_poll_add(sqe, r->fd, POLLIN);
		return;
	}
	io_uring_prep_recv(sqe, r->fd, NULL, clamp_len(r->len), r->flags);
	sqe->flags = IOSQE_BUFFER_SELECT;
	sqe->buf_group = (uint16_t)r->mode;
}

/*
 * A multishot accept, or a multishot receive from a buffer ring: one SQE
 * for all the request's results, each CQE with IORING_CQE_F_MORE but the
 * last (ring.c).  Never on io-wq: the kernel waits for readiness for it
 * all the same, and a worker would hold the buffer it picked meanwhile.
 */
void prep_native_shot(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	uint8_t *shot = &u->slots[r->index].multishot;

	if (*shot == SHOT_RETRIED)
		return;
	*shot = SHOT_NONE;
	if (!(r->shot & AFIO_SHOT_MULTI))
		return;
	if (r->op == AFIO_OP_ACCEPT && u->native_accept) {
		sqe->ioprio |= IORING_ACCEPT_MULTISHOT;
	} else if (r->op == AFIO_OP_RECV_POOL && u->native_recv &&
		   (u->pbuf_pools & (1u << r->mode))) {
		sqe->ioprio |= IORING_RECV_MULTISHOT;
		sqe->len = 0;	/* a whole buffer each time; 6.0 takes no length */
	} else {
		return;
	}
	sqe->flags &= (uint8_t)~IOSQE_ASYNC;
	*shot = SHOT_FIRST;
}

static void prep_poll_fd(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_poll_add(sqe, r->fd, (unsigned)r->flags);
}

static void prep_nop(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	(void)r;
	io_uring_prep_nop(sqe);
}

static void prep_openat(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_openat(sqe, r->fd, r->path, r->flags, (mode_t)r->mode);
}

static void prep_openat2(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_openat2(sqe, r->fd, r->path, (struct open_how *)r->how);
}

static void prep_close(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_close(sqe, r->fd);
}

static void prep_statx(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_statx(sqe, r->fd, r->path, r->flags, r->mode, r->stx);
}

static void prep_fallocate(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_fallocate(sqe, r->fd, (int)r->mode, r->off, r->len);
}

static void prep_ftruncate(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_rw(OP_FTRUNCATE, sqe, r->fd, NULL, 0, r->off);
}

static void prep_sync_range(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_sync_file_range(sqe, r->fd, (unsigned)r->len, r->off, r->flags);
}

static void prep_renameat(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_renameat(sqe, r->fd, r->path, r->fd2, r->path2, (unsigned)r->flags);
}

static void prep_unlinkat(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_unlinkat(sqe, r->fd, r->path, r->flags);
}

static void prep_mkdirat(struct uring *u, struct io_uring_sqe *sqe, struct afio_req *r)
{
	(void)u;
	io_uring_prep_mkdirat(sqe, r->fd, r->path, (mode_t)r->mode);
}

/* What each op needs from the kernel, and since when; an op whose opcode
   the probe does not find goes to the thread pool.  sendfile is prepared
   by sendfile_start(), as a chain. */
const struct uring_op uring_ops[AFIO_OP_COUNT] = {
	[AFIO_OP_READ] = { IORING_OP_READ, "READ", "5.6", prep_read },
	[AFIO_OP_WRITE] = { IORING_OP_WRITE, "WRITE", "5.6", prep_write },
	[AFIO_OP_READV] = { IORING_OP_READV, "READV", "5.1", prep_readv },
	[AFIO_OP_WRITEV] = { IORING_OP_WRITEV, "WRITEV", "5.1", prep_writev },
	[AFIO_OP_FSYNC] = { IORING_OP_FSYNC, "FSYNC", "5.1", prep_fsync },
	[AFIO_OP_RECV] = { IORING_OP_RECV, "RECV", "5.6", prep_recv },
	[AFIO_OP_SEND] = { IORING_OP_SEND, "SEND", "5.6", prep_send },
	[AFIO_OP_ACCEPT] = { IORING_OP_ACCEPT, "ACCEPT", "5.5", prep_accept },
	[AFIO_OP_CONNECT] = { IORING_OP_CONNECT, "CONNECT", "5.5", prep_connect },
	[AFIO_OP_SENDMSG] = { IORING_OP_SENDMSG, "SENDMSG", "5.3", prep_sendmsg },
	[AFIO_OP_RECVMSG] = { IORING_OP_RECVMSG, "RECVMSG", "5.3", prep_recvmsg },
	[AFIO_OP_SENDFILE] = { IORING_OP_SPLICE, "SPLICE", "5.7", NULL },
	[AFIO_OP_TIMEOUT] = { IORING_OP_TIMEOUT, "TIMEOUT", "5.4", prep_timeout },
	[AFIO_OP_OPENAT] = { IORING_OP_OPENAT, "OPENAT", "5.6", prep_openat },
	[AFIO_OP_OPENAT2] = { IORING_OP_OPENAT2, "OPENAT2", "5.6", prep_openat2 },
	[AFIO_OP_CLOSE] = { IORING_OP_CLOSE, "CLOSE", "5.6", prep_close },
	[AFIO_OP_STATX] = { IORING_OP_STATX, "STATX", "5.6", prep_statx },
	[AFIO_OP_FALLOCATE] = { IORING_OP_FALLOCATE, "FALLOCATE", "5.6", prep_fallocate },
	[AFIO_OP_FTRUNCATE] = { OP_FTRUNCATE, "FTRUNCATE", "6.9", prep_ftruncate },
	[AFIO_OP_SYNC_RANGE] = { IORING_OP_SYNC_FILE_RANGE, "SYNC_FILE_RANGE", "5.2",
				 prep_sync_range },
	[AFIO_OP_RENAMEAT] = { IORING_OP_RENAMEAT, "RENAMEAT", "5.11", prep_renameat },
	[AFIO_OP_UNLINKAT] = { IORING_OP_UNLINKAT, "UNLINKAT", "5.11", prep_unlinkat },
	[AFIO_OP_MKDIRAT] = { IORING_OP_MKDIRAT, "MKDIRAT", "5.15", prep_mkdirat },
	[AFIO_OP_NOP] = { IORING_OP_NOP, "NOP", "5.1", prep_nop },
	[AFIO_OP_RECV_POOL] = { IORING_OP_POLL_ADD, "POLL_ADD", "5.1", prep_recv_pool },
	[AFIO_OP_POLL_FD] = { IORING_OP_POLL_ADD, "POLL_ADD", "5.1", prep_poll_fd },
};

int uring_op_kernel(const struct afio_engine *e, enum afio_op op, char *buf, size_t len)
{
	const struct uring *u = e->priv;
	const struct uring_op *uo = &uring_ops[op];

	if (!u->has_op[op]) {
		afio_reason(buf, len, "IORING_OP_%s is not in this kernel (Linux %s+)",
			    uo->name, uo->since);
		return 0;
	}
	if (op == AFIO_OP_SENDFILE)
		afio_reason(buf, len, "IORING_OP_SPLICE file->pipe->socket");
	else if (op == AFIO_OP_SYNC_RANGE)
		afio_reason(buf, len, "IORING_OP_SYNC_FILE_RANGE; ranges over 4 GiB the pool");
	else if (op == AFIO_OP_RECV_POOL)
		afio_reason(buf, len, "IORING_OP_RECV, buffer ring (5.19+), %s; "
			    "else IORING_OP_POLL_ADD", u->native_recv ?
			    "kernel multishot (6.0+)" : "one SQE per shot");
	else if (op == AFIO_OP_ACCEPT)
		afio_reason(buf, len, "IORING_OP_ACCEPT, %s", u->native_accept ?
			    "kernel multishot (5.19+)" : "one SQE per shot");
	else if (op == AFIO_OP_STATX)
		afio_reason(buf, len, "IORING_OP_STATX, which the kernel's workers do in "
			    "every mode");
	else
		afio_reason(buf, len, "IORING_OP_%s", uo->name);
	return 1;
}
