/* Process 0 listens at MASTER_ADDR:MASTER_PORT; every other process connects
 * there and says who it is (HELLO, its rank, the port it listens at itself
 * and its WORLD_SIZE); process 0 answers with HELLO and its WORLD_SIZE and,
 * once all have come, where each one listens (the address it saw the
 * process come from), and each process connects to the next one, making a
 * ring, and says HELLO and its rank there. A process that cannot start (a bad option, a bad variable) says
 * so instead: to process 0 as a hello of REFUSED with its message, and
 * process 0 to the others as its answer; all end at once, naming it.
 * A sum is a ring all-reduce: the data in n chunks, each summed once
 * along the ring to the process that owns it (reduce-scatter), then passed
 * round whole (all-gather), so that every process ends with the same bits. */
#include "comm/comm_tcp.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/strbuf.h"
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { MAX_PROCESSES = 65536 };
/* "TSp2": a ts-train process, this version of the join ("TSp1": before
 * the processes said HELLO to each other in the ring) */
static const int32_t HELLO = 0x54537032;
static const int32_t REFUSED = 0x54537030; /* "TSp0": the process cannot start; its message follows */
static const int32_t TAKEN = 0x54537054;   /* "TSpT": process 0's answer to a process whose rank has come */
enum { MAX_MESSAGE = 2048, REFUSAL_S = 5 };
/* Process 0 keeps at most PENDING_MAX connections that have not said who
 * they are, each at most HELLO_S seconds (a process says it at once), and
 * names the first STRAYS_TOLD strangers it drops. */
enum { PENDING_MAX = 64, HELLO_S = 10, STRAYS_TOLD = 10 };
enum { MISSING_TOLD = 5 };   /* the processes that did not come, named at --comm-timeout */

/* Where a process listens, as process 0 tells the others. */
struct peer {
	struct sockaddr_storage addr;
	socklen_t len;
};

static int left_fd = -1, right_fd = -1;   /* from the previous process, to the next */
static int left_rank, right_rank;
static int self_rank;   /* this process's, which its lines begin with */
static struct sockaddr_storage if_addr;   /* --net-if's address (family 0: none) */
static socklen_t if_len;
/* While the processes join: process 0's listener at MASTER_PORT and the
 * connections of those that came (seen[r]: process r came, or refused). */
static int master_fd = -1, *waiting;
static char *seen;
/* Nothing to tell: the processes joined, or (on another than process 0) it
 * reached process 0, or found it cannot. */
static int told;

void tcp_use_if(const char *name)
{
	struct ifaddrs *all, *i;
	if (getifaddrs(&all) < 0)
		die("--net-if %s: cannot list the network interfaces: %s", name, strerror(errno));
	char names[256] = "";
	for (i = all; i; i = i->ifa_next) {
		if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
			continue;
		if (!strcmp(i->ifa_name, name) && (!if_len || i->ifa_addr->sa_family == AF_INET)) {
			if_len = i->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
			memcpy(&if_addr, i->ifa_addr, if_len);
		}
		if (!strstr(names, i->ifa_name) && strlen(names) + strlen(i->ifa_name) + 3 < sizeof names)
			snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", *names ? ", " : "",
				 i->ifa_name);
	}
	freeifaddrs(all);
	if (!if_len)
		die("--net-if %s: no network interface of that name with an address here (%s)", name, names);
}

static int tcp_launched(void)
{
	return getenv("WORLD_SIZE") != NULL;
}

/* Whether v is a whole number in [min, max], then in *x (digits alone,
 * no blank before them). */
static int whole_in(const char *v, long min, long max, long *x)
{
	char *end;
	errno = 0;
	*x = strtol(v, &end, 10);
	return *v && !isspace((unsigned char)*v) && !*end && !errno && *x >= min && *x <= max;
}

/* An environment variable as an integer in [min, max]. */
static long env_int(const char *name, long min, long max, long fallback)
{
	const char *v = getenv(name);
	long x;
	if (!v)
		return fallback;
	if (!whole_in(v, min, max, &x))
		die("%s=%s: not a whole number from %ld to %ld", name, v, min, max);
	return x;
}

static const char *env_str(const char *name)
{
	const char *v = getenv(name);
	if (!v || !*v)
		die("WORLD_SIZE is set, so %s must be too (with RANK, MASTER_ADDR and MASTER_PORT)", name);
	return v;
}

/* Writes or reads all of buf on fd by the deadline; returns 0, or -1 when
 * the deadline passed, or -2 when the other end closed. */
