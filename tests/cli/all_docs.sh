# Documentation stays true: every command's man page, --help, --version and
# completions agree with its option table; man pages render without warnings;
# the examples marked in README.md and the man pages run.
. "$(dirname "$0")/../lib.sh"
MAN=$TOP/man
COMP=$TOP/completions

# The option table a command prints with its hidden --ts-options flag:
# "short<TAB>long<TAB>arg<TAB>choices<TAB>help" after an "operands" line. This
# prints "long<US>arg<US>choices": unlike a tab, US never merges empty fields in read.
US=$'\x1f'
options_of() { "$1" --ts-options | awk -F'\t' -v OFS="$US" 'NR > 1 { print $2, $3, $4 }'; }

# names FILE OPT: FILE names --OPT (roff writes it \-\-opt), not just a longer option.
names() { sed 's/\\-/-/g' "$1" | grep -qE -- "--$2([^A-Za-z0-9-]|$)"; }

# not_named FILE OPT...: the options FILE does not name, as "--a --b".
not_named() {
	local f=$1 o out=""; shift
	for o; do names "$f" "$o" || out+=" --$o"; done
	echo "${out# }"
}

# The options named by the entry tags (the line after .TP) of a page's OPTIONS section.
documented_options() {
	sed -n '/^\.SH OPTIONS/,/^\.SH /p' "$1" | sed 's/\\-/-/g' | awk '/^\.TP/ { getline; print }' |
		grep -oE -- '--[a-z0-9][a-z0-9-]*' | sed 's/^--//' | sort -u
}

# complete_bash CMD WORD...: the words bash completion offers for the last WORD.
complete_bash() {
	local cmd=$1; shift
	bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
		"_${1//-/_}"; printf "%s\n" "${COMPREPLY[@]}"' _ "$COMP/$cmd.bash" "$cmd" "$@" | sort
}

check_page() {   # CMD OPTS...
	local cmd=$1 page=$MAN/$1.1 o; shift
	if [ ! -f "$page" ]; then fail "$cmd: man/$cmd.1 exists"; return; fi
	pass "$cmd: man/$cmd.1 exists"
	local documented missing="" stale=""
	documented=$(documented_options "$page")
	for o; do grep -qxF -- "$o" <<<"$documented" || missing+=" --$o"; done
	expect_eq "$cmd(1): OPTIONS has an entry for every option" "${missing# }" ""
	for o in $documented; do
		printf '%s\n' "$@" | grep -qxF -- "$o" || stale+=" --$o"
	done
	expect_eq "$cmd(1): OPTIONS documents no option the command lacks" "${stale# }" ""
	local sec lacks=""
	for sec in NAME SYNOPSIS DESCRIPTION OPTIONS "EXIT STATUS" EXAMPLES "SEE ALSO"; do
		grep -qxE "\.SH \"?$sec\"?" "$page" || lacks+=", $sec"
	done
	expect_eq "$cmd(1) has the usual sections" "${lacks#, }" ""
}

check_help() {
	local cmd=$1
	check "$cmd --help exits 0" "$BIN/$cmd" --help
	expect_eq "$cmd --help starts with its usage" "$(head -1 "$T/out" | cut -d' ' -f1-2)" "usage: $cmd"
	check "$cmd --version exits 0" "$BIN/$cmd" --version
	expect_eq "$cmd --version names it and a version" \
		"$(grep -cE "^$cmd [0-9]+\.[0-9]+\.[0-9]+$" "$T/out")" 1
}

