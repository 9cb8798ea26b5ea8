#include "run/rundir.h"
#include "util/adir.h"
#include "util/afile.h"
#include "util/err.h"
#include "util/strbuf.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static void make_dir(const char *path)
{
	if (mkdir(path, 0777) < 0 && errno != EEXIST)
		die("cannot create %s:", path);
}

static void read_lock(int fd, char text[RUNDIR_LOCK_TEXT])
{
	ssize_t n = pread(fd, text, RUNDIR_LOCK_TEXT - 1, 0);
	text[n > 0 ? n : 0] = 0;
}

void rundir_lock(const char *dir, const char *holder)
{
	char *path = path_join(dir, "lock");
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (fd < 0)
		die("cannot open %s:", path);
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		char buf[RUNDIR_LOCK_TEXT];
		read_lock(fd, buf);
		buf[strcspn(buf, "\n")] = 0;
		die("%s is in use by another %s (pid %s)", dir, holder, buf[0] ? buf : "unknown");
	}
	char host[HOST_NAME_MAX + 1] = "";
	gethostname(host, sizeof host);
	char text[RUNDIR_LOCK_TEXT];
	int n = snprintf(text, sizeof text, "%ld %s\n", (long)getpid(), host);
	if (ftruncate(fd, 0) < 0 || pwrite(fd, text, (size_t)n, 0) != n)
		die("cannot write %s:", path);
	free(path);
}

static _Noreturn void holds_a_run(const char *dir)
{
	die("%s already holds a run; continue it with --resume %s or choose another --run", dir, shell_quote(dir));
}

/* Whether name is a temp file or dir of afile or adir, or an old dir adir
 * moves aside: NAME.tmp.PID or NAME.old.PID. */
static int is_leftover(const char *name)
{
	const char *dot = strrchr(name, '.');
	if (!dot || dot - name < 5 || !dot[1] || dot[strspn(dot + 1, "0123456789") + 1])
		return 0;
	return !strncmp(dot - 4, ".tmp", 4) || !strncmp(dot - 4, ".old", 4);
}

/* Removes the entries of dir that are_gone names. */
static void remove_entries(const char *dir, int (*are_gone)(const char *name))
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	for (struct dirent *e; (e = readdir(d));)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && are_gone(e->d_name)) {
			char *p = path_join(dir, e->d_name);
			remove_tree(p);
			free(p);
		}
	closedir(d);
}

/* Removes what a trainer killed in the middle of a write left in dir: with
 * the lock held, no other process is writing there. */
static void remove_leftovers(const char *dir) { remove_entries(dir, is_leftover); }

/* What a dir may hold before a run is made in it: a stop request, and the
 * temp file of a trainer killed while it wrote the run's config. */
static int may_precede_a_run(const char *name)
{
	return !strcmp(name, "stop") || (!strncmp(name, "config.tmp.", 11) && is_leftover(name));
}

/* The most a run adds to its dir's path: /tb/events.out.tfevents.TIME.HOST.PID
 * with a host name of HOST_NAME_MAX bytes, 108 bytes, rounded up. */
enum { RUN_ROOM = 128 };

/* A run dir whose path leaves no room below PATH_MAX for the files a run
 * makes in it would fail partway, its dir half made: refused first. */
static void check_room(const char *dir)
{
	size_t n = strlen(dir), most = PATH_MAX - 1 - RUN_ROOM;
	if (n > most)
		die("%s: a path of %zu bytes leaves no room for the files of a run in it (a run dir's path may have up "
		    "to %zu)", dir, n, most);
}

void rundir_check_new(const char *dir)
{
	check_room(dir);
	char *config = path_join(dir, "config");
	if (access(config, F_OK) == 0)
		holds_a_run(dir);
	free(config);
	struct stat st;
	if (stat(dir, &st) < 0) {
		if (errno != ENOENT)
			die("cannot stat %s:", dir);
	} else if (!S_ISDIR(st.st_mode)) {
		die("%s exists and is not a directory", dir);
	} else if (!dir_empty_but(dir, may_precede_a_run)) {
		die("%s is not empty and holds no run; choose a new or an empty dir for --run", dir);
	}
}