static int move_by(int fd, void *buf, size_t n, int out, double deadline)
{
	char *p = buf;
	while (n) {
		struct pollfd pf = { fd, (short)(out ? POLLOUT : POLLIN), 0 };
		double left = deadline - clock_seconds();
		int ready = left > 0 ? poll(&pf, 1, (int)(left * 1000) + 1) : 0;
		if (ready == 0)
			return -1;
		if (ready < 0 && errno == EINTR)
			continue;
		if (ready < 0)
			return -2;
		/* never waiting in the call itself, where no deadline holds: a
		 * peer that stops reading takes part of a large send, then none */
		ssize_t k = out ? send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) : recv(fd, p, n, MSG_DONTWAIT);
		if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN))
			return -2;
		if (k > 0)
			p += k, n -= (size_t)k;
	}
	return 0;
}

/* move_by, dying naming process who (-1: one not known yet). */
static void move_all(int fd, void *buf, size_t n, int out, double deadline, int who)
{
	char name[32] = "a process";
	if (who >= 0)
		snprintf(name, sizeof name, "process %d", who);
	int rc = move_by(fd, buf, n, out, deadline);
	if (rc == -1)
		die("process %d: no answer from %s in time (--comm-timeout); ending the run", self_rank, name);
	if (rc == -2)
		die("process %d: %s closed its connection (it ended?)", self_rank, name);
}

/* A refusal's message, as its length says (at most MAX_MESSAGE bytes). */
static void read_message(int fd, int32_t len, double deadline, int who, char text[MAX_MESSAGE + 1])
{
	if (len < 0 || len > MAX_MESSAGE)
		die("process %d could not start (its message is garbled)", who);
	move_all(fd, text, (size_t)len, 0, deadline, who);
	text[len] = 0;
}

static int listener(struct sockaddr *addr, socklen_t len)
{
	int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int on = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) < 0 || bind(fd, addr, len) < 0 ||
	    listen(fd, 64) < 0)
		return -1;
	return fd;
}

static int accept_by(int lfd, double deadline, struct sockaddr_storage *from, socklen_t *len)
{
	struct pollfd pf = { lfd, POLLIN, 0 };
	double left = deadline - clock_seconds();
	if (left <= 0 || poll(&pf, 1, (int)(left * 1000) + 1) <= 0)
		return -1;
	*len = sizeof *from;
	return accept4(lfd, (struct sockaddr *)from, len, SOCK_CLOEXEC);
}

static void set_port(struct sockaddr_storage *a, int port)
{
	if (a->ss_family == AF_INET6)
		((struct sockaddr_in6 *)a)->sin6_port = htons((uint16_t)port);
	else
		((struct sockaddr_in *)a)->sin_port = htons((uint16_t)port);
}

/* connect(2) of fd to addr, given up at the deadline: a host that drops
 * the handshake (a full backlog, a firewall) holds a blocking connect for
 * the kernel's retries, minutes past --comm-timeout. */
static int connect_until(int fd, const struct sockaddr *addr, socklen_t len, double deadline)
{
	int flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -1;
	int rc = connect(fd, addr, len);
	if (rc < 0 && errno == EINPROGRESS) {
		struct pollfd pf = { fd, POLLOUT, 0 };
		double left;
		while ((left = deadline - clock_seconds()) > 0 &&
		       (rc = poll(&pf, 1, (int)fmin(left * 1000 + 1, INT_MAX))) < 0 && errno == EINTR)
			;
		int err = 0;
		socklen_t n = sizeof err;
		rc = rc > 0 && !getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &n) && !err ? 0 : -1;
	}
	return rc == 0 && fcntl(fd, F_SETFL, flags) == 0 ? 0 : -1;
}

/* Connects to addr, trying again until the deadline (the other process may
 * not listen yet). */
