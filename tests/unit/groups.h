/* A test binary of named groups of checks, so that one group's fatal error
 * (a CUDA call that dies) cannot hide the others: `test_x GROUP` runs one
 * group, `test_x` every group in turn, `test_x --list` names them.
 * tests/gpu/run runs the groups one by one, each under its own time limit. */
#ifndef TS_GROUPS_H
#define TS_GROUPS_H
#include "check.h"
#include <stdio.h>
#include <string.h>

struct group {
	const char *name;
	void (*run)(void);
};

/* Runs what argv asks of the n groups g, after begin (opening the backend)
 * unless only their names are asked for; begin returns 0 where none can run
 * (no GPU), having said so. Returns the exit status: 1 when a check failed,
 * 2 for a group that is not one. */
static inline int run_groups(int argc, char **argv, const struct group *g, size_t n, int (*begin)(void))
{
	const char *only = argc > 1 ? argv[1] : NULL;
	if (only && !strcmp(only, "--list")) {
		for (size_t i = 0; i < n; i++)
			printf("%s\n", g[i].name);
		return 0;
	}
	size_t i = 0;
	while (only && i < n && strcmp(g[i].name, only))
		i++;
	if (argc > 2 || (only && i == n)) {
		if (argc > 2)
			fprintf(stderr, "usage: %s [--list | GROUP]\n", argv[0]);
		else
			fprintf(stderr, "%s: %s is no group of this test (--list names them)\n", argv[0], only);
		return 2;
	}
	if (!begin())
		CHECK_DONE();
	for (i = 0; i < n; i++)
		if (!only || !strcmp(g[i].name, only))
			g[i].run();
	CHECK_DONE();
}
#endif