/* The lock, and the dirs a trainer writes in (which a run whose making was
 * cut short after its config may lack). */
static void take(const char *dir)
{
	rundir_lock(dir, "ts-train");
	const char *subdirs[] = {"log", "ckpt"};
	for (int i = 0; i < 2; i++) {
		char *p = path_join(dir, subdirs[i]);
		make_dir(p);
		free(p);
	}
}

/* Where the run dir dir is made: the target of a symbolic link, which
 * a link to nothing yet names (as ts-shard -o DIR makes it). */
static char *made_at(const char *dir)
{
	char *given = xstrdup(dir);
	for (size_t n = strlen(given); n > 1 && given[n - 1] == '/'; n--)
		given[n - 1] = 0;
	char *at = resolve_links(given);
	free(given);
	return at;
}

/* The config comes first, whole, and only once: from then on the dir is a
 * run, which --resume can take whenever the rest is cut short. */
void rundir_create(const char *dir, const char *config)
{
	rundir_check_new(dir);
	char *at = made_at(dir);
	make_parents(at);
	make_dir(at);
	free(at);
	char *path = path_join(dir, "config");
	if (!afile_put_new(path, config))
		holds_a_run(dir);
	free(path);
	take(dir);
	remove_leftovers(dir);
}

static int not_a_stop(const char *name) { return strcmp(name, "stop") != 0; }

void rundir_unmake(const char *dir) { remove_entries(dir, not_a_stop); }

void rundir_attach(const char *dir)
{
	check_room(dir);
	char *config = path_join(dir, "config");
	if (access(config, F_OK) < 0)
		die("%s: not a run dir (no config file)", dir);
	free(config);
	take(dir);
	remove_leftovers(dir);
	const char *subdirs[] = {"ckpt", "plots", "bug"};
	for (int i = 0; i < 3; i++) {
		char *p = path_join(dir, subdirs[i]);
		remove_leftovers(p);
		free(p);
	}
}

int rundir_stop_requested(const char *dir)
{
	char *p = path_join(dir, "stop");
	int yes = access(p, F_OK) == 0;
	free(p);
	return yes;
}

void rundir_clear_stop(const char *dir)
{
	char *p = path_join(dir, "stop");
	unlink(p);
	free(p);
}

long rundir_holder(const char *dir, char host[HOST_NAME_MAX + 1])
{
	char *lock = path_join(dir, "lock"), buf[RUNDIR_LOCK_TEXT];
	int fd = open(lock, O_RDONLY | O_CLOEXEC);
	free(lock);
	if (host)
		host[0] = 0;
	if (fd < 0)
		return 0;
	long pid = 0;
	if (flock(fd, LOCK_SH | LOCK_NB) < 0) {
		read_lock(fd, buf);
		char their[HOST_NAME_MAX + 1] = "";
		if (sscanf(buf, "%ld %64s", &pid, their) < 1 || pid <= 0 || pid != (pid_t)pid)
			pid = -1;   /* no pid: 4294967296 + N would signal process N */
		if (host)
			strcpy(host, their);
	}
	close(fd);
	return pid;
}

void rundir_lock_text(const char *dir, char text[RUNDIR_LOCK_TEXT])
{
	char *path = path_join(dir, "lock");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	free(path);
	text[0] = 0;
	if (fd >= 0) {
		read_lock(fd, text);
		close(fd);
	}
}

long rundir_request_stop(const char *dir)
{
	char their[HOST_NAME_MAX + 1], host[HOST_NAME_MAX + 1] = "";
	long pid = rundir_holder(dir, their);
	if (!pid)
		return 0;
	char *stop = path_join(dir, "stop");
	/* made in place: the trainer, starting with the lock held, removes the
	 * temp files it finds, and a rename's would be among them */
	int s = open(stop, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
	if (s < 0 || close(s) < 0)
		die("cannot create %s:", stop);
	free(stop);
	gethostname(host, sizeof host);
	if (pid > 0 && !strcmp(host, their) && kill((pid_t)pid, SIGTERM) < 0 && errno != ESRCH)
		die("cannot signal pid %ld:", pid);
	return pid;
}
