/* A dir's digests (format/dirdigest.h): written for every regular file, as
 * xxhsum -H2 prints them, and checked: a file changed, resized, removed or
 * unreadable, a record torn or naming a path, each found and named. */
#include "check.h"
#include "format/dirdigest.h"
#include "testfiles.h"
#include "util/afile.h"
#include "util/err.h"
#include "util/filedigest.h"
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/ts-test-dd.XXXXXX";

/* The check of dir: its verdict, and why in why_out (up to size bytes). */
static enum digests check(const char *dir, char *why_out, size_t size)
{
	char *why;
	enum digests d = dirdigest_check(dir, NULL, 0, &why);
	snprintf(why_out, size, "%s", why ? why : "");
	free(why);
	return d;
}

/* The recorded digest of name in dir's digests.json. */
static const char *recorded(const char *dir, const char *name, char *out, size_t size)
{
	char *path = path_join(dir, DIGESTS_FILE);
	json_t *j = json_load_file(path, 0, NULL);
	json_t *e = json_object_get(json_object_get(j, "files"), name);
	snprintf(out, size, "%s", json_string_value(json_object_get(e, "xxh3_128")) ?: "none");
	json_decref(j);
	free(path);
	return out;
}

/* Writes n bytes of buf as path through a digesting afile, as a checkpoint's
 * large files are written. */
static void write_digested(const char *path, const void *buf, size_t n)
{
	struct afile *f = afile_open(path);
	afile_digest(f);
	afile_write(f, buf, n);
	afile_commit(f);
}

/* The mapping the last check kept of path, compared with want (n bytes):
 * 1 where it was kept and holds want, 0 where none was kept, -1 where one
 * was kept with other bytes. Takes it. */
static int kept_as(const char *path, const void *want, size_t n)
{
	struct stat sb;
	if (stat(path, &sb))
		die("%s:", path);
	char hex[FILEDIGEST_HEX];
	void *map = filedigest_take(&sb, hex);
	if (!map)
		return 0;
	int same = (size_t)sb.st_size == n && !memcmp(map, want, n);
	munmap(map, (size_t)sb.st_size);
	return same ? 1 : -1;
}

static void rewrite_digests(const char *dir, const char *text)
{
	char *path = path_join(dir, DIGESTS_FILE);
	write_file(path, text, strlen(text));
	free(path);
}

