# DDP inside: gradient buckets, overlap, no_sync accumulation.
# Play it with `play ddp` (pause waits for Enter), `play ddp auto` or `... step`.

say "DistributedDataParallel runs one process per rank. At the start rank 0's weights are broadcast so that every rank begins alike; then, every step, each rank computes the gradients of its own slice of the batch, and the ranks average them with an all-reduce, so every rank takes the same optimizer step."
set threads=1 seed=1
model m = mlp 784-512-256-128-10
expect params = 567434
data d = digits n=4000
say "567,434 parameters: 4 x 567,434 = 2,269,736 bytes of gradients to average every step. The layers, from the last: 1,290, 32,896, 131,328 and 401,920 parameters."
pause

say "The gradients are not all-reduced in one piece. They are cut into buckets of whole layers, in the order backward produces them: the last layer first. A bucket takes layers until it holds at least bucket= bytes (PyTorch's default is 25 MiB; the first bucket is capped at 1 MiB so that communication starts early). This small model fits in a single bucket at the default, so the all-reduce can only start when the whole backward is over."
train m on d mode=ddp ranks=2 steps=5 eval=off view=off
expect comm_per_step = 1
pause

say "With bucket=256K the three last layers (165,514 parameters, 662,056 bytes) make the first bucket, and the first layer the second. The first bucket is all-reduced by a communication thread while backward is still computing the first layer: communication overlaps computation."
reset m
train m on d mode=ddp ranks=2 steps=5 eval=off view=off bucket=256K
expect comm_per_step = 2
say "Each rank called 11 collectives: the broadcast, then 5 steps of 2 buckets. And it handed them 6 x 2,269,736 = 13,618,416 bytes: the broadcast of the weights and 5 all-reduces of every gradient. Buckets change when the bytes move, not how many."
expect comm_calls per rank = 11
expect comm_bytes per rank ~= 13618416 within 1%
say "comm_hidden is the share of communication time that ran while backward was still going. Only the buckets before the last can be hidden: the last one is complete only when backward ends. Here the hidden bucket is the small one and the big first layer comes last, so the share is small; in a deep network of many similar layers, on GPUs whose network runs beside the computation, DDP hides most of its all-reduce this way."
pause

say "Smaller buckets start communicating earlier but pay the fixed cost of a collective more often. At 64K the buckets are: the two last layers, then the second layer, then the first."
reset m
train m on d mode=ddp ranks=2 steps=5 eval=off view=off bucket=64K
expect comm_per_step = 3
say "overlap=off waits for the whole backward and then all-reduces the buckets one after the other, so nothing is hidden, by construction."
reset m
train m on d mode=ddp ranks=2 steps=5 eval=off view=off bucket=64K overlap=off
expect comm_hidden = 0
expect comm_per_step = 3
pause

say "Gradient accumulation: with accum=4 each optimizer step adds up the gradients of 4 micro-batches before stepping, a batch four times larger in the same memory. Averaging after each micro-batch would be wasted work: the sum is all that matters. PyTorch's no_sync() context skips the all-reduce in the first three backward passes; ringside's DDP does the same, and only the last micro-batch of a step communicates."
reset m
train m on d mode=ddp ranks=2 steps=5 eval=off view=off bucket=256K accum=4
expect steps = 5
say "5 optimizer steps, 20 micro-batches, and still 11 collectives per rank: the broadcast and 2 buckets per step. Without no_sync it would have been 1 + 20 x 2 = 41."
expect comm_calls per rank = 11
expect comm_per_step = 2
