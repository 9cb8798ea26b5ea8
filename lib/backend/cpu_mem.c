/* Host memory for the CPU backend's buffers (cpu_ops.h). */
#include "backend/cpu_ops.h"
#include "util/err.h"
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

enum { HUGE_PAGE = 2 << 20, HEAD = 64 };

/* What cpu_release needs, just before each buffer: the start and length of
 * its mapping, or its calloc block when the length is 0. */
struct head {
	void *base;
	size_t mapped;
};

/* A buffer of a huge page or more is mapped on huge-page boundaries and asks
 * for transparent huge pages: the scattered rows of the embedding gradient
 * and the GEMMs' panels then miss the TLB far less often. Its pages are
 * taken, zeroed, as they are first touched. */
void *cpu_alloc(size_t bytes)
{
	if (bytes < HUGE_PAGE) {
		char *block = xcalloc(1, bytes + HEAD);
		((struct head *)(block + HEAD))[-1] = (struct head){ block, 0 };
		return block + HEAD;
	}
	size_t len = bytes + HEAD + HUGE_PAGE;
	char *map = len < bytes ? MAP_FAILED
				: mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				       -1, 0);
	if (map == MAP_FAILED)
		die("out of memory allocating %zu bytes", bytes);
	char *p = (char *)(((uintptr_t)map + HEAD + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
	madvise(p, bytes, MADV_HUGEPAGE);
	((struct head *)p)[-1] = (struct head){ map, len };
	return p;
}

void cpu_release(void *p)
{
	if (!p)
		return;
	struct head h = ((struct head *)p)[-1];
	if (h.mapped)
		munmap(h.base, h.mapped);
	else
		free(h.base);
}

void cpu_grow(void *pp, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return;
	*cap = grown(*cap, need);
	cpu_release(*(void **)pp);
	*(void **)pp = cpu_alloc(*cap * size);
}
