#include "backend/memcheck.h"
#include "util/err.h"
#include <stdio.h>

/* "1.2 TB", "24 GB": decimal units, as disks and RAM are sold. */
static void format_bytes(char *out, size_t n, double bytes)
{
	static const char *unit[] = {"bytes", "KB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
	int u = 0;
	while (bytes >= 1000 && u < 8)
		bytes /= 1000, u++;
	snprintf(out, n, "%.*f %s", bytes < 10 && u ? 1 : 0, bytes, unit[u]);
}

void memory_check(const struct backend *be, const char *what, double bytes, const char *purpose)
{
	double have = be->memory();
	if (have <= 0 || bytes <= have)
		return;
	char need_s[32], have_s[32];
	format_bytes(need_s, sizeof need_s, bytes);
	format_bytes(have_s, sizeof have_s, have);
	if (be->host)
		die("%s: needs %s for %s; this machine has %s", what, need_s, purpose, have_s);
	die("%s: needs %s for %s; %s has %s free", what, need_s, purpose, be->name, have_s);
}
