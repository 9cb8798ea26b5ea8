/* ts-cat: print any TopSpin stream, shard, manifest or events file as JSON
 * lines, or turn JSON lines back into records. */
#include "data/catfile.h"
#include "util/afile.h"
#include "util/err.h"
#include "util/opt.h"
#include <limits.h>
#include <stdlib.h>
#include <string.h>

static long max_records = -1;
static int from_json, no_header;
static char *output = "-";

static const struct opt opts[] = {
	{'n', "records", OPT_INT, &max_records, "N", "stop after N records", NULL,
	 .min = 0, .max = LONG_MAX},
	{0, "from-json", OPT_FLAG, &from_json, NULL, "read JSON lines, write msgpack records", NULL},
	{0, "no-header", OPT_FLAG, &no_header, NULL, "leave out stream headers", NULL},
	{'o', "output", OPT_STR, &output, "FILE", "write to FILE instead of standard output", "@file"},
	{0, NULL, 0, NULL, NULL, NULL, NULL},
};

static const struct cmd_spec spec = {
	"ts-cat", "Print TopSpin files as JSON lines, or JSON lines as records.", "[FILE...]", "file", opts,
};

int main(int argc, char **argv)
{
	char **files;
	int n = opt_parse(&spec, argc, argv, &files);
	if (from_json && no_header)
		die_usage("--no-header leaves headers out of the JSON printed; the records --from-json writes need theirs");
	static char *dash[] = {"-"};
	if (n == 0) {
		files = dash;
		n = 1;
	}
	for (int i = 0; i < n; i++)
		check_not_input(output, "the input", files[i]);
	struct afile *out = afile_open(output);
	struct cat_opts co = {max_records, no_header};
	for (int i = 0; i < n && co.left != 0; i++) {
		if (from_json)
			cat_from_json(files[i], out, &co);
		else
			cat_to_json(files[i], out, &co);
	}
	afile_commit(out);
	close_stdout();
	return 0;
}
