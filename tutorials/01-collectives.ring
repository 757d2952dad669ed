# Ranks and collectives in a few minutes: an overview.
# Play it with `play collectives` (pause waits for Enter), `play collectives auto` or
# `play collectives step`. `play ranks`, `play point-to-point` and `play collective-ops` go deeper.

say "Training across machines means many processes, called ranks, that each do part of the work and exchange data through collective operations. The ranks ringside starts are real: separate processes that find each other through a small rendezvous store, as torchrun's do, and move real bytes, here through shared memory."
say "First the lecture's scatter: rank 0 holds [0, 1, 2, 3] and hands a piece to each rank. Every rank prints what it held and what it ended with."
collective scatter ranks=2
expect rank 0 = [0, 1]
expect rank 1 = [2, 3]
pause

say "A reduce combines every rank's data on one rank. With op=product, rank 0's [1, 10] times rank 1's [2, 11] gives [2, 110] on rank 0, while rank 1 keeps what it had."
collective reduce ranks=2 op=product
expect rank 0 = [2, 110]
expect rank 1 = [2, 11]
pause

say "all_reduce leaves the combined result on every rank: it is how data-parallel training averages its gradients. The ring algorithm passes pieces round a ring of ranks in 2(n-1) steps, 6 with 4 ranks, each moving a quarter of the buffer, so no link carries more than its share."
collective all_reduce ranks=4 algo=ring count=8
expect steps = 6
expect out per rank = [10, 46, 82, 118, 154, 190, 226, 262]
say "Every step went to the session log: which rank sent which chunk to whom."
sql "SELECT rank, astep AS step, chunk, peer AS sent_to, bytes FROM events WHERE kind = 'coll_step' AND run_id = (SELECT max(id) FROM runs) ORDER BY astep, rank LIMIT 8"
pause

say "Recursive doubling needs only log2(n) steps, 2 with 4 ranks, but each one sends the whole buffer: the better choice for small messages, where every step costs a fixed delay."
collective all_reduce ranks=4 algo=recursive-doubling count=8
expect steps = 2
expect out per rank = [10, 46, 82, 118, 154, 190, 226, 262]
pause

say "How fast? bench times one operation at growing sizes and prints nccl-tests' columns. algbw is bytes over time; busbw multiplies it by what each link must carry, 2(n-1)/n for all_reduce, which is 1 with 2 ranks, so figures compare across rank counts."
bench all_reduce ranks=2 sizes=8..1M
expect bus_factor = 1
expect rows = 18
expect wrong = 0
pause

say "Point to point: a blocking send waits for its receiver; an immediate one (isend) returns at once, so the rank can compute while the message travels, if the library gets the chance to move it."
p2p ranks=2 size=256K
expect rank 1 = [1, 1, 1, 1]
say "Which backend can do what, on CPU and on GPU:"
backends
expect shm.all_reduce.cpu = 1
say "Try `collective all_gather ranks=3`, `bench all_reduce ranks=4 backend=tcp`, or `help collective`."
