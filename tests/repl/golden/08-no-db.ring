# With --no-db there is no session log: models, data and training work, the log commands say why
# they cannot.
# golden: args=--no-db
set threads=1
model m = mlp 784-32-10
data d = digits n=600
train m on d steps=2 eval=off
runs
show run 1
compare 1 2
sql "select 1"
history
replay 1
export session 1 out.ring
