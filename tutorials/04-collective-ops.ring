# Collectives: scatter, reduce with PRODUCT, all_reduce by ring, tree, doubling.
# Play it with `play collective-ops` (pause waits for Enter), `play collective-ops auto` or `... step`.

say "A collective involves every rank of a group at once. Scatter first: the root holds one piece per rank and each rank receives its own. With 4 ranks the root's [0, 1, 2, 3] becomes one number on each."
set threads=1
collective scatter ranks=4 count=1 show=4
expect out per rank = [0, 1, 2, 3]
expect rank 0 in = [0, 1, 2, 3]
say "The lecture's version, two ranks and two numbers each: [0, 1] to rank 0 and [2, 3] to rank 1."
collective scatter ranks=2
expect rank 1 = [2, 3]
pause

say "Reduce combines every rank's buffer element by element with an operation (SUM, PRODUCT, MIN or MAX) and leaves the result on the root. The lecture's example uses PRODUCT: [1, 10] times [2, 11] is [2, 110] on rank 0, and rank 1's buffer is untouched."
collective reduce ranks=2 op=product
expect rank 0 = [2, 110]
expect rank 1 = [2, 11]
say "A third rank holding [3, 12] multiplies in too: 2 x 3 = 6 and 110 x 12 = 1320."
collective reduce ranks=3 op=product
expect rank 0 = [6, 1320]
pause

say "all_reduce leaves the result on every rank, and there are several ways to do it. The ring: ranks pass chunks to their neighbour, first adding them up (reduce-scatter), then passing the sums round (all-gather). With n ranks that is 2(n-1) steps, and each rank sends 2(n-1)/n of the buffer in all, however many ranks there are."
collective all_reduce ranks=4 algo=ring count=1024 show=4
expect steps = 6
expect sent_bytes per rank = 6144
say "4096 bytes per rank (1024 floats) in 6 steps of 1024 bytes: each rank sent 6144 bytes, one and a half times its buffer."
pause

say "The tree (binomial): partial sums flow up to rank 0 in log2(n) steps, then the result flows back down in log2(n) more, 4 steps with 4 ranks. Each step moves the whole buffer, and the ranks that forward for others send the most."
collective all_reduce ranks=4 algo=tree count=1024 show=4
expect steps = 4
expect sent_bytes per rank = [8192, 4096, 8192, 4096]
pause

say "Recursive doubling: in step k each rank swaps its whole buffer with the rank 2^k away and adds, so after log2(n) steps, 2 here, everyone has the sum. The fewest steps of the three, at the price of sending the whole buffer every time: 8192 bytes per rank, against the ring's 6144."
collective all_reduce ranks=4 algo=recursive-doubling count=1024 show=4
expect steps = 2
expect sent_bytes per rank = 8192
pause

say "So each has its place: for a small message the fixed cost of every step dominates and few steps win; for a large one the bytes dominate, and the ring, which sends the least and spreads it evenly over every link, wins. That is why the default picks recursive doubling below 64 KiB and the ring above. bench shows both on this machine (4 ranks share its cores, so the figures are modest):"
bench all_reduce ranks=4 sizes=1K..256K algo=recursive-doubling
expect bus_factor = 1.5
expect rows = 9
bench all_reduce ranks=4 sizes=1K..256K algo=ring
expect bus_factor = 1.5
expect wrong = 0
say "busbw is algbw times 2(n-1)/n, 1.5 with 4 ranks: what each link really carries, so figures compare across rank counts."
