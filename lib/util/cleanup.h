/* Temp files and dirs that must not outlive a command that ends early: die()
 * and the fatal signals remove every path registered here. */
#ifndef TS_CLEANUP_H
#define TS_CLEANUP_H

/* Registers path, a file or a dir tree, for removal; cleanup_forget once it has
 * been renamed into place or removed. */
void cleanup_add(const char *path);
void cleanup_forget(const char *path);
/* Removes every registered path; async-signal-safe. */
void cleanup_run(void);
/* SIGINT, SIGTERM, SIGHUP and SIGPIPE (an error told to a closed pipe
 * too) remove the registered paths and end the process by the signal,
 * wherever it is, even blocked reading a pipe. */
void cleanup_on_signals(void);
#endif
