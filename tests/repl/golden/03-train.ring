# Training and the session log: train (options, steps=, eval=off, checkpoint and resume), eval,
# predict, runs, show run N, compare N M, sql, history.
# golden: columns=120
set threads=1
model m = mlp 784-32-10
data d = digits n=600

# Defaults: one epoch of batches of 64 with adam, then the test accuracy.
train m on d
eval m on d
eval m on d split=train batch=100
predict m on d
predict m on d n=2 split=train seed=3

# A linear classifier trained two ways, for compare.
model a = seq flatten linear(10)
train a on d epochs=2 batch=32 opt=sgd lr=0.1 momentum=0.9 nesterov=on sched=step step_size=10 gamma=0.5
model a2 = seq flatten linear(10)
train a2 on d opt=adamw wd=0.05 sched=cosine warmup=2 min_lr=1e-4 seed=9 threads=1 eval=off
compare 4 5

# A CNN for a few steps, with a checkpoint, then resumed to the end of the epoch.
model c = seq conv(4,3) relu maxpool(2) flatten linear(10)
train c on d steps=4 ckpt=c.ckpt.safetensors
train c on d epochs=1 resume=c.ckpt.safetensors

# What the session log holds.
runs
runs n=2
show run 1
show run 2
show run 6
sql "select id, kind, model, status, steps from runs order by id"
sql "select name, count(*) as n, min(step) as from_step, max(step) as to_step from metrics where run_id = 1 and name != 'samples_per_s' group by name order by name"
sql "select kind, replace(path, rtrim(path, replace(path, '/', '')), '') as file from artifacts"
sql "select count(*) as commands, sum(status = 'ok') as ok from commands"
history n=4
