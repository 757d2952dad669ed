# DeepSpeed's configuration: ds_config.json read as train's options, and written back from a run.
# Play it with `play deepspeed` (pause waits for Enter), `play deepspeed auto` or `... step`. It writes
# ds_config.json in the current folder.

say "DeepSpeed takes its settings from a JSON file, usually called ds_config.json, handed to its launcher: deepspeed --num_gpus=2 train.py --deepspeed --deepspeed_config ds_config.json. The script itself only asks deepspeed.initialize for an engine. ringside reads the same file: train ... config=ds_config.json. To have a file, this tutorial first trains with options typed on the line, then writes that run out in DeepSpeed's keys."
set threads=1 seed=1
model m = mlp 784-64-10
data d = digits n=2000
pause

say "FSDP with ZeRO stage 2 on 2 ranks: a global batch of 32 (16 rows per rank), 2 micro-batches accumulated per optimizer step, AdamW with weight decay 0.01, a learning rate of 0.002 reached by a linear warm-up over 4 steps, gradients clipped to norm 1, 12 steps."
train m on d mode=fsdp zero=2 ranks=2 batch=32 accum=2 opt=adamw lr=0.002 wd=0.01 warmup=4 clip=1 steps=12 eval=off view=off
expect steps = 12
expect world = 2
pause

say "export config writes the run's settings as DeepSpeed's keys, and shows the file. train_batch_size is what one optimizer step sees: 64 = 16 rows per rank (train_micro_batch_size_per_gpu) x 2 accumulated micro-batches (gradient_accumulation_steps) x 2 ranks. The optimizer block holds AdamW with its lr, weight_decay, betas and eps; the warm-up is DeepSpeed's WarmupLR scheduler; gradient_clipping is the norm; zero_optimization stage 2 is ZeRO-2. The number of ranks is not in the file: DeepSpeed's launcher gives it (--num_gpus), here ranks= does."
export config last ds_config.json
pause

say "Now the file is the input. ringside works out DeepSpeed's batch arithmetic against the 2 ranks, says what each key became, and prints the train line it runs: the same options as before, each from its key."
reset m
train m on d config=ds_config.json ranks=2 steps=12 eval=off view=off
expect steps = 12
expect world = 2
pause

say "Options on the line win over the file, and the line says so. Here ZeRO stage 3 with CPU offload, from the same file: each rank's parameter shard and optimizer state move to host memory, P + 2P per rank for P = 50,890 parameters on 2 ranks: 305,340 bytes in the offload pool, and nothing left in the parameter and optimizer pools."
reset m
train m on d config=ds_config.json ranks=2 steps=12 zero=3 offload=cpu eval=off view=off
expect memory.offload per rank ~= 305340 within 1%
expect memory.optimizer per rank = 0
pause

say "The three runs, from the session log: the loss each reached at step 12. The run typed on the line and the run read from the file are one computation, and ZeRO-3 with offload changes where the states live, not the numbers."
sql "SELECT run_id, value AS loss_at_step_12 FROM metrics WHERE name = 'loss' AND step = 12 AND rank = 0 AND run_id > (SELECT max(id) - 3 FROM runs) ORDER BY run_id"
pause

say "Across hosts, DeepSpeed's launcher reads a hostfile (one line a host: worker-1 slots=4) and starts a rank a slot. ringside launch --hostfile hostfile [--num_nodes N] [--num_procs N] [--include worker-1:0,1@worker-2 | --exclude ...] train.ring takes the same options and runs the script with those hosts as the default of every command that starts ranks: train m on d config=ds_config.json in it runs a rank a slot on them, through mpirun with backend=mpi, or through ssh with torchrun's variables with backend=tcp (MASTER_ADDR is rank 0's host, which runs the store). From the prompt, hostfile=FILE on the train line does the same. This machine is one host; the project's tests make two out of network namespaces (tests/dist/launch/hosts_test.py)."
