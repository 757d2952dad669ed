# Pipeline parallelism: the model's layers split over the ranks, micro-batches flowing through them.
# Play it with `play pipeline` (pause waits for Enter), `play pipeline auto` or `play pipeline step`.

say "Model parallelism puts groups of layers on different ranks: rank 0 runs the first layers, sends its activations to rank 1, which runs the rest and computes the loss; the gradients come back the same way. Our model: five wide layers, each micro-batch's forward a few milliseconds of work, so the messages between the stages cost little beside it."
set threads=1
model s = mlp 784-1024-1024-1024-1024-1024-10 seed=1
data d = digits n=3000
say "partition=time measures each layer's forward and backward first and cuts where the stages' times come closest (five layers cannot split evenly in two: the summary prints each stage's time beside the cut; partition=parameters evens out parameters, uniform the number of layers). schedule=naive runs the whole batch through the stages at once: while rank 1 works, rank 0 waits, and the other way round. That idle time is the bubble: with p stages, (p-1)/p of the time, here a half at least."
train s on d mode=pipeline ranks=2 schedule=naive batch=256 steps=6 partition=time eval=off view=off
expect steps = 6
expect formula.bubble = 0.5
say "Measured from the ranks' own traces (each step's idle share, between its first forward and last backward), it cannot fall below a half: one rank always waits for the other."
expect bubble >= 0.499
expect inflight per rank = 1
pause

say "GPipe cuts each batch into m micro-batches: rank 0 sends micro-batch 0 on and starts micro-batch 1 at once. With equal stages and free messages the bubble is (p-1)/(m+p-1): 20% at m=4, 11.1% at m=8. The summary takes the measured bubble apart: the schedule's share (the formula), what unequal stages add (the schedule simulated with each stage's measured time), and the rest (messages, a rank waiting to be woken, other programs taking the cores)."
train s on d mode=pipeline ranks=2 schedule=gpipe micro=4 batch=256 steps=6 partition=time eval=off view=off
expect formula.bubble = 0.2
say "The least disturbed step of the six is below naive's half:"
expect bubble.best < 0.5
train s on d mode=pipeline ranks=2 schedule=gpipe micro=8 batch=256 steps=6 partition=time eval=off view=off
expect formula.bubble ~= 0.111 within 0.001
say "At m=8 it falls again (on a busy machine, other programs show up in the rest):"
expect bubble.best < 0.4
say "Each stage held all 8 micro-batches' activations at its peak, as the schedule says:"
expect inflight per rank = 8
pause

say "Why an earlier version of this lesson measured 57% where the formula said 11%: its layers were 256 wide, so a micro-batch's forward took a fifth of a millisecond, no more than handing its activations to the next rank and waking that rank up (a waiting rank sleeps, to leave the core to the one it waits for); and its cut by parameters, though it gave each stage the same parameters, left the second stage slower: five layers against two (with micro-batches of 32 rows, each layer's fixed cost counts), while the first stage skips the gradient of its input. The split line shows both: unequal stages and the rest."
pause

say "1F1B (one forward, one backward) runs the same micro-batches in another order: after warm-up forwards each stage alternates, so a backward frees a micro-batch's activations before the next forward needs new ones. The bubble is the same; the activations in flight drop from m to at most p micro-batches. On a terminal the dashboard draws the schedule as the ranks ran it: a row per stage, F3 and B3 where micro-batch 3's forward and backward ran, dots where the stage idled."
train s on d mode=pipeline ranks=2 schedule=1f1b micro=8 batch=256 steps=6 partition=time eval=off
expect bubble.best < 0.4
say "Measured: the first stage held at most 2 micro-batches, the last 1, against GPipe's 8."
expect inflight per rank = [2, 1]
expect inflight per rank = formula.inflight
say "Every micro-batch's forward and backward is in the session log, with the stage that ran it (`view run N` draws them again):"
sql "SELECT rank, name, count(*) AS ops, round(1000 * sum(value), 1) AS busy_ms FROM events WHERE kind = 'micro' AND run_id = (SELECT max(id) FROM runs) GROUP BY rank, name"
pause

say "Pipeline stages combine with data and tensor parallelism, as Megatron-LM lays them out. dp= copies the whole pipeline (each copy reads its share of every batch, and the copies of a stage average their gradients, as DDP does); tp= splits each stage's layers over a tensor-parallel group; dp x pp x tp must be the ranks. Eight ranks as 2 x 2 x 2: two pipelines of two stages, each stage on two ranks. With zero=1 the two copies of a stage keep Adam's state for half of it each."
model c = mlp 784-256-256-10 seed=1
train c on d mode=pipeline ranks=8 dp=2 tp=2 micro=4 batch=64 steps=5 zero=1 eval=off view=off
expect world = 8
expect formula.bubble ~= 0.2 within 0.001
say "Each rank keeps only its stage's slice of the parameters: measured at the allocator, beside 4 bytes per float of its stage's share."
expect stage_param_bytes per rank ~= formula.stage_param_bytes within 1%
say "The first stage's shards hold half of its two linears each (rank 0 and 2 also the row-split linear's bias, which one rank adds), the last stage its small linear whole:"
expect formula.stage_param_bytes per rank = [534016, 532992, 534016, 532992, 10280, 10280, 10280, 10280]
say "They end with the weights one process reaches from the same seed and batches (tests/dist/pipe/test_combo.c checks it to 1e-5). A layout that cannot be is refused before any rank starts, with the arithmetic: try ranks=8 dp=3, or tp=3 on this model."
say "Try schedule=interleaved micro=8 virtual=2 (two stages per rank, a smaller bubble), ranks=4, partition=parameters or uniform to see unequal stages, split=4 to cut by hand, or a GPT: its head shares the embedding's weights across the first and last stage, and their gradients are summed before each step."
