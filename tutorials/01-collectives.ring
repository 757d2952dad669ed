# Ranks and collectives: real processes that find each other and move real bytes.
# Play it with `play collectives` (pause waits for Enter), `play collectives auto` or `play collectives step`.

say "So far everything ran in one process. Distributed training runs many processes, called ranks, that each hold part of the work and talk through collective operations. ringside starts real ranks: separate processes that meet through a small rendezvous store, as torchrun's ranks do, and move real bytes through shared memory."
say "First the lecture's scatter: rank 0 holds [0, 1, 2, 3] and hands one piece to each rank. Every rank prints what it had and what it got."
collective scatter ranks=2
pause

say "A reduce combines every rank's data on one rank. With op=product, rank 0's [1, 10] and rank 1's [2, 11] become [2, 110] on rank 0; rank 1's buffer is left as it was."
collective reduce ranks=2 op=product
pause

say "all_reduce leaves the combined result on every rank: that is how data-parallel training averages gradients. The ring algorithm sends each rank's data round a ring in 2(n-1) steps, each moving a quarter of the buffer here, so no link carries more than its share."
collective all_reduce ranks=4 algo=ring count=8
say "Every step went to the session log: which rank sent which chunk to whom."
sql "SELECT rank, astep AS step, chunk, peer AS sent_to, bytes FROM events WHERE kind = 'coll_step' AND run_id = (SELECT max(id) FROM runs) ORDER BY astep, rank LIMIT 8"
pause

say "Recursive doubling needs only log2(n) steps but sends the whole buffer each time: best for small messages, where the time per step matters more than the bytes."
collective all_reduce ranks=4 algo=recursive-doubling count=8
pause

say "How fast is it? bench times an operation at growing sizes and prints what nccl-tests prints. algbw is bytes per second; busbw scales it by what each link must carry, 2(n-1)/n for all_reduce, so numbers compare across rank counts."
bench all_reduce ranks=2 sizes=8..1M
pause

say "Point to point: a blocking send waits for its receiver; an immediate send (isend) returns at once and lets the rank compute while the message moves, if the library gets a chance to move it."
p2p ranks=2 size=256K
say "Which backend can do what, on CPU and on GPU:"
backends
say "Try `collective all_gather ranks=3`, `bench all_reduce ranks=4 backend=tcp`, or `help collective`."
