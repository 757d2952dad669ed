# Approximating pi on MPI ranks: the lecture's annex program.
# Play it with `play pi` (pause waits for Enter), `play pi auto` or `... step`.

say "The annex of the lecture has a small MPI program in C that approximates pi. It uses pi = 4 arctan(1) and the series arctan(1) = 1 - 1/3 + 1/5 - 1/7 + ... Each process computes one term, the term whose index is its rank, then MPI_Reduce with MPI_SUM adds the terms on the root, rank 0, which multiplies by 4 and prints the total."
set threads=1
say "pi runs that program: the same steps in ringside's worker. With backend=mpi the 4 ranks are started by mpirun, exactly as `mpirun -np 4 ./pi` would."
pi ranks=4 backend=mpi
expect partial per rank ~= [4, -1.3333333, 0.8, -0.5714286] within 1e-6
expect pi ~= 2.895238 within 1e-6
say "Rank 0 holds 4 x 1, rank 1 holds 4 x (-1/3), and so on; their sum is 2.895238, the lecture's 'Total is = 2.895238'. Four terms are a poor approximation: the error is a quarter."
expect error ~= 0.2464 within 0.1%
pause

say "More terms than ranks: rank r takes terms r, r+4, r+8, ... (a cyclic split), sums them, and the reduce is the same single number per rank. The error of this series falls like 1/n: a thousand terms give about 3 correct digits."
pi ranks=4 n=1000 backend=mpi
expect error ~= 0.001 within 1%
say "A million terms, 250,000 per rank: the error is one millionth. The series converges slowly, and doubling the ranks only shares the same terms differently."
pi ranks=4 n=1000000
expect error ~= 1e-6 within 1%
pi ranks=2 n=1000000 backend=tcp
expect error ~= 1e-6 within 1%
expect pi ~= serial within 1e-9
say "The backends give the same pi, and it matches the sum computed in one process to about 1e-13, not exactly: each rank adds its terms in another order, and floating-point addition depends on the order. With an alternating series the partial sums are large (above 10 on rank 0) and cancel, so the rounding shows."
pause

say "A better formula beats more ranks. pi is also the integral of 4/(1+x^2) from 0 to 1; the midpoint rule on n intervals (MPICH's classic cpi.c example) has an error of about 1/(12 n^2), so a thousand intervals already give 7 digits, and each ten times more intervals gives two more."
pi ranks=4 n=1000 method=midpoint backend=mpi
expect error ~= 8.333e-8 within 1%
pi ranks=4 n=10000 method=midpoint
expect error ~= 8.333e-10 within 1%
say "Splitting work over ranks pays when the work is big against the communication: here one reduce of one number per rank, against a loop of n terms. The timing lines above show both."
