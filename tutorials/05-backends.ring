# Backends: shared memory, TCP, Open MPI and NCCL side by side.
# Play it with `play backends` (pause waits for Enter), `play backends auto` or `... step`.

say "A backend is the library that moves the bytes of a collective between ranks. PyTorch's torch.distributed has three: Gloo (good for development, on CPU everywhere), MPI (the standard of supercomputers, which PyTorch must be compiled against) and NCCL (NVIDIA's, for GPUs, the fastest there). They do not all offer the same operations on the same devices, and the lecture gives a chart of which is which. ringside has its own chart, read from each backend's table of operations:"
set threads=1
backends
expect backends = 4
say "shm and tcp are ringside's own backends, playing Gloo's part: every operation, on CPU buffers only. shm copies through POSIX shared memory on one machine; tcp opens a socket between every pair of ranks and also works across machines."
expect shm.all_reduce.cpu = 1
expect tcp.all_reduce.gpu = 0
pause

say "NCCL is the mirror image: every operation on GPU buffers and none on CPU ones. In the lecture's chart NCCL had no scatter; later versions of PyTorch built scatter and gather out of NCCL's send and receive, as this build does."
expect nccl.all_reduce.cpu = 0
expect nccl.all_reduce.gpu = 1
expect nccl.scatter.gpu = 1
say "Open MPI here is a CPU build. The lecture's chart marks MPI on GPUs too: that needs a CUDA-aware MPI, one built to read GPU memory directly."
expect mpi.all_to_all.cpu = 1
expect mpi.all_reduce.gpu = 0
pause

say "The same all_reduce on 3 ranks through each CPU backend. Rank r holds [1+r, 10+r]; the sum is [1+2+3, 10+11+12] = [6, 33] on every rank, whichever backend carries it, and each result is compared with a serial computation."
collective all_reduce ranks=3 backend=shm
expect out per rank = [6, 33]
collective all_reduce ranks=3 backend=tcp
expect out per rank = [6, 33]
say "With backend=mpi ringside starts the ranks with mpirun, and Open MPI picks its own algorithm; algo= is only for shm and tcp."
collective all_reduce ranks=3 backend=mpi
expect out per rank = [6, 33]
expect wrong = 0
pause

say "reduce_scatter, which the lecture's chart gives only to NCCL: the sum is cut into one piece per rank. Two ranks with [1, 10, 19, 28] and [2, 11, 20, 29]: the sum is [3, 21, 39, 57]; rank 0 keeps [3, 21] and rank 1 keeps [39, 57]."
collective reduce_scatter ranks=2 count=2 backend=mpi
expect rank 0 = [3, 21]
expect rank 1 = [39, 57]
say "all_to_all, which Gloo lacked in the chart: element j of rank r goes to rank j, a transpose across ranks. Three ranks holding [0, 1, 2], [3, 4, 5] and [6, 7, 8] end with the columns: [0, 3, 6], [1, 4, 7] and [2, 5, 8]."
collective all_to_all ranks=3 count=1 backend=tcp
expect rank 0 = [0, 3, 6]
expect rank 2 = [2, 5, 8]
say "On a machine with GPUs, backend=nccl runs the same commands on GPU buffers, one GPU per rank (NCCL refuses two ranks of one group on one GPU); where there are fewer GPUs than ranks, or none, it is refused before any rank starts, with the reason. Which to use? NCCL on GPUs, MPI where it is installed and tuned (a cluster), and Gloo, or shm and tcp here, for everything else."
