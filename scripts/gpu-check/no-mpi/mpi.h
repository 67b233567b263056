/*===- mpi.h - The MPI that libdsrt's comm layer names, absent ------------===*
 *
 * For the GPU check's build only (scripts/gpu-check/CMakeLists.txt): the
 * GPU machine has no MPI, and the comm layer (lib/Runtime/Comm.cpp) calls
 * MPI only under mpirun (dsrt_comm_launched()); outside it, a world of one,
 * its collectives copy locally. So the check's build compiles it against
 * these declarations, every function failing with MPI_ERR_OTHER, to run
 * the NCCL path (DS_CUDA_COLLECTIVES=nccl, one rank) on the device.
 *
 *===----------------------------------------------------------------------===*/

#ifndef DS_GPU_CHECK_NO_MPI_H
#define DS_GPU_CHECK_NO_MPI_H

typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Op;
typedef int MPI_Request;
typedef int MPI_Errhandler;
typedef struct {
  int MPI_SOURCE, MPI_TAG, MPI_ERROR;
} MPI_Status;

#define MPI_SUCCESS 0
#define MPI_ERR_OTHER 15
#define MPI_MAX_ERROR_STRING 256
#define MPI_COMM_NULL 0
#define MPI_COMM_WORLD 1
#define MPI_ERRORS_RETURN 1
#define MPI_THREAD_FUNNELED 1
#define MPI_IN_PLACE ((void *)1)
#define MPI_STATUS_IGNORE ((MPI_Status *)0)
#define MPI_STATUSES_IGNORE ((MPI_Status *)0)
#define MPI_BYTE 1
#define MPI_INT 2
#define MPI_UINT 3
#define MPI_FLOAT 4
#define MPI_DOUBLE 5
#define MPI_INT64_T 6
#define MPI_UINT8_T 7
#define MPI_SUM 1
#define MPI_MIN 2
#define MPI_MAX 3

#define DS_NO_MPI(name, params)                                                \
  static inline int name params { return MPI_ERR_OTHER; }

DS_NO_MPI(MPI_Init_thread, (int *, char ***, int, int *))
DS_NO_MPI(MPI_Finalize, (void))
DS_NO_MPI(MPI_Comm_set_errhandler, (MPI_Comm, MPI_Errhandler))
DS_NO_MPI(MPI_Comm_rank, (MPI_Comm, int *))
DS_NO_MPI(MPI_Comm_size, (MPI_Comm, int *))
DS_NO_MPI(MPI_Comm_split, (MPI_Comm, int, int, MPI_Comm *))
DS_NO_MPI(MPI_Comm_dup, (MPI_Comm, MPI_Comm *))
DS_NO_MPI(MPI_Comm_free, (MPI_Comm *))
DS_NO_MPI(MPI_Allgather, (const void *, int, MPI_Datatype, void *, int,
                          MPI_Datatype, MPI_Comm))
DS_NO_MPI(MPI_Allgatherv, (const void *, int, MPI_Datatype, void *, const int *,
                           const int *, MPI_Datatype, MPI_Comm))
DS_NO_MPI(MPI_Allreduce,
          (const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm))
DS_NO_MPI(MPI_Bcast, (void *, int, MPI_Datatype, int, MPI_Comm))
DS_NO_MPI(MPI_Isend,
          (const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *))
DS_NO_MPI(MPI_Recv,
          (void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status *))
DS_NO_MPI(MPI_Test, (MPI_Request *, int *, MPI_Status *))
DS_NO_MPI(MPI_Waitall, (int, MPI_Request *, MPI_Status *))
DS_NO_MPI(MPI_Get_count, (const MPI_Status *, MPI_Datatype, int *))
DS_NO_MPI(MPI_Error_string, (int, char *, int *))

#undef DS_NO_MPI

#endif /* DS_GPU_CHECK_NO_MPI_H */
