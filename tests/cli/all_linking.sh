# Each command loads only the shared libraries it uses: the BLAS and OpenMP
# runtimes only where the model runs, MPI only in the trainer, ncurses only in
# the terminal monitor.
# (A STATIC=1 build loads none of them, which passes as it should.)
. "$(dirname "$0")/../lib.sh"

# loads CMD: the sonames CMD's dynamic section and its dependencies pull in
loads() { ldd "$BIN/$1" | awk '{ print $1 }' | sed 's/\.so.*//'; }

# allowed LIB: the commands that may load LIB
allowed() {
	case $1 in
	libopenblas | libgomp | libgfortran) echo "ts-train ts-eval" ;;
	libncursesw | libtinfo) echo "ts-top" ;;
	libmpi | libopen-rte | libopen-pal) echo "ts-train" ;;
	esac
}

n=0
for exe in "$BIN"/ts-*; do
	[ -x "$exe" ] || continue
	cmd=$(basename "$exe")
	n=$((n + 1))
	extra=""
	for lib in $(loads "$cmd"); do
		who=$(allowed "$lib")
		[ -z "$who" ] || grep -qw -- "$cmd" <<<"$who" || extra+=" $lib"
	done
	expect_eq "$cmd loads only the libraries it uses" "${extra# }" ""
done
[ "$n" -gt 0 ] || fail "bin/ holds commands to check (run make)"
finish