check_completions() {   # CMD, with the option table in $T/table
	local cmd=$1 bash_c=$COMP/$1.bash zsh_c=$COMP/_$1 long arg choices
	local -a all
	mapfile -t all < <(cut -d"$US" -f1 "$T/table")
	for f in "$bash_c" "$zsh_c"; do
		if [ ! -f "$f" ]; then fail "$cmd: ${f#"$TOP"/} exists"; continue; fi
		expect_eq "$cmd: ${f#"$TOP"/} names every option" "$(not_named "$f" "${all[@]}")" ""
	done
	[ -f "$bash_c" ] || return
	check "$cmd: bash accepts its completion" bash -n "$bash_c"
	if command -v zsh >/dev/null; then
		check "$cmd: zsh accepts its completion" zsh -n "$zsh_c"
	else
		skip "$cmd: zsh accepts its completion (zsh is not installed)"
	fi
	local every wrong_flag="" wrong_zsh="" wrong_value=""
	every=$(printf -- '--%s\n' "${all[@]}" | sort)
	expect_eq "$cmd: bash completes every option after --" "$(complete_bash "$cmd" --)" "$every"
	# words after a -- word are operands (ts-sweep's: a ts-train command line), never its options
	expect_eq "$cmd: bash offers none of its options after a -- word" "$(cd "$T" && complete_bash "$cmd" -- ts-train --)" ""
	check "$cmd: zsh takes the words after -- as operands" grep -q '^_arguments -s -S ' "$zsh_c"
	while IFS=$US read -r long arg choices; do
		if [ -z "$arg" ]; then
			[ "$(complete_bash "$cmd" "--$long" --)" = "$every" ] || wrong_flag+=" --$long"
			grep -E -- ",--$long\}|'--$long\[" "$zsh_c" | grep -q ']:' && wrong_zsh+=" --$long"
		elif [ "${choices#@}" = "$choices" ]; then   # fixed choices, or a free value
			[ "$(complete_bash "$cmd" "--$long" "")" = "$(tr '|' '\n' <<<"$choices" | grep . | sort)" ] ||
				wrong_value+=" --$long"
		elif [ "$choices" = @device ]; then   # cpu, cuda, and cuda:N of each GPU here
			[ "$(complete_bash "$cmd" "--$long" "")" = "$({ printf 'cpu\ncuda\n'; nvidia-smi -L 2>/dev/null |
				awk '{ sub(":", "", $2); print "cuda:" $2 }'; } | sort)" ] || wrong_value+=" --$long"
		fi
	done <"$T/table"
	# a FILE or DIR value completes paths, and only a path option refuses an empty one
	expect_eq "$cmd: every option that takes a FILE or DIR completes paths" \
		"$(awk -F"$US" '$2 ~ /^(FILE|DIR)$/ && $3 !~ /^@(file|dir)$/ { printf " --%s", $1 }' "$T/table" | sed 's/^ //')" ""
	expect_eq "$cmd: bash completes options, not values, after a flag" "${wrong_flag# }" ""
	expect_eq "$cmd: zsh takes no value after a flag" "${wrong_zsh# }" ""
	expect_eq "$cmd: bash offers an option's choices, or no words for a free value" "${wrong_value# }" ""
}

ncmds=0
for exe in "$BIN"/ts-*; do
	[ -x "$exe" ] || continue
	cmd=$(basename "$exe")
	ncmds=$((ncmds + 1))
	if ! options_of "$exe" >"$T/table" || [ ! -s "$T/table" ]; then
		fail "$cmd --ts-options prints its option table"
		continue
	fi
	mapfile -t opts < <(cut -d"$US" -f1 "$T/table")
	check_page "$cmd" "${opts[@]}"
	check_help "$cmd"
	check_completions "$cmd"
	check "topspin(7) lists $cmd" grep -qF ".BR $cmd (1)" "$MAN/topspin.7"
	check "README.md lists $cmd" grep -qF "| \`$cmd\` |" "$TOP/README.md"
done
[ "$ncmds" -gt 0 ] || fail "bin/ holds commands to check (run make)"

if command -v groff >/dev/null; then
	for page in "$MAN"/*.[1-8]; do
		expect_eq "${page#"$TOP"/} renders without groff warnings" \
			"$(groff -man -Tutf8 -wall -z "$page" 2>&1)" ""
	done
else
	skip "man pages render without groff warnings (groff is not installed)"
fi

# .BR and its kin print their arguments with no space between: two words
# running on as arguments of one print as one word ("fewerthantwo").
glued_words() {   # FILE: its lines where two plain words are arguments of a font-alternating macro
	awk '/^\.(BR|RB|BI|IB|IR|RI)( |$)/ {
		rest = substr($0, 5); n = 0; prev = ""
		while (rest != "") {
			sub(/^ +/, "", rest)
			if (rest == "") break
			if (substr(rest, 1, 1) == "\"") { match(rest, /^"[^"]*"?/); arg = "\"" }
			else { match(rest, /^[^ ]+/); arg = substr(rest, 1, RLENGTH) }
			rest = substr(rest, RLENGTH + 1)
			if (arg ~ /^[A-Za-z]+$/ && prev ~ /^[A-Za-z]+$/) { print FILENAME ":" FNR ": " $0; break }
			prev = arg
		}
	}' "$1"
}
for page in "$MAN"/*.[1-8]; do
	expect_eq "${page#"$TOP"/}: no words run together in a .BR-like line" "$(glued_words "$page")" ""
done

# Examples that run: in README.md a ```sh block right after a "<!-- test -->"
# line, and the ```text block right after a "<!-- output -->" line that follows
# it, its standard output ("..." in a line stands for any text); in a man page an
# .EX block right after a '.\" test' line (.RS between them is fine). A file's
# blocks run in order in one scratch dir beside the bundled examples/, as a user
# would run them from the top of the tree.
extract_readme() {   # FILE OUTDIR: writes OUTDIR/N.sh and OUTDIR/N.out, prints the count
	awk -v dir="$2" '
		marked == "test" && /^```sh$/ { n++; block = n ".sh"; marked = ""; next }
		marked == "output" && /^```text$/ { block = n ".out"; marked = ""; next }
		block && /^```$/ { block = ""; next }
		block { print > (dir "/" block); next }
		/^<!-- test -->$/ { marked = "test"; next }
		/^<!-- output -->$/ && n { marked = "output"; next }
		{ marked = "" }
		END { print n + 0 }' "$1"
}
extract_man() {   # the same for a man page, turning roff escapes back into shell text
	local n
	n=$(awk -v dir="$2" '
		marked && /^\.EX/ { n++; inblock = 1; marked = 0; next }
		inblock && /^\.EE/ { inblock = 0; next }
		inblock { print > (dir "/" n ".sh"); next }
		/^\.\\" test$/ { marked = 1; next }
		/^\.RS/ { next }
		{ marked = 0 }
		END { print n + 0 }' "$1")
	[ "$n" -gt 0 ] && sed -i -e 's/\\-/-/g' -e "s/\\\\(aq/'/g" -e 's/\\(dq/"/g' -e 's/\\e/\\/g' -e 's/\\&//g' "$2"/*.sh
	echo "$n"
}

# same_output GOT WANT: the files agree line by line, "..." in WANT matching any text.
same_output() {
	local got want
	[ "$(wc -l <"$1")" = "$(wc -l <"$2")" ] || return 1
	while IFS= read -r got <&3 && IFS= read -r want <&4; do
		want=$(sed -e 's/[][*?\\]/\\&/g' -e 's/\.\.\./*/g' <<<"$want")
		# unquoted: WANT is a pattern
		[[ $got == $want ]] || return 1
	done 3<"$1" 4<"$2"
}