static int connect_by(const struct sockaddr *addr, socklen_t len, double deadline)
{
	for (;;) {
		int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_storage from = if_addr;   /* --net-if: leave from its address */
		if (fd >= 0 && if_len && from.ss_family == addr->sa_family) {
			set_port(&from, 0);
			if (bind(fd, (struct sockaddr *)&from, if_len) < 0)
				die("--net-if: cannot use its address: %s", strerror(errno));
		}
		if (fd >= 0 && connect_until(fd, addr, len, deadline) == 0) {
			int on = 1;
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
			return fd;
		}
		if (fd >= 0)
			close(fd);
		if (clock_seconds() > deadline)
			return -1;
		struct timespec ts = { 0, 50 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

/* A listener on any address of addr's family, at port (0: any); returns it
 * and sets *port. */
static int listen_any(int family, int port, int *bound)
{
	struct sockaddr_storage a = { 0 };
	socklen_t len;
	if (family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&a;
		s6->sin6_family = AF_INET6, s6->sin6_addr = in6addr_any, s6->sin6_port = htons((uint16_t)port);
		len = sizeof *s6;
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&a;
		s4->sin_family = AF_INET, s4->sin_addr.s_addr = htonl(INADDR_ANY), s4->sin_port = htons((uint16_t)port);
		len = sizeof *s4;
	}
	int fd = listener((struct sockaddr *)&a, len);
	if (fd < 0)
		return -1;
	len = sizeof a;
	getsockname(fd, (struct sockaddr *)&a, &len);
	*bound = ntohs(family == AF_INET6 ? ((struct sockaddr_in6 *)&a)->sin6_port : ((struct sockaddr_in *)&a)->sin_port);
	return fd;
}

/* A connection at MASTER_PORT that has not yet said who it is. Process 0
 * waits on many at once, so that a stranger that says nothing (a port
 * scanner, a health check) holds up no process that comes after it. */
struct pending {
	int fd;
	struct sockaddr_storage from;
	socklen_t len;
	int32_t hello[4];
	size_t got;              /* bytes of the hello so far */
	double since;
};

/* The address and port of a connection's other end, as numbers. */
static void name_of(const struct sockaddr_storage *from, socklen_t len, char host[NI_MAXHOST], char serv[NI_MAXSERV])
{
	strcpy(host, "?"), strcpy(serv, "?");
	getnameinfo((const struct sockaddr *)from, len, host, NI_MAXHOST, serv, NI_MAXSERV,
		    NI_NUMERICHOST | NI_NUMERICSERV);
}

/* Closes connection fd, which is no process of this run, with a line on
 * stderr naming where it came (at) and from where (the first STRAYS_TOLD;
 * then one more line for all the rest). */
static void drop_connection(int fd, const struct sockaddr_storage *from, socklen_t len, const char *at,
			    const char *why, long *strays)
{
	char host[NI_MAXHOST], serv[NI_MAXSERV];
	name_of(from, len, host, serv);
	if (++*strays <= STRAYS_TOLD)
		warnx("process %d: dropped a connection at %s from %s port %s: %s", self_rank, at, host, serv, why);
	else if (*strays == STRAYS_TOLD + 1)
		warnx("process %d: more connections that are no ts-train processes came at %s: dropping them "
		      "without a word", self_rank, at);
	close(fd);
}

/* drop_connection of a connection at MASTER_PORT. */
static void drop_stray(struct pending *p, int port, const char *why, long *strays)
{
	char at[48];
	snprintf(at, sizeof at, "port %d (MASTER_PORT)", port);
	drop_connection(p->fd, &p->from, p->len, at, why, strays);
}

/* Process 0: answers a process whose rank r has come already (RANK given
 * twice, or a process of another run at the same MASTER_ADDR:MASTER_PORT)
 * that it has, and drops it: the run goes on without it. */
static void turn_away(struct pending *p, int r, double deadline)
{
	char host[NI_MAXHOST], serv[NI_MAXSERV];
	int32_t answer[2] = { TAKEN, r };
	name_of(&p->from, p->len, host, serv);
	warnx("process 0: turned away a second process %d from %s port %s (RANK given twice, or a process of "
	      "another run at MASTER_PORT)", r, host, serv);
	move_by(p->fd, answer, sizeof answer, 1, fmin(deadline, clock_seconds() + HELLO_S));
	close(p->fd);
}

/* Process 0, a whole hello in p: 1 when it was process r's (its connection
 * then in fds[r], its address in peers[r]), 0 for a stranger or a second
 * process r, dropped.
 * Dies for what only a process of another run or version could say, or a
 * process that could not start. */
static int welcome(const struct comm *c, struct pending *p, int port, int *fds, struct peer *peers,
		   double deadline, long *strays)
{
	int32_t *hello = p->hello, answer[2] = { HELLO, c->size };
	if (hello[0] == REFUSED && hello[1] > 0 && hello[1] < c->size) {
		char why[MAX_MESSAGE + 1];
		seen[hello[1]] = 1;
		read_message(p->fd, hello[2], deadline, hello[1], why);
		close(p->fd);
		die("process %d could not start: %s", hello[1], why);
	}
	if (((uint32_t)hello[0] & 0xffffff00u) == ((uint32_t)HELLO & 0xffffff00u) && hello[0] != HELLO)
		die("process 0: a ts-train process of another version connected at port %d (MASTER_PORT)", port);
	if (hello[0] != HELLO) {
		drop_stray(p, port, "it is no ts-train process (it did not say hello)", strays);
		return 0;
	}
	if (hello[3] != c->size) {
		move_all(p->fd, answer, sizeof answer, 1, deadline, hello[1]);
		die("process 0: process %d came with WORLD_SIZE=%d, this one has %d", hello[1], hello[3], c->size);
	}
	if (hello[1] < 1 || hello[1] >= c->size || hello[2] < 1 || hello[2] > 65535)
		die("process 0: a process came as rank %d of %d, which is out of range (RANK)", hello[1], c->size);
	if (fds[hello[1]]) {
		turn_away(p, hello[1], deadline);
		return 0;
	}
	fds[hello[1]] = p->fd;
	seen[hello[1]] = 1;
	peers[hello[1]].addr = p->from;
	peers[hello[1]].len = p->len;
	set_port(&peers[hello[1]].addr, hello[2]);
	return 1;
}

/* Reads what came on pending connection i of *n; a whole hello is
 * welcomed, a closed connection dropped, and either taken off the list.
 * Returns the processes that came (0 or 1). */
static int hear(const struct comm *c, struct pending *pend, int *n, int i, int port, int *fds, struct peer *peers,
		double deadline, long *strays)
{
	struct pending *p = &pend[i];
	ssize_t k = recv(p->fd, (char *)p->hello + p->got, sizeof p->hello - p->got, MSG_DONTWAIT);
	if (k < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	int came = 0;
	if (k <= 0)
		drop_stray(p, port, "it closed the connection before it said who it is", strays);
	else if ((p->got += (size_t)k) < sizeof p->hello)
		return 0;
	else
		came = welcome(c, p, port, fds, peers, deadline, strays);
	pend[i] = pend[--*n];
	return came;
}

/* Process 0, when --comm-timeout is up: dies naming the first
 * MISSING_TOLD processes that did not come (fds[r] 0), then their count. */
static void die_missing(const struct comm *c, const int *fds, int came)
{
	struct strbuf who = {0};
	int missing = 0;
	for (int r = 1; r < c->size; r++)
		if (!fds[r] && ++missing <= MISSING_TOLD)
			sb_addf(&who, "%s%d", missing > 1 ? ", " : "", r);
	if (missing > MISSING_TOLD)
		sb_addf(&who, " and %d more", missing - MISSING_TOLD);
	sb_addc(&who, 0);
	die("process 0: only %d of %d processes came in %g s (--comm-timeout); missing: process%s %s", came, c->size,
	    c->timeout_s, missing > 1 ? "es" : "", who.s);
}

/* Process 0: takes every other process's rank and port, answers with the
 * table; counts the strangers it dropped in c->strays. */
static void gather_peers(struct comm *c, int master, int port, struct peer *peers, double deadline)
{
	int *fds = waiting = xcalloc((size_t)c->size, sizeof *fds);
	seen = xcalloc((size_t)c->size, 1);
	struct pending pend[PENDING_MAX];
	struct pollfd pf[PENDING_MAX + 1];
	int n = 0, came = 1;
	long strays = 0;
	while (came < c->size) {
		double now = clock_seconds(), wake = deadline;
		if (now >= deadline)
			die_missing(c, fds, came);
		for (int i = n - 1; i >= 0; i--)   /* the last moves down to fill a gap: from the top */
			if (now - pend[i].since > HELLO_S) {
				drop_stray(&pend[i], port, "it said nothing in time", &strays);
				pend[i] = pend[--n];
			} else if (pend[i].since + HELLO_S < wake) {
				wake = pend[i].since + HELLO_S;
			}
		pf[0] = (struct pollfd){ master, POLLIN, 0 };
		for (int i = 0; i < n; i++)
			pf[i + 1] = (struct pollfd){ pend[i].fd, POLLIN, 0 };
		if (poll(pf, (nfds_t)n + 1, (int)((wake - now) * 1000) + 1) < 0 && errno != EINTR)
			die("process 0: poll: %s", strerror(errno));
		for (int i = n - 1; i >= 0; i--)   /* hear drops from the list by moving the last down */
			if (pf[i + 1].revents)
				came += hear(c, pend, &n, i, port, fds, peers, deadline, &strays);
		if (!(pf[0].revents & POLLIN))
			continue;
		struct pending p = { .len = sizeof p.from, .since = clock_seconds() };
		p.fd = accept4(master, (struct sockaddr *)&p.from, &p.len, SOCK_CLOEXEC);
		if (p.fd < 0)
			continue;   /* gone before it was taken, or out of descriptors a moment */
		if (n == PENDING_MAX) {   /* the longest silent goes, so that no number of them fills the list */
			int oldest = 0;
			for (int i = 1; i < n; i++)
				oldest = pend[i].since < pend[oldest].since ? i : oldest;
			drop_stray(&pend[oldest], port, "too many connections said nothing at once", &strays);
			pend[oldest] = pend[--n];
		}
		pend[n++] = p;
	}
	for (int i = 0; i < n; i++)
		drop_stray(&pend[i], port, "every process had come", &strays);
	c->strays = strays;
	for (int r = 1; r < c->size; r++) {
		int32_t answer[2] = { HELLO, c->size };
		move_all(fds[r], answer, sizeof answer, 1, deadline, r);
		move_all(fds[r], peers, sizeof *peers * (size_t)c->size, 1, deadline, r);
		close(fds[r]);
		fds[r] = 0;
	}
}

/* The previous process's connection at listener ring (at port): one that
 * says no hello (a port scanner, a health check) is dropped, and the
 * listener waits on for the previous process until the deadline. */
static int accept_left(const struct comm *c, int ring, int port, double deadline)
{
	char at[64];
	snprintf(at, sizeof at, "port %d (where process %d connects to it)", port, left_rank);
	long strays = 0;
	for (;;) {
		struct sockaddr_storage from;
		socklen_t len;
		int fd = accept_by(ring, deadline, &from, &len);
		if (fd < 0 && clock_seconds() < deadline)
			continue;   /* a signal, or one gone before it was taken */
		if (fd < 0)
			die("process %d: process %d did not connect in %g s", c->rank, left_rank, c->timeout_s);
		int32_t hello[2];
		int rc = move_by(fd, hello, sizeof hello, 0, fmin(deadline, clock_seconds() + HELLO_S));
		if (!rc && hello[0] == HELLO && hello[1] != left_rank)
			die("process %d: process %d connected where %d should", c->rank, hello[1], left_rank);
		if (!rc && hello[0] == HELLO)
			return fd;
		drop_connection(fd, &from, len, at,
				rc == -1   ? "it said nothing in time"
				: rc == -2 ? "it closed the connection before it said who it is"
					   : "it is no ts-train process (it did not say hello)",
				&strays);
	}
}

/* Names the network interface whose address socket fd leaves from. */
static void interface_of(int fd, char *name, size_t len)
{
	struct sockaddr_storage me;
	socklen_t n = sizeof me;
	struct ifaddrs *all;
	if (getsockname(fd, (struct sockaddr *)&me, &n) < 0 || getifaddrs(&all) < 0)
		return;
	for (struct ifaddrs *i = all; i; i = i->ifa_next) {
		const struct sockaddr *a = i->ifa_addr;
		if (!a || a->sa_family != me.ss_family)
			continue;
		int same = a->sa_family == AF_INET
				   ? ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
					     ((struct sockaddr_in *)&me)->sin_addr.s_addr
				   : !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
					     &((struct sockaddr_in6 *)&me)->sin6_addr, sizeof(struct in6_addr));
		if (same) {
			snprintf(name, len, "%s", i->ifa_name);
			break;
		}
	}
	freeifaddrs(all);
}

/* getaddrinfo of MASTER_ADDR host at port, a TCP one; an IPv6 address in
 * brackets ([::1], as torchrun takes it) without them. */
static int master_addr(const char *host, const char *port, struct addrinfo **ai)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
	char bare[NI_MAXHOST];
	size_t n = strlen(host);
	if (n > 2 && n - 2 < sizeof bare && host[0] == '[' && host[n - 1] == ']') {
		memcpy(bare, host + 1, n - 2);
		bare[n - 2] = 0;
		host = bare;
	}
	return getaddrinfo(host, port, &hints, ai);
}

static void tcp_open(struct comm *c, const struct transport *under)
{
	(void)under;
	c->size = (int)env_int("WORLD_SIZE", 1, MAX_PROCESSES, 1);
	c->rank = (int)env_int("RANK", 0, c->size - 1, -1);
	if (c->rank < 0)
		die("WORLD_SIZE is set, so RANK must be too (0 to %d)", c->size - 1);
	self_rank = c->rank;
	/* without LOCAL_WORLD_SIZE (a launch by hand may give LOCAL_RANK alone)
	 * comm_open counts the processes of each machine: local_size 0 */
	int local = getenv("LOCAL_WORLD_SIZE") != NULL;
	c->local_size = local ? (int)env_int("LOCAL_WORLD_SIZE", 1, c->size, 1) : 0;
	c->local_rank = (int)env_int("LOCAL_RANK", 0, (local ? c->local_size : c->size) - 1, 0);
	if (c->size == 1)
		return;
	const char *host = env_str("MASTER_ADDR"), *port = env_str("MASTER_PORT");
	env_int("MASTER_PORT", 1, 65535, 0);
	struct addrinfo *ai;
	int rc = master_addr(host, port, &ai);
	if (rc)
		die("MASTER_ADDR=%s: %s", host, gai_strerror(rc));
	double deadline = clock_seconds() + c->timeout_s;
	struct peer *peers = xcalloc((size_t)c->size, sizeof *peers);
	int ring_port, ring = listen_any(ai->ai_family, 0, &ring_port);
	if (ring < 0)
		die("process %d: cannot listen for the next process: %s", c->rank, strerror(errno));
	if (c->rank == 0) {
		int master_port;
		master_fd = listen_any(ai->ai_family, atoi(port), &master_port);
		if (master_fd < 0)
			die("process 0: cannot listen at port %s (MASTER_PORT): %s", port, strerror(errno));
		memcpy(&peers[0].addr, ai->ai_addr, ai->ai_addrlen);
		peers[0].len = ai->ai_addrlen;
		set_port(&peers[0].addr, ring_port);
		gather_peers(c, master_fd, master_port, peers, deadline);
	} else {
		int fd = connect_by(ai->ai_addr, ai->ai_addrlen, deadline);
		told = 1;
		if (fd < 0)
			die("process %d: cannot reach process 0 at %s:%s in %g s (MASTER_ADDR, MASTER_PORT)", c->rank, host,
			    port, c->timeout_s);
		int32_t hello[4] = { HELLO, c->rank, ring_port, c->size }, answer[2];
		move_all(fd, hello, sizeof hello, 1, deadline, 0);
		move_all(fd, answer, sizeof answer, 0, deadline, 0);
		if (answer[0] == REFUSED) {
			char why[MAX_MESSAGE + 1];
			read_message(fd, answer[1], deadline, 0, why);
			die("process %d: process 0 could not start: %s", c->rank, why);
		}
		if (answer[0] == TAKEN)
			die("process %d: process 0 has a process %d already (RANK given twice, or a process of another "
			    "run at MASTER_ADDR:MASTER_PORT)", c->rank, c->rank);
		if (answer[0] != HELLO)
			die("process %d: something that is no ts-train process of this version answered at %s:%s "
			    "(MASTER_ADDR, MASTER_PORT)", c->rank, host, port);
		if (answer[1] != c->size)
			die("process %d: WORLD_SIZE=%d here, %d at process 0", c->rank, c->size, answer[1]);
		move_all(fd, peers, sizeof *peers * (size_t)c->size, 0, deadline, 0);
		close(fd);
	}
	freeaddrinfo(ai);
	right_rank = (c->rank + 1) % c->size;
	left_rank = (c->rank + c->size - 1) % c->size;
	right_fd = connect_by((struct sockaddr *)&peers[right_rank].addr, peers[right_rank].len, deadline);
	if (right_fd < 0)
		die("process %d: cannot reach process %d in %g s", c->rank, right_rank, c->timeout_s);
	int32_t hello[2] = { HELLO, c->rank };
	move_all(right_fd, hello, sizeof hello, 1, deadline, right_rank);
	left_fd = accept_left(c, ring, ring_port, deadline);
	int on = 1;
	setsockopt(left_fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
	close(ring);
	free(peers);
	interface_of(right_fd, c->net_if, sizeof c->net_if);
	if (master_fd >= 0)
		close(master_fd);
	master_fd = -1;
	free(waiting);
	free(seen);
	waiting = NULL;
	seen = NULL;
	told = 1;
}

/* An environment variable as an integer in [min, max], or -1: read while
 * dying, where a bad one is no more than a launch this process cannot tell. */
static long env_int_or_none(const char *name, long min, long max)
{
	const char *v = getenv(name);
	long x;
	return v && whole_in(v, min, max, &x) ? x : -1;
}

/* Process 0, dying before the processes joined: the refusal as the answer
 * to each process that came or comes within REFUSAL_S seconds. */
static void refuse_all(int size, int family, int port, const char *msg, int32_t len, double deadline)
{
	int32_t answer[2] = { REFUSED, len };
	if (!seen) {
		seen = xcalloc((size_t)size, 1);
		seen[0] = 1;
	}
	for (int r = 1; waiting && r < size; r++)
		if (waiting[r] > 0 && !move_by(waiting[r], answer, sizeof answer, 1, deadline))
			move_by(waiting[r], (void *)msg, (size_t)len, 1, deadline);
	int bound, left = 0;
	for (int r = 1; r < size; r++)
		left += !seen[r];
	if (left && master_fd < 0)
		master_fd = listen_any(family, port, &bound);
	while (left-- > 0 && master_fd >= 0) {
		struct sockaddr_storage from;
		socklen_t n;
		int32_t hello[4];
		int fd = accept_by(master_fd, deadline, &from, &n);
		if (fd < 0)
			return;
		if (!move_by(fd, hello, sizeof hello, 0, deadline) && hello[0] == HELLO &&
		    !move_by(fd, answer, sizeof answer, 1, deadline))
			move_by(fd, (void *)msg, (size_t)len, 1, deadline);
		close(fd);
	}
}

void tcp_refuse(const char *message)
{
	if (told || !tcp_launched())
		return;
	long size = env_int_or_none("WORLD_SIZE", 2, MAX_PROCESSES), rank = env_int_or_none("RANK", 0, size - 1);
	const char *host = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
	struct addrinfo *ai;
	if (size < 0 || rank < 0 || !host || !port || env_int_or_none("MASTER_PORT", 1, 65535) < 0 ||
	    master_addr(host, port, &ai))
		return;
	int32_t len = (int32_t)strnlen(message, MAX_MESSAGE);
	double deadline = clock_seconds() + REFUSAL_S;
	if (rank == 0)
		refuse_all((int)size, ai->ai_family, atoi(port), message, len, deadline);
	else {
		int fd = connect_by(ai->ai_addr, ai->ai_addrlen, deadline);
		int32_t hello[4] = { REFUSED, (int32_t)rank, len, (int32_t)size };
		if (fd >= 0 && !move_by(fd, hello, sizeof hello, 1, deadline))
			move_by(fd, (void *)message, (size_t)len, 1, deadline);
		if (fd >= 0)
			close(fd);
	}
	freeaddrinfo(ai);
}

/* Sends out[0..nout) to the next process while receiving in[0..nin) from the
 * previous one, neither waiting on the other. */
static void exchange(const struct comm *c, const char *out, size_t nout, char *in, size_t nin)
{
	double deadline = clock_seconds() + c->timeout_s;
	while (nout || nin) {
		struct pollfd pf[2] = { { right_fd, nout ? POLLOUT : 0, 0 }, { left_fd, nin ? POLLIN : 0, 0 } };
		double left = deadline - clock_seconds();
		if (left <= 0 || poll(pf, 2, (int)(left * 1000) + 1) == 0)
			die("process %d: no answer from process %d in %g s (--comm-timeout; it hangs, or one it waits for); "
			    "ending the run", c->rank, nin ? left_rank : right_rank, c->timeout_s);
		if (pf[0].revents) {
			ssize_t k = send(right_fd, out, nout, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (k < 0 && errno != EAGAIN && errno != EINTR)
				die("process %d: process %d closed its connection (it ended?)", c->rank, right_rank);
			if (k > 0)
				out += k, nout -= (size_t)k;
		}
		if (pf[1].revents) {
			ssize_t k = recv(left_fd, in, nin, MSG_DONTWAIT);
			if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR))
				die("process %d: process %d closed its connection (it ended?)", c->rank, left_rank);
			if (k > 0)
				in += k, nin -= (size_t)k;
		}
	}
}

/* Chunk i of n elements among size processes, as comm_shard's. */
static void chunk(size_t n, int size, int i, size_t *from, size_t *to)
{
	struct comm c = { .rank = i, .size = size };
	comm_shard(&c, n, from, to);
}

/* Reduce-scatter: after p-1 rounds process r holds chunk r summed. */
static void reduce_scatter(const struct comm *c, char *base, size_t n, int dbl)
{
	int p = c->size;
	size_t es = dbl ? sizeof(double) : sizeof(float);
	char *buf = xmalloc((n / (size_t)p + 1) * es);
	for (int s = 0; s < p - 1; s++) {
		size_t sf, st, rf, rt;
		chunk(n, p, (c->rank - s - 1 + 2 * p) % p, &sf, &st);
		chunk(n, p, (c->rank - s - 2 + 2 * p) % p, &rf, &rt);
		exchange(c, base + sf * es, (st - sf) * es, buf, (rt - rf) * es);
		if (dbl)
			for (size_t i = rf; i < rt; i++)
				((double *)base)[i] += ((double *)buf)[i - rf];
		else
			for (size_t i = rf; i < rt; i++)
				((float *)base)[i] += ((float *)buf)[i - rf];
	}
	free(buf);
}

/* All-gather: each process's chunk r passed round as it is. */
static void all_gather(const struct comm *c, char *base, size_t n, size_t es)
{
	int p = c->size;
	for (int s = 0; s < p - 1; s++) {
		size_t sf, st, rf, rt;
		chunk(n, p, (c->rank - s + p) % p, &sf, &st);
		chunk(n, p, (c->rank - s - 1 + 2 * p) % p, &rf, &rt);
		exchange(c, base + sf * es, (st - sf) * es, base + rf * es, (rt - rf) * es);
	}
}

/* Sums started by tcp_start_sum, run in order by a thread of their own
 * while the caller computes; every other collective waits for them first,
 * so that one thread at a time uses the ring. */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thread;
	int running, quit;
	const struct comm *c;
	struct { float *x; size_t n; } *q;
	size_t cap, queued, done;
	double last_done;   /* when the last one finished */
} bg = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER };

