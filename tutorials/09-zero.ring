# ZeRO stages 1, 2, 3 and CPU offload: memory per rank, measured.
# Play it with `play zero` (pause waits for Enter), `play zero auto` or `... step`.

say "Data parallelism keeps a whole copy of the model states on every rank: the parameters, their gradients and the optimizer's state. ZeRO (the Zero Redundancy Optimizer, from Microsoft's DeepSpeed) removes that redundancy by partitioning these states across the ranks instead. PyTorch's FSDP is the same idea. This tutorial measures each rank's memory at the allocator and puts the paper's formula beside it."
set threads=1 seed=1
model m = mlp 784-256-10
expect params = 203530
data d = digits n=2000
say "P = 203,530 parameters in 4-byte floats: 4P = 814,120 bytes. Adam keeps k = 2 floats per parameter (its two moments): 8P = 1,628,240 bytes. With N = 4 ranks, a quarter of each is 203,530 or 407,060 bytes."
pause

say "First DDP, the baseline: every rank holds 4P + 4P + 4kP, all of it, whatever the number of ranks."
train m on d mode=ddp ranks=4 steps=5 eval=off view=off
expect memory.optimizer per rank ~= 1628240 within 1%
expect memory.optimizer per rank ~= formula within 1%
pause

say "ZeRO stage 1 partitions the optimizer state: each rank keeps Adam's moments for its quarter of the parameters only, steps that quarter, and the ranks all-gather the updated parameters. 4P + 4P + 4kP/N."
reset m
train m on d mode=fsdp zero=1 ranks=4 steps=5 eval=off view=off
expect memory.optimizer per rank ~= 407060 within 1%
expect memory.optimizer per rank ~= formula within 1%
expect memory.gradients per rank ~= 814120 within 1%
pause

say "Stage 2 also partitions the gradients: a reduce-scatter instead of the all-reduce leaves each rank the sum of its quarter only, and the full gradient buffer is released between steps. 4P + (4P + 4kP)/N."
reset m
train m on d mode=fsdp zero=2 ranks=4 steps=5 eval=off view=off
expect memory.gradients per rank ~= 203530 within 1%
expect memory.gradients per rank ~= formula within 1%
expect memory.parameters per rank ~= 814120 within 1%
pause

say "Stage 3 partitions the parameters themselves: each unit of the model is all-gathered just before its forward and again before its backward, and released after. (4P + 4P + 4kP)/N: every model state divided by the number of ranks, which is how ZeRO claims memory reductions up to 64 times on 64 ranks. The price is more communication: the parameters travel twice per step."
reset m
train m on d mode=fsdp zero=3 ranks=4 steps=5 eval=off view=off
expect memory.parameters per rank ~= 203530 within 1%
expect memory.parameters per rank ~= formula within 1%
say "Two pools are outside the formula: activations, which depend on the batch and not on the parameters, and comm, the working buffers of the gathers and reduce-scatters that stage 3 keeps. The paper counts model states only."
pause

say "CPU offload (ZeRO-Offload, FSDP's CPUOffload) moves the parameter shard and the optimizer state to host memory, and copies the gradients out and the updated parameters back every step. On a GPU that frees device memory at the cost of PCIe traffic; here both sides are the same RAM, but the offload pool shows what would leave the GPU: P + 2P = 610,590 bytes per rank, and nothing left in the parameter and optimizer pools."
reset m
train m on d mode=fsdp zero=3 ranks=4 steps=5 eval=off view=off offload=cpu
expect memory.offload per rank ~= 610590 within 1%
expect memory.optimizer per rank = 0
expect memory.parameters per rank = 0
