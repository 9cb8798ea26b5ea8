/* A run dir (ts-train(1), FILES): its files, the lock that keeps one trainer in it,
 * and stop requests. */
#ifndef TS_RUNDIR_H
#define TS_RUNDIR_H

#include <limits.h>

/* Dies unless a new run may be made in dir: dir does not exist, is empty,
 * or holds a stop request (ts-stop and ts-sweep may ask a run to stop
 * before it starts) and the temp config of a trainer killed before it made
 * the run, alone. A dir that holds a run, or anything else, is refused:
 * nothing of the user's is ever overwritten; so is a path too long for the
 * files of a run (PATH_MAX less 128 bytes). */
void rundir_check_new(const char *dir);
/* Makes a new run dir where rundir_check_new allows one, with config as
 * its config file (and log/, ckpt/), taking its lock; removes the temp
 * configs of killed trainers. */
void rundir_create(const char *dir, const char *config);
/* Undoes rundir_create for a run refused before it began (its files go, a
 * stop request stays), leaving the dir to take the run once more. */
void rundir_unmake(const char *dir);
/* Takes the lock of an existing run (for --resume) and removes the temp
 * files and dirs a killed trainer left there; refuses, first, a path too
 * long for the files of a run, as rundir_check_new does. */
void rundir_attach(const char *dir);

#define RUNDIR_LOCK_TEXT (HOST_NAME_MAX + 32)

/* Takes dir's lock for the life of the process, writing "PID HOST" in
 * dir/lock; dies naming the pid that holds it, as holder ("ts-train"). */
void rundir_lock(const char *dir, const char *holder);
/* A stop request: ts-stop writes DIR/stop and signals the trainer. */
int rundir_stop_requested(const char *dir);
void rundir_clear_stop(const char *dir);
/* Writes the stop file and sends SIGTERM to the trainer holding the lock, if
 * it runs on this machine; returns its pid, -1 when the lock names none, or 0
 * when no trainer runs there. */
long rundir_request_stop(const char *dir);
/* Whether a process holds dir's lock (a ts-train or ts-sweep runs there):
 * 0 when none, else its pid, -1 when it has not written it yet (or wrote
 * what is no pid); host, when given, gets the host it wrote. */
long rundir_holder(const char *dir, char host[HOST_NAME_MAX + 1]);
/* The text of dir's lock: "PID HOST\n" of the process that took it last,
 * "" where there is none. */
void rundir_lock_text(const char *dir, char text[RUNDIR_LOCK_TEXT]);

#endif
