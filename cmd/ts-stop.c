/* ts-stop: ask a training run to checkpoint and stop. */
#include "run/rundir.h"
#include "util/adir.h"
#include "util/afile.h"
#include "util/err.h"
#include "util/opt.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

static int wait_stop;
static long timeout_s = 600;

static const struct opt opts[] = {
	{'w', "wait", OPT_FLAG, &wait_stop, NULL, "wait until the run has stopped", NULL},
	{0, "timeout", OPT_INT, &timeout_s, "S", "with --wait, give up after S seconds", NULL,
	 .min = 0, .max = 86400},
	{0, NULL, 0, NULL, NULL, NULL, NULL},
};

static const struct cmd_spec spec = {
	"ts-stop", "Ask training runs and sweeps to checkpoint and stop.", "DIR...", "dir", opts,
};

/* Whether a trainer still holds the run's lock. */
static int running(const char *dir)
{
	char *lock = path_join(dir, "lock");
	int fd = open(lock, O_RDONLY | O_CLOEXEC), held = 0;
	if (fd >= 0) {
		held = flock(fd, LOCK_SH | LOCK_NB) < 0;
		close(fd);
	}
	free(lock);
	return held;
}

int main(int argc, char **argv)
{
	char **dirs;
	int n = opt_parse(&spec, argc, argv, &dirs);
	if (n == 0)
		die_usage("name the run or sweep dir to stop");
	if (opt_given(&spec, "timeout") && !wait_stop)
		die_usage("--timeout goes with --wait");
	int failed = 0;
	for (int i = 0; i < n; i++) {
		int why = dir_reachable(dirs[i]);
		if (why) {
			warnx("cannot open %s: %s", dirs[i], strerror(why));
			failed = 1;
			continue;
		}
		long pid = rundir_request_stop(dirs[i]);
		if (!pid) {
			warnx("%s: no ts-train or ts-sweep is running there", dirs[i]);
			failed = 1;
			continue;
		}
		if (pid > 0)
			printf("%s: stop requested (pid %ld)\n", dirs[i], pid);
		else
			printf("%s: stop requested\n", dirs[i]);
	}
	fflush(stdout);
	time_t give_up = time(NULL) + timeout_s;
	for (int i = 0; wait_stop && i < n; i++) {
		while (running(dirs[i])) {
			if (time(NULL) > give_up)
				die("%s: still running after %ld seconds", dirs[i], timeout_s);
			usleep(100000);
		}
	}
	close_stdout();
	return failed;
}
