/* Starting a sweep's jobs and stopping them: directly (no shell) on this
 * machine, or through ssh on a server that shares the file system. */
#include "sweep/launch.h"
#include "run/rundir.h"
#include "sweep/sweep.h"
#include "util/afile.h"
#include "util/err.h"
#include "util/strbuf.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

char *sweep_job_dir(const char *dir, int i)
{
	char name[32];
	snprintf(name, sizeof name, "job-%03d", i + 1);
	return path_join(dir, name);
}

char **sweep_at(const struct sweep_place *pl, char **argv, int add_j, char threads[16])
{
	int n = 0;
	while (argv[n])
		n++;
	char **v = xcalloc((size_t)n + 5, sizeof *v);
	memcpy(v, argv, (size_t)n * sizeof *v);
	snprintf(threads, 16, "%d", pl->threads);
	if (add_j && pl->threads > 0)
		v[n++] = "-j", v[n++] = threads;
	char *device = pl->gpus ? NULL : sweep_option(argv, "device", 0);
	if (!pl->gpus && !device)
		v[n++] = "--device", v[n++] = "cpu";
	free(device);
	return v;
}

/* In a job's process of its own (lead): a stop to pass on to its processes. */
static volatile sig_atomic_t stop_passed;

static void on_stop(int sig)
{
	(void)sig;
	stop_passed = 1;
}

/* A command line for a remote shell: "cd CWD && exec ARGV", each word quoted. */
static char *remote_command(const char *cwd, char **argv)
{
	struct strbuf b = {0};
	char *q = shell_quote(cwd);
	sb_addf(&b, "cd %s && exec", q);
	free(q);
	for (; *argv; argv++) {
		q = shell_quote(*argv);
		sb_addf(&b, " %s", q);
		free(q);
	}
	sb_addc(&b, 0);
	return b.s;
}

char **launch_placed(const struct launcher *l, const struct sweep_place *pl, char **argv)
{
	if (!pl->host)
		return argv;
	char **v = xcalloc((size_t)l->nssh + 4, sizeof *v);
	for (int k = 0; k < l->nssh; k++)
		v[k] = l->ssh[k];
	v[l->nssh] = pl->host;
	v[l->nssh + 1] = "--";
	v[l->nssh + 2] = remote_command(l->cwd, argv);
	return v;
}

/* A TCP port free on this machine now, for a job's process 0 to listen at. */
static int free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, len) < 0 || getsockname(fd, (struct sockaddr *)&a, &len) < 0)
		die("cannot find a free port:");
	close(fd);
	return ntohs(a.sin_port);
}

/* In a job's own process: starts its k processes as a launch by the
 * environment (as torchrun would), passes a stop (SIGINT, SIGTERM, or
 * SIGHUP as a terminal closed sends it) on to them, and returns the first
 * failure's exit status, else 0. */
static int lead(char **argv, int k)
{
	struct sigaction stop = {.sa_handler = on_stop};
	sigaction(SIGINT, &stop, NULL);
	sigaction(SIGTERM, &stop, NULL);
	sigaction(SIGHUP, &stop, NULL);
	char port[16], size[16];
	snprintf(port, sizeof port, "%d", free_port());
	snprintf(size, sizeof size, "%d", k);
	pid_t *kids = xcalloc((size_t)k, sizeof *kids);
	for (int r = 0; r < k; r++) {
		char rank[16];
		snprintf(rank, sizeof rank, "%d", r);
		if ((kids[r] = fork()) < 0)
			die("cannot start a job's process:");
		if (kids[r] == 0) {
			signal(SIGINT, SIG_DFL), signal(SIGTERM, SIG_DFL), signal(SIGHUP, SIG_DFL);
			setenv("WORLD_SIZE", size, 1), setenv("LOCAL_WORLD_SIZE", size, 1);
			setenv("RANK", rank, 1), setenv("LOCAL_RANK", rank, 1);
			setenv("MASTER_ADDR", "127.0.0.1", 1), setenv("MASTER_PORT", port, 1);
			execvp(argv[0], argv);
			dprintf(2, "ts-sweep: cannot run %s: %s\n", argv[0], strerror(errno));
			_exit(127);
		}
	}
	int rc = 0, left = k, passed = 0;
	while (left) {
		if (stop_passed && !passed) {
			for (int r = 0; r < k; r++)
				kill(kids[r], SIGTERM);
			passed = 1;
		}
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG);
		if (pid < 0 && errno != EINTR)
			break;
		if (pid <= 0) {
			struct timespec pause = {0, 50 * 1000 * 1000};
			nanosleep(&pause, NULL);
			continue;
		}
		left--;
		int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		if (code && !rc)
			rc = code;
	}
	return rc;
}

/* In a job's process: a sweep killed outright (SIGKILL, no handler to
 * pass the stop on) stops its jobs as a stop would, so that none runs on
 * unwatched, racing the sweep's --resume for its run dir. */
static void stop_with(pid_t sweep)
{
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != sweep)   /* it died before the prctl */
		_exit(128 + SIGTERM);
}

pid_t launch_start(const struct launcher *l, const struct sweep_place *pl, int i, char **argv)
{
	char *run = sweep_job_dir(l->dir, i), *out = xmalloc(strlen(run) + 5);
	sprintf(out, "%s.out", run);
	int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0)
		die("cannot create %s:", out);
	fflush(NULL);
	pid_t sweep = getpid(), pid = fork();
	if (pid < 0)
		die("cannot start a job:");
	if (pid == 0) {
		signal(SIGINT, SIG_DFL), signal(SIGTERM, SIG_DFL), signal(SIGHUP, SIG_DFL);
		stop_with(sweep);
		int null = open("/dev/null", O_RDONLY);
		if (null < 0 || dup2(null, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		if (chdir(l->cwd) < 0) {
			dprintf(2, "ts-sweep: cannot enter %s: %s\n", l->cwd, strerror(errno));
			_exit(127);
		}
		if (pl->gpus) {   /* its GPUs, numbered as nvidia-smi numbers them */
			setenv("CUDA_VISIBLE_DEVICES", pl->gpus, 1);
			setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);
		}
		char **cmd = launch_placed(l, pl, argv);
		if (pl->procs > 1)
			_exit(lead(cmd, pl->procs));
		execvp(cmd[0], cmd);
		dprintf(2, "ts-sweep: cannot run %s: %s\n", cmd[0], strerror(errno));
		_exit(127);
	}
	close(fd);
	free(run), free(out);
	return pid;
}

/* Asks job i, running at a server, to stop: through its run dir, which the
 * server shares, even before ts-train has made it. */
static void stop_remote(const char *dir, int i)
{
	char *run = sweep_job_dir(dir, i);
	if (mkdir(run, 0777) < 0 && errno != EEXIST)
		die("cannot create %s:", run);
	if (!rundir_request_stop(run)) {
		char *stop = path_join(run, "stop");
		afile_put_text(stop, "stop");
		free(stop);
	}
	free(run);
}

void launch_stop(const struct launcher *l, const struct sweep_place *pl, int i, pid_t pid)
{
	if (pl->host)
		stop_remote(l->dir, i);
	else
		kill(pid, SIGTERM);
}
