/* comm.c's processes joined by MPI, when mpirun or a PMI/PMIx launcher
 * such as Slurm's srun starts them (OpenMPI's). A process that waits
 * c->timeout_s for the others names those that do not answer and ends the
 * run. Without MPI in the build, open dies in one line. */
#ifndef TS_COMM_MPI_H
#define TS_COMM_MPI_H
#include "comm/transport.h"

extern const struct transport mpi_transport;
#endif
