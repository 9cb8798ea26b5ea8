/* CSV/TSV reader: RFC 4180 quoting, line numbers, bad input. */
#include "check.h"
#include "data/csv.h"
#include "expect_die.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *write_tmp(const char *text)
{
	static char path[64];
	strcpy(path, "/tmp/ts-csv-XXXXXX");
	int fd = mkstemp(path);
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		abort();
	close(fd);
	return path;
}

/* Reads all records and renders them as "a|b;c|d;" with line numbers. */
static char *render(const char *text, char delim)
{
	static char out[4096];
	char *path = write_tmp(text);
	struct csv *c = csv_open(path, delim);
	struct csv_field *f;
	int nf;
	out[0] = 0;
	while ((nf = csv_next(c, &f)) >= 0) {
		char rec[512];
		snprintf(rec, sizeof rec, "%llu:", (unsigned long long)csv_line(c));
		strcat(out, rec);
		for (int i = 0; i < nf; i++) {
			strcat(out, f[i].s);
			strcat(out, i + 1 < nf ? "|" : ";");
			if (strlen(f[i].s) != f[i].n)
				strcat(out, "<len mismatch>");
		}
	}
	csv_close(c);
	unlink(path);
	return out;
}

static void read_all(const void *path)
{
	struct csv *c = csv_open(path, ',');
	struct csv_field *f;
	while (csv_next(c, &f) >= 0)
		;
}

/* Checks that reading text dies with a message holding why. */
static void refused(const char *name, const char *text, const char *why)
{
	char *path = write_tmp(text);
	expect_die(name, read_all, path, why);
	unlink(path);
}

int main(void)
{
	CHECK(!strcmp(render("a,b\n1,2\n", ','), "1:a|b;2:1|2;"), "plain records");
	CHECK(!strcmp(render("a,b\r\n1,2\r\n", ','), "1:a|b;2:1|2;"), "CR LF line ends");
	CHECK(!strcmp(render("a,b\n1,2", ','), "1:a|b;2:1|2;"), "no newline at the end");
	CHECK(!strcmp(render("a,b\n\"x,y\",\"he said \"\"hi\"\"\"\n", ','), "1:a|b;2:x,y|he said \"hi\";"),
	      "quoted delimiter and doubled quotes");
	CHECK(!strcmp(render("a,b\n\"two\nlines\",z\nq,r\n", ','), "1:a|b;2:two\nlines|z;4:q|r;"),
	      "embedded newline keeps line numbers right");
	CHECK(!strcmp(render("a,b\n\n1,\n,\n", ','), "1:a|b;3:1|;4:|;"), "blank lines skipped, empty fields kept");
	CHECK(!strcmp(render("a\tb\nx y\t\"q\tz\"\n", '\t'), "1:a|b;2:x y|q\tz;"), "TSV with a quoted tab");
	CHECK(!strcmp(render("a,\"\"\n", ','), "1:a|;"), "empty quoted field");
	CHECK(!strcmp(render("a,b\"c\n", ','), "1:a|b\"c;"), "quote inside an unquoted field is literal");
	CHECK(!strcmp(render("\xef\xbb\xbftext,label\n1,2\n", ','), "1:text|label;2:1|2;"), "a byte order mark skipped");
	CHECK(!strcmp(render("\xef\xbb\xbf\"text\",x\n", ','), "1:text|x;"), "a byte order mark before a quote");
	CHECK(!strcmp(render("a\n\xef\xbb\xbf\n", ','), "1:a;2:\xef\xbb\xbf;"), "a byte order mark later is data");

	/* a record longer than the read chunk */
	size_t big = 3 << 20;
	char *s = malloc(big + 16);
	strcpy(s, "t\n\"");
	memset(s + 3, 'x', big);
	strcpy(s + 3 + big, "\"\n");
	char *path = write_tmp(s);
	struct csv *c = csv_open(path, ',');
	struct csv_field *f;
	csv_next(c, &f);
	int nf = csv_next(c, &f);
	CHECK(nf == 1 && f[0].n == big, "a 3 MB field spanning read chunks");
	csv_close(c);
	unlink(path);
	free(s);

	refused("unterminated quote names the line", "a,b\n1,\"open\n2,3\n", "line 2: unterminated quote");
	refused("text after a closing quote", "a,b\n\"x\"y,3\n", "line 2: text after a closing quote");
	refused("a CR that ends no line", "a,b\r1,2\r", "line 1: a CR outside quotes that ends no line");
	refused("a CR after a closing quote", "a,b\n\"x\"\r,3\n", "line 2: a CR outside quotes that ends no line");
	CHECK(!strcmp(render("a,b\n\"x\ry\",\"z\r\"\r\n", ','), "1:a|b;2:x\ry|z\r;"), "a CR inside quotes is data");
	CHECK_DONE();
}
