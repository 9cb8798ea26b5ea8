#include "comm.h"
#include "err.h"
#include <limits.h>
#include <stdlib.h>
#ifdef TS_MPI
#include <mpi.h>
#endif

/* Whether a launcher of MPI processes started this one: OpenMPI's mpirun, or
 * a PMI/PMIx launcher such as Slurm's srun. */
static int launched_by_mpi(void)
{
	return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

#ifdef TS_MPI
static int mpi_on;   /* MPI_Init done */

void comm_open(struct comm *c)
{
	*c = (struct comm){ 0, 1, 0, 1 };
	if (!launched_by_mpi())
		return;
	int got;
	/* OpenMP threads compute, only the main thread calls MPI */
	MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &got);
	mpi_on = 1;
	MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
	MPI_Comm_size(MPI_COMM_WORLD, &c->size);
	MPI_Comm local;
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &local);
	MPI_Comm_rank(local, &c->local_rank);
	MPI_Comm_size(local, &c->local_size);
	MPI_Comm_free(&local);
}

void comm_close(const struct comm *c)
{
	(void)c;
	if (mpi_on)
		MPI_Finalize();
	mpi_on = 0;
}

void comm_sum_floats(const struct comm *c, float *x, size_t n)
{
	if (c->size == 1)
		return;
	for (size_t at = 0; at < n; at += INT_MAX) {
		size_t k = n - at < INT_MAX ? n - at : INT_MAX;
		MPI_Allreduce(MPI_IN_PLACE, x + at, (int)k, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	}
}

void comm_sum_doubles(const struct comm *c, double *x, int n)
{
	if (c->size > 1)
		MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

int comm_any(const struct comm *c, int flag)
{
	if (c->size > 1)
		MPI_Allreduce(MPI_IN_PLACE, &flag, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
	return flag != 0;
}

void comm_barrier(const struct comm *c)
{
	if (c->size > 1)
		MPI_Barrier(MPI_COMM_WORLD);
}
#else
void comm_open(struct comm *c)
{
	*c = (struct comm){ 0, 1, 0, 1 };
	if (launched_by_mpi())
		die("started by mpirun or srun, but this build has no MPI (STATIC=1 leaves it out)");
}

void comm_close(const struct comm *c)
{
	(void)c;
}

void comm_sum_floats(const struct comm *c, float *x, size_t n)
{
	(void)c, (void)x, (void)n;
}

void comm_sum_doubles(const struct comm *c, double *x, int n)
{
	(void)c, (void)x, (void)n;
}

int comm_any(const struct comm *c, int flag)
{
	(void)c;
	return flag != 0;
}

void comm_barrier(const struct comm *c)
{
	(void)c;
}
#endif