static void *run_started(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&bg.mu);
	for (;;) {
		while (!bg.quit && bg.done == bg.queued)
			pthread_cond_wait(&bg.cv, &bg.mu);
		if (bg.done == bg.queued)
			break;
		float *x = bg.q[bg.done].x;
		size_t n = bg.q[bg.done].n;
		pthread_mutex_unlock(&bg.mu);
		reduce_scatter(bg.c, (char *)x, n, 0);
		all_gather(bg.c, (char *)x, n, sizeof *x);
		pthread_mutex_lock(&bg.mu);
		bg.done++;
		bg.last_done = clock_seconds();
		pthread_cond_broadcast(&bg.cv);
	}
	pthread_mutex_unlock(&bg.mu);
	return NULL;
}

static void tcp_start_sum(const struct comm *c, float *x, size_t n)
{
	pthread_mutex_lock(&bg.mu);
	if (!bg.running) {
		bg.c = c;
		if (pthread_create(&bg.thread, NULL, run_started, NULL))
			die("cannot start the thread of the gradient's sums");
		bg.running = 1;
	}
	grow(&bg.q, &bg.cap, bg.queued + 1, sizeof *bg.q);
	bg.q[bg.queued].x = x;
	bg.q[bg.queued++].n = n;
	pthread_cond_broadcast(&bg.cv);
	pthread_mutex_unlock(&bg.mu);
}

