/* File helpers shared by the unit tests. */
#ifndef TS_TESTFILES_H
#define TS_TESTFILES_H
#include "util/err.h"
#include <dirent.h>
#include <stdio.h>

/* Entries of dir, not counting names that start with a dot. */
static inline int dir_entries(const char *dir)
{
	DIR *d = opendir(dir);
	int n = 0;
	for (struct dirent *e; d && (e = readdir(d));)
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

static inline void write_file(const char *path, const void *buf, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, n, f) != n || fclose(f))
		die("cannot write %s:", path);
}
#endif