int main(void)
{
	if (!mkdtemp(tmpdir))
		die("cannot create %s:", tmpdir);
	char why[512], hex[64];
	char *a = path_join(tmpdir, "a.bin"), *e = path_join(tmpdir, "empty"), *sub = path_join(tmpdir, "sub");
	write_file(a, "abc", 3);
	write_file(e, "", 0);
	mkdir(sub, 0755);
	CHECK(check(tmpdir, why, sizeof why) == DIGESTS_NONE && !*why, "a dir without digests: none, no reason");
	dirdigest_write(tmpdir);
	CHECK(check(tmpdir, why, sizeof why) == DIGESTS_OK, "just written: every file checks (%s)", why);
	CHECK(!strcmp(recorded(tmpdir, "a.bin", hex, sizeof hex), "06b05ab6733a618578af5f94892f3950"),
	      "XXH3-128 of 'abc' as xxhsum -H2 prints it (%s)", hex);
	CHECK(!strcmp(recorded(tmpdir, "empty", hex, sizeof hex), "99aa06d3014798d86001c324468d497f"),
	      "XXH3-128 of nothing (%s)", hex);
	CHECK(!strcmp(recorded(tmpdir, "sub", hex, sizeof hex), "none"), "a subdirectory is not recorded");

	write_file(a, "abd", 3);
	CHECK(check(tmpdir, why, sizeof why) == DIGESTS_BAD &&
	      !strcmp(why, "a.bin differs from what was written (its digest does not match)"), "a byte changed: %s", why);
	write_file(a, "abcd", 4);
	CHECK(check(tmpdir, why, sizeof why) == DIGESTS_BAD && !strcmp(why, "a.bin has 4 bytes where 3 were written"),
	      "a file grown: %s", why);
	unlink(a);
	CHECK(check(tmpdir, why, sizeof why) == DIGESTS_BAD && !strcmp(why, "a.bin: No such file or directory"),
	      "a file removed: %s", why);
	write_file(a, "abc", 3);
	CHECK(check(tmpdir, why, sizeof why) == DIGESTS_OK, "the file as it was: it checks again (%s)", why);
	char *extra = path_join(tmpdir, "added-later");
	write_file(extra, "x", 1);
	CHECK(check(tmpdir, why, sizeof why) == DIGESTS_OK, "a file added after: not the dir's, passed by (%s)", why);

	rewrite_digests(tmpdir, "{\"files\": {");
	CHECK(check(tmpdir, why, sizeof why) == DIGESTS_BAD && !strncmp(why, "digests.json: line 1: ", 22),
	      "a torn digests.json: %s", why);
	rewrite_digests(tmpdir, "{\"files\": {}}");
	CHECK(check(tmpdir, why, sizeof why) == DIGESTS_BAD && !strcmp(why, "digests.json names no files"),
	      "a digests.json of no files: %s", why);
	rewrite_digests(tmpdir, "{\"files\": {\"../a.bin\": {\"bytes\": 3, "
				"\"xxh3_128\": \"06b05ab6733a618578af5f94892f3950\"}}}");
	CHECK(check(tmpdir, why, sizeof why) == DIGESTS_BAD &&
	      !strcmp(why, "digests.json: the entry of '../a.bin' is not a file's size and digest"), "a path outside: %s", why);
	rewrite_digests(tmpdir, "{\"files\": {\"sub\": {\"bytes\": 3, "
				"\"xxh3_128\": \"06b05ab6733a618578af5f94892f3950\"}}}");
	CHECK(check(tmpdir, why, sizeof why) == DIGESTS_BAD && !strncmp(why, "sub: ", 5),
	      "a name that cannot be read as a file (a dir): %s", why);
	rewrite_digests(tmpdir, "{\"files\": {\"a.bin\": {\"bytes\": -3, \"xxh3_128\": \"06\"}}}");
	CHECK(check(tmpdir, why, sizeof why) == DIGESTS_BAD &&
	      !strcmp(why, "digests.json: the entry of 'a.bin' is not a file's size and digest"), "a bad entry: %s", why);

	/* A file written through a digesting afile: its digest remembered, not
	 * read back, and true; in place, in parallel with the write for a large
	 * one. Changed after, it is read again. */
	unlink(extra);
	size_t big_n = (3 << 20) + 5;
	unsigned char *big = xmalloc(big_n);
	for (size_t i = 0; i < big_n; i++)
		big[i] = (unsigned char)(i * 2654435761u >> 13);
	char *bigp = path_join(tmpdir, "big.bin");
	write_digested(bigp, big, big_n);
	write_digested(a, "abc", 3);
	dirdigest_write(tmpdir);
	CHECK(!strcmp(recorded(tmpdir, "a.bin", hex, sizeof hex), "06b05ab6733a618578af5f94892f3950"),
	      "a digesting afile: the digest of what it wrote (%s)", hex);
	CHECK(check(tmpdir, why, sizeof why) == DIGESTS_OK, "3 MiB written and hashed side by side: it checks (%s)", why);
	int fd = open(a, O_WRONLY);   /* the same file, the same size, a byte changed */
	if (fd < 0 || pwrite(fd, "d", 1, 2) != 1 || close(fd))
		die("%s:", a);
	dirdigest_write(tmpdir);
	CHECK(!strcmp(recorded(tmpdir, "a.bin", hex, sizeof hex), "ec4af3fc0b1f44fe6b4467b443c76228"),
	      "changed after it was written: read again (%s)", hex);
	CHECK(check(tmpdir, why, sizeof why) == DIGESTS_OK, "and it checks as it is now (%s)", why);

	/* The files a check is asked to keep: kept only where the whole dir
	 * checks, as read, and taken once. */
	const char *const keep[] = { "big.bin", NULL };
	char *why2;
	CHECK(dirdigest_check(tmpdir, keep, 0, &why2) == DIGESTS_OK && kept_as(bigp, big, big_n) == 1,
	      "an intact dir: the file kept as it was read");
	CHECK(kept_as(bigp, big, big_n) == 0, "taken once");
	write_file(e, "x", 1);
	CHECK(dirdigest_check(tmpdir, keep, 0, &why2) == DIGESTS_BAD && kept_as(bigp, big, big_n) == 0,
	      "another file of the dir damaged: nothing kept (%s)", why2);
	free(why2);

	/* Heads: a file larger than DIGESTS_HEAD gets the digest of its head too;
	 * a check with heads reads only that of a file to keep, and keeps it with
	 * the digest its reader must find; dirdigest_confirm takes what the
	 * reader found, and checks the dir whole where none read it. */
	write_file(e, "", 0);
	dirdigest_write(tmpdir);
	char *digests = path_join(tmpdir, DIGESTS_FILE);
	json_t *rec = json_load_file(digests, 0, NULL), *files = json_object_get(rec, "files");
	struct filedigest *hd = filedigest_new();
	filedigest_add(hd, big, DIGESTS_HEAD);
	char head[FILEDIGEST_HEX], whole[64];
	filedigest_end(hd, head);
	CHECK(!strcmp(json_string_value(json_object_get(json_object_get(files, "big.bin"), "head_xxh3_128")) ?: "", head) &&
	      !json_object_get(json_object_get(files, "a.bin"), "head_xxh3_128"),
	      "the digest of a large file's first MiB recorded, none for a small file");
	json_decref(rec);
	recorded(tmpdir, "big.bin", whole, sizeof whole);
	struct stat sb;
	stat(bigp, &sb);
	char want[FILEDIGEST_HEX];
	CHECK(dirdigest_check(tmpdir, keep, 1, &why2) == DIGESTS_OK, "heads: the dir checks (%s)", why2 ?: "");
	void *map = filedigest_take(&sb, want);
	CHECK(map && !memcmp(map, big, big_n) && !strcmp(want, whole),
	      "heads: the file kept, with the digest its reader must find (%s)", want);
	if (map)
		munmap(map, big_n);
	filedigest_verdict(&sb, 0);
	CHECK(dirdigest_confirm(tmpdir, keep, &why2) == DIGESTS_BAD &&
	      !strcmp(why2, "big.bin differs from what was written (its digest does not match)"),
	      "confirmed: what its reader found, not found intact: %s", why2);
	free(why2);
	filedigest_verdict(&sb, 1);
	CHECK(dirdigest_confirm(tmpdir, keep, &why2) == DIGESTS_OK, "confirmed: found intact by its reader");
	fd = open(bigp, O_WRONLY);   /* a byte changed past the head */
	if (fd < 0 || pwrite(fd, "x", 1, (off_t)big_n - 3) != 1 || close(fd))
		die("%s:", bigp);
	CHECK(dirdigest_check(tmpdir, keep, 1, &why2) == DIGESTS_OK, "a byte changed past the head: the head checks");
	stat(bigp, &sb);
	map = filedigest_take(&sb, want);   /* not read: no verdict */
	if (map)
		munmap(map, big_n);
	CHECK(dirdigest_confirm(tmpdir, keep, &why2) == DIGESTS_BAD &&
	      !strcmp(why2, "big.bin differs from what was written (its digest does not match)"),
	      "not read since: confirmed by a check of the whole dir, which finds it: %s", why2);
	free(why2);
	fd = open(bigp, O_WRONLY);   /* and one in the head */
	if (fd < 0 || pwrite(fd, "x", 1, 100) != 1 || close(fd))
		die("%s:", bigp);
	CHECK(dirdigest_check(tmpdir, keep, 1, &why2) == DIGESTS_BAD &&
	      !strcmp(why2, "big.bin differs from what was written (its digest does not match)"),
	      "a byte changed in the head: the check finds it: %s", why2);
	free(why2);
	free(digests);
	remove_tree(tmpdir);
	free(big), free(bigp);
	free(a), free(e), free(sub), free(extra);
	CHECK_DONE();
}