run_examples() {   # NAME COUNT DIR: runs DIR/N.sh, checks its output against DIR/N.out if there is one
	local name=$1 n=$2 dir=$3 i block what missing c
	mkdir -p "$dir/run"
	ln -s "$TOP/examples" "$dir/run/examples"
	for i in $(seq 1 "$n"); do
		block=$dir/$i.sh
		what="$name example $i ($(head -1 "$block" | cut -c1-50))"
		missing=""
		for c in $(grep -oE '(^|[^[:alnum:]_/.-])ts-[a-z]+' "$block" | grep -oE 'ts-[a-z]+' | sort -u); do
			[ -x "$BIN/$c" ] || missing+=" $c"
		done
		if [ -n "$missing" ]; then skip "$what: not built yet:$missing"; continue; fi
		if grep -qw jq "$block" && ! command -v jq >/dev/null; then skip "$what: jq is not installed"; continue; fi
		# bounded: an example that waits on a command that failed would wait forever
		if ! (cd "$dir/run" && timeout 600 bash -e -o pipefail "$block") >"$T/out" 2>"$T/err"; then
			fail "$what"; sed 's/^/    /' "$T/err" | head -5
		elif [ -f "$dir/$i.out" ] && ! same_output "$T/out" "$dir/$i.out"; then
			fail "$what: its output"; diff "$dir/$i.out" "$T/out" | head -10 | sed 's/^/    /'
		else pass "$what"; fi
	done
}

# the mpirun examples (README.md, ts-train.1), as root and on a machine of few cores
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mkdir -p "$T/ex/README"
n=$(extract_readme "$TOP/README.md" "$T/ex/README")
[ "$n" -gt 0 ] || fail "README.md has examples marked <!-- test -->"
expect_eq "every README.md example shows its output" "$(ls "$T/ex/README" | grep -c '\.out$')" "$n"
run_examples README.md "$n" "$T/ex/README"

# Every field of the events that the README's runs wrote (a run, a stopped and
# resumed one, one of two processes) is named in ts-train(1)'s entry of its event.
event_fields() {   # PAGE: "kind field" for each word of each entry of its EVENTS section
	sed -n '/^\.SH EVENTS/,/^\.SH /p' "$1" | sed 's/\\-/-/g' | awk '
		/^\.TP/ { getline; kind = ($1 == ".B" && NF == 2) ? $2 : ""; next }
		/^\.SH/ { kind = "" }
		kind != "" { n = split($0, w, /[^A-Za-z0-9_]+/); for (i = 1; i <= n; i++) if (w[i] != "") print kind, w[i] }' | sort -u
}
undocumented_fields() {   # PAGE EVENTS...: "kind.field" of each field of EVENTS that PAGE does not name
	local page=$1; shift
	ts-cat "$@" | jq -r '.event as $e | keys[] | select(. != "event" and . != "time") | "\($e) \(.)"' | sort -u |
		comm -23 - <(event_fields "$page") | tr ' ' . | tr '\n' ' ' | sed 's/ $//'
}
mapfile -t events < <(ls "$T"/ex/README/run/r*/events.msgpack 2>/dev/null)
if [ ${#events[@]} = 0 ]; then fail "README.md's examples wrote run dirs whose events ts-train(1) must describe"
else expect_eq "ts-train(1) EVENTS names every field of the events the README's runs wrote" \
	"$(undocumented_fields "$MAN/ts-train.1" "${events[@]}")" ""; fi
for page in "$MAN"/*.[1-8]; do
	base=$(basename "$page")
	mkdir -p "$T/ex/$base"
	n=$(extract_man "$page" "$T/ex/$base")
	[ "$n" -gt 0 ] && run_examples "$base" "$n" "$T/ex/$base"
done
finish
