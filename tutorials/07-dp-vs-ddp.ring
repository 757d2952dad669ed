# DataParallel versus DistributedDataParallel: where DP loses.
# Play it with `play dp-vs-ddp` (pause waits for Enter), `play dp-vs-ddp auto` or `... step`.

say "Two ways to train one model on several workers with data parallelism. DataParallel (nn.DataParallel in PyTorch) is one process with a thread per replica; DistributedDataParallel (DDP) is one process per replica. Both split every batch by rows, so both train the same model. This tutorial measures where the time of a DataParallel step goes."
set threads=1 seed=1
model m = mlp 784-256-10
expect params = 203530
data d = digits n=2000
pause

say "mode=dp runs 4 replicas as threads of this one process. Every step it copies the parameters into each replica (replicate), cuts the batch into 4 pieces (scatter), runs the replicas side by side (compute), collects their outputs (gather) and adds the 4 gradients into replica 0 one after another (reduce), and only replica 0 steps the optimizer."
train m on d mode=dp ranks=4 steps=20 eval=off
expect replicas = 4
expect phase.replicate > 0
expect phase.reduce > 0
say "replicate and reduce are pure overhead: time spent copying and adding that one process alone would not spend. And both grow with the number of replicas, since one thread does them for all."
pause

say "The copies cost memory too. The model has 203,530 parameters, 4 bytes each: 814,120 bytes. Three extra replicas hold 3 x 814,120 = 2,442,360 bytes of parameters, and as much again of gradients, beside the model (a few bytes more: each tensor is aligned to 16 floats)."
expect replica.parameters ~= 2442360 within 1%
expect replica.gradients ~= 2442360 within 1%
pause

say "In PyTorch there is a third cost: the replicas are Python threads, and the interpreter's global lock (the GIL) lets only one of them run Python at a time. DDP avoids all three: each rank is its own process with its own interpreter, the model is copied once at the start (a broadcast of rank 0's weights), and after that only gradients travel, averaged by an all-reduce."
reset m
train m on d mode=ddp ranks=4 steps=20 eval=off view=off
expect world = 4
expect steps = 20
say "Each rank holds exactly one copy of the parameters, 814,120 bytes, the ZeRO paper's 4P (plus alignment), and one of the gradients: there is no replica 0 doing the work of all."
expect memory.parameters per rank ~= 814120 within 1%
expect memory.gradients per rank ~= formula within 1%
pause

say "Per rank, DDP's communication is an all-reduce of the gradients, done by all ranks at once in parallel, instead of one thread adding 4 gradient buffers in turn. On a GPU machine DataParallel also pushes every output back to the first GPU, which then does more work than the others. That is why the PyTorch documentation recommends DistributedDataParallel even on a single machine. The next tutorial looks inside DDP's all-reduce: buckets and overlap with backward."
