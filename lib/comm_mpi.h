/* comm.c's processes joined by MPI, when mpirun or srun starts them. */
#ifndef TS_COMM_MPI_H
#define TS_COMM_MPI_H
#include "comm.h"

/* Whether a launcher of MPI processes started this one: OpenMPI's mpirun, or
 * a PMI/PMIx launcher such as Slurm's srun. */
int mpi_launched(void);
/* Joins MPI's processes into c; dies in one line where the build has no MPI. */
void mpi_open(struct comm *c);
void mpi_close(void);
/* x[0..n) of doubles (dbl) or floats becomes the sum over all processes. A
 * process that waits c->timeout_s for the others names those that do not
 * answer and ends the run. */
void mpi_sum(const struct comm *c, void *x, size_t n, int dbl);
/* comm_reduce_scatter_floats and comm_all_gather_floats. */
void mpi_reduce_scatter(const struct comm *c, float *x, size_t n);
void mpi_all_gather(const struct comm *c, float *x, size_t n);
/* comm_start_sum's, over MPI; mpi_progress returns whether all are done. */
void mpi_start_sum(const struct comm *c, float *x, size_t n);
int mpi_progress(void);
void mpi_wait_sums(const struct comm *c);
#endif
