# Faults: kill a rank, read the report, resume on fewer ranks.
# Play it with `play faults` (pause waits for Enter), `play faults auto` or `... step`. It writes
# ck.safetensors and ck.optim.safetensors in the current folder.

say "On many machines for many hours, something fails: a node reboots, a process runs out of memory, a cable goes. Synchronous data parallelism has no slack: every step every rank must bring its gradients to the all-reduce, so one rank missing stops them all. The defence is a checkpoint written regularly, and a restart from it, on the machines that are left if need be: PyTorch's elastic package (torchrun) automates that restart."
set threads=1 seed=1
model m = mlp 784-64-10
data d = digits n=2000
pause

say "A run of 20 steps on 4 ranks, writing a checkpoint every 5 steps (ckpt_every=5). kill=3:12 asks rank 3 to die (SIGKILL, the signal that cannot be caught, like a machine that vanishes) right after step 12. timeout=3s tells the others not to wait longer than 3 seconds for a message."
train m on d mode=ddp ranks=4 steps=20 eval=off view=off ckpt=ck.safetensors ckpt_every=5 kill=3:12 timeout=3s
say "The launcher saw rank 3 die of signal 9, SIGKILL, the moment it happened, and stopped the others: ranks 0, 1 and 2 were waiting for it in the all-reduce of step 13, where nothing more could come, so they were ended at once rather than left to time out."
expect killed_rank = 3
expect signal = 9
say "Steps 11 and 12 are lost: the last checkpoint is from step 10. Every step since a checkpoint is work to do again, so how often to write one is a trade between the time writing takes and the time a failure costs."
expect ckpt_step = 10
pause

say "The checkpoint holds the whole model, the whole optimizer state and the position in the data: the global step and the order of the batches. Nothing in it depends on the number of ranks. So the run continues on the 2 ranks that are left, from step 10 to 20; each rank now takes 32 rows of every global batch of 64 instead of 16, and the sequence of global batches is the one the 4 ranks would have seen."
train m on d mode=ddp ranks=2 steps=20 eval=off view=off resume=ck.safetensors
expect world = 2
expect steps = 20
say "ringside's tests check that a run resumed on another number of ranks ends with the weights one process reaches without stopping, to float rounding. runs shows both runs in the session log: the failed one with its 12 steps, then the one that finished."
runs n=2
