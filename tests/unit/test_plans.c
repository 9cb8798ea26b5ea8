/* The CUDA backend's plan tables on the CPU: a key found again gives the same
 * plan, others their own, past half the slots one line; and the size
 * classes that GEMM plans are keyed by. */
#include "backend/plans.h"
#include "check.h"
#include "expect_die.h"
#include <string.h>

struct key {
	int m, n, k;
};

/* nine plans into a table of sixteen slots */
static void fill(const void *arg)
{
	(void)arg;
	struct plans p;
	plans_init(&p, sizeof(struct key), 0, 16);
	for (int i = 0; i < 9; i++) {
		int made;
		plans_get(&p, &(struct key){ i, 0, 0 }, &made, "cuBLAS products");
	}
}

static void test_table(void)
{
	struct plans p;
	plans_init(&p, sizeof(struct key), sizeof(int), 64);
	int made, all_new = 1, all_found = 1, distinct = 1;
	int *v[32];
	for (int i = 0; i < 32; i++) {
		v[i] = plans_get(&p, &(struct key){ i, 2 * i, 7 }, &made, "test");
		all_new &= made && *v[i] == 0;
		*v[i] = 100 + i;
	}
	for (int i = 0; i < 32; i++) {
		int *again = plans_get(&p, &(struct key){ i, 2 * i, 7 }, &made, "test");
		all_found &= !made && again == v[i] && *again == 100 + i;
		for (int j = 0; j < i; j++)
			distinct &= v[j] != v[i];
	}
	CHECK(all_new, "32 keys: each made once, its value zeroed");
	CHECK(all_found && distinct, "each found again with its own value, in its own slot");
	CHECK(p.n == 32, "32 plans (%zu)", p.n);
	plans_free(&p);
	expect_die("a table of 16 slots takes 8 plans: the 9th dies in one line", fill, NULL,
		   "cuBLAS products: more than 8 kinds in one process");
}

static void test_size_classes(void)
{
	int exact = 1, within = 1, monotone = 1, octave_ok = 1;
	for (int x = 1; x <= 64; x++)
		exact &= size_class(x) == x;
	for (int x = 65; x <= 1 << 20; x++) {
		int b = size_class(x);
		within &= b >= x && (double)b <= x * 1.125 + 1e-9;
		monotone &= size_class(x - 1) <= b;
	}
	/* eight classes in each octave from 64 on */
	for (int lo = 64; lo < 1 << 20; lo *= 2) {
		int n = 0;
		for (int x = lo + 1; x <= 2 * lo; x++)
			n += size_class(x) != size_class(x - 1);
		octave_ok &= n == 8;
	}
	CHECK(exact, "sizes up to 64: their own classes");
	CHECK(within, "above: rounded up by at most an eighth");
	CHECK(monotone, "classes grow with the size");
	CHECK(octave_ok, "eight classes an octave");
	CHECK(size_class(1000) == size_class(1001) && size_class(1000) == 1024,
	      "1000 and 1001 rows share 1024's class");
}

int main(void)
{
	test_table();
	test_size_classes();
	CHECK_DONE();
}