/* Returns when the started sums are done: when the last one finished. */
static double wait_started(void)
{
	pthread_mutex_lock(&bg.mu);
	while (bg.done != bg.queued)
		pthread_cond_wait(&bg.cv, &bg.mu);
	bg.done = bg.queued = 0;
	double t = bg.last_done;
	pthread_mutex_unlock(&bg.mu);
	return t;
}

static void tcp_wait_sums(const struct comm *c, struct sum_times *t)
{
	(void)c;
	double t0 = clock_seconds();
	sum_times_on_host(t, t0, wait_started());
}

static void tcp_sum(const struct comm *c, void *x, size_t n, int dbl)
{
	wait_started();
	reduce_scatter(c, x, n, dbl);
	all_gather(c, x, n, dbl ? sizeof(double) : sizeof(float));
}

static void tcp_reduce_scatter(const struct comm *c, float *x, size_t n)
{
	wait_started();
	reduce_scatter(c, (char *)x, n, 0);
}

static void tcp_all_gather(const struct comm *c, float *x, size_t n)
{
	wait_started();
	all_gather(c, (char *)x, n, sizeof *x);
}

static void tcp_close(void)
{
	if (bg.running) {
		pthread_mutex_lock(&bg.mu);
		bg.quit = 1;
		pthread_cond_broadcast(&bg.cv);
		pthread_mutex_unlock(&bg.mu);
		pthread_join(bg.thread, NULL);
		free(bg.q);
		bg.q = NULL, bg.cap = bg.queued = bg.done = 0, bg.running = bg.quit = 0;
	}
	if (right_fd >= 0)
		close(right_fd);
	if (left_fd >= 0)
		close(left_fd);
	left_fd = right_fd = -1;
}

static int tcp_progress(void)
{
	return 0;   /* the sums move on, on their thread */
}

const struct transport tcp_transport = {
	"tcp ring", tcp_launched, tcp_open, tcp_close, tcp_sum, tcp_reduce_scatter, tcp_all_gather,
	tcp_start_sum, tcp_progress, tcp_wait_sums,
};
