/* vocab.h: the real bert-base-uncased vocab, small hand-made ones, and the refusal of
 * files that are no WordPiece vocab (each checked in a child: exit 1, one stderr line). */
#include "check.h"
#include "data/vocab.h"
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define REAL_VOCAB "examples/vocab.txt"   /* the bert-base-uncased vocab, bundled */
#define REAL_SHA256 "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"

static char tmpdir[] = "/tmp/test_vocab.XXXXXX";

static const char *write_vocab(const char *name, const char *bytes, size_t len)
{
	static char path[256];
	snprintf(path, sizeof path, "%s/%s", tmpdir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(bytes, 1, len, f) != len || fclose(f)) {
		perror(path);
		exit(2);
	}
	return path;
}

#define SPECIALS "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"

static void check_real_vocab(void)
{
	if (access(REAL_VOCAB, R_OK)) {
		SKIP("%s not found (run from the repo root)", REAL_VOCAB);
		return;
	}
	struct vocab *v = vocab_load(REAL_VOCAB);
	CHECK(vocab_size(v) == 30522, "bert-base-uncased has 30522 tokens (%d)", vocab_size(v));
	CHECK(!strcmp(vocab_sha256(v), REAL_SHA256), "sha256 %s", vocab_sha256(v));
	static const int32_t want[] = { 0, 100, 101, 102, 103 };
	for (int i = 0; i < VOCAB_NSPECIAL; i++)
		CHECK(vocab_special(v, i) == want[i], "%s = %d", vocab_special_name(i), want[i]);
	CHECK(vocab_id(v, "hello", 5) == 7592, "hello = 7592");
	CHECK(!strcmp(vocab_token(v, 7592), "hello"), "token 7592 is hello");
	CHECK(!strcmp(vocab_token(v, 30521), "##～"), "last token is ##～ (%s)", vocab_token(v, 30521));
	int32_t ing = vocab_id(v, "##ing", 5);
	CHECK(ing == 2075 && vocab_piece_id(v, 1, "ing", 3) == ing, "##ing = 2075 as a piece too");
	CHECK(vocab_piece_id(v, 0, "ing", 3) != ing, "a word start 'ing' is not ##ing");
	CHECK(vocab_id(v, "hellox", 6) == -1 && vocab_id(v, "", 0) == -1, "absent tokens are -1");
	CHECK(vocab_id(v, "[CLS]", 5) == 101, "[CLS] by name");
	CHECK(vocab_max_piece(v) == 18, "longest piece 18 bytes (%zu)", vocab_max_piece(v));
	vocab_free(v);
}

static void check_line_ends(void)
{
	static const char crlf[] = "[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\n[MASK]\r\nfoo\r\n##bar";
	struct vocab *v = vocab_load(write_vocab("crlf.txt", crlf, sizeof crlf - 1));
	CHECK(vocab_size(v) == 7, "CRLF and no final newline: 7 tokens (%d)", vocab_size(v));
	CHECK(vocab_id(v, "foo", 3) == 5 && vocab_id(v, "##bar", 5) == 6, "foo = 5, ##bar = 6");
	CHECK(!strcmp(vocab_token(v, 6), "##bar") && !strcmp(vocab_token(v, 5), "foo"),
	      "tokens have no line ends");
	CHECK(vocab_piece_id(v, 1, "bar", 3) == 6 && vocab_piece_id(v, 0, "bar", 3) == -1,
	      "##bar is a continuation piece only");
	vocab_free(v);

	static const char hashes[] = "##\n#\n" SPECIALS "##a##\nlonger-than-eight-bytes\n";
	v = vocab_load(write_vocab("hashes.txt", hashes, sizeof hashes - 1));
	CHECK(vocab_id(v, "##", 2) == 0 && vocab_id(v, "#", 1) == 1, "'##' and '#' are tokens");
	CHECK(vocab_piece_id(v, 1, "a##", 3) == 7, "##a## is the piece a##");
	CHECK(vocab_id(v, "longer-than-eight-bytes", 23) == 8, "long token found");
	CHECK(vocab_id(v, "longer-than-eight-byteS", 23) == -1, "last byte matters");
	CHECK(vocab_max_piece(v) == 23, "max piece 23");
	vocab_free(v);
}

