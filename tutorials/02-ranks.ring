# Ranks: world size, rank, local rank, torchrun's variables, by hand.
# Play it with `play ranks` (pause waits for Enter), `play ranks auto` or `play ranks step`.

say "A few words first. The world is every process taking part in a job, and the world size is how many there are. Each process has a rank: its number in the world, from 0 to world size minus 1, unique across every machine. A node is one machine; the local rank numbers the processes of one node, starting again at 0 on each. The root is the process the others look to, rank 0 unless a program says otherwise."
say "The lecture's picture: three machines with two GPUs each make a world of size 6. Ranks run 0 to 5 across the machines, local ranks 0 and 1 on each. `world` starts real ranks and has each say what it was told; nodes=3 lets this one machine play three."
world ranks=6 nodes=3
expect count per rank = 6
expect env.local_rank per rank = [0, 1, 0, 1, 0, 1]
expect env.group_rank per rank = [0, 0, 1, 1, 2, 2]
expect group.rank per rank = [0, 1, 2, 3, 4, 5]
say "Every rank runs the same program; only its rank differs, and the program branches on it (`if rank == 0: ...`). Each one counted the world with an all_reduce of ones, so all six had joined before any went on."
pause

say "How does a process learn its rank? The launcher tells it through environment variables, the convention torchrun uses: RANK and WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE for its node, GROUP_RANK for the node's number, and MASTER_ADDR and MASTER_PORT, where rank 0's machine listens so that the others can find it. That meeting is the rendezvous: every rank connects to one small key-value store and learns how to reach the rest."
world ranks=2
expect env.world_size per rank = 2
expect env.rank per rank = [0, 1]
expect group.size per rank = 2
say "Here ringside itself hosted the store. In PyTorch the same values reach `init_process_group(backend, rank=..., world_size=...)`, with MASTER_ADDR and MASTER_PORT in the environment."
pause

say "Ranks can be started by hand, one shell each, with only those variables set: then rank 0 hosts the store itself, and the others connect to MASTER_ADDR and MASTER_PORT. store=rank0 does exactly that, and prints the lines that would start the same ranks in shells of their own."
world ranks=2 store=rank0
expect env.master_port per rank > 0
expect env.rank per rank = [0, 1]
expect count per rank = 2
say "On several machines MASTER_ADDR is the address of rank 0's machine instead of 127.0.0.1, and the tcp backend carries the data between them. With backend=mpi, mpirun starts the processes and gives them Open MPI's own variables (OMPI_COMM_WORLD_RANK and the like) instead of torchrun's."
pause

say "The root matters to the collectives that start or end on one rank. In a broadcast the root's data goes to every rank: rank 0 holds [1, 10], the others start from zeros, and all end with [1, 10]."
collective broadcast ranks=3 root=0
expect out per rank = [1, 10]
expect rank 1 in = [0, 0]
say "Next: `play point-to-point` sends data from one rank to another."