/* Runs vocab_load(path) in a child; returns its exit status (-1: killed) and stderr. */
static int load_in_child(const char *path, char *err, size_t size)
{
	int fds[2];
	if (pipe(fds))
		exit(2);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fds[1], 2);
		vocab_load(path);
		_exit(0);
	}
	close(fds[1]);
	size_t n = 0;
	for (ssize_t k; n < size - 1 && (k = read(fds[0], err + n, size - 1 - n)) > 0;)
		n += (size_t)k;
	err[n] = 0;
	close(fds[0]);
	int status;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Checks that vocab_load(path) exits 1 printing exactly "topspin: PATH: why". */
static void check_dies(const char *name, const char *path, const char *why)
{
	char got[512], want[512];
	int code = load_in_child(path, got, sizeof got);
	snprintf(want, sizeof want, "topspin: %s: %s\n", path, why);
	CHECK(code == 1 && !strcmp(got, want), "%s refused: %s  (got exit %d, stderr \"%.*s\")",
	      name, why, code, (int)strcspn(got, "\n"), got);
}

static void check_refused(const char *name, const char *bytes, size_t len, const char *why)
{
	check_dies(name, write_vocab(name, bytes, len), why);
}

#define REFUSED(name, lit, why) check_refused(name, lit, sizeof lit - 1, why)

static void check_bad_vocabs(void)
{
	REFUSED("empty.txt", "", "not a WordPiece vocab: empty file");
	REFUSED("binary.txt", SPECIALS "ok\nab\0cd\n", "not a WordPiece vocab: NUL byte on line 7 (a binary file?)");
	REFUSED("no-unk.txt", "[PAD]\n[CLS]\n[SEP]\n[MASK]\nfoo\n", "not a WordPiece vocab: no [UNK] token");
	REFUSED("no-mask.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n", "not a WordPiece vocab: no [MASK] token");
	REFUSED("lower.txt", "[pad]\n[unk]\n[cls]\n[sep]\n[mask]\n", "not a WordPiece vocab: no [PAD] token");
	REFUSED("dup.txt", SPECIALS "foo\nbar\nfoo\n", "line 8: duplicate token 'foo' (first on line 6)");
	REFUSED("dup-special.txt", SPECIALS "[CLS]\n", "line 6: duplicate token '[CLS]' (first on line 3)");
	REFUSED("space.txt", SPECIALS "foo bar\n", "line 6: whitespace inside a token");
	REFUSED("trailing.txt", SPECIALS "foo \n", "line 6: whitespace inside a token");
	REFUSED("tab.txt", SPECIALS "\tfoo\n", "line 6: whitespace inside a token");
	REFUSED("nbsp.txt", SPECIALS "foo\xc2\xa0\n", "line 6: whitespace inside a token");
	REFUSED("ideographic.txt", SPECIALS "\xe3\x80\x80\n", "line 6: whitespace inside a token");
	REFUSED("cr.txt", SPECIALS "a\rb\n", "line 6: whitespace inside a token");
	REFUSED("blank.txt", SPECIALS "foo\n\nbar\n", "line 7: empty token");
	REFUSED("blank-crlf.txt", SPECIALS "foo\r\n\r\n", "line 7: empty token");
	REFUSED("latin1.txt", SPECIALS "caf\xe9\n", "line 6: not valid UTF-8");
	REFUSED("surrogate.txt", SPECIALS "\xed\xa0\x80\n", "line 6: not valid UTF-8");
	REFUSED("overlong.txt", "\xc0\xaf\n" SPECIALS, "line 1: not valid UTF-8");
	char missing[300];
	snprintf(missing, sizeof missing, "%s/nonexistent.txt", tmpdir);
	check_dies("nonexistent.txt", missing, "No such file or directory");
}

int main(void)
{
	if (!mkdtemp(tmpdir))
		return 2;
	check_real_vocab();
	check_line_ends();
	check_bad_vocabs();
	char cmd[64];
	snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
	if (system(cmd))
		return 2;
	CHECK_DONE();
}
